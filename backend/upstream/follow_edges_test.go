package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// The follower at the edges of what it is given: a store that starts past
// the genesis, a pending block as the head moves, an endpoint that will
// not serve old blocks or answers one that does not verify.

// followFromBlock20 has an endpoint serve a chain of n blocks made with
// cfg, and a follower copy it into a new store from block 20, given its
// total difficulty; it returns once the follower has caught up.
func followFromBlock20(t *testing.T, cfg chaintest.Config, n int) (*chaintest.Builder, *fakeNode, *memstore.Store, *follower) {
	t.Helper()
	b := chaintest.New(cfg)
	b.AddBlocks(n, chaintest.Txs(1))
	node := newFakeNode(t, snapshot(t, b.Store()))
	dst := memstore.New()
	from := storeBlock(t, b.Store(), 20)
	f := startFollower(t, dst, node, upstream.FollowConfig{From: 20, FromTotalDifficulty: from.TotalDifficulty})
	waitSynced(t, f, dst, node.Store())
	return b, node, dst, f
}

// TestFollowReplacesFirstBlock follows a store that starts at block 20
// (From, with its total difficulty) through a reorganisation of one block
// at 20: the new branch replaces the store's first block, whose parent
// both share, with the total difficulty that follows from it; and a
// follower started again on that store takes it for the endpoint's chain.
func TestFollowReplacesFirstBlock(t *testing.T) {
	b, node, dst, f := followFromBlock20(t, allForks, 20)

	// replace has the endpoint reorganise to a branch from block 19 of
	// blocks blocks, told apart by their extra data.
	replace := func(extra string, blocks int) *chaintest.Builder {
		branch := b.Fork(19)
		branch.AddBlocks(blocks, func(i int, g *chaintest.BlockGen) {
			g.SetExtraData([]byte(extra))
			chaintest.Txs(1)(i, g)
		})
		branch.Reorg()
		reorgTo(t, node, b)
		return branch
	}
	side := replace("side", 2)
	waitSynced(t, f, dst, node.Store())
	if err := f.stop(); err != nil {
		t.Fatalf("Run, at a reorganisation of the store's first block: %v", err)
	}
	sameChain(t, dst, node.Store(), 20)
	if first := storeBlock(t, dst, backend.Earliest); first.Hash != side.Block(20).Hash {
		t.Errorf("the store's first block is %s, want the new branch's %s", first.Hash, side.Block(20).Hash)
	}

	// The endpoint replaces block 20 again while no follower runs: one
	// started then takes the store for the endpoint's chain all the same,
	// and follows it.
	replace("other", 3)
	f = startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, node.Store())
	sameChain(t, dst, node.Store(), 20)
}

// TestFollowReplacesFirstBlockThenBack follows a proof-of-work store that
// starts at block 20 through a reorganisation that replaces its first
// block, and then back to the first branch, as it was or grown: the store
// holds that branch's blocks off the chain, its block 20 with the total
// difficulty it had, which the switch back must not give anew to another
// block. It used to give it to the lowest block it fetched, which the store
// refused, at every poll, for good.
func TestFollowReplacesFirstBlockThenBack(t *testing.T) {
	for _, grown := range []int{0, 3} {
		t.Run(fmt.Sprintf("grown%d", grown), func(t *testing.T) {
			b, node, dst, f := followFromBlock20(t, preMerge, 25)

			side := sideBranch(b, 19, 7)
			reorgTo(t, node, b)
			waitSynced(t, f, dst, node.Store())
			if first := storeBlock(t, dst, backend.Earliest); first.Hash != side.Block(20).Hash {
				t.Fatalf("the store's first block is %s, want the side branch's %s", first.Hash, side.Block(20).Hash)
			}

			b.AddBlocks(grown, chaintest.Txs(1))
			b.Reorg()
			reorgTo(t, node, b)
			waitSynced(t, f, dst, node.Store())
			sameChain(t, dst, node.Store(), 20)
			if failed := f.logs.find("following failed"); len(failed) > 0 {
				t.Errorf("following failed %d times, first: %v", len(failed), failed[0].attrs["err"])
			}
		})
	}
}

