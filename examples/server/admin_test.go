package main

// The admin listener (metrics and health), the rate limit, the answer
// cache's flag, and the parts of the server that fan one observer out.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	blockrpcprom "github.com/blockrpc/blockrpc/adapters/prometheus"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/keystore"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/prometheus/client_golang/prometheus"
)

// adminURL returns the admin listener's base URL, as the run printed it.
func (s *server) adminURL(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`Metrics and health: (http://\S+)/metrics`).FindStringSubmatch(s.stdout())
	if m == nil {
		t.Fatalf("no admin address printed:\n%s", s.stdout())
	}
	return m[1]
}

// rpcURL returns the JSON-RPC endpoint the run printed, without the key.
func (s *server) rpcURL(t *testing.T) string {
	t.Helper()
	u := regexp.MustCompile(`https?://\S+/v3/`).FindString(s.stdout())
	if u == "" {
		t.Fatalf("no endpoint printed:\n%s", s.stdout())
	}
	return u
}

// call posts a JSON-RPC body and returns the answer's status, headers and
// body.
func call(t *testing.T, c *http.Client, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const latestBlock = `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}`

// TestAdminMetricsAndHealth serves a few requests and reads them back in
// /metrics, checks the health routes, and that the shutdown closes the
// admin listener too.
func TestAdminMetricsAndHealth(t *testing.T) {
	const key = "metrics-key-7c2d"
	srv := start(t, "-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-keys", key)
	rpc, admin := srv.rpcURL(t)+key, srv.adminURL(t)

	for _, body := range []string{
		latestBlock,
		latestBlock,
		`{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber"}`,
		// The key as a method name: a client may put it anywhere.
		`{"jsonrpc":"2.0","id":3,"method":"` + key + `"}`,
		`[{"jsonrpc":"2.0","id":4,"method":"eth_chainId"},{"jsonrpc":"2.0","id":5,"method":"eth_blockNumber"}]`,
	} {
		if resp, answer := call(t, http.DefaultClient, rpc, body); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", body, resp.StatusCode, answer)
		}
	}
	if resp, _ := call(t, http.DefaultClient, srv.rpcURL(t)+"wrong-"+key, latestBlock); resp.StatusCode != 401 {
		t.Fatalf("a wrong key gets %d, want 401", resp.StatusCode)
	}

	status, text := get(t, admin+"/metrics")
	if status != 200 {
		t.Fatalf("/metrics: status %d", status)
	}
	for _, want := range []string{
		`blockrpc_calls_total{code="0",method="eth_getBlockByNumber"} 2`,
		`blockrpc_calls_total{code="0",method="eth_blockNumber"} 2`,
		`blockrpc_calls_total{code="-32601",method="other"} 1`,
		`blockrpc_http_requests_total{status="200"} 5`,
		`blockrpc_http_requests_total{status="401"} 1`,
		`blockrpc_call_duration_seconds_bucket{method="eth_getBlockByNumber",le="+Inf"} 2`,
		`blockrpc_batch_calls_sum 2`,
		`blockrpc_backend_call_duration_seconds_count{method="BlockByNumber"}`,
		// The latest block twice: rendered once, then from the cache.
		"blockrpc_answer_cache_hits_total 1\n",
		"blockrpc_answer_cache_misses_total 1\n",
		"go_goroutines ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics has no %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, key) || strings.Contains(text, blockrpc.KeyID(key)) {
		t.Errorf("/metrics shows the API key or its id:\n%s", text)
	}
	if strings.Contains(text, "blockrpc_follower_") {
		t.Errorf("/metrics of a server that follows nothing has a follower's:\n%s", text)
	}

	if status, body := get(t, admin+"/healthz"); status != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 ok", status, body)
	}
	if status, body := get(t, admin+"/readyz"); status != 200 || body != "ok\n" {
		t.Errorf("/readyz = %d %q, want 200 ok", status, body)
	}
	// The admin routes are not the JSON-RPC listener's.
	if status, _ := get(t, strings.TrimSuffix(srv.rpcURL(t), "/v3/")+"/metrics"); status == 200 {
		t.Error("the JSON-RPC listener serves /metrics")
	}

	srv.stop(t)
	// The access log still logs, beside the metrics.
	if logs := srv.stderr(); !strings.Contains(logs, "rpc=eth_blockNumber status=200") || !strings.Contains(logs, `rpc="batch of 2"`) {
		t.Errorf("the access log misses requests:\n%s", logs)
	}
	if _, err := http.Get(admin + "/healthz"); err == nil {
		t.Error("the admin listener still answers after the shutdown")
	}
}

