package memstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
)

// dumpLine returns the dump line of a block and its uncles, without the
// newline.
func dumpLine(b *backend.Block, uncles ...*backend.Uncle) string {
	line := append([]byte(`{"block":`), b.AppendJSON(nil, true)...)
	if len(uncles) > 0 {
		line = append(line, `,"uncles":[`...)
		for i, u := range uncles {
			if i > 0 {
				line = append(line, ',')
			}
			line = u.AppendJSON(line)
		}
		line = append(line, ']')
	}
	return string(append(line, '}'))
}

func TestLoadAppliesLinesInOrder(t *testing.T) {
	ctx := t.Context()
	scratch := memstore.New()
	g := add(t, scratch, genesis())
	a1 := add(t, scratch, childOf(g, "a1"), uncleOf(g, "uncle"))
	uncle := storedUncles(t, scratch, a1.Hash)[0]
	b1 := add(t, scratch, childOf(g, "b1"))

	dump := strings.Join([]string{
		dumpLine(g),
		"",
		dumpLine(a1, uncle),
		"   \t",
		dumpLine(b1), // the last line has no newline
	}, "\n")
	s, err := memstore.Load(strings.NewReader(dump))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := s.Len(); got != 3 {
		t.Errorf("Len() = %d, want 3", got)
	}
	wantBlock(t, s, 1, b1)
	wantBlock(t, s, backend.Latest, b1)
	wantBlock(t, s, backend.Earliest, g)
	if got, err := s.BlockByHash(ctx, a1.Hash); err != nil || got.Hash != a1.Hash {
		t.Errorf("BlockByHash(block of the earlier line at number 1) = %v, %v; want it found", got, err)
	}
	if got, err := s.UncleByBlockHashAndIndex(ctx, a1.Hash, 0); err != nil || got.Hash != uncle.Hash {
		t.Errorf("UncleByBlockHashAndIndex(a1, 0) = %v, %v; want the uncle of its line", got, err)
	}
}

