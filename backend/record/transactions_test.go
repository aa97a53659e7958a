package record_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/blockrpc/blockrpc/internal/blocksample"
	"github.com/google/go-cmp/cmp"
)

// TestTransactionsReader reads every block's transactions one at a time
// into the same value, and finds each as it went in; the lent block they
// make is written as the block itself is.
func TestTransactionsReader(t *testing.T) {
	var all []blocksample.Sample
	all = append(all, everyForkChain(t)...)
	all = append(all, blocksample.Demo(t)...)
	all = append(all, blocksample.Synth(10, 120)...)
	for _, s := range all {
		b := s.Block
		if b.Transactions == nil {
			continue
		}
		enc := record.Transactions(record.AppendTransactions(nil, b.Transactions))
		r := enc.Reader(b.BaseFeePerGas)
		var tx backend.Transaction
		for i, want := range b.Transactions {
			more, err := r.DecodeNext(&tx)
			if err != nil || !more {
				t.Fatalf("block %d: transaction %d: %v, %v", b.Number, i, more, err)
			}
			if diff := cmp.Diff(want, &tx); diff != "" {
				t.Fatalf("block %d: transaction %d reads differently (-want +got):\n%s", b.Number, i, diff)
			}
		}
		if more, err := r.DecodeNext(&tx); more || err != nil {
			t.Fatalf("block %d: after the last transaction: %v, %v", b.Number, more, err)
		}

		lent := *b
		lent.Transactions = nil
		for _, fullTx := range []bool{true, false} {
			got, err := lent.AppendLentJSON(nil, fullTx, enc.Reader(b.BaseFeePerGas))
			if want := b.AppendJSON(nil, fullTx); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("block %d lent (fullTx %v): %v\n got  %s\n want %s", b.Number, fullTx, err, got, want)
			}
		}
	}
}

// TestTransactionsCorrupt cuts and alters an encoding: the reader reports
// ErrCorrupt, and never panics.
func TestTransactionsCorrupt(t *testing.T) {
	b := blocksample.Synth(2, 40)[1].Block
	if len(b.Transactions) == 0 {
		t.Fatal("the sample block has no transactions")
	}
	enc := record.AppendTransactions(nil, b.Transactions)
	read := func(enc []byte) error {
		r := record.Transactions(enc).Reader(b.BaseFeePerGas)
		var tx backend.Transaction
		for {
			more, err := r.DecodeNext(&tx)
			if err != nil || !more {
				return err
			}
		}
	}
	for _, n := range []int{1, 2, len(enc) / 3, len(enc) - 1} {
		if err := read(enc[:n]); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("cut to %d of %d bytes: %v, want ErrCorrupt", n, len(enc), err)
		}
	}
	if err := read(append(enc[:len(enc):len(enc)], 0)); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("with a byte past the end: %v, want ErrCorrupt", err)
	}
	if _, err := record.Transactions(enc[:len(enc)/2]).Decode(b.BaseFeePerGas); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("Decode of half: %v, want ErrCorrupt", err)
	}
}

// lentJSON writes a record's block as a store that lends it from the
// record does: its front split off, its transactions read one at a time.
func lentJSON(rec []byte, fullTx bool) ([]byte, error) {
	b, txs, err := record.Split(rec)
	if err != nil {
		return nil, err
	}
	if txs == nil {
		return b.AppendLentJSON(nil, fullTx, nil)
	}
	return b.AppendLentJSON(nil, fullTx, txs.Reader(b.BaseFeePerGas))
}

// TestSplitTransactionHashChanged changes a byte of a transaction's own
// hash in a record that keeps the transactions' hashes beside them, as
// pebblestore writes it: Decode refuses the record, and a block split
// from it is not written with details either, a transaction carrying a
// hash that is not the one the block names for it.
func TestSplitTransactionHashChanged(t *testing.T) {
	for _, s := range blocksample.Synth(3, 5) {
		if len(s.Block.Transactions) == 0 {
			continue
		}
		b := s.Block.Copy()
		b.TransactionHashes = backend.TransactionHashes(b.Transactions)
		rec := record.Append(nil, b, s.Uncles)
		last := b.Transactions[len(b.Transactions)-1].Hash
		at := bytes.LastIndex(rec, last[:]) // the transaction's, after the list
		if at < 0 || at == bytes.Index(rec, last[:]) {
			t.Fatalf("block %d: the last transaction's hash is not twice in the record", b.Number)
		}
		rec[at+16] ^= 1
		if _, _, err := record.Decode(rec); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("block %d: Decode: %v, want ErrCorrupt", b.Number, err)
		}
		if _, err := lentJSON(rec, true); !errors.As(err, new(*backend.MismatchError)) {
			t.Errorf("block %d split and written with details: %v, want a mismatch", b.Number, err)
		}
		if got, err := lentJSON(rec, false); err != nil || !bytes.Equal(got, b.AppendJSON(nil, false)) {
			t.Errorf("block %d split and written without details, from the hashes: %v", b.Number, err)
		}
	}
}