// TestAdminRebinding asks a loopback admin listener for its routes under
// other names, as a page whose name points at 127.0.0.1 makes a browser
// do: refused, while localhost and loopback addresses are served.
func TestAdminRebinding(t *testing.T) {
	srv := start(t, "-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-keystore", "memory", "-admin-token", "operator-token-3f9a")
	admin := srv.adminURL(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(admin, "http://"))
	ask := func(host, path string) int {
		req, err := http.NewRequest("GET", admin+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/"} {
		for _, host := range []string{"rebind.example:" + port, "rebind.example", "192.0.2.1:" + port, "localhost.rebind.example:" + port} {
			if status := ask(host, path); status != http.StatusForbidden {
				t.Errorf("%s for Host %s: %d, want 403", path, host, status)
			}
		}
		for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "localhost.:" + port, "[::1]:" + port, "127.0.0.2"} {
			if status := ask(host, path); status != http.StatusOK {
				t.Errorf("%s for Host %s: %d, want 200", path, host, status)
			}
		}
	}
	// HTTP/1.0 without a Host, as minimal health probes ask, is no
	// browser's: served.
	conn, err := net.Dial("tcp", strings.TrimPrefix(admin, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /healthz HTTP/1.0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz in HTTP/1.0 without a Host: %d, want 200", resp.StatusCode)
	}
}

// failingBackend fails every block lookup, as a backend whose database is
// down does.
type failingBackend struct {
	backend.Backend
	calls atomic.Int64
}

func (f *failingBackend) BlockByNumber(context.Context, backend.BlockNumber) (*backend.Block, error) {
	f.calls.Add(1)
	return nil, errors.New("the database is down")
}

func TestReadyzWithAFailingBackend(t *testing.T) {
	var failing *failingBackend
	srv := startWith(t, func(b backend.Backend) backend.Backend {
		failing = &failingBackend{Backend: b}
		return failing
	}, "-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-keys", "k")
	admin := srv.adminURL(t)

	status, body := get(t, admin+"/readyz")
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: ") || !strings.Contains(body, "the database is down") {
		t.Errorf("/readyz = %d %q, want 503 with the reason", status, body)
	}
	if failing.calls.Load() == 0 {
		t.Error("/readyz did not ask the backend")
	}
	// Alive all the same: restarting would not mend the database.
	if status, _ := get(t, admin+"/healthz"); status != 200 {
		t.Errorf("/healthz = %d, want 200", status)
	}
	// The probe's own call is not a client's: only the JSON-RPC call is
	// counted.
	if resp, body := call(t, http.DefaultClient, srv.rpcURL(t)+"k", `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`); !strings.Contains(body, `"code":-32000`) {
		t.Errorf("eth_blockNumber over a failing backend = %d %s, want -32000", resp.StatusCode, body)
	}
	status, text := get(t, admin+"/metrics")
	if status != 200 || !strings.Contains(text, `blockrpc_backend_errors_total{method="BlockByNumber"} 1`+"\n") {
		t.Errorf("/metrics (%d) does not count one backend error:\n%s", status, text)
	}
	srv.stop(t)
}

