package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/internal/fixturechains"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/holiman/uint256"
)

// waitTimeout bounds every wait of these tests: far more than a follower
// polling every few milliseconds needs on loopback, so that only a bug
// reaches it.
const waitTimeout = 15 * time.Second

// testPoll is the follower's poll interval in these tests, which also sets
// its backoff (from 10 ms up to 1 s).
const testPoll = 20 * time.Millisecond

// allForks is a chain that goes through every fork in a few blocks:
// Berlin with uncles, London, the merge, Shanghai, Cancun and Prague.
var allForks = chaintest.Config{Seed: 7, London: 6, Merge: 14, Shanghai: 16, Cancun: 18, Prague: 20}

// preMerge is a proof-of-work chain, whose total difficulty grows with
// every block and whose blocks may have uncles.
var preMerge = chaintest.Config{Seed: 11, London: 4, Merge: chaintest.Never, Shanghai: chaintest.Never, Cancun: chaintest.Never, Prague: chaintest.Never}

// blocksWithUncles adds n blocks of three transactions each, and an uncle
// to every third block that may have one (before the merge, from block 2).
func blocksWithUncles(b *chaintest.Builder, n int) {
	merge := b.Config().Merge
	for range n {
		b.AddBlock(func(g *chaintest.BlockGen) {
			chaintest.Txs(3)(0, g)
			if num := g.Number(); num >= 2 && num%3 == 0 && (merge == chaintest.Never || num < merge) {
				g.AddUncle()
			}
		})
	}
}

// snapshot copies the canonical chain of src, its chain id, tags and
// pending block into a store of its own: what a node that knows only that
// branch serves. Swapping a fake node to it scripts a reorganisation.
func snapshot(t testing.TB, src *memstore.Store) *memstore.Store {
	t.Helper()
	ctx := context.Background()
	dst := memstore.New()
	if id, err := src.ChainID(ctx); err == nil {
		if err := dst.SetChainID(id); err != nil {
			t.Fatal(err)
		}
	}
	earliest, latest := storeBlock(t, src, backend.Earliest), storeBlock(t, src, backend.Latest)
	for n := earliest.Number; n <= latest.Number; n++ {
		b := storeBlock(t, src, backend.BlockNumber(n))
		if err := dst.AddBlock(b, storeUncles(t, src, b)...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tag := range []struct {
		n   backend.BlockNumber
		set func(uint64) error
	}{{backend.Safe, dst.SetSafe}, {backend.Finalized, dst.SetFinalized}} {
		if b, err := src.BlockByNumber(ctx, tag.n); err == nil {
			if err := tag.set(b.Number); err != nil {
				t.Fatal(err)
			}
		}
	}
	if p, err := src.BlockByNumber(ctx, backend.Pending); err == nil {
		if err := dst.SetPending(p); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// blockJSON is a block as eth_getBlockByNumber(n, true) answers it.
func blockJSON(b *backend.Block) string { return string(b.AppendJSON(nil, true)) }

// sameChain checks that got's canonical chain is want's from block from
// on, block by block and uncle by uncle, as they would be answered by
// number and by hash, with the same latest block: the follower's store
// must answer exactly what the source does.
func sameChain(t testing.TB, got, want *memstore.Store, from uint64) {
	t.Helper()
	ctx := context.Background()
	wantHead, gotHead := storeBlock(t, want, backend.Latest), storeBlock(t, got, backend.Latest)
	if gotHead.Hash != wantHead.Hash {
		t.Fatalf("latest is %d %s, want %d %s", gotHead.Number, gotHead.Hash, wantHead.Number, wantHead.Hash)
	}
	for n := from; n <= wantHead.Number; n++ {
		w := storeBlock(t, want, backend.BlockNumber(n))
		g, err := got.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		if blockJSON(g) != blockJSON(w) {
			t.Fatalf("block %d differs:\n got %s\nwant %s", n, blockJSON(g), blockJSON(w))
		}
		byHash, err := got.BlockByHash(ctx, w.Hash)
		if err != nil || blockJSON(byHash) != blockJSON(w) {
			t.Fatalf("block %d by hash: %v", n, err)
		}
		for i, wu := range storeUncles(t, want, w) {
			gu, err := got.UncleByBlockHashAndIndex(ctx, w.Hash, uint64(i))
			if err != nil {
				t.Fatalf("block %d uncle %d: %v", n, i, err)
			}
			if g, w := string(gu.AppendJSON(nil)), string(wu.AppendJSON(nil)); g != w {
				t.Fatalf("block %d uncle %d differs:\n got %s\nwant %s", n, i, g, w)
			}
		}
		if _, err := got.UncleByBlockHashAndIndex(ctx, w.Hash, uint64(len(w.Uncles))); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("block %d has an uncle past its %d: %v", n, len(w.Uncles), err)
		}
	}
}

// logRecorder is a slog.Handler that keeps what is logged, so that a test
// can check that a refusal or a reorganisation was reported, and how.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
	attrs   []slog.Attr // from With
	parent  *logRecorder
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

func (l *logRecorder) root() *logRecorder {
	if l.parent != nil {
		return l.parent.root()
	}
	return l
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: make(map[string]slog.Value)}
	for _, a := range l.attrs {
		rec.attrs[a.Key] = a.Value
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value
		return true
	})
	root := l.root()
	root.mu.Lock()
	root.records = append(root.records, rec)
	root.mu.Unlock()
	return nil
}

func (l *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{attrs: append(append([]slog.Attr(nil), l.attrs...), attrs...), parent: l}
}

func (l *logRecorder) WithGroup(string) slog.Handler { return l }

// find returns the records whose message contains msg.
func (l *logRecorder) find(msg string) []logRecord {
	root := l.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	var out []logRecord
	for _, r := range root.records {
		if strings.Contains(r.msg, msg) {
			out = append(out, r)
		}
	}
	return out
}

// follower is a Follower running in the background of a test.
type follower struct {
	*upstream.Follower
	logs *logRecorder
	stop func() error // cancels Run and returns what it returned
}

// startFollower runs a follower of node into store until the test ends or
// stop is called. cfg's zero fields get the test's fast settings.
func startFollower(t testing.TB, store upstream.Store, node *fakeNode, cfg upstream.FollowConfig) *follower {
	t.Helper()
	logs := &logRecorder{}
	if cfg.Endpoint == "" {
		cfg.Endpoint = node.URL
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = testPoll
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	cfg.Logger = slog.New(logs)
	f, err := upstream.NewFollower(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(waitTimeout):
				runErr = errors.New("Run did not return after its context was cancelled")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &follower{Follower: f, logs: logs, stop: stop}
}

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// latestHash returns the hash of a store's latest block, or zero.
func latestHash(s backend.Backend) backend.Hash {
	b, err := s.BlockByNumber(context.Background(), backend.Latest)
	if err != nil {
		return backend.Hash{}
	}
	return b.Hash
}

// waitSynced waits until the follower has written src's latest block and
// reports itself synced.
func waitSynced(t testing.TB, f *follower, dst backend.Backend, src *memstore.Store) {
	t.Helper()
	want := storeBlock(t, src, backend.Latest)
	waitFor(t, fmt.Sprintf("the follower to reach block %d %s", want.Number, want.Hash), func() bool {
		p := f.Progress()
		return latestHash(dst) == want.Hash && p.Synced && p.Height == want.Number && p.Head == want.Number
	})
}

// TestFollowChaintest copies a chain of every fork, with uncles and every
// kind of transaction, and checks every block and uncle, the tags and the
// pending block against the source; then it follows new blocks.
func TestFollowChaintest(t *testing.T) {
	b := chaintest.New(allForks)
	blocksWithUncles(b, 24)
	src := b.Store()
	if err := src.SetSafe(20); err != nil {
		t.Fatal(err)
	}
	if err := src.SetFinalized(16); err != nil {
		t.Fatal(err)
	}
	node := newFakeNode(t, src)
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{Concurrency: 4})
	waitSynced(t, f, dst, src)
	sameChain(t, dst, src, 0)
	waitFor(t, "the tags", func() bool {
		return tagNumber(dst, backend.Safe) == 20 && tagNumber(dst, backend.Finalized) == 16
	})

	// New blocks are followed, and a pending block on the head is taken.
	blocksWithUncles(b, 3)
	b.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(4)(0, g) })
	waitSynced(t, f, dst, src)
	sameChain(t, dst, src, 0)
	want := blockJSON(storeBlock(t, src, backend.Pending))
	waitFor(t, "the pending block", func() bool {
		p, err := dst.BlockByNumber(context.Background(), backend.Pending)
		return err == nil && blockJSON(p) == want
	})
}

