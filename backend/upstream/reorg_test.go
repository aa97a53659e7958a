package upstream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// reorgPoll is the tracker's poll interval in the reorganisation tests.
const reorgPoll = 10 * time.Millisecond

// branchSet is a chain with branches, each served by a store of its own
// in which that branch is canonical: what a node that switched to it
// serves. Every store holds every block by hash, as nodes keep the blocks
// of a branch they left.
type branchSet struct {
	names  []string
	stores map[string]*memstore.Store
	heads  map[string]*backend.Block
}

// reorgFinalized is the finalized block of every branch: below every fork
// point, so that the numbers up to it are final and cached by number.
const reorgFinalized = 20

// newBranchSet builds branch "a", blocks 1 to 40, and branches off it:
// "depth1" replaces block 40 (head 41), "depth2" blocks 39 and 40 (head
// 41), "depth10" blocks 31 to 40 (head 41), and "shorter" blocks 36 to 40
// with two blocks (head 37).
func newBranchSet(t testing.TB) *branchSet {
	t.Helper()
	a := chaintest.New(chaintest.Config{Seed: 31, London: 2, Merge: 12, Shanghai: 14, Cancun: 16, Prague: 18})
	a.AddBlocks(40, chaintest.Txs(1))
	branches := map[string]*chaintest.Builder{"a": a}
	for _, f := range []struct {
		name   string
		at     uint64
		blocks int
	}{{"depth1", 39, 2}, {"depth2", 38, 3}, {"depth10", 30, 11}, {"shorter", 35, 2}} {
		b := a.Fork(f.at)
		b.AddBlocks(f.blocks, func(i int, g *chaintest.BlockGen) {
			g.SetExtraData([]byte(f.name)) // apart from the other branches
			chaintest.Txs(1)(i, g)
		})
		branches[f.name] = b
	}
	s := &branchSet{stores: make(map[string]*memstore.Store), heads: make(map[string]*backend.Block)}
	for _, name := range []string{"a", "depth1", "depth2", "depth10", "shorter"} {
		head := branches[name].Head()
		store := copyStore(t, a.Store(), head)
		if err := store.SetFinalized(reorgFinalized); err != nil {
			t.Fatal(err)
		}
		if err := store.SetSafe(reorgFinalized + 5); err != nil {
			t.Fatal(err)
		}
		if got := storeBlock(t, store, backend.Latest); got.Hash != head.Hash {
			t.Fatalf("branch %s: the store's head is block %d, not the branch's", name, got.Number)
		}
		s.names = append(s.names, name)
		s.stores[name], s.heads[name] = store, head
	}
	return s
}

// waitHead waits until the Backend's latest block is the branch's head.
func waitHead(t testing.TB, up *upstream.Backend, head *backend.Block) {
	t.Helper()
	eventually(t, fmt.Sprintf("the head tracker to see block %d (%s)", head.Number, head.Hash), func() bool {
		got, err := up.BlockByNumber(context.Background(), backend.Latest)
		return err == nil && got.Hash == head.Hash
	})
}

// checkBranch checks every number up to beyond the highest head, and the
// tags, against the store of the branch.
func checkBranch(t *testing.T, up *upstream.Backend, store *memstore.Store, name string) {
	t.Helper()
	ctx := context.Background()
	for n := uint64(0); n <= 45; n++ {
		want, werr := store.BlockByNumber(ctx, backend.BlockNumber(n))
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(n))
		switch {
		case errors.Is(werr, backend.ErrNotFound):
			if got != nil || !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("on branch %s, block %d: %v, %v; the branch has none", name, n, got != nil, err)
			}
		case err != nil:
			t.Fatalf("on branch %s, block %d: %v", name, n, err)
		default:
			if d := diffAnswer(got, want); d != "" {
				t.Fatalf("on branch %s, block %d is not the branch's: %s", name, n, d)
			}
		}
	}
	for _, tag := range []backend.BlockNumber{backend.Latest, backend.Safe, backend.Finalized} {
		got, err := up.BlockByNumber(ctx, tag)
		if err != nil || diffAnswer(got, storeBlock(t, store, tag)) != "" {
			t.Fatalf("on branch %s, %v: %v", name, tag, err)
		}
	}
}

// TestReorgs switches the node between branches: reorganisations of depth
// 1, 2 and 10, back to an earlier branch, and to a shorter branch. After
// the tracker has seen each new head, every number answers the new
// branch's block, or not found above a shorter branch's head, although
// the Backend had answered (and cached) every block of the branches
// before.
func TestReorgs(t *testing.T) {
	t.Parallel()
	set := newBranchSet(t)
	node := newFakeNode(t, set.stores["a"])
	logs := &logSink{}
	up := openUp(t, upstream.Config{PollInterval: reorgPoll, Logger: slog.New(logs)}, node.URL)
	checkBranch(t, up, set.stores["a"], "a")
	for _, step := range []string{"depth1", "a", "depth2", "depth10", "a", "shorter", "depth10", "shorter", "depth1"} {
		node.SetStore(set.stores[step])
		waitHead(t, up, set.heads[step])
		checkBranch(t, up, set.stores[step], step)
	}
	if len(logs.matching(0, "reorganised")) == 0 {
		t.Error("no reorganisation logged")
	}
}

