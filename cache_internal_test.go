package blockrpc

import (
	"context"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
)

// TestAnswerCacheBound fills a small cache with many answers and checks
// that it never holds more than its size, keeping the most recent.
func TestAnswerCacheBound(t *testing.T) {
	const size = cacheShards * 4096
	c := newAnswerCache(size, nil)
	ctx := context.Background()
	blocks := make([]*backend.Block, 2000)
	for i := range blocks {
		b := &backend.Block{Header: backend.Header{Number: uint64(i), ExtraData: make([]byte, 100)}}
		b.Hash[0], b.Hash[1], b.Hash[2] = byte(i), byte(i>>8), 1
		blocks[i] = b
		c.appendBlock(ctx, nil, blockView{block: b})
	}
	var held int64
	for i := range c.shards {
		s := &c.shards[i]
		if s.size > s.limit {
			t.Errorf("shard %d holds %d bytes, over its %d", i, s.size, s.limit)
		}
		var counted int64
		for e := s.ring.next; e != &s.ring; e = e.next {
			counted += int64(len(e.json))
		}
		if counted != s.size || len(s.entries) == 0 {
			t.Errorf("shard %d: entries of %d bytes, accounted %d", i, counted, s.size)
		}
		held += s.size
	}
	if held > size {
		t.Errorf("the cache holds %d bytes, over its %d", held, size)
	}
	last := blocks[len(blocks)-1]
	if s := &c.shards[last.Hash[0]%cacheShards]; s.entries[cacheKey{last.Hash, false}] == nil {
		t.Error("the most recent answer was not kept")
	}
	if s := &c.shards[blocks[0].Hash[0]%cacheShards]; s.entries[cacheKey{blocks[0].Hash, false}] != nil {
		t.Error("the oldest answer is still there")
	}
}
