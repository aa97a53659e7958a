package memstore_test

// A dump's holes, a line with no end, and a wrong block hash named for
// what it is.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// TestLoaderLogsHoles loads a dump that misses blocks, repeats one and has
// lines out of order: it loads, as before, and the log says each.
func TestLoaderLogsHoles(t *testing.T) {
	scratch := memstore.New()
	chain := []*backend.Block{add(t, scratch, genesis())}
	chain = append(chain, addChain(t, scratch, chain[0], 9, "m")...)
	line := func(n int) string {
		b := chain[n].Copy()
		b.TotalDifficulty = nil // as a dump of a chain without it
		return dumpLine(b)
	}
	dump := strings.Join([]string{
		line(0), line(1), line(2), // 3 and 4 missing
		line(5), line(6), line(7),
		line(2),          // line 7: a repeat, and out of order
		line(9), line(8), // line 9: out of order
	}, "\n")

	var logs bytes.Buffer
	l := memstore.Loader{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	s, err := l.Load(strings.NewReader(dump))
	if err != nil {
		t.Fatal(err)
	}
	wantBlock(t, s, backend.Latest, chain[9])
	for _, want := range []string{
		`level=INFO msg="memstore: dump loaded" lines=9 blocks=8 canonical=0-9`,
		`level=WARN msg="memstore: the dump misses blocks of the canonical chain" missing=2 ranges=3-4 unknown_total_difficulty=5`,
		`level=WARN msg="memstore: dump lines repeat a block" count=1 lines="7 (as line 3)"`,
		`level=WARN msg="memstore: dump lines out of order, below the previous canonical line's number" count=2 first_line=7`,
	} {
		if !strings.Contains(logs.String(), want+"\n") {
			t.Errorf("the log does not say\n\t%s\nIt says:\n%s", want, logs.String())
		}
	}

	// Into a store it knows only as a Writer, the loader keeps the
	// canonical lines as runs of numbers, not a line per block: the holes
	// are the same, the repeats are the store's to skip.
	logs.Reset()
	if err := l.LoadInto(strings.NewReader(dump), writerOnly{memstore.New()}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`level=INFO msg="memstore: dump loaded" lines=9 canonical=0-9`,
		`level=WARN msg="memstore: the dump misses blocks of the canonical chain" missing=2 ranges=3-4`,
	} {
		if !strings.Contains(logs.String(), want+"\n") {
			t.Errorf("the log of a load into a writer does not say\n\t%s\nIt says:\n%s", want, logs.String())
		}
	}

	// A whole dump in order is summed up in one line.
	logs.Reset()
	if _, err := l.Load(strings.NewReader(strings.Join([]string{line(0), line(1), line(2)}, "\n"))); err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); strings.Contains(got, "WARN") || !strings.Contains(got, "lines=3 blocks=3 canonical=0-2") {
		t.Errorf("the log of a dump without holes:\n%s", got)
	}
}

// TestLoaderBoundsItsSummary keeps the log of a dump with a hole at every
// other block to a few ranges.
func TestLoaderBoundsItsSummary(t *testing.T) {
	var dump, logs strings.Builder
	for n := uint64(0); n <= 60; n += 2 {
		dump.WriteString(dumpLine(newBlock(n, backend.Hash{byte(n)}, "even")) + "\n")
	}
	dump.WriteString(dumpLine(newBlock(0, backend.Hash{}, "even")) + "\n")
	l := memstore.Loader{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if _, err := l.Load(strings.NewReader(dump.String())); err != nil {
		t.Fatal(err)
	}
	want := `missing=30 ranges="1, 3, 5, 7, 9, 11, 13, 15, 17, 19 and 20 more"`
	if !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not say %s:\n%s", want, logs.String())
	}
}

