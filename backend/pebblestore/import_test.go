package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// TestImportDumpOfAnotherChainsTail imports the tail of another chain of
// the same chain id, a dump that does not start at block 0: no genesis to
// refuse, yet nothing of it may be written, where memstore.Loader alone
// would write it above the store's chain.
func TestImportDumpOfAnotherChainsTail(t *testing.T) {
	a := chaintest.New(chaintest.Config{Seed: 1})
	a.AddBlocks(5, chaintest.Txs(1))
	other := chaintest.New(chaintest.Config{Seed: 2})
	other.AddBlocks(9, chaintest.Txs(1))
	lines := strings.SplitAfter(string(dump(t, other.Store())), "\n")
	for _, tail := range []string{strings.Join(lines[3:], ""), strings.Join(lines[7:], "")} {
		s := openTest(t, nil)
		if err := s.ImportDump(context.Background(), bytes.NewReader(dump(t, a.Store())), nil); err != nil {
			t.Fatal(err)
		}
		before := contents(t, s)
		err := s.ImportDump(context.Background(), strings.NewReader(tail), nil)
		var le *memstore.LineError
		if !errors.Is(err, ErrOtherChain) || !errors.As(err, &le) || le.Line != 1 {
			t.Errorf("another chain's blocks from %s: %v; want ErrOtherChain on line 1", tail[:min(40, len(tail))], err)
		}
		if after := contents(t, s); !maps.Equal(after, before) {
			t.Errorf("the refused import changed the store: %d keys, then %d", len(before), len(after))
		}
		backendtest.TestBackend(t, s, a.Store())
	}
}

// TestImportDumpAgain imports the demo chain, reorganises the store to its
// side block as a follower would, and imports the same dump again: the
// store stays as it was, where the dump's lines written again would take
// its chain back. Progress counts every block, written or found stored.
func TestImportDumpAgain(t *testing.T) {
	ctx := context.Background()
	ref, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	d := dump(t, ref)
	blocks := bytes.Count(d, []byte("\n"))
	s := openTest(t, nil)
	var taken int
	progress := &ImportOptions{Progress: func(n int) { taken = n }}
	if err := s.ImportDump(ctx, bytes.NewReader(d), progress); err != nil {
		t.Fatal(err)
	}
	if taken != blocks {
		t.Errorf("Progress told of %d blocks, want the dump's %d", taken, blocks)
	}
	side, err := s.BlockByHash(ctx, demo.SideHash)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddBlock(side); err != nil {
		t.Fatal(err)
	}
	before := contents(t, s)
	taken = 0
	if err := s.ImportDump(ctx, bytes.NewReader(d), progress); err != nil {
		t.Fatal(err)
	}
	if taken != blocks {
		t.Errorf("imported again, Progress told of %d blocks, want the dump's %d, found stored", taken, blocks)
	}
	if after := contents(t, s); !maps.Equal(after, before) {
		t.Fatalf("the second import changed the store: %d keys, then %d", len(before), len(after))
	}
	if latest, err := s.BlockByNumber(ctx, backend.Latest); err != nil || latest.Hash != side.Hash {
		t.Errorf("latest after the dump was imported again: %v, %v; want the side block the store moved to", latest, err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.ImportDump(canceled, bytes.NewReader(d), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("an import with its context canceled: %v, want context.Canceled", err)
	}
}
