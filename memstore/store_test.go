package memstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/google/go-cmp/cmp"
	"github.com/holiman/uint256"
)

// fixtureBlock decodes the block that an eth_getBlockByNumber fixture file
// answers, skipping the test when the fixtures are not there.
func fixtureBlock(t *testing.T, file string) *backend.Block {
	t.Helper()
	data, err := os.ReadFile(fixtures.Path(t, "mainnet", "eth_getBlockByNumber", file))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Response struct {
			Result *backend.Block `json:"result"`
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(cases) == 0 || cases[0].Response.Result == nil {
		t.Fatalf("%s: no block in the first response", file)
	}
	return cases[0].Response.Result
}

// newBlock returns an empty block at number on top of parent, told apart
// from other blocks at that number by extra. Its difficulty is 1000+number,
// which the tests' total difficulties follow from.
func newBlock(number uint64, parent backend.Hash, extra string) *backend.Block {
	return &backend.Block{Header: backend.Header{
		ParentHash: parent,
		Number:     number,
		Difficulty: *uint256.NewInt(1000 + number),
		GasLimit:   30_000_000,
		Timestamp:  1_700_000_000 + 12*number,
		ExtraData:  []byte(extra),
	}}
}

// childOf returns an empty block on top of parent.
func childOf(parent *backend.Block, extra string) *backend.Block {
	return newBlock(parent.Number+1, parent.Hash, extra)
}

// uncleOf returns an uncle header on top of parent, with difficulty 500.
func uncleOf(parent *backend.Block, extra string) *backend.Uncle {
	u := &backend.Uncle{Header: childOf(parent, extra).Header}
	u.Difficulty = *uint256.NewInt(500)
	return u
}

// genesis returns the empty block 0 with a zero parent hash.
func genesis() *backend.Block { return newBlock(0, backend.Hash{}, "genesis") }

// add adds b with its uncles to s and returns the stored block, which is
// then the canonical block at b's number.
func add(t testing.TB, s *memstore.Store, b *backend.Block, uncles ...*backend.Uncle) *backend.Block {
	t.Helper()
	if err := s.AddBlock(b, uncles...); err != nil {
		t.Fatalf("AddBlock(block %d %q): %v", b.Number, b.ExtraData, err)
	}
	stored, err := s.BlockByNumber(context.Background(), backend.BlockNumber(b.Number))
	if err != nil {
		t.Fatalf("block %d %q just added: BlockByNumber: %v", b.Number, b.ExtraData, err)
	}
	return stored
}

// addChain adds n empty blocks on top of parent, each the child of the one
// before, and returns them as stored.
func addChain(t testing.TB, s *memstore.Store, parent *backend.Block, n int, tag string) []*backend.Block {
	t.Helper()
	chain := make([]*backend.Block, n)
	for i := range chain {
		parent = add(t, s, childOf(parent, fmt.Sprintf("%s%d", tag, parent.Number+1)))
		chain[i] = parent
	}
	return chain
}

// storedUncles returns the uncles stored with the block of the given hash.
func storedUncles(t testing.TB, s *memstore.Store, hash backend.Hash) []*backend.Uncle {
	t.Helper()
	var uncles []*backend.Uncle
	for i := uint64(0); ; i++ {
		u, err := s.UncleByBlockHashAndIndex(context.Background(), hash, i)
		if errors.Is(err, backend.ErrNotFound) {
			return uncles
		}
		if err != nil {
			t.Fatalf("UncleByBlockHashAndIndex(%s, %d): %v", hash, i, err)
		}
		uncles = append(uncles, u)
	}
}

// copyUncles returns deep copies of uncles.
func copyUncles(uncles []*backend.Uncle) []*backend.Uncle {
	c := make([]*backend.Uncle, len(uncles))
	for i, u := range uncles {
		c[i] = u.Copy()
	}
	return c
}

// blockJSON is the block object served for b with full transactions.
func blockJSON(b *backend.Block) []byte { return b.AppendJSON(nil, true) }

// jsonDiff returns the differences between two JSON documents as values,
// or "" when they are the same.
func jsonDiff(t testing.TB, got, want []byte) string {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("invalid JSON %.200s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("invalid JSON %.200s: %v", want, err)
	}
	return cmp.Diff(w, g)
}

// tdString formats a total difficulty for comparing and messages.
func tdString(td *uint256.Int) string {
	if td == nil {
		return "<nil>"
	}
	return td.Dec()
}

// wantNotStored fails unless s holds count blocks, none at b's number and
// none with hash, as after an AddBlock of b that failed.
func wantNotStored(t testing.TB, s *memstore.Store, count int, b *backend.Block, hash backend.Hash) {
	t.Helper()
	ctx := context.Background()
	if got := s.Len(); got != count {
		t.Errorf("Len() = %d after a failed AddBlock, want %d", got, count)
	}
	if got, err := s.BlockByHash(ctx, hash); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("BlockByHash(%s) after a failed AddBlock = block %v, %v; want ErrNotFound", hash, got != nil, err)
	}
	if got, err := s.BlockByNumber(ctx, backend.BlockNumber(b.Number)); err == nil && bytes.Equal(got.ExtraData, b.ExtraData) {
		t.Errorf("BlockByNumber(%d) after a failed AddBlock returns the refused block", b.Number)
	}
}

