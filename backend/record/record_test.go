package record_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
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

// txOffset returns where transaction i of txs begins in rec, a record of
// their block (Append), whose end they are.
func txOffset(rec []byte, txs []*backend.Transaction, i int) int {
	rest := record.AppendTransactions(nil, txs[i:])
	countLen := len(binary.AppendUvarint(nil, uint64(len(txs)-i)+1))
	return len(rec) - (len(rest) - countLen)
}

// sampleWith returns a sample block with a transaction of type typ, and
// that transaction's index.
func sampleWith(t *testing.T, typ byte) (*backend.Block, int) {
	for _, s := range append(blocksample.Synth(3, 40), everyForkChain(t)...) {
		for i, tx := range s.Block.Transactions {
			if tx.Type == typ {
				return s.Block, i
			}
		}
	}
	t.Fatalf("no sample transaction of type %d", typ)
	return nil, 0
}

// TestChangedTransaction changes one byte of a transaction in a record
// into one that makes it a transaction no store holds: another type,
// without the fields that type must have or unknown; a flag that means
// nothing; a legacy v below 35 but for 27 and 28. Decode, and the reader a
// lent block's transactions are written from, refuse the record; a record
// whose hashes, kept for a lent block, are not its transactions' is
// refused by Decode.
func TestChangedTransaction(t *testing.T) {
	corrupt := func(what string, rec []byte, txs []byte, baseFee *uint256.Int) {
		t.Helper()
		if _, _, err := record.Decode(rec); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%s: Decode gives %v, want ErrCorrupt", what, err)
		}
		if txs == nil {
			return
		}
		r := record.Transactions(txs).Reader(baseFee)
		var tx backend.Transaction
		for {
			more, err := r.DecodeNext(&tx)
			if !more || err != nil {
				if !errors.Is(err, record.ErrCorrupt) {
					t.Errorf("%s: the reader gives %v, want ErrCorrupt", what, err)
				}
				break
			}
		}
	}
	b, i := sampleWith(t, backend.DynamicFeeTxType)
	rec := record.Append(nil, b, nil)
	txs := rec[len(rec)-len(record.AppendTransactions(nil, b.Transactions)):] // what a lent block's are read from
	off := txOffset(rec, b.Transactions, i)
	if rec[off] != backend.DynamicFeeTxType {
		t.Fatalf("offset %d holds %#x, not the type byte", off, rec[off])
	}
	change := func(at int, to byte) ([]byte, []byte) {
		bad := slices.Clone(rec)
		bad[at] = to
		return bad, bad[len(rec)-len(txs):]
	}
	for _, typ := range []byte{backend.BlobTxType, backend.SetCodeTxType, 0x05, 0x7f, 0xff} {
		bad, badTxs := change(off, typ)
		corrupt(fmt.Sprintf("type byte %d -> %#x", backend.DynamicFeeTxType, typ), bad, badTxs, b.BaseFeePerGas)
	}
	bad, badTxs := change(off+1, rec[off+1]|0x80)
	corrupt("a flag that means nothing", bad, badTxs, b.BaseFeePerGas)

	lb, li := sampleWith(t, backend.LegacyTxType)
	tx := lb.Transactions[li]
	if !tx.V.IsUint64() || tx.V.Uint64() < 35 || tx.V.Uint64() > 255 {
		t.Fatalf("a legacy sample transaction with v %s, want one byte of 35 or more", tx.V.Hex())
	}
	lrec := record.Append(nil, lb, nil)
	end := len(lrec)
	if li+1 < len(lb.Transactions) {
		end = txOffset(lrec, lb.Transactions, li+1)
	}
	u256Len := func(z *uint256.Int) int { return 1 + (z.BitLen()+7)/8 }
	vOff := end - 32 - 20 - u256Len(&tx.S) - u256Len(&tx.R) - u256Len(&tx.V)
	if lrec[vOff] != 1 || lrec[vOff+1] != byte(tx.V.Uint64()) {
		t.Fatalf("offset %d holds % x, not v", vOff, lrec[vOff:vOff+2])
	}
	for _, v := range []byte{0, 5, 29, 34} {
		bad := slices.Clone(lrec)
		bad[vOff+1] = v
		corrupt(fmt.Sprintf("legacy v %d -> %d", tx.V.Uint64(), v), bad, nil, nil)
	}

	c := *b
	c.TransactionHashes = backend.TransactionHashes(b.Transactions)
	hrec := record.Append(nil, &c, nil)
	hashesEnd := len(hrec) - len(record.AppendTransactions(nil, b.Transactions))
	hbad := slices.Clone(hrec)
	hbad[hashesEnd-1] ^= 1 // the last byte of the last hash
	corrupt("a kept transaction hash changed", hbad, nil, nil)
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
// fail where Decode fails (ErrCorrupt, or a transaction whose hash is not
// the one the record keeps for it), but for an answer without details
// written from the hashes the record holds.
func FuzzDecode(f *testing.F) {
	for _, s := range blocksample.Synth(3, 5) {
		f.Add(record.Append(nil, s.Block, s.Uncles))
		f.Add(record.AppendTransactions(nil, s.Block.Transactions))
		// As pebblestore writes it, the hashes beside the transactions.
		kept := s.Block.Copy()
		kept.TransactionHashes = backend.TransactionHashes(kept.Transactions)
		f.Add(record.Append(nil, kept, s.Uncles))
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
			case lerr != nil && !errors.Is(lerr, record.ErrCorrupt) && !errors.As(lerr, new(*backend.MismatchError)):
				// A mismatch: a transaction's hash is not the one
				// the record keeps for it (Block.AppendLentJSON).
				t.Fatalf("split: an error that is neither ErrCorrupt nor a mismatch: %v", lerr)
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
