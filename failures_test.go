package blockrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// Backends that fail, panic or take too long, and what clients see of it.

// threeMethods are one call of each method, with valid params.
func threeMethods(hash backend.Hash) map[string]string {
	return map[string]string{
		"eth_getBlockByNumber":            rpcRequest("eth_getBlockByNumber", `["latest",true]`),
		"eth_getBlockByHash":              rpcRequest("eth_getBlockByHash", fmt.Sprintf(`[%q,false]`, hash)),
		"eth_getUncleByBlockHashAndIndex": rpcRequest("eth_getUncleByBlockHashAndIndex", fmt.Sprintf(`[%q,"0x0"]`, hash)),
	}
}

func TestBackendFailure(t *testing.T) {
	srv := newServer(t, failingBackend{})
	for method, body := range threeMethods(backend.Hash{1}) {
		t.Run(method, func(t *testing.T) {
			status, out := post(t, srv, body)
			if status != http.StatusOK {
				t.Errorf("status %d, want 200", status)
			}
			a := parseAnswer(t, out)
			checkError(t, a, -32000, "backend failure")
			if string(a.ID) != "1" {
				t.Errorf("id %s, want 1", a.ID)
			}
			if bytes.Contains(out, []byte(secretPath)) || bytes.Contains(out, []byte("disk I/O")) {
				t.Errorf("the backend's error reached the client: %s", out)
			}
		})
	}
	t.Run("batch", func(t *testing.T) {
		bodies := threeMethods(backend.Hash{1})
		status, out := post(t, srv, "["+bodies["eth_getBlockByNumber"]+","+bodies["eth_getUncleByBlockHashAndIndex"]+"]")
		if status != http.StatusOK {
			t.Errorf("status %d, want 200", status)
		}
		if bytes.Contains(out, []byte(secretPath)) {
			t.Errorf("the backend's error reached the client: %s", out)
		}
		for _, a := range callBatch(t, srv, "["+bodies["eth_getBlockByNumber"]+","+bodies["eth_getUncleByBlockHashAndIndex"]+"]") {
			checkError(t, a, -32000, "backend failure")
		}
	})
	t.Run("invalid params are reported first", func(t *testing.T) {
		checkError(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["0x01",true]`)), -32602, "invalid argument 0: hex number with leading zero digits")
	})
}

func TestBackendPanic(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, panickingBackend{c.store})
	panicking := rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`["0x%x",false]`, panicBlock))

	t.Run("single", func(t *testing.T) {
		status, out := post(t, srv, panicking)
		if status != http.StatusOK {
			t.Errorf("status %d, want 200", status)
		}
		a := parseAnswer(t, out)
		checkError(t, a, -32603, "method handler crashed")
		if string(a.ID) != "1" {
			t.Errorf("id %s, want 1", a.ID)
		}
		if bytes.Contains(out, []byte("block cache")) {
			t.Errorf("the panic value reached the client: %s", out)
		}
	})
	t.Run("panic with an error value", func(t *testing.T) {
		a := call(t, srv, rpcRequest("eth_getUncleByBlockHashAndIndex", fmt.Sprintf(`[%q,"0x0"]`, c.blocks[3].Hash)))
		checkError(t, a, -32603, "method handler crashed")
	})
	t.Run("batch", func(t *testing.T) {
		body := "[" +
			`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",true]},` +
			`{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["0xd",true]},` +
			`{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["0x2",true]}]`
		answers := callBatch(t, srv, body)
		if !checkAnswers(t, body, answers, []string{"1 result", "2 error -32603 method handler crashed", "3 result"}) {
			t.FailNow()
		}
		checkBlockNumber(t, resultObject(t, answers[0]), "0x1")
		checkBlockNumber(t, resultObject(t, answers[2]), "0x2")
	})
	t.Run("serving goes on", func(t *testing.T) {
		for range 3 {
			checkError(t, call(t, srv, panicking), -32603, "method handler crashed")
			checkBlockNumber(t, resultObject(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["latest",true]`))), "0x3")
		}
	})
}

func TestBackendTimeout(t *testing.T) {
	h := newHandler(blockingBackend{})

	t.Run("deadline", func(t *testing.T) {
		// The backend waits for the context, however long it takes: the
		// answer does not depend on the duration.
		srv := serve(t, withDeadline(h, 20*time.Millisecond))
		for method, body := range threeMethods(backend.Hash{1}) {
			t.Run(method, func(t *testing.T) {
				a := call(t, srv, body)
				checkError(t, a, -32002, "request timed out")
				if string(a.ID) != "1" {
					t.Errorf("id %s, want 1", a.ID)
				}
			})
		}
	})
	t.Run("the backend's own deadline", func(t *testing.T) {
		// A backend whose query or endpoint timed out, the request's own
		// time left: a backend failure, not the client's timeout.
		var log bytes.Buffer
		h := newHandler(timedOutBackend{}, blockrpc.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		checkError(t, parseAnswer(t, serveBody(h, []byte(latestBlock)).Body.Bytes()), -32000, "backend failure")
		if !strings.Contains(log.String(), "backend failure") {
			t.Errorf("the backend's timeout is not logged:\n%s", log.String())
		}
	})
	t.Run("the backend's own cancellation", func(t *testing.T) {
		// A backend whose own work was cancelled (a pool closing, a fetch
		// it shares ended by its owner), the request still alive: a
		// backend failure, not the client's cancellation.
		var log bytes.Buffer
		h := newHandler(cancelledBackend{}, blockrpc.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		checkError(t, parseAnswer(t, serveBody(h, []byte(latestBlock)).Body.Bytes()), -32000, "backend failure")
		if !strings.Contains(log.String(), "backend failure") {
			t.Errorf("the backend's cancellation is not logged:\n%s", log.String())
		}
	})
	t.Run("body slower than the deadline", func(t *testing.T) {
		// The deadline ends the read of a body that comes too slowly, as
		// the server's ReadTimeout would.
		srv := serve(t, withDeadline(h, 200*time.Millisecond))
		body, sent := io.Pipe()
		go func() {
			sent.Write([]byte(latestBlock[:10]))
			time.Sleep(3 * time.Second)
			sent.Write([]byte(latestBlock[10:]))
			sent.Close()
		}()
		req := newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, "", "Content-Type", "application/json")
		req.Body, req.GetBody, req.ContentLength = body, nil, int64(len(latestBlock))
		start := time.Now()
		resp, out := send(t, req)
		if took := time.Since(start); resp.StatusCode != http.StatusRequestTimeout || took > 2*time.Second {
			t.Errorf("status %d after %v, want 408 at the deadline (200ms): %s", resp.StatusCode, took.Round(time.Millisecond), out)
		}
	})
	t.Run("deadline already passed", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, handlerRequest(ctx, latestBlock))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d, want 200; body %s", rec.Code, rec.Body)
		}
		checkError(t, parseAnswer(t, rec.Body.Bytes()), -32002, "request timed out")
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, handlerRequest(ctx, latestBlock))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d, want 200; body %s", rec.Code, rec.Body)
		}
		checkError(t, parseAnswer(t, rec.Body.Bytes()), -32000, "request canceled")
	})
}

// A batch that outlives its deadline answers the calls left with a timeout
// and does not run them.
func TestBatchStopsAtItsDeadline(t *testing.T) {
	var calls atomic.Int32
	slow := &countingBackend{Backend: newTestChain(t).store, calls: &calls, delay: 300 * time.Millisecond}
	srv := serve(t, withDeadline(newHandler(slow), 100*time.Millisecond))
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
	// Once, or not at all when the machine stalled the request past its
	// deadline before the first call.
	if n := calls.Load(); n > 1 {
		t.Errorf("the backend was called %d times, want once at most: the calls after the deadline must not run", n)
	}
}

// TestCompanionFailures checks that the companions answer a failing backend
// as the main methods do: -32000, with nothing of the backend's error.
func TestCompanionFailures(t *testing.T) {
	srv := newServer(t, failingBackend{})
	for _, tc := range []struct{ method, params string }{
		{"eth_chainId", `[]`},
		{"eth_blockNumber", `[]`},
		{"eth_getUncleByBlockNumberAndIndex", `["0x1","0x0"]`},
		{"eth_getUncleCountByBlockHash", `["0x` + repeatHex("ab", 32) + `"]`},
		{"eth_getUncleCountByBlockNumber", `["0x1"]`},
	} {
		status, body := post(t, srv, rpcRequest(tc.method, tc.params))
		a := parseAnswer(t, body)
		if status != 200 || a.Error == nil || a.Error.Code != -32000 || a.Error.Message != "backend failure" {
			t.Errorf("%s: %d %s, want -32000 backend failure", tc.method, status, body)
		}
	}
}

// lateFailingLender lends its blocks, and then fails while fail is set, as
// a store does whose read fails to end (an iterator that fails to close).
type lateFailingLender struct {
	*memstore.Store
	fail *atomic.Bool
}

func (l lateFailingLender) LendBlockByNumber(ctx context.Context, n backend.BlockNumber, f func(*backend.Block, backend.TransactionDecoder) error) error {
	return l.late(l.Store.LendBlockByNumber(ctx, n, f))
}

func (l lateFailingLender) LendBlockByHash(ctx context.Context, h backend.Hash, f func(*backend.Block, backend.TransactionDecoder) error) error {
	return l.late(l.Store.LendBlockByHash(ctx, h, f))
}

func (l lateFailingLender) late(err error) error {
	if err == nil && l.fail.Load() {
		return errors.New("disk I/O error ending the read")
	}
	return err
}

// TestLateFailure fails answers after the block was found in the answer
// cache: a backend that fails once it has lent the block, a Cache hook
// that panics. The client gets the error, as valid JSON, not the cached
// block written into it.
func TestLateFailure(t *testing.T) {
	c := newTestChain(t)
	var fail, panics atomic.Bool
	obs := &blockrpc.Observer{Cache: func(_ context.Context, hit bool) {
		if hit && panics.Load() {
			panic("a hook's bug")
		}
	}}
	h := newHandler(lateFailingLender{c.store, &fail}, blockrpc.WithObserver(obs), blockrpc.WithLogger(slog.New(slog.DiscardHandler)))
	for _, tc := range []struct {
		name    string
		on      *atomic.Bool
		code    int
		message string
	}{
		{"a backend failing late", &fail, -32000, "backend failure"},
		{"a Cache hook that panics", &panics, -32603, "method handler crashed"},
	} {
		for _, fullTx := range []bool{false, true} {
			body := rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`["0x1",%v]`, fullTx))
			if rec := serveBody(h, []byte(body)); rec.Code != http.StatusOK || parseAnswer(t, rec.Body.Bytes()).Error != nil {
				t.Fatalf("%s: the answer that fills the cache: %s", tc.name, rec.Body)
			}
			tc.on.Store(true)
			rec := serveBody(h, []byte(body))
			tc.on.Store(false)
			if !json.Valid(rec.Body.Bytes()) {
				t.Errorf("%s, full transactions %v: the answer is no JSON: %s", tc.name, fullTx, rec.Body)
				continue
			}
			a := parseAnswer(t, rec.Body.Bytes())
			checkError(t, a, tc.code, tc.message)
			if string(a.ID) != "1" {
				t.Errorf("%s: id %s, want 1", tc.name, a.ID)
			}
		}
	}
}

// timedOutBackend fails as a backend does whose own deadline passed: a
// query's, or each endpoint's.
type timedOutBackend struct{ failingBackend }

func (timedOutBackend) BlockByNumber(context.Context, backend.BlockNumber) (*backend.Block, error) {
	return nil, fmt.Errorf("every endpoint: %w", context.DeadlineExceeded)
}

type cancelledBackend struct{ failingBackend }

func (cancelledBackend) BlockByNumber(context.Context, backend.BlockNumber) (*backend.Block, error) {
	return nil, fmt.Errorf("upstream: shared fetch ended: %w", context.Canceled)
}

// TestNewServiceOfNilBackend checks that a Service without a Backend is
// refused where it is made, not found out as every request fails with a
// crash answered -32603.
func TestNewServiceOfNilBackend(t *testing.T) {
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "nil Backend") {
			t.Errorf("NewService(nil) recovered %v, want a panic naming the nil Backend", p)
		}
	}()
	blockrpc.NewService(nil)
}
