package pebblestore_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pebblestore"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// A chain imported once into a directory, and served by every process
// that opens it after: here the demo chain, its tags, and blockrpc's
// Service over the store opened again.
func Example() {
	dir, err := os.MkdirTemp("", "chain")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := pebblestore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	chain, _ := demo.Dump()
	if err := new(memstore.Loader).LoadInto(bytes.NewReader(chain), store); err != nil {
		log.Fatal(err)
	}
	if err := store.SetSafe(demo.Safe); err != nil {
		log.Fatal(err)
	}
	if err := store.Close(); err != nil {
		log.Fatal(err)
	}

	// The next run: nothing to import.
	store, err = pebblestore.Open(dir, &pebblestore.Options{CacheBytes: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	svc := blockrpc.NewService(store)
	head, err := svc.BlockNumber(ctx)
	if err != nil {
		log.Fatal(err)
	}
	safe, err := svc.GetBlockByNumber(ctx, backend.Safe, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("head:", head, "safe:", safe.Number, "with", len(safe.Transactions), "transactions")
	// Output: head: 110 safe: 102 with 4 transactions
}
