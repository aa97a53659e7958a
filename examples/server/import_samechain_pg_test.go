package main

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
)

// TestImportDumpSideParentTwice is TestImportSideParentTwice and
// TestImportOtherChainSideBlocks through pgstore's ImportDump.
func TestImportDumpSideParentTwice(t *testing.T) {
	_, base := pgtest.Shared(t)
	schema := pgtest.Schema(t)
	url := base + "&search_path=" + schema
	c := newHandChain(t)
	path, want := c.sideParentDump()

	ctx := context.Background()
	w, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 2 {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		err = w.ImportDump(ctx, f, nil)
		f.Close()
		if err != nil {
			t.Errorf("import %d: %v", i+1, err)
		}
		if got := canonicalHashes(t, w, 3); !slices.Equal(got, want) {
			t.Errorf("after import %d the canonical chain is %v, the dump's %v", i+1, got, want)
		}
	}

	og := c.block(0, backend.Hash{}, "other")
	o1 := c.block(1, og.Hash, "other")
	f, err := os.Open(writeLines(t, dumpLine(o1, false)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := w.ImportDump(ctx, f, nil); !errors.Is(err, pgstore.ErrOtherChain) {
		t.Errorf("another chain's side block: %v, want ErrOtherChain", err)
	}
	if _, err := w.BlockByHash(ctx, o1.Hash); err == nil {
		t.Errorf("another chain's side block 1 (%s) was written into the store", o1.Hash)
	}
}
