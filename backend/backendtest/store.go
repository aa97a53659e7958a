package backendtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/holiman/uint256"
)

// TestStore runs the suite on stores made by open, which must return a
// new, empty store each time it is called (subtests may call it more than
// once). Each subtest writes through backend.Writer and compares what the
// store serves with memstore given the same chain.
func TestStore(t *testing.T, open func(t *testing.T) Store) {
	t.Run("Empty", func(t *testing.T) { testEmpty(t, open(t)) })
	t.Run("Chain", func(t *testing.T) { testChain(t, open(t)) })
	t.Run("Demo", func(t *testing.T) { testDemo(t, open(t)) })
	t.Run("SideBlocks", func(t *testing.T) { testSideBlocks(t, open(t)) })
	t.Run("Reorgs", func(t *testing.T) { testReorgs(t, open(t)) })
	t.Run("GapFilled", func(t *testing.T) { testGapFilled(t, open(t)) })
	t.Run("FirstReplaced", func(t *testing.T) { testFirstReplaced(t, open(t)) })
	t.Run("ChildrenKept", func(t *testing.T) { testChildrenKept(t, open(t)) })
	t.Run("DeepReorg", func(t *testing.T) { testDeepReorg(t, open(t)) })
	t.Run("TotalDifficulty", func(t *testing.T) { testTotalDifficulty(t, open) })
	t.Run("Refused", func(t *testing.T) { testRefused(t, open(t)) })
	t.Run("HashOnly", func(t *testing.T) { testHashOnly(t, open(t)) })
	t.Run("GivenBlocks", func(t *testing.T) { testGivenBlocks(t, open(t)) })
	t.Run("TagsAndPending", func(t *testing.T) { testTagsAndPending(t, open(t)) })
	t.Run("TagsReorganised", func(t *testing.T) { testTagsReorganised(t, open(t)) })
	t.Run("ChainID", func(t *testing.T) { testChainID(t, open) })
	t.Run("Canceled", func(t *testing.T) { testCanceled(t, open(t)) })
	t.Run("ConcurrentReaders", func(t *testing.T) { testConcurrentReaders(t, open(t)) })
}

// everyFork is a chain config that crosses every fork within a few
// blocks, with uncles possible before the merge.
var everyFork = chaintest.Config{Seed: 7, London: 3, Merge: 8, Shanghai: 10, Cancun: 12, Prague: 14}

// buildChain returns a builder of n blocks with transactions of every kind
// the forks allow, and an uncle in each of the first proof-of-work blocks
// that can have one.
func buildChain(cfg chaintest.Config, n int) *chaintest.Builder {
	b := chaintest.New(cfg)
	b.AddBlocks(n, func(i int, g *chaintest.BlockGen) {
		chaintest.Txs(3)(i, g)
		if g.Number() >= 2 && g.Number() < cfg.Merge && g.Number()%2 == 0 {
			g.AddUncle()
		}
	})
	return b
}

// unclesOf returns the uncles of a block of src, in order.
func unclesOf(t *testing.T, src backend.Backend, b *backend.Block) []*backend.Uncle {
	t.Helper()
	uncles := make([]*backend.Uncle, len(b.Uncles))
	for i := range uncles {
		u, err := src.UncleByBlockHashAndIndex(context.Background(), b.Hash, uint64(i))
		if err != nil {
			t.Fatalf("the reference's uncle %d of block %d: %v", i, b.Number, err)
		}
		uncles[i] = u
	}
	return uncles
}

// writeBlock writes one block of src, with its uncles, into dst.
func writeBlock(t *testing.T, dst backend.Writer, src backend.Backend, b *backend.Block, canonical bool) {
	t.Helper()
	uncles := unclesOf(t, src, b)
	add := dst.AddBlock
	if !canonical {
		add = dst.AddSideBlock
	}
	if err := add(b, uncles...); err != nil {
		t.Fatalf("writing block %d (%s): %v", b.Number, b.Hash, err)
	}
}

// copyChain writes src's canonical chain into dst, block by block from
// its earliest, then its tags and pending block.
func copyChain(t *testing.T, dst backend.Writer, src backend.Backend) {
	t.Helper()
	ctx := context.Background()
	first, err := src.BlockByNumber(ctx, backend.Earliest)
	if err != nil {
		t.Fatal(err)
	}
	last, err := src.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		t.Fatal(err)
	}
	for n := first.Number; n <= last.Number; n++ {
		b, err := src.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatalf("the reference's block %d: %v", n, err)
		}
		writeBlock(t, dst, src, b, true)
	}
	copyTags(t, dst, src)
}

func copyTags(t *testing.T, dst backend.Writer, src backend.Backend) {
	t.Helper()
	ctx := context.Background()
	for tag, set := range map[backend.BlockNumber]func(uint64) error{backend.Safe: dst.SetSafe, backend.Finalized: dst.SetFinalized} {
		if b, err := src.BlockByNumber(ctx, tag); err == nil {
			if err := set(b.Number); err != nil {
				t.Fatalf("setting %s to %d: %v", tag, b.Number, err)
			}
		}
	}
	if p, err := src.BlockByNumber(ctx, backend.Pending); err == nil {
		if err := dst.SetPending(p); err != nil {
			t.Fatalf("setting the pending block: %v", err)
		}
	}
}

func testEmpty(t *testing.T, s Store) {
	ctx := context.Background()
	for _, n := range []backend.BlockNumber{0, 1, backend.Latest, backend.Earliest, backend.Safe, backend.Finalized, backend.Pending} {
		if _, err := s.BlockByNumber(ctx, n); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("an empty store's block %s: %v, want ErrNotFound", n, err)
		}
	}
	if _, err := s.BlockByHash(ctx, backend.Hash{1}); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("an empty store's block by hash: %v, want ErrNotFound", err)
	}
	if _, err := s.UncleByBlockHashAndIndex(ctx, backend.Hash{1}, 0); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("an empty store's uncle: %v, want ErrNotFound", err)
	}
	if _, err := s.ChainID(ctx); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("an empty store's chain id: %v, want ErrNotFound", err)
	}
}

