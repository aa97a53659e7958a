package upstream

import (
	"sync"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// TestCacheNumbersBounded fills a small cache from several goroutines at
// once with final blocks, some put twice and some finalized after: no
// number outlives its block's eviction, so that the numbers map, and the
// blocks it holds, stay within the cache's bound.
func TestCacheNumbersBounded(t *testing.T) {
	const (
		writers = 4
		blocks  = 20000
	)
	block := func(n uint64) *verified {
		// The writers' blocks of one time fall in one shard: n/writers
		// picks it.
		var h backend.Hash
		h[0], h[1], h[2], h[3], h[4] = byte(n/writers), byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		return &verified{block: &backend.Block{Header: backend.Header{Number: n}, Hash: h, Size: 100}}
	}
	cost := blockCost(block(0))
	c := newBlockCache(cacheShards * 4 * cost) // four blocks a shard
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := uint64(w); n < blocks; n += writers {
				v := block(n)
				switch n % 3 {
				case 0:
					c.put(v, true)
				case 1:
					c.put(v, false)
					c.finalize(n, v.block.Hash)
				case 2:
					c.put(v, false)
					c.put(v, true)
				}
			}
		}()
	}
	wg.Wait()
	cached, stale := 0, 0
	c.numbers.Range(func(k, e any) bool {
		entry := e.(*cacheEntry)
		s := c.shard(entry.v.block.Hash)
		if s.entries[entry.v.block.Hash] != entry {
			stale++
		} else {
			cached++
		}
		return true
	})
	if stale > 0 {
		t.Errorf("%d numbers map blocks evicted from the cache (%d map cached ones)", stale, cached)
	}
}

// TestCacheKeepsTheSettledCopy puts copies of one block with and without
// its total difficulty, as fetches of it by hash and by number that meet
// give them: every put answers with the copy that has it, once one had.
func TestCacheKeepsTheSettledCopy(t *testing.T) {
	c := newBlockCache(1 << 20)
	copyOf := func(td *uint256.Int) *verified {
		return &verified{block: &backend.Block{Header: backend.Header{Number: 7}, Hash: backend.Hash{7}, Size: 100, TotalDifficulty: td}}
	}
	unsettled, settled := copyOf(nil), copyOf(uint256.NewInt(1234))
	if got := c.put(unsettled, false); got != unsettled {
		t.Fatal("the first copy put is not the one answered with")
	}
	if got := c.put(settled, true); got.block.TotalDifficulty == nil {
		t.Error("a copy with its total difficulty, put after one without, is answered without it")
	}
	if got := c.put(copyOf(nil), false); got.block.TotalDifficulty == nil {
		t.Error("a copy without its total difficulty, put after one with, is answered without it")
	}
	for what, got := range map[string]*verified{"by hash": c.get(backend.Hash{7}), "by number": c.byNumber(7)} {
		if got == nil || got.block.TotalDifficulty == nil {
			t.Errorf("%s: %v, want the copy with its total difficulty", what, got)
		}
	}
}