// TestFollowStartUnverifiedFirstBlock starts a follower on a store that
// holds the endpoint's chain, and garbles the first answer for the
// store's first block (a hash that is not its header's): that answer is
// refused and asked again, not taken for another chain.
func TestFollowStartUnverifiedFirstBlock(t *testing.T) {
	b := chaintest.New(allForks)
	b.AddBlocks(5, chaintest.Txs(1))
	node := newFakeNode(t, b.Store())
	dst := snapshot(t, b.Store())
	var garbled atomic.Bool
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByNumber" && string(params[0]) == `"0x0"` && garbled.CompareAndSwap(false, true) {
			return setMember(result, "hash", quoted(b.Block(1).Hash.String()))
		}
		return result
	})
	b.AddBlocks(2, chaintest.Txs(1))
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	if !garbled.Load() {
		t.Fatal("no answer for block 0 was garbled: the test sees nothing")
	}
	if len(f.logs.find("refused a block that does not verify")) == 0 {
		t.Error("the garbled answer was not logged as a block that does not verify")
	}
}

// TestFollowStartFirstBlockNotServed follows a store that holds blocks 5
// to 10 (copied from an archive node, say) through a node that has
// expired its blocks below 9, as go-ethereum does from 1.16 on: it
// answers an error for them (code 4444). The store's first block cannot
// be checked against it, and the follower follows the head all the same.
func TestFollowStartFirstBlockNotServed(t *testing.T) {
	b := chaintest.New(allForks)
	b.AddBlocks(10, chaintest.Txs(1))
	dst := memstore.New()
	if err := dst.SetChainID(b.Config().ChainID); err != nil {
		t.Fatal(err)
	}
	for n := uint64(5); n <= 10; n++ {
		if err := dst.AddBlock(b.Block(n), storeUncles(t, b.Store(), b.Block(n))...); err != nil {
			t.Fatal(err)
		}
	}
	b.AddBlocks(5, chaintest.Txs(1))
	node := newFakeNode(t, b.Store())
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var c struct {
			ID     json.RawMessage
			Method string
			Params []json.RawMessage
		}
		var n backend.BlockNumber
		if json.Unmarshal(body, &c) != nil || c.Method != "eth_getBlockByNumber" ||
			json.Unmarshal(c.Params[0], &n) != nil || n < 0 || n >= 9 {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(c.ID) + `,"error":{"code":4444,"message":"pruned history unavailable"}}`))
		return true
	})
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	sameChain(t, dst, b.Store(), 5)
}

// TestFollowPendingFollowsHead checks that the store never serves a
// pending block built on another block than its latest: the one taken
// goes as soon as the head moves, during a catch-up of 60 blocks, and
// when the endpoint fails right after a new block is written.
func TestFollowPendingFollowsHead(t *testing.T) {
	b := chaintest.New(allForks)
	b.AddBlocks(20, chaintest.Txs(1))
	b.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(2)(0, g) })
	node := newFakeNode(t, b.Store())
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{Concurrency: 1})
	ctx := context.Background()
	waitPending := func() {
		t.Helper()
		waitSynced(t, f, dst, b.Store())
		waitFor(t, "the pending block", func() bool {
			p, err := dst.BlockByNumber(ctx, backend.Pending)
			return err == nil && p.ParentHash == latestHash(dst)
		})
	}
	// contradicts reports a pending block the store serves on another
	// block than its latest, read in that order: the follower writes the
	// head, then the pending block on it.
	contradicts := func() (pending, latest *backend.Block) {
		l, lerr := dst.BlockByNumber(ctx, backend.Latest)
		p, perr := dst.BlockByNumber(ctx, backend.Pending)
		l2, _ := dst.BlockByNumber(ctx, backend.Latest)
		if perr == nil && lerr == nil && l2 != nil && l2.Hash == l.Hash && p.ParentHash != l.Hash {
			return p, l
		}
		return nil, nil
	}
	waitPending()

	// A catch-up, at 5 ms a request.
	node.SetFault(func(http.ResponseWriter, *http.Request) bool {
		time.Sleep(5 * time.Millisecond)
		return false
	})
	b.AddBlocks(60, chaintest.Txs(1))
	var seen [2]*backend.Block
	waitFor(t, "the catch-up", func() bool {
		if p, l := contradicts(); p != nil && seen[0] == nil {
			seen = [2]*backend.Block{p, l}
		}
		return latestHash(dst) == b.Head().Hash
	})
	if seen[0] != nil {
		t.Errorf("during a catch-up the store served pending block %d on %s while its latest block was %d %s",
			seen[0].Number, seen[0].ParentHash, seen[1].Number, seen[1].Hash)
	}
	b.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(2)(0, g) })
	waitPending()

	// A block, and the endpoint down right after the follower wrote it.
	b.AddBlocks(1, chaintest.Txs(1))
	want := storeBlock(t, b.Store(), backend.Latest)
	var down atomic.Bool
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if down.Load() || latestHash(dst) == want.Hash {
			down.Store(true)
			http.Error(w, "down", http.StatusBadGateway)
			return true
		}
		return false
	})
	waitFor(t, "the new block in the store", func() bool { return latestHash(dst) == want.Hash })
	time.Sleep(10 * testPoll)
	if p, l := contradicts(); p != nil {
		t.Errorf("with the endpoint down, the store serves pending block %d on %s while its latest block is %d %s",
			p.Number, p.ParentHash, l.Number, l.Hash)
	}
}

