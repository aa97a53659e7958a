package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/internal/blocksample"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/cockroachdb/pebble/v2"
	"github.com/holiman/uint256"
)

// reopen closes s and opens its directory again.
func reopen(t testing.TB, s *Store, opts *Options) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(s.Dir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dump(t testing.TB, s *memstore.Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// contents returns every key and value of the store's database.
func contents(t testing.TB, s *Store) map[string]string {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	m := make(map[string]string)
	for ok := it.First(); ok; ok = it.Next() {
		m[string(it.Key())] = string(it.Value())
	}
	return m
}

// TestReopen writes the demo chain with its tags, pending block and side
// block, reopens the store and compares everything; then writes on
// after the reopen, as a follower restarted does.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	ref, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	s := openTest(t, nil)
	if err := (&memstore.Loader{}).LoadInto(bytes.NewReader(dump(t, ref)), s); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []backend.BlockNumber{backend.Safe, backend.Finalized} {
		b, _ := ref.BlockByNumber(ctx, tag)
		set := s.SetSafe
		if tag == backend.Finalized {
			set = s.SetFinalized
		}
		if err := set(b.Number); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := ref.BlockByNumber(ctx, backend.Pending)
	if err := s.SetPending(p); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, &Options{CacheBytes: 1 << 20})
	backendtest.TestBackend(t, s, ref, demo.SideHash)
	if g0, _ := ref.BlockByNumber(ctx, 0); true {
		if g, ok := s.Genesis(); !ok || g != g0.Hash {
			t.Errorf("genesis %s, %v; want %s", g, ok, g0.Hash)
		}
	}

	// Writing on: a chain built on the reopened store's and a reorg.
	b := chaintest.New(chaintest.Config{Seed: 2, London: 2, Merge: 5, Shanghai: 6, Cancun: 7, Prague: 7})
	b.AddBlocks(8, chaintest.Txs(2))
	fork := b.Fork(4)
	fork.AddBlocks(5, chaintest.Txs(1))
	s2 := openTest(t, nil)
	for n := uint64(0); n <= 6; n++ {
		if err := s2.AddBlock(b.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	s2 = reopen(t, s2, nil)
	for n := uint64(7); n <= 8; n++ {
		if err := s2.AddBlock(b.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	for n := uint64(5); n <= 9; n++ {
		if err := s2.AddSideBlock(fork.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	s2 = reopen(t, s2, nil)
	if err := s2.AddBlock(fork.Head()); err != nil {
		t.Fatal(err)
	}
	fork.Reorg()
	backendtest.TestBackend(t, s2, b.Store(), b.Head().Hash)
}

// TestCompress writes the same chain into a store with Options.Compress
// and one without: the compressed tables must be markedly smaller. A
// compressed store, as stores were by default before, opened without
// Compress must serve its blocks and write its new files uncompressed.
func TestCompress(t *testing.T) {
	ctx := context.Background()
	const n = 400
	g := synth.New(synth.Config{Seed: 3, TxsPerBlock: 8})
	blocks := make([]*backend.Block, n+100)
	for i := range blocks {
		blocks[i] = g.Next()
	}
	// write adds blocks[from:to], flushed, and returns the size of the
	// store's live tables (files Pebble has let go, which it deletes in
	// the background, are not counted).
	write := func(s *Store, from, to int) int64 {
		t.Helper()
		for _, b := range blocks[from:to] {
			if err := s.AddBlock(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		return tablesOf(s)
	}
	plain, packed := openTest(t, nil), openTest(t, &Options{Compress: true})
	plainSize, packedSize := write(plain, 0, n), write(packed, 0, n)
	if packedSize > plainSize*9/10 {
		t.Fatalf("tables with Compress: %d bytes, without: %d; want at most 0.9 of them", packedSize, plainSize)
	}

	packed = reopen(t, packed, nil)
	packedSize = tablesOf(packed)
	plainGrowth := write(plain, n, len(blocks)) - plainSize
	packedGrowth := write(packed, n, len(blocks)) - packedSize
	if packedGrowth < plainGrowth*95/100 {
		t.Errorf("blocks written into a compressed store opened without Compress took %d bytes more, against %d in a store never compressed", packedGrowth, plainGrowth)
	}
	for num := range backend.BlockNumber(len(blocks)) {
		got, err := packed.BlockByNumber(ctx, num)
		if err != nil {
			t.Fatal(err)
		}
		want, err := plain.BlockByNumber(ctx, num)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.AppendJSON(nil, true), want.AppendJSON(nil, true)) {
			t.Fatalf("block %d differs between the two stores", num)
		}
	}
}

// tablesOf is the size of the live tables of a store's database.
func tablesOf(s *Store) int64 { return s.db.Metrics().Total().TablesSize }

// TestOtherChain imports a dump, then one of another chain: refused at its
// first line, before and after a reopen, and the store is unchanged.
func TestOtherChain(t *testing.T) {
	a := chaintest.New(chaintest.Config{Seed: 1})
	a.AddBlocks(5, chaintest.Txs(1))
	other := chaintest.New(chaintest.Config{Seed: 2})
	other.AddBlocks(5, chaintest.Txs(1))
	s := openTest(t, nil)
	if err := (&memstore.Loader{}).LoadInto(bytes.NewReader(dump(t, a.Store())), s); err != nil {
		t.Fatal(err)
	}
	before := contents(t, s)
	for range 2 {
		err := (&memstore.Loader{}).LoadInto(bytes.NewReader(dump(t, other.Store())), s)
		var le *memstore.LineError
		if !errors.Is(err, ErrOtherChain) || !errors.As(err, &le) || le.Line != 1 {
			t.Fatalf("importing another chain: %v; want ErrOtherChain on line 1", err)
		}
		if !strings.Contains(err.Error(), a.Block(0).Hash.String()) {
			t.Errorf("the error does not name the store's genesis: %v", err)
		}
		t.Log(err)
		if err := s.AddSideBlock(other.Block(0)); !errors.Is(err, ErrOtherChain) {
			t.Errorf("another genesis as a side block: %v; want ErrOtherChain", err)
		}
		s = reopen(t, s, nil)
	}
	if after := contents(t, s); len(after) != len(before) {
		t.Errorf("the refused imports changed the store: %d keys, then %d", len(before), len(after))
	}
	backendtest.TestBackend(t, s, a.Store())
}

// TestImportTwice imports the same dump twice: the second changes nothing
// and commits nothing.
func TestImportTwice(t *testing.T) {
	ref, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	d := dump(t, ref)
	s := openTest(t, nil)
	if err := (&memstore.Loader{}).LoadInto(bytes.NewReader(d), s); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, nil)
	before := contents(t, s)
	seq := s.db.Metrics().WAL.BytesIn
	if err := (&memstore.Loader{}).LoadInto(bytes.NewReader(d), s); err != nil {
		t.Fatal(err)
	}
	if got := s.db.Metrics().WAL.BytesIn; got != seq {
		t.Errorf("the second import wrote %d bytes to the log", got-seq)
	}
	after := contents(t, s)
	if len(after) != len(before) {
		t.Fatalf("%d keys, then %d", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("key %x changed", k)
		}
	}
	want, err := memstore.Load(bytes.NewReader(d))
	if err != nil {
		t.Fatal(err)
	}
	backendtest.TestBackend(t, s, want, demo.SideHash)
}

// TestNotAStore refuses a directory holding another Pebble database.
func TestNotAStore(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("x"), []byte("y"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := Open(dir, nil); err == nil {
		s.Close()
		t.Fatal("a directory of another database opened as a store")
	} else {
		t.Log(err)
	}
}

// TestOtherSchemaVersion refuses a store of another schema version, or
// of a version that is no number, naming what it found, and leaves it
// as it was.
func TestOtherSchemaVersion(t *testing.T) {
	for _, tc := range []struct {
		version []byte
		want    string
	}{
		{encodeUint64(schemaVersion + 1), fmt.Sprintf("a store of schema version %d, where this build reads version %d: import the chain again into a new directory", schemaVersion+1, schemaVersion)},
		{[]byte{7, 7, 7}, "a damaged store: its schema version, 070707, is no number"},
	} {
		dir := t.TempDir()
		s, err := Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AddBlock(chaintest.New(chaintest.Config{Seed: 1}).Head()); err != nil {
			t.Fatal(err)
		}
		s.Close()
		setVersion := func(v []byte) {
			t.Helper()
			db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{slog.New(slog.DiscardHandler)}})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if v == nil {
				got, closer, err := db.Get(keyVersion)
				if err != nil || string(got) != string(tc.version) {
					t.Errorf("the version after the refusal: %x, %v; want %x", got, err, tc.version)
				}
				if err == nil {
					closer.Close()
				}
				return
			}
			if err := db.Set(keyVersion, v, pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}
		setVersion(tc.version)
		if s, err := Open(dir, nil); err == nil {
			s.Close()
			t.Errorf("a store of version %x opened", tc.version)
		} else if !strings.HasPrefix(err.Error(), "pebblestore: "+dir+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("a store of version %x: %v, want the directory and %q", tc.version, err, tc.want)
		}
		setVersion(nil)
	}
}

func TestClosed(t *testing.T) {
	s := openTest(t, nil)
	b := chaintest.New(chaintest.Config{Seed: 1})
	if err := s.AddBlock(b.Head()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.BlockByNumber(ctx, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("BlockByNumber after Close: %v", err)
	}
	if _, err := s.BlockByHash(ctx, b.Head().Hash); !errors.Is(err, ErrClosed) {
		t.Errorf("BlockByHash after Close: %v", err)
	}
	if err := s.AddBlock(b.Head()); !errors.Is(err, ErrClosed) {
		t.Errorf("AddBlock after Close: %v", err)
	}
	if err := s.SetSafe(0); !errors.Is(err, ErrClosed) {
		t.Errorf("SetSafe after Close: %v", err)
	}
}

// TestCloseDuringNestedRead has a Lender's callback read the store
// again, as one that looks up the lent block's uncles would, while Close
// waits for the callback to end: the inner read fails with ErrClosed, and
// the callback and Close end, where the inner read waited behind Close,
// and Close behind the callback, for good.
func TestCloseDuringNestedRead(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := chaintest.New(chaintest.Config{Seed: 1})
	if err := s.AddBlock(b.Head()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	inside, closing := make(chan struct{}), make(chan error, 1)
	var inner error
	lent := make(chan error, 1)
	go func() {
		lent <- s.LendBlockByNumber(ctx, 0, func(*backend.Block, backend.TransactionDecoder) error {
			close(inside)
			// Close has begun and waits for this callback to end.
			for !s.gate.isShut() {
				time.Sleep(time.Millisecond)
			}
			_, inner = s.BlockByHash(ctx, b.Head().Hash)
			return nil
		})
	}()
	<-inside
	go func() { closing <- s.Close() }()
	for _, what := range []string{"the lent block's callback", "Close"} {
		ch := lent
		if what == "Close" {
			ch = closing
		}
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s has not ended after 10 s: a read inside a lent block's callback and Close wait for each other", what)
		}
	}
	if !errors.Is(inner, ErrClosed) {
		t.Errorf("a read inside a lent block's callback, once Close has begun: %v, want ErrClosed", inner)
	}
}

// TestDifferential writes random sequences of blocks of a tree of branches
// (uncles, side chains, blocks before their parents, with and without
// their total difficulty, now and then a wrong one) and tags into the
// store and into memstore: each write must succeed or fail in both, and
// both must serve the same, across reopens.
func TestDifferential(t *testing.T) {
	main := chaintest.New(chaintest.Config{Seed: 4, London: 2, Merge: 12, Shanghai: 12, Cancun: 14, Prague: 14})
	main.AddBlocks(16, func(i int, g *chaintest.BlockGen) {
		chaintest.Txs(1)(i, g)
		if n := g.Number(); n >= 2 && n < 12 && n%3 != 0 {
			g.AddUncle()
		}
	})
	branches := []*chaintest.Builder{main}
	for _, at := range []uint64{1, 3, 6, 9, 13} {
		f := main.Fork(at)
		f.AddBlocks(1+int(at%4), chaintest.Txs(1))
		branches = append(branches, f)
	}
	deeper := branches[3].Fork(branches[3].Head().Number - 1)
	deeper.AddBlocks(3, nil)
	branches = append(branches, deeper)

	pool := map[backend.Hash]blocksample.Sample{}
	src := main.Store()
	for _, br := range branches {
		for n := br.Head().Number; ; n-- {
			b := br.Block(n)
			pool[b.Hash] = blocksample.Of(t, src, b)
			if n == 0 {
				break
			}
		}
	}
	var hashes []backend.Hash
	for h := range pool {
		hashes = append(hashes, h)
	}
	// A stable order, for seeds to mean the same sequence.
	sortHashes(hashes)

	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 1))
		want := memstore.New()
		got := openTest(t, nil)
		for op := range 60 {
			var gerr, werr error
			what := ""
			switch r := rng.IntN(20); {
			case r < 16:
				s := pool[hashes[rng.IntN(len(hashes))]]
				b := s.Block.Copy()
				switch rng.IntN(6) {
				case 0, 1:
					b.TotalDifficulty = nil
				case 2:
					if b.TotalDifficulty != nil && rng.IntN(4) == 0 {
						b.TotalDifficulty = new(uint256.Int).AddUint64(b.TotalDifficulty, 1)
					}
				}
				canonical := rng.IntN(3) > 0
				what = "AddBlock " + b.Hash.String()
				if canonical {
					werr, gerr = want.AddBlock(b, s.Uncles...), got.AddBlock(b, s.Uncles...)
				} else {
					what = "AddSideBlock " + b.Hash.String()
					werr, gerr = want.AddSideBlock(b, s.Uncles...), got.AddSideBlock(b, s.Uncles...)
				}
			case r < 18:
				n := rng.Uint64N(22)
				what = "SetSafe"
				werr, gerr = want.SetSafe(n), got.SetSafe(n)
			case r < 19:
				n := rng.Uint64N(22)
				what = "SetFinalized"
				werr, gerr = want.SetFinalized(n), got.SetFinalized(n)
			default:
				got = reopen(t, got, nil)
				continue
			}
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("seed %d op %d %s: memstore %v, pebblestore %v", seed, op, what, werr, gerr)
			}
		}
		canonicalFirst(t, got)
		if _, err := want.BlockByNumber(context.Background(), backend.Latest); err != nil {
			continue
		}
		backendtest.TestBackend(t, got, want, hashes...)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// canonicalFirst fails t unless the canonical entries of s sort before
// every other key it holds, as a read by number relies on to check one
// table (keys.go).
func canonicalFirst(t *testing.T, s *Store) {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var other []byte
	for ok := it.First(); ok; ok = it.Next() {
		switch k := it.Key(); {
		case k[0] != prefixCanonical && other == nil:
			other = slices.Clone(k)
		case k[0] == prefixCanonical && other != nil:
			t.Fatalf("canonical entry %x sorts after %q", k, other)
		}
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	if other == nil {
		t.Fatal("the store holds canonical entries only: no other key to sort them against")
	}
}

func sortHashes(h []backend.Hash) {
	for i := 1; i < len(h); i++ {
		for j := i; j > 0 && bytes.Compare(h[j][:], h[j-1][:]) < 0; j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
}

// TestReorgTooLarge lowers the bound of a write's batch so that a
// reorganisation to a long branch is over it: the reorganisation is
// refused with an error, the chain is left as it was, and writes within
// the bound go on.
func TestReorgTooLarge(t *testing.T) {
	defer func(max int) { maxBatchBytes = max }(maxBatchBytes)
	maxBatchBytes = 32 << 10
	ctx := context.Background()
	main := chaintest.New(chaintest.Config{Seed: 4})
	main.AddBlocks(40, chaintest.Txs(2))
	side := main.Fork(10)
	side.AddBlocks(40, chaintest.Txs(2))
	s := openTest(t, nil)
	for n := uint64(0); n < 40; n++ {
		if err := s.AddBlock(main.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	for n := uint64(11); n < 50; n++ {
		if err := s.AddSideBlock(side.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	before := contents(t, s)
	err := s.AddBlock(side.Block(50))
	if err == nil || !strings.Contains(err.Error(), "batch") {
		t.Fatalf("a reorganisation over the batch's bound: %v, want refused", err)
	}
	t.Log(err)
	if after := contents(t, s); !maps.Equal(after, before) {
		t.Error("the refused reorganisation changed the store")
	}
	if latest, err := s.BlockByNumber(ctx, backend.Latest); err != nil || latest.Hash != main.Block(39).Hash {
		t.Errorf("latest after the refused reorganisation: %v; want the main branch's block 39", err)
	}
	if err := s.AddBlock(main.Block(40)); err != nil {
		t.Errorf("a block after the refused reorganisation: %v", err)
	}
}
