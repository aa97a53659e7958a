package upstream

import (
	"sync"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
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