func testChain(t *testing.T, s Store) {
	b := buildChain(everyFork, 18)
	b.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(2)(0, g) })
	ref := b.Store()
	if err := ref.SetSafe(16); err != nil {
		t.Fatal(err)
	}
	if err := ref.SetFinalized(12); err != nil {
		t.Fatal(err)
	}
	copyChain(t, s, ref)
	TestBackend(t, s, ref)

	// Given again, as a dump imported twice is: every canonical block,
	// the tags and the pending block, then a block below the head. A
	// block already stored is only made canonical again, which it is.
	copyChain(t, s, ref)
	again, err := ref.BlockByNumber(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	writeBlock(t, s, ref, again, true)
	TestBackend(t, s, ref)
}

func testDemo(t *testing.T, s Store) {
	ref, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	copyChain(t, s, ref)
	side, err := ref.BlockByHash(context.Background(), demo.SideHash)
	if err != nil {
		t.Fatal(err)
	}
	writeBlock(t, s, ref, side, false)
	TestBackend(t, s, ref, demo.SideHash)
}

func testSideBlocks(t *testing.T, s Store) {
	ctx := context.Background()
	main := buildChain(everyFork, 6)
	side := main.Fork(3)
	side.AddBlocks(2, chaintest.Txs(1))
	ref := main.Store()
	copyChain(t, s, ref)
	for n := uint64(4); n <= 5; n++ {
		writeBlock(t, s, ref, side.Block(n), false)
	}
	TestBackend(t, s, ref, side.Block(4).Hash, side.Block(5).Hash)
	if got, err := s.BlockByNumber(ctx, 4); err != nil || got.Hash != main.Block(4).Hash {
		t.Errorf("block 4 after a side block was added: %v, want the canonical %s", err, main.Block(4).Hash)
	}
}

// testReorgs moves the store's canonical chain between branches the way a
// follower does: a deeper branch, a shorter one, back to an old one, each
// written as side blocks and then made canonical by its head; and a plain
// AddBlock of a competing block.
func testReorgs(t *testing.T, s Store) {
	cfg := everyFork
	cfg.Seed = 11
	a := buildChain(cfg, 16)
	ref := a.Store()
	copyChain(t, s, ref)

	switchTo := func(name string, br *chaintest.Builder, from uint64) {
		t.Helper()
		for n := from; n < br.Head().Number; n++ {
			writeBlock(t, s, ref, br.Block(n), false)
		}
		writeBlock(t, s, ref, br.Head(), true)
		br.Reorg()
		if t.Failed() {
			return
		}
		t.Run(name, func(t *testing.T) { TestBackend(t, s, ref) })
	}
	deeper := a.Fork(9)
	deeper.AddBlocks(10, chaintest.Txs(2))
	switchTo("Deeper", deeper, 10)

	shorter := a.Fork(14)
	shorter.AddBlocks(1, chaintest.Txs(1))
	switchTo("Shorter", shorter, 15)

	// Back to a branch the store already holds: its head alone, added
	// again, brings all of it back.
	writeBlock(t, s, ref, deeper.Head(), true)
	deeper.Reorg()
	t.Run("BackToOld", func(t *testing.T) { TestBackend(t, s, ref, shorter.Head().Hash, a.Head().Hash) })

	// One competing block at the head, written straight as canonical.
	rival := deeper.Fork(deeper.Head().Number - 1)
	rival.AddBlocks(1, chaintest.Txs(1))
	writeBlock(t, s, ref, rival.Head(), true)
	rival.Reorg()
	t.Run("Rival", func(t *testing.T) { TestBackend(t, s, ref, deeper.Head().Hash) })
}

// testGapFilled writes a chain with a gap, as a dump with a hole, and
// fills the gap with a block of another branch: the canonical blocks above
// it that are not its descendants leave the canonical chain, as they do
// when a block replaces another, so that the chain served holds together.
// A gap filled with the chain's own block keeps them.
func testGapFilled(t *testing.T, s Store) {
	ctx := context.Background()
	a, rival := rivalChains(13, 8, 1)
	ref := a.Store()
	for n := uint64(0); n <= 8; n++ {
		if n != 5 && n != 7 {
			writeBlock(t, s, ref, a.Block(n), true)
		}
	}
	// A number in a gap has no block, as one past the latest has none.
	for _, n := range []backend.BlockNumber{5, 7} {
		if _, err := s.BlockByNumber(ctx, n); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("block %d, in a gap of the chain: %v, want ErrNotFound", n, err)
		}
	}
	// A tag marks a canonical block, and a number in a gap has none.
	if err := s.SetSafe(5); err == nil {
		t.Error("SetSafe of a number in a gap of the chain succeeded")
	}
	if err := s.SetFinalized(7); err == nil {
		t.Error("SetFinalized of a number in a gap of the chain succeeded")
	}
	// The chain's own block 7: blocks 6 and 8 are its parent and child.
	writeBlock(t, s, ref, a.Block(7), true)
	if b, err := s.BlockByNumber(ctx, 8); err != nil || b.Hash != a.Block(8).Hash {
		t.Fatalf("block 8, the gap below it filled with its parent: %v", err)
	}
	// The rival's block 5: block 6 is not its child.
	writeBlock(t, s, ref, rival.Block(5), true)
	if b, err := s.BlockByNumber(ctx, backend.Latest); err != nil || b.Hash != rival.Block(5).Hash {
		t.Errorf("the latest block once the gap is filled from another branch: %v, want the rival's block 5", err)
	}
	for n := uint64(6); n <= 8; n++ {
		if _, err := s.BlockByNumber(ctx, backend.BlockNumber(n)); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("block %d, above a gap filled from another branch: %v, want none", n, err)
		}
		if b, err := s.BlockByHash(ctx, a.Block(n).Hash); err != nil || b.Hash != a.Block(n).Hash {
			t.Errorf("block %d by hash, no longer canonical: %v", n, err)
		}
	}
	if t.Failed() {
		return
	}
	rival.Reorg()
	TestBackend(t, s, ref, a.Head().Hash)
}

