package blockrpc_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
)

// These are go-ethereum's answers to the less common shapes of request, as
// measured against its rpc.Server: the same bodies get the same answers.

func TestParityWithGeth(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, tc := range []struct {
		name, body, want string
	}{
		// go-ethereum decodes one JSON value from the body and leaves the rest.
		{"data after the request", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]} trailing`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		{"a second request after the first", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		// Its encoder escapes these in the echoed id.
		{"id with HTML characters", `{"jsonrpc":"2.0","id":"<a&b>","method":"eth_chainId"}`,
			`{"jsonrpc":"2.0","id":"\u003ca\u0026b\u003e","result":"0x1"}`},
		{"id with a line separator", "{\"jsonrpc\":\"2.0\",\"id\":\"a\u2028b\",\"method\":\"eth_chainId\"}",
			`{"jsonrpc":"2.0","id":"a\u2028b","result":"0x1"}`},
		// encoding/json matches member names with Unicode case folding.
		{"member name with a long s", `{"j` + "\u017f" + `onrpc":"2.0","id":1,"method":"eth_chainId"}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		// Subscriptions need a connection that stays open.
		{"subscribe", `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"notifications not supported"}}`},
		{"unsubscribe", `{"jsonrpc":"2.0","id":1,"method":"eth_unsubscribe","params":["0x9"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"subscription not found"}}`},
		{"unsubscribe without an id", `{"jsonrpc":"2.0","id":1,"method":"eth_unsubscribe","params":[]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"missing value for required argument 0"}}`},
		{"unsubscribe a number", `{"jsonrpc":"2.0","id":1,"method":"eth_unsubscribe","params":[9]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid argument 0: json: cannot unmarshal number into Go value of type rpc.ID"}}`},
		// Invalid UTF-8 in a method name comes back as U+FFFD.
		{"method name with invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_\xff\"}",
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"the method eth_\uFFFD does not exist/is not available\"}}"},
		// A range error before a syntax error for an over-long index, as
		// go-ethereum's hexutil.Uint reports it.
		{"over-long index with a bad digit", `{"jsonrpc":"2.0","id":1,"method":"eth_getUncleByBlockNumberAndIndex","params":["0x3","0xz0000000000000000"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid argument 1: json: cannot unmarshal hex number \u003e 64 bits into Go value of type hexutil.Uint"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := post(t, srv, tc.body)
			if status != http.StatusOK || strings.TrimSuffix(string(out), "\n") != tc.want {
				t.Errorf("%s\n got %d %s\nwant 200 %s", tc.body, status, out, tc.want)
			}
		})
	}
}

// A message shaped like a response is what a server sends; go-ethereum
// drops one it did not ask for, unanswered, alone or in a batch.
func TestResponsesAreDropped(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"result":"0x1"}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}`,
		`[{"jsonrpc":"2.0","id":1,"result":null}]`,
	} {
		if status, out := post(t, srv, body); status != http.StatusOK || len(out) != 0 {
			t.Errorf("%s: %d %q, want an empty 200", body, status, out)
		}
	}
	_, out := post(t, srv, `[{"jsonrpc":"2.0","id":1,"result":"0x1"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`)
	if got := strings.TrimSpace(string(out)); got != `[{"jsonrpc":"2.0","id":2,"result":"0x1"}]` {
		t.Errorf("a batch with a response and a call = %s, want only the call's answer", got)
	}
}

// The response limit counts result bytes, as go-ethereum does: three
// chain ids of 5 bytes each fit in 20.
func TestResponseLimitCountsResults(t *testing.T) {
	srv := newServer(t, newTestChain(t).store, blockrpc.WithResponseLimit(20))
	answers := callBatch(t, srv, `[`+rpcRequest("eth_chainId", `[]`)+`,`+rpcRequest("eth_chainId", `[]`)+`,`+rpcRequest("eth_chainId", `[]`)+`]`)
	for i, a := range answers {
		if a.Error != nil || string(a.Result) != `"0x1"` {
			t.Errorf("answer %d = %s %v, want \"0x1\"", i, a.Result, a.Error)
		}
	}
}

// A batch that outlives its deadline answers the calls left with a timeout
// and does not run them.
func TestBatchStopsAtItsDeadline(t *testing.T) {
	var calls atomic.Int32
	slow := &countingBackend{Store: newTestChain(t).store, calls: &calls, delay: 300 * time.Millisecond}
	h := blockrpc.NewHandler(blockrpc.NewService(slow), blockrpc.WithKeys(blockrpc.NewKeySet(testKey)))
	srv := httptest.NewServer(withDeadline(h, 100*time.Millisecond))
	t.Cleanup(srv.Close)
	var batch []string
	for range 5 {
		batch = append(batch, rpcRequest("eth_getBlockByNumber", `["0x1",false]`))
	}
	answers := callBatch(t, srv, "["+strings.Join(batch, ",")+"]")
	if len(answers) != 5 {
		t.Fatalf("%d answers, want 5", len(answers))
	}
	for i, a := range answers {
		if a.Error == nil || a.Error.Code != -32002 {
			t.Errorf("answer %d: %s %v, want -32002", i, a.Result, a.Error)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the backend was called %d times, want once: the calls after the deadline must not run", n)
	}
}

// countingBackend counts block lookups, and takes delay over each or
// until the request's deadline.
type countingBackend struct {
	*memstore.Store
	calls *atomic.Int32
	delay time.Duration
}

func (b *countingBackend) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	b.calls.Add(1)
	select {
	case <-time.After(b.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.Store.BlockByNumber(ctx, n)
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

// "*" in Accept-Encoding covers gzip when gzip is not named.
func TestGzipForAnyEncoding(t *testing.T) {
	srv := newServer(t, newTestChain(t).store, blockrpc.WithGzip())
	body := rpcRequest("eth_getBlockByNumber", `["0x1",true]`)
	for _, tc := range []struct {
		accept string
		gzip   bool
	}{
		{"*", true},
		{"br, *;q=0.5", true},
		{"gzip;q=0, *", false},
		{"*;q=0", false},
	} {
		req := newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, body, "Content-Type", "application/json", "Accept-Encoding", tc.accept)
		resp, _ := send(t, req)
		if got := resp.Header.Get("Content-Encoding") == "gzip"; got != tc.gzip {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", tc.accept, got, tc.gzip)
		}
	}
}
