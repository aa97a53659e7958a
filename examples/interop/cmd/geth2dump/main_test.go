package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/examples/interop/gethnode"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/memstore"
)

// TestConvertsAGethExport has go-ethereum import the execution-apis chain
// and export it, converts the export, and checks that the dump serves the
// same chain: every block, with its uncles and total difficulty.
func TestConvertsAGethExport(t *testing.T) {
	dir := fixtures.Path(t, "execution-apis")
	genesis, chain := filepath.Join(dir, "genesis.json"), filepath.Join(dir, "chain.rlp")
	datadir, export := t.TempDir(), filepath.Join(t.TempDir(), "export.rlp")
	gethnode.Exec(t, "init", "--datadir", datadir, genesis)
	gethnode.Exec(t, "import", "--datadir", datadir, chain)
	gethnode.Exec(t, "export", "--datadir", datadir, export)

	fromExport := convert(t, genesis, export)
	fromFixture := convert(t, genesis, chain) // chain.rlp leaves out the genesis
	if fromExport.Len() != 55 || fromFixture.Len() != 55 {
		t.Fatalf("the dumps hold %d and %d blocks, want 55 (the genesis and 54)", fromExport.Len(), fromFixture.Len())
	}
	ctx := context.Background()
	uncles := 0
	for n := backend.BlockNumber(0); n <= 54; n++ {
		a, errA := fromExport.BlockByNumber(ctx, n)
		b, errB := fromFixture.BlockByNumber(ctx, n)
		if errA != nil || errB != nil {
			t.Fatalf("block %d: %v, %v", n, errA, errB)
		}
		if !bytes.Equal(a.AppendJSON(nil, true), b.AppendJSON(nil, true)) {
			t.Errorf("block %d differs between the export's dump and the fixture's", n)
		}
		if a.TotalDifficulty == nil {
			t.Errorf("block %d has no total difficulty", n)
		}
		for i := range a.Uncles {
			u, err := fromExport.UncleByBlockHashAndIndex(ctx, a.Hash, uint64(i))
			if err != nil || u.Hash != a.Uncles[i] {
				t.Errorf("block %d uncle %d: %v", n, i, err)
			}
			uncles++
		}
	}
	if id, err := fromExport.ChainID(ctx); err != nil || id != 3503995874084926 {
		t.Errorf("chain id %d, %v; want the genesis file's 3503995874084926", id, err)
	}
	if uncles != 18 {
		t.Errorf("%d uncles served, want 18", uncles)
	}
	t.Logf("geth export of %d blocks with %d uncles converted and served", fromExport.Len(), uncles)
}

// TestRefusesAnotherChainsGenesis checks that an export is not paired with
// the genesis of another chain.
func TestRefusesAnotherChainsGenesis(t *testing.T) {
	dir := fixtures.Path(t, "execution-apis")
	data, err := os.ReadFile(filepath.Join(dir, "genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "genesis.json")
	if err := os.WriteFile(other, []byte(strings.Replace(string(data), `"extraData": "0x68697665636861696e"`, `"extraData": "0x00"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	err = run(other, filepath.Join(dir, "chain.rlp"), filepath.Join(t.TempDir(), "dump.jsonl"))
	if err == nil || !strings.Contains(err.Error(), "block 1") {
		t.Errorf("converting with another chain's genesis: %v, want block 1 refused", err)
	}
}

// convert runs the command's conversion into a dump file and loads it.
func convert(t *testing.T, genesis, chain string) *memstore.Store {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dump.jsonl")
	if err := run(genesis, chain, out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	store, err := memstore.Load(f)
	if err != nil {
		t.Fatalf("loading the dump: %v", err)
	}
	return store
}
