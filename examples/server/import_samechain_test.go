package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pebblestore"
	"github.com/blockrpc/blockrpc/memstore"
)

// handChain seals blocks by hand, difficulty 1 and no transactions, to
// make dumps of chains with side blocks and of other chains.
type handChain struct {
	t     *testing.T
	store *memstore.Store
}

func newHandChain(t *testing.T) *handChain {
	return &handChain{t: t, store: memstore.New()}
}

// block seals a block at number n on parent, extra telling forks apart.
func (c *handChain) block(n uint64, parent backend.Hash, extra string) *backend.Block {
	c.t.Helper()
	b := &backend.Block{Header: backend.Header{Number: n, ParentHash: parent, GasLimit: 30_000_000, Timestamp: n * 12, ExtraData: []byte(extra)}}
	b.Difficulty.SetUint64(1)
	if err := backend.Seal(b, nil); err != nil {
		c.t.Fatal(err)
	}
	if err := c.store.AddSideBlock(b); err != nil {
		c.t.Fatal(err)
	}
	got, err := c.store.BlockByHash(context.Background(), b.Hash)
	if err != nil {
		c.t.Fatal(err)
	}
	return got
}

func dumpLine(b *backend.Block, canonical bool) string {
	s := `{"block":` + string(b.AppendJSON(nil, true))
	if !canonical {
		s += `,"canonical":false`
	}
	return s + "}\n"
}

func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dump.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func importInto(t *testing.T, s *pebblestore.Store, dir, path string) error {
	t.Helper()
	spec := storeSpec{kind: storePebble, dir: dir, name: "pebble:" + dir}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return importFile(context.Background(), log, spec, path, s)
}

func canonicalHashes(t *testing.T, b backend.Backend, upto uint64) []backend.Hash {
	t.Helper()
	var out []backend.Hash
	for n := uint64(0); n <= upto; n++ {
		blk, err := b.BlockByNumber(context.Background(), backend.BlockNumber(n))
		if err != nil {
			out = append(out, backend.Hash{})
			continue
		}
		out = append(out, blk.Hash)
	}
	return out
}

// sideParentDump writes a dump of blocks 0, 1, 2a, 3a, then 2b as a side
// block and its child 3b: a reorganisation through a side block. It
// returns the dump's path and its canonical chain.
func (c *handChain) sideParentDump() (string, []backend.Hash) {
	g := c.block(0, backend.Hash{}, "")
	b1 := c.block(1, g.Hash, "")
	a2 := c.block(2, b1.Hash, "a")
	a3 := c.block(3, a2.Hash, "a")
	b2 := c.block(2, b1.Hash, "b")
	b3 := c.block(3, b2.Hash, "b")
	path := writeLines(c.t,
		dumpLine(g, true), dumpLine(b1, true), dumpLine(a2, true), dumpLine(a3, true),
		dumpLine(b2, false), dumpLine(b3, true))
	return path, []backend.Hash{g.Hash, b1.Hash, b2.Hash, b3.Hash}
}

// TestImportSideParentTwice imports a dump that reorganises through a side
// block (2b, then its child 3b) twice into Pebble: the second import
// changes nothing, where it was refused as another chain's after it had
// made 2a and 3a canonical again.
func TestImportSideParentTwice(t *testing.T) {
	path, want := newHandChain(t).sideParentDump()
	f, _ := os.Open(path)
	mem, err := memstore.Load(f)
	f.Close()
	if err != nil {
		t.Fatalf("memstore.Load: %v", err)
	}
	if got := canonicalHashes(t, mem, 3); !slices.Equal(got, want) {
		t.Fatalf("memstore's canonical chain of the dump is %v, want %v", got, want)
	}

	dir := filepath.Join(t.TempDir(), "db")
	s, err := pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := importInto(t, s, dir, path); err != nil {
		t.Fatalf("first import: %v", err)
	}
	if got := canonicalHashes(t, s, 3); !slices.Equal(got, want) {
		t.Fatalf("after the first import the canonical chain is %v, memstore's %v", got, want)
	}
	if err := importInto(t, s, dir, path); err != nil {
		t.Errorf("the same dump imported again: %v", err)
	}
	if got := canonicalHashes(t, s, 3); !slices.Equal(got, want) {
		t.Errorf("after the second import the canonical chain is %v, the dump's (and the first import's) %v", got, want)
	}
}

