package blockrpc_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
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

// countingLender counts the blocks a memstore lends and those it decodes.
type countingLender struct {
	*memstore.Store
	lent, decoded atomic.Int32
}

func (c *countingLender) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	c.decoded.Add(1)
	return c.Store.BlockByNumber(ctx, n)
}

func (c *countingLender) LendBlockByNumber(ctx context.Context, n backend.BlockNumber, f func(*backend.Block, backend.TransactionDecoder) error) error {
	c.lent.Add(1)
	return c.Store.LendBlockByNumber(ctx, n, f)
}

// TestObservedBackendLends checks that a Backend observer, which the
// example server's metrics install, leaves a Lender lending: its blocks
// written from its memory, not decoded and copied, the same answers, and
// the observer told of the lookup as a BlockByNumber that succeeded, or
// one that failed.
func TestObservedBackendLends(t *testing.T) {
	c := newTestChain(t)
	plain := serveBody(newHandler(c.store, blockrpc.WithAnswerCache(0)), []byte(rpcRequest("eth_getBlockByNumber", `["0x1",true]`)))
	var seen []blockrpc.BackendInfo
	obs := &blockrpc.Observer{Backend: func(_ context.Context, b blockrpc.BackendInfo) { seen = append(seen, b) }}
	counting := &countingLender{Store: c.store}
	h := newHandler(counting, blockrpc.WithObserver(obs), blockrpc.WithAnswerCache(0))
	got := serveBody(h, []byte(rpcRequest("eth_getBlockByNumber", `["0x1",true]`)))
	if got.Body.String() != plain.Body.String() {
		t.Errorf("observed: %s\nnot observed: %s", got.Body, plain.Body)
	}
	if counting.lent.Load() != 1 || counting.decoded.Load() != 0 {
		t.Errorf("blocks lent %d, decoded %d; want one lent", counting.lent.Load(), counting.decoded.Load())
	}
	if len(seen) != 1 || seen[0].Method != "BlockByNumber" || seen[0].Err != nil {
		t.Errorf("the observer saw %+v, want one BlockByNumber that succeeded", seen)
	}

	seen = nil
	serveBody(h, []byte(rpcRequest("eth_getBlockByNumber", `["0x1000",true]`)))
	if len(seen) != 1 || !errors.Is(seen[0].Err, backend.ErrNotFound) {
		t.Errorf("a block the chain lacks: the observer saw %+v, want ErrNotFound", seen)
	}
}

var errDecode = errors.New("disk failed while decoding a transaction")

// failingDecoder is a lent block's transactions on a disk that fails.
type failingDecoder struct{}

func (failingDecoder) DecodeNext(*backend.Transaction) (bool, error) { return false, errDecode }

// decoderFailingLender lends its blocks with their transactions in a
// failingDecoder: a store whose disk fails while the answer is written.
type decoderFailingLender struct{ *memstore.Store }

func (l decoderFailingLender) LendBlockByNumber(ctx context.Context, n backend.BlockNumber, f func(*backend.Block, backend.TransactionDecoder) error) error {
	return l.Store.LendBlockByNumber(ctx, n, func(b *backend.Block, _ backend.TransactionDecoder) error {
		lent := *b
		if b.Transactions != nil {
			lent.TransactionHashes, lent.Transactions = backend.TransactionHashes(b.Transactions), nil
		}
		return f(&lent, failingDecoder{})
	})
}

// TestObserverBackendFailsWhileLent has a lent block's transactions fail
// to decode as the answer is written: the client gets "backend failure",
// and the observer is told the backend failed, with its error.
func TestObserverBackendFailsWhileLent(t *testing.T) {
	var seen []blockrpc.BackendInfo
	obs := &blockrpc.Observer{Backend: func(_ context.Context, b blockrpc.BackendInfo) { seen = append(seen, b) }}
	h := newHandler(decoderFailingLender{newTestChain(t).store}, blockrpc.WithObserver(obs), blockrpc.WithAnswerCache(0))
	rec := serveBody(h, []byte(rpcRequest("eth_getBlockByNumber", `["0x1",true]`)))
	checkError(t, parseAnswer(t, rec.Body.Bytes()), -32000, "backend failure")
	if len(seen) != 1 || !errors.Is(seen[0].Err, errDecode) {
		t.Errorf("the observer saw %+v, want one BlockByNumber that failed with %q", seen, errDecode)
	}
}