// TestFollowKeepsFinality has the endpoint, having given block 20 as
// finalized, switch to a longer branch that left its chain at block 5, as
// an address whose node was swapped for one on a minority fork would: the
// branch is not followed, block 10 stays the finalized chain's, and the
// log says why. Back on its chain, grown by two blocks, the endpoint is
// followed again.
func TestFollowKeepsFinality(t *testing.T) {
	a, storeA, storeB := minorityFork(t)
	node := newFakeNode(t, storeA)
	dst, f := followToFinalized(t, node, storeA)

	node.SetStore(storeB)
	waitFor(t, "the branch refused, or followed", func() bool {
		return len(f.logs.find("following failed")) > 0 || latestHash(dst) == storeBlock(t, storeB, backend.Latest).Hash
	})
	if b := storeBlock(t, dst, 10); b.Hash != a.Block(10).Hash {
		t.Fatalf("block 10 below finalized block 20 replaced by %s (extraData %q)", b.Hash, b.ExtraData)
	}
	recs := f.logs.find("following failed")
	if err := fmt.Sprint(recs[0].attrs["err"]); !strings.Contains(err, "which it gave as finalized") {
		t.Errorf("the follower's failure: %s, want it to say the branch leaves the finalized block", err)
	}

	a.AddBlocks(2, chaintest.Txs(1))
	grown := copyStore(t, a.Store(), nil)
	if err := grown.SetFinalized(20); err != nil {
		t.Fatal(err)
	}
	node.SetStore(grown)
	waitSynced(t, f, dst, grown)
}

// TestFollowReorgToSameHeight has the endpoint reorganise to a branch of
// the same height as the store's: the follower switches to it.
func TestFollowReorgToSameHeight(t *testing.T) {
	t.Parallel()
	b := chaintest.New(preMerge)
	blocksWithUncles(b, 20)
	node := newFakeNode(t, snapshot(t, b.Store()))
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, node.Store())
	old := branch(b, 19, 20)
	sideBranch(b, 18, 2)
	reorgTo(t, node, b)
	waitSynced(t, f, dst, node.Store())
	sameChain(t, dst, node.Store(), 0)
	offChain(t, dst, old)
}

