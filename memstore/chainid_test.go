package memstore_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
)

// A chain's id is what its EIP-155 and typed transactions are signed for;
// the store learns it from the first such transaction and holds every later
// one to it.
func TestChainIDFromTransactions(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	g := add(t, s, genesis())
	if _, err := s.ChainID(ctx); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("ChainID of a chain without transactions = %v, want ErrNotFound", err)
	}

	// v = 27: no replay protection, no chain id.
	b1 := childOf(g, "b1")
	b1.Transactions = []*backend.Transaction{legacyTx(0, 27)}
	b1 = add(t, s, b1)
	if _, err := s.ChainID(ctx); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("ChainID after an unprotected transaction = %v, want ErrNotFound", err)
	}

	// v = 2*1337+35: chain 1337.
	b2 := childOf(b1, "b2")
	b2.Transactions = []*backend.Transaction{legacyTx(1, 2*1337+35)}
	b2 = add(t, s, b2)
	if id, err := s.ChainID(ctx); id != 1337 || err != nil {
		t.Fatalf("ChainID = %d, %v; want 1337", id, err)
	}

	// A transaction for chain 1 does not belong here.
	other := childOf(b2, "other chain")
	other.Transactions = []*backend.Transaction{legacyTx(2, 2*1+35)}
	err := s.AddBlock(other)
	var mismatch *backend.MismatchError
	if !errors.As(err, &mismatch) || mismatch.Field != "chainId" {
		t.Fatalf("AddBlock of a transaction for chain 1 = %v, want a chainId mismatch", err)
	}
	if s.Len() != 3 {
		t.Errorf("Len = %d after a refused block, want 3", s.Len())
	}
	if err := s.SetChainID(1); err == nil {
		t.Errorf("SetChainID(1) on a chain of 1337 succeeded")
	}
	if err := s.SetChainID(1337); err != nil {
		t.Errorf("SetChainID(1337) on a chain of 1337: %v", err)
	}

	// Two transactions of one block that disagree.
	mixed := childOf(g, "mixed")
	mixed.Transactions = []*backend.Transaction{legacyTx(0, 2*1337+35), legacyTx(1, 2*5+35)}
	if err := memstore.New().AddBlock(mixed); !errors.As(err, &mismatch) || mismatch.Field != "chainId" {
		t.Errorf("a block with transactions for chains 1337 and 5 = %v, want a chainId mismatch", err)
	}

	// The pending block is held to it too.
	pending := childOf(b2, "pending")
	pending.Transactions = []*backend.Transaction{legacyTx(2, 2*1+35)}
	if err := s.SetPending(pending); !errors.As(err, &mismatch) {
		t.Errorf("SetPending with a transaction for chain 1 = %v, want a chainId mismatch", err)
	}

	// A dump carries the transactions, and with them the chain id.
	var dump bytes.Buffer
	if err := s.Save(&dump); err != nil {
		t.Fatal(err)
	}
	loaded, err := memstore.Load(&dump)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := loaded.ChainID(ctx); id != 1337 || err != nil {
		t.Errorf("ChainID after Save and Load = %d, %v; want 1337", id, err)
	}
}

// SetChainID gives the id of a chain whose transactions do not tell it, and
// binds the transactions added afterwards.
func TestSetChainID(t *testing.T) {
	s := memstore.New()
	if err := s.SetChainID(5); err != nil {
		t.Fatal(err)
	}
	if id, err := s.ChainID(t.Context()); id != 5 || err != nil {
		t.Fatalf("ChainID = %d, %v; want 5", id, err)
	}
	g := add(t, s, genesis())
	b := childOf(g, "chain 7")
	b.Transactions = []*backend.Transaction{legacyTx(0, 2*7+35)}
	var mismatch *backend.MismatchError
	if err := s.AddBlock(b); !errors.As(err, &mismatch) || mismatch.Field != "chainId" {
		t.Errorf("AddBlock of a transaction for chain 7 on chain 5 = %v, want a chainId mismatch", err)
	}
	if err := s.AddSideBlock(b); !errors.As(err, &mismatch) {
		t.Errorf("AddSideBlock of a transaction for chain 7 on chain 5 = %v, want a chainId mismatch", err)
	}
}

// An id set explicitly can be set again while no stored transaction binds
// it; a pending block's transactions are checked but bind nothing.
func TestChainIDIsBoundOnlyByStoredTransactions(t *testing.T) {
	s := memstore.New()
	if err := s.SetChainID(1); err != nil {
		t.Fatal(err)
	}
	if err := s.SetChainID(2); err != nil {
		t.Errorf("changing an id no transaction binds: %v", err)
	}
	g := add(t, memstore.New(), genesis()) // its hash, for a child
	fresh := memstore.New()
	add(t, fresh, genesis())
	pending := childOf(g, "pending")
	pending.Transactions = []*backend.Transaction{legacyTx(0, 2*5+35)}
	if err := fresh.SetPending(pending); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.ChainID(t.Context()); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("ChainID after a pending block for chain 5 = %v, want ErrNotFound: pending transactions bind nothing", err)
	}
	if err := fresh.SetPending(nil); err != nil {
		t.Fatal(err)
	}
	if err := fresh.SetChainID(1); err != nil {
		t.Errorf("SetChainID(1) after the pending block left: %v", err)
	}
}