// TestSplit writes every block of TestRecordRoundTrip lent from its
// record as Decode's block is written, in both forms, and finds the front
// whole: only the transactions are left encoded, with their hashes when
// the record holds them. One Splitter splits them all as Split does,
// whatever the block before it left in its memory.
func TestSplit(t *testing.T) {
	var sp record.Splitter
	n := eachRecord(t, func(b *backend.Block, _ blocksample.Sample, rec []byte, hashes bool) {
		dec, _, err := record.Decode(rec)
		if err != nil {
			t.Fatalf("block %d: %v", b.Number, err)
		}
		for _, fullTx := range []bool{true, false} {
			got, err := lentJSON(rec, fullTx)
			if want := dec.AppendJSON(nil, fullTx); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("block %d (%s) split (fullTx %v): %v\n got  %s\n want %s", b.Number, b.Hash, fullTx, err, got, want)
			}
		}
		front, txs, err := record.Split(rec)
		if err != nil {
			t.Fatal(err)
		}
		if (txs == nil) != (b.Transactions == nil) || front.Transactions != nil {
			t.Fatalf("block %d: split into %d bytes of transactions and %d decoded; the block has %d", b.Number, len(txs), len(front.Transactions), len(b.Transactions))
		}
		want := dec.Copy()
		if txs != nil {
			want.Transactions, want.TransactionHashes = nil, nil
			if hashes {
				want.TransactionHashes = withHashes(dec).TransactionHashes
			}
		}
		if diff := cmp.Diff(want, front); diff != "" {
			t.Fatalf("block %d's front splits differently (-want +got):\n%s", b.Number, diff)
		}
		reused, reusedTxs, err := sp.Split(rec)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(reusedTxs, txs) || (reusedTxs == nil) != (txs == nil) {
			t.Fatalf("block %d: a Splitter leaves %d bytes of transactions, Split %d", b.Number, len(reusedTxs), len(txs))
		}
		if diff := cmp.Diff(want, reused); diff != "" {
			t.Fatalf("block %d's front splits differently with a Splitter (-want +got):\n%s", b.Number, diff)
		}
	})
	t.Logf("%d blocks", n)
}

// TestSplitterAllocates finds that a Splitter splits the record of a block
// of the latest fork, with withdrawals and transactions, into the memory
// it kept from the record before: a store lends such a block at every
// read.
func TestSplitterAllocates(t *testing.T) {
	block := blocksample.Synth(2, 60)[1].Block
	if len(block.Withdrawals) == 0 || len(block.Transactions) == 0 || block.RequestsHash == nil {
		t.Fatalf("block %d: %d withdrawals, %d transactions, requests hash %v: not a block of the latest fork", block.Number, len(block.Withdrawals), len(block.Transactions), block.RequestsHash)
	}
	rec := record.Append(nil, block, nil)
	var sp record.Splitter
	split := func() {
		if _, _, err := sp.Split(rec); err != nil {
			t.Fatal(err)
		}
	}
	split()
	if n := testing.AllocsPerRun(100, split); n != 0 {
		t.Errorf("%.0f allocations a split, want 0", n)
	}
}

// BenchmarkDecodeNext reads the transactions of a mainnet-shaped block
// (synthetic: 180 transactions of every type) one at a time into one
// value, as a lent block is rendered.
func BenchmarkDecodeNext(b *testing.B) {
	block := blocksample.Synth(2, 180)[1].Block
	enc := record.Transactions(record.AppendTransactions(nil, block.Transactions))
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	var tx backend.Transaction
	for b.Loop() {
		r := enc.Reader(block.BaseFeePerGas)
		for {
			more, err := r.DecodeNext(&tx)
			if err != nil {
				b.Fatal(err)
			}
			if !more {
				break
			}
		}
	}
}

// BenchmarkSplit splits the record of a mainnet-shaped block (synthetic:
// 180 transactions of every type, withdrawals) into a new block each
// time, and into a Splitter's memory, as a store lends a block.
func BenchmarkSplit(b *testing.B) {
	rec := record.Append(nil, blocksample.Synth(2, 180)[1].Block, nil)
	b.Run("Split", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := record.Split(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Splitter", func(b *testing.B) {
		b.ReportAllocs()
		var sp record.Splitter
		for b.Loop() {
			if _, _, err := sp.Split(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
