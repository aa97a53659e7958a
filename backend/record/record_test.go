package record_test

import (
	"context"
	"errors"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/google/go-cmp/cmp"
	"github.com/holiman/uint256"
)

// sample is a block with its uncles as a store serves them.
type sample struct {
	block  *backend.Block
	uncles []*backend.Uncle
}

// samples returns the blocks of src's canonical chain, and of extra hashes.
func samples(t testing.TB, src backend.Backend, extra ...backend.Hash) []sample {
	t.Helper()
	ctx := context.Background()
	latest, err := src.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		t.Fatal(err)
	}
	var out []sample
	add := func(b *backend.Block) { out = append(out, sampleOf(t, src, b)) }
	for n := uint64(0); n <= latest.Number; n++ {
		b, err := src.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatal(err)
		}
		add(b)
	}
	for _, h := range extra {
		b, err := src.BlockByHash(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		add(b)
	}
	return out
}

// sampleOf returns b with its uncles, as src serves them.
func sampleOf(t testing.TB, src backend.Backend, b *backend.Block) sample {
	t.Helper()
	s := sample{block: b}
	for i := range b.Uncles {
		u, err := src.UncleByBlockHashAndIndex(context.Background(), b.Hash, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		s.uncles = append(s.uncles, u)
	}
	return s
}

// everyForkChain is a chain of every fork and transaction type, with
// uncles, hash-only blocks beside it.
func everyForkChain(t testing.TB) []sample {
	b := chaintest.New(chaintest.Config{Seed: 5, London: 3, Merge: 8, Shanghai: 10, Cancun: 12, Prague: 14})
	b.AddBlocks(18, func(i int, g *chaintest.BlockGen) {
		chaintest.Txs(6)(i, g)
		if n := g.Number(); n >= 2 && n < 8 {
			g.AddUncle()
		}
	})
	out := samples(t, b.Store())
	for _, s := range out[len(out)-6:] {
		h := s.block.Copy()
		h.TransactionHashes = make([]backend.Hash, len(h.Transactions))
		for i, tx := range h.Transactions {
			h.TransactionHashes[i] = tx.Hash
		}
		h.Transactions = nil
		out = append(out, sample{block: h, uncles: s.uncles})
	}
	return out
}

func demoChain(t testing.TB) []sample {
	s, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	out := samples(t, s, demo.SideHash)
	p, err := s.BlockByNumber(context.Background(), backend.Pending)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, sample{block: p})
}

func synthChain(n, txs int) []sample {
	g := synth.New(synth.Config{Seed: 9, TxsPerBlock: txs})
	out := make([]sample, n)
	for i := range out {
		out[i] = sample{block: g.Next()}
	}
	return out
}

// eachRecord calls f with every block of the sample chains (every fork and
// transaction type, uncles, hash-only blocks, the pending block, mainnet's
// shape), with its total difficulty and without, and its record. It
// returns how many blocks it gave.
func eachRecord(t *testing.T, f func(b *backend.Block, s sample, rec []byte)) int {
	var all []sample
	all = append(all, everyForkChain(t)...)
	all = append(all, demoChain(t)...)
	all = append(all, synthChain(20, 60)...)
	for _, s := range all {
		noTD := s.block.Copy()
		noTD.TotalDifficulty = nil
		for _, b := range []*backend.Block{s.block, noTD} {
			f(b, s, record.Append(nil, b, s.uncles))
		}
	}
	return len(all)
}

