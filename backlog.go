package blockrpc

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// backlog counts the bytes that requests hold, all together and by key:
// their bodies, and their answers while their clients read them. Past its
// limit new requests are refused, and so are those of a key that holds
// more than its share, half of the limit: a key whose clients read slowly,
// or send large bodies, cannot go on taking the backlog from the others.
// The bounds are checked as a request arrives and as its body is read; the
// answers of requests admitted are written even past them, each holding at
// most a chunk of a batch's answers and one block's.
type backlog struct {
	limit  int64
	total  atomic.Int64
	seed   maphash.Seed
	shards [16]backlogShard
}

// backlogShard holds the shares of the keys that hash to it. A share is
// kept when its key's last request ends, so that a key asking again and
// again does not make and drop it each time; those of keys with no request
// in flight are let go when the shard has grown to sweepAt.
type backlogShard struct {
	mu      sync.Mutex
	shares  map[string]*keyShare
	sweepAt int
}

// keyShare is what one key's requests in flight hold.
type keyShare struct {
	held atomic.Int64
	// requests is the key's requests in flight: counted up under the
	// shard's mutex, which the letting go of an idle share takes too.
	requests atomic.Int64
}

func newBacklog(limit int64) *backlog {
	b := &backlog{limit: limit, seed: maphash.MakeSeed()}
	for i := range b.shards {
		b.shards[i].shares = make(map[string]*keyShare)
	}
	return b
}

func (b *backlog) shard(key string) *backlogShard {
	return &b.shards[maphash.String(b.seed, key)%uint64(len(b.shards))]
}

// join counts a request of key in flight until leave, and returns its key's
// share.
func (b *backlog) join(key string) *keyShare {
	sh := b.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.shares[key]
	if s == nil {
		if len(sh.shares) >= max(sh.sweepAt, minSweep) {
			for k, idle := range sh.shares {
				if idle.requests.Load() == 0 {
					delete(sh.shares, k)
				}
			}
			// Twice what is left: keys with requests in flight are
			// not gone over again at every new key.
			sh.sweepAt = 2 * len(sh.shares)
		}
		s = new(keyShare)
		// The key is part of the request's path, and of the line it
		// came in: kept as it is, the share would keep all of it.
		sh.shares[strings.Clone(key)] = s
	}
	s.requests.Add(1)
	return s
}

// minSweep is how many shares a shard holds, at least, before it lets go
// of those of keys with no request in flight.
const minSweep = 64

// leave ends a request that join counted, and gives back the bytes it still
// held.
func (b *backlog) leave(s *keyShare, held int64) {
	b.add(s, -held)
	s.requests.Add(-1)
}

// full reports whether a new request of the key of s is refused: the
// backlog is past its limit, or the key past its share.
func (b *backlog) full(s *keyShare) bool {
	return b.total.Load() > b.limit || s.held.Load() > b.limit/2
}

// add counts n more bytes (fewer, when negative) held by a request of the
// key of s.
func (b *backlog) add(s *keyShare, n int64) {
	b.total.Add(n)
	s.held.Add(n)
}

// grow counts n more bytes of a request body, of which the request now holds
// own, and reports whether they take the backlog past its limit, or the key
// past its share, while others hold part of it: a request alone is read
// whole, as one answer alone is written whole.
func (b *backlog) grow(s *keyShare, n, own int64) (over bool) {
	total, held := b.total.Add(n), s.held.Add(n)
	return (total > b.limit && total > own) || (held > b.limit/2 && held > own)
}