// tagNumber returns the number of the block a tag selects, or -1.
func tagNumber(s backend.Backend, tag backend.BlockNumber) int64 {
	b, err := s.BlockByNumber(context.Background(), tag)
	if err != nil {
		return -1
	}
	return int64(b.Number)
}

// TestFollowDemoChain copies the demo chain, which go-ethereum executed
// (uncles, every fork, every transaction type), with its safe, finalized
// and pending blocks.
func TestFollowDemoChain(t *testing.T) {
	src, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	node := newFakeNode(t, src)
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, src)
	sameChain(t, dst, src, 0)
	want := blockJSON(storeBlock(t, src, backend.Pending))
	waitFor(t, "the tags and the pending block", func() bool {
		p, err := dst.BlockByNumber(context.Background(), backend.Pending)
		return tagNumber(dst, backend.Safe) == demo.Safe && tagNumber(dst, backend.Finalized) == demo.Finalized &&
			err == nil && blockJSON(p) == want
	})
	// Only the canonical chain is copied: the side block is no block of
	// the chain the endpoint follows.
	if _, err := dst.BlockByHash(context.Background(), demo.SideHash); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the demo chain's side block was copied (%v)", err)
	}
}

// TestFollowProgress checks what Progress and the log say once the store
// has caught up.
func TestFollowProgress(t *testing.T) {
	b := chaintest.New(preMerge)
	blocksWithUncles(b, 30)
	node := newFakeNode(t, b.Store())
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{Concurrency: 2})
	waitSynced(t, f, dst, b.Store())
	p := f.Progress()
	if p.Height != 30 || p.Head != 30 || !p.Synced || p.BlocksPerSecond <= 0 {
		t.Errorf("progress %+v, want height and head 30, synced, a positive rate", p)
	}
	waitFor(t, "the caught-up line", func() bool { return len(f.logs.find("caught up")) > 0 })
	rec := f.logs.find("caught up")[0]
	if rec.level != slog.LevelInfo {
		t.Errorf("caught up logged at %v, want Info", rec.level)
	}
	for key, want := range map[string]uint64{"height": 30, "head": 30, "lag": 0} {
		if v, ok := rec.attrs[key]; !ok || v.Uint64() != want {
			t.Errorf("caught up: %s is %v, want %d", key, v, want)
		}
	}
	if _, ok := rec.attrs["blocks_per_second"]; !ok {
		t.Error("caught up: no blocks_per_second")
	}
	if got := rec.attrs["endpoint"].String(); got != strings.TrimSuffix(node.URL, "/rpc") {
		t.Errorf("endpoint logged as %q, want the URL without its path", got)
	}
	// No tags on the source: none in the store.
	if tagNumber(dst, backend.Safe) != -1 || tagNumber(dst, backend.Finalized) != -1 {
		t.Error("safe or finalized set though the endpoint has neither")
	}
}

