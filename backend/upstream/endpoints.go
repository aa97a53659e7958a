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
	// head is the number of its latest block at the last poll.
	head      uint64
	headKnown bool
	// wrongChain is set for an endpoint that serves another chain: it is
	// never used again.
	wrongChain bool
}

const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// failed records a failure: the endpoint is skipped for a while, for as
// long as a 429 or 503 asked when it did. It returns how many failures in
// a row this makes.
func (e *endpoint) failed(err error, now time.Time) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	wait := minBackoff << min(e.failures, 10)
	wait = min(wait, maxBackoff)
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		wait = min(se.RetryAfter, 10*maxBackoff)
	}
	e.failures++
	e.lastErr = err
	e.skipUntil = now.Add(wait)
	return e.failures
}

// succeeded records an answer that held together, and returns how many
// failures in a row it ends.
func (e *endpoint) succeeded() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	ended := e.failures
	e.failures, e.lastErr, e.skipUntil = 0, nil, time.Time{}
	return ended
}

func (e *endpoint) setHead(number uint64) {
	e.mu.Lock()
	e.head, e.headKnown = number, true
	e.mu.Unlock()
}

// errWaiting marks an endpoint that a poll left alone: it is waiting out
// a failure.
var errWaiting = errors.New("endpoint waiting out a failure")

// waiting reports whether the endpoint is waiting out a failure.
func (e *endpoint) waiting(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return now.Before(e.skipUntil)
}

// usable reports whether the endpoint is worth asking now: not waiting out
// a failure and not lagging more than maxLag blocks behind best.
func (e *endpoint) usable(now time.Time, best, maxLag uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.wrongChain || now.Before(e.skipUntil) {
		return false
	}
	return !e.headKnown || e.head >= best || best-e.head <= maxLag
}

// EndpointStatus is what the Backend knows of one endpoint.
type EndpointStatus struct {
	Endpoint  string // scheme and host only
	Healthy   bool   // neither failing nor lagging
	Head      uint64 // its latest block at the last poll; 0 if unknown
	Lag       uint64 // blocks behind the best endpoint's head
	LastError string // the last failure, while it lasts
}

// order returns the endpoints to try, in the order of preference: the
// usable ones first, then, as a last resort, those being skipped (an
// answer from one is better than none). Endpoints on another chain are
// left out.
func order(eps []*endpoint, now time.Time, best, maxLag uint64) []*endpoint {
	out := make([]*endpoint, 0, len(eps))
	var rest []*endpoint
	for _, e := range eps {
		switch {
		case e.usable(now, best, maxLag):
			out = append(out, e)
		case !e.isWrongChain():
			rest = append(rest, e)
		}
	}
	return append(out, rest...)
}

func (e *endpoint) isWrongChain() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.wrongChain
}