// TestLoadCapsLines refuses a line longer than the cap, naming the line
// and the cap, without holding more of it than the cap.
func TestLoadCapsLines(t *testing.T) {
	g := dumpLine(genesis()) + "\n"

	// A line of exactly the cap is read; one byte more is not.
	l := memstore.Loader{MaxLineBytes: len(g) - 1}
	if _, err := l.Load(strings.NewReader(g + g)); err != nil {
		t.Errorf("a line of MaxLineBytes: %v", err)
	}
	l.MaxLineBytes--
	_, err := l.Load(strings.NewReader(g))
	var le *memstore.LineError
	if !errors.As(err, &le) || le.Line != 1 || !errors.Is(err, memstore.ErrLineTooLong) || !strings.Contains(err.Error(), fmt.Sprintf("line 1: longer than the limit of %d bytes", l.MaxLineBytes)) {
		t.Errorf("a line over MaxLineBytes: %v", err)
	}

	// A 256 MiB line, never held whole.
	const cap = 1 << 20
	before := totalAlloc()
	l = memstore.Loader{MaxLineBytes: cap}
	_, err = l.Load(io.MultiReader(strings.NewReader(g+g+`{"block":`), &endless{256 << 20}))
	if took := totalAlloc() - before; took > 16*cap {
		t.Errorf("the loader took %d MiB for a line capped at 1 MiB", took>>20)
	}
	if !errors.As(err, &le) || le.Line != 3 || !errors.Is(err, memstore.ErrLineTooLong) {
		t.Errorf("a 256 MiB line = %v, want line 3 refused as too long", err)
	}

	// Load has a cap too, above any real block.
	_, err = memstore.Load(io.MultiReader(strings.NewReader(g+`{"block":`), &endless{memstore.DefaultMaxLineBytes + 1}))
	if !errors.As(err, &le) || le.Line != 2 || !strings.Contains(err.Error(), "line 2: longer than the limit of 16777216 bytes") {
		t.Errorf("Load of a 16 MiB line = %v, want line 2 refused as too long", err)
	}
}

// endless reads as n spaces.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	if e.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), e.n)
	for i := range p[:k] {
		p[i] = ' '
	}
	e.n -= k
	return k, nil
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestLoadNamesAWrongBlockHash changes the hash of a block with
// transactions, which each repeat the block's true hash: the error names
// the block's hash, not the first transaction's blockHash.
func TestLoadNamesAWrongBlockHash(t *testing.T) {
	scratch := memstore.New()
	g := add(t, scratch, genesis())
	b, uncles := sampleBlock(g)
	full := add(t, scratch, b, uncles...)
	wrong := backend.Hash{0xba, 0xd0}
	line := dumpLine(full, storedUncles(t, scratch, full.Hash)...)
	bad := strings.Replace(line, `"hash":"`+full.Hash.String()+`"`, `"hash":"`+wrong.String()+`"`, 1)
	if bad == line || strings.Count(bad, full.Hash.String()) != len(full.Transactions) {
		t.Fatal("the block's hash is not where the test expects it")
	}

	_, err := memstore.Load(strings.NewReader(dumpLine(g) + "\n" + bad + "\n"))
	var le *memstore.LineError
	var mm *backend.MismatchError
	switch {
	case !errors.As(err, &le) || le.Line != 2:
		t.Errorf("Load = %v, want an error for line 2", err)
	case !errors.As(err, &mm) || mm.Field != "hash" || mm.Given != wrong.String() || mm.Computed != full.Hash.String():
		t.Errorf("Load = %v, want a mismatch of the block's hash", err)
	case strings.Contains(err.Error(), "transaction"):
		t.Errorf("Load = %v, blames a transaction", err)
	}
	t.Log(err)

	// A transaction that names another block is still the one blamed.
	txWrong := strings.Replace(line, `"blockHash":"`+full.Hash.String()+`"`, `"blockHash":"`+wrong.String()+`"`, 1)
	if _, err := memstore.Load(strings.NewReader(txWrong)); err == nil || !strings.Contains(err.Error(), "transaction 0: blockHash") {
		t.Errorf("Load of a transaction with a wrong blockHash = %v", err)
	}
}

// writerOnly hides a memstore behind backend.Writer, as another store
// would be.
type writerOnly struct{ backend.Writer }

