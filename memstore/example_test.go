package memstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
)

// A store fills in what a block's contents determine: here the hash, the
// size, the roots and the total difficulty of two empty blocks.
func ExampleStore_AddBlock() {
	store := memstore.New()
	genesis := &backend.Block{Header: backend.Header{GasLimit: 30_000_000}}
	genesis.Difficulty.SetUint64(0x20000)
	if err := store.AddBlock(genesis); err != nil {
		log.Fatal(err)
	}
	g, _ := store.BlockByNumber(context.Background(), 0)

	child := &backend.Block{Header: backend.Header{Number: 1, ParentHash: g.Hash, GasLimit: 30_000_000, Timestamp: 12}}
	child.Difficulty.SetUint64(0x20000)
	if err := store.AddBlock(child); err != nil {
		log.Fatal(err)
	}
	head, _ := store.BlockByNumber(context.Background(), backend.Latest)
	fmt.Println("head:", head.Number, "size:", head.Size, "total difficulty:", head.TotalDifficulty.Hex())

	// A given value that the contents contradict is refused, and nothing
	// is stored.
	wrong := &backend.Block{Header: backend.Header{Number: 2, ParentHash: head.Hash}, Size: 999}
	var mismatch *backend.MismatchError
	if err := store.AddBlock(wrong); errors.As(err, &mismatch) {
		fmt.Println("refused:", mismatch.Field, "given", mismatch.Given, "computed", mismatch.Computed)
	}
	fmt.Println("blocks stored:", store.Len())
	// Output:
	// head: 1 size: 508 total difficulty: 0x40000
	// refused: size given 0x3e7 computed 0x1f5
	// blocks stored: 2
}

// A dump is read line by line; each line's block is checked as AddBlock
// checks it, and a bad line names itself.
func ExampleLoad() {
	store := memstore.New()
	genesis := &backend.Block{Header: backend.Header{GasLimit: 30_000_000}}
	if err := store.AddBlock(genesis); err != nil {
		log.Fatal(err)
	}
	var dump bytes.Buffer
	if err := store.Save(&dump); err != nil {
		log.Fatal(err)
	}

	loaded, err := memstore.Load(bytes.NewReader(dump.Bytes()))
	fmt.Println("blocks:", loaded.Len(), err)

	// A gas limit changed in the dump no longer hashes to the block's hash.
	bad := bytes.Replace(dump.Bytes(), []byte(`"gasLimit":"0x1c9c380"`), []byte(`"gasLimit":"0x1c9c381"`), 1)
	_, err = memstore.Load(bytes.NewReader(bad))
	var line *memstore.LineError
	var mismatch *backend.MismatchError
	if errors.As(err, &line) && errors.As(err, &mismatch) {
		fmt.Println("line", line.Line, "refused:", mismatch.Field)
	}
	// Output:
	// blocks: 1 <nil>
	// line 1 refused: hash
}

// A Loader logs what a dump misses: here a chain whose block 1 is not in
// the dump, which leaves block 2 without a total difficulty.
func ExampleLoader() {
	store := memstore.New()
	parent := backend.Hash{}
	for n := range uint64(3) {
		b := &backend.Block{Header: backend.Header{Number: n, ParentHash: parent, GasLimit: 30_000_000}}
		if err := store.AddBlock(b); err != nil {
			log.Fatal(err)
		}
		stored, _ := store.BlockByNumber(context.Background(), backend.BlockNumber(n))
		parent = stored.Hash
	}
	var dump bytes.Buffer
	if err := store.Save(&dump); err != nil {
		log.Fatal(err)
	}
	lines := bytes.SplitAfter(dump.Bytes(), []byte("\n"))
	// Block 1 left out, and block 2 without the total difficulty its
	// parent would have given it.
	holed := append(lines[0], bytes.Replace(lines[2], []byte(`"totalDifficulty":"0x0",`), nil, 1)...)

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		// No time, so that the output is the same on every run.
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	loader := memstore.Loader{Logger: logger, MaxLineBytes: 1 << 20}
	loaded, err := loader.Load(bytes.NewReader(holed))
	fmt.Println("blocks:", loaded.Len(), err)
	// Output:
	// level=INFO msg="memstore: dump loaded" lines=2 blocks=2 canonical=0-2
	// level=WARN msg="memstore: the dump misses blocks of the canonical chain" missing=1 ranges=1 unknown_total_difficulty=1
	// blocks: 2 <nil>
}
