package dumpcheck

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

var errOther = errors.New("another chain")

// TestCheck gives each rule a block: a store holding blocks 2 to 4 and 6
// to 8 of a chain is checked against that chain's blocks and a rival
// chain's.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	ours := chaintest.New(chaintest.Config{Seed: 1})
	ours.AddBlocks(10, chaintest.Txs(1))
	theirs := chaintest.New(chaintest.Config{Seed: 2})
	theirs.AddBlocks(10, chaintest.Txs(1))
	sibling := ours.Fork(1)
	sibling.AddBlocks(1, chaintest.Txs(2)) // another block 2, of block 1
	store := memstore.New()
	for _, n := range []uint64{2, 3, 4, 6, 7, 8} {
		if err := store.AddBlock(ours.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		block *backend.Block
		ok    bool
	}{
		{"the store's own block", ours.Block(3), true},
		{"the child of the store's latest", ours.Block(9), true},
		{"in the hole, the child of the block below", ours.Block(5), true},
		{"the parent of the store's first", ours.Block(1), true},
		{"the store's first replaced from the same parent", sibling.Block(2), true},
		{"another block at a number the store holds", theirs.Block(3), false},
		{"in the hole, another chain's", theirs.Block(5), false},
		{"below the first, another chain's", theirs.Block(1), false},
		{"next to nothing, below", ours.Block(0), false},
		{"next to nothing, above", ours.Block(10), false},
	} {
		err := (&Checker{OtherChain: errOther}).Check(ctx, store, c.block)
		if c.ok != (err == nil) || err != nil && !errors.Is(err, errOther) {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}

	// Below the first block and not its parent, even the store's own
	// chain's block is refused, and the error says why and what to do.
	err := (&Checker{OtherChain: errOther}).Check(ctx, store, ours.Block(0))
	if want := "below the store's first block, 2, and not its parent"; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "new store") {
		t.Errorf("block 0 into a store whose first is block 2: %v, want it to say it is %s, and to import into a new store", err, want)
	}

	// Once a block is taken, the next of the dump follows it, whatever
	// the store holds at its number: the dump reorganises it.
	var ch Checker
	ch.OtherChain = errOther
	if err := ch.Check(ctx, store, ours.Block(8)); err != nil {
		t.Fatal(err)
	}
	ch.Took(ours.Block(8))
	if !ch.Follows(ours.Block(9)) || ch.Follows(theirs.Block(9)) {
		t.Error("Follows: the next block of the dump, or another chain's")
	}

	// Into an empty store, anything.
	var empty Checker
	if err := empty.Check(ctx, memstore.New(), theirs.Block(5)); err != nil || !empty.Follows(ours.Block(7)) {
		t.Errorf("an empty store: %v", err)
	}
}

// TestCheckNumberPastInt64 checks a block numbered 2^64-1 whose parent is
// the store's head, block 3: its number minus one, read as a BlockNumber,
// was the tag latest, and the Checker took it for the child of the
// store's block below it.
func TestCheckNumberPastInt64(t *testing.T) {
	ours := chaintest.New(chaintest.Config{Seed: 1})
	ours.AddBlocks(3, chaintest.Txs(1))
	store := memstore.New()
	for n := uint64(0); n <= 3; n++ {
		if err := store.AddBlock(ours.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	b := &backend.Block{Header: backend.Header{Number: math.MaxUint64, ParentHash: ours.Block(3).Hash}}
	c := Checker{OtherChain: errOther}
	if err := c.Check(context.Background(), store, b); err == nil {
		t.Errorf("block %d with the head's hash as parent passed: no block can have its number", b.Number)
	}
}
