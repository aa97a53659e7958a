package blockrpc_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/blockrpc/blockrpc"
)

// TestObserverCountsErrors checks what a store of keys counts a key's usage
// by: the key's digest, and how many of the request's answers were errors.
func TestObserverCountsErrors(t *testing.T) {
	store, _ := demoChain(t)
	seen := make(chan blockrpc.RequestInfo, 1)
	observer := &blockrpc.Observer{Request: func(_ context.Context, r blockrpc.RequestInfo) { seen <- r }}
	srv := newServer(t, store, blockrpc.WithObserver(observer),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: 1e-9, Burst: 6}))
	digest := sha256.Sum256([]byte(testKey))
	wantDigest := hex.EncodeToString(digest[:])

	for _, tc := range []struct {
		name, body string
		status     int
		errors     int
	}{
		{"a result", rpcRequest("eth_blockNumber", `[]`), http.StatusOK, 0},
		{"an unknown method", rpcRequest("eth_nothing", `[]`), http.StatusOK, 1},
		{"a parse error", `{"jsonrpc":`, http.StatusOK, 1},
		{"an empty batch", `[]`, http.StatusOK, 1},
		{"a batch with two errors in three", `[` + rpcRequest("eth_blockNumber", `[]`) + `,` +
			rpcRequest("eth_getBlockByNumber", `["0x1"]`) + `,` + rpcRequest("eth_nothing", `[]`) + `]`, http.StatusOK, 2},
		{"a notification", `{"jsonrpc":"2.0","method":"eth_blockNumber","params":[]}`, http.StatusOK, 0},
		// The burst is spent: refused whole.
		{"a refused request", rpcRequest("eth_blockNumber", `[]`), http.StatusTooManyRequests, 1},
	} {
		status, out := post(t, srv, tc.body)
		if status != tc.status {
			t.Fatalf("%s: status %d, want %d: %s", tc.name, status, tc.status, out)
		}
		r := <-seen
		if r.Errors != tc.errors {
			t.Errorf("%s: Errors = %d, want %d (answer %s)", tc.name, r.Errors, tc.errors, out)
		}
		if r.KeyDigest != wantDigest || r.KeyID != wantDigest[:8] {
			t.Errorf("%s: KeyDigest %q, KeyID %q; want %q and its first 8 digits", tc.name, r.KeyDigest, r.KeyID, wantDigest)
		}
	}

	// A refused key has neither.
	postTo(t, srv.URL+"/v3/wrong-key", rpcRequest("eth_blockNumber", `[]`))
	if r := <-seen; r.KeyDigest != "" || r.KeyID != "" || r.Errors != 1 || r.Status != http.StatusUnauthorized {
		t.Errorf("a wrong key: %+v", r)
	}
}