// rivalChains builds a chain of every fork of n blocks from seed, and a
// rival branch of it from block 4 of rivalBlocks blocks.
func rivalChains(seed uint64, n, rivalBlocks int) (a, rival *chaintest.Builder) {
	cfg := everyFork
	cfg.Seed = seed
	a = buildChain(cfg, n)
	rival = a.Fork(4)
	rival.AddBlocks(rivalBlocks, chaintest.Txs(1))
	return a, rival
}

// testFirstReplaced writes a chain from block 5 on, as a store that
// starts past the genesis holds it, then a branch whose block 5 replaces
// the store's first block, their parent not stored: the branch becomes
// the chain from its block 5 up, as the upstream follower writes a
// reorganisation at the first block of its store, and the blocks left
// stay by hash. The answers are compared with memstore's, written alike.
func testFirstReplaced(t *testing.T, s Store) {
	ctx := context.Background()
	a, rival := rivalChains(17, 9, 3)
	src := a.Store()
	ref := memstore.New()
	write := func(b *backend.Block, canonical bool) {
		t.Helper()
		writeBlock(t, ref, src, b, canonical)
		writeBlock(t, s, src, b, canonical)
	}
	for n := uint64(5); n <= 9; n++ {
		write(a.Block(n), true)
	}
	// A tag marks a canonical block, and there is none below the first.
	if err := s.SetSafe(3); err == nil {
		t.Error("SetSafe of a number below the store's first block succeeded")
	}
	if err := s.SetFinalized(4); err == nil {
		t.Error("SetFinalized of a number below the store's first block succeeded")
	}
	write(rival.Block(5), false)
	write(rival.Block(6), false)
	write(rival.Block(7), true)

	for _, c := range []struct {
		n    backend.BlockNumber
		want *backend.Block
	}{{backend.Earliest, rival.Block(5)}, {6, rival.Block(6)}, {backend.Latest, rival.Block(7)}} {
		if b, err := s.BlockByNumber(ctx, c.n); err != nil || b.Hash != c.want.Hash {
			t.Errorf("block %s after the first block was replaced: %v, want the branch's %d", c.n, err, c.want.Number)
		}
	}
	for n := uint64(8); n <= 9; n++ {
		if _, err := s.BlockByNumber(ctx, backend.BlockNumber(n)); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("block %d, above the shorter branch: %v, want none", n, err)
		}
	}
	if t.Failed() {
		return
	}
	hashes := []backend.Hash{}
	for n := uint64(5); n <= 9; n++ {
		hashes = append(hashes, a.Block(n).Hash)
	}
	TestBackend(t, s, ref, hashes...)
}

// testChildrenKept replaces a canonical block under children that are
// already canonical above it, as when a branch's blocks come before their
// parent: "a canonical block above stays so only while each is the child
// of the one below" (backend.Writer), so they stay. The answers are
// compared with memstore's, written alike.
func testChildrenKept(t *testing.T, s Store) {
	ctx := context.Background()
	a, rival := rivalChains(19, 8, 3)
	src := a.Store()
	ref := memstore.New()
	write := func(b *backend.Block) {
		t.Helper()
		writeBlock(t, ref, src, b, true)
		writeBlock(t, s, src, b, true)
	}
	for n := uint64(0); n <= 6; n++ {
		write(a.Block(n))
	}
	write(rival.Block(6)) // its parent not stored: only block 6 is replaced
	write(rival.Block(7))
	write(rival.Block(5)) // replaces block 5, under its child and grandchild
	if b, err := s.BlockByNumber(ctx, backend.Latest); err != nil || b.Hash != rival.Block(7).Hash {
		t.Errorf("the latest block once the parent of blocks 6 and 7 replaced block 5: %v, want the rival's block 7, which stays canonical", err)
	}
	TestBackend(t, s, ref, a.Block(5).Hash, a.Block(6).Hash)
}

// testDeepReorg reorganises to a branch hundreds of blocks deep, written
// as side blocks and made canonical by its head: the head's stored
// ancestors become canonical "down to the first that already is"
// (backend.Writer), however far down that is.
func testDeepReorg(t *testing.T, s Store) {
	a := chaintest.New(chaintest.Config{Seed: 23})
	a.AddBlocks(300, nil)
	ref := a.Store()
	id, err := ref.ChainID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetChainID(id); err != nil { // the blocks have no transactions to tell it
		t.Fatal(err)
	}
	copyChain(t, s, ref)
	deep := a.Fork(1)
	deep.AddBlocks(300, nil)
	branch := make([]*backend.Block, 0, 300)
	for b := deep.Head(); b.Number > 1; {
		branch = append(branch, b)
		parent, err := ref.BlockByHash(context.Background(), b.ParentHash)
		if err != nil {
			t.Fatal(err)
		}
		b = parent
	}
	for i := len(branch) - 1; i > 0; i-- {
		writeBlock(t, s, ref, branch[i], false)
	}
	writeBlock(t, s, ref, branch[0], true)
	deep.Reorg()
	TestBackend(t, s, ref, a.Head().Hash)
}