// ours returns the dump lines of a chain of blocks 0 to 3.
func (c *handChain) ours() []string {
	g := c.block(0, backend.Hash{}, "")
	lines := []string{dumpLine(g, true)}
	for n, parent := uint64(1), g.Hash; n <= 3; n++ {
		b := c.block(n, parent, "")
		lines = append(lines, dumpLine(b, true))
		parent = b.Hash
	}
	return lines
}

// TestImportOtherChainSideBlocks imports into Pebble dumps of another
// chain that begin with a side block, or are all side blocks: each is
// refused, and none of its blocks is written, where the side blocks were
// written unchecked, and a dump of side blocks alone was taken whole.
func TestImportOtherChainSideBlocks(t *testing.T) {
	c := newHandChain(t)
	ours := c.ours()
	// Another chain: another genesis.
	og := c.block(0, backend.Hash{}, "other")
	o1 := c.block(1, og.Hash, "other")
	o2 := c.block(2, o1.Hash, "other")
	o2side := c.block(2, o1.Hash, "other-side")

	dir := filepath.Join(t.TempDir(), "db")
	s, err := pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := importInto(t, s, dir, writeLines(t, ours...)); err != nil {
		t.Fatalf("our chain: %v", err)
	}
	err = importInto(t, s, dir, writeLines(t, dumpLine(o2side, false), dumpLine(og, true), dumpLine(o1, true), dumpLine(o2, true)))
	if !errors.Is(err, pebblestore.ErrOtherChain) {
		t.Errorf("another chain's dump, a side block first: %v, want ErrOtherChain", err)
	}
	if _, err := s.BlockByHash(context.Background(), o2side.Hash); err == nil {
		t.Errorf("the refused dump's side block %d (%s) of another chain was written into the store", o2side.Number, o2side.Hash)
	}
	err = importInto(t, s, dir, writeLines(t, dumpLine(o1, false), dumpLine(o2, false)))
	if !errors.Is(err, pebblestore.ErrOtherChain) {
		t.Errorf("another chain's dump of side blocks: %v, want ErrOtherChain", err)
	}
	if _, err := s.BlockByHash(context.Background(), o1.Hash); err == nil {
		t.Errorf("another chain's side block 1 (%s) was written into the store", o1.Hash)
	}
}

// TestImportHeldBlocksSkipped imports into Pebble dumps of blocks the
// store holds, canonical or not: each leaves the store as it was, where
// blocks it held off its chain were made canonical again.
func TestImportHeldBlocksSkipped(t *testing.T) {
	c := newHandChain(t)
	g := c.block(0, backend.Hash{}, "")
	var a, b []*backend.Block // branches from block 1 and block 5
	a = append(a, g)
	for n := uint64(1); n <= 10; n++ {
		a = append(a, c.block(n, a[n-1].Hash, "a"))
	}
	b = append(b, a[:6]...)
	for n := uint64(6); n <= 12; n++ {
		b = append(b, c.block(n, b[n-1].Hash, "b"))
	}
	x2 := c.block(2, a[1].Hash, "x")
	x3 := c.block(3, x2.Hash, "x")
	lines := func(blocks ...*backend.Block) []string {
		var out []string
		for _, blk := range blocks {
			out = append(out, dumpLine(blk, true))
		}
		return out
	}
	hashes := func(blocks []*backend.Block) []backend.Hash {
		var out []backend.Hash
		for _, blk := range blocks {
			out = append(out, blk.Hash)
		}
		return out
	}
	open := func() (*pebblestore.Store, string) {
		dir := filepath.Join(t.TempDir(), "db")
		s, err := pebblestore.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, dir
	}
	ctx := context.Background()

	t.Run("a dump that reorganises, twice", func(t *testing.T) {
		// Blocks 2 and 3 of a, then of x: x's canonical at the end.
		path := writeLines(t, lines(g, a[1], a[2], a[3], x2, x3)...)
		s, dir := open()
		if err := importInto(t, s, dir, path); err != nil {
			t.Fatal(err)
		}
		for _, set := range []func(uint64) error{s.SetSafe, s.SetFinalized} {
			if err := set(3); err != nil {
				t.Fatal(err)
			}
		}
		if err := importInto(t, s, dir, path); err != nil {
			t.Fatalf("the same dump again: %v", err)
		}
		if want := hashes([]*backend.Block{g, a[1], x2, x3}); !slices.Equal(canonicalHashes(t, s, 3), want) {
			t.Errorf("after the second import the chain is %v, want %v", canonicalHashes(t, s, 3), want)
		}
		for _, tag := range []backend.BlockNumber{backend.Safe, backend.Finalized} {
			if blk, err := s.BlockByNumber(ctx, tag); err != nil || blk.Hash != x3.Hash {
				t.Errorf("%v after the second import: %v, want block 3 of the dump's chain", tag, err)
			}
		}
	})

	t.Run("a dump with a hole, twice", func(t *testing.T) {
		// Block 4 of a after block 3 of x: its parent, a's 3, is not in
		// the dump, which memstore takes, and so does an empty store.
		path := writeLines(t, lines(g, a[1], x2, x3, a[4])...)
		s, dir := open()
		for i := range 2 {
			if err := importInto(t, s, dir, path); err != nil {
				t.Fatalf("import %d: %v", i+1, err)
			}
		}
	})

	t.Run("an old dump into a store that moved on", func(t *testing.T) {
		s, dir := open()
		old, newer := writeLines(t, lines(a...)...), writeLines(t, lines(b...)...)
		for _, path := range []string{old, newer, old} {
			if err := importInto(t, s, dir, path); err != nil {
				t.Fatal(err)
			}
		}
		if got := canonicalHashes(t, s, 12); !slices.Equal(got, hashes(b)) {
			t.Errorf("after the old dump again, the chain is %v, want the newer dump's %v", got, hashes(b))
		}
	})
}

