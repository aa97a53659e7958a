package blockrpcprom_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	blockrpcprom "github.com/blockrpc/blockrpc/adapters/prometheus"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const key = "secret-key-4f1e"

// chain returns a store of n blocks.
func chain(t testing.TB, n int) *memstore.Store {
	t.Helper()
	store := memstore.New()
	parent := backend.Hash{}
	for i := range n {
		b := &backend.Block{Header: backend.Header{Number: uint64(i), ParentHash: parent, GasLimit: 30_000_000, Timestamp: uint64(i) * 12}}
		b.Difficulty.SetUint64(1)
		if err := store.AddBlock(b); err != nil {
			t.Fatal(err)
		}
		added, _ := store.BlockByNumber(context.Background(), backend.BlockNumber(i))
		parent = added.Hash
	}
	return store
}

// post sends body to the handler with the given key and returns the status.
func post(t *testing.T, h http.Handler, key, body string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v3/"+key, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func newMetrics(t *testing.T) (*blockrpcprom.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := blockrpcprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestMetricsOfRequests(t *testing.T) {
	m, reg := newMetrics(t)
	h := blockrpc.NewHandler(blockrpc.NewService(chain(t, 3)),
		blockrpc.WithKeys(blockrpc.NewKeySet(key)),
		blockrpc.WithObserver(m.Observer()),
	)
	block := `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",false]}`
	for _, r := range []struct {
		key, body string
		status    int
	}{
		{key, block, 200},
		{key, block, 200},
		{key, `{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber"}`, 200},
		// A client may put its key in a method name: it must not become
		// a label.
		{key, `{"jsonrpc":"2.0","id":3,"method":"` + key + `"}`, 200},
		{key, `[` + block + `,` + block + `,{"jsonrpc":"2.0","id":4,"method":"eth_chainId"}]`, 200},
		{"not-" + key, block, 401},
	} {
		if got := post(t, h, r.key, r.body); got != r.status {
			t.Fatalf("%s: status %d, want %d", r.body, got, r.status)
		}
	}

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"blockrpc_calls_total", []string{"method", "eth_getBlockByNumber", "code", "0"}, 4},
		{"blockrpc_calls_total", []string{"method", "eth_blockNumber", "code", "0"}, 1},
		{"blockrpc_calls_total", []string{"method", "eth_chainId", "code", "-32000"}, 1}, // no chain id known
		{"blockrpc_calls_total", []string{"method", "other", "code", "-32601"}, 1},
		{"blockrpc_http_requests_total", []string{"status", "200"}, 5},
		{"blockrpc_http_requests_total", []string{"status", "401"}, 1},
		// Four lookups of block 1: the first renders it, the rest are hits.
		{"blockrpc_answer_cache_hits_total", nil, 3},
		{"blockrpc_answer_cache_misses_total", nil, 1},
	} {
		if got := value(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%q = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(reg, "blockrpc_calls_total"); n != 4 {
		t.Errorf("blockrpc_calls_total has %d series, want 4", n)
	}

	text := scrape(t, m)
	for _, want := range []string{
		`blockrpc_call_duration_seconds_count{method="eth_getBlockByNumber"} 4`,
		`blockrpc_call_answer_bytes_count{method="eth_blockNumber"} 1`,
		`blockrpc_batch_calls_count 1`,
		`blockrpc_batch_calls_sum 3`,
		`blockrpc_backend_call_duration_seconds_count{method="BlockByNumber"}`,
		`blockrpc_http_request_duration_seconds_count 6`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics has no %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, key) || strings.Contains(text, blockrpc.KeyID(key)) {
		t.Errorf("/metrics shows the API key or its id:\n%s", text)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// failing is a Backend whose every call fails, but for the chain id.
type failing struct{ backend.Backend }

var errDown = errors.New("the database is down")

func (failing) BlockByNumber(context.Context, backend.BlockNumber) (*backend.Block, error) {
	return nil, errDown
}

func TestMetricsOfBackendErrors(t *testing.T) {
	m, reg := newMetrics(t)
	store := chain(t, 2)
	h := blockrpc.NewHandler(blockrpc.NewService(failing{store}),
		blockrpc.WithKeys(blockrpc.NewKeySet(key)),
		blockrpc.WithObserver(m.Observer()),
	)
	post(t, h, key, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`)
	// Not found is an answer (null), not a failure.
	post(t, h, key, `{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByHash","params":["0x`+strings.Repeat("ab", 32)+`",false]}`)

	if got := value(t, reg, "blockrpc_backend_errors_total", "method", "BlockByNumber"); got != 1 {
		t.Errorf("backend errors of BlockByNumber = %v, want 1", got)
	}
	if got := value(t, reg, "blockrpc_backend_errors_total", "method", "BlockByHash"); got != 0 {
		t.Errorf("backend errors of BlockByHash = %v, want 0: not found is no failure", got)
	}
	if got := value(t, reg, "blockrpc_backend_call_duration_seconds", "method", "BlockByHash"); got != 1 {
		t.Errorf("BlockByHash calls timed = %v, want 1", got)
	}
	if got := value(t, reg, "blockrpc_calls_total", "method", "eth_blockNumber", "code", "-32000"); got != 1 {
		t.Errorf("eth_blockNumber calls with code -32000 = %v, want 1", got)
	}

	// A deadline: the request's own is a timeout, the backend's (with
	// the request's time left) its failure.
	ended, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	observe := m.Observer().Backend
	observe(ended, blockrpc.BackendInfo{Method: "BlockByHash", Err: context.DeadlineExceeded})
	if got := value(t, reg, "blockrpc_backend_errors_total", "method", "BlockByHash"); got != 0 {
		t.Errorf("backend errors of BlockByHash = %v after the request's own deadline, want 0", got)
	}
	observe(context.Background(), blockrpc.BackendInfo{Method: "BlockByHash", Err: fmt.Errorf("query: %w", context.DeadlineExceeded)})
	if got := value(t, reg, "blockrpc_backend_errors_total", "method", "BlockByHash"); got != 1 {
		t.Errorf("backend errors of BlockByHash = %v after a deadline of the backend's own, want 1", got)
	}

	// So with a cancellation: the client's is none of the backend's, a
	// backend's own (its pool closed) is its failure.
	gone, leave := context.WithCancel(context.Background())
	leave()
	observe(gone, blockrpc.BackendInfo{Method: "BlockByHash", Err: context.Canceled})
	if got := value(t, reg, "blockrpc_backend_errors_total", "method", "BlockByHash"); got != 1 {
		t.Errorf("backend errors of BlockByHash = %v after the client went away, want still 1", got)
	}
	observe(context.Background(), blockrpc.BackendInfo{Method: "BlockByHash", Err: fmt.Errorf("shared fetch: %w", context.Canceled)})
	if got := value(t, reg, "blockrpc_backend_errors_total", "method", "BlockByHash"); got != 2 {
		t.Errorf("backend errors of BlockByHash = %v after a cancellation of the backend's own, want 2", got)
	}
}

func TestNewTwiceWithOneRegistry(t *testing.T) {
	_, reg := newMetrics(t)
	if _, err := blockrpcprom.New(reg); err == nil {
		t.Error("a second New with the same registry succeeded; its metrics would be lost")
	}
}

// TestNewFailsWhole has New meet a collector of the application's with the
// name of its last: it fails, and leaves none of its own registered, to be
// exported with nothing to update them.
func TestNewFailsWhole(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "blockrpc_answer_cache_misses_total", Help: "the application's"}))
	if _, err := blockrpcprom.New(reg); err == nil {
		t.Fatal("New registered beside a collector of the same name")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "blockrpc_answer_cache_misses_total" {
			t.Errorf("a failed New left %s registered", f.GetName())
		}
	}
}

func TestNewWithItsOwnRegistry(t *testing.T) {
	m, err := blockrpcprom.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	text := scrape(t, m)
	for _, want := range []string{"go_goroutines", "blockrpc_answer_cache_hits_total 0"} {
		if !strings.Contains(text, want) {
			t.Errorf("the own registry's /metrics has no %s", want)
		}
	}
}

// value returns the value of the counter, or the count of the histogram,
// with the given name and label pairs; 0 when there is none.
func value(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func scrape(t *testing.T, m *blockrpcprom.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: status %d", rec.Code)
	}
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}