// testGivenBlocks writes blocks and uncles given without the values a
// store fills in (hash, size, total difficulty), and a pending block: a
// Writer "never changes a Block or Uncle it was given", and keeps copies
// (backend/copy.go), so that what it was given is as it was, and once
// scribbled over, as a loader that decodes into the same values would,
// the store still serves the chain.
func testGivenBlocks(t *testing.T, s Store) {
	ctx := context.Background()
	b := buildChain(everyFork, 12)
	b.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(2)(0, g) })
	ref := b.Store()
	type given struct {
		what string
		json func() []byte
		was  string
	}
	var gs []given
	keep := func(what string, json func() []byte) {
		gs = append(gs, given{what, json, string(json())})
	}
	var blocks []*backend.Block
	var uncles []*backend.Uncle
	for n := backend.BlockNumber(0); n <= 12; n++ {
		blk, _ := ref.BlockByNumber(ctx, n)
		g := blk.Copy()
		g.Hash, g.Size, g.TotalDifficulty = backend.Hash{}, 0, nil
		var us []*backend.Uncle
		for i, u := range unclesOf(t, ref, blk) {
			u := u.Copy()
			u.Hash, u.Size, u.TotalDifficulty = backend.Hash{}, 0, nil
			us = append(us, u)
			keep(fmt.Sprintf("uncle %d of block %d", i, n), func() []byte { return u.AppendJSON(nil) })
		}
		keep(fmt.Sprintf("block %d", n), func() []byte { return g.AppendJSON(nil, true) })
		if err := s.AddBlock(g, us...); err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		blocks, uncles = append(blocks, g), append(uncles, us...)
	}
	p, err := ref.BlockByNumber(ctx, backend.Pending)
	if err != nil {
		t.Fatal(err)
	}
	pending := p.Copy()
	keep("the pending block", func() []byte { return pending.AppendJSON(nil, true) })
	if err := s.SetPending(pending); err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if got := string(g.json()); got != g.was {
			t.Errorf("%s was changed by the store it was given to:\n got  %s\n want %s", g.what, got, g.was)
		}
	}
	for _, blk := range append(blocks, pending) {
		blk.Number += 1000
		blk.GasUsed++
		blk.ExtraData = append(blk.ExtraData[:0], 0xba, 0xd0)
		for i := range blk.Uncles {
			blk.Uncles[i][0] ^= 0xff
		}
		for _, tx := range blk.Transactions {
			tx.Nonce++
			tx.Gas++
		}
		for i := range blk.Withdrawals {
			blk.Withdrawals[i].Amount++
		}
	}
	for _, u := range uncles {
		u.Number += 1000
		u.GasUsed++
		u.ExtraData = append(u.ExtraData[:0], 0xba, 0xd0)
	}
	TestBackend(t, s, ref)
}