// reorgTo scripts a reorganisation: the endpoint swaps to a node that
// holds b's canonical chain as it is now.
func reorgTo(t testing.TB, node *fakeNode, b *chaintest.Builder) {
	t.Helper()
	node.SetStore(snapshot(t, b.Store()))
}

// offChain checks that every block of blocks is still in the store by
// hash, and not canonical.
func offChain(t testing.TB, s *memstore.Store, blocks []*backend.Block) {
	t.Helper()
	ctx := context.Background()
	for _, b := range blocks {
		if _, err := s.BlockByHash(ctx, b.Hash); err != nil {
			t.Errorf("block %d %s of the old branch is gone: %v", b.Number, b.Hash, err)
		}
		if c, err := s.BlockByNumber(ctx, backend.BlockNumber(b.Number)); err == nil && c.Hash == b.Hash {
			t.Errorf("block %d %s of the old branch is still canonical", b.Number, b.Hash)
		}
	}
}

// branch returns the blocks from..to of b's branch.
func branch(b *chaintest.Builder, from, to uint64) []*backend.Block {
	var out []*backend.Block
	for n := from; n <= to; n++ {
		out = append(out, b.Block(n))
	}
	return out
}

// TestFollowReorg follows reorganisations of depth 1, 2 and 10: the new
// branch, one block longer, replaces the old one in one step.
func TestFollowReorg(t *testing.T) {
	for _, depth := range []uint64{1, 2, 10} {
		t.Run(fmt.Sprintf("depth %d", depth), func(t *testing.T) {
			b := chaintest.New(preMerge)
			blocksWithUncles(b, 20)
			node := newFakeNode(t, snapshot(t, b.Store()))
			dst := &writeWatch{Store: memstore.New()}
			f := startFollower(t, dst, node, upstream.FollowConfig{Concurrency: 3})
			waitSynced(t, f, dst, node.Store())
			old := branch(b, 20-depth+1, 20)

			side := b.Fork(20 - depth)
			blocksWithUncles(side, int(depth)+1)
			side.Reorg()
			dst.reset()
			reorgTo(t, node, b)
			waitSynced(t, f, dst, node.Store())
			sameChain(t, dst.Store, node.Store(), 0)
			offChain(t, dst.Store, old)
			// The new branch went in as side blocks under one AddBlock of
			// its head: readers saw the old head, then the new one, and
			// never a chain cut back to the fork.
			if adds, sides, heads := dst.counts(); adds != 1 || sides != int(depth) || len(heads) != 1 || heads[0] != 21 {
				t.Errorf("the reorganisation took %d AddBlock (heads after each: %v) and %d AddSideBlock, want 1, leaving head 21, and %d", adds, heads, sides, depth)
			}

			recs := f.logs.find("reorganised")
			if len(recs) != 1 {
				t.Fatalf("%d reorganisations logged, want 1", len(recs))
			}
			if got := recs[0].attrs["depth"].Uint64(); got != depth {
				t.Errorf("reorganisation logged with depth %d, want %d", got, depth)
			}
			if got := recs[0].attrs["ancestor"].Uint64(); got != 20-depth {
				t.Errorf("reorganisation logged with ancestor %d, want %d", got, 20-depth)
			}
		})
	}
}

// writeWatch is a store that counts the writes of blocks, and the head
// that each AddBlock leaves.
type writeWatch struct {
	*memstore.Store
	mu    sync.Mutex
	adds  int
	sides int
	heads []uint64
}

func (w *writeWatch) AddBlock(b *backend.Block, uncles ...*backend.Uncle) error {
	err := w.Store.AddBlock(b, uncles...)
	head, _ := w.Store.BlockByNumber(context.Background(), backend.Latest)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.adds++
	if head != nil {
		w.heads = append(w.heads, head.Number)
	}
	return err
}

func (w *writeWatch) AddSideBlock(b *backend.Block, uncles ...*backend.Uncle) error {
	w.mu.Lock()
	w.sides++
	w.mu.Unlock()
	return w.Store.AddSideBlock(b, uncles...)
}

func (w *writeWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.adds, w.sides, w.heads = 0, 0, nil
}

func (w *writeWatch) counts() (adds, sides int, heads []uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.adds, w.sides, append([]uint64(nil), w.heads...)
}

// hashSpy records the hashes asked for with eth_getBlockByHash.
type hashSpy struct {
	mu     sync.Mutex
	hashes map[backend.Hash]int
}

func (s *hashSpy) rewrite(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
	if method == "eth_getBlockByHash" && len(params) > 0 {
		var h backend.Hash
		if json.Unmarshal(params[0], &h) == nil {
			s.mu.Lock()
			s.hashes[h]++
			s.mu.Unlock()
		}
	}
	return result
}

