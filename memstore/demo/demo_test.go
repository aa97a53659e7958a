package demo_test

import (
	"context"
	"slices"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

func get(t *testing.T, n backend.BlockNumber) *backend.Block {
	t.Helper()
	s, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.BlockByNumber(context.Background(), n)
	if err != nil {
		t.Fatalf("block %v: %v", n, err)
	}
	return b
}

// TestNotableBlocks reads the data for what the names promise: each named
// block is the first of its kind, with the pinned hash.
func TestNotableBlocks(t *testing.T) {
	ctx := context.Background()
	s, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]uint64{}
	var sawTypes [5]bool
	for n := uint64(0); n <= demo.Head; n++ {
		b, err := s.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		note := func(name string, ok bool) {
			if _, seen := first[name]; ok && !seen {
				first[name] = n
			}
		}
		note("uncles", len(b.Uncles) > 0)
		note("london", b.BaseFeePerGas != nil)
		note("merge", b.Difficulty.IsZero())
		note("withdrawals", b.WithdrawalsRoot != nil)
		note("blob", slices.ContainsFunc(b.Transactions, func(tx *backend.Transaction) bool { return tx.Type == backend.BlobTxType }))
		note("setcode", slices.ContainsFunc(b.Transactions, func(tx *backend.Transaction) bool { return tx.Type == backend.SetCodeTxType }))
		for _, tx := range b.Transactions {
			sawTypes[tx.Type] = true
		}
	}
	want := map[string]uint64{
		"uncles": demo.FirstUncleBlock, "london": demo.LondonBlock, "merge": demo.MergeBlock,
		"withdrawals": demo.FirstWithdrawalsBlock, "blob": demo.FirstBlobBlock, "setcode": demo.FirstSetCodeBlock,
	}
	for name, n := range want {
		if got, ok := first[name]; !ok || got != n {
			t.Errorf("first %s block is %d (found %t), the constant says %d", name, got, ok, n)
		}
	}
	if !slices.Equal(sawTypes[:], []bool{true, true, true, true, true}) {
		t.Errorf("transaction types present: %v, want all five", sawTypes)
	}

	hashes := map[uint64]backend.Hash{
		demo.Head: demo.HeadHash, demo.FirstUncleBlock: demo.FirstUncleBlockHash,
		demo.FirstBlobBlock: demo.FirstBlobBlockHash, demo.FirstSetCodeBlock: demo.FirstSetCodeBlockHash,
	}
	for n, h := range hashes {
		if b, _ := s.BlockByNumber(ctx, backend.BlockNumber(n)); b.Hash != h {
			t.Errorf("block %d is %s, the variable says %s", n, b.Hash, h)
		}
	}
	u, err := s.UncleByBlockHashAndIndex(ctx, demo.FirstUncleBlockHash, 0)
	if err != nil || u.Number != demo.FirstUncleBlock-1 {
		t.Errorf("uncle 0 of block %d: %v, %v", demo.FirstUncleBlock, u, err)
	}

	side, err := s.BlockByHash(ctx, demo.SideHash)
	if err != nil {
		t.Fatalf("the side block: %v", err)
	}
	if canonical, _ := s.BlockByNumber(ctx, demo.SideNumber); side.Number != demo.SideNumber || canonical.Hash == side.Hash {
		t.Errorf("the side block is %d, canonical %t", side.Number, canonical.Hash == side.Hash)
	}
}

func TestTags(t *testing.T) {
	for tag, want := range map[backend.BlockNumber]uint64{
		backend.Latest: demo.Head, backend.Safe: demo.Safe, backend.Finalized: demo.Finalized,
		backend.Pending: demo.PendingNumber, backend.Earliest: 0,
	} {
		if got := get(t, tag); got.Number != want {
			t.Errorf("%v is block %d, want %d", tag, got.Number, want)
		}
	}
	if p := get(t, backend.Pending); !p.Pending || len(p.Transactions) == 0 {
		t.Errorf("the pending block: pending %t, %d transactions", p.Pending, len(p.Transactions))
	}
	s, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	if id, err := s.ChainID(context.Background()); err != nil || id != demo.ChainID {
		t.Errorf("ChainID = %d, %v; want %d", id, err, demo.ChainID)
	}
}

// TestStoresAreIndependent changes one store and checks that the next is
// fresh.
func TestStoresAreIndependent(t *testing.T) {
	s, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPending(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSafe(1); err != nil {
		t.Fatal(err)
	}
	if got := get(t, backend.Safe); got.Number != demo.Safe {
		t.Errorf("a new store's safe block is %d after another store changed, want %d", got.Number, demo.Safe)
	}
	if got := get(t, backend.Pending); got.Number != demo.PendingNumber {
		t.Errorf("a new store's pending block is %d", got.Number)
	}
}

// TestSendersRecover checks every transaction's from against its signature.
func TestSendersRecover(t *testing.T) {
	s, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for n := uint64(0); n <= demo.Head; n++ {
		b, _ := s.BlockByNumber(context.Background(), backend.BlockNumber(n))
		for _, tx := range b.Transactions {
			if from, err := backend.Sender(tx); err != nil || from != tx.From {
				t.Errorf("block %d tx %s: Sender = %s, %v; from %s", n, tx.Hash, from, err, tx.From)
			}
			count++
		}
	}
	if count == 0 {
		t.Error("no transactions")
	}
}