// testTotalDifficulty checks the sums a store keeps, and that it refuses
// a block whose given total difficulty contradicts its parent's.
func testTotalDifficulty(t *testing.T, open func(*testing.T) Store) {
	ctx := context.Background()
	cfg := everyFork
	cfg.Merge, cfg.Shanghai, cfg.Cancun, cfg.Prague = 10, 10, 10, 10
	b := buildChain(cfg, 12)
	ref := b.Store()

	s := open(t)
	copyChain(t, s, ref)
	for n := backend.BlockNumber(0); n <= 12; n++ {
		got, err := s.BlockByNumber(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.BlockByNumber(ctx, n)
		if got.TotalDifficulty == nil || !got.TotalDifficulty.Eq(want.TotalDifficulty) {
			t.Errorf("block %d: totalDifficulty %v, want %v", n, got.TotalDifficulty, want.TotalDifficulty)
		}
	}

	s = open(t)
	for n := backend.BlockNumber(0); n < 5; n++ {
		blk, _ := ref.BlockByNumber(ctx, n)
		writeBlock(t, s, ref, blk, true)
	}
	next, _ := ref.BlockByNumber(ctx, 5)
	wrong := next.Copy()
	wrong.TotalDifficulty = new(uint256.Int).AddUint64(next.TotalDifficulty, 1)
	if err := s.AddBlock(wrong, unclesOf(t, ref, next)...); err == nil {
		t.Error("a block whose totalDifficulty is not its parent's plus its difficulty was stored")
	}
	if _, err := s.BlockByHash(ctx, next.Hash); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the refused block by hash: %v, want ErrNotFound", err)
	}

	// An uncle's given total difficulty, stored while its parent's was
	// unknown, is checked once the parent comes with its own: a wrong one
	// refuses the parent.
	s = open(t)
	nephew, _ := ref.BlockByNumber(ctx, 6)
	uncle, err := ref.UncleByBlockHashAndIndex(ctx, nephew.Hash, 0)
	if err != nil {
		t.Fatal(err)
	}
	parent, _ := ref.BlockByHash(ctx, uncle.ParentHash)
	for n := parent.Number + 1; n < nephew.Number; n++ {
		blk, _ := ref.BlockByNumber(ctx, backend.BlockNumber(n))
		writeBlock(t, s, ref, blk, true)
	}
	wrongUncle := *uncle
	wrongUncle.TotalDifficulty = new(uint256.Int).AddUint64(uncle.TotalDifficulty, 1)
	if err := s.AddBlock(nephew, &wrongUncle); err != nil {
		t.Fatalf("a block whose uncle's parent is not stored: %v", err)
	}
	if _, err := s.BlockByNumber(ctx, backend.Latest); err != nil { // an Importer writes what it holds
		t.Fatal(err)
	}
	if err := s.AddBlock(parent, unclesOf(t, ref, parent)...); err == nil {
		t.Error("the parent of an uncle whose given totalDifficulty is not the parent's plus its difficulty was stored")
	}
	if _, err := s.BlockByHash(ctx, parent.Hash); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the refused parent by hash: %v, want ErrNotFound", err)
	}

	// Totals learnt later: the blocks given without theirs (their uncles
	// too), children before parents, as side blocks from the head down;
	// then the genesis with its own, and the head made canonical. Each
	// block and uncle learns its total once its parent's is known.
	s = open(t)
	// What readers were given before the totals were known, as they
	// hold it: a store never modifies a Block or Uncle it has returned
	// (backend.Backend), and gives the totals in new ones.
	type held struct {
		what, json string
		get        func() []byte
	}
	var helds []held
	hold := func(what string, get func() []byte) {
		helds = append(helds, held{what, string(get()), get})
	}
	for n := backend.BlockNumber(12); n >= 1; n-- {
		blk, _ := ref.BlockByNumber(ctx, n)
		bare := blk.Copy()
		bare.TotalDifficulty = nil
		var uncles []*backend.Uncle
		for _, u := range unclesOf(t, ref, blk) {
			u := *u
			u.TotalDifficulty = nil
			uncles = append(uncles, &u)
		}
		if err := s.AddSideBlock(bare, uncles...); err != nil {
			t.Fatalf("block %d without its total difficulty, its parent not stored: %v", n, err)
		}
		got, err := s.BlockByHash(ctx, blk.Hash)
		if err != nil {
			t.Fatal(err)
		}
		hold(fmt.Sprintf("block %d", n), func() []byte { return got.AppendJSON(nil, false) })
		for i := range uncles {
			u, err := s.UncleByBlockHashAndIndex(ctx, blk.Hash, uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			hold(fmt.Sprintf("uncle %d of block %d", i, n), func() []byte { return u.AppendJSON(nil) })
		}
	}
	genesis, _ := ref.BlockByNumber(ctx, 0)
	writeBlock(t, s, ref, genesis, true)
	head, _ := ref.BlockByNumber(ctx, 12)
	bareHead := head.Copy()
	bareHead.TotalDifficulty = nil
	if err := s.AddBlock(bareHead, unclesOf(t, ref, head)...); err != nil {
		t.Fatal(err)
	}
	TestBackend(t, s, ref)
	for _, h := range helds {
		if got := string(h.get()); got != h.json {
			t.Errorf("%s, returned before its total difficulty was known, was changed since:\n got  %s\n want %s", h.what, got, h.json)
		}
	}

	// A side branch whose blocks weigh otherwise than the canonical blocks
	// at their numbers: a total is the parent's, found by hash, plus the
	// block's difficulty. chaintest's proof-of-work blocks all weigh the
	// same, and would not tell the parent from the canonical block below.
	weighed := func(parent *backend.Block, difficulty uint64) *backend.Block {
		b := &backend.Block{Header: backend.Header{GasLimit: 30_000_000, Difficulty: *uint256.NewInt(difficulty)}, Transactions: []*backend.Transaction{}}
		if parent != nil {
			b.Number, b.ParentHash = parent.Number+1, parent.Hash
		}
		if err := backend.Seal(b, nil); err != nil {
			t.Fatal(err)
		}
		return b
	}
	g := weighed(nil, 1)
	c1 := weighed(g, 2)
	c2 := weighed(c1, 4)
	c3 := weighed(c2, 8)
	s1 := weighed(g, 16)
	s2 := weighed(s1, 32)
	s3 := weighed(s2, 64)
	s = open(t)
	want := memstore.New()
	for _, w := range []backend.Writer{want, s} {
		for _, b := range []*backend.Block{g, c1, c2, c3} {
			if err := w.AddBlock(b); err != nil {
				t.Fatalf("block %d of the canonical branch: %v", b.Number, err)
			}
		}
		for _, b := range []*backend.Block{s1, s2} {
			if err := w.AddSideBlock(b); err != nil {
				t.Fatalf("block %d of the side branch: %v", b.Number, err)
			}
		}
	}
	t.Run("SideBranchWeighed", func(t *testing.T) { TestBackend(t, s, want, s1.Hash, s2.Hash) })
	for _, w := range []backend.Writer{want, s} {
		if err := w.AddBlock(s3); err != nil {
			t.Fatalf("block %d of the side branch, made canonical: %v", s3.Number, err)
		}
	}
	t.Run("SideBranchWeighedCanonical", func(t *testing.T) { TestBackend(t, s, want, c1.Hash, c2.Hash, c3.Hash) })

	// A total past 2^256-1, which no quantity carries, is refused, whether
	// the parent comes first or last: wrapped round, it would be served as
	// a small total.
	heavy := &backend.Block{Header: backend.Header{GasLimit: 30_000_000, Difficulty: *new(uint256.Int).SetAllOne()}, Transactions: []*backend.Transaction{}}
	if err := backend.Seal(heavy, nil); err != nil {
		t.Fatal(err)
	}
	child := &backend.Block{Header: backend.Header{Number: 1, ParentHash: heavy.Hash, GasLimit: 30_000_000, Difficulty: *uint256.NewInt(1001)}, Transactions: []*backend.Transaction{}}
	s = open(t)
	if err := s.AddBlock(heavy); err != nil {
		t.Fatal(err)
	}
	if err := s.AddBlock(child); err == nil {
		t.Error("a block whose total difficulty is past 2^256-1 was stored")
	}
	s = open(t)
	if err := s.AddBlock(child); err != nil {
		t.Fatalf("a block whose parent is not stored: %v", err)
	}
	if err := s.AddBlock(heavy); err == nil {
		t.Error("a parent that makes its stored child's total difficulty past 2^256-1 was stored")
	}
}

