// Command geth2dump converts a chain exported by go-ethereum into the JSONL
// dump that blockrpc's memstore loads and examples/server serves:
//
//	geth export chain.rlp                      # on the node
//	GOWORK=off go run ./cmd/geth2dump -genesis genesis.json -rlp chain.rlp -out dump.jsonl
//	go run ./examples/server -chain dump.jsonl -chainid N # from the repository root
//
// The genesis file is the one the node was initialised with: it gives the
// genesis block, which an export may leave out, and the chain id, which
// recovers the transactions' senders. Every block goes through memstore,
// which checks each hash and size against its own computation. The dump
// holds the chain id only in the transactions signed for it: geth2dump
// prints it, for the server's -chainid.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/blockrpc/blockrpc/examples/interop/gethconv"
)

func main() {
	genesis := flag.String("genesis", "", "the chain's genesis `file`, in go-ethereum's format")
	chain := flag.String("rlp", "", "the blocks, as `geth export` writes them (concatenated RLP)")
	out := flag.String("out", "", "the dump `file` to write (default: standard output)")
	flag.Parse()
	if *genesis == "" || *chain == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: geth2dump -genesis genesis.json -rlp chain.rlp [-out dump.jsonl]")
		os.Exit(2)
	}
	if err := run(*genesis, *chain, *out); err != nil {
		fmt.Fprintln(os.Stderr, "geth2dump:", err)
		os.Exit(1)
	}
}

func run(genesisPath, chainPath, outPath string) error {
	genesis, err := gethconv.ReadGenesis(genesisPath)
	if err != nil {
		return err
	}
	f, err := os.Open(chainPath)
	if err != nil {
		return err
	}
	defer f.Close()
	store, err := gethconv.LoadExport(genesis, f)
	if err != nil {
		return fmt.Errorf("%s: %w", chainPath, err)
	}
	w := io.Writer(os.Stdout)
	if outPath != "" {
		f, err := os.Create(outPath)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if err := store.Save(w); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "geth2dump: chain id %v: serve the dump with -chainid %[1]v\n", genesis.Config.ChainID)
	return nil
}
