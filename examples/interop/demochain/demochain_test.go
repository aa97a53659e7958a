package demochain

import (
	"bytes"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethereum/go-ethereum/consensus/beacon"
	"github.com/ethereum/go-ethereum/consensus/ethash"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/rawdb"
	"github.com/ethereum/go-ethereum/core/types"
)

// TestCommittedDumpIsCurrent regenerates the demo chain and compares it with
// the files package memstore/demo embeds: the generation is deterministic, and the
// committed chain is what this code makes.
func TestCommittedDumpIsCurrent(t *testing.T) {
	chain, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	var blocks, pending bytes.Buffer
	if err := chain.WriteDump(&blocks, &pending); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "..", "memstore", "demo")
	for name, got := range map[string][]byte{"chain.jsonl": blocks.Bytes(), "pending.jsonl": pending.Bytes()} {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator writes: run make demo", name)
		}
	}
}

// TestTerminalTotalDifficulty checks that the configured terminal total
// difficulty is the total difficulty of the last proof-of-work block.
func TestTerminalTotalDifficulty(t *testing.T) {
	chain, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	td := new(big.Int).Set(chain.Genesis.Difficulty())
	for _, b := range chain.Blocks[:MergeBlock-1] {
		td.Add(td, b.Difficulty())
	}
	if td.Cmp(chain.Config.TerminalTotalDifficulty) != 0 {
		t.Errorf("terminal total difficulty is %v, the chain reaches %v at block %d", chain.Config.TerminalTotalDifficulty, td, MergeBlock-1)
	}
	if chain.Blocks[MergeBlock-1].Difficulty().Sign() != 0 || chain.Blocks[MergeBlock-2].Difficulty().Sign() == 0 {
		t.Errorf("the merge is not at block %d", MergeBlock)
	}
}

// TestGethImportsTheChain has go-ethereum import the chain, which executes
// every block again and checks state roots, receipts, gas, uncles, blob gas
// and requests: the demo chain is a valid chain, not just well-formed data.
func TestGethImportsTheChain(t *testing.T) {
	chain, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	bc, err := core.NewBlockChain(rawdb.NewMemoryDatabase(), Genesis(), beacon.New(ethash.NewFaker()), core.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Stop()
	if n, err := bc.InsertChain(types.Blocks(chain.Blocks)); err != nil {
		t.Fatalf("go-ethereum refused block %d: %v", chain.Blocks[n].NumberU64(), err)
	}
	if n, err := bc.InsertChain(types.Blocks{chain.Side}); err != nil {
		t.Fatalf("go-ethereum refused the side block (%d): %v", n, err)
	}
	if n, err := bc.InsertChain(types.Blocks{chain.Pending}); err != nil {
		t.Fatalf("go-ethereum refused the pending block (%d): %v", n, err)
	}
	if head := bc.CurrentBlock(); head.Number.Uint64() != Head+1 {
		t.Errorf("go-ethereum's head is %d, want %d", head.Number, Head+1)
	}
}