// statusRecorder is the usual logging middleware's ResponseWriter: it
// embeds the writer to note the status, and neither flushes nor unwraps.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// TestObserverCutBehindMiddleware serves behind middleware whose writer
// cannot flush: an answer the client read whole is not cut.
func TestObserverCutBehindMiddleware(t *testing.T) {
	seen := make(chan blockrpc.RequestInfo, 1)
	obs := &blockrpc.Observer{Request: func(_ context.Context, r blockrpc.RequestInfo) { seen <- r }}
	h := newHandler(newTestChain(t).store, blockrpc.WithObserver(obs))
	for name, wrapped := range map[string]http.Handler{
		"logging middleware": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(&statusRecorder{ResponseWriter: w}, r)
		}),
		// The standard library's timeout middleware, which the Handler's
		// doc points to ("timeouts are the caller's, set ... by middleware").
		"http.TimeoutHandler": http.TimeoutHandler(h, 10*time.Second, "timeout"),
	} {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, wrapped)
			status, out := post(t, srv, latestBlock)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, out)
			}
			checkBlockNumber(t, resultObject(t, parseAnswer(t, out)), "0x3")
			if r := <-seen; r.Cut {
				t.Errorf("RequestInfo.Cut = true for an answer the client read whole (%d bytes): %+v", len(out), r)
			}
		})
	}
}

// TestObserverCut sends requests over connections that the client closes:
// after reading its whole answer, which is not cut, however soon the
// server sees the connection close; or while the backend works on it,
// which is.
func TestObserverCut(t *testing.T) {
	seen := make(chan blockrpc.RequestInfo, 1)
	obs := &blockrpc.Observer{Request: func(_ context.Context, r blockrpc.RequestInfo) { seen <- r }}
	ask := func(srv *httptest.Server, readAnswer bool) blockrpc.RequestInfo {
		t.Helper()
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v3/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", testKey, len(latestBlock), latestBlock)
		if readAnswer {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		conn.Close()
		return <-seen
	}

	srv := serve(t, newHandler(newTestChain(t).store, blockrpc.WithObserver(obs)))
	cut := 0
	const whole = 1000
	for range whole {
		if ask(srv, true).Cut {
			cut++
		}
	}
	if cut > 0 {
		t.Errorf("%d of %d answers that the client read whole were observed Cut", cut, whole)
	}

	srv = serve(t, newHandler(blockingBackend{}, blockrpc.WithObserver(obs)))
	if r := ask(srv, false); !r.Cut {
		t.Errorf("a client gone while the backend worked: not observed Cut: %+v", r)
	}
}

// TestObserverPreflightIsNoError checks that a CORS preflight answered is
// not counted as an error.
func TestObserverPreflightIsNoError(t *testing.T) {
	const allowed = "https://app.example"
	seen := make(chan blockrpc.RequestInfo, 1)
	obs := &blockrpc.Observer{Request: func(_ context.Context, r blockrpc.RequestInfo) { seen <- r }}
	srv := newServer(t, newTestChain(t).store, blockrpc.WithCORS(allowed), blockrpc.WithObserver(obs))
	resp, _ := send(t, newRequest(t, http.MethodOptions, srv.URL+"/v3/"+testKey, "",
		"Origin", allowed, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type"))
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight status %d", resp.StatusCode)
	}
	if r := <-seen; r.Errors != 0 {
		t.Errorf("a successful CORS preflight is observed with Errors = %d, want 0: %+v", r.Errors, r)
	}
}

// TestObserverCallForLimitedCall checks that Observer.Call hears of a
// call refused by the rate limiter, which is answered as the call.
func TestObserverCallForLimitedCall(t *testing.T) {
	calls := make(chan blockrpc.CallInfo, 2)
	obs := &blockrpc.Observer{Call: func(_ context.Context, c blockrpc.CallInfo) { calls <- c }}
	srv := newServer(t, newTestChain(t).store, blockrpc.WithObserver(obs),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: 1.0 / 3600, Burst: 1}))
	for _, want := range []int{0, -32005} {
		post(t, srv, rpcRequest("eth_blockNumber", `[]`))
		select {
		case c := <-calls:
			if c.Code != want || c.Method != "eth_blockNumber" {
				t.Errorf("Observer.Call told of %+v, want eth_blockNumber with code %d", c, want)
			}
		default:
			t.Errorf("Observer.Call not told of the call answered with code %d", want)
		}
	}
}

