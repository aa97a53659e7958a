package upstream

import (
	"errors"
	"sync"
	"time"
)

// endpoint is one upstream with what the Backend knows of its health.
type endpoint struct {
	*client

	mu sync.Mutex
	// skipUntil is when a failing endpoint is tried again; failures
	// doubles the wait, up to maxBackoff, until an answer succeeds.
	skipUntil time.Time
	failures  int
	lastErr   error
	// askedWait is set while the wait is one the endpoint asked for (the
	// Retry-After of a 429 or 503): it is not asked even as a last resort.
	askedWait bool
	// readFailed is set when the last failure was a block read's: an
	// answer to a poll does not end it, only a block read that succeeds.
	readFailed bool
	// failedAt is when the last failure was recorded: the answer to a
	// request sent before it (a poll under way as a read got a 429) does
	// not end it.
	failedAt time.Time
	// head is the number of its latest block at the last poll, and
	// finalized its finalized block then, if it had one.
	head      uint64
	headKnown bool
	finalized *ref
	// wrongChain is set for an endpoint that serves another chain: it is
	// never used again. chainKnown is set once its chain id is known to be
	// the Backend's: until then its blocks may be another chain's.
	wrongChain bool
	chainKnown bool
}

const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// failed records a failure, of a block read when read is set: the
// endpoint is skipped for a while, for as long as a 429 or 503 asked when
// it did. It returns how many failures in a row this makes.
func (e *endpoint) failed(err error, now time.Time, read bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	wait := minBackoff << min(e.failures, 10)
	wait = min(wait, maxBackoff)
	var se *StatusError
	e.askedWait = errors.As(err, &se) && se.RetryAfter > 0
	if e.askedWait {
		wait = min(se.RetryAfter, 10*maxBackoff)
		read = false // asked of every request, polls too
	}
	e.readFailed = read
	e.failures++
	e.lastErr = err
	e.skipUntil = now.Add(wait)
	e.failedAt = now
	return e.failures
}

// succeeded records an answer that held together, of a block read when
// read is set, and returns how many failures in a row it ends. An endpoint
// whose block reads fail (a node that serves blocks that do not verify, or
// fails to serve them) answers polls all the same: only a read ends those
// failures, so that its wait keeps growing. sent is when the request was
// sent: one sent before the last failure says nothing of the endpoint
// since.
func (e *endpoint) succeeded(read bool, sent time.Time) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.readFailed && !read || sent.Before(e.failedAt) {
		return 0
	}
	ended := e.failures
	e.failures, e.lastErr, e.skipUntil, e.readFailed, e.askedWait = 0, nil, time.Time{}, false, false
	return ended
}

func (e *endpoint) setHead(number uint64, finalized *ref) {
	e.mu.Lock()
	e.head, e.headKnown, e.finalized = number, true, finalized
	e.mu.Unlock()
}

// lastHead returns the number of its latest block at its last poll that
// it answered, if any.
func (e *endpoint) lastHead() (uint64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.head, e.headKnown
}

// finalizedIs reports whether the endpoint's finalized block at its last
// poll was f.
func (e *endpoint) finalizedIs(f *ref) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return f != nil && e.finalized != nil && *e.finalized == *f
}

// errWaiting marks an endpoint that a poll left alone: it is waiting out
// a failure.
var errWaiting = errors.New("endpoint waiting out a failure")

// pollWaiting reports whether the endpoint's polls wait out a failure.
// Those of one whose block reads fail go on: they are how the head is
// known, and without them it would go stale for as long as the reads
// back off.
func (e *endpoint) pollWaiting(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.readFailed && now.Before(e.skipUntil)
}

// usable reports whether the endpoint is worth asking now: known to serve
// the chain, not waiting out a failure and not lagging more than maxLag
// blocks behind best.
func (e *endpoint) usable(now time.Time, best, maxLag uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.chainKnown || now.Before(e.skipUntil) {
		return false
	}
	return e.lag(best) <= maxLag
}

// lag returns how many blocks the endpoint's head at its last poll is
// behind best: 0 while its head is unknown. e.mu is held.
func (e *endpoint) lag(best uint64) uint64 {
	if !e.headKnown || e.head >= best {
		return 0
	}
	return best - e.head
}

// EndpointStatus is what the Backend knows of one endpoint.
type EndpointStatus struct {
	Endpoint  string // scheme and host only
	Healthy   bool   // neither failing (a failure, with no answer since) nor lagging
	Head      uint64 // its latest block at the last poll; 0 if unknown
	Lag       uint64 // blocks behind the best endpoint's head
	LastError string // its last failure, until an answer succeeds
}

// order returns the endpoints to try, in the order of preference: the
// usable ones first, then, as a last resort, those being skipped (an
// answer from one is better than none), but for those that asked to be
// left alone for a while (Retry-After). Endpoints not known to serve the
// chain (another's, or one whose chain id has yet to be asked) are left
// out: a block without signed transactions would not tell.
func order(eps []*endpoint, now time.Time, best, maxLag uint64) []*endpoint {
	out := make([]*endpoint, 0, len(eps))
	var rest []*endpoint
	for _, e := range eps {
		switch {
		case e.usable(now, best, maxLag):
			out = append(out, e)
		case e.lastResort(now):
			rest = append(rest, e)
		}
	}
	return append(out, rest...)
}

// lastResort reports whether the endpoint may be asked when no usable one
// answers: it serves the chain, and is not waiting out a Retry-After.
func (e *endpoint) lastResort(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.chainKnown && !(e.askedWait && now.Before(e.skipUntil))
}

// onChain reports whether the endpoint is known to serve the chain.
func (e *endpoint) onChain() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.chainKnown
}

// learnedChain records the endpoint's chain id, want being the Backend's,
// and reports whether the two agree: one that serves another chain is
// never used again.
func (e *endpoint) learnedChain(id, want uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.chainKnown, e.wrongChain = id == want, id != want
	return e.chainKnown
}

func (e *endpoint) isWrongChain() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.wrongChain
}
