package blockrpc

import (
	"context"
	"sync"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// DefaultAnswerCache is the default size of the answer cache, in bytes.
const DefaultAnswerCache = 128 << 20

// WithAnswerCache sets the size of the answer cache in bytes (default
// 128 MiB); 0 or less turns it off. The cache keeps rendered blocks, by hash
// and by whether they hold full transactions, so that a hot block is
// written, not rendered again. A block looked up by number is resolved to
// its hash first, so after a reorganisation the answer is the new block's.
func WithAnswerCache(bytes int64) Option { return func(c *config) { c.answerCache = bytes } }

// cacheShards spreads the cache over locks, so that concurrent requests
// rarely wait for each other.
const cacheShards = 16

// answerCache is a byte-bounded cache of rendered block objects, least
// recently used first out. An answer depends on the block and, of what is
// not in its hash, only on its total difficulty (which a store may learn
// later) and on whether it is the pending block (never cached).
type answerCache struct {
	shards   [cacheShards]cacheShard
	observer *Observer
}

type cacheKey struct {
	hash   backend.Hash
	fullTx bool
}

type cacheEntry struct {
	key        cacheKey
	td         uint256.Int
	hasTD      bool
	json       []byte
	prev, next *cacheEntry
}

type cacheShard struct {
	mu      sync.Mutex
	entries map[cacheKey]*cacheEntry
	ring    cacheEntry // the sentinel: ring.next is the most recently used
	size    int64
	limit   int64
}

func newAnswerCache(size int64, observer *Observer) *answerCache {
	if size <= 0 {
		return nil
	}
	c := &answerCache{observer: observer}
	for i := range c.shards {
		s := &c.shards[i]
		s.entries = make(map[cacheKey]*cacheEntry)
		s.ring.prev, s.ring.next = &s.ring, &s.ring
		s.limit = size / cacheShards
	}
	return c
}

// appendBlock appends the block object of v, from the cache when it holds
// it, and keeps it there otherwise.
func (c *answerCache) appendBlock(ctx context.Context, dst []byte, v blockView) ([]byte, error) {
	if c == nil || v.block == nil || v.pending {
		return v.appendJSON(dst)
	}
	key := cacheKey{v.block.Hash, v.fullTx}
	s := &c.shards[key.hash[0]%cacheShards]
	s.mu.Lock()
	e := s.entries[key]
	hit := e != nil && e.matches(v.block)
	if hit {
		s.unlink(e)
		s.pushFront(e)
		if shared, ok := ctx.Value(sharedResultKey{}).(*sharedResult); ok && shared.json == nil {
			shared.json, shared.at = e.json, len(dst)
		} else {
			dst = append(dst, e.json...)
		}
	}
	s.mu.Unlock()
	if c.observer != nil && c.observer.Cache != nil {
		c.observer.Cache(ctx, hit)
	}
	if hit {
		return dst, nil
	}
	start := len(dst)
	dst, err := v.appendJSON(dst)
	if err != nil {
		return dst, err
	}
	s.put(key, v.block, dst[start:])
	return dst, nil
}

// sharedResult is a cached result that a single call's answer refers to
// instead of holding a copy: the answer is written whole, so the writer can
// send the cached bytes as they are, at position at of the answer. Copying
// a full block's answer was a tenth of the cost of serving it from the
// cache. A batch's answers are streamed in chunks, and copy.
type sharedResult struct {
	json []byte // immutable: entries are only ever dropped, never changed
	at   int
}

// singleAnswerEnd is what follows the result of a single answer written
// whole, and what follows each cached result in memory.
const singleAnswerEnd = "}\n"

// sharedResultKey marks a call whose answer may refer to a cached result.
type sharedResultKey struct{}

// dropShared forgets the cached result a call's answer referred to, for an
// answer that fails after all (the backend, or a hook, failing once the
// result was found): written into an error, it would make it no JSON.
func dropShared(ctx context.Context) {
	if shared, ok := ctx.Value(sharedResultKey{}).(*sharedResult); ok {
		*shared = sharedResult{}
	}
}

func (e *cacheEntry) matches(b *backend.Block) bool {
	if b.TotalDifficulty == nil {
		return !e.hasTD
	}
	return e.hasTD && e.td.Eq(b.TotalDifficulty)
}

// put keeps a copy of an answer, making room by letting the least recently
// used answers go. An answer larger than the shard is not kept.
func (s *cacheShard) put(key cacheKey, b *backend.Block, answer []byte) {
	cost := int64(len(answer))
	if cost > s.limit {
		return
	}
	// The single answer's end follows the copy in memory, past its length:
	// see answerWriter.sharedParts.
	kept := append(append(make([]byte, 0, len(answer)+len(singleAnswerEnd)), answer...), singleAnswerEnd...)
	e := &cacheEntry{key: key, json: kept[:len(answer)]}
	if b.TotalDifficulty != nil {
		e.td, e.hasTD = *b.TotalDifficulty, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.entries[key]; old != nil {
		s.remove(old)
	}
	for s.size+cost > s.limit {
		s.remove(s.ring.prev)
	}
	s.entries[key] = e
	s.pushFront(e)
	s.size += cost
}

func (s *cacheShard) remove(e *cacheEntry) {
	s.unlink(e)
	delete(s.entries, e.key)
	s.size -= int64(len(e.json))
}

func (s *cacheShard) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (s *cacheShard) pushFront(e *cacheEntry) {
	e.prev, e.next = &s.ring, s.ring.next
	s.ring.next.prev = e
	s.ring.next = e
}