// TestObserverCallForRefusedBatchCalls checks that Observer.Call hears of
// the calls of a batch answered without being run ("response too large").
func TestObserverCallForRefusedBatchCalls(t *testing.T) {
	var mu sync.Mutex
	var calls []blockrpc.CallInfo
	reqs := make(chan blockrpc.RequestInfo, 1)
	obs := &blockrpc.Observer{
		Call: func(_ context.Context, c blockrpc.CallInfo) {
			mu.Lock()
			calls = append(calls, c)
			mu.Unlock()
		},
		Request: func(_ context.Context, r blockrpc.RequestInfo) { reqs <- r },
	}
	srv := newServer(t, newTestChain(t).store, blockrpc.WithObserver(obs), blockrpc.WithResponseLimit(100))
	one := rpcRequest("eth_getBlockByNumber", `["0x1",false]`)
	body := "[" + strings.Join([]string{one, one, one}, ",") + "]"
	answers := callBatch(t, srv, body)
	if len(answers) != 3 {
		t.Fatalf("%d answers", len(answers))
	}
	tooLarge := 0
	for _, a := range answers {
		if a.Error != nil && a.Error.Code == -32003 {
			tooLarge++
		}
	}
	if tooLarge == 0 {
		t.Fatalf("no call was refused as too large; answers %+v", answers)
	}
	req := <-reqs // told after the answer was written, so after every Call
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != len(answers) {
		t.Errorf("Observer.Call was called %d times for a batch of %d answered calls (%d answered -32003); RequestInfo.Errors = %d",
			len(calls), len(answers), tooLarge, req.Errors)
	}
}

// TestObserversAddUp gives the handler three observers, as a server with
// metrics, an access log and a store of keys does: each is told of every
// request, call, Backend call and cache lookup, in the order given, and
// a nil one and a missing hook change nothing.
func TestObserversAddUp(t *testing.T) {
	store, _ := demoChain(t)
	var mu sync.Mutex
	var seen []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
	}
	observer := func(name string) *blockrpc.Observer {
		return &blockrpc.Observer{
			Call:    func(context.Context, blockrpc.CallInfo) { note(name + " call") },
			Request: func(context.Context, blockrpc.RequestInfo) { note(name + " request") },
			Backend: func(context.Context, blockrpc.BackendInfo) { note(name + " backend") },
			Cache:   func(context.Context, bool) { note(name + " cache") },
		}
	}
	// The last hook called: the answer may reach the client before it.
	done := make(chan struct{})
	requestsOnly := &blockrpc.Observer{Request: func(context.Context, blockrpc.RequestInfo) {
		note("c request")
		close(done)
	}}
	srv := newServer(t, store, blockrpc.WithObserver(observer("a")), blockrpc.WithObserver(nil),
		blockrpc.WithObserver(observer("b")), blockrpc.WithObserver(requestsOnly))
	if status, _ := post(t, srv, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",false]}`); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	want := "a cache, b cache, a backend, b backend, a call, b call, a request, b request, c request"
	if got := strings.Join(seen, ", "); got != want {
		t.Errorf("the observers were told:\n %s\nwant\n %s", got, want)
	}
}

// TestObserverNotToldOfNotifications checks that Observer.Call is told of
// each answered call and of nothing else: notifications and responses,
// never answered, are not calls to count, alone or in a batch.
func TestObserverNotToldOfNotifications(t *testing.T) {
	var mu sync.Mutex
	var calls []blockrpc.CallInfo
	obs := &blockrpc.Observer{Call: func(_ context.Context, c blockrpc.CallInfo) {
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}}
	srv := newServer(t, newTestChain(t).store, blockrpc.WithObserver(obs))
	const notification = `{"jsonrpc":"2.0","method":"eth_chainId"}`
	const response = `{"jsonrpc":"2.0","id":9,"result":"0x1"}`
	for _, body := range []string{notification, response} {
		if status, out := post(t, srv, body); status != http.StatusOK || len(out) != 0 {
			t.Errorf("%s: %d %q, want an empty 200", body, status, out)
		}
	}
	body := "[" + notification + "," + rpcRequest("eth_chainId", `[]`) + "," + response + "]"
	checkAnswers(t, body, callBatch(t, srv, body), []string{"1 result"})
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || calls[0].Method != "eth_chainId" || calls[0].Code != 0 {
		t.Errorf("Observer.Call was told of %+v, want the one answered call of eth_chainId", calls)
	}
}

// unflushableWriter takes the answer into its buffer, as net/http's
// response writer does, and fails to send it on: the client is gone.
type unflushableWriter struct{ *httptest.ResponseRecorder }

func (w unflushableWriter) FlushError() error { return errors.New("broken pipe") }

