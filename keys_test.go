package blockrpc_test

// API keys: who gets in, and what a validator that fails does.

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/google/go-cmp/cmp"
)

func TestHTTPKeys(t *testing.T) {
	store := newTestChain(t).store
	// Without the test key: each subtest configures its own.
	start := func(t *testing.T, opts ...blockrpc.Option) *httptest.Server {
		return serve(t, blockrpc.NewHandler(blockrpc.NewService(store), opts...))
	}
	postKey := func(t *testing.T, srv *httptest.Server, key string) (int, []byte) {
		t.Helper()
		return postTo(t, srv.URL+"/v3/"+key, latestBlock)
	}

	t.Run("revoked key", func(t *testing.T) {
		keys := blockrpc.NewKeySet("alice", "bob")
		srv := start(t, blockrpc.WithKeys(keys))
		status, out := postKey(t, srv, "alice")
		checkLatestOr(t, status, out, http.StatusOK)
		keys.Revoke("alice")
		status, out = postKey(t, srv, "alice")
		checkRefusal(t, status, out, http.StatusUnauthorized)
		status, out = postKey(t, srv, "bob")
		checkLatestOr(t, status, out, http.StatusOK)
	})
	t.Run("added key", func(t *testing.T) {
		keys := blockrpc.NewKeySet()
		srv := start(t, blockrpc.WithKeys(keys))
		status, out := postKey(t, srv, "carol")
		checkRefusal(t, status, out, http.StatusUnauthorized)
		keys.Add("carol")
		status, out = postKey(t, srv, "carol")
		checkLatestOr(t, status, out, http.StatusOK)
	})
	t.Run("no configuration refuses everything", func(t *testing.T) {
		srv := start(t)
		for _, key := range []string{testKey, "anything", "0"} {
			status, out := postKey(t, srv, key)
			checkRefusal(t, status, out, http.StatusUnauthorized)
		}
	})
	t.Run("AnyKey", func(t *testing.T) {
		srv := start(t, blockrpc.WithKeys(blockrpc.AnyKey))
		for _, key := range []string{testKey, "anything", "0"} {
			status, out := postKey(t, srv, key)
			checkLatestOr(t, status, out, http.StatusOK)
		}
		status, out := postKey(t, srv, "")
		checkRefusal(t, status, out, http.StatusUnauthorized)
	})
	t.Run("KeyFunc sees the key", func(t *testing.T) {
		var mu sync.Mutex
		var seen []string
		srv := start(t, blockrpc.WithKeys(blockrpc.KeyFunc(func(_ context.Context, key string) (bool, error) {
			mu.Lock()
			seen = append(seen, key)
			mu.Unlock()
			return key == "good", nil
		})))
		status, out := postKey(t, srv, "good")
		checkLatestOr(t, status, out, http.StatusOK)
		status, out = postKey(t, srv, "bad")
		checkRefusal(t, status, out, http.StatusUnauthorized)
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff([]string{"good", "bad"}, seen); diff != "" {
			t.Errorf("keys given to the KeyFunc (-want +got):\n%s", diff)
		}
	})
	t.Run("KeyFunc error", func(t *testing.T) {
		srv := start(t, blockrpc.WithKeys(blockrpc.KeyFunc(func(context.Context, string) (bool, error) {
			return false, errors.New("key database unreachable")
		})))
		status, out := postKey(t, srv, testKey)
		checkRefusal(t, status, out, http.StatusServiceUnavailable)
		if bytes.Contains(out, []byte("unreachable")) {
			t.Errorf("the validator's error reached the client: %s", out)
		}
	})
}

func TestKeyValidatorFailures(t *testing.T) {
	for name, keys := range map[string]blockrpc.KeyValidator{
		"error": blockrpc.KeyFunc(func(context.Context, string) (bool, error) { return false, errors.New("db down") }),
		"panic": blockrpc.KeyFunc(func(context.Context, string) (bool, error) { panic("nil map") }),
	} {
		srv := newServer(t, newTestChain(t).store, blockrpc.WithKeys(keys))
		status, out := post(t, srv, rpcRequest("eth_chainId", `[]`))
		a := parseAnswer(t, out)
		if status != http.StatusServiceUnavailable || a.Error == nil || a.Error.Code != -32000 {
			t.Errorf("validator %s: %d %s, want 503 with -32000", name, status, out)
		}
	}
}

func TestKeySetZeroValue(t *testing.T) {
	var keys blockrpc.KeySet
	if ok, err := keys.ValidKey(context.Background(), "k"); ok || err != nil {
		t.Errorf("an empty KeySet accepts %v, %v", ok, err)
	}
	keys.Add("k")
	if ok, _ := keys.ValidKey(context.Background(), "k"); !ok {
		t.Error("a zero KeySet does not accept the key added to it")
	}
}
