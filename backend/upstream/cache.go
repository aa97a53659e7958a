package upstream

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/blockrpc/blockrpc/backend"
)

// cacheShards spreads the cache's locks, so that writers on many cores do
// not queue on one.
const cacheShards = 16

// blockCache holds verified blocks by hash within a bound on their
// estimated size. A block is immutable by hash, so an entry never goes
// stale. It also maps the numbers of cached blocks at or below the
// finalized block, which are final too; an entry leaving the cache takes
// its number with it, so that map is bounded with it.
//
// Eviction is CLOCK, a second chance: a hit only sets the entry's
// referenced bit, under a read lock, and the entry at the back of the
// list is evicted unless the bit is set, in which case it is cleared and
// the entry moved to the front. Hits, by far the most frequent operation,
// then never write the list: a hit costs about what memstore's lookup
// costs (BenchmarkCacheHit), where a move to the front took a write lock.
type blockCache struct {
	shards [cacheShards]cacheShard

	// numbers maps a final block's number to its *cacheEntry. Written once
	// a block is final and read on every request by number below the
	// tracker's window, it is the read-mostly case sync.Map is made for.
	numbers sync.Map
}

type cacheShard struct {
	mu      sync.RWMutex
	bound   int64
	used    int64
	entries map[backend.Hash]*cacheEntry
	clock   list.List // of *cacheEntry, newest at the front
}

type cacheEntry struct {
	v          *verified
	el         *list.Element // in the shard's clock
	cost       int64
	referenced atomic.Bool
	// final is set when the block's number is in numbers; guarded by the
	// shard's lock.
	final bool
}

func newBlockCache(bound int64) *blockCache {
	c := new(blockCache)
	for i := range c.shards {
		c.shards[i].bound = bound / cacheShards
		c.shards[i].entries = make(map[backend.Hash]*cacheEntry)
	}
	return c
}

func (c *blockCache) shard(h backend.Hash) *cacheShard { return &c.shards[h[0]%cacheShards] }

// get returns the cached block with hash h, or nil.
func (c *blockCache) get(h backend.Hash) *verified {
	s := c.shard(h)
	s.mu.RLock()
	e := s.entries[h]
	s.mu.RUnlock()
	if e == nil {
		return nil
	}
	e.touch()
	return e.v
}

// touch sets the referenced bit, reading it first: a hot entry's bit is
// already set, and a store every hit would make its cache line bounce
// between the cores reading it.
func (e *cacheEntry) touch() {
	if !e.referenced.Load() {
		e.referenced.Store(true)
	}
}

// byNumber returns the cached final block at number n, or nil.
func (c *blockCache) byNumber(n uint64) *verified {
	e, ok := c.numbers.Load(n)
	if !ok {
		return nil
	}
	entry := e.(*cacheEntry)
	entry.touch()
	return entry.v
}

// put caches v, and maps its number to it when final is set (the block is
// at or below the finalized one). A block larger than a shard's bound is
// not cached. It returns the block to answer with: the one cached before
// when that one is as complete, so that every answer of a block is the
// same, with its total difficulty once a copy had it settled.
func (c *blockCache) put(v *verified, final bool) *verified {
	h := v.block.Hash
	s := c.shard(h)
	cost := blockCost(v)
	// The numbers map is written under the shard's lock, where the entry
	// is known to be cached: written after, it could keep an entry evicted
	// meanwhile, and the block with it, past the cache's bound for good.
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[h]; e != nil {
		if e.v.block.TotalDifficulty != nil || v.block.TotalDifficulty == nil {
			e.touch()
			if final && !e.final {
				e.final = true
				c.numbers.Store(v.block.Number, e)
			}
			return e.v
		}
		// A copy with its total difficulty settled replaces the entry
		// (readers of the old one keep a block that does not change).
		final = final || e.final
		s.clock.Remove(e.el)
		delete(s.entries, h)
		s.used -= e.cost
		if e.final {
			c.numbers.CompareAndDelete(e.v.block.Number, e)
		}
	}
	if cost > s.bound {
		return v
	}
	for s.used+cost > s.bound {
		el := s.clock.Back()
		e := el.Value.(*cacheEntry)
		if e.referenced.Swap(false) {
			s.clock.MoveToFront(el) // its second chance
			continue
		}
		s.clock.Remove(el)
		delete(s.entries, e.v.block.Hash)
		s.used -= e.cost
		if e.final {
			c.numbers.CompareAndDelete(e.v.block.Number, e)
		}
	}
	e := &cacheEntry{v: v, cost: cost, final: final}
	e.el = s.clock.PushFront(e)
	s.entries[h] = e
	s.used += cost
	if final {
		c.numbers.Store(v.block.Number, e)
	}
	return v
}

// finalize maps n to the block h if it is cached: the tracker saw it
// become final. A nil cache (the cache is off) has nothing to map.
func (c *blockCache) finalize(n uint64, h backend.Hash) {
	if c == nil {
		return
	}
	s := c.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[h]; e != nil {
		e.final = true
		c.numbers.Store(n, e)
	}
}

// blockCost estimates the memory a cached block takes: its Go values come
// to about three times its RLP size, plus the fixed parts of each
// transaction and uncle.
func blockCost(v *verified) int64 {
	return int64(3*v.block.Size) + int64(len(v.block.Transactions))*400 + int64(len(v.uncles))*700 + 1024
}