func (s *hashSpy) asked(h backend.Hash) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hashes[h]
}

// TestFollowReorgBackAndShorter switches to a branch, back to the first
// one, whose blocks the store still holds, and then to a branch shorter
// than the chain it replaces.
func TestFollowReorgBackAndShorter(t *testing.T) {
	b := chaintest.New(preMerge)
	blocksWithUncles(b, 20)
	node := newFakeNode(t, snapshot(t, b.Store()))
	spy := &hashSpy{hashes: make(map[backend.Hash]int)}
	node.SetRewrite(spy.rewrite)
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, node.Store())
	first := branch(b, 16, 20)

	// Another branch from block 15, two blocks longer.
	side := b.Fork(15)
	blocksWithUncles(side, 7)
	side.Reorg()
	reorgTo(t, node, b)
	waitSynced(t, f, dst, node.Store())
	sameChain(t, dst, node.Store(), 0)
	offChain(t, dst, first)

	// Back to the first branch, grown by three blocks: its blocks 16-20,
	// which the store holds off the chain, become canonical again without
	// being asked for.
	second := branch(side, 16, 22)
	b.AddBlocks(3, chaintest.Txs(2))
	b.Reorg()
	reorgTo(t, node, b)
	waitSynced(t, f, dst, node.Store())
	sameChain(t, dst, node.Store(), 0)
	offChain(t, dst, second)
	for _, blk := range first {
		if n := spy.asked(blk.Hash); n != 0 {
			t.Errorf("block %d, which the store held, was asked for by hash %d times", blk.Number, n)
		}
	}

	// A new branch from block 18 with two blocks: the chain ends at 20,
	// below the old head, 23.
	old := branch(b, 19, 23)
	short := b.Fork(18)
	short.AddBlocks(2, chaintest.Txs(1))
	short.Reorg()
	reorgTo(t, node, b)
	waitSynced(t, f, dst, node.Store())
	sameChain(t, dst, node.Store(), 0)
	offChain(t, dst, old)
	for n := backend.BlockNumber(21); n <= 23; n++ {
		if _, err := dst.BlockByNumber(context.Background(), n); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("block %d is still canonical above the shorter branch's head (%v)", n, err)
		}
	}
	if got := len(f.logs.find("reorganised")); got != 3 {
		t.Errorf("%d reorganisations logged, want 3", got)
	}
}

// paramSpy records the block numbers asked for with transaction objects.
type paramSpy struct {
	mu      sync.Mutex
	numbers []uint64
}

func (s *paramSpy) rewrite(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
	if method == "eth_getBlockByNumber" && len(params) == 2 && string(params[1]) == "true" {
		var n backend.BlockNumber
		if json.Unmarshal(params[0], &n) == nil && n >= 0 {
			s.mu.Lock()
			s.numbers = append(s.numbers, uint64(n))
			s.mu.Unlock()
		}
	}
	return result
}

func (s *paramSpy) take() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.numbers
	s.numbers = nil
	return out
}

// TestFollowResume stops a follower and starts another on the same store:
// it goes on from the store's head without fetching the chain again, also
// when that head has left the endpoint's chain meanwhile.
func TestFollowResume(t *testing.T) {
	b := chaintest.New(allForks)
	blocksWithUncles(b, 40)
	node := newFakeNode(t, b.Store()) // the builder's store: it grows and reorganises in place
	spy := &paramSpy{}
	node.SetRewrite(spy.rewrite)
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	if err := f.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := spy.take(); len(got) < 41 {
		t.Fatalf("the first follower fetched %d blocks, want all 41", len(got))
	}

	blocksWithUncles(b, 5)
	before := node.Calls("eth_getBlockByNumber")
	f = startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	// Counted at once: the polls that go on once synced would blur it.
	calls := node.Calls("eth_getBlockByNumber") - before
	if err := f.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	sameChain(t, dst, b.Store(), 0)
	got := spy.take()
	slices.Sort(got) // fetched in parallel
	if fmt.Sprint(got) != "[41 42 43 44 45]" {
		t.Errorf("the resumed follower fetched blocks %v, want the 5 new ones, 41-45", got)
	}
	// The polls of latest and of the tags come on top of the 5 new
	// blocks; the chain's 41 blocks must not.
	if calls >= 41 {
		t.Errorf("the resumed follower made %d eth_getBlockByNumber calls, as many as a new copy", calls)
	}

	// While no follower runs, the endpoint reorganises below the store's
	// head: the next follower finds out and switches.
	old := branch(b, 44, 45)
	side := b.Fork(43)
	side.AddBlocks(4, chaintest.Txs(2))
	side.Reorg()
	f = startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	sameChain(t, dst, b.Store(), 0)
	offChain(t, dst, old)
}

// tamperBlock returns a rewrite that applies change to the members of
// block n as eth_getBlockByNumber and eth_getBlockByHash answer it with
// transaction objects.
func tamperBlock(n uint64, change func(members map[string]json.RawMessage)) func(string, []json.RawMessage, json.RawMessage) json.RawMessage {
	return func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method != "eth_getBlockByNumber" && method != "eth_getBlockByHash" {
			return result
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(result, &members) != nil || string(members["number"]) != fmt.Sprintf(`"%#x"`, n) {
			return result
		}
		change(members)
		out, err := json.Marshal(members)
		if err != nil {
			panic(err)
		}
		return out
	}
}

