//go:build go1.25

package keystore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/keystore"
)

// These tests run on synctest's fake clock: minutes of refreshes and
// flushes in a few milliseconds.

// stuckWrites is a Store whose keys read well and whose writes of usage
// wait until their context ends: a database whose usage rows are locked,
// or a disk that stalls.
type stuckWrites struct{ keystore.Store }

func (s stuckWrites) Record(ctx context.Context, _ []keystore.Usage) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestRevokedWhileFlushWaits revokes a key while a flush of usage waits:
// the revocation takes effect within Refresh all the same, and a store
// whose keys read well never makes the keys stale.
func TestRevokedWhileFlushWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := stuckWrites{keystore.NewMemory()}
		secret, k := addKey(t, store, "k", 0, 0)
		opts := keystore.Options{Refresh: time.Second, Stale: 5 * time.Second, Flush: 10 * time.Second}
		keys, err := keystore.Open(ctx, store, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer keys.Close()
		// A request, so that the flushes have something to write.
		keys.Observer().Request(ctx, blockrpc.RequestInfo{Status: 200, Calls: 1, KeyDigest: keystore.DigestOf(secret).String()})

		time.Sleep(17 * time.Second) // the first flush, at 10 s, waits until 20 s
		if ok, err := keys.ValidKey(ctx, secret); !ok || err != nil {
			t.Errorf("a valid key while a flush waits for 7 s, Stale 5 s: ValidKey = %v, %v; want true, nil", ok, err)
		}
		if _, err := store.Revoke(ctx, k.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(opts.Refresh + 100*time.Millisecond)
		if ok, _ := keys.ValidKey(ctx, secret); ok {
			t.Errorf("the key is still accepted %v after its revocation, Refresh %v, while a flush waits", opts.Refresh+100*time.Millisecond, opts.Refresh)
		}
	})
}

// TestLongRefresh sets only Refresh, longer than DefaultStale: Stale
// follows it, and a store that never fails never makes the keys stale.
func TestLongRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := keystore.NewMemory()
		secret, _ := addKey(t, store, "k", 0, 0)
		keys, err := keystore.Open(ctx, store, keystore.Options{Refresh: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer keys.Close()
		for range 3 {
			time.Sleep(9 * time.Minute)
			if ok, err := keys.ValidKey(ctx, secret); !ok || err != nil {
				t.Fatalf("a valid key of a store that never failed, with Refresh 10m: ValidKey = %v, %v", ok, err)
			}
		}
	})
}

// TestCloseEndsAStuckFlush: a periodic flush is stuck in the
// store when the server shuts down. Close should give up on it (its own
// final flush is bounded by 5 s), not wait for the whole Flush period.
func TestCloseEndsAStuckFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := stuckWrites{keystore.NewMemory()}
		secret, _ := addKey(t, store, "k", 0, 0)
		keys, err := keystore.Open(ctx, store, keystore.Options{Refresh: time.Second, Flush: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		keys.Observer().Request(ctx, blockrpc.RequestInfo{Status: 200, Calls: 1, KeyDigest: keystore.DigestOf(secret).String()})
		time.Sleep(time.Hour + time.Second) // the first periodic flush began at 1 h and is stuck
		start := time.Now()
		keys.Close()
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("Close took %v (fake clock) while a periodic flush was stuck in the store: shutdown waits for the whole Flush period", took)
		}
	})
}

// stuckReads is a Store whose reads of the keys wait for their context
// once stuck is closed.
type stuckReads struct {
	keystore.Store
	stuck chan struct{}
}

func (s stuckReads) Keys(ctx context.Context) ([]keystore.Key, error) {
	select {
	case <-s.stuck:
		<-ctx.Done()
		return nil, ctx.Err()
	default:
		return s.Store.Keys(ctx)
	}
}

// TestCloseEndsAStuckRefresh is TestCloseEndsAStuckFlush with a refresh
// stuck, every 10 minutes (as TestLongRefresh allows).
func TestCloseEndsAStuckRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := stuckReads{keystore.NewMemory(), make(chan struct{})}
		keys, err := keystore.Open(ctx, store, keystore.Options{Refresh: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		close(store.stuck)
		time.Sleep(10*time.Minute + time.Second) // the refresh at 10 min is stuck
		start := time.Now()
		keys.Close()
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("Close took %v (fake clock) while a periodic refresh was stuck in the store", took)
		}
	})
}