// TestObserverCutAtTheLastFlush checks that an answer written whole, which
// sits in the server's buffer, counts as cut when sending it on fails.
func TestObserverCutAtTheLastFlush(t *testing.T) {
	seen := make(chan blockrpc.RequestInfo, 1)
	obs := &blockrpc.Observer{Request: func(_ context.Context, r blockrpc.RequestInfo) { seen <- r }}
	h := newHandler(newTestChain(t).store, blockrpc.WithObserver(obs))
	h.ServeHTTP(unflushableWriter{httptest.NewRecorder()}, handlerRequest(context.Background(), latestBlock))
	if r := <-seen; !r.Cut {
		t.Errorf("an answer whose sending failed: not observed Cut: %+v", r)
	}
	h.ServeHTTP(httptest.NewRecorder(), handlerRequest(context.Background(), latestBlock))
	if r := <-seen; r.Cut {
		t.Errorf("an answer sent whole: observed Cut: %+v", r)
	}
}

// TestObserverCutWithNothingToAnswer checks that a request of
// notifications alone, whose client went away before its empty answer,
// counts as cut.
func TestObserverCutWithNothingToAnswer(t *testing.T) {
	seen := make(chan blockrpc.RequestInfo, 1)
	obs := &blockrpc.Observer{Request: func(_ context.Context, r blockrpc.RequestInfo) { seen <- r }}
	h := newHandler(newTestChain(t).store, blockrpc.WithObserver(obs))
	const notification = `{"jsonrpc":"2.0","method":"eth_chainId"}`
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, body := range []string{notification, "[" + notification + "," + notification + "]"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, handlerRequest(ctx, body))
		if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
			t.Errorf("%s: %d %q, want an empty 200", body, rec.Code, rec.Body)
		}
		if r := <-seen; !r.Cut {
			t.Errorf("%s, its client gone: not observed Cut: %+v", body, r)
		}
	}
}

// slowMissLender is a Lender that looks a while and lends nothing.
type slowMissLender struct{ *memstore.Store }

func (slowMissLender) LendBlockByNumber(context.Context, backend.BlockNumber, func(*backend.Block, backend.TransactionDecoder) error) error {
	time.Sleep(20 * time.Millisecond)
	return backend.ErrNotFound
}

// TestObserverBackendDurationOfNoLoan checks that a Lender's lookup that
// lends nothing is told with the time it took.
func TestObserverBackendDurationOfNoLoan(t *testing.T) {
	var seen []blockrpc.BackendInfo
	obs := &blockrpc.Observer{Backend: func(_ context.Context, b blockrpc.BackendInfo) { seen = append(seen, b) }}
	h := newHandler(slowMissLender{newTestChain(t).store}, blockrpc.WithObserver(obs))
	rec := serveBody(h, []byte(rpcRequest("eth_getBlockByNumber", `["0x1",false]`)))
	checkNullResult(t, parseAnswer(t, rec.Body.Bytes()))
	if len(seen) != 1 || seen[0].Method != "BlockByNumber" || seen[0].Duration < 20*time.Millisecond {
		t.Errorf("the observer saw %+v, want one BlockByNumber of 20 ms or more", seen)
	}
}

// hashesOnlyLender lends its blocks with their transactions' hashes only,
// and no decoder: a store that never kept the bodies.
type hashesOnlyLender struct{ *memstore.Store }

func (l hashesOnlyLender) LendBlockByNumber(ctx context.Context, n backend.BlockNumber, f func(*backend.Block, backend.TransactionDecoder) error) error {
	return l.Store.LendBlockByNumber(ctx, n, func(b *backend.Block, _ backend.TransactionDecoder) error {
		lent := *b
		if b.Transactions != nil {
			lent.TransactionHashes, lent.Transactions = backend.TransactionHashes(b.Transactions), nil
		}
		return f(&lent, nil)
	})
}

// TestObserverBackendNotBlamedForRefusal checks that a block lent whole,
// which the service then refuses to show (its bodies asked for and not
// kept), is a lookup the backend answered without failing.
func TestObserverBackendNotBlamedForRefusal(t *testing.T) {
	var seen []blockrpc.BackendInfo
	obs := &blockrpc.Observer{Backend: func(_ context.Context, b blockrpc.BackendInfo) { seen = append(seen, b) }}
	h := newHandler(hashesOnlyLender{newTestChain(t).store}, blockrpc.WithObserver(obs))
	rec := serveBody(h, []byte(rpcRequest("eth_getBlockByNumber", `["0x1",true]`)))
	checkError(t, parseAnswer(t, rec.Body.Bytes()), -32000, "transaction bodies are not available for this block")
	if len(seen) != 1 || seen[0].Method != "BlockByNumber" || seen[0].Err != nil {
		t.Errorf("the observer saw %+v, want one BlockByNumber that did not fail", seen)
	}
}
