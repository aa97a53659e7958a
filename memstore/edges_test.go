package memstore_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/holiman/uint256"
)

// Replacing the block at the largest number must not reorganise below it,
// and a number above the int64 range is refused: it could never be asked
// for by number.
func TestReplaceAtTheLargestNumber(t *testing.T) {
	s := memstore.New()
	g := add(t, s, genesis())
	add(t, s, newBlock(math.MaxInt64, backend.Hash{1}, "a"))
	c := add(t, s, newBlock(math.MaxInt64, backend.Hash{1}, "c"))
	wantBlock(t, s, 0, g)
	wantBlock(t, s, backend.Latest, c)
	wantBlock(t, s, backend.Earliest, g)
	if err := s.AddBlock(newBlock(math.MaxInt64+1, backend.Hash{1}, "too high")); err == nil || !strings.Contains(err.Error(), "int64") {
		t.Errorf("a block above the int64 range = %v, want refused", err)
	}
}

// Adding a stored block again checks a given total difficulty; one that a
// stored block did not know becomes known, with its descendants'.
func TestReaddWithTotalDifficulty(t *testing.T) {
	s := memstore.New()
	g := add(t, s, genesis())
	wrong := g.Copy()
	wrong.TotalDifficulty = uint256.NewInt(1)
	var mismatch *backend.MismatchError
	if err := s.AddBlock(wrong); !errors.As(err, &mismatch) || mismatch.Field != "totalDifficulty" {
		t.Errorf("re-adding the genesis with totalDifficulty 1 = %v, want a totalDifficulty mismatch", err)
	}
	if err := s.AddBlock(g); err != nil {
		t.Errorf("re-adding the genesis as stored: %v", err)
	}

	// A block whose parent is unknown, and its child: no totals known.
	orphan := add(t, s, newBlock(10, backend.Hash{9}, "orphan"))
	child := add(t, s, childOf(orphan, "child"))
	if orphan.TotalDifficulty != nil || child.TotalDifficulty != nil {
		t.Fatalf("totals known without the ancestry: %v, %v", orphan.TotalDifficulty, child.TotalDifficulty)
	}
	given := orphan.Copy()
	given.TotalDifficulty = uint256.NewInt(5000)
	if err := s.AddBlock(given); err != nil {
		t.Fatalf("re-adding with a total difficulty: %v", err)
	}
	got, err := s.BlockByHash(t.Context(), child.Hash)
	if err != nil || got.TotalDifficulty == nil || got.TotalDifficulty.Uint64() != 5000+child.Difficulty.Uint64() {
		t.Errorf("the child's total difficulty = %v, %v; want %d", got.TotalDifficulty, err, 5000+child.Difficulty.Uint64())
	}
	if orphan.TotalDifficulty != nil {
		t.Error("the block handed out before was changed")
	}
}

// A dump line is one object and nothing after it.
func TestLoadRefusesTrailingData(t *testing.T) {
	line := dumpLine(genesis())
	for _, bad := range []string{line + "]", line + "}", line + " ]]]", line + " x"} {
		_, err := memstore.Load(strings.NewReader(bad))
		var le *memstore.LineError
		if !errors.As(err, &le) || le.Line != 1 {
			t.Errorf("Load(%q...) = %v, want a line 1 error", bad[len(bad)-8:], err)
		}
	}
}
