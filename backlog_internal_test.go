package blockrpc

import (
	"fmt"
	"testing"
)

// TestBacklogShares checks the accounting behind WithBacklogLimit: a key
// past half the limit is full while others are not, what requests give
// back returns the counts to zero, and the shares of keys that come and
// go are let go while those of keys with requests in flight are kept.
func TestBacklogShares(t *testing.T) {
	b := newBacklog(1000)
	heavy, light := b.join("heavy"), b.join("light")
	b.add(heavy, 501)
	if !b.full(heavy) || b.full(light) {
		t.Errorf("a key holding 501 of 1000: full %v, another key: full %v; want true, false", b.full(heavy), b.full(light))
	}
	if over := b.grow(light, 500, 500); !over {
		t.Error("a body taking the backlog to 1001 of 1000 beside another key's bytes is not over")
	}
	b.leave(light, 500)
	if over := b.grow(heavy, 600, 600); !over {
		t.Error("a body taking a key to 1101 of its share of 500, beside its other request's bytes, is not over")
	}
	b.leave(heavy, 600)
	if b.full(light) || !b.full(heavy) {
		t.Errorf("after the bodies: light full %v, heavy full %v; want false, true", b.full(light), b.full(heavy))
	}
	alone := b.join("alone")
	b.add(heavy, -501)
	b.leave(heavy, 0)
	if over := b.grow(alone, 5000, 5000); over {
		t.Error("a body alone, over the whole backlog, is over: want it read whole")
	}
	b.leave(alone, 5000)
	if n := b.total.Load(); n != 0 {
		t.Fatalf("the backlog holds %d once every request left, want 0", n)
	}

	kept := b.join("kept")
	for i := range 10_000 {
		s := b.join(fmt.Sprint("passing-", i))
		b.add(s, 10)
		b.leave(s, 10)
	}
	shares := 0
	for i := range b.shards {
		shares += len(b.shards[i].shares)
	}
	if shares > len(b.shards)*minSweep {
		t.Errorf("%d shares kept after 10,000 keys came and went, want at most %d", shares, len(b.shards)*minSweep)
	}
	if again := b.join("kept"); again != kept || again.requests.Load() != 2 {
		t.Errorf("the share of a key with a request in flight was let go: %p %p, %d requests", again, kept, again.requests.Load())
	}
}