// TestImportMovesHeadSameHeight imports a dump whose head is another block
// at the store's height, a reorganisation of its head: the head moved, so
// safe and finalized default to the dump's head, as after any import that
// moves the head, rather than stay where the store had them.
func TestImportMovesHeadSameHeight(t *testing.T) {
	c := newHandChain(t)
	g := c.block(0, backend.Hash{}, "")
	b1 := c.block(1, g.Hash, "")
	a2 := c.block(2, b1.Hash, "a")
	b2 := c.block(2, b1.Hash, "b")
	first := writeLines(t, dumpLine(g, true), dumpLine(b1, true), dumpLine(a2, true))
	second := writeLines(t, dumpLine(g, true), dumpLine(b1, true), dumpLine(b2, true))

	s, spec := newPebbleStore(t)
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	if err := prepareStore(ctx, log, options{store: spec, chain: first, safe: 1, finalized: 1}, &source{}, s); err != nil {
		t.Fatal(err)
	}
	if err := prepareStore(ctx, log, options{store: spec, chain: second, safe: -1, finalized: -1}, &source{}, s); err != nil {
		t.Fatal(err)
	}
	head, err := s.BlockByNumber(ctx, backend.Latest)
	if err != nil || head.Hash != b2.Hash {
		t.Fatalf("the head after the second dump is not the dump's (%v)", err)
	}
	for _, tag := range []backend.BlockNumber{backend.Safe, backend.Finalized} {
		if b, err := s.BlockByNumber(ctx, tag); err != nil || b.Hash != b2.Hash {
			var at uint64
			if b != nil {
				at = b.Number
			}
			t.Errorf("tag %v after a dump that moved the head to another block at its height: block %d (%v), want the dump's head, block 2", tag, at, err)
		}
	}
}

// TestImportTagsAtGenesis gives -safe 0 and -finalized 0 with a dump into
// a store: the genesis is a block as any other, and both tags are set to
// it rather than left at the dump's head.
func TestImportTagsAtGenesis(t *testing.T) {
	c := newHandChain(t)
	g := c.block(0, backend.Hash{}, "")
	b1 := c.block(1, g.Hash, "")
	b2 := c.block(2, b1.Hash, "")
	dump := writeLines(t, dumpLine(g, true), dumpLine(b1, true), dumpLine(b2, true))
	s, spec := newPebbleStore(t)
	ctx := context.Background()
	if err := prepareStore(ctx, slog.New(slog.DiscardHandler), options{store: spec, chain: dump, safe: 0, finalized: 0}, &source{}, s); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []backend.BlockNumber{backend.Safe, backend.Finalized} {
		if b, err := s.BlockByNumber(ctx, tag); err != nil || b.Number != 0 {
			var at uint64
			if b != nil {
				at = b.Number
			}
			t.Errorf("tag %v with -safe 0 -finalized 0: block %d (%v), want the genesis", tag, at, err)
		}
	}
}

// newPebbleStore opens a Pebble store in a new directory, closed when the
// test ends, and returns it with the -store value that names it.
func newPebbleStore(t *testing.T) (*pebblestore.Store, storeSpec) {
	t.Helper()
	dir := t.TempDir()
	s, err := pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, storeSpec{kind: storePebble, dir: dir, name: "pebble:" + dir}
}