// testRefused gives blocks whose derived values contradict their
// contents: each must be refused, and leave nothing behind.
func testRefused(t *testing.T, s Store) {
	ctx := context.Background()
	b := buildChain(everyFork, 15)
	ref := b.Store()
	for n := backend.BlockNumber(0); n < 14; n++ {
		blk, _ := ref.BlockByNumber(ctx, n)
		writeBlock(t, s, ref, blk, true)
	}
	good := b.Block(14)
	tampers := map[string]func(*backend.Block){
		"hash":             func(b *backend.Block) { b.Hash[0] ^= 1 },
		"size":             func(b *backend.Block) { b.Size++ },
		"transactionsRoot": func(b *backend.Block) { b.TransactionsRoot[0] ^= 1 },
		"transaction hash": func(b *backend.Block) { b.Transactions[0].Hash[0] ^= 1 },
		"transaction body": func(b *backend.Block) { b.Transactions[0].Nonce++ },
		"withdrawalsRoot":  func(b *backend.Block) { b.WithdrawalsRoot[0] ^= 1 },
		"sha3Uncles":       func(b *backend.Block) { b.Sha3Uncles[0] ^= 1 },
	}
	for name, tamper := range tampers {
		bad := good.Copy()
		tamper(bad)
		if err := s.AddBlock(bad); err == nil {
			t.Errorf("a block with a wrong %s was stored", name)
		}
	}
	// nil where a block, an uncle or a transaction belongs is an error,
	// not a panic.
	noTx := good.Copy()
	noTx.Transactions[0] = nil
	for name, write := range map[string]func() error{
		"a nil block":       func() error { return s.AddBlock(nil) },
		"a nil uncle":       func() error { return s.AddBlock(good.Copy(), nil) },
		"a nil transaction": func() error { return s.AddBlock(noTx) },
		"a nil side block":  func() error { return s.AddSideBlock(nil) },
		"a pending block with a nil transaction": func() error {
			pending := noTx.Copy()
			pending.Pending = true
			return s.SetPending(pending)
		},
	} {
		if err := refusedWithoutPanic(write); err == nil {
			t.Errorf("%s was stored", name)
		} else if strings.HasPrefix(err.Error(), "panic: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := s.BlockByNumber(ctx, 14); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("block 14 after refused writes: %v, want ErrNotFound", err)
	}
	if latest, err := s.BlockByNumber(ctx, backend.Latest); err != nil || latest.Number != 13 {
		t.Errorf("latest after refused writes: %v, %v; want block 13", latest, err)
	}
}

// refusedWithoutPanic returns write's error, or the panic it ended with.
func refusedWithoutPanic(write func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return write()
}

// testHashOnly stores blocks known only by their transaction hashes, as a
// header-only store holds them, and reads them back. Such a block's size
// is kept as given, unchecked: the last one gives one no block has, which
// a store must keep without trusting it (to size an allocation, say).
func testHashOnly(t *testing.T, s Store) {
	ctx := context.Background()
	ref := buildChain(everyFork, 16).Store()
	want := memstore.New()
	for n := backend.BlockNumber(0); n <= 16; n++ {
		full, _ := ref.BlockByNumber(ctx, n)
		b := full.Copy()
		if len(b.Transactions) > 0 {
			b.TransactionHashes = backend.TransactionHashes(b.Transactions)
			b.Transactions = nil
		}
		if n == 16 {
			b.Size = math.MaxInt64
		}
		for _, dst := range []backend.Writer{want, s} {
			writeBlock(t, dst, ref, b, true)
		}
	}
	TestBackend(t, s, want)
	if b, err := s.BlockByNumber(ctx, 16); err != nil || b.HasTransactionBodies() || b.TxCount() == 0 {
		t.Errorf("a block stored by transaction hashes reads back with bodies, or none: %v", err)
	}
}

func testTagsAndPending(t *testing.T, s Store) {
	ctx := context.Background()
	b := buildChain(everyFork, 10)
	ref := b.Store()
	copyChain(t, s, ref)
	if err := s.SetSafe(11); err == nil {
		t.Error("SetSafe of a number past the head succeeded")
	}
	if err := s.SetFinalized(11); err == nil {
		t.Error("SetFinalized of a number past the head succeeded")
	}
	for _, w := range []backend.Writer{ref, s} {
		if err := w.SetSafe(9); err != nil {
			t.Fatal(err)
		}
		if err := w.SetFinalized(7); err != nil {
			t.Fatal(err)
		}
	}
	pending := b.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(4)(0, g) })
	if err := s.SetPending(pending); err != nil {
		t.Fatal(err)
	}
	TestBackend(t, s, ref)
	got, err := s.BlockByNumber(ctx, backend.Pending)
	if err != nil || !got.Pending {
		t.Fatalf("the pending block: %v; Pending must be set", err)
	}
	for _, w := range []backend.Writer{ref, s} {
		if err := w.SetPending(nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.BlockByNumber(ctx, backend.Pending); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the pending block after it was cleared: %v, want ErrNotFound", err)
	}
}

// testTagsReorganised marks blocks safe and finalized and then replaces
// them, by a shorter branch that grows back past them: a tag whose block
// left the chain selects nothing, rather than the block that took its
// number, which nobody marked; one below the fork keeps its block.
func testTagsReorganised(t *testing.T, s Store) {
	ctx := context.Background()
	cfg := everyFork
	cfg.Seed = 21
	a := buildChain(cfg, 10)
	copyChain(t, s, a.Store())
	if err := s.SetSafe(10); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFinalized(4); err != nil {
		t.Fatal(err)
	}
	b := a.Fork(5) // blocks 6 and up replaced
	b.AddBlocks(3, chaintest.Txs(1))
	name := func(b *backend.Block) string {
		if b == nil {
			return "none"
		}
		return fmt.Sprintf("block %d (%s)", b.Number, b.Hash)
	}
	check := func(when string, wantSafe bool) {
		t.Helper()
		if got, err := s.BlockByNumber(ctx, backend.Safe); wantSafe && (err != nil || got.Hash != a.Block(10).Hash) {
			t.Errorf("%s: safe is %s (%v), want the block marked", when, name(got), err)
		} else if !wantSafe && !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("%s: safe is %s (%v), want none: the block marked safe left the chain", when, name(got), err)
		}
		if got, err := s.BlockByNumber(ctx, backend.Finalized); err != nil || got.Hash != a.Block(4).Hash {
			t.Errorf("%s: finalized is %s (%v), want block 4, below the fork", when, name(got), err)
		}
	}
	check("before the reorganisation", true)
	for n := uint64(6); n < b.Head().Number; n++ {
		writeBlock(t, s, b.Store(), b.Block(n), false)
	}
	writeBlock(t, s, b.Store(), b.Head(), true)
	check("after a reorganisation to a shorter branch", false)
	for range 3 {
		b.AddBlocks(1, chaintest.Txs(1))
		writeBlock(t, s, b.Store(), b.Head(), true)
	}
	check("once the new branch is past the number marked", false)

	// Back to the first branch by its head alone, below the new branch's:
	// the blocks marked now are replaced by the head's ancestors, not
	// dropped above it, and a finalized block that leaves the chain is
	// unmarked as a safe one is.
	if err := s.SetSafe(8); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFinalized(7); err != nil {
		t.Fatal(err)
	}
	writeBlock(t, s, a.Store(), a.Head(), true)
	for _, tag := range []backend.BlockNumber{backend.Safe, backend.Finalized} {
		if got, err := s.BlockByNumber(ctx, tag); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("back on the first branch: %s is %s (%v), want none: the block marked left the chain", tag, name(got), err)
		}
	}
}

