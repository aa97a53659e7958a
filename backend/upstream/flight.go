package upstream

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/blockrpc/blockrpc/backend"
)

// flightGroup runs one fetch of a hash at a time, however many readers
// miss it at once: a block that just became the head is asked for by
// every client in the same moment, and the endpoints should see it once.
// (golang.org/x/sync/singleflight does this, but may not join the root
// module's requirements.)
type flightGroup struct {
	mu    sync.Mutex
	calls map[flightKey]*flight
	// life ends the fetches under way as it ends (the Backend's Close),
	// which then waits for them (wait): running counts them, and closed,
	// set by wait, refuses new ones, so that none is counted once wait
	// has begun.
	life    context.Context
	running sync.WaitGroup
	closed  bool
}

// errClosed is the error of a fetch asked of a closed Backend.
var errClosed = errors.New("upstream: the Backend is closed")

// flightKey is what a fetch is shared by: its hash, and whether the hash is
// one the head tracker saw, for which an endpoint's null is not believed.
// A reader of such a hash (the latest block) joining the fetch of a reader
// that believes nulls would be told that the block does not exist.
type flightKey struct {
	hash  backend.Hash
	known bool
}

type flight struct {
	done chan struct{}
	v    *verified
	err  error
}

// flightTimeout bounds a shared fetch, which outlives the reader that
// started it when that one leaves: the others still wait for it.
const flightTimeout = time.Minute

// do returns fn's result for key, calling it unless a call for the same
// key is under way. fn runs with a context of its own, since the reader
// that started it may leave while others wait; each reader stops waiting
// when its own ctx is done.
func (g *flightGroup) do(ctx context.Context, key flightKey, fn func(context.Context) (*verified, error)) (*verified, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = make(map[flightKey]*flight)
	}
	f, ok := g.calls[key]
	if !ok {
		if g.closed {
			g.mu.Unlock()
			return nil, errClosed
		}
		f = &flight{done: make(chan struct{})}
		g.calls[key] = f
		g.running.Add(1)
		go func() {
			defer g.running.Done()
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flightTimeout)
			defer cancel()
			if g.life != nil {
				defer context.AfterFunc(g.life, cancel)()
			}
			f.v, f.err = fn(fctx)
			g.mu.Lock()
			delete(g.calls, key)
			g.mu.Unlock()
			close(f.done)
		}()
	}
	g.mu.Unlock()
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// wait refuses new fetches, and waits for those under way, which the end
// of life ends.
func (g *flightGroup) wait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.running.Wait()
}