// TestRecordRoundTrip decodes every encoded block to the same values,
// nil and empty kept apart, for blocks of every fork and transaction type,
// uncles, hash-only blocks, the pending block, unknown total difficulties.
func TestRecordRoundTrip(t *testing.T) {
	n := eachRecord(t, func(b *backend.Block, s sample, rec []byte) {
		got, uncles, err := record.Decode(rec)
		if err != nil {
			t.Fatalf("block %d: %v", b.Number, err)
		}
		got.Pending = b.Pending
		if diff := cmp.Diff(b, got); diff != "" {
			t.Fatalf("block %d (%s) decodes differently (-want +got):\n%s", b.Number, b.Hash, diff)
		}
		if diff := cmp.Diff(s.uncles, uncles, cmp.Comparer(func(a, b []*backend.Uncle) bool {
			return cmp.Equal(a, b) || len(a) == 0 && len(b) == 0
		})); diff != "" {
			t.Fatalf("block %d's uncles decode differently (-want +got):\n%s", b.Number, diff)
		}
		part, partUncles, err := record.DecodeHeader(rec)
		if err != nil || part.Hash != b.Hash || len(partUncles) != len(s.uncles) || part.Transactions != nil {
			t.Fatalf("block %d, header and uncles only: %v", b.Number, err)
		}
		if p, err := record.ParentHash(rec); err != nil || p != b.ParentHash {
			t.Fatalf("block %d: ParentHash = %s, %v; want %s", b.Number, p, err, b.ParentHash)
		}
	})
	t.Logf("%d blocks", n)
}

// TestCorruptRecord gives the decoder every truncation of records and
// records with bytes changed: it must fail or decode, never panic; a
// block lent from a truncated record fails to be written.
func TestCorruptRecord(t *testing.T) {
	fork := everyForkChain(t)
	all := append(fork[6:7:7], synthChain(2, 4)...)
	all = append(all, fork[len(fork)-1]) // held by its transaction hashes
	for _, s := range all {
		rec := record.Append(nil, s.block, s.uncles)
		for n := range rec {
			if _, _, err := record.Decode(rec[:n]); !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("block %d cut to %d of %d bytes: %v, want ErrCorrupt", s.block.Number, n, len(rec), err)
			}
			if _, err := lentJSON(rec[:n], true); !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("block %d cut to %d of %d bytes, split: %v, want ErrCorrupt", s.block.Number, n, len(rec), err)
			}
		}
		for i := range rec {
			bad := append([]byte(nil), rec...)
			bad[i] ^= 0xa5
			record.Decode(bad)
			lentJSON(bad, true)
			bad[i] = 0xff
			record.Decode(bad)
			lentJSON(bad, true)
		}
	}
}

// FuzzDecode gives the decoders arbitrary bytes, seeded with real records
// and transactions: they must decode them or fail with ErrCorrupt, never
// panic, and what Decode decodes must encode back to the same bytes. A
// block split from a record (Split) must be written as Decode's is, and
// fail where Decode fails.
func FuzzDecode(f *testing.F) {
	for _, s := range synthChain(3, 5) {
		f.Add(record.Append(nil, s.block, s.uncles))
		f.Add(record.AppendTransactions(nil, s.block.Transactions))
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		r := record.Transactions(rec).Reader(uint256.NewInt(7))
		var tx backend.Transaction
		for {
			more, err := r.DecodeNext(&tx)
			if err != nil && !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("the reader's error is not ErrCorrupt: %v", err)
			}
			if err != nil || !more {
				break
			}
		}

		b, uncles, err := record.Decode(rec)
		for _, fullTx := range []bool{true, false} {
			lent, lerr := lentJSON(rec, fullTx)
			switch {
			case err != nil && lerr == nil:
				t.Fatalf("Decode fails (%v), a block split from the record is written", err)
			case lerr != nil && !errors.Is(lerr, record.ErrCorrupt):
				t.Fatalf("split: an error that is not ErrCorrupt: %v", lerr)
			case err == nil && (lerr != nil || string(lent) != string(b.AppendJSON(nil, fullTx))):
				t.Fatalf("split (fullTx %v): %v\n got  %s\n want %s", fullTx, lerr, lent, b.AppendJSON(nil, fullTx))
			}
		}
		if err != nil {
			if !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("an error that is not ErrCorrupt: %v", err)
			}
			return
		}
		if again := record.Append(nil, b, uncles); string(again) != string(rec) {
			t.Skip("a record that decodes but is not in canonical form") // e.g. a longer uvarint
		}
	})
}
