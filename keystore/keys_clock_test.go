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