// TestReorgBelowTheWindow reorganises below the tracker's window, on a
// chain without a finalized block and with a ReorgDepth of 4: blocks
// there are asked of the endpoint each time, so they follow the
// reorganisation too.
func TestReorgBelowTheWindow(t *testing.T) {
	t.Parallel()
	set := newBranchSet(t)
	plain := map[string]*memstore.Store{
		"a":       copyBlocks(t, set.stores["a"], set.heads["a"]),
		"depth10": copyBlocks(t, set.stores["a"], set.heads["depth10"]),
	}
	node := newFakeNode(t, plain["a"])
	up := openUp(t, upstream.Config{PollInterval: reorgPoll, ReorgDepth: 4}, node.URL)
	checkNumbers(t, up, plain["a"], "a")
	node.SetStore(plain["depth10"])
	waitHead(t, up, set.heads["depth10"])
	checkNumbers(t, up, plain["depth10"], "depth10")
}

// checkNumbers checks every number to beyond the head against a store.
func checkNumbers(t *testing.T, up *upstream.Backend, store *memstore.Store, name string) {
	t.Helper()
	ctx := context.Background()
	head := storeBlock(t, store, backend.Latest)
	for n := uint64(0); n <= head.Number+1; n++ {
		want, werr := store.BlockByNumber(ctx, backend.BlockNumber(n))
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(n))
		if werr != nil {
			if !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("on branch %s, block %d: %v", name, n, err)
			}
			continue
		}
		if err != nil || diffAnswer(got, want) != "" {
			t.Fatalf("on branch %s, block %d: %v %s", name, n, err, diffAnswer(got, want))
		}
	}
}

// reorgRead is one answer a reader got during the flips.
type reorgRead struct {
	start, end time.Time
	number     backend.BlockNumber // a number, or Latest
	hash       backend.Hash        // zero for not found
}

// reorgFlip is a branch the node served: from start (before the node was
// switched to it) until the head tracker was seen to have the next one.
type reorgFlip struct {
	branch     string
	start, end time.Time
}

// TestReorgConcurrentReaders reads blocks by number (and latest) from
// several goroutines while the node flips between branches. Each answer
// must be the block at that number of a branch the Backend may serve at
// some moment of the request: one the node served before the request
// ended, and whose successor the tracker had not yet been seen to take
// when the request started. Not found is right only where such a branch
// has no block.
func TestReorgConcurrentReaders(t *testing.T) {
	set := newBranchSet(t)
	var flips []reorgFlip
	flips = append(flips, reorgFlip{branch: "a", start: time.Now()})
	node := newFakeNode(t, set.stores["a"])
	up := openUp(t, upstream.Config{PollInterval: reorgPoll}, node.URL)

	const readers = 4
	var (
		mu    sync.Mutex
		reads []reorgRead
		count atomic.Int64
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		fail  = make(chan error, readers)
	)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			var mine []reorgRead
			defer func() {
				mu.Lock()
				reads = append(reads, mine...)
				mu.Unlock()
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := backend.BlockNumber(reorgFinalized - 2 + rng.IntN(26)) // 18 to 43
				if rng.IntN(8) == 0 {
					n = backend.Latest
				}
				rd := reorgRead{start: time.Now(), number: n}
				got, err := up.BlockByNumber(context.Background(), n)
				rd.end = time.Now()
				switch {
				case errors.Is(err, backend.ErrNotFound):
				case err != nil:
					fail <- fmt.Errorf("block %v: %w", n, err)
					return
				default:
					rd.hash = got.Hash
				}
				mine = append(mine, rd)
				count.Add(1)
			}
		}()
	}

	sequence := []string{"depth1", "a", "depth2", "depth10", "shorter", "a", "depth10", "depth1", "shorter", "depth2"}
	for i := range 2 * len(sequence) {
		next := sequence[i%len(sequence)]
		start := time.Now()
		node.SetStore(set.stores[next])
		waitHead(t, up, set.heads[next])
		flips[len(flips)-1].end = time.Now()
		flips = append(flips, reorgFlip{branch: next, start: start})
		// Let the readers read on this branch a while.
		c := count.Load()
		eventually(t, "the readers to read", func() bool { return count.Load() >= c+40 })
	}
	close(stop)
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	flips[len(flips)-1].end = time.Now()

	ctx := context.Background()
	answer := func(branch string, n backend.BlockNumber) backend.Hash {
		b, err := set.stores[branch].BlockByNumber(ctx, n)
		if err != nil {
			return backend.Hash{}
		}
		return b.Hash
	}
	counts := map[string]int{}
	wrong := 0
	for _, rd := range reads {
		ok := false
		for _, f := range flips {
			if !f.start.After(rd.end) && !rd.start.After(f.end) && answer(f.branch, rd.number) == rd.hash {
				ok = true
				break
			}
		}
		if !ok {
			wrong++
		}
		if !ok && wrong <= 10 {
			var could []string
			for _, f := range flips {
				if !f.start.After(rd.end) && !rd.start.After(f.end) {
					could = append(could, fmt.Sprintf("%s %s", f.branch, answer(f.branch, rd.number)))
				}
			}
			t.Errorf("block %v read from %s to %s is %s: no branch served then has it (%v)", rd.number, rd.start.Format("15:04:05.000000"), rd.end.Format("15:04:05.000000"), rd.hash, could)
		}
		if rd.hash == (backend.Hash{}) {
			counts["not found"]++
		} else {
			counts["found"]++
		}
	}
	if wrong > 10 {
		t.Errorf("and %d more answers of no branch served during their request", wrong-10)
	}
	t.Logf("%d answers over %d flips (%v), every one of a branch served during its request", len(reads), len(flips)-1, counts)
}