// tamperTx applies change to the members of transaction i of a block.
func tamperTx(i int, change func(tx map[string]json.RawMessage)) func(map[string]json.RawMessage) {
	return func(members map[string]json.RawMessage) {
		var txs []json.RawMessage
		if json.Unmarshal(members["transactions"], &txs) != nil || len(txs) <= i {
			return
		}
		var tx map[string]json.RawMessage
		if json.Unmarshal(txs[i], &tx) != nil {
			return // hashes only: nothing to tamper with
		}
		change(tx)
		txs[i], _ = json.Marshal(tx)
		members["transactions"], _ = json.Marshal(txs)
	}
}

// TestFollowRefusesTampered serves a chain with one block tampered with:
// the follower stops below it, never stores it, logs the refusal, and
// goes on once the endpoint serves the block as it is.
func TestFollowRefusesTampered(t *testing.T) {
	const target = 9 // a block with transactions and an uncle
	other := chaintest.Key(7).Address()
	tests := []struct {
		name    string
		rewrite func(string, []json.RawMessage, json.RawMessage) json.RawMessage
		field   string // what the logged error names
	}{
		{"transaction value", tamperBlock(target, tamperTx(0, func(tx map[string]json.RawMessage) {
			tx["value"] = json.RawMessage(`"0x1"`)
		})), "transaction 0"},
		{"sender", tamperBlock(target, tamperTx(1, func(tx map[string]json.RawMessage) {
			tx["from"], _ = json.Marshal(other)
		})), "from"},
		{"header field", tamperBlock(target, func(m map[string]json.RawMessage) {
			m["stateRoot"] = json.RawMessage(`"0x` + strings.Repeat("ab", 32) + `"`)
		}), "hash"},
		{"uncle", func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
			if method != "eth_getUncleByBlockHashAndIndex" {
				return result
			}
			var members map[string]json.RawMessage
			if json.Unmarshal(result, &members) != nil || string(members["number"]) != fmt.Sprintf(`"%#x"`, target-1) {
				return result
			}
			members["gasLimit"] = json.RawMessage(`"0x1c9c381"`)
			out, _ := json.Marshal(members)
			return out
		}, "uncle 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := chaintest.New(preMerge)
			blocksWithUncles(b, 12)
			src := b.Store()
			real := storeBlock(t, src, target)
			if len(real.Uncles) == 0 || len(real.Transactions) < 2 {
				t.Fatalf("block %d has %d uncles and %d transactions: the test needs both", target, len(real.Uncles), len(real.Transactions))
			}
			node := newFakeNode(t, src)
			node.SetRewrite(tc.rewrite)
			dst := memstore.New()
			f := startFollower(t, dst, node, upstream.FollowConfig{Concurrency: 4})
			waitFor(t, "the block to be refused twice", func() bool { return len(f.logs.find("does not verify")) >= 2 })
			rec := f.logs.find("does not verify")[0]
			if rec.level != slog.LevelError || rec.attrs["endpoint"].String() == "" || !strings.Contains(rec.attrs["err"].String(), tc.field) {
				t.Errorf("refusal logged at %v with endpoint %q and error %q, want Error naming %q", rec.level, rec.attrs["endpoint"], rec.attrs["err"], tc.field)
			}
			waitFor(t, "the blocks below the tampered one", func() bool { return latestHash(dst) == b.Block(target-1).Hash })
			// The follower keeps asking while it is refused: nothing of
			// the block may be stored meanwhile.
			time.Sleep(50 * time.Millisecond)
			ctx := context.Background()
			if got := storeBlock(t, dst, backend.Latest).Number; got != target-1 {
				t.Fatalf("the store went on to block %d past the tampered block %d", got, target)
			}
			if _, err := dst.BlockByHash(ctx, real.Hash); !errors.Is(err, backend.ErrNotFound) {
				t.Fatalf("the tampered block is stored (%v)", err)
			}
			if p := f.Progress(); p.Synced || p.Height != target-1 {
				t.Errorf("progress %+v while refusing block %d", p, target)
			}

			node.SetRewrite(nil)
			waitSynced(t, f, dst, src)
			sameChain(t, dst, src, 0)
		})
	}
}

