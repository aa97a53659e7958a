package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/hexutil"
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

// TestViewFromEndpointAtMaxLag prefers an endpoint exactly MaxLag blocks
// behind the best: it is within MaxLag, and its chain makes the view.
func TestViewFromEndpointAtMaxLag(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 15})
	b.AddBlocks(20, chaintest.Txs(1))
	atMax := newFakeNode(t, prefixStore(t, b.Store(), 17))
	best := newFakeNode(t, b.Store())
	up := openUp(t, upstream.Config{PollInterval: idle, MaxLag: 3}, atMax.URL, best.URL)
	got, err := up.BlockByNumber(context.Background(), backend.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if got.Number != 17 {
		t.Errorf("latest is block %d, want 17, the head of the preferred endpoint, MaxLag behind", got.Number)
	}
}

// TestForgedHighHeadDoesNotStallTheView has an endpoint claim a head far
// above the chain's (a header whose hash holds, but whose chain does
// not), then fail its polls: its claim does not count, and the honest
// endpoint's head goes on making the view.
func TestForgedHighHeadDoesNotStallTheView(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 16})
	b.AddBlocks(20, chaintest.Txs(1))
	honest := newFakeNode(t, copyStore(t, b.Store(), nil))
	liar := newFakeNode(t, b.Store())
	liar.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method != "eth_getBlockByNumber" || len(params) == 0 || string(params[0]) != `"latest"` {
			return result
		}
		return reencoded(func(h *backend.Block) {
			h.Number = 1000
			h.Hash = backend.HeaderHash(&h.Header)
		})(result)
	})
	// A long Timeout keeps the view fresh for long past untilTimeout: the
	// liar's claim must not count even while it is.
	up := openUp(t, upstream.Config{PollInterval: 5 * time.Millisecond, Timeout: time.Minute}, honest.URL, liar.URL)
	ctx := context.Background()
	if got, err := up.BlockByNumber(ctx, backend.Latest); err != nil || got.Number != 20 {
		t.Fatalf("latest: %v (%v), want block 20", hashOf(got), err)
	}
	liar.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusInternalServerError)
		return true
	})
	b.AddBlocks(3, chaintest.Txs(1))
	honest.SetStore(copyStore(t, b.Store(), nil))
	eventually(t, "latest block 23", func() bool {
		got, err := up.BlockByNumber(ctx, backend.Latest)
		return err == nil && got.Number == 23
	})
}

// countPolls makes node count the polls it is sent, and lets them through.
func countPolls(node *fakeNode) *atomic.Int64 {
	var polls atomic.Int64
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(requestBody(r), `"latest"`) {
			polls.Add(1)
		}
		return false
	})
	return &polls
}

// TestHeadBackAtTheFinalizedBlockRefused has the tracker's endpoint go
// down, leaving one without finality whose head is the block finalized
// before: its head is not above it, and does not make the view. The
// latest block is never taken back to the finalized one; the tags go
// stale instead.
func TestHeadBackAtTheFinalizedBlockRefused(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 17})
	b.AddBlocks(30, chaintest.Txs(1))
	store := copyStore(t, b.Store(), nil)
	if err := store.SetFinalized(20); err != nil {
		t.Fatal(err)
	}
	good, behind := newFakeNode(t, store), newFakeNode(t, prefixStore(t, b.Store(), 20))
	up := openUp(t, upstream.Config{PollInterval: 5 * time.Millisecond, Timeout: 200 * time.Millisecond}, good.URL, behind.URL)
	ctx := context.Background()
	good.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	polls := countPolls(behind)
	var got *backend.Block
	eventually(t, "the head unknown, or taken back", func() bool {
		var err error
		got, err = up.BlockByNumber(ctx, backend.Latest)
		return err != nil && strings.Contains(err.Error(), "the head is unknown") || err == nil && got.Number < 30
	})
	// Stale, the view is open to any endpoint that answers: a few more
	// polls of the one behind.
	from := polls.Load()
	eventually(t, "three more polls", func() bool { return polls.Load() >= from+3 })
	got, err := up.BlockByNumber(ctx, backend.Latest)
	if err == nil {
		t.Errorf("latest is block %d, taken back to the finalized block by an endpoint without finality", got.Number)
	}
}

// TestFinalizedHashChangedRefused has the tracker's endpoint give another
// hash for the block it had finalized (a block of another branch at that
// number) as its head moves on: the finalized block stays the one
// finalized before.
func TestFinalizedHashChangedRefused(t *testing.T) {
	t.Parallel()
	a, storeA, storeB := minorityFork(t)
	want := storeBlock(t, storeA, 20)
	other := storeBlock(t, storeB, 20)
	node := newFakeNode(t, storeA)
	up := openUp(t, upstream.Config{PollInterval: 5 * time.Millisecond}, node.URL)
	ctx := context.Background()
	polls := countPolls(node)
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByNumber" && len(params) > 0 && string(params[0]) == `"finalized"` {
			return other.AppendJSON(nil, false)
		}
		return result
	})
	a.AddBlocks(1, chaintest.Txs(1))
	moved := copyStore(t, a.Store(), nil)
	if err := moved.SetFinalized(20); err != nil {
		t.Fatal(err)
	}
	node.SetStore(moved)
	from := polls.Load()
	eventually(t, "three polls", func() bool { return polls.Load() >= from+3 })
	got, err := up.BlockByNumber(ctx, backend.Finalized)
	if err == nil && got.Hash != want.Hash {
		t.Fatalf("the finalized block is %s (extraData %q), another branch's; want %s", got.Hash, got.ExtraData, want.Hash)
	}
}