// TestFollowKeepsTheFinalizedBlockItself has the endpoint switch to a
// branch that leaves the chain right below the finalized block 20: it
// would replace block 20 itself, and is not followed.
func TestFollowKeepsTheFinalizedBlockItself(t *testing.T) {
	t.Parallel()
	a, storeA, storeB := minorityForkAt(t, 19)
	node := newFakeNode(t, storeA)
	dst, f := followToFinalized(t, node, storeA)
	node.SetStore(storeB)
	waitFor(t, "the branch refused, or followed", func() bool {
		return len(f.logs.find("following failed")) > 0 || latestHash(dst) == storeBlock(t, storeB, backend.Latest).Hash
	})
	if b := storeBlock(t, dst, 20); b.Hash != a.Block(20).Hash {
		t.Fatalf("finalized block 20 replaced by %s (extraData %q)", b.Hash, b.ExtraData)
	}
}

// TestFollowForkBelowFirstBlockFatal follows a store that starts at
// block 20, then has the endpoint reorganise to a branch that leaves the
// chain at block 15, below it: the store cannot hold that chain, and Run
// stops with an error rather than write the branch.
func TestFollowForkBelowFirstBlockFatal(t *testing.T) {
	t.Parallel()
	b := chaintest.New(allForks)
	b.AddBlocks(25, chaintest.Txs(1))
	node := newFakeNode(t, snapshot(t, b.Store()))
	dst := memstore.New()
	from := storeBlock(t, b.Store(), 20)
	f, err := upstream.NewFollower(dst, upstream.FollowConfig{Endpoint: node.URL, From: 20, FromTotalDifficulty: from.TotalDifficulty,
		PollInterval: testPoll, Logger: slog.New(&logRecorder{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	head := b.Block(25).Hash
	waitFor(t, "block 25 in the store", func() bool { return latestHash(dst) == head })

	sideBranch(b, 15, 12)
	reorgTo(t, node, b)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "below its first block") {
			t.Fatalf("Run returned %v, want an error saying the branch forks below the store's first block", err)
		}
	case <-time.After(waitTimeout):
		cancel()
		<-done
		t.Fatalf("Run went on following a branch that forks below the store's first block; the store's head is %s", latestHash(dst))
	}
	if got := storeBlock(t, dst, 20); got.Hash != from.Hash {
		t.Errorf("the store's block 20 is %s, want %s", got.Hash, from.Hash)
	}
}

// TestFollowReplacedFirstBlockTotalDifficulty follows a proof-of-work
// store that starts at block 20 through a reorganisation that replaces
// block 20: the new block 20 has its parent's total difficulty, the old
// one's less its difficulty, plus its own; and so has every block above.
func TestFollowReplacedFirstBlockTotalDifficulty(t *testing.T) {
	t.Parallel()
	b, node, dst, f := followFromBlock20(t, preMerge, 25)
	side := sideBranch(b, 19, 7)
	reorgTo(t, node, b)
	waitSynced(t, f, dst, node.Store())
	for _, n := range []uint64{20, 26} {
		got, want := storeBlock(t, dst, backend.BlockNumber(n)), side.Block(n)
		if got.Hash != want.Hash {
			t.Fatalf("block %d is %s, want the side branch's %s", n, got.Hash, want.Hash)
		}
		if got.TotalDifficulty == nil || want.TotalDifficulty == nil || !got.TotalDifficulty.Eq(want.TotalDifficulty) {
			t.Errorf("block %d: totalDifficulty %v, want %v", n, got.TotalDifficulty, want.TotalDifficulty)
		}
	}
}

// TestFollowTagOfAnotherBlockNotSet has the endpoint give as finalized a
// block the store holds another of at that number: the store's block is
// not marked finalized.
func TestFollowTagOfAnotherBlockNotSet(t *testing.T) {
	t.Parallel()
	b := chaintest.New(allForks)
	b.AddBlocks(22, chaintest.Txs(1))
	node := newFakeNode(t, snapshot(t, b.Store()))
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, node.Store())
	polls := countPolls(node)
	other := quoted("0x" + strings.Repeat("77", 32))
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByNumber" && len(params) > 0 && string(params[0]) == `"finalized"` {
			r := setMember(storeBlock(t, b.Store(), 15).AppendJSON(nil, false), "hash", other)
			return r
		}
		return result
	})
	from := polls.Load()
	waitFor(t, "three polls", func() bool { return polls.Load() >= from+3 })
	if n := tagNumber(dst, backend.Finalized); n >= 0 {
		t.Fatalf("the store's block %d marked finalized, for another block the endpoint gave at that number", n)
	}
}