// reshape rewrites a block or uncle object as another client might send
// it: members in another order (a map's, sorted), nested objects too,
// members go-ethereum does not send, and no totalDifficulty, or a wrong
// one.
func reshape(method string, _ []json.RawMessage, result json.RawMessage) json.RawMessage {
	if !strings.HasPrefix(method, "eth_get") || string(result) == "null" {
		return result
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(result))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return result
	}
	m["author"] = m["miner"] // Nethermind's
	if txs, ok := m["transactions"].([]any); ok {
		for _, tx := range txs {
			if o, ok := tx.(map[string]any); ok {
				o["extra"] = "0x"
			}
		}
	}
	if _, ok := m["totalDifficulty"]; ok {
		if m["number"] == "0x5" {
			delete(m, "totalDifficulty") // as current specifications and Reth answer
		} else {
			m["totalDifficulty"] = "0x1" // wrong: the store must compute its own
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return out
}

// TestFollowOtherShapes follows an endpoint whose answers are ordered and
// filled as other clients' are, with wrong or missing total difficulties:
// the store answers exactly what the source does, total difficulty
// included, because it renders and computes everything itself.
func TestFollowOtherShapes(t *testing.T) {
	b := chaintest.New(allForks)
	blocksWithUncles(b, 22)
	node := newFakeNode(t, b.Store())
	node.SetRewrite(reshape)
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	sameChain(t, dst, b.Store(), 0)
}

// TestFollowTotalDifficulty checks the total difficulty from the genesis,
// and from a later block with or without a given one.
func TestFollowTotalDifficulty(t *testing.T) {
	b := chaintest.New(preMerge)
	blocksWithUncles(b, 24)
	src := b.Store()
	srcHead := storeBlock(t, src, backend.Latest)
	if srcHead.TotalDifficulty == nil || srcHead.TotalDifficulty.Uint64() != 25*0x20000 {
		t.Fatalf("the source's head has total difficulty %v, want 25 blocks of 0x20000", srcHead.TotalDifficulty)
	}

	t.Run("from the genesis", func(t *testing.T) {
		dst := memstore.New()
		f := startFollower(t, dst, newFakeNode(t, src), upstream.FollowConfig{})
		waitSynced(t, f, dst, src)
		if got := storeBlock(t, dst, backend.Latest).TotalDifficulty; got == nil || !got.Eq(srcHead.TotalDifficulty) {
			t.Errorf("total difficulty %v, want %v", got, srcHead.TotalDifficulty)
		}
		sameChain(t, dst, src, 0)
	})
	t.Run("from block 10 with its total difficulty", func(t *testing.T) {
		dst := memstore.New()
		td := storeBlock(t, src, 10).TotalDifficulty
		f := startFollower(t, dst, newFakeNode(t, src), upstream.FollowConfig{From: 10, FromTotalDifficulty: td})
		waitSynced(t, f, dst, src)
		// Every uncle from block 12 on has its parent in the store, so
		// everything from block 10 on is the source's, total difficulty
		// included.
		sameChain(t, dst, src, 10)
		if got := storeBlock(t, dst, backend.Earliest).Number; got != 10 {
			t.Errorf("earliest is %d, want 10", got)
		}
	})
	t.Run("from block 10 without", func(t *testing.T) {
		dst := memstore.New()
		f := startFollower(t, dst, newFakeNode(t, src), upstream.FollowConfig{From: 10})
		waitSynced(t, f, dst, src)
		for _, n := range []backend.BlockNumber{10, 17, backend.Latest} {
			if got := storeBlock(t, dst, n).TotalDifficulty; got != nil {
				t.Errorf("block %v has total difficulty %v, which cannot be known", n, got)
			}
		}
	})
	t.Run("from a post-merge block of a chain whose total difficulty froze", func(t *testing.T) {
		// Chain id 1 is mainnet's: past the merge every block has the
		// total difficulty it froze at.
		mb := chaintest.New(chaintest.Config{Seed: 5, ChainID: 1})
		mb.AddBlocks(8, chaintest.Txs(2))
		dst := memstore.New()
		f := startFollower(t, dst, newFakeNode(t, mb.Store()), upstream.FollowConfig{From: 5})
		waitSynced(t, f, dst, mb.Store())
		want := uint256.MustFromDecimal("58750003716598352816469")
		for _, n := range []backend.BlockNumber{5, 8} {
			if got := storeBlock(t, dst, n).TotalDifficulty; got == nil || !got.Eq(want) {
				t.Errorf("block %d has total difficulty %v, want mainnet's final %v", n, got, want)
			}
		}
	})
}

// TestFollowRateLimited answers a request with 429 and Retry-After: 1
// during the backfill: the follower asks nothing more until the second
// is over, and catches up.
func TestFollowRateLimited(t *testing.T) {
	t.Parallel() // most of it is the second it waits
	b := chaintest.New(preMerge)
	blocksWithUncles(b, 15)
	node := newFakeNode(t, b.Store())
	var (
		mu       sync.Mutex
		requests int
		limited  []time.Time // when each 429 was sent
		after    []time.Time // when the request after each came
	)
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		requests++
		now := time.Now()
		if len(after) < len(limited) {
			after = append(after, now)
		}
		if requests == 6 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			limited = append(limited, now)
			return true
		}
		return false
	})
	dst := memstore.New()
	// One block at a time, so that no request is already on its way when
	// a 429 comes back.
	f := startFollower(t, dst, node, upstream.FollowConfig{Concurrency: 1})
	waitSynced(t, f, dst, b.Store())
	sameChain(t, dst, b.Store(), 0)
	mu.Lock()
	defer mu.Unlock()
	if len(limited) != 1 || len(after) != 1 {
		t.Fatalf("%d requests limited and %d after, want 1", len(limited), len(after))
	}
	for i := range limited {
		// Retry-After is in whole seconds; the clock of the server and
		// of the client are one, so only scheduling can shorten it.
		if gap := after[i].Sub(limited[i]); gap < 950*time.Millisecond {
			t.Errorf("the request after 429 number %d came %v later, before the second it asked for", i+1, gap)
		}
	}
}

