// Command demochain writes the demo chain that package memstore/demo embeds:
//
//	GOWORK=off go run ./cmd/demochain -out ../../memstore/demo # or make demo, from the repository root
//
// The chain is generated deterministically; a test checks that the files in
// the repository are what this writes.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blockrpc/blockrpc/examples/interop/demochain"
)

func main() {
	out := flag.String("out", filepath.Join("..", "..", "memstore", "demo"), "`directory` to write chain.jsonl and pending.jsonl to")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "demochain:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	chain, err := demochain.Generate()
	if err != nil {
		return err
	}
	var blocks, pending bytes.Buffer
	if err := chain.WriteDump(&blocks, &pending); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "chain.jsonl"), blocks.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "pending.jsonl"), pending.Bytes(), 0o644)
}
