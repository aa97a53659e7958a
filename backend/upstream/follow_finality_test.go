package upstream_test

import (
	"context"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/memstore"
)

// TestFollowFinalityAfterRestart has a follower fill a store whose block 20
// the endpoint finalized, then stops it: a follower started again on
// the same store (a restart of the process) is pointed at the same
// address, which now serves a minority branch that left the chain at
// block 5. The store's finalized block must not be replaced, as it is
// not while the first follower runs (TestFollowKeepsFinality).
func TestFollowFinalityAfterRestart(t *testing.T) {
	a, storeA, storeB := minorityFork(t)
	node := newFakeNode(t, storeA)
	dst, f := followToFinalized(t, node, storeA)
	if err := f.stop(); err != nil {
		t.Fatal(err)
	}

	node.SetStore(storeB)
	f = startFollower(t, dst, node, upstream.FollowConfig{})
	waitFor(t, "the branch refused, or followed", func() bool {
		return len(f.logs.find("following failed")) > 0 || latestHash(dst) == storeBlock(t, storeB, backend.Latest).Hash
	})
	if b := storeBlock(t, dst, 10); b.Hash != a.Block(10).Hash {
		t.Fatalf("after a restart, block 10, below the store's finalized block 20, was replaced by %s (extraData %q)", b.Hash, b.ExtraData)
	}
	if fin, err := dst.BlockByNumber(context.Background(), backend.Finalized); err != nil || fin.Hash != a.Block(20).Hash {
		t.Fatalf("the store's finalized block is gone: %v", err)
	}
}

// TestFollowFinalityNotBack has the endpoint give block 20 as
// finalized; then its address answers from a node of the same chain that
// is behind on finality (block 10), as a load balancer's other node does;
// then from a node on a branch that left the chain at block 15. Block 20,
// which the endpoint gave as finalized, must not be left, nor the store's
// finalized block go back.
func TestFollowFinalityNotBack(t *testing.T) {
	a, storeA, storeB := minorityForkAt(t, 15)
	lagging := copyStore(t, a.Store(), nil)
	if err := lagging.SetFinalized(10); err != nil {
		t.Fatal(err)
	}

	node := newFakeNode(t, storeA)
	dst, f := followToFinalized(t, node, storeA)
	finalized := func() int64 { return tagNumber(dst, backend.Finalized) }

	node.SetStore(lagging)
	calls := node.Calls("eth_getBlockByNumber")
	waitFor(t, "three polls of the lagging node", func() bool { return node.Calls("eth_getBlockByNumber") >= calls+12 })
	if got := finalized(); got != 20 {
		t.Errorf("the store's finalized block went from 20 to %d", got)
	}

	node.SetStore(storeB)
	waitFor(t, "the branch refused, or followed", func() bool {
		return len(f.logs.find("following failed")) > 0 || latestHash(dst) == storeBlock(t, storeB, backend.Latest).Hash
	})
	if b := storeBlock(t, dst, 16); b.Hash != a.Block(16).Hash {
		t.Fatalf("block 16, below block 20 the endpoint gave as finalized, was replaced by %s (extraData %q)", b.Hash, b.ExtraData)
	}
}

// followToFinalized starts a follower of node into a new store, and waits
// until the store holds src with block 20 finalized.
func followToFinalized(t *testing.T, node *fakeNode, src *memstore.Store) (*memstore.Store, *follower) {
	t.Helper()
	dst := memstore.New()
	f := startFollower(t, dst, node, upstream.FollowConfig{})
	waitSynced(t, f, dst, src)
	waitFor(t, "finalized block 20 in the store", func() bool { return tagNumber(dst, backend.Finalized) == 20 })
	return dst, f
}
