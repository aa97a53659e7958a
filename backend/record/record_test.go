package record_test

import (
	"errors"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/blockrpc/blockrpc/internal/blocksample"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/google/go-cmp/cmp"
	"github.com/holiman/uint256"
)

// everyForkChain is a chain of every fork and transaction type, with
// uncles, hash-only blocks beside it.
func everyForkChain(t testing.TB) []blocksample.Sample {
	b := chaintest.New(chaintest.Config{Seed: 5, London: 3, Merge: 8, Shanghai: 10, Cancun: 12, Prague: 14})
	b.AddBlocks(18, func(i int, g *chaintest.BlockGen) {
		chaintest.Txs(6)(i, g)
		if n := g.Number(); n >= 2 && n < 8 {
			g.AddUncle()
		}
	})
	out := blocksample.FromChain(t, b.Store())
	for _, s := range out[len(out)-6:] {
		h := withHashes(s.Block.Copy())
		h.Transactions = nil
		out = append(out, blocksample.Sample{Block: h, Uncles: s.Uncles})
	}
	return out
}

// eachRecord calls f with every block of the sample chains (every fork and
// transaction type, uncles, hash-only blocks, the pending block, mainnet's
// shape), with its total difficulty and without, and its record; a block
// with transactions comes again with a record that also holds their hashes
// (hashes true), which a store that lends blocks writes. It returns how
// many blocks it gave.
func eachRecord(t *testing.T, f func(b *backend.Block, s blocksample.Sample, rec []byte, hashes bool)) int {
	var all []blocksample.Sample
	all = append(all, everyForkChain(t)...)
	all = append(all, blocksample.Demo(t)...)
	all = append(all, blocksample.Synth(20, 60)...)
	for _, s := range all {
		noTD := s.Block.Copy()
		noTD.TotalDifficulty = nil
		for _, b := range []*backend.Block{s.Block, noTD} {
			f(b, s, record.Append(nil, b, s.Uncles), false)
			if len(b.Transactions) > 0 {
				f(b, s, record.Append(nil, withHashes(b), s.Uncles), true)
			}
		}
	}
	return len(all)
}

// withHashes returns b with the hashes of its transactions beside them.
func withHashes(b *backend.Block) *backend.Block {
	c := *b
	c.TransactionHashes = backend.TransactionHashes(b.Transactions)
	return &c
}

// TestRecordRoundTrip decodes every encoded block to the same values,
// nil and empty kept apart, for blocks of every fork and transaction type,
// uncles, hash-only blocks, the pending block, unknown total difficulties.
func TestRecordRoundTrip(t *testing.T) {
	n := eachRecord(t, func(b *backend.Block, s blocksample.Sample, rec []byte, _ bool) {
		got, uncles, err := record.Decode(rec)
		if err != nil {
			t.Fatalf("block %d: %v", b.Number, err)
		}
		got.Pending = b.Pending
		if diff := cmp.Diff(b, got); diff != "" {
			t.Fatalf("block %d (%s) decodes differently (-want +got):\n%s", b.Number, b.Hash, diff)
		}
		if diff := cmp.Diff(s.Uncles, uncles, cmp.Comparer(func(a, b []*backend.Uncle) bool {
			return cmp.Equal(a, b) || len(a) == 0 && len(b) == 0
		})); diff != "" {
			t.Fatalf("block %d's uncles decode differently (-want +got):\n%s", b.Number, diff)
		}
		part, partUncles, err := record.DecodeHeader(rec)
		if err != nil || part.Hash != b.Hash || len(partUncles) != len(s.Uncles) || part.Transactions != nil {
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
	all := append(fork[6:7:7], blocksample.Synth(2, 4)...)
	all = append(all, fork[len(fork)-1]) // held by its transaction hashes
	for _, s := range all {
		rec := record.Append(nil, s.Block, s.Uncles)
		for n := range rec {
			if _, _, err := record.Decode(rec[:n]); !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("block %d cut to %d of %d bytes: %v, want ErrCorrupt", s.Block.Number, n, len(rec), err)
			}
			if _, err := lentJSON(rec[:n], true); !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("block %d cut to %d of %d bytes, split: %v, want ErrCorrupt", s.Block.Number, n, len(rec), err)
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

// TestHashesMiscounted refuses a record that holds more or fewer
// transaction hashes than transactions, which no sealed block gives: lent,
// the block would be answered without details with the wrong list.
func TestHashesMiscounted(t *testing.T) {
	b := blocksample.Synth(2, 8)[1].Block
	if len(b.Transactions) < 2 {
		t.Fatalf("a sample block of %d transactions", len(b.Transactions))
	}
	hashes := backend.TransactionHashes(b.Transactions)
	for _, miscounted := range [][]backend.Hash{{}, hashes[1:], append(hashes, backend.Hash{1})} {
		c := *b
		c.TransactionHashes = miscounted
		rec := record.Append(nil, &c, nil)
		if _, _, err := record.Decode(rec); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%d hashes for %d transactions: Decode gives %v, want ErrCorrupt", len(miscounted), len(b.Transactions), err)
		}
		if _, _, err := record.Split(rec); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%d hashes for %d transactions: Split gives %v, want ErrCorrupt", len(miscounted), len(b.Transactions), err)
		}
	}
}

// FuzzDecode gives the decoders arbitrary bytes, seeded with real records
// and transactions: they must decode them or fail with ErrCorrupt, never
// panic, and what Decode decodes must encode back to the same bytes. A
// block split from a record (Split) must be written as Decode's is, and
// fail where Decode fails, but for an answer without details written from
// the hashes the record holds.
func FuzzDecode(f *testing.F) {
	for _, s := range blocksample.Synth(3, 5) {
		f.Add(record.Append(nil, s.Block, s.Uncles))
		f.Add(record.AppendTransactions(nil, s.Block.Transactions))
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
		front, _, serr := record.Split(rec)
		for _, fullTx := range []bool{true, false} {
			lent, lerr := lentJSON(rec, fullTx)
			// Without details, a block whose record holds its
			// transactions' hashes is written from them, its
			// transactions unread: their corruption shows only with
			// details, and the hashes are the record's.
			fromHashes := !fullTx && serr == nil && front.TransactionHashes != nil
			want := b
			if err == nil && fromHashes {
				c := *b
				c.Transactions, c.TransactionHashes = nil, front.TransactionHashes
				want = &c
			}
			switch {
			case err != nil && lerr == nil && !fromHashes:
				t.Fatalf("Decode fails (%v), a block split from the record is written", err)
			case lerr != nil && !errors.Is(lerr, record.ErrCorrupt):
				t.Fatalf("split: an error that is not ErrCorrupt: %v", lerr)
			case err == nil && (lerr != nil || string(lent) != string(want.AppendJSON(nil, fullTx))):
				t.Fatalf("split (fullTx %v): %v\n got  %s\n want %s", fullTx, lerr, lent, want.AppendJSON(nil, fullTx))
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
