package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// TestFollowAnnouncedMissing has the node announce a head it does not
// serve, as a provider does whose machines behind one address are not
// all at the same height: the follower asks again at the next poll, not
// as fast as the node answers, and takes the block once it is served.
func TestFollowAnnouncedMissing(t *testing.T) {
	b := chaintest.New(allForks)
	b.AddBlocks(20, chaintest.Txs(1))
	node := newFakeNode(t, b.Store())
	dst := memstore.New()
	const poll = 100 * time.Millisecond
	f := startFollower(t, dst, node, upstream.FollowConfig{PollInterval: poll})
	waitSynced(t, f, dst, b.Store())

	b.AddBlocks(1, chaintest.Txs(1))
	var hide atomic.Bool
	hide.Store(true)
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if hide.Load() && method == "eth_getBlockByNumber" && len(params) > 0 && string(params[0]) == `"0x15"` {
			return json.RawMessage("null")
		}
		return result
	})
	before := node.Calls("eth_getBlockByNumber")
	time.Sleep(10 * poll)
	// A poll asks for the latest block and block 21, and once synced the
	// safe and finalized ones: 4 calls a poll at most.
	calls := node.Calls("eth_getBlockByNumber") - before
	if calls > 4*(10+2) {
		t.Errorf("%d calls of eth_getBlockByNumber in %v of polls every %v, for a block the node does not serve", calls, 10*poll, poll)
	}
	t.Logf("%d calls of eth_getBlockByNumber in %v, polling every %v", calls, 10*poll, poll)
	hide.Store(false)
	waitSynced(t, f, dst, b.Store())
}

// TestFollowNodeBelowStore has the node fall back below the first block of
// a store that starts past the genesis, as a node restarted and syncing
// again does: the follower waits for it, rather than take it for another
// chain, and goes on once the node is back above.
func TestFollowNodeBelowStore(t *testing.T) {
	b := chaintest.New(allForks)
	b.AddBlocks(20, chaintest.Txs(1))
	full := b.Store()
	node := newFakeNode(t, full)
	dst := &failingStore{Store: memstore.New()}
	f := startFollower(t, dst, node, upstream.FollowConfig{From: 10})
	waitSynced(t, f, dst, full)
	// Reads of the store's first block that fail meanwhile are retried:
	// they tell nothing of where the node's chain is.
	dst.earliestReads.Store(3)

	early := memstore.New()
	for n := range uint64(6) {
		blk := storeBlock(t, full, backend.BlockNumber(n))
		if err := early.AddBlock(blk, storeUncles(t, full, blk)...); err != nil {
			t.Fatal(err)
		}
	}
	node.SetStore(early)
	before := node.Calls("eth_getBlockByNumber")
	waitFor(t, "the follower to poll the node below the store's first block", func() bool {
		return node.Calls("eth_getBlockByNumber")-before >= 20
	})
	b.AddBlocks(5, chaintest.Txs(1))
	node.SetStore(b.Store())
	waitSynced(t, f, dst, b.Store())
	if err := f.stop(); err != nil {
		t.Errorf("Run: %v, want it to have waited for the node", err)
	}
}

// failingStore fails the first calls of some of its methods, as a
// database does that is restarting: reads of the chain id, writes of it,
// reads of the first block; while flaky is set, every other read of the
// latest block; and while brokenNumber is above 0, the reads of the block
// of that number.
type failingStore struct {
	*memstore.Store
	chainIDReads, chainIDWrites, earliestReads atomic.Int32
	flaky                                      atomic.Bool
	latestReads                                atomic.Int32
	brokenNumber                               atomic.Int64
}

var errReset = errors.New("the connection was reset")

func (s *failingStore) ChainID(ctx context.Context) (uint64, error) {
	if s.chainIDReads.Add(-1) >= 0 {
		return 0, errReset
	}
	return s.Store.ChainID(ctx)
}

func (s *failingStore) SetChainID(id uint64) error {
	if s.chainIDWrites.Add(-1) >= 0 {
		return errReset
	}
	return s.Store.SetChainID(id)
}

func (s *failingStore) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	if n == backend.Earliest && s.earliestReads.Add(-1) >= 0 {
		return nil, errReset
	}
	if n == backend.Latest && s.flaky.Load() && s.latestReads.Add(1)%2 == 0 {
		return nil, errReset
	}
	if broken := s.brokenNumber.Load(); broken > 0 && n == backend.BlockNumber(broken) {
		return nil, errReset
	}
	return s.Store.BlockByNumber(ctx, n)
}

// TestFollowTagStoreFails has the store fail its reads of the block the
// endpoint marks safe: the tag waits, and the log says why, until the
// store reads it again.
func TestFollowTagStoreFails(t *testing.T) {
	b := chaintest.New(allForks)
	b.AddBlocks(10, chaintest.Txs(1))
	dst := &failingStore{Store: memstore.New()}
	f := startFollower(t, dst, newFakeNode(t, b.Store()), upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	dst.brokenNumber.Store(5)
	if err := b.Store().SetSafe(5); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the log of the safe block not read", func() bool {
		return len(f.logs.find("a tag's block not read from the store")) > 0
	})
	if got := tagNumber(dst, backend.Safe); got >= 0 {
		t.Errorf("safe set to %d while the store fails to read block 5", got)
	}
	dst.brokenNumber.Store(0)
	waitFor(t, "safe at block 5", func() bool { return tagNumber(dst, backend.Safe) == 5 })
}

// TestFollowProgressStoreFails fails every other read of the store's
// latest block once the follower is current: Progress goes on reporting
// the height the store has, never 0 for a read that failed.
func TestFollowProgressStoreFails(t *testing.T) {
	b := chaintest.New(allForks)
	b.AddBlocks(10, chaintest.Txs(1))
	dst := &failingStore{Store: memstore.New()}
	f := startFollower(t, dst, newFakeNode(t, b.Store()), upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	dst.flaky.Store(true)
	// Watched until the follower has read the latest block at least four
	// times while flaky, two of them failed, and for 30 polls at least.
	least, deadline := time.Now().Add(30*testPoll), time.Now().Add(untilTimeout)
	for time.Now().Before(least) || dst.latestReads.Load() < 4 && time.Now().Before(deadline) {
		if h := f.Progress().Height; h != 10 {
			t.Fatalf("Progress reports height %d while the store holds block 10 (%d reads of its latest block)", h, dst.latestReads.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if dst.latestReads.Load() < 4 {
		t.Fatalf("%d reads of the latest block while it was flaky: the test sees nothing", dst.latestReads.Load())
	}
}

// TestFollowStoreFailsAtStart fails the store's first reads of the chain
// id as the follower starts, and its first write of it: the follower
// retries them, and copies the chain.
func TestFollowStoreFailsAtStart(t *testing.T) {
	b := chaintest.New(allForks)
	b.AddBlocks(10, chaintest.Txs(1))
	dst := &failingStore{Store: memstore.New()}
	dst.chainIDReads.Store(2)
	dst.chainIDWrites.Store(1)
	f := startFollower(t, dst, newFakeNode(t, b.Store()), upstream.FollowConfig{})
	waitSynced(t, f, dst, b.Store())
	if got := f.logs.find("following failed"); len(got) != 3 {
		t.Errorf("%d failures logged, want the store's 3", len(got))
	}
	if err := f.stop(); err != nil {
		t.Errorf("Run: %v, want it to have retried the store", err)
	}
}