// TestBranchLeavingFinalizedBlockRefused has the tracker's endpoint go
// down, leaving one on a branch that left the finalized block (a node
// stuck on a minority fork, within MaxLag) whose own finalized block is
// higher: its chain does not hold the block finalized before, and it does
// not make the view.
func TestBranchLeavingFinalizedBlockRefused(t *testing.T) {
	t.Parallel()
	_, storeA, storeB := minorityFork(t)
	if err := storeB.SetFinalized(25); err != nil {
		t.Fatal(err)
	}
	want := storeBlock(t, storeA, 20)
	good, forked := newFakeNode(t, storeA), newFakeNode(t, storeB)
	up := openUp(t, upstream.Config{PollInterval: 5 * time.Millisecond}, good.URL, forked.URL)
	ctx := context.Background()
	if got, err := up.BlockByNumber(ctx, backend.Finalized); err != nil || got.Hash != want.Hash {
		t.Fatalf("finalized: %s (%v), want %s", hashOf(got), err, want.Hash)
	}
	good.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	polls := countPolls(forked)
	eventually(t, "three polls of the forked endpoint", func() bool { return polls.Load() >= 3 })
	got, err := up.BlockByNumber(ctx, backend.Finalized)
	if err == nil && got.Hash != want.Hash {
		t.Fatalf("the finalized block is block %d %s (extraData %q), the minority branch's; want block 20 %s", got.Number, got.Hash, got.ExtraData, want.Hash)
	}
	got, err = up.BlockByNumber(ctx, 10)
	if err == nil && got.Hash != storeBlock(t, storeA, 10).Hash {
		t.Fatalf("final block 10 is %s (extraData %q), the minority branch's", got.Hash, got.ExtraData)
	}
}

// TestParentWithAnotherNumberRefused has the endpoint give a head whose
// parent hash names the block two below it (a header whose hash holds,
// on a chain that does not): the walk refuses it, and a block by number
// is never served as another number.
func TestParentWithAnotherNumberRefused(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 18})
	b.AddBlocks(30, chaintest.Txs(1))
	node := newFakeNode(t, b.Store())
	// No finality: the walk goes down to ReorgDepth below the head, no
	// further.
	up := openUp(t, upstream.Config{PollInterval: 5 * time.Millisecond, ReorgDepth: 5}, node.URL)
	ctx := context.Background()
	grandparent := b.Block(28).Hash
	polls := countPolls(node)
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method != "eth_getBlockByNumber" || len(params) == 0 || string(params[0]) != `"latest"` {
			return result
		}
		return reencoded(func(h *backend.Block) {
			h.ParentHash = grandparent
			h.Hash = backend.HeaderHash(&h.Header)
		})(result)
	})
	from := polls.Load()
	eventually(t, "three polls", func() bool { return polls.Load() >= from+3 })
	for n := uint64(25); n <= 29; n++ {
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(n))
		if err == nil && got.Number != n {
			t.Fatalf("block %d served as block %d (%s)", n, got.Number, got.Hash)
		}
	}
}

// TestWalkRefusesParentOfAnotherHash has the preferred endpoint answer
// the head's parent, asked by its hash, with another header of the same
// number (its hash holding): the walk refuses it, the second endpoint
// makes the view, and the block at that number is the chain's.
func TestWalkRefusesParentOfAnotherHash(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 19})
	b.AddBlocks(30, chaintest.Txs(1))
	store := b.Store()
	want := b.Block(29)
	number, hash := quoted(hexutil.EncodeUint64(29)), quoted(want.Hash.String())
	liar, honest := newFakeNode(t, store), newFakeNode(t, store)
	liar.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if len(params) < 2 || string(params[1]) != "false" ||
			!(method == "eth_getBlockByNumber" && bytes.Equal(params[0], number) || method == "eth_getBlockByHash" && bytes.Equal(params[0], hash)) {
			return result
		}
		return reencoded(func(h *backend.Block) {
			h.ExtraData = []byte("forged")
			h.Hash = backend.HeaderHash(&h.Header)
		})(result)
	})
	up := openUp(t, upstream.Config{PollInterval: idle}, liar.URL, honest.URL)
	got, err := up.BlockByNumber(context.Background(), 29)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != want.Hash {
		t.Fatalf("block 29 is %s (extraData %q), want %s", got.Hash, got.ExtraData, want.Hash)
	}
}