func testChainID(t *testing.T, open func(*testing.T) Store) {
	ctx := context.Background()
	s := open(t)
	if err := s.SetChainID(5); err != nil {
		t.Fatal(err)
	}
	if id, err := s.ChainID(ctx); err != nil || id != 5 {
		t.Errorf("ChainID after SetChainID(5): %d, %v", id, err)
	}

	s = open(t)
	ref := buildChain(chaintest.Config{Seed: 3, ChainID: 77}, 3).Store()
	copyChain(t, s, ref)
	if id, err := s.ChainID(ctx); err != nil || id != 77 {
		t.Errorf("ChainID of a chain signed for 77: %d, %v", id, err)
	}
	if err := s.SetChainID(78); err == nil {
		t.Error("SetChainID(78) on a chain whose transactions are signed for 77 succeeded")
	}
	other := buildChain(chaintest.Config{Seed: 3, ChainID: 78}, 4)
	if err := s.AddBlock(other.Block(4)); err == nil {
		t.Error("a block signed for chain 78 was added to a chain of 77")
	}

	// An id set with SetChainID is the chain's as well: a block signed
	// for another is refused, and the id stays.
	s = open(t)
	if err := s.SetChainID(5); err != nil {
		t.Fatal(err)
	}
	signed, _ := ref.BlockByNumber(ctx, 1)
	if err := s.AddBlock(signed, unclesOf(t, ref, signed)...); err == nil {
		t.Error("a block signed for chain 77 was added to a chain set to 5")
	}
	if id, err := s.ChainID(ctx); err != nil || id != 5 {
		t.Errorf("ChainID after SetChainID(5) and a block signed for 77: %d, %v", id, err)
	}
}

func testCanceled(t *testing.T, s Store) {
	ref := buildChain(everyFork, 4).Store()
	copyChain(t, s, ref)
	head, _ := ref.BlockByNumber(context.Background(), backend.Latest)
	checkCanceled(t, s, 1, head.Hash)
}

