package pebblestore

import "sync/atomic"

// gate lets the calls in progress keep the database open while Close
// waits for them: a call enters, unless Close has begun, and leaves once
// done; Close shuts the gate and waits until no call is inside. Unlike
// the read lock of a sync.RWMutex, entering never waits for a Close that
// waits: a call made inside another (a Lender's callback that reads the
// store again) fails with ErrClosed, where it would wait behind Close,
// and Close behind the call around it, for good.
type gate struct {
	inside atomic.Int64
	shut   atomic.Bool
	// left holds a token once a call leaves the gate shut and empty, or
	// turned away: Close looks again. Made by init.
	left chan struct{}
}

func (g *gate) init() { g.left = make(chan struct{}, 1) }

// enter reports whether a call may use the database; one that may must
// leave once done.
func (g *gate) enter() bool {
	g.inside.Add(1)
	if g.shut.Load() {
		g.leave()
		return false
	}
	return true
}

func (g *gate) leave() {
	// A call that entered after the gate was shut is seen by one of the
	// two: the shut gate by the call, or the call by close.
	if g.inside.Add(-1) == 0 && g.shut.Load() {
		select {
		case g.left <- struct{}{}:
		default: // a token is there already
		}
	}
}

// isShut reports whether close has been called.
func (g *gate) isShut() bool { return g.shut.Load() }

// close shuts the gate, and waits until no call is inside.
func (g *gate) close() {
	g.shut.Store(true)
	for g.inside.Load() != 0 {
		<-g.left
	}
}
