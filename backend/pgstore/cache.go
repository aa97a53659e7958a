package pgstore

import (
	"container/list"
	"sync"

	"github.com/blockrpc/blockrpc/backend"
)

// cacheKey names a block (index -1) or the index'th uncle of a block.
type cacheKey struct {
	hash  backend.Hash
	index int32
}

type cacheEntry struct {
	key   cacheKey
	value any // *backend.Block or *backend.Uncle
	size  int64
}

// cache keeps the blocks and uncles read last, by hash, up to a number of
// bytes. Only values that can no longer change go in: a block or an uncle
// whose total difficulty is known.
type cache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	items map[cacheKey]*list.Element
	order list.List // front: used last
	// hints maps the number of canonical blocks held to their hash, as of
	// the reorganisation counter hintTag: how a block is found by number
	// without asking PostgreSQL. A reorganisation clears them.
	hints   map[uint64]backend.Hash
	hintTag int64
}

// newCache returns a cache of limit bytes, or nil (no cache) for a limit
// of 0 or less. A nil cache's methods do nothing.
func newCache(limit int64) *cache {
	if limit <= 0 {
		return nil
	}
	return &cache{limit: limit, items: make(map[cacheKey]*list.Element), hints: make(map[uint64]backend.Hash)}
}

func (c *cache) get(k cacheKey) (any, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).value, true
}

// add keeps value under k; its size is what its encoding was, scaled to
// what the decoded value takes.
func (c *cache) add(k cacheKey, value any, encoded int) {
	if c == nil {
		return
	}
	size := int64(encoded)*3 + 512
	if size > c.limit/8 {
		return // a value that would push out much of the rest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.order.PushFront(&cacheEntry{key: k, value: value, size: size})
	c.size += size
	for c.size > c.limit {
		last := c.order.Back()
		e := last.Value.(*cacheEntry)
		c.order.Remove(last)
		delete(c.items, e.key)
		c.size -= e.size
		if b, ok := e.value.(*backend.Block); ok && c.hints[b.Number] == b.Hash {
			delete(c.hints, b.Number)
		}
	}
}

// block returns the canonical block held at number as of the
// reorganisation counter tag, if any.
func (c *cache) block(number uint64, tag int64) (*backend.Block, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if tag != c.hintTag {
		return nil, false
	}
	h, ok := c.hints[number]
	if !ok {
		return nil, false
	}
	e, ok := c.items[cacheKey{hash: h, index: -1}]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).value.(*backend.Block), true
}

// addHint notes that the block held with hash is the canonical one at
// number, as of the reorganisation counter tag: nothing is noted when the
// block is not held, or when a reorganisation since made tag old.
func (c *cache) addHint(number uint64, hash backend.Hash, tag int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[cacheKey{hash: hash, index: -1}]; ok && tag == c.hintTag {
		c.hints[number] = hash
	}
}

// resetHints forgets every hint: the canonical chain was reorganised, and
// tag is the new value of the counter.
func (c *cache) resetHints(tag int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hintTag = tag
	clear(c.hints)
}

// len returns the number of values held.
func (c *cache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}