// TestFollowFaults serves the backfill through 500s, truncated answers,
// dropped connections and answers slower than the follower's timeout:
// every block is still copied exactly.
func TestFollowFaults(t *testing.T) {
	b := chaintest.New(allForks)
	blocksWithUncles(b, 30)
	node := newFakeNode(t, b.Store())
	var requests, faults atomic.Int64
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		i := requests.Add(1)
		if i > 30 {
			return false // enough: let the test end
		}
		switch i % 5 {
		case 1:
			faults.Add(1)
			http.Error(w, "upstream node failed", http.StatusInternalServerError)
			return true
		case 2:
			faults.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":0,"result":{"number":"0x`))
			return true
		case 3:
			faults.Add(1)
			if i%2 == 1 {
				// A connection closed without an answer.
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return true
			}
			// Slower than the follower waits: it gives up and asks again.
			// The body is read first: only then does the server watch
			// the connection, and end the context when the client hangs
			// up.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
			return true
		}
		return false
	})
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{Concurrency: 4, Timeout: 250 * time.Millisecond})
	waitSynced(t, f, dst, b.Store())
	sameChain(t, dst, b.Store(), 0)
	if faults.Load() < 15 {
		t.Fatalf("only %d faults were served", faults.Load())
	}
	if got := len(f.logs.find("request failed")); got < int(faults.Load()) {
		t.Errorf("%d failed requests logged, want one for each fault", got)
	}
}

// TestFollowReadersWhileBackfilling reads the store while the follower
// fills it: every block read by number is the source's.
func TestFollowReadersWhileBackfilling(t *testing.T) {
	b := chaintest.New(allForks)
	blocksWithUncles(b, 60)
	src := b.Store()
	want := branch(b, 0, 60)
	node := newFakeNode(t, src)
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{Concurrency: 4})
	ctx := context.Background()
	done := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := uint64(r); ; n = (n + 7) % 61 {
				select {
				case <-done:
					return
				default:
				}
				got, err := dst.BlockByNumber(ctx, backend.BlockNumber(n))
				if errors.Is(err, backend.ErrNotFound) {
					continue
				}
				if err != nil {
					t.Errorf("block %d: %v", n, err)
					return
				}
				if got.Hash != want[n].Hash {
					t.Errorf("block %d is %s, want %s", n, got.Hash, want[n].Hash)
					return
				}
				reads.Add(1)
				// Leave the follower a share of the machine: the point is
				// reads beside writes, not a load test.
				time.Sleep(100 * time.Microsecond)
			}
		}()
	}
	waitSynced(t, f, dst, src)
	close(done)
	wg.Wait()
	if reads.Load() == 0 {
		t.Error("no block was read while the follower wrote")
	}
	sameChain(t, dst, src, 0)
}

// runAlone runs a follower that is expected to stop by itself, and
// returns what Run returned.
func runAlone(t *testing.T, store upstream.Store, node *fakeNode) error {
	t.Helper()
	f, err := upstream.NewFollower(store, upstream.FollowConfig{Endpoint: node.URL, PollInterval: testPoll, Logger: slog.New(&logRecorder{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	err = f.Run(ctx)
	if ctx.Err() != nil {
		t.Fatal("Run went on following an endpoint of another chain")
	}
	return err
}

// TestFollowAnotherChain refuses an endpoint that serves another chain
// than the store holds: another chain id, or another genesis.
func TestFollowAnotherChain(t *testing.T) {
	b := chaintest.New(preMerge)
	blocksWithUncles(b, 5)
	node := newFakeNode(t, b.Store())

	t.Run("chain id", func(t *testing.T) {
		dst := memstore.New()
		if err := dst.SetChainID(5); err != nil {
			t.Fatal(err)
		}
		err := runAlone(t, dst, node)
		if err == nil || !strings.Contains(err.Error(), "chain") {
			t.Fatalf("Run returned %v, want an error about the chain id", err)
		}
		if dst.Len() != 0 {
			t.Errorf("%d blocks stored from another chain", dst.Len())
		}
	})
	t.Run("genesis", func(t *testing.T) {
		cfg := preMerge
		cfg.Seed++
		ob := chaintest.New(cfg)
		ob.AddBlocks(3, nil)
		dst := snapshot(t, ob.Store())
		err := runAlone(t, dst, node)
		if err == nil || !strings.Contains(err.Error(), "another chain") {
			t.Fatalf("Run returned %v, want an error about another chain", err)
		}
		sameChain(t, dst, ob.Store(), 0)
	})
}

// TestNewFollowerRefuses checks the configurations NewFollower refuses.
func TestNewFollowerRefuses(t *testing.T) {
	store := memstore.New()
	for name, cfg := range map[string]upstream.FollowConfig{
		"no endpoint":          {},
		"not http":             {Endpoint: "ws://127.0.0.1:8546"},
		"no host":              {Endpoint: "http:///rpc"},
		"negative concurrency": {Endpoint: "http://127.0.0.1:8545", Concurrency: -1},
		"negative poll":        {Endpoint: "http://127.0.0.1:8545", PollInterval: -time.Second},
		"a nanosecond's poll":  {Endpoint: "http://127.0.0.1:8545", PollInterval: 1},
		"negative timeout":     {Endpoint: "http://127.0.0.1:8545", Timeout: -time.Second},
	} {
		if _, err := upstream.NewFollower(store, cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := upstream.NewFollower(nil, upstream.FollowConfig{Endpoint: "http://127.0.0.1:8545"}); err == nil {
		t.Error("no store: no error")
	}
}

// TestNewFollowerReplacedDefaultTransport makes a Follower given no
// client in a program that replaced http.DefaultTransport with a
// RoundTripper of its own, as tracing and mocking libraries do: the
// follower used to clone it as an *http.Transport, and panicked.
func TestNewFollowerReplacedDefaultTransport(t *testing.T) {
	saved := http.DefaultTransport
	http.DefaultTransport = roundTripperFunc(saved.RoundTrip)
	defer func() { http.DefaultTransport = saved }()
	if _, err := upstream.NewFollower(memstore.New(), upstream.FollowConfig{Endpoint: "http://127.0.0.1:8545"}); err != nil {
		t.Fatal(err)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestFollowLogsRefusalReason has the endpoint refuse every request as a
// provider refuses a wrong key, with HTTP 401 and a JSON-RPC error that
// says why: the follower's log gives the reason, which the operator has
// to act on, and not the status alone.
func TestFollowLogsRefusalReason(t *testing.T) {
	b := chaintest.New(allForks)
	b.AddBlocks(2, chaintest.Txs(1))
	node := newFakeNode(t, b.Store())
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"jsonrpc":"2.0","id":0,"error":{"code":-32002,"message":"rejected due to project ID settings"}}`))
		return true
	})
	f := startFollower(t, memstore.New(), node, upstream.FollowConfig{})
	waitFor(t, "a failed request logged", func() bool { return len(f.logs.find("request failed")) > 0 })
	got := f.logs.find("request failed")[0].attrs["err"].String()
	if want := `HTTP 401: "rejected due to project ID settings"`; !strings.Contains(got, want) {
		t.Errorf("the refusal is logged as %q, want it to hold %s", got, want)
	}
}