func TestAddBlockCopiesInput(t *testing.T) {
	s := memstore.New()
	parent := add(t, s, genesis())
	block, uncles := sampleBlock(parent)
	blockBefore, unclesBefore := block.Copy(), copyUncles(uncles)

	if err := s.AddBlock(block, uncles...); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(blockBefore, block); diff != "" {
		t.Errorf("AddBlock changed the caller's block (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(unclesBefore, uncles); diff != "" {
		t.Errorf("AddBlock changed the caller's uncles (-before +after):\n%s", diff)
	}

	stored, err := s.BlockByNumber(t.Context(), backend.BlockNumber(block.Number))
	if err != nil {
		t.Fatal(err)
	}
	storedJSON := string(blockJSON(stored))
	storedUncleJSON := string(storedUncles(t, s, stored.Hash)[0].AppendJSON(nil))

	// Change everything the caller can reach.
	block.ExtraData[0] ^= 0xff
	block.BaseFeePerGas.SetUint64(1)
	block.Difficulty.SetUint64(1)
	block.Transactions[0].Input[0] ^= 0xff
	block.Transactions[1].MaxFeePerGas.SetUint64(1)
	block.Transactions[1].To[0] ^= 0xff
	block.Transactions[0] = block.Transactions[1]
	block.Withdrawals[0].Amount++
	block.Number = 99
	uncles[0].ExtraData[0] ^= 0xff
	uncles[0].Number = 99

	got, err := s.BlockByHash(t.Context(), stored.Hash)
	if err != nil {
		t.Fatalf("BlockByHash after the caller changed its block: %v", err)
	}
	if diff := jsonDiff(t, blockJSON(got), []byte(storedJSON)); diff != "" {
		t.Errorf("changing the caller's block changed the stored one (-before +after):\n%s", diff)
	}
	u, err := s.UncleByBlockHashAndIndex(t.Context(), stored.Hash, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := jsonDiff(t, u.AppendJSON(nil), []byte(storedUncleJSON)); diff != "" {
		t.Errorf("changing the caller's uncle changed the stored one (-before +after):\n%s", diff)
	}
}

func TestTotalDifficultyFromParent(t *testing.T) {
	s := memstore.New()
	g := add(t, s, genesis())
	one := add(t, s, childOf(g, "one"))
	tests := []struct {
		name  string
		block *backend.Block
		want  string
	}{
		{"genesis: its own difficulty", g, "1000"},
		{"child of a known parent: parent's plus its own", one, "2001"},
		{"grandchild", add(t, s, childOf(one, "two")), "3003"},
		{"unknown parent: none", add(t, s, newBlock(7, backend.Hash{6}, "orphan")), "<nil>"},
		{"unknown parent, given: kept", add(t, s, withTD(newBlock(8, backend.Hash{7}, "given"), 123456)), "123456"},
		{"number 0 with a parent hash is no genesis", add(t, s, newBlock(0, backend.Hash{1}, "not genesis")), "<nil>"},
		{"a zero parent hash above number 0 is no genesis", add(t, s, newBlock(5, backend.Hash{}, "no parent")), "<nil>"},
		{"given and right: accepted", add(t, s, withTD(childOf(one, "given two"), 3003)), "3003"},
	}
	for _, tt := range tests {
		if got := tdString(tt.block.TotalDifficulty); got != tt.want {
			t.Errorf("%s: block %d has totalDifficulty %s, want %s", tt.name, tt.block.Number, got, tt.want)
		}
	}
}

// withTD returns b with the total difficulty td given.
func withTD(b *backend.Block, td uint64) *backend.Block {
	b.TotalDifficulty = uint256.NewInt(td)
	return b
}

func TestTotalDifficultyMismatchStoresNothing(t *testing.T) {
	tests := []struct {
		name string
		// setup adds blocks to s and returns the block to refuse.
		setup func(t *testing.T, s *memstore.Store) *backend.Block
	}{
		{"child disagrees with its parent", func(t *testing.T, s *memstore.Store) *backend.Block {
			g := add(t, s, genesis())
			return withTD(childOf(g, "child"), 2000) // 1000 + 1001 = 2001
		}},
		{"genesis disagrees with its difficulty", func(t *testing.T, s *memstore.Store) *backend.Block {
			return withTD(genesis(), 999)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New()
			b := tt.setup(t, s)
			before := s.Len()
			err := s.AddBlock(b)
			var mm *backend.MismatchError
			if !errors.As(err, &mm) || mm.Field != "totalDifficulty" {
				t.Fatalf("AddBlock = %v, want a *backend.MismatchError for totalDifficulty", err)
			}
			wantNotStored(t, s, before, b, backend.HeaderHash(&b.Header))
		})
	}

	t.Run("late parent disagrees with a stored descendant", func(t *testing.T) {
		s := memstore.New()
		g := add(t, s, genesis())
		one := add(t, memstore.New(), childOf(g, "one")) // sealed elsewhere, for its hash
		add(t, s, withTD(childOf(one, "two"), 1))        // parent unknown: the given value is kept

		err := s.AddBlock(childOf(g, "one"))
		if err == nil {
			t.Fatal("AddBlock of a parent that makes a stored child's totalDifficulty wrong succeeded")
		}
		if !strings.Contains(err.Error(), "totalDifficulty") {
			t.Errorf("error %q does not name totalDifficulty", err)
		}
		wantNotStored(t, s, 2, one, one.Hash)
	})
}

func TestTotalDifficultyLateParent(t *testing.T) {
	ctx := t.Context()
	// Seal the chain g, b1, b2, b3 elsewhere; b3 has an uncle whose parent
	// is b1.
	scratch := memstore.New()
	g := add(t, scratch, genesis())
	b1 := add(t, scratch, childOf(g, "b1"))
	b2 := add(t, scratch, childOf(b1, "b2"))
	b3 := add(t, scratch, childOf(b2, "b3"), uncleOf(b1, "u2"))
	uncle := storedUncles(t, scratch, b3.Hash)[0]

	fork := []sealed{{block: b1}, {block: b2}, {block: b3, uncle: uncle}}

	s := memstore.New()
	add(t, s, g)
	// The children come first, without total difficulties.
	if err := addHeadFirst(s, fork[1:]); err != nil {
		t.Fatal(err)
	}
	oldB2, _ := s.BlockByHash(ctx, b2.Hash)
	oldB3, _ := s.BlockByHash(ctx, b3.Hash)
	oldUncle, err := s.UncleByBlockHashAndIndex(ctx, b3.Hash, 0)
	if err != nil || oldB2 == nil || oldB3 == nil {
		t.Fatalf("blocks 2 and 3 and the uncle are not all stored: %v", err)
	}
	for name, td := range map[string]*uint256.Int{
		"block 2": oldB2.TotalDifficulty, "block 3": oldB3.TotalDifficulty, "uncle": oldUncle.TotalDifficulty,
	} {
		if td != nil {
			t.Fatalf("%s, added before its parent, has totalDifficulty %s, want none", name, tdString(td))
		}
	}

	if err := addHeadFirst(s, fork[:1]); err != nil {
		t.Fatal(err)
	}

	// Difficulties are 1000+number, and 500 for the uncle.
	for _, tt := range []struct {
		block *backend.Block
		want  string
	}{{b1, "2001"}, {b2, "3003"}, {b3, "4006"}} {
		got, err := s.BlockByHash(ctx, tt.block.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if tdString(got.TotalDifficulty) != tt.want {
			t.Errorf("block %d after its ancestor arrived: totalDifficulty %s, want %s", got.Number, tdString(got.TotalDifficulty), tt.want)
		}
	}
	gotUncle, err := s.UncleByBlockHashAndIndex(ctx, b3.Hash, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := tdString(gotUncle.TotalDifficulty); got != "2501" {
		t.Errorf("uncle after its parent arrived: totalDifficulty %s, want 2501 (its parent's 2001 plus its own 500)", got)
	}
	for name, td := range map[string]*uint256.Int{
		"block 2": oldB2.TotalDifficulty, "block 3": oldB3.TotalDifficulty, "uncle": oldUncle.TotalDifficulty,
	} {
		if td != nil {
			t.Errorf("the %s returned before its ancestor arrived was changed: totalDifficulty %s, want none", name, tdString(td))
		}
	}
}

func TestUncleTotalDifficulty(t *testing.T) {
	s := memstore.New()
	g := add(t, s, genesis())
	b1 := add(t, s, childOf(g, "b1"))
	b2 := add(t, s, childOf(b1, "b2"), uncleOf(g, "known parent"), uncleOf(newBlock(0, backend.Hash{9}, "x"), "unknown parent"))

	uncles := storedUncles(t, s, b2.Hash)
	if len(uncles) != 2 {
		t.Fatalf("block has %d uncles, want 2", len(uncles))
	}
	if got := tdString(uncles[0].TotalDifficulty); got != "1500" {
		t.Errorf("uncle of the genesis: totalDifficulty %s, want 1500 (the genesis's 1000 plus its own 500)", got)
	}
	if got := tdString(uncles[1].TotalDifficulty); got != "<nil>" {
		t.Errorf("uncle with an unknown parent: totalDifficulty %s, want none", got)
	}
}

// forkTree seals a tree of empty blocks and returns them by name: a main
// chain m0 (the genesis) to m9, a fork a5-a7 off m4, and x3-x4 off m2.
func forkTree(t *testing.T) map[string]*backend.Block {
	t.Helper()
	s := memstore.New()
	tree := map[string]*backend.Block{"m0": add(t, s, genesis())}
	for _, edge := range []struct{ name, parent string }{
		{"m1", "m0"}, {"m2", "m1"}, {"m3", "m2"}, {"m4", "m3"}, {"m5", "m4"},
		{"m6", "m5"}, {"m7", "m6"}, {"m8", "m7"}, {"m9", "m8"},
		{"a5", "m4"}, {"a6", "a5"}, {"a7", "a6"},
		{"x3", "m2"}, {"x4", "x3"},
	} {
		tree[edge.name] = add(t, s, childOf(tree[edge.parent], edge.name))
	}
	return tree
}

func TestCanonicalChain(t *testing.T) {
	const main = "m0 m1 m2 m3 m4 m5 m6 m7 m8 m9 "
	tests := []struct {
		name string
		adds string // block names of forkTree, in the order added
		want string // the canonical blocks, by number
	}{
		{"a chain in order", "m0 m1 m2 m3 m4 m5", "m0 m1 m2 m3 m4 m5"},
		{"a gap is allowed", "m0 m1 m3", "m0 m1 m3"},
		{"a parent fills the gap", "m0 m1 m3 m2", "m0 m1 m2 m3"},
		{"a fork replaces the head and drops what is above", main + "a5", "m0 m1 m2 m3 m4 a5"},
		{"a longer fork", main + "a5 a6 a7", "m0 m1 m2 m3 m4 a5 a6 a7"},
		{"re-adding the old head restores its ancestors", main + "a5 a6 a7 m9", main},
		{"re-adding a block drops the fork above it", main + "a5 a6 a7 m5", "m0 m1 m2 m3 m4 m5"},
		{"a fork's head makes its stored ancestors canonical", "m0 m1 m2 m3 m4 a5 a6 m5 m6 m7 a7", "m0 m1 m2 m3 m4 a5 a6 a7"},
		{"a child added before its parent stays canonical", "m0 m1 m2 m3 x4 x3", "m0 m1 m2 x3 x4"},
		{"a block above a gap is dropped by a replacement below", "m0 m1 m2 m3 m5 x3", "m0 m1 m2 x3"},
		{"re-adding the head changes nothing", "m0 m1 m2 m2", "m0 m1 m2"},
		{"a block filling part of a gap keeps the block above the gap", "m0 m1 m5 m2", "m0 m1 m2 m5"},
		{"a fork's ancestor replacing a block drops what is above a gap", "m0 m1 m2 x3 m3 m6 x4", "m0 m1 m2 x3 x4"},
		{"re-adding a block keeps the head above it", "m0 m1 m2 m3 m4 m5 a6 m5", "m0 m1 m2 m3 m4 m5 a6"},
	}
	tree := forkTree(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			s := memstore.New()
			added := map[string]bool{}
			for _, name := range strings.Fields(tt.adds) {
				if err := s.AddBlock(tree[name]); err != nil {
					t.Fatalf("AddBlock(%s): %v", name, err)
				}
				added[name] = true
			}

			want := make(map[uint64]string)
			for _, name := range strings.Fields(tt.want) {
				want[tree[name].Number] = name
			}
			for n := uint64(0); n <= 9; n++ {
				got, err := s.BlockByNumber(ctx, backend.BlockNumber(n))
				switch {
				case want[n] == "" && !errors.Is(err, backend.ErrNotFound):
					t.Errorf("BlockByNumber(%d) = %s, %v; want ErrNotFound", n, nameOf(tree, got), err)
				case want[n] != "" && (err != nil || got.Hash != tree[want[n]].Hash):
					t.Errorf("BlockByNumber(%d) = %s, %v; want %s", n, nameOf(tree, got), err, want[n])
				}
			}
			names := strings.Fields(tt.want)
			for tag, want := range map[backend.BlockNumber]string{backend.Earliest: names[0], backend.Latest: names[len(names)-1]} {
				if got, err := s.BlockByNumber(ctx, tag); err != nil || got.Hash != tree[want].Hash {
					t.Errorf("BlockByNumber(%v) = %s, %v; want %s", tag, nameOf(tree, got), err, want)
				}
			}
			for name := range added {
				if got, err := s.BlockByHash(ctx, tree[name].Hash); err != nil || got.Hash != tree[name].Hash {
					t.Errorf("BlockByHash(%s) = %s, %v; want it found whether canonical or not", name, nameOf(tree, got), err)
				}
			}
			if got := s.Len(); got != len(added) {
				t.Errorf("Len() = %d, want %d", got, len(added))
			}
		})
	}
}

// nameOf returns the name of b in tree, for messages.
func nameOf(tree map[string]*backend.Block, b *backend.Block) string {
	if b == nil {
		return "<nil>"
	}
	for name, tb := range tree {
		if tb.Hash == b.Hash {
			return name
		}
	}
	return fmt.Sprintf("unknown block %d %s", b.Number, b.Hash)
}

func TestTags(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	for _, tag := range []backend.BlockNumber{backend.Earliest, backend.Latest, backend.Safe, backend.Finalized, backend.Pending} {
		if _, err := s.BlockByNumber(ctx, tag); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("empty store: BlockByNumber(%v) error = %v, want ErrNotFound", tag, err)
		}
	}

	// A sparse chain: 0, 5 and 100, unrelated.
	blocks := map[uint64]*backend.Block{}
	for _, n := range []uint64{5, 100, 0} {
		parent := backend.Hash{byte(n)}
		if n == 0 {
			parent = backend.Hash{}
		}
		blocks[n] = add(t, s, newBlock(n, parent, "sparse"))
	}
	for _, tt := range []struct {
		number backend.BlockNumber
		want   *backend.Block
	}{
		{backend.Earliest, blocks[0]},
		{backend.Latest, blocks[100]},
		{5, blocks[5]},
		{50, nil},
		{101, nil},
		{backend.Safe, nil},
		{backend.Finalized, nil},
	} {
		wantBlock(t, s, tt.number, tt.want)
	}

	if err := s.SetSafe(50); err == nil {
		t.Error("SetSafe(50) with no block 50 succeeded")
	}
	if err := s.SetFinalized(50); err == nil {
		t.Error("SetFinalized(50) with no block 50 succeeded")
	}
	wantBlock(t, s, backend.Safe, nil)
	wantBlock(t, s, backend.Finalized, nil)

	if err := s.SetSafe(5); err != nil {
		t.Fatalf("SetSafe(5): %v", err)
	}
	wantBlock(t, s, backend.Safe, blocks[5])
	wantBlock(t, s, backend.Finalized, nil)
	if err := s.SetFinalized(0); err != nil {
		t.Fatalf("SetFinalized(0): %v", err)
	}
	wantBlock(t, s, backend.Finalized, blocks[0])
	wantBlock(t, s, backend.Safe, blocks[5])
}

// wantBlock fails unless BlockByNumber(number) returns want, or
// ErrNotFound when want is nil.
func wantBlock(t testing.TB, s *memstore.Store, number backend.BlockNumber, want *backend.Block) {
	t.Helper()
	got, err := s.BlockByNumber(context.Background(), number)
	switch {
	case want == nil && !errors.Is(err, backend.ErrNotFound):
		t.Errorf("BlockByNumber(%v) = %v, %v; want ErrNotFound", number, got, err)
	case want != nil && err != nil:
		t.Errorf("BlockByNumber(%v): %v; want block %d", number, err, want.Number)
	case want != nil && got.Hash != want.Hash:
		t.Errorf("BlockByNumber(%v) = block %d %s, want block %d %s", number, got.Number, got.Hash, want.Number, want.Hash)
	}
}

func TestPending(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	g := add(t, s, genesis())
	block := childOf(g, "pending")

	if err := s.SetPending(block); err != nil {
		t.Fatalf("SetPending: %v", err)
	}
	if block.Pending || block.Hash != (backend.Hash{}) {
		t.Error("SetPending changed the caller's block")
	}
	got, err := s.BlockByNumber(ctx, backend.Pending)
	if err != nil {
		t.Fatalf("BlockByNumber(pending): %v", err)
	}
	if !got.Pending || got.Number != 1 || got.ParentHash != g.Hash {
		t.Errorf("pending block: Pending %v, number %d, parent %s; want true, 1, %s", got.Pending, got.Number, got.ParentHash, g.Hash)
	}
	if got := tdString(got.TotalDifficulty); got != "2001" {
		t.Errorf("pending block: totalDifficulty %s, want 2001 (the genesis's 1000 plus its own 1001)", got)
	}
	if js := string(blockJSON(got)); !strings.Contains(js, `"hash":null`) || !strings.Contains(js, `"number":null`) {
		t.Errorf("pending block is served with a hash or number: %.300s", js)
	}
	if _, err := s.BlockByHash(ctx, backend.HeaderHash(&got.Header)); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("BlockByHash(pending block's hash) error = %v, want ErrNotFound", err)
	}
	wantBlock(t, s, backend.Latest, g)
	wantBlock(t, s, 1, nil)

	if err := s.SetPending(nil); err != nil {
		t.Fatalf("SetPending(nil): %v", err)
	}
	wantBlock(t, s, backend.Pending, nil)

	bad := childOf(g, "bad size")
	bad.Size = 1
	var mm *backend.MismatchError
	if err := s.SetPending(bad); !errors.As(err, &mm) || mm.Field != "size" {
		t.Errorf("SetPending(block with a wrong size) = %v, want a *backend.MismatchError for size", err)
	}

	marked := childOf(g, "marked pending")
	marked.Pending = true
	if err := s.AddBlock(marked); err == nil {
		t.Error("AddBlock of a block with Pending set succeeded")
	}
	marked.Pending = false
	wantNotStored(t, s, 1, marked, backend.HeaderHash(&marked.Header))
}