// testConcurrentReaders reads while a writer switches the chain between
// two branches, stores the blocks of a third one by one, sets the tags
// again and sets and clears the pending block: every answer must be a
// whole block, the one asked for, and a reorganisation is one step, seen
// whole or not at all.
func testConcurrentReaders(t *testing.T, s Store) {
	ctx := context.Background()
	cfg := everyFork
	cfg.Seed = 21
	a := buildChain(cfg, 20)
	ref := a.Store()
	copyChain(t, s, ref)
	bb := a.Fork(12)
	bb.AddBlocks(10, chaintest.Txs(2))
	for n := uint64(13); n <= bb.Head().Number; n++ {
		writeBlock(t, s, ref, bb.Block(n), false)
	}
	// A third branch, stored some blocks at each reorganisation: readers
	// look blocks up while new ones are written, not only while the chain
	// moves.
	const perReorg = 10
	cc := a.Fork(12).AddBlocks(perReorg*40, nil)
	pending := a.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(1)(0, g) })
	setTags := func() {
		t.Helper()
		// Below the fork, where no reorganisation here unmarks them.
		if err := s.SetSafe(10); err != nil {
			t.Fatal(err)
		}
		if err := s.SetFinalized(8); err != nil {
			t.Fatal(err)
		}
	}
	setTags()
	branches := map[backend.Hash]bool{}
	for _, br := range []*chaintest.Builder{a, bb} {
		for n := uint64(0); n <= br.Head().Number; n++ {
			branches[br.Block(n).Hash] = true
		}
	}
	// branchOf tells the branch of a block above the fork: 0 for a's, 1
	// for bb's.
	branchOf := map[backend.Hash]int{}
	for n := uint64(13); n <= 22; n++ {
		if n <= 20 {
			branchOf[a.Block(n).Hash] = 0
		}
		branchOf[bb.Block(n).Hash] = 1
	}
	uncleOf := a.Block(6)
	uncle, err := s.UncleByBlockHashAndIndex(ctx, uncleOf.Hash, 0)
	if err != nil {
		t.Fatal(err)
	}
	chainID, err := ref.ChainID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A reorganisation is one step: the latest block is one of the two
	// heads, never a block between the fork and the head.
	heads := map[backend.Hash]bool{a.Head().Hash: true, bb.Head().Hash: true}

	// gen counts the writer's reorganisations twice, before and after
	// each: odd while one is under way. After k of them the chain is a's
	// for an even k, bb's for an odd one.
	var gen atomic.Int64
	// sweep reads the latest block, then every number above the fork, and
	// checks that a reader sees one chain, or when a reorganisation ends
	// during its reads the one before it and then the one after it: never
	// the chain after it and then again the one before.
	sweep := func() error {
		g1 := gen.Load()
		var seen []int
		var what []string
		b, err := s.BlockByNumber(ctx, backend.Latest)
		if err == nil && !heads[b.Hash] {
			err = fmt.Errorf("block %d (%s), not one of the two heads", b.Number, b.Hash)
		}
		if err != nil {
			return fmt.Errorf("the latest block during reorganisations: %v", err)
		}
		seen, what = append(seen, branchOf[b.Hash]), append(what, fmt.Sprintf("latest %d", b.Number))
		for n := uint64(13); n <= 22; n++ {
			b, err := s.BlockByNumber(ctx, backend.BlockNumber(n))
			switch {
			case n > 20 && errors.Is(err, backend.ErrNotFound):
				seen, what = append(seen, 0), append(what, fmt.Sprintf("%d none", n))
				continue
			case err != nil:
				return fmt.Errorf("block %d: %v", n, err)
			}
			br, ok := branchOf[b.Hash]
			if !ok || b.Number != n {
				return fmt.Errorf("block %d: got block %d (%s)", n, b.Number, b.Hash)
			}
			seen, what = append(seen, br), append(what, fmt.Sprintf("%d %s", n, [...]string{"a", "bb"}[br]))
		}
		g2 := gen.Load()
		k := g1 / 2
		if g2 > 2*k+2 {
			return nil // more than one reorganisation met: nothing to tell
		}
		before, after := int(k%2), int((k+1)%2)
		switched := false
		for i, br := range seen {
			switch {
			case br == after && g2 == g1 && g1%2 == 0:
				return fmt.Errorf("no reorganisation under way, but the reads saw another chain than the one written: %v", what[:i+1])
			case br == after:
				switched = true
			case br == before && switched:
				return fmt.Errorf("a reorganisation seen in parts: the chain after it, then again the one before it: %v", what[:i+1])
			}
		}
		return nil
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	var readers atomic.Int32
	errs := make(chan error, 8)
	for r := range 4 {
		wg.Add(1)
		readers.Add(1)
		go func() {
			defer wg.Done()
			defer readers.Add(-1)
			for i := 0; !stop.Load(); i++ {
				if i%4 == 0 {
					if err := sweep(); err != nil {
						errs <- err
						return
					}
				}
				if err := readOthers(ctx, s, cc[(i*3+r)%len(cc)], uncleOf.Hash, uncle.Hash, chainID, a.Block(0).Hash, a.Block(10).Hash, a.Block(8).Hash); err != nil {
					errs <- err
					return
				}
				n := backend.BlockNumber((i*7 + r) % 23)
				b, err := s.BlockByNumber(ctx, n)
				if err == nil {
					if uint64(n) != b.Number || !branches[b.Hash] {
						errs <- fmt.Errorf("block %d: got block %d (%s)", n, b.Number, b.Hash)
						return
					}
					if again, err := s.BlockByHash(ctx, b.Hash); err != nil || again.Hash != b.Hash {
						errs <- fmt.Errorf("block %s by hash: %v", b.Hash, err)
						return
					}
				} else if !errors.Is(err, backend.ErrNotFound) {
					errs <- fmt.Errorf("block %d: %v", n, err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := range 40 {
		head := a.Head()
		if i%2 == 0 {
			head = bb.Head()
		}
		gen.Add(1)
		writeBlock(t, s, ref, head, true)
		gen.Add(1)
		for j, b := range cc[perReorg*i : perReorg*(i+1)] {
			writeBlock(t, s, ref, b, false)
			setTags()
			p := pending
			if j%2 == 1 {
				p = nil
			}
			if err := s.SetPending(p); err != nil {
				t.Fatal(err)
			}
		}
		// Every reorganisation meets reads: a fast store would otherwise
		// make all forty before a reader is scheduled, and check nothing.
		at, deadline := reads.Load(), time.Now().Add(10*time.Second)
		for reads.Load() == at && readers.Load() > 0 {
			if time.Now().After(deadline) {
				t.Errorf("no read ended in the 10 s after reorganisation %d", i+1)
				break
			}
			runtime.Gosched()
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d reads during 40 reorgs", reads.Load())
}

// readOthers reads, during testConcurrentReaders' writes, what does not
// move: the earliest block, the tags (set again and again to the same
// blocks), the pending block (set and cleared), an uncle, the chain id
// and a block of the third branch by hash, stored or not yet.
func readOthers(ctx context.Context, s Store, side *backend.Block, uncleOf, uncle backend.Hash, chainID uint64, earliest, safe, finalized backend.Hash) error {
	for tag, want := range map[backend.BlockNumber]backend.Hash{backend.Earliest: earliest, backend.Safe: safe, backend.Finalized: finalized} {
		if b, err := s.BlockByNumber(ctx, tag); err != nil || b.Hash != want {
			return fmt.Errorf("the %s block during reorganisations below it: %v", tag, err)
		}
	}
	if b, err := s.BlockByNumber(ctx, backend.Pending); err == nil && !b.Pending {
		return errors.New("the pending block during its writes: Pending not set")
	} else if err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("the pending block during its writes: %v", err)
	}
	if u, err := s.UncleByBlockHashAndIndex(ctx, uncleOf, 0); err != nil || u.Hash != uncle {
		return fmt.Errorf("uncle 0 of %s during writes: %v", uncleOf, err)
	}
	if id, err := s.ChainID(ctx); err != nil || id != chainID {
		return fmt.Errorf("the chain id during writes: %d, %v", id, err)
	}
	if b, err := s.BlockByHash(ctx, side.Hash); err == nil && b.Hash != side.Hash {
		return fmt.Errorf("block %s by hash, written during the reads: got %s", side.Hash, b.Hash)
	} else if err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("block %s by hash, written during the reads: %v", side.Hash, err)
	}
	return nil
}