// TestLoadIntoAnyWriter loads the demo dump through LoadInto into a store
// the loader knows only as a Writer, twice: the store serves what Load's
// store serves, the second load changes nothing, and the summary says
// what a writer's lines tell.
func TestLoadIntoAnyWriter(t *testing.T) {
	chain, _ := demo.Dump()
	want, err := memstore.Load(bytes.NewReader(chain))
	if err != nil {
		t.Fatal(err)
	}
	got := memstore.New()
	var logs bytes.Buffer
	l := memstore.Loader{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	for range 2 {
		if err := l.LoadInto(bytes.NewReader(chain), writerOnly{got}); err != nil {
			t.Fatal(err)
		}
		backendtest.TestBackend(t, got, want, demo.SideHash)
	}
	if got.Len() != want.Len() {
		t.Errorf("%d blocks after loading the dump twice, want %d", got.Len(), want.Len())
	}
	if !strings.Contains(logs.String(), `msg="memstore: dump loaded" lines=112 canonical=0-110`) {
		t.Errorf("the summary of a load into a writer:\n%s", logs.String())
	}
}

// TestLoaderLogsOnlyRealDisorder loads a dump whose lines are in order but
// for a block replaced at its own number, as a reorganisation writes it: no
// line is out of order. A line marked "canonical": true counts as any
// canonical line, and a dump that starts above the genesis has the total
// difficulties above its first hole unknown, none below.
func TestLoaderLogsOnlyRealDisorder(t *testing.T) {
	scratch := memstore.New()
	g := add(t, scratch, genesis())
	chain := addChain(t, scratch, g, 3, "m")
	b2 := add(t, scratch, childOf(chain[0], "b2"))
	var logs bytes.Buffer
	l := memstore.Loader{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	dump := strings.Join([]string{dumpLine(g), dumpLine(chain[0]), dumpLine(chain[1]), dumpLine(b2)}, "\n")
	if _, err := l.Load(strings.NewReader(dump)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "out of order") {
		t.Errorf("a block replaced at its own number is logged out of order:\n%s", logs.String())
	}

	logs.Reset()
	marked := strings.TrimSuffix(dumpLine(chain[0]), "}") + `,"canonical":true}`
	dump = strings.Join([]string{dumpLine(g), dumpLine(chain[0]), dumpLine(chain[1]), marked}, "\n")
	if _, err := l.Load(strings.NewReader(dump)); err != nil {
		t.Fatal(err)
	}
	if want := `count=1 first_line=4`; !strings.Contains(logs.String(), want) {
		t.Errorf("a line marked canonical below the previous one: the log does not say %s:\n%s", want, logs.String())
	}

	logs.Reset()
	line := func(b *backend.Block) string {
		b = b.Copy()
		b.TotalDifficulty = nil
		return dumpLine(b)
	}
	dump = strings.Join([]string{line(chain[0]), line(chain[1]), line(add(t, scratch, childOf(chain[2], "m4")))}, "\n")
	if _, err := l.Load(strings.NewReader(dump)); err != nil {
		t.Fatal(err)
	}
	if want := `missing=1 ranges=3 unknown_total_difficulty=1`; !strings.Contains(logs.String(), want) {
		t.Errorf("a dump from block 1 with block 3 missing: the log does not say %s:\n%s", want, logs.String())
	}
}

// TestLoaderBoundsItsDuplicates keeps the list of repeated lines to ten.
func TestLoaderBoundsItsDuplicates(t *testing.T) {
	g := dumpLine(genesis())
	var logs strings.Builder
	l := memstore.Loader{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if _, err := l.Load(strings.NewReader(strings.Repeat(g+"\n", 13))); err != nil {
		t.Fatal(err)
	}
	want := `count=12 lines="2 (as line 1), 3 (as line 1), 4 (as line 1), 5 (as line 1), 6 (as line 1), 7 (as line 1), 8 (as line 1), 9 (as line 1), 10 (as line 1), 11 (as line 1) and 2 more"`
	if !strings.Contains(logs.String(), want) {
		t.Errorf("the log does not say %s:\n%s", want, logs.String())
	}
}

// TestLoaderSummaryOfSideAndHashlessLines: a side line does not fill a
// hole of the canonical chain, in a load into any writer, and lines whose
// blocks give no hash are told apart by their headers' hashes.
func TestLoaderSummaryOfSideAndHashlessLines(t *testing.T) {
	scratch := memstore.New()
	g := add(t, scratch, genesis())
	chain := addChain(t, scratch, g, 3, "m")
	side := strings.TrimSuffix(dumpLine(chain[1]), "}") + `,"canonical":false}`
	dump := strings.Join([]string{dumpLine(g), dumpLine(chain[0]), side, dumpLine(chain[2])}, "\n")
	var logs bytes.Buffer
	l := memstore.Loader{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	if err := l.LoadInto(strings.NewReader(dump), writerOnly{memstore.New()}); err != nil {
		t.Fatal(err)
	}
	if want := `missing=1 ranges=2`; !strings.Contains(logs.String(), want) {
		t.Errorf("block 2 given only as a side line: the log does not say %s:\n%s", want, logs.String())
	}

	logs.Reset()
	hashless := func(b *backend.Block) string {
		return strings.Replace(dumpLine(b), `"hash":"`+b.Hash.String()+`",`, "", 1)
	}
	dump = strings.Join([]string{hashless(g), hashless(chain[0])}, "\n")
	if strings.Contains(dump, `"hash":`) {
		t.Fatalf("the hash was not taken out of the lines:\n%s", dump)
	}
	if _, err := l.Load(strings.NewReader(dump)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "repeat") {
		t.Errorf("two blocks given without their hashes are logged as repeats:\n%s", logs.String())
	}
}