// TestFollowFirstBlockOfAnotherNumberRefused has the endpoint answer
// block 21 when the follower, starting from block 20, asks for block 20:
// it is refused and asked again, and the store starts at block 20.
func TestFollowFirstBlockOfAnotherNumberRefused(t *testing.T) {
	t.Parallel()
	b := chaintest.New(allForks)
	b.AddBlocks(25, chaintest.Txs(1))
	node := newFakeNode(t, snapshot(t, b.Store()))
	next := b.Block(21)
	var given atomic.Int64
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByNumber" && len(params) > 1 && string(params[0]) == `"0x14"` && string(params[1]) == "true" {
			given.Add(1)
			return next.AppendJSON(nil, true)
		}
		return result
	})
	dst := memstore.New()
	from := storeBlock(t, b.Store(), 20)
	f := startFollower(t, dst, node, upstream.FollowConfig{From: 20, FromTotalDifficulty: from.TotalDifficulty})
	waitFor(t, "block 21 given for block 20", func() bool { return given.Load() > 0 })
	node.SetRewrite(nil)
	waitSynced(t, f, dst, node.Store())
	if first := storeBlock(t, dst, backend.Earliest); first.Hash != from.Hash {
		t.Fatalf("the store's first block is block %d %s, want block 20 %s", first.Number, first.Hash, from.Hash)
	}
}

// TestFollowStartFirstBlockOfAnotherNumber starts a follower on a store
// that holds the endpoint's chain, and answers block 1 once for the
// store's first block, block 0: that answer is refused and asked again,
// not taken for another chain, which would stop the follower.
func TestFollowStartFirstBlockOfAnotherNumber(t *testing.T) {
	t.Parallel()
	b := chaintest.New(allForks)
	b.AddBlocks(5, chaintest.Txs(1))
	node := newFakeNode(t, b.Store())
	dst := snapshot(t, b.Store())
	one := b.Block(1)
	var wrong atomic.Bool
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByNumber" && string(params[0]) == `"0x0"` && wrong.CompareAndSwap(false, true) {
			return one.AppendJSON(nil, false)
		}
		return result
	})
	b.AddBlocks(2, chaintest.Txs(1))
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	if !wrong.Load() {
		t.Fatal("no answer for block 0 was replaced: the test sees nothing")
	}
}

// TestFollowPendingOnAnotherParentNotTaken has the endpoint's pending
// block name another parent than the store's head: it is not taken as the
// store's pending block.
func TestFollowPendingOnAnotherParentNotTaken(t *testing.T) {
	t.Parallel()
	b := chaintest.New(allForks)
	b.AddBlocks(22, chaintest.Txs(1))
	b.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(1)(0, g) })
	node := newFakeNode(t, snapshot(t, b.Store()))
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, node.Store())
	waitFor(t, "the pending block in the store", func() bool {
		_, err := dst.BlockByNumber(context.Background(), backend.Pending)
		return err == nil
	})
	polls := countPolls(node)
	other := quoted(b.Block(19).Hash.String())
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByNumber" && len(params) > 0 && string(params[0]) == `"pending"` {
			return setMember(result, "parentHash", other)
		}
		return result
	})
	from := polls.Load()
	waitFor(t, "three polls", func() bool { return polls.Load() >= from+3 })
	if p, err := dst.BlockByNumber(context.Background(), backend.Pending); err == nil {
		t.Fatalf("the store's pending block has parent %s, not its head %s", p.ParentHash, latestHash(dst))
	}
}

// sideBranch forks b after block at, adds n blocks of a transaction each
// marked "side", so that they differ from b's, and makes the branch b's
// canonical chain.
func sideBranch(b *chaintest.Builder, at uint64, n int) *chaintest.Builder {
	side := b.Fork(at)
	side.AddBlocks(n, func(i int, g *chaintest.BlockGen) {
		g.SetExtraData([]byte("side"))
		chaintest.Txs(1)(i, g)
	})
	side.Reorg()
	return side
}
