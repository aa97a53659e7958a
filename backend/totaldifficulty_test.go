package backend_test

import (
	"errors"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// tdTree is a store's children lists kept in memory, with the parents the
// walk asked about, to tell where it went.
type tdTree struct {
	children map[backend.Hash][]backend.Descendant
	asked    map[backend.Hash]int
}

func newTDTree() *tdTree {
	return &tdTree{children: make(map[backend.Hash][]backend.Descendant), asked: make(map[backend.Hash]int)}
}

// add lists a child (a block, or uncle i of the block hash) under parent.
// td is its stored total, 0 for none.
func (tr *tdTree) add(parent, hash backend.Hash, uncle int, difficulty, td uint64) {
	d := backend.Descendant{Hash: hash, Uncle: uncle, Difficulty: *uint256.NewInt(difficulty)}
	if td != 0 {
		d.TD = uint256.NewInt(td)
	}
	tr.children[parent] = append(tr.children[parent], d)
}

func (tr *tdTree) list(parent backend.Hash) ([]backend.Descendant, error) {
	tr.asked[parent]++
	return tr.children[parent], nil
}

// tdKey names a descendant in the results, which come in no set order.
type tdKey struct {
	hash  backend.Hash
	uncle int
}

func tdHash(n int) backend.Hash { return backend.Hash{byte(n >> 8), byte(n), 0xdd} }

func tdResults(t *testing.T, found []backend.Descendant) map[tdKey]uint64 {
	t.Helper()
	out := make(map[tdKey]uint64)
	for _, d := range found {
		k := tdKey{d.Hash, d.Uncle}
		if _, dup := out[k]; dup {
			t.Errorf("%s uncle %d returned twice", d.Hash, d.Uncle)
		}
		if d.TD == nil {
			t.Errorf("%s uncle %d returned without a total", d.Hash, d.Uncle)
			continue
		}
		out[k] = d.TD.Uint64()
	}
	return out
}

// TestDescendantTotalDifficulties walks a tree of blocks with uncles below
// a block whose total becomes known: those without a total take their
// parent's plus their difficulty, through a deep chain, and the walk stops
// at one that already has the right total.
func TestDescendantTotalDifficulties(t *testing.T) {
	const chain = 2000
	root, a, b, c, settled, below := tdHash(1), tdHash(2), tdHash(3), tdHash(4), tdHash(5), tdHash(6)
	tr := newTDTree()
	tr.add(root, a, -1, 10, 0)         // a: 100+10
	tr.add(root, c, 0, 7, 0)           // c's uncle 0, a's sibling: 100+7
	tr.add(a, c, -1, 5, 0)             // c: 110+5
	tr.add(a, c, 1, 3, 0)              // c's uncle 1: 110+3
	tr.add(root, settled, -1, 20, 120) // already right
	tr.add(settled, below, -1, 1, 0)   // settled with it, so not walked to
	tr.add(c, b, -1, 2, 0)             // b: 115+2, the head of the chain
	parent := b
	for i := 0; i < chain; i++ {
		h := tdHash(100 + i)
		tr.add(parent, h, -1, 1, 0)
		parent = h
	}

	found, err := backend.DescendantTotalDifficulties(root, uint256.NewInt(100), tr.list)
	if err != nil {
		t.Fatal(err)
	}
	got := tdResults(t, found)
	want := map[tdKey]uint64{
		{a, -1}: 110,
		{c, 0}:  107,
		{c, -1}: 115,
		{c, 1}:  113,
		{b, -1}: 117,
	}
	for i := 0; i < chain; i++ {
		want[tdKey{tdHash(100 + i), -1}] = 117 + uint64(i) + 1
	}
	if len(got) != len(want) {
		t.Errorf("%d descendants take a total, want %d", len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s uncle %d: total %d (found %v), want %d", k.hash, k.uncle, g, ok, w)
		}
	}
	if tr.asked[settled] != 0 || tr.asked[below] != 0 {
		t.Errorf("the walk went past a descendant that had its total: asked %v", tr.asked)
	}
	if tr.asked[root] != 1 || tr.asked[a] != 1 || tr.asked[parent] != 1 {
		t.Errorf("each block with a new total is asked for once: root %d, a %d, chain end %d", tr.asked[root], tr.asked[a], tr.asked[parent])
	}
	for _, d := range tr.children[a] {
		if d.TD != nil {
			t.Errorf("the store's listing of %s was changed", d.Hash)
		}
	}
}

// TestDescendantTotalDifficultiesDisagree checks that a stored total the
// new one contradicts, however deep, fails the whole walk.
func TestDescendantTotalDifficultiesDisagree(t *testing.T) {
	root, a, wrong := tdHash(1), tdHash(2), tdHash(3)
	tr := newTDTree()
	tr.add(root, a, -1, 10, 0)
	tr.add(a, wrong, 0, 5, 999) // an uncle: 110+5 = 115 (0x73)
	found, err := backend.DescendantTotalDifficulties(root, uint256.NewInt(100), tr.list)
	const msg = "stored descendant 0x0003dd0000000000000000000000000000000000000000000000000000000000 has totalDifficulty 0x3e7, but this block makes it 0x73"
	if err == nil || err.Error() != msg {
		t.Fatalf("err = %v, want %s", err, msg)
	}
	if found != nil {
		t.Errorf("found %d on an error", len(found))
	}
}

// TestDescendantTotalDifficultiesStore checks the cases at the edges: no
// stored children, and a store that fails to list them.
func TestDescendantTotalDifficultiesStore(t *testing.T) {
	found, err := backend.DescendantTotalDifficulties(tdHash(1), uint256.NewInt(1), newTDTree().list)
	if err != nil || len(found) != 0 {
		t.Errorf("no children: found %d, err %v", len(found), err)
	}
	fail := errors.New("store failed")
	_, err = backend.DescendantTotalDifficulties(tdHash(1), uint256.NewInt(1), func(backend.Hash) ([]backend.Descendant, error) {
		return nil, fail
	})
	if !errors.Is(err, fail) {
		t.Errorf("err = %v, want the store's", err)
	}
}

// TestSettleTotalDifficultyOverflow checks that a total past 2^256-1 is an
// error (go-ethereum's is a big.Int), not one wrapped round to a small
// number that would be stored and served.
func TestSettleTotalDifficultyOverflow(t *testing.T) {
	var td *uint256.Int
	parent := new(uint256.Int).SetAllOne()
	err := backend.SettleTotalDifficulty("totalDifficulty", &td, parent, uint256.NewInt(2))
	if err == nil {
		t.Errorf("SettleTotalDifficulty(parent 2^256-1, difficulty 2) = %s, nil: the sum wrapped", td.Hex())
	}
}

// TestDescendantTotalDifficultiesOverflow is the same for a descendant
// stored before its parent.
func TestDescendantTotalDifficultiesOverflow(t *testing.T) {
	child := backend.Descendant{Hash: backend.Hash{2}, Uncle: -1, Difficulty: *uint256.NewInt(5)}
	found, err := backend.DescendantTotalDifficulties(backend.Hash{1}, new(uint256.Int).SetAllOne(), func(p backend.Hash) ([]backend.Descendant, error) {
		if p == (backend.Hash{1}) {
			return []backend.Descendant{child}, nil
		}
		return nil, nil
	})
	if err == nil {
		for _, d := range found {
			t.Errorf("descendant %s given totalDifficulty %s from a parent of 2^256-1 and difficulty 5: wrapped", d.Hash, d.TD.Hex())
		}
	}
}