// mainnetBlock decodes the block an eth_getBlockByNumber fixture of the
// mainnet folder answers, with its transaction objects.
func mainnetBlock(t *testing.T, file string) *backend.Block {
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
	if len(cases) == 0 || cases[0].Response.Result == nil || !cases[0].Response.Result.HasTransactionBodies() {
		t.Fatalf("%s: no block with transaction objects in the first response", file)
	}
	return cases[0].Response.Result
}

// TestFollowMainnetBlocks follows an endpoint whose chain starts at a real
// mainnet block (18,000,000: 94 transactions, every sender recovered from
// mainnet's signatures): the block is copied exactly, and takes the total
// difficulty mainnet froze at the merge, which the endpoint did not give.
func TestFollowMainnetBlocks(t *testing.T) {
	frozen := uint256.MustFromDecimal("58750003716598352816469")
	for _, file := range []string{"test_08.json"} {
		t.Run(file, func(t *testing.T) {
			block := mainnetBlock(t, file)
			src := memstore.New()
			if err := src.AddBlock(block); err != nil {
				t.Fatal(err)
			}
			dst := memstore.New()
			f := startFollower(t, dst, newFakeNode(t, src), upstream.FollowConfig{From: block.Number})
			waitSynced(t, f, dst, src)
			want := storeBlock(t, src, backend.Latest)
			got := storeBlock(t, dst, backend.Latest)
			if got.TotalDifficulty == nil || !got.TotalDifficulty.Eq(frozen) {
				t.Errorf("block %d has total difficulty %v, want mainnet's final %v", got.Number, got.TotalDifficulty, frozen)
			}
			// The source knows no total difficulty for a block without
			// its ancestry: apart from it, the answers are the same.
			withoutTD := *got
			withoutTD.TotalDifficulty = nil
			if blockJSON(&withoutTD) != blockJSON(want) {
				t.Errorf("block %d differs from the source's", got.Number)
			}
			if id, err := dst.ChainID(context.Background()); err != nil || id != 1 {
				t.Errorf("chain id %d (%v), want mainnet's", id, err)
			}
		})
	}
}

// TestFollowExecutionAPIsChain copies the execution-apis chain of the
// shared fixtures (real blocks from Frontier rules to Prague, with
// uncles), loaded by the differential test's loader: every block, uncle
// and total difficulty is the source's, and safe and finalized are taken.
func TestFollowExecutionAPIsChain(t *testing.T) {
	src := fixturechains.ExecutionAPIs(t).Store
	dst := memstore.New()
	f := startFollower(t, dst, newFakeNode(t, src), upstream.FollowConfig{})
	waitSynced(t, f, dst, src)
	sameChain(t, dst, src, 0)
	safe, finalized := tagNumber(src, backend.Safe), tagNumber(src, backend.Finalized)
	if safe < 0 || finalized < 0 {
		t.Fatal("the fixture's chain has no safe or finalized block to follow")
	}
	waitFor(t, "safe and finalized", func() bool {
		return tagNumber(dst, backend.Safe) == safe && tagNumber(dst, backend.Finalized) == finalized
	})
}

// TestFollowRateAfterStall backfills 200 blocks, then has the endpoint
// fail every request: nothing is written any more. BlocksPerSecond is "the
// rate at which blocks were written over about the last 10 seconds": 12 s
// later it must be 0, not the backfill's blocks spread over the time since.
func TestFollowRateAfterStall(t *testing.T) {
	t.Parallel() // 12 s of waiting
	b := chaintest.New(preMerge)
	b.AddBlocks(200, chaintest.Txs(1))
	node := newFakeNode(t, b.Store())
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusBadGateway)
		return true
	})
	time.Sleep(12 * time.Second)
	if p := f.Progress(); p.BlocksPerSecond != 0 {
		t.Errorf("nothing written for 12 s, yet Progress says %.2f blocks a second (%+v)", p.BlocksPerSecond, p)
	}
}
