package upstream

import (
	"container/list"
	"sync"

	"github.com/blockrpc/blockrpc/backend"
)

// cacheShards spreads the cache's locks, so that readers on many cores do
// not queue on one.
const cacheShards = 16

// blockCache holds verified blocks by hash, least recently used first out
// when their estimated size passes the bound. A block is immutable by
// hash, so an entry never goes stale. It also maps the numbers of cached
// blocks at or below the finalized block to their hashes, which are final
// too; an entry leaving the cache takes its number with it, so the map is
// bounded with it.
type blockCache struct {
	shards [cacheShards]cacheShard

	numMu   sync.RWMutex
	numbers map[uint64]backend.Hash
}

type cacheShard struct {
	mu      sync.Mutex
	bound   int64
	used    int64
	entries map[backend.Hash]*list.Element
	lru     list.List // of *cacheEntry, most recent at the front
}

type cacheEntry struct {
	v    *verified
	cost int64
	// final is set when the block's number is in numbers.
	final bool
}

func newBlockCache(bound int64) *blockCache {
	c := &blockCache{numbers: make(map[uint64]backend.Hash)}
	for i := range c.shards {
		c.shards[i].bound = bound / cacheShards
		c.shards[i].entries = make(map[backend.Hash]*list.Element)
	}
	return c
}

func (c *blockCache) shard(h backend.Hash) *cacheShard { return &c.shards[h[0]%cacheShards] }

// get returns the cached block with hash h, or nil.
func (c *blockCache) get(h backend.Hash) *verified {
	s := c.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entries[h]
	if !ok {
		return nil
	}
	s.lru.MoveToFront(el)
	return el.Value.(*cacheEntry).v
}

// byNumber returns the cached final block at number n, or nil.
func (c *blockCache) byNumber(n uint64) *verified {
	c.numMu.RLock()
	h, ok := c.numbers[n]
	c.numMu.RUnlock()
	if !ok {
		return nil
	}
	return c.get(h)
}

// put caches v, and maps its number to it when final is set (the block is
// at or below the finalized one). A block larger than a shard's bound is
// not cached.
func (c *blockCache) put(v *verified, final bool) {
	h := v.block.Hash
	s := c.shard(h)
	cost := blockCost(v)
	s.mu.Lock()
	if el, ok := s.entries[h]; ok {
		s.lru.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		mark := final && !e.final
		e.final = e.final || final
		s.mu.Unlock()
		if mark {
			c.setNumber(v.block.Number, h)
		}
		return
	}
	if cost > s.bound {
		s.mu.Unlock()
		return
	}
	var evicted []*cacheEntry
	for s.used+cost > s.bound {
		el := s.lru.Back()
		e := el.Value.(*cacheEntry)
		s.lru.Remove(el)
		delete(s.entries, e.v.block.Hash)
		s.used -= e.cost
		if e.final {
			evicted = append(evicted, e)
		}
	}
	s.entries[h] = s.lru.PushFront(&cacheEntry{v: v, cost: cost, final: final})
	s.used += cost
	s.mu.Unlock()

	if final || len(evicted) > 0 {
		c.numMu.Lock()
		for _, e := range evicted {
			if c.numbers[e.v.block.Number] == e.v.block.Hash {
				delete(c.numbers, e.v.block.Number)
			}
		}
		if final {
			c.numbers[v.block.Number] = h
		}
		c.numMu.Unlock()
	}
}

// finalize maps n to h if the block is cached: the tracker saw it become
// final. A nil cache (the cache is off) has nothing to map.
func (c *blockCache) finalize(n uint64, h backend.Hash) {
	if c == nil {
		return
	}
	s := c.shard(h)
	s.mu.Lock()
	el, ok := s.entries[h]
	if ok {
		el.Value.(*cacheEntry).final = true
	}
	s.mu.Unlock()
	if ok {
		c.setNumber(n, h)
	}
}

func (c *blockCache) setNumber(n uint64, h backend.Hash) {
	c.numMu.Lock()
	c.numbers[n] = h
	c.numMu.Unlock()
}

// blockCost estimates the memory a cached block takes: its Go values come
// to about three times its RLP size, plus the fixed parts of each
// transaction and uncle.
func blockCost(v *verified) int64 {
	return int64(3*v.block.Size) + int64(len(v.block.Transactions))*400 + int64(len(v.uncles))*700 + 1024
}
