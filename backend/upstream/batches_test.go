package upstream_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// batchCap is a fault that refuses a batch of more than most calls as a
// provider that caps batches does, and counts what it refused and the
// largest batch it let through.
type batchCap struct {
	most    int
	refuse  func(w http.ResponseWriter, firstID json.RawMessage)
	refused atomic.Int64
	largest atomic.Int64
}

func (c *batchCap) fault(w http.ResponseWriter, r *http.Request) bool {
	var calls []struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal([]byte(requestBody(r)), &calls) != nil {
		return false // a single call
	}
	if len(calls) > c.most {
		c.refused.Add(1)
		c.refuse(w, calls[0].ID)
		return true
	}
	for {
		old := c.largest.Load()
		if int64(len(calls)) <= old || c.largest.CompareAndSwap(old, int64(len(calls))) {
			return false
		}
	}
}

// batchRefusals are the ways endpoints refuse a batch they will not take.
var batchRefusals = []struct {
	name   string
	most   int
	refuse func(w http.ResponseWriter, firstID json.RawMessage)
}{
	{"go-ethereum's limit", 4, func(w http.ResponseWriter, firstID json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `[{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"batch too large"}}]`, firstID)
	}},
	{"no batches at all", 1, func(w http.ResponseWriter, _ json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}`)
	}},
	{"-32600 without a word of batches", 4, func(w http.ResponseWriter, firstID json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `[{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":"invalid request"}}]`, firstID)
	}},
	{"HTTP 413", 8, func(w http.ResponseWriter, _ json.RawMessage) {
		http.Error(w, "request entity too large", http.StatusRequestEntityTooLarge)
	}},
}

// TestCappedBatches serves a Backend through an endpoint that refuses
// batches past a cap: the tracker's walk of 30 headers, its polls and its
// reads are sent in batches the endpoint takes, every block is served,
// the endpoint is not reported failing, and a refusal is met only until
// the cap is learnt, not at every walk.
func TestCappedBatches(t *testing.T) {
	for _, tc := range batchRefusals {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := faultChain(t)
			head := storeBlock(t, store, backend.Latest)
			node := newFakeNode(t, prefixStore(t, store, 2))
			capped := &batchCap{most: tc.most, refuse: tc.refuse}
			node.SetFault(capped.fault)
			up := openUp(t, upstream.Config{PollInterval: 10 * time.Millisecond}, node.URL)

			node.SetStore(store)
			eventually(t, "the Backend's head to be the endpoint's", func() bool { return latestHash(up) == head.Hash })
			readAll(t, up, store, untilTimeout)
			learnt := capped.refused.Load()
			if learnt == 0 {
				t.Fatal("no batch was refused: the test asks nothing of the cap")
			}
			if st := up.Status(); !st[0].Healthy || st[0].LastError != "" {
				t.Errorf("the endpoint's status: %+v; a refused batch is no failure", st[0])
			}

			// Another walk, as long as the first: no refusal this time.
			longer := chaintest.New(chaintest.Config{Seed: 22, London: 4, Merge: 10, Shanghai: 12, Cancun: 14, Prague: 16})
			for range 30 {
				longer.AddBlock(func(g *chaintest.BlockGen) { chaintest.Txs(1)(0, g) })
			}
			node.SetStore(longer.Store())
			want := storeBlock(t, longer.Store(), backend.Latest)
			eventually(t, "the Backend to follow the new chain", func() bool { return latestHash(up) == want.Hash })
			readAll(t, up, longer.Store(), untilTimeout)
			if got := capped.refused.Load(); got != learnt {
				t.Errorf("%d batches refused after the cap was learnt (%d before)", got-learnt, learnt)
			}
			if got := capped.largest.Load(); got > int64(tc.most) {
				t.Errorf("a batch of %d calls went through a cap of %d", got, tc.most)
			}
		})
	}
}

// TestFollowCappedBatches follows an endpoint that takes no batch, refused
// in each way: the tags (asked for together) and the uncles of a block
// (asked for in a batch) are copied all the same.
func TestFollowCappedBatches(t *testing.T) {
	for _, tc := range batchRefusals {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := chaintest.New(allForks)
			blocksWithUncles(b, 12)
			src := b.Store()
			if err := src.SetSafe(10); err != nil {
				t.Fatal(err)
			}
			if err := src.SetFinalized(8); err != nil {
				t.Fatal(err)
			}
			node := newFakeNode(t, src)
			capped := &batchCap{most: 1, refuse: tc.refuse}
			node.SetFault(capped.fault)
			dst := memstore.New()
			f := startFollower(t, dst, node, upstream.FollowConfig{})
			waitSynced(t, f, dst, src)
			sameChain(t, dst, src, 0)
			waitFor(t, "the tags", func() bool {
				return tagNumber(dst, backend.Safe) == 10 && tagNumber(dst, backend.Finalized) == 8
			})
			if capped.refused.Load() == 0 {
				t.Error("no batch was refused: the test asks nothing of the cap")
			}
			if got := capped.largest.Load(); got > 1 {
				t.Errorf("a batch of %d calls went through an endpoint that takes none", got)
			}
		})
	}
}
