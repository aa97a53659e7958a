package pgstore

import (
	"context"
	"errors"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/holiman/uint256"
)

// chains returns stores holding every kind of block the codec must keep:
// the demo chain (executed by go-ethereum) and a built chain crossing
// every fork with uncles.
func chains(t *testing.T) []*memstore.Store {
	t.Helper()
	d, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	b := chaintest.New(chaintest.Config{Seed: 3, London: 3, Merge: 8, Shanghai: 10, Cancun: 12, Prague: 14})
	b.AddBlocks(16, func(i int, g *chaintest.BlockGen) {
		chaintest.Txs(6)(i, g)
		if g.Number() >= 2 && g.Number() < 8 {
			g.AddUncle()
		}
	})
	return []*memstore.Store{d, b.Store()}
}

// TestCodecRoundTrip encodes and decodes every block and uncle as pgstore
// stores them (block records without uncles, uncles as the records of
// their headers), and compares what they serve.
func TestCodecRoundTrip(t *testing.T) {
	ctx := context.Background()
	var blocks, uncles int
	for _, s := range chains(t) {
		head, _ := s.BlockByNumber(ctx, backend.Latest)
		for n := uint64(0); n <= head.Number; n++ {
			b, _ := s.BlockByNumber(ctx, backend.BlockNumber(n))
			got, err := decodeBlock(encodeBlock(nil, b, uncleHeaders(t, s, b)))
			if err != nil {
				t.Fatalf("block %d: %v", n, err)
			}
			got.TotalDifficulty = b.TotalDifficulty
			for _, full := range []bool{true, false} {
				if g, w := got.AppendJSON(nil, full), b.AppendJSON(nil, full); string(g) != string(w) {
					t.Fatalf("block %d (fullTx %v) differs:\n got  %s\n want %s", n, full, g, w)
				}
			}
			blocks++
			for i := range b.Uncles {
				u, _ := s.UncleByBlockHashAndIndex(ctx, b.Hash, uint64(i))
				gu, err := decodeUncle(encodeUncle(nil, u))
				if err != nil {
					t.Fatal(err)
				}
				gu.TotalDifficulty = u.TotalDifficulty
				if g, w := gu.AppendJSON(nil), u.AppendJSON(nil); string(g) != string(w) {
					t.Fatalf("uncle %d of block %d differs:\n got  %s\n want %s", i, n, g, w)
				}
				uncles++
			}
		}
	}
	t.Logf("%d blocks and %d uncles", blocks, uncles)
}

// TestCodecHashOnly keeps a block known by its transaction hashes.
func TestCodecHashOnly(t *testing.T) {
	d, _ := demo.Store()
	b, _ := d.BlockByNumber(context.Background(), demo.FirstBlobBlock)
	h := b.Copy()
	h.TransactionHashes, h.Transactions = backend.TransactionHashes(h.Transactions), nil
	got, err := decodeBlock(encodeBlock(nil, h, nil))
	if err != nil {
		t.Fatal(err)
	}
	got.TotalDifficulty = h.TotalDifficulty
	if got.HasTransactionBodies() || string(got.AppendJSON(nil, false)) != string(h.AppendJSON(nil, false)) {
		t.Errorf("a hash-only block came back as\n %s", got.AppendJSON(nil, true))
	}
}

// TestCodecCorrupt decodes every truncation and every byte altered of a
// few records: an error, never a panic.
func TestCodecCorrupt(t *testing.T) {
	d, _ := demo.Store()
	for _, n := range []backend.BlockNumber{demo.FirstUncleBlock, demo.FirstBlobBlock, demo.FirstSetCodeBlock} {
		b, _ := d.BlockByNumber(context.Background(), n)
		enc := encodeBlock(nil, b, uncleHeaders(t, d, b))
		for i := range enc {
			if _, err := decodeBlock(enc[:i]); !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("block %d cut at %d of %d bytes: %v, want record.ErrCorrupt", n, i, len(enc), err)
			}
		}
		if _, err := decodeBlock(append(enc, 0)); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("a trailing byte: %v", err)
		}
		bad := append([]byte{}, enc...)
		bad[0] = 99
		if _, err := decodeBlock(bad); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("an unknown version: %v", err)
		}
		for i := range enc {
			flipped := append([]byte{}, enc...)
			flipped[i] ^= 0xff
			_, _ = decodeBlock(flipped) // must not panic
		}
	}
}

// TestTD round-trips total difficulties, NULL included.
func TestTD(t *testing.T) {
	for _, v := range []*uint256.Int{nil, uint256.NewInt(0), uint256.NewInt(1), uint256.NewInt(0x20000), new(uint256.Int).SetAllOne()} {
		got, err := decodeTD(encodeTD(v))
		if err != nil || (got == nil) != (v == nil) || (v != nil && !got.Eq(v)) {
			t.Errorf("%v came back as %v, %v", v, got, err)
		}
	}
}

// uncleHeaders returns the uncles of a block of s.
func uncleHeaders(t *testing.T, s *memstore.Store, b *backend.Block) []*backend.Uncle {
	t.Helper()
	us := make([]*backend.Uncle, len(b.Uncles))
	for i := range us {
		u, err := s.UncleByBlockHashAndIndex(context.Background(), b.Hash, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		us[i] = u
	}
	return us
}