// TestRateLimit gives a key a burst of 3 and a refill slow enough that no
// token comes back while the test runs: the fourth call is refused, another
// key is not.
func TestRateLimit(t *testing.T) {
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "one,two", "-rate", "0.1", "-burst", "3")
	url := srv.rpcURL(t)
	for i := range 3 {
		if resp, body := call(t, http.DefaultClient, url+"one", latestBlock); resp.StatusCode != 200 {
			t.Fatalf("call %d of the burst: %d %s", i+1, resp.StatusCode, body)
		}
	}
	resp, body := call(t, http.DefaultClient, url+"one", latestBlock)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, `"code":-32005`) {
		t.Errorf("the call past the burst = %d, Retry-After %q, %s; want 429, a Retry-After and -32005",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, _ := call(t, http.DefaultClient, url+"two", latestBlock); resp.StatusCode != 200 {
		t.Errorf("another key gets %d: the limit is per key", resp.StatusCode)
	}
	srv.stop(t)
}

// TestRateDefaultBurst checks that -burst defaults to -rate.
func TestRateDefaultBurst(t *testing.T) {
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-rate", "2")
	url := srv.rpcURL(t) + "k"
	var statuses []int
	for range 3 {
		resp, _ := call(t, http.DefaultClient, url, latestBlock)
		statuses = append(statuses, resp.StatusCode)
	}
	// A token comes back every 500ms: the third call could only pass on a
	// machine that took that long for two calls.
	if statuses[0] != 200 || statuses[1] != 200 || statuses[2] != 429 {
		t.Errorf("statuses %v, want 200 200 429 for a burst of 2", statuses)
	}
	srv.stop(t)
}

// TestCacheOff serves without an answer cache: the answers stay right, and
// nothing is looked up in a cache.
func TestCacheOff(t *testing.T) {
	srv := start(t, "-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-keys", "k", "-cache", "0")
	url := srv.rpcURL(t) + "k"
	_, first := call(t, http.DefaultClient, url, latestBlock)
	_, second := call(t, http.DefaultClient, url, latestBlock)
	if first != second || !strings.Contains(first, `"number":"0x6e"`) {
		t.Errorf("answers without a cache: %.200s and %.200s, want block 0x6e twice", first, second)
	}
	_, text := get(t, srv.adminURL(t)+"/metrics")
	for _, want := range []string{"blockrpc_answer_cache_hits_total 0\n", "blockrpc_answer_cache_misses_total 0\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics has no %s: the cache is not off", strings.TrimSpace(want))
		}
	}
	srv.stop(t)
}

// TestReadyTimesOut checks that a backend that hangs makes /readyz answer
// 503 within its bound, not hang with it.
func TestReadyTimesOut(t *testing.T) {
	store, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = ready(context.Background(), blockrpc.NewService(hanging{store}))
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("ready with a hanging backend = %v, want a timeout", err)
	}
	if took := time.Since(start); took > readyTimeout+time.Second {
		t.Errorf("ready took %v, want about %v", took, readyTimeout)
	}
}

type hanging struct{ backend.Backend }

func (hanging) BlockByNumber(ctx context.Context, _ backend.BlockNumber) (*backend.Block, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAdminRebindingChanges sends the dashboard's changes under a name
// that is not loopback's, as a page whose name points at 127.0.0.1 would
// through the operator's browser: refused before the dashboard sees them,
// whatever the method.
func TestAdminRebindingChanges(t *testing.T) {
	metrics, err := blockrpcprom.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	store := keystore.NewMemory()
	keys, err := keystore.Open(context.Background(), store, keystore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	dash := newDashboard(slog.New(slog.DiscardHandler), store, keys, testAdminToken)
	var svc atomic.Pointer[blockrpc.Service]
	h := newAdminServer(slog.New(slog.DiscardHandler), metrics, &svc, dash, true).Handler
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/session", `{"token":"` + testAdminToken + `"}`},
		{"POST", "/api/keys", `{"label":"rebound"}`},
		{"PATCH", "/api/keys/0000000000000000", `{"label":"rebound"}`},
		{"DELETE", "/api/keys/0000000000000000", ""},
		{"DELETE", "/api/session", ""},
		{"PUT", "/api/keys", `{}`},
	} {
		r := httptest.NewRequest(c.method, "http://rebind.example:8546"+c.path, strings.NewReader(c.body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+testAdminToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden {
			t.Errorf("%s %s for Host rebind.example: %d %s, want 403", c.method, c.path, w.Code, w.Body)
		}
	}
	if ks, _ := store.Keys(context.Background()); len(ks) != 0 {
		t.Errorf("a request for another Host made keys: %+v", ks)
	}
}

// TestHealthAnswersNotCached checks that no cache between a probe and the
// admin listener may keep a health answer: a readiness seen once would be
// seen again after it ended.
func TestHealthAnswersNotCached(t *testing.T) {
	metrics, err := blockrpcprom.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var svc atomic.Pointer[blockrpc.Service]
	h := newAdminServer(slog.New(slog.DiscardHandler), metrics, &svc, nil, true).Handler
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/healthz", http.StatusOK, "ok\n"},
		{"/readyz", http.StatusServiceUnavailable, "not ready: the chain is loading\n"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "http://localhost"+tc.path, nil))
		if w.Code != tc.status || w.Body.String() != tc.body || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d %q, Cache-Control %q; want %d %q, no-store", tc.path, w.Code, w.Body, w.Header().Get("Cache-Control"), tc.status, tc.body)
		}
	}
}
