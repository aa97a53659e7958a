package pebblestore

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGateEnterNeverWaits enters the gate from inside a call while close
// waits for that call, as a read in a Lender's callback during Close does:
// the inner call is turned away at once, where a read lock would wait
// behind close for good, and close returns once the call leaves.
func TestGateEnterNeverWaits(t *testing.T) {
	var g gate
	g.init()
	if !g.enter() {
		t.Fatal("an open gate turned a call away")
	}
	closed := make(chan struct{})
	go func() {
		g.close()
		close(closed)
	}()
	for !g.isShut() {
		time.Sleep(time.Millisecond)
	}
	entered := make(chan bool, 1)
	go func() { entered <- g.enter() }()
	select {
	case ok := <-entered:
		if ok {
			t.Error("a call entered a gate being closed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call waited to enter a gate being closed")
	}
	select {
	case <-closed:
		t.Fatal("close returned with a call inside")
	default:
	}
	g.leave()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return once the last call left")
	}
}

// TestGateCloseWaitsForCalls has callers enter and leave the gate as
// fast as they can while it closes: once close returns, no call is
// inside, and none enters after.
func TestGateCloseWaitsForCalls(t *testing.T) {
	for range 200 {
		var g gate
		g.init()
		var using atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for g.enter() {
					using.Add(1)
					using.Add(-1)
					g.leave()
				}
			}()
		}
		g.close()
		if n := using.Load(); n != 0 {
			t.Fatalf("close returned with %d calls using the database", n)
		}
		if g.enter() {
			t.Fatal("a call entered a closed gate")
		}
		wg.Wait()
	}
}