// A line marked "canonical": false stores its block by hash and leaves the
// canonical chain alone, as AddSideBlock does.
func TestLoadSideChainLines(t *testing.T) {
	ctx := t.Context()
	scratch := memstore.New()
	g := add(t, scratch, genesis())
	a1 := add(t, scratch, childOf(g, "a1"))
	side := add(t, scratch, childOf(g, "side"))
	sideLine := strings.TrimSuffix(dumpLine(side), "}") + `,"canonical":false}`

	s, err := memstore.Load(strings.NewReader(dumpLine(g) + "\n" + dumpLine(a1) + "\n" + sideLine + "\n"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	wantBlock(t, s, 1, a1)
	wantBlock(t, s, backend.Latest, a1)
	got, err := s.BlockByHash(ctx, side.Hash)
	if err != nil || got.TotalDifficulty == nil || !got.TotalDifficulty.Eq(side.TotalDifficulty) {
		t.Errorf("the side block = %v, %v; want it stored with its total difficulty", got, err)
	}

	// The same through the API, and "canonical": true is the default.
	direct := memstore.New()
	for _, b := range []*backend.Block{g, a1} {
		if err := direct.AddBlock(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := direct.AddSideBlock(side); err != nil {
		t.Fatal(err)
	}
	wantBlock(t, direct, 1, a1)
	explicit := strings.TrimSuffix(dumpLine(side), "}") + `,"canonical":true}`
	s, err = memstore.Load(strings.NewReader(dumpLine(g) + "\n" + dumpLine(a1) + "\n" + explicit))
	if err != nil {
		t.Fatal(err)
	}
	wantBlock(t, s, 1, side)
}

func TestLoadRejectsBadLine(t *testing.T) {
	scratch := memstore.New()
	g := add(t, scratch, genesis())
	c1 := add(t, scratch, childOf(g, "c1"))
	c2 := add(t, scratch, childOf(c1, "c2"), uncleOf(g, "uncle"))
	uncle := storedUncles(t, scratch, c2.Hash)[0]

	badSize := c1.Copy()
	badSize.Size++
	pending := childOf(c2, "pending")
	pending.Pending = true
	withoutEnd := func(line string) string { return strings.TrimSuffix(line, "}") }

	tests := []struct {
		name     string
		lines    []string
		wantLine int
		wantText string
	}{
		{"size altered", []string{dumpLine(g), dumpLine(badSize), dumpLine(c2, uncle)}, 2, "size"},
		{"blank lines are counted", []string{dumpLine(g), "", dumpLine(badSize)}, 3, "size"},
		{"unknown member", []string{dumpLine(g), dumpLine(c1), withoutEnd(dumpLine(c2, uncle)) + `,"receipts":[]}`}, 3, "receipts"},
		{"no block member", []string{`{"uncles":[]}`}, 1, "block"},
		{"null block", []string{dumpLine(g), `{"block":null}`}, 2, "block"},
		{"pending block", []string{dumpLine(g), dumpLine(c1), dumpLine(c2, uncle), dumpLine(pending)}, 4, "pending"},
		{"listed uncle without its header", []string{dumpLine(g), dumpLine(c1), dumpLine(c2)}, 3, "uncles[0]"},
		{"null uncle", []string{dumpLine(g), dumpLine(c1), withoutEnd(dumpLine(c2)) + `,"uncles":[null]}`}, 3, "uncles[0]"},
		{"not JSON", []string{dumpLine(g), withoutEnd(dumpLine(c1))}, 2, ""},
		{"two blocks on a line", []string{dumpLine(g) + dumpLine(c1)}, 1, "more than one"},
		{"a parent's total difficulty contradicted", []string{dumpLine(withTD(c1.Copy(), 1)), dumpLine(g)}, 2, "totalDifficulty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := memstore.Load(strings.NewReader(strings.Join(tt.lines, "\n") + "\n"))
			if s != nil {
				t.Error("Load returned a store along with its error")
			}
			var le *memstore.LineError
			if !errors.As(err, &le) {
				t.Fatalf("Load = %v, want a *LineError", err)
			}
			if le.Line != tt.wantLine {
				t.Errorf("error %q is for line %d, want line %d", err, le.Line, tt.wantLine)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not mention %q", err, tt.wantText)
			}
		})
	}

	t.Run("size altered: a backend.MismatchError", func(t *testing.T) {
		_, err := memstore.Load(strings.NewReader(dumpLine(g) + "\n" + dumpLine(badSize) + "\n"))
		var mm *backend.MismatchError
		if !errors.As(err, &mm) || mm.Field != "size" {
			t.Errorf("Load = %v, want it to wrap a *backend.MismatchError for size", err)
		}
	})
}

// history fills a store and returns the blocks it added.
type history func(t *testing.T, s *memstore.Store) []*backend.Block

func TestSaveLoadRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		fill history
	}{
		{"main chain with uncles", func(t *testing.T, s *memstore.Store) []*backend.Block {
			g := add(t, s, genesis())
			chain := addChain(t, s, g, 2, "m")
			m3 := add(t, s, childOf(chain[1], "m3"), uncleOf(g, "u1"), uncleOf(chain[0], "u2"))
			m4 := add(t, s, childOf(m3, "m4"), uncleOf(chain[1], "u3"))
			return append([]*backend.Block{g, m3, m4}, chain...)
		}},
		{"side chains", func(t *testing.T, s *memstore.Store) []*backend.Block {
			g := add(t, s, genesis())
			main := addChain(t, s, g, 6, "m")
			fork := addChain(t, s, main[2], 2, "a") // replaces m4 to m6
			short := addChain(t, s, main[0], 1, "x")
			add(t, s, main[5]) // back to the main chain
			return append(append(append([]*backend.Block{g}, main...), fork...), short...)
		}},
		{"orphans, with and without total difficulty", func(t *testing.T, s *memstore.Store) []*backend.Block {
			g := add(t, s, genesis())
			given := add(t, s, withTD(newBlock(10, backend.Hash{9}, "given"), 77777))
			unknown := add(t, s, newBlock(20, backend.Hash{19}, "unknown"))
			child := add(t, s, childOf(unknown, "child of unknown"), uncleOf(unknown, "uncle of unknown"))
			notGenesis := add(t, s, newBlock(0, backend.Hash{1}, "not genesis"))
			return []*backend.Block{g, given, unknown, child, notGenesis}
		}},
		{"children added before their parents", func(t *testing.T, s *memstore.Store) []*backend.Block {
			scratch := memstore.New()
			g := add(t, scratch, genesis())
			chain := addChain(t, scratch, g, 4, "m")
			var added []*backend.Block
			for _, b := range []*backend.Block{chain[3], chain[1], chain[2], g, chain[0]} {
				b = b.Copy()
				b.TotalDifficulty = nil
				added = append(added, add(t, s, b))
			}
			return added
		}},
		{"back to a block whose children were dropped", func(t *testing.T, s *memstore.Store) []*backend.Block {
			g := add(t, s, genesis())
			chain := addChain(t, s, g, 2, "m") // m1 m2
			x1 := add(t, s, childOf(g, "x1"))  // drops m1 and m2
			add(t, s, chain[0])                // m1 again: m2 stays dropped
			return append([]*backend.Block{g, x1}, chain...)
		}},
		{"transactions, withdrawals and hash-only blocks", func(t *testing.T, s *memstore.Store) []*backend.Block {
			g := add(t, s, genesis())
			b, uncles := sampleBlock(g)
			full := add(t, s, b, uncles...)
			hashOnly := childOf(full, "hash only")
			hashOnly.TransactionHashes = []backend.Hash{{1}, {2}}
			hashOnly.TransactionsRoot = backend.Hash{3}
			hashOnly.Size = 1234
			return []*backend.Block{g, full, add(t, s, hashOnly)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original := memstore.New()
			blocks := tt.fill(t, original)
			wantSameAfterSaveLoad(t, original, blocks)
		})
	}
}

func TestSaveLoadFixtures(t *testing.T) {
	s := memstore.New()
	var blocks []*backend.Block
	for _, file := range []string{"test_01.json", "test_02.json", "test_08.json", "test_12.json", "test_13.json"} {
		blocks = append(blocks, add(t, s, fixtureBlock(t, file)))
	}
	wantSameAfterSaveLoad(t, s, blocks)
}

// wantSameAfterSaveLoad saves original, loads the dump, and checks that
// the loaded store answers as the original does for each block, by hash
// and by number, and saves the same dump.
func wantSameAfterSaveLoad(t *testing.T, original *memstore.Store, blocks []*backend.Block) {
	t.Helper()
	ctx := t.Context()
	var dump bytes.Buffer
	if err := original.Save(&dump); err != nil {
		t.Fatalf("Save: %v", err)
	}
	loaded, err := memstore.Load(bytes.NewReader(dump.Bytes()))
	if err != nil {
		t.Fatalf("Load of the saved dump: %v\n%s", err, dump.Bytes())
	}
	if got, want := loaded.Len(), original.Len(); got != want {
		t.Errorf("loaded Len() = %d, want %d", got, want)
	}

	// Only a number some block has can be canonical.
	numbers := []backend.BlockNumber{backend.Latest, backend.Earliest}
	for _, b := range blocks {
		numbers = append(numbers, backend.BlockNumber(b.Number))
		want, err := original.BlockByHash(ctx, b.Hash)
		if err != nil {
			t.Fatal(err)
		}
		got, err := loaded.BlockByHash(ctx, b.Hash)
		if err != nil {
			t.Errorf("loaded BlockByHash(block %d %s): %v", b.Number, b.Hash, err)
			continue
		}
		if diff := jsonDiff(t, blockJSON(got), blockJSON(want)); diff != "" {
			t.Errorf("loaded block %d %s differs (-original +loaded):\n%s", b.Number, b.Hash, diff)
		}
		wantUncles, gotUncles := storedUncles(t, original, b.Hash), storedUncles(t, loaded, b.Hash)
		if len(gotUncles) != len(wantUncles) {
			t.Errorf("loaded block %d has %d uncles, want %d", b.Number, len(gotUncles), len(wantUncles))
			continue
		}
		for i := range wantUncles {
			if diff := jsonDiff(t, gotUncles[i].AppendJSON(nil), wantUncles[i].AppendJSON(nil)); diff != "" {
				t.Errorf("loaded uncle %d of block %d differs (-original +loaded):\n%s", i, b.Number, diff)
			}
		}
	}

	for _, n := range numbers {
		want, wantErr := original.BlockByNumber(ctx, n)
		got, gotErr := loaded.BlockByNumber(ctx, n)
		switch {
		case wantErr != nil || gotErr != nil:
			if !errors.Is(gotErr, wantErr) {
				t.Errorf("loaded BlockByNumber(%v) = %s, %v; the original answers %s, %v", n, describe(got), gotErr, describe(want), wantErr)
			}
		case got.Hash != want.Hash:
			t.Errorf("loaded BlockByNumber(%v) = %s, the original answers %s", n, describe(got), describe(want))
		}
	}

	var again bytes.Buffer
	if err := loaded.Save(&again); err != nil {
		t.Fatalf("Save of the loaded store: %v", err)
	}
	if !bytes.Equal(again.Bytes(), dump.Bytes()) {
		n, got, want := firstDifferentLine(again.Bytes(), dump.Bytes())
		t.Errorf("the loaded store saves a different dump; first difference on line %d:\n got: %.500s\nwant: %.500s", n, got, want)
	}
}

// describe names a block for messages.
func describe(b *backend.Block) string {
	if b == nil {
		return "no block"
	}
	return fmt.Sprintf("block %d %q (totalDifficulty %s)", b.Number, b.ExtraData, tdString(b.TotalDifficulty))
}

// firstDifferentLine returns the number and contents of the first line at
// which two dumps differ.
func firstDifferentLine(got, want []byte) (int, string, string) {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; ; i++ {
		switch {
		case i >= len(g) || i >= len(w):
			return i + 1, strings.Join(g[i:], "\n"), strings.Join(w[i:], "\n")
		case g[i] != w[i]:
			return i + 1, g[i], w[i]
		}
	}
}

// TestSaveLeavesOutNoUncles writes a block without uncles with no "uncles"
// member, as the format allows, and one with uncles with them.
func TestSaveLeavesOutNoUncles(t *testing.T) {
	s := memstore.New()
	g := add(t, s, genesis())
	add(t, s, childOf(g, "with an uncle"), uncleOf(g, "uncle"))
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], `},"uncles":`) || !strings.Contains(lines[1], `},"uncles":[{`) {
		t.Errorf("Save wrote, for the genesis without uncles and a block with one:\n%s", buf.String())
	}
}