func TestUncleByBlockHashAndIndex(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	g := add(t, s, genesis())
	b1 := add(t, s, childOf(g, "b1"))
	given := []*backend.Uncle{uncleOf(g, "u0"), uncleOf(g, "u1")}
	b2 := add(t, s, childOf(b1, "b2"), given...)
	add(t, s, childOf(b1, "b2 fork")) // b2 is no longer canonical

	tests := []struct {
		hash  backend.Hash
		index uint64
		want  *backend.Uncle
	}{
		{b2.Hash, 0, given[0]},
		{b2.Hash, 1, given[1]},
		{b2.Hash, 2, nil},
		{b2.Hash, 1 << 63, nil},
		{b1.Hash, 0, nil},
		{backend.Hash{0xde, 0xad}, 0, nil},
	}
	for _, tt := range tests {
		got, err := s.UncleByBlockHashAndIndex(ctx, tt.hash, tt.index)
		if tt.want == nil {
			if !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("UncleByBlockHashAndIndex(%s, %d) = %v, %v; want ErrNotFound", tt.hash, tt.index, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("UncleByBlockHashAndIndex(%s, %d): %v", tt.hash, tt.index, err)
			continue
		}
		if !bytes.Equal(got.ExtraData, tt.want.ExtraData) {
			t.Errorf("UncleByBlockHashAndIndex(%s, %d) = uncle %q, want %q", tt.hash, tt.index, got.ExtraData, tt.want.ExtraData)
		}
		if want := backend.HeaderHash(&tt.want.Header); got.Hash != want {
			t.Errorf("uncle %d: hash %s, want %s", tt.index, got.Hash, want)
		}
		if want := backend.UncleSize(&tt.want.Header); got.Size != want {
			t.Errorf("uncle %d: size %d, want %d", tt.index, got.Size, want)
		}
	}
}

func TestReadsHonourCancelledContext(t *testing.T) {
	s := memstore.New()
	g := add(t, s, genesis())
	b1 := add(t, s, childOf(g, "b1"), uncleOf(g, "u"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	reads := map[string]func() error{
		"BlockByNumber(1)": func() error { _, err := s.BlockByNumber(ctx, 1); return err },
		"BlockByNumber(latest)": func() error {
			_, err := s.BlockByNumber(ctx, backend.Latest)
			return err
		},
		"BlockByHash":              func() error { _, err := s.BlockByHash(ctx, b1.Hash); return err },
		"UncleByBlockHashAndIndex": func() error { _, err := s.UncleByBlockHashAndIndex(ctx, b1.Hash, 0); return err },
	}
	for name, read := range reads {
		if err := read(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: error %v, want context.Canceled", name, err)
		}
	}
}

// TestConcurrentAddsAndReads adds forks from several goroutines, each fork
// from its head down, so that total difficulties are filled in while other
// goroutines read and save. Run it with -race.
func TestConcurrentAddsAndReads(t *testing.T) {
	const (
		writers        = 3
		forksPerWriter = 8
		length         = 12 // blocks in a fork
		readers        = 2
		minReads       = 20 // by each reader, however fast the writers are
	)
	// Seal the forks elsewhere, each block after the first with an uncle
	// whose parent is its grandparent, and keep what they settle to.
	scratch := memstore.New()
	g := add(t, scratch, genesis())
	forks := make([][]sealed, writers*forksPerWriter)
	final := map[backend.Hash]sealed{g.Hash: {block: g}}
	for f := range forks {
		grandparent, parent := (*backend.Block)(nil), g
		for range length {
			var uncles []*backend.Uncle
			if grandparent != nil {
				uncles = append(uncles, uncleOf(grandparent, fmt.Sprintf("fork %d uncle", f)))
			}
			b := add(t, scratch, childOf(parent, fmt.Sprintf("fork %d", f)), uncles...)
			sb := sealed{block: b}
			if us := storedUncles(t, scratch, b.Hash); len(us) > 0 {
				sb.uncle = us[0]
			}
			forks[f] = append(forks[f], sb)
			final[b.Hash] = sb
			grandparent, parent = parent, b
		}
	}

	s := memstore.New()
	add(t, s, g)
	var writing, reading sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, writers+readers+1)
	writing.Add(writers)
	for w := range writers {
		go func() {
			defer writing.Done()
			for f := w; f < len(forks); f += writers {
				if err := addHeadFirst(s, forks[f]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	repeat := func(read func() error) {
		defer reading.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				if i >= minReads {
					return
				}
			default:
			}
			if err := read(); err != nil {
				errs <- err
				return
			}
		}
	}
	reading.Add(readers + 1)
	for r := range readers {
		go repeat(func() error { return readConsistently(s, final, forks[r]) })
	}
	go repeat(func() error { return saveAndLoad(s) })

	writing.Wait()
	close(done)
	reading.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	if got, want := s.Len(), len(final); got != want {
		t.Errorf("Len() = %d after all adds, want %d", got, want)
	}
	for hash, want := range final {
		if err := wantSettled(s, hash, want.block, want.uncle); err != nil {
			t.Error(err)
		}
	}
}

// addHeadFirst adds a fork of sealed blocks without their total
// difficulties, from the head down: each block's is filled in when the
// fork's first block arrives.
func addHeadFirst(s *memstore.Store, fork []sealed) error {
	for i := len(fork) - 1; i >= 0; i-- {
		b := fork[i].block.Copy()
		b.TotalDifficulty = nil
		var uncles []*backend.Uncle
		if u := fork[i].uncle; u != nil {
			u = u.Copy()
			u.TotalDifficulty = nil
			uncles = append(uncles, u)
		}
		if err := s.AddBlock(b, uncles...); err != nil {
			return err
		}
	}
	return nil
}

// sealed is a block as a store settled it, with its uncle.
type sealed struct {
	block *backend.Block
	uncle *backend.Uncle // nil for a block without uncles
}

// readConsistently reads the canonical chain and a fork through every read
// method, and reports what does not hold together.
func readConsistently(s *memstore.Store, final map[backend.Hash]sealed, fork []sealed) error {
	ctx := context.Background()
	head, err := s.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		return fmt.Errorf("BlockByNumber(latest): %w", err)
	}
	for n := head.Number; ; n-- {
		b, err := s.BlockByNumber(ctx, backend.BlockNumber(n))
		if err == nil {
			if b.Number != n {
				return fmt.Errorf("BlockByNumber(%d) returned block %d", n, b.Number)
			}
			if err := checkAgainst(s, b, final); err != nil {
				return err
			}
		} else if !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("BlockByNumber(%d): %w", n, err)
		}
		if n == 0 {
			break
		}
	}
	for _, sb := range fork {
		// The uncle is read first: once it is there, so is its block.
		u, uerr := s.UncleByBlockHashAndIndex(ctx, sb.block.Hash, 0)
		b, berr := s.BlockByHash(ctx, sb.block.Hash)
		switch {
		case uerr == nil && (sb.uncle == nil || u.Hash != sb.uncle.Hash):
			return fmt.Errorf("uncle 0 of block %s is %s, want %v", sb.block.Hash, u.Hash, sb.uncle)
		case uerr == nil && berr != nil:
			return fmt.Errorf("uncle of block %s found, then the block was not: %v", sb.block.Hash, berr)
		case uerr != nil && !errors.Is(uerr, backend.ErrNotFound):
			return uerr
		case uerr == nil && u.TotalDifficulty != nil && tdString(u.TotalDifficulty) != tdString(sb.uncle.TotalDifficulty):
			return fmt.Errorf("uncle of block %s has totalDifficulty %s, want %s", sb.block.Hash, tdString(u.TotalDifficulty), tdString(sb.uncle.TotalDifficulty))
		case berr == nil:
			if err := checkAgainst(s, b, final); err != nil {
				return err
			}
		case !errors.Is(berr, backend.ErrNotFound):
			return berr
		}
	}
	return nil
}

// checkAgainst checks a block read from s against how it was sealed: found
// by its hash, and with no total difficulty or the right one.
func checkAgainst(s *memstore.Store, b *backend.Block, final map[backend.Hash]sealed) error {
	want, ok := final[b.Hash]
	if !ok {
		return fmt.Errorf("block %d %s was never added", b.Number, b.Hash)
	}
	if b.Number != want.block.Number {
		return fmt.Errorf("block %s has number %d, want %d", b.Hash, b.Number, want.block.Number)
	}
	if b.TotalDifficulty != nil && tdString(b.TotalDifficulty) != tdString(want.block.TotalDifficulty) {
		return fmt.Errorf("block %d %s has totalDifficulty %s, want %s", b.Number, b.Hash, tdString(b.TotalDifficulty), tdString(want.block.TotalDifficulty))
	}
	byHash, err := s.BlockByHash(context.Background(), b.Hash)
	if err != nil {
		return fmt.Errorf("block %d %s read by number is not found by hash: %w", b.Number, b.Hash, err)
	}
	if byHash.Hash != b.Hash || byHash.Number != b.Number {
		return fmt.Errorf("BlockByHash(%s) returned block %d %s", b.Hash, byHash.Number, byHash.Hash)
	}
	return nil
}

// saveAndLoad saves s and loads the dump back.
func saveAndLoad(s *memstore.Store) error {
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		return fmt.Errorf("Save: %w", err)
	}
	if _, err := memstore.Load(&buf); err != nil {
		return fmt.Errorf("Load of a dump saved during adds: %w", err)
	}
	return nil
}

// wantSettled checks that s holds the block of hash as it was sealed, with
// its total difficulty and uncle.
func wantSettled(s *memstore.Store, hash backend.Hash, want *backend.Block, wantUncle *backend.Uncle) error {
	ctx := context.Background()
	got, err := s.BlockByHash(ctx, hash)
	if err != nil {
		return fmt.Errorf("block %d %s: %w", want.Number, hash, err)
	}
	if tdString(got.TotalDifficulty) != tdString(want.TotalDifficulty) {
		return fmt.Errorf("block %d %s: totalDifficulty %s, want %s", want.Number, hash, tdString(got.TotalDifficulty), tdString(want.TotalDifficulty))
	}
	if wantUncle == nil {
		return nil
	}
	u, err := s.UncleByBlockHashAndIndex(ctx, hash, 0)
	if err != nil {
		return fmt.Errorf("uncle of block %d: %w", want.Number, err)
	}
	if u.Hash != wantUncle.Hash || tdString(u.TotalDifficulty) != tdString(wantUncle.TotalDifficulty) {
		return fmt.Errorf("uncle of block %d: %s with totalDifficulty %s, want %s with %s", want.Number, u.Hash, tdString(u.TotalDifficulty), wantUncle.Hash, tdString(wantUncle.TotalDifficulty))
	}
	return nil
}

// TestReorgClearsTags replaces the blocks that safe and finalized select:
// a tag whose block leaves the canonical chain is cleared, and does not
// select the block that later takes its number.
func TestReorgClearsTags(t *testing.T) {
	for _, tagged := range []uint64{2, 3} {
		t.Run(fmt.Sprintf("safe at %d", tagged), func(t *testing.T) {
			s := memstore.New()
			g := add(t, s, genesis())
			main := addChain(t, s, g, 3, "m") // m1 m2 m3
			if err := s.SetSafe(tagged); err != nil {
				t.Fatal(err)
			}
			if err := s.SetFinalized(1); err != nil {
				t.Fatal(err)
			}
			fork := addChain(t, s, main[0], 2, "a") // a2 replaces m2, a3 m3
			wantBlock(t, s, backend.Safe, nil)
			wantBlock(t, s, backend.Finalized, main[0])
			wantBlock(t, s, backend.Latest, fork[1])
		})
	}
}

// TestEarliestOfAChainWithoutGenesis serves a chain that starts above 0, as
// a dump of a chain's recent blocks does: earliest is its first block.
func TestEarliestOfAChainWithoutGenesis(t *testing.T) {
	s := memstore.New()
	first := add(t, s, newBlock(5, backend.Hash{4}, "first"))
	next := add(t, s, childOf(first, "next"))
	wantBlock(t, s, backend.Earliest, first)
	wantBlock(t, s, backend.Latest, next)
}

// TestAncestorsBecomeCanonical adds a genesis as a side block, then its
// child: the child's known ancestors, down to block 0, become canonical.
// A stored parent whose number does not precede the block's is no
// ancestor at a number.
func TestAncestorsBecomeCanonical(t *testing.T) {
	scratch := memstore.New()
	g := add(t, scratch, genesis())
	side := add(t, scratch, childOf(g, "side"))

	s := memstore.New()
	if err := s.AddSideBlock(g); err != nil {
		t.Fatal(err)
	}
	one := add(t, s, childOf(g, "one"))
	wantBlock(t, s, 0, g)
	wantBlock(t, s, backend.Earliest, g)
	wantBlock(t, s, backend.Latest, one)

	if err := s.AddSideBlock(side); err != nil {
		t.Fatal(err)
	}
	high := add(t, s, newBlock(5, side.Hash, "above a block 1"))
	wantBlock(t, s, 1, one)
	for n := backend.BlockNumber(2); n < 5; n++ {
		wantBlock(t, s, n, nil)
	}
	wantBlock(t, s, backend.Latest, high)
}

// TestReaddGivesTheBlockItsTotalDifficulty re-adds a stored block that had
// no total difficulty with one: the block itself takes it, not only its
// descendants.
func TestReaddGivesTheBlockItsTotalDifficulty(t *testing.T) {
	s := memstore.New()
	orphan := add(t, s, newBlock(10, backend.Hash{9}, "orphan"))
	given := orphan.Copy()
	given.TotalDifficulty = uint256.NewInt(5000)
	if err := s.AddBlock(given); err != nil {
		t.Fatal(err)
	}
	got, err := s.BlockByHash(t.Context(), orphan.Hash)
	if err != nil || tdString(got.TotalDifficulty) != "5000" {
		t.Errorf("the re-added block's total difficulty = %v, %v; want 5000", got.TotalDifficulty, err)
	}
}
