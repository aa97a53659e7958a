package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/blockrpctest"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// TestOpenRefuses checks what Open will not start with.
func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := chaintest.New(chaintest.Config{Seed: 1}).Store()
	dead := newFakeNode(t, store)
	dead.srv.Close()
	for _, tc := range []struct {
		name      string
		endpoints []string
	}{
		{"no endpoint", nil},
		{"not a URL", []string{"127.0.0.1:8545"}},
		{"another scheme", []string{"ws://127.0.0.1:8546"}},
		{"no endpoint answers", []string{dead.URL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, untilTimeout)
			defer cancel()
			up, err := upstream.Open(ctx, upstream.Config{Endpoints: tc.endpoints, Logger: discardLogger()})
			if err == nil {
				up.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

// TestCacheOff serves a chain with a finalized block through a Backend
// without a cache (CacheBytes < 0): every answer is fetched and verified
// again, and nothing fails for want of a cache.
func TestCacheOff(t *testing.T) {
	t.Parallel()
	store, err := demo.Store() // safe and finalized are set
	if err != nil {
		t.Fatal(err)
	}
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{CacheBytes: -1, PollInterval: idle}, node.URL)
	ctx := context.Background()
	for _, n := range []backend.BlockNumber{demo.FirstUncleBlock, demo.Finalized, demo.Head, backend.Finalized} {
		want := storeBlock(t, store, n)
		before := node.Calls("eth_getBlockByNumber") + node.Calls("eth_getBlockByHash")
		for range 2 {
			got, err := up.BlockByNumber(ctx, n)
			if err != nil {
				t.Fatalf("block %v: %v", n, err)
			}
			if d := diffAnswer(got, want); d != "" {
				t.Fatalf("block %v: %s", n, d)
			}
		}
		// Each answer asks for the block and its parent's total difficulty.
		if calls := node.Calls("eth_getBlockByNumber") + node.Calls("eth_getBlockByHash") - before; calls < 4 {
			t.Errorf("block %v twice without a cache: %d block calls, want at least 4", n, calls)
		}
	}
}

// TestCacheServesAgain checks that a block answered once is answered from
// the cache: by hash, and by number at or below the finalized block.
func TestCacheServesAgain(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	ctx := context.Background()
	calls := func() int64 { return node.Calls("eth_getBlockByNumber") + node.Calls("eth_getBlockByHash") }
	for _, n := range []uint64{demo.FirstUncleBlock, demo.Finalized, demo.Finalized + 1, demo.Head} {
		want := storeBlock(t, store, backend.BlockNumber(n))
		if _, err := up.BlockByNumber(ctx, backend.BlockNumber(n)); err != nil {
			t.Fatal(err)
		}
		before, uncles := calls(), node.Calls("eth_getUncleByBlockHashAndIndex")
		for range 3 {
			byNumber, err := up.BlockByNumber(ctx, backend.BlockNumber(n))
			if err != nil {
				t.Fatal(err)
			}
			byHash, err := up.BlockByHash(ctx, want.Hash)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want.Uncles {
				if _, err := up.UncleByBlockHashAndIndex(ctx, want.Hash, uint64(i)); err != nil {
					t.Fatal(err)
				}
			}
			if d := diffAnswer(byNumber, want) + diffAnswer(byHash, want); d != "" {
				t.Fatalf("block %d: %s", n, d)
			}
		}
		if c, u := calls()-before, node.Calls("eth_getUncleByBlockHashAndIndex")-uncles; c != 0 || u != 0 {
			t.Errorf("block %d answered again: %d block and %d uncle calls reached the node, want none", n, c, u)
		}
	}
}

// TestOneFetchForConcurrentMisses checks that readers missing the same
// block at once share one fetch.
func TestOneFetchForConcurrentMisses(t *testing.T) {
	store := demoStore(t)
	node := newFakeNode(t, store)
	target := storeBlock(t, store, demo.FirstBlobBlock)
	var mu sync.Mutex
	asked := 0
	release := make(chan struct{})
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if asksFor(r, "eth_getBlockByHash") {
			<-release // hold the fetch until every reader waits on it
		}
		return false
	})
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByHash" && len(params) == 2 && string(params[0]) == `"`+target.Hash.String()+`"` {
			mu.Lock()
			asked++
			mu.Unlock()
		}
		return result
	})
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	const readers = 16
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	started := make(chan struct{}, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			got, err := up.BlockByHash(context.Background(), target.Hash)
			if err == nil && diffAnswer(got, target) != "" {
				err = errors.New("a wrong block")
			}
			errs <- err
		}()
	}
	for range readers {
		<-started
	}
	// The readers are started; give the last ones a moment to reach the
	// flight before it lands. A reader that comes later finds the block
	// cached, so this only makes the check stronger, never flaky.
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != 1 {
		t.Errorf("%d readers missing the same block: the node was asked for it %d times, want once", readers, asked)
	}
}

// TestFetchOfAKnownHashNotShared has a reader of a block by number, whose
// hash the head tracker saw, miss it while a reader of the same hash by
// eth_getBlockByHash fetches it from an endpoint that lags and answers
// null: a null is believed for the second, and not for the first, which
// must not share that fetch, or a client is told the block does not
// exist. The endpoint's head is not denied to a reader by hash either.
func TestFetchOfAKnownHashNotShared(t *testing.T) {
	store := faultChain(t)
	head := storeBlock(t, store, backend.Latest)
	target := storeBlock(t, store, backend.BlockNumber(head.Number-1))
	lagging, upToDate := newFakeNode(t, prefixStore(t, store, head.Number-2)), newFakeNode(t, store)
	var down, asked atomic.Bool
	down.Store(true)
	hold := make(chan struct{})
	lagging.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if down.Load() && !asksFor(r, "eth_chainId") {
			w.WriteHeader(http.StatusInternalServerError)
			return true
		}
		if asksFor(r, "eth_getBlockByHash") && asked.CompareAndSwap(false, true) {
			<-hold
		}
		return false
	})
	// The lagging endpoint fails at the first poll (its chain id known):
	// the view is the other one's, and the lagging one is preferred again
	// once its backoff ends.
	up := openUp(t, upstream.Config{PollInterval: idle, MaxLag: 3}, lagging.URL, upToDate.URL)
	down.Store(false)
	eventually(t, "the lagging endpoint to be preferred again", func() bool { return up.Usable(0) })

	ctx := context.Background()
	byHash := make(chan error, 1)
	go func() {
		_, err := up.BlockByHash(ctx, target.Hash)
		byHash <- err
	}()
	eventually(t, "the lagging endpoint to be asked", asked.Load)
	byNumber := make(chan error, 1)
	go func() {
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(target.Number))
		if err == nil && got.Hash != target.Hash {
			err = fmt.Errorf("block %s", got.Hash)
		}
		byNumber <- err
	}()
	// A reader sharing the fetch would be waiting on it by now; one that
	// comes later fetches on its own, which cannot fail this test.
	time.Sleep(50 * time.Millisecond)
	close(hold)
	if err := <-byNumber; err != nil {
		t.Errorf("block %d by number, which the tracker saw: %v; a client would be told null", target.Number, err)
	}
	if err := <-byHash; !errors.Is(err, backend.ErrNotFound) {
		t.Logf("block %d by hash, from the lagging endpoint: %v", target.Number, err)
	}
	if got, err := up.BlockByHash(ctx, head.Hash); err != nil || got.Hash != head.Hash {
		t.Errorf("the head by hash, which the lagging endpoint lacks: %v", err)
	}
}

// TestNotFound checks what the Backend answers as not found, and that a
// hash the head tracker saw is never answered so.
func TestNotFound(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 2})
	b.AddBlocks(5, chaintest.Txs(2))
	store := b.Store()
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	ctx := context.Background()
	for _, n := range []backend.BlockNumber{6, 1 << 40, backend.Pending, backend.Safe, backend.Finalized} {
		if got, err := up.BlockByNumber(ctx, n); got != nil || !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("block %v: %v, %v; want not found", n, got != nil, err)
		}
	}
	if got, err := up.BlockByHash(ctx, backend.Hash{1}); got != nil || !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("an unknown hash: %v, %v; want not found", got != nil, err)
	}
	head := storeBlock(t, store, backend.Latest)
	if u, err := up.UncleByBlockHashAndIndex(ctx, head.Hash, 0); u != nil || !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("uncle 0 of a block without uncles: %v, %v; want not found", u != nil, err)
	}

	// A node forgets the head the tracker saw before the Backend cached
	// it: the Backend fails rather than deny a block it knows exists.
	forgetful := newFakeNode(t, store)
	up = openUp(t, upstream.Config{PollInterval: idle}, forgetful.URL)
	forgetful.SetStore(prefixStore(t, store, head.Number-1))
	got, err := up.BlockByNumber(ctx, backend.Latest)
	checkRefused(t, "the head the node no longer has", got, err)
	got, err = up.BlockByNumber(ctx, backend.BlockNumber(head.Number))
	checkRefused(t, "the head by number", got, err)
}

// TestAnotherChainIsNeverUsed gives the Backend a second endpoint serving
// another chain: it is reported, and never asked for a block even when
// the first fails.
func TestAnotherChainIsNeverUsed(t *testing.T) {
	t.Parallel()
	mine := chaintest.New(chaintest.Config{Seed: 1, ChainID: 1337})
	mine.AddBlocks(4, chaintest.Txs(2))
	other := chaintest.New(chaintest.Config{Seed: 1, ChainID: 1338})
	other.AddBlocks(4, chaintest.Txs(2))
	good, wrong := newFakeNode(t, mine.Store()), newFakeNode(t, other.Store())
	up := openUp(t, upstream.Config{PollInterval: idle}, good.URL, wrong.URL)
	if id, _ := up.ChainID(context.Background()); id != 1337 {
		t.Fatalf("chain id %d, want the preferred endpoint's 1337", id)
	}
	st := up.Status()
	if st[1].Healthy || !strings.Contains(st[1].LastError, "another chain") {
		t.Errorf("the endpoint on another chain: %+v", st[1])
	}
	good.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusInternalServerError)
		return true
	})
	blockCalls := func() int64 { return wrong.Calls("eth_getBlockByHash") + wrong.Calls("eth_getBlockByNumber") }
	before := blockCalls()
	for n := range uint64(5) {
		got, err := up.BlockByNumber(context.Background(), backend.BlockNumber(n))
		checkRefused(t, "a block while the only endpoint on the chain fails", got, err)
	}
	if c := blockCalls() - before; c != 0 {
		t.Errorf("the endpoint on another chain was asked %d times for blocks", c)
	}
}

// TestEndpointKeyStaysPrivate serves through a provider URL with the key
// in its path: neither Status, nor errors, nor logs show the key.
func TestEndpointKeyStaysPrivate(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 4})
	b.AddBlocks(3, chaintest.Txs(1))
	srv := blockrpctest.NewServer(t, b.Store())
	logs := &logSink{}
	up := openUp(t, upstream.Config{PollInterval: idle, Timeout: 200 * time.Millisecond, Logger: slog.New(logs)}, srv.URL)
	srv.Close()
	_, err := up.BlockByHash(context.Background(), backend.Hash{1})
	if err == nil {
		t.Fatal("a closed provider answered")
	}
	st := up.Status()
	for what, s := range map[string]string{"error": err.Error(), "status": st[0].Endpoint + " " + st[0].LastError, "logs": logs.all()} {
		if strings.Contains(s, srv.Key) {
			t.Errorf("the %s shows the API key: %s", what, s)
		}
	}
	if !strings.HasPrefix(st[0].Endpoint, "http://127.0.0.1:") || strings.Contains(st[0].Endpoint, "/v3") {
		t.Errorf("Status names the endpoint %q, want its scheme and host", st[0].Endpoint)
	}
}

// countingTransport counts the requests a Backend starts.
type countingTransport struct {
	started atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.started.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestCloseStopsPolling checks that the head tracker stops with Close: no
// request starts after it returns.
func TestCloseStopsPolling(t *testing.T) {
	b := chaintest.New(chaintest.Config{Seed: 5})
	b.AddBlocks(2, nil)
	node := newFakeNode(t, b.Store())
	tr := &countingTransport{}
	up, err := upstream.Open(context.Background(), upstream.Config{
		Endpoints: []string{node.URL}, PollInterval: 5 * time.Millisecond,
		HTTPClient: &http.Client{Transport: tr}, Logger: discardLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	first := tr.started.Load()
	eventually(t, "a few polls", func() bool { return tr.started.Load() >= first+3 })
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	after := tr.started.Load()
	// Let many poll intervals pass: no request may start.
	time.Sleep(50 * time.Millisecond)
	if n := tr.started.Load(); n != after {
		t.Errorf("%d requests started after Close", n-after)
	}
}

// TestSmallCache reads the demo chain through a cache that holds a few
// blocks at a time: blocks leave it, numbers with them, and every answer
// is still the chain's.
func TestSmallCache(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle, CacheBytes: 16 * 16 << 10}, node.URL)
	ctx := context.Background()
	var calls []int64
	for range 2 {
		for n := backend.BlockNumber(0); n <= demo.Head; n += 3 {
			want := storeBlock(t, store, n)
			got, err := up.BlockByNumber(ctx, n)
			if err != nil {
				t.Fatalf("block %d: %v", n, err)
			}
			byHash, err := up.BlockByHash(ctx, want.Hash)
			if err != nil {
				t.Fatalf("block %d by hash: %v", n, err)
			}
			if d := diffAnswer(got, want) + diffAnswer(byHash, want); d != "" {
				t.Fatalf("block %d: %s", n, d)
			}
		}
		calls = append(calls, blockCalls(node))
	}
	if calls[1] == calls[0] {
		t.Error("the second pass was answered from the cache whole: the test needs a cache too small for the chain")
	}
}

// TestChainIDOfTransactions serves a chain signed for 1338 from an
// endpoint that says it is 1337: the blocks with transactions are
// refused, naming the chain id; one without is served.
func TestChainIDOfTransactions(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 6, ChainID: 1338})
	b.AddBlock(nil)
	b.AddBlocks(3, chaintest.Txs(2))
	store := b.Store()
	node := newFakeNode(t, store)
	node.SetRewrite(func(method string, _ []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_chainId" {
			return json.RawMessage(`"0x539"`)
		}
		return result
	})
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	ctx := context.Background()
	if id, _ := up.ChainID(ctx); id != 1337 {
		t.Fatalf("chain id %d, want the endpoint's 1337", id)
	}
	if got, err := up.BlockByNumber(ctx, 1); err != nil || diffAnswer(got, storeBlock(t, store, 1)) != "" {
		t.Fatalf("the block without transactions: %v", err)
	}
	got, err := up.BlockByNumber(ctx, 2)
	checkRefused(t, "a block signed for another chain", got, err)
	if !strings.Contains(err.Error(), "chainId") {
		t.Errorf("the error %q does not name the chain id", err)
	}
}

// TestStaleHeadRefused stops every endpoint answering: once the last poll
// is older than two intervals and a timeout, the tags (pending too) fail
// rather than name a head that may be long gone, while blocks by hash are still
// served from the cache; the tags come back with the endpoint.
func TestStaleHeadRefused(t *testing.T) {
	ctx := context.Background()
	store := faultChain(t)
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: 20 * time.Millisecond, Timeout: time.Second}, node.URL)
	latest, err := up.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		t.Fatal(err)
	}
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := up.BlockByNumber(ctx, backend.Latest)
		if err != nil {
			if !strings.Contains(err.Error(), "head is unknown") {
				t.Fatalf("latest while no endpoint answers: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("latest is still served 10 s after every endpoint stopped answering")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := up.BlockByNumber(ctx, backend.Pending); err == nil || !strings.Contains(err.Error(), "head is unknown") {
		t.Errorf("pending while the head is unknown: %v, want the error of the other tags", err)
	}
	if got, err := up.BlockByHash(ctx, latest.Hash); err != nil || got.Hash != latest.Hash {
		t.Errorf("a cached block by hash while the head is unknown: %v", err)
	}

	node.SetFault(nil)
	for {
		got, err := up.BlockByNumber(ctx, backend.Latest)
		if err == nil {
			if got.Hash != latest.Hash {
				t.Errorf("latest after the endpoint came back: %s, want %s", got.Hash, latest.Hash)
			}
			return
		}
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("latest after the endpoint came back: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTagsStaleOnTime stops the endpoint right after a poll: latest is
// served no longer than two intervals and a timeout after its last
// answer, to within the lateness of a timer, where a check every half an
// interval served it up to 200 ms longer here.
func TestTagsStaleOnTime(t *testing.T) {
	node := newFakeNode(t, faultChain(t))
	const poll, timeout = 400 * time.Millisecond, 200 * time.Millisecond
	var mu sync.Mutex
	var down bool
	var lastAnswer time.Time
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return true
		}
		lastAnswer = time.Now()
		return false
	})
	up := openUp(t, upstream.Config{PollInterval: poll, Timeout: timeout}, node.URL)
	ctx := context.Background()
	if _, err := up.BlockByNumber(ctx, backend.Latest); err != nil { // cached, to be served while down
		t.Fatal(err)
	}
	time.Sleep(poll + poll/4) // just after a poll
	mu.Lock()
	down, last := true, lastAnswer
	mu.Unlock()
	bound := 2*poll + timeout
	var lastServed time.Time // when the last read that was served began
	for time.Since(last) < bound+poll {
		start := time.Now()
		if _, err := up.BlockByNumber(ctx, backend.Latest); err == nil {
			lastServed = start
		}
		time.Sleep(time.Millisecond)
	}
	if lastServed.IsZero() {
		t.Fatal("latest not served after the endpoint stopped answering")
	}
	if age := lastServed.Sub(last); age > bound+100*time.Millisecond {
		t.Errorf("latest served %v after the endpoint's last answer, past %v (2 polls and a timeout)", age.Round(time.Millisecond), bound)
	}
}

// TestRetryAfterAlone has the only endpoint answer a read with 429 and
// Retry-After: 2: no request reaches it within those seconds, reads fail
// at once saying why, and it is asked again after them.
func TestRetryAfterAlone(t *testing.T) {
	store := faultChain(t)
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	var mu sync.Mutex
	var limitedAt time.Time
	early := 0
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !limitedAt.IsZero():
			if time.Since(limitedAt) < 2*time.Second {
				early++
			}
			return false
		case asksFor(r, "eth_getBlockByHash"):
			limitedAt = time.Now()
			w.Header().Set("Retry-After", "2")
			http.Error(w, "rate limited", http.StatusTooManyRequests)
			return true
		}
		return false
	})
	ctx := context.Background()
	if _, err := up.BlockByHash(ctx, storeBlock(t, store, 3).Hash); err == nil {
		t.Fatal("a read answered 429 succeeded")
	}
	_, err := up.BlockByHash(ctx, storeBlock(t, store, 4).Hash)
	if err == nil || !strings.Contains(err.Error(), "Retry-After") {
		t.Errorf("a read within the Retry-After: %v, want an error that says the endpoint waits it out", err)
	}
	mu.Lock()
	n := early
	mu.Unlock()
	if n > 0 {
		t.Errorf("%d requests reached the only endpoint within the 2 s its 429 asked to wait", n)
	}
	time.Sleep(2100 * time.Millisecond)
	if _, err := up.BlockByHash(ctx, storeBlock(t, store, 4).Hash); err != nil {
		t.Errorf("a read after the Retry-After: %v", err)
	}
}

// TestCloseLetsConnectionsGo closes a Backend that made its own HTTP
// client: its connections to the endpoint close with it, where each
// would keep a goroutine for 90 s more.
func TestCloseLetsConnectionsGo(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 5})
	b.AddBlocks(3, nil)
	node := newFakeNode(t, b.Store())
	up, err := upstream.Open(context.Background(), upstream.Config{Endpoints: []string{node.URL}, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.BlockByNumber(context.Background(), backend.Latest); err != nil {
		t.Fatal(err)
	}
	if node.conns.Load() == 0 {
		t.Fatal("no connection open to the endpoint: the test sees nothing")
	}
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for node.conns.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := node.conns.Load(); n > 0 {
		t.Errorf("%d connections of the closed Backend still open after 5 s", n)
	}
}

// TestCloseEndsAFetch closes the Backend while a fetch that a reader left
// at its deadline still waits for a slow endpoint: Close ends it, no
// request reaches the endpoint after Close, and no connection is left
// open.
func TestCloseEndsAFetch(t *testing.T) {
	store := faultChain(t)
	node := newFakeNode(t, store)
	up, err := upstream.Open(context.Background(), upstream.Config{
		Endpoints: []string{node.URL}, PollInterval: idle, Timeout: 2 * time.Second, Logger: discardLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Bool
	var afterClose atomic.Int32
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if closed.Load() {
			afterClose.Add(1)
		}
		if asksFor(r, "eth_getBlockByHash") {
			time.Sleep(300 * time.Millisecond) // slow, within Timeout
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := up.BlockByHash(ctx, storeBlock(t, store, 5).Hash); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	closed.Store(true)
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // longer than the fetch would have taken
	if n := afterClose.Load(); n > 0 {
		t.Errorf("%d requests reached the endpoint after Close", n)
	}
	if n := node.conns.Load(); n > 0 {
		t.Errorf("%d connections of the closed Backend open 1 s after Close", n)
	}
}

// TestCloseEndsAReadByNumber closes the Backend while a read by number,
// which no other reader shares (the block is below the tracker's window),
// waits for a slow endpoint: the read ends as Close does, with an error
// that says the Backend is closed, not at the endpoint's Timeout.
func TestCloseEndsAReadByNumber(t *testing.T) {
	store := faultChain(t)
	node := newFakeNode(t, store)
	up, err := upstream.Open(context.Background(), upstream.Config{
		Endpoints: []string{node.URL}, PollInterval: idle, Timeout: time.Minute, ReorgDepth: 2, Logger: discardLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan struct{}, 1)
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if asksFor(r, "eth_getBlockByNumber") {
			select {
			case asked <- struct{}{}:
			default:
			}
			<-r.Context().Done() // answers only once the client leaves
			return true
		}
		return false
	})
	read := make(chan error, 1)
	go func() {
		_, err := up.BlockByNumber(context.Background(), 5)
		read <- err
	}()
	<-asked
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("a read ended by Close: %v, want an error saying the Backend is closed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read by number still waits for the endpoint 10 s after Close")
	}
}

// TestRedirectNotFollowed has the endpoint redirect every request to
// another host that serves the chain: the redirect is the endpoint's
// failure, nothing is asked of the other host, and the endpoint's URL,
// a provider's key in its path, is not sent there as the Referer. Both
// the Backend and the Follower, with the clients they make.
func TestRedirectNotFollowed(t *testing.T) {
	other := newFakeNode(t, faultChain(t))
	var referers atomic.Int32
	other.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Referer") != "" {
			referers.Add(1)
		}
		return false
	})
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	endpoint := redirector.URL + "/v3/PROVIDER-KEY"

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	up, err := upstream.Open(ctx, upstream.Config{Endpoints: []string{endpoint}, PollInterval: idle, Logger: discardLogger()})
	if err == nil {
		up.Close()
		t.Error("a Backend opened on an endpoint that redirects every request elsewhere")
	} else if !strings.Contains(err.Error(), "307") {
		t.Errorf("Open on an endpoint that redirects: %v, want the 307 named", err)
	}

	dst := memstore.New()
	f, err := upstream.NewFollower(dst, upstream.FollowConfig{Endpoint: endpoint, PollInterval: 10 * time.Millisecond, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stop()
	f.Run(fctx)
	if _, err := dst.BlockByNumber(context.Background(), 0); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the follower copied from the host redirected to: %v", err)
	}
	if n := other.Calls("eth_chainId") + other.Calls("eth_getBlockByNumber"); n > 0 {
		t.Errorf("%d requests reached the host redirected to", n)
	}
	if n := referers.Load(); n > 0 {
		t.Errorf("%d requests sent the endpoint's URL to the host redirected to", n)
	}
}

// TestOpenRefusesPollInterval gives Open poll intervals that cannot be
// meant: negative, or a nanosecond (PollInterval: 1, for a second).
func TestOpenRefusesPollInterval(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 1, time.Millisecond - 1} {
		_, err := upstream.Open(context.Background(), upstream.Config{Endpoints: []string{"http://127.0.0.1:1"}, PollInterval: d})
		if err == nil || !strings.Contains(err.Error(), "PollInterval "+d.String()) {
			t.Errorf("Open with PollInterval %v: %v, want an error naming it", d, err)
		}
	}
}

// TestEndpointChainIDFails has a second endpoint whose eth_chainId fails
// serve another chain, higher than the first's: it is not taken for the
// Backend's chain until it tells its id, so that latest stays the first
// endpoint's.
func TestEndpointChainIDFails(t *testing.T) {
	good := chaintest.New(chaintest.Config{Seed: 5})
	good.AddBlocks(10, nil)
	goodNode := newFakeNode(t, good.Store())
	other := chaintest.New(chaintest.Config{Seed: 99})
	other.AddBlocks(30, nil) // no transactions, which would tell their chain
	noID := memstore.New()   // its blocks without a chain id: eth_chainId fails
	for n := uint64(0); n <= 30; n++ {
		if err := noID.AddBlock(other.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	otherNode := newFakeNode(t, noID)
	if _, body := postJSON(t, otherNode.URL, `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`); !strings.Contains(string(body), `"error"`) {
		t.Fatalf("the second endpoint answers eth_chainId: %s", body)
	}

	up := openUp(t, upstream.Config{PollInterval: 10 * time.Millisecond}, goodNode.URL, otherNode.URL)
	time.Sleep(time.Second) // past the wait after its failure at Open, many polls
	got, err := up.BlockByNumber(context.Background(), backend.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != good.Head().Hash {
		t.Errorf("latest is block %d %s of the other chain, want block %d %s", got.Number, got.Hash, good.Head().Number, good.Head().Hash)
	}
}

// TestUncheckedChainIsNotUsed has the preferred endpoint, which serves
// another chain, down when Open learns the chain id, so that the second
// sets it. Back and past its backoff, but with its chain id not yet asked
// by a poll, it is not read from: its blocks, without transactions, would
// not tell their chain.
func TestUncheckedChainIsNotUsed(t *testing.T) {
	mine := chaintest.New(chaintest.Config{Seed: 1, ChainID: 1337})
	mine.AddBlocks(10, nil)
	other := chaintest.New(chaintest.Config{Seed: 77, ChainID: 1338})
	other.AddBlocks(10, nil) // no transactions, which would tell their chain
	good, wrong := newFakeNode(t, mine.Store()), newFakeNode(t, other.Store())
	wrong.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	up := openUp(t, upstream.Config{PollInterval: idle, ReorgDepth: 2}, wrong.URL, good.URL)
	if id, _ := up.ChainID(context.Background()); id != 1337 {
		t.Fatalf("chain id %d, want 1337", id)
	}
	wrong.SetFault(nil)
	time.Sleep(600 * time.Millisecond) // past the first backoff (500 ms)

	got, err := up.BlockByNumber(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := mine.Block(3); got.Hash != want.Hash {
		t.Errorf("block 3 is %s, the block of the endpoint on chain 1338 (%s); want this chain's %s",
			got.Hash, other.Block(3).Hash, want.Hash)
	}
}

// TestTrackedHashNotDenied has the preferred endpoint fail and a second,
// two blocks behind, answer null for the parent of the latest block, which
// a client asks for next: the tracker saw it, so it is not said not to
// exist, by hash as by number, nor are its uncles.
func TestTrackedHashNotDenied(t *testing.T) {
	store := faultChain(t)
	head := storeBlock(t, store, backend.Latest)
	parent := storeBlock(t, store, backend.BlockNumber(head.Number-1))
	primary, lagging := newFakeNode(t, store), newFakeNode(t, prefixStore(t, store, head.Number-2))
	up := openUp(t, upstream.Config{PollInterval: idle, MaxLag: 3}, primary.URL, lagging.URL)
	ctx := context.Background()
	latest, err := up.BlockByNumber(ctx, backend.Latest)
	if err != nil || latest.Hash != head.Hash {
		t.Fatalf("latest: %v", err)
	}
	primary.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	got, err := up.BlockByHash(ctx, latest.ParentHash)
	if errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("block %d %s, the parent of the latest block the Backend served and in the tracker's view, answered not found (a client gets null): %v",
			parent.Number, parent.Hash, err)
	}
	if err == nil && got.Hash != parent.Hash {
		t.Fatalf("wrong block %s", got.Hash)
	}
	if _, err := up.UncleByBlockHashAndIndex(ctx, latest.ParentHash, 0); errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the uncle 0 of block %d, in the tracker's view, answered not found: %v", parent.Number, err)
	}
}

// minorityFork returns a chain a of 30 blocks, a store of it with block 20
// finalized, and a store of branch b, which left a at block 5 and is 31
// blocks long: a node stuck on a minority fork.
func minorityFork(t *testing.T) (*chaintest.Builder, *memstore.Store, *memstore.Store) {
	t.Helper()
	return minorityForkAt(t, 5)
}

// minorityForkAt is minorityFork with branch b leaving a at block at.
func minorityForkAt(t *testing.T, at uint64) (*chaintest.Builder, *memstore.Store, *memstore.Store) {
	t.Helper()
	a := chaintest.New(chaintest.Config{Seed: 41})
	a.AddBlocks(30, chaintest.Txs(1))
	fork := a.Fork(at)
	fork.AddBlocks(31-int(at), func(i int, g *chaintest.BlockGen) {
		g.SetExtraData([]byte("minority"))
		chaintest.Txs(1)(i, g)
	})
	finalized := copyStore(t, a.Store(), nil)
	if err := finalized.SetFinalized(20); err != nil {
		t.Fatal(err)
	}
	return a, finalized, copyBlocks(t, a.Store(), fork.Head())
}

// TestFinalNumberFromTheFinalizedChain has the tracker's endpoint
// finalize block 20 of branch a, and a second endpoint, within MaxLag,
// follow branch b, which left a at block 5 (a node stuck on a minority
// fork). While the first fails, block 10, final, is not read from the
// second, and once the first is back it is branch a's.
func TestFinalNumberFromTheFinalizedChain(t *testing.T) {
	_, storeA, storeB := minorityFork(t)
	want := storeBlock(t, storeA, 10)
	if other := storeBlock(t, storeB, 10); other.Hash == want.Hash {
		t.Fatal("the branches share block 10")
	}
	good, forked := newFakeNode(t, storeA), newFakeNode(t, storeB)
	up := openUp(t, upstream.Config{PollInterval: idle}, good.URL, forked.URL)
	ctx := context.Background()
	if f, err := up.BlockByNumber(ctx, backend.Finalized); err != nil || f.Number != 20 {
		t.Fatalf("finalized: %v", err)
	}
	good.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	first, err := up.BlockByNumber(ctx, 10)
	good.SetFault(nil)
	if err == nil && first.Hash != want.Hash {
		t.Errorf("while the tracker's endpoint failed, final block 10 was served from the minority fork: %s", first.Hash)
	}
	got, err := up.BlockByNumber(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != want.Hash {
		t.Errorf("after the tracker's endpoint is back, final block 10 is %s (extraData %q), the other fork's; want %s on the finalized chain",
			got.Hash, got.ExtraData, want.Hash)
	}
}

// TestViewKeepsFinality has the tracker's endpoint finalize block 20 of
// branch a, and a second endpoint, within MaxLag, follow branch b, which
// left a at block 5. While the first fails its polls, the second's chain,
// which does not hold block 20, never makes the view: latest stays branch
// a's head until it goes stale, and block 10 stays a's.
func TestViewKeepsFinality(t *testing.T) {
	a, storeA, storeB := minorityFork(t)
	good, forked := newFakeNode(t, storeA), newFakeNode(t, storeB)
	up := openUp(t, upstream.Config{PollInterval: 20 * time.Millisecond, Timeout: 200 * time.Millisecond}, good.URL, forked.URL)
	ctx := context.Background()
	head := storeBlock(t, storeA, backend.Latest)
	if got, err := up.BlockByNumber(ctx, backend.Latest); err != nil || got.Hash != head.Hash {
		t.Fatalf("latest: %v", err)
	}
	good.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if got, err := up.BlockByNumber(ctx, backend.Latest); err == nil && got.Hash != head.Hash {
			t.Fatalf("latest is block %d (extraData %q), of the branch that left finalized block 20", got.Number, got.ExtraData)
		}
		if got, err := up.BlockByNumber(ctx, 10); err == nil && got.Hash != a.Block(10).Hash {
			t.Fatalf("final block 10 is %s (extraData %q), the other branch's", got.Hash, got.ExtraData)
		}
	}
}

// TestTagsOnTheChainOfTheHead has an endpoint answer safe or finalized
// with block 20 of a branch that left its head's chain at block 5: the
// view is not made from it, so that "finalized" never names a block other
// than the one served as block 20 and as block 21's parent. Alone, the
// endpoint is refused; before an honest one, the honest one makes the
// view.
func TestTagsOnTheChainOfTheHead(t *testing.T) {
	_, storeA, storeB := minorityFork(t)
	want, other := storeBlock(t, storeA, 20), storeBlock(t, storeB, 20)
	honest := newFakeNode(t, storeA)
	ctx := context.Background()
	for tag, number := range map[string]backend.BlockNumber{"finalized": backend.Finalized, "safe": backend.Safe} {
		liar := newFakeNode(t, storeA)
		liar.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
			if method == "eth_getBlockByNumber" && string(params[0]) == `"`+tag+`"` {
				return other.AppendJSON(nil, false)
			}
			return result
		})
		openCtx, cancel := context.WithTimeout(ctx, untilTimeout)
		up, err := upstream.Open(openCtx, upstream.Config{Endpoints: []string{liar.URL}, PollInterval: idle, Logger: discardLogger()})
		cancel()
		if err == nil {
			got, err := up.BlockByNumber(ctx, number)
			up.Close()
			t.Errorf("an endpoint whose %s block is of another branch was taken: %s is %v (%v)", tag, tag, hashOf(got), err)
		} else if !strings.Contains(err.Error(), tag+" block 20") {
			t.Errorf("Open on an endpoint whose %s block is of another branch: %v, want an error naming it", tag, err)
		}

		up = openUp(t, upstream.Config{PollInterval: idle}, liar.URL, honest.URL)
		got, err := up.BlockByNumber(ctx, backend.Finalized)
		if err != nil || got.Hash != want.Hash {
			t.Errorf("finalized, the first endpoint's %s block of another branch: %v (%v), want %s", tag, hashOf(got), err, want.Hash)
		}
		if got, err := up.BlockByNumber(ctx, backend.Safe); err == nil && got.Hash == other.Hash {
			t.Errorf("safe is block 20 of another branch (extraData %q)", got.ExtraData)
		}
	}
}

// TestPendingOnTheHead has the pending block asked of endpoints at
// several heights while block 30 is served as latest, block 20 finalized.
// It is served when built on block 30, on a block 31 (an endpoint a poll
// ahead), or on another block 30 (an endpoint that has just reorganised);
// it is refused when built on block 28 (an endpoint that lags, within
// MaxLag, which is not counted as failing), and not asked of an endpoint
// on a branch that left the chain below the finalized block.
func TestPendingOnTheHead(t *testing.T) {
	b := chaintest.New(chaintest.Config{Seed: 77})
	// storeOf is a store of the branch, whose head is head (nil for b's),
	// with block 20 finalized and the branch's pending block.
	storeOf := func(branch *chaintest.Builder, head *backend.Block) (*memstore.Store, *backend.Block) {
		p := branch.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(1)(0, g) })
		s := copyBlocks(t, b.Store(), head)
		if err := s.SetFinalized(20); err != nil {
			t.Fatal(err)
		}
		if err := s.SetPending(p); err != nil {
			t.Fatal(err)
		}
		return s, p
	}
	b.AddBlocks(28, chaintest.Txs(1))
	at28, _ := storeOf(b, nil)
	b.AddBlocks(2, chaintest.Txs(1))
	head := b.Head()
	at30, onHead := storeOf(b, nil)
	minority := b.Fork(10)
	minority.AddBlocks(21, func(i int, g *chaintest.BlockGen) { g.SetExtraData([]byte("minority")) })
	atMinority, _ := storeOf(minority, minority.Head())
	reorganised := b.Fork(29)
	reorganised.AddBlocks(1, func(i int, g *chaintest.BlockGen) { g.SetExtraData([]byte("reorganised")) })
	atReorganised, onReorganised := storeOf(reorganised, reorganised.Head())
	b.AddBlocks(1, chaintest.Txs(1))
	at31, ahead := storeOf(b, nil)

	preferred, lagging, forked := newFakeNode(t, at30), newFakeNode(t, at28), newFakeNode(t, atMinority)
	var forkedPending atomic.Bool
	forked.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(requestBody(r), `"pending"`) {
			forkedPending.Store(true)
		}
		return false
	})
	up := openUp(t, upstream.Config{PollInterval: idle, MaxLag: 3}, preferred.URL, lagging.URL, forked.URL)
	ctx := context.Background()
	if got, err := up.BlockByNumber(ctx, backend.Latest); err != nil || got.Hash != head.Hash {
		t.Fatalf("latest: %v (%v), want block 30", hashOf(got), err)
	}
	check := func(what string, want *backend.Block) {
		t.Helper()
		got, err := up.BlockByNumber(ctx, backend.Pending)
		if want == nil {
			checkRefused(t, "the pending block "+what, got, err)
			return
		}
		if err != nil || got.Number != want.Number || got.ParentHash != want.ParentHash {
			t.Errorf("the pending block %s: %v, want block %d on %s", what, err, want.Number, want.ParentHash)
		}
	}
	check("on the head", onHead)

	preferred.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(requestBody(r), `"pending"`) {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	check("of an endpoint 2 blocks behind, or on a branch that left the finalized block", nil)
	if _, err := up.BlockByNumber(ctx, backend.Pending); err == nil || !strings.Contains(err.Error(), "not built on the head") {
		t.Errorf("the pending block of an endpoint 2 blocks behind: %v, want an error saying it is not built on the head", err)
	}
	if !up.Usable(1) {
		t.Error("the endpoint 2 blocks behind, within MaxLag, is no longer used after its pending block was not taken")
	}
	if forkedPending.Load() {
		t.Error("the endpoint on a branch that left the finalized block was asked for its pending block")
	}
	preferred.SetFault(nil)

	preferred.SetStore(at31)
	check("of an endpoint a block ahead", ahead)
	preferred.SetStore(atReorganised)
	check("of an endpoint that has just reorganised to another block 30", onReorganised)
}

// TestAboveTheHeadOnItsChain asks for blocks above the head of the last
// poll, block 30 of branch a, block 20 finalized. While the tracker's
// endpoint fails, block 31 is not asked of a second endpoint on branch b,
// which left a at block 5, below the finalized block; once the first is
// back and two blocks ahead of the poll, its blocks 31 and 32 are served.
func TestAboveTheHeadOnItsChain(t *testing.T) {
	a, storeA, storeB := minorityFork(t)
	good, forked := newFakeNode(t, storeA), newFakeNode(t, storeB)
	var forkedAsked atomic.Bool
	forked.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(requestBody(r), `"0x1f"`) {
			forkedAsked.Store(true)
		}
		return false
	})
	up := openUp(t, upstream.Config{PollInterval: idle}, good.URL, forked.URL)
	ctx := context.Background()
	good.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	got, err := up.BlockByNumber(ctx, 31)
	checkRefused(t, "block 31, above the head, while only an endpoint on another branch answers", got, err)
	if forkedAsked.Load() {
		t.Error("block 31, above the head, was asked of the endpoint on a branch that left the finalized block")
	}
	good.SetFault(nil)

	ahead := a.AddBlocks(2, chaintest.Txs(1))
	good.SetStore(copyStore(t, a.Store(), nil))
	for _, want := range ahead {
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(want.Number))
		if err != nil || got.Hash != want.Hash {
			t.Errorf("block %d of the tracker's endpoint, a poll ahead: %s (%v), want %s", want.Number, hashOf(got), err, want.Hash)
		}
	}
}

// TestViewFromEndpointWithoutFinality has the tracker's endpoint finalize
// block 20 and a second serve the same chain without a finalized block (a
// node that does not serve the tag). While the first fails, the second
// makes the view, which keeps block 20 finalized: the tags are served on,
// rather than going stale.
func TestViewFromEndpointWithoutFinality(t *testing.T) {
	a := chaintest.New(chaintest.Config{Seed: 43})
	a.AddBlocks(30, chaintest.Txs(1))
	withFinality := copyStore(t, a.Store(), nil)
	if err := withFinality.SetFinalized(20); err != nil {
		t.Fatal(err)
	}
	good, plain := newFakeNode(t, withFinality), newFakeNode(t, copyStore(t, a.Store(), nil))
	const poll, timeout = 20 * time.Millisecond, time.Second
	up := openUp(t, upstream.Config{PollInterval: poll, Timeout: timeout}, good.URL, plain.URL)
	ctx := context.Background()
	good.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	time.Sleep(2 * (2*poll + timeout)) // past the staleness of a view the first made
	if got, err := up.BlockByNumber(ctx, backend.Latest); err != nil || got.Number != 30 {
		t.Errorf("latest: %v, want block 30 from the endpoint without finality", err)
	}
	if got, err := up.BlockByNumber(ctx, backend.Finalized); err != nil || got.Number != 20 {
		t.Errorf("finalized: %v, want block 20, finalized before", err)
	}
}

// TestViewNotFromFarBehind has the preferred endpoint at block 30 and a
// second still syncing at block 10, further behind than MaxLag. While the
// first misses polls, and the view is fresh, the second does not make the
// view: latest does not go back, and block 25, served before, is not
// denied on its word.
func TestViewNotFromFarBehind(t *testing.T) {
	a := chaintest.New(chaintest.Config{Seed: 42})
	a.AddBlocks(30, chaintest.Txs(1))
	good, lagging := newFakeNode(t, a.Store()), newFakeNode(t, prefixStore(t, a.Store(), 10))
	const poll, timeout = 20 * time.Millisecond, 500 * time.Millisecond
	up := openUp(t, upstream.Config{PollInterval: poll, Timeout: timeout, MaxLag: 3}, good.URL, lagging.URL)
	ctx := context.Background()
	if got, err := up.BlockByNumber(ctx, backend.Latest); err != nil || got.Number != 30 {
		t.Fatalf("latest: %v", err)
	}
	good.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	time.Sleep(10 * poll) // polls the first misses, within 2 polls and a timeout
	if got, err := up.BlockByNumber(ctx, backend.Latest); err == nil && got.Number != 30 {
		t.Errorf("latest went back from 30 to %d, the head of an endpoint 20 blocks behind", got.Number)
	}
	if _, err := up.BlockByNumber(ctx, 25); errors.Is(err, backend.ErrNotFound) {
		t.Error("block 25, below the head seen, is denied on the word of an endpoint 20 blocks behind")
	}
}

// TestFinalNumberNullFromOneEndpoint has the preferred endpoint answer
// null for final block 10 (a node that pruned it): the next endpoint is
// asked, and serves it.
func TestFinalNumberNullFromOneEndpoint(t *testing.T) {
	b := chaintest.New(chaintest.Config{Seed: 41})
	b.AddBlocks(30, chaintest.Txs(1))
	store := b.Store()
	if err := store.SetFinalized(20); err != nil {
		t.Fatal(err)
	}
	primary, secondary := newFakeNode(t, store), newFakeNode(t, store)
	primary.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByNumber" && len(params) == 2 && string(params[0]) == `"0xa"` {
			return json.RawMessage("null")
		}
		return result
	})
	up := openUp(t, upstream.Config{PollInterval: idle}, primary.URL, secondary.URL)
	if got, err := up.BlockByNumber(context.Background(), 10); err != nil || got.Hash != b.Block(10).Hash {
		t.Fatalf("final block 10, which the first endpoint denies: %v", err)
	}
}

// TestDeepNumberNullFromOneEndpoint is TestFinalNumberNullFromOneEndpoint
// on a chain without finality: block 10 is below the tracker's window
// (ReorgDepth 8 under a head of 30), so it exists, and the first
// endpoint's null (a node that pruned it) is not believed: the next is
// asked, and serves it. Above the window, a null may be the chain's own.
func TestDeepNumberNullFromOneEndpoint(t *testing.T) {
	b := chaintest.New(chaintest.Config{Seed: 41})
	b.AddBlocks(30, chaintest.Txs(1))
	store := b.Store()
	primary, secondary := newFakeNode(t, store), newFakeNode(t, store)
	primary.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByNumber" && len(params) == 2 && string(params[0]) == `"0xa"` {
			return json.RawMessage("null")
		}
		return result
	})
	up := openUp(t, upstream.Config{PollInterval: idle, ReorgDepth: 8}, primary.URL, secondary.URL)
	if got, err := up.BlockByNumber(context.Background(), 10); err != nil || got.Hash != b.Block(10).Hash {
		t.Fatalf("block 10, below the window, which the first endpoint denies: %v", err)
	}
}

// TestNewlyFinalServedFromCache reads blocks 11 to 40 while the tracker
// follows them (finalized 10), then moves finality to 30 and takes the
// endpoint down: the blocks finalized since, cached, are served by number
// from the cache, as any final block cached is.
func TestNewlyFinalServedFromCache(t *testing.T) {
	b := chaintest.New(chaintest.Config{Seed: 8})
	b.AddBlocks(40, chaintest.Txs(1))
	store := b.Store()
	if err := store.SetFinalized(10); err != nil {
		t.Fatal(err)
	}
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: 5 * time.Millisecond, Timeout: 200 * time.Millisecond}, node.URL)
	ctx := context.Background()
	for n := backend.BlockNumber(11); n <= 40; n++ {
		if _, err := up.BlockByNumber(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.SetFinalized(30); err != nil {
		t.Fatal(err)
	}
	eventually(t, "finalized 30", func() bool {
		got, err := up.BlockByNumber(ctx, backend.Finalized)
		return err == nil && got.Number == 30
	})
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	var failed []backend.BlockNumber
	for n := backend.BlockNumber(11); n <= 30; n++ {
		got, err := up.BlockByNumber(ctx, n)
		if err != nil {
			failed = append(failed, n)
			continue
		}
		if got.Hash != b.Block(uint64(n)).Hash {
			t.Fatalf("block %d: wrong block", n)
		}
	}
	if len(failed) > 0 {
		t.Errorf("cached blocks finalized since the last poll not answered by number from the cache while the endpoint is down: %v", failed)
	}
}

// TestFinalNumberFromOtherBranch has the one endpoint (an address
// whose load balancer sends requests to several nodes) give block 20 as
// finalized at the poll; the request for block 10 (final, not yet cached)
// reaches a node stuck on a branch that left the chain at block 5. Its
// block 10 must not be cached as the chain's final block 10: once the
// address answers from the finalized chain again, block 10 is that
// chain's.
func TestFinalNumberFromOtherBranch(t *testing.T) {
	a, storeA, storeB := minorityFork(t)
	node := newFakeNode(t, storeA)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	ctx := context.Background()

	node.SetStore(storeB)
	first, err := up.BlockByNumber(ctx, 10)
	if err == nil && first.Hash != a.Block(10).Hash {
		t.Logf("while the address answered from the minority branch, final block 10 was served as %s (extraData %q)", first.Hash, first.ExtraData)
	}
	node.SetStore(storeA)
	got, err := up.BlockByNumber(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != a.Block(10).Hash {
		t.Fatalf("with the address back on the finalized chain, final block 10 is still %s (extraData %q), the minority branch's; want %s",
			got.Hash, got.ExtraData, a.Block(10).Hash)
	}
}

// TestFinalNumberWithoutTheFinalizedBlock has an endpoint answer null for
// the finalized block's number in the request that reads a final block by
// number: it is not known to be on the finalized chain (a node of a load
// balancer that has not got there, or is on a branch), and its block,
// which would be cached for that number for good, is refused. An honest
// second endpoint serves it.
func TestFinalNumberWithoutTheFinalizedBlock(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	ctx := context.Background()
	fin := storeBlock(t, store, backend.Finalized)
	target := storeBlock(t, store, backend.BlockNumber(tamperFinalBlock))
	finNumber := quoted(hexutil.EncodeUint64(fin.Number))
	nullFinalized := func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByNumber" && len(params) > 0 && bytes.Equal(params[0], finNumber) {
			return json.RawMessage("null")
		}
		return result
	}

	liar := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, liar.URL)
	liar.SetRewrite(nullFinalized)
	got, err := up.BlockByNumber(ctx, backend.BlockNumber(target.Number))
	checkRefused(t, "a final block from an endpoint without the finalized block", got, err)

	liar2, honest := newFakeNode(t, store), newFakeNode(t, store)
	up2 := openUp(t, upstream.Config{PollInterval: idle}, liar2.URL, honest.URL)
	liar2.SetRewrite(nullFinalized)
	got, err = up2.BlockByNumber(ctx, backend.BlockNumber(target.Number))
	if err != nil {
		t.Fatal(err)
	}
	if d := diffAnswer(got, target); d != "" {
		t.Fatal(d)
	}
	if st := up2.Status(); st[0].Healthy || !st[1].Healthy {
		t.Errorf("status %+v: want the first endpoint unhealthy, the second healthy", st)
	}
}

// withoutHashes drops a block object's hash and each of its transaction
// objects' blockHash.
func withoutHashes(block json.RawMessage) json.RawMessage {
	block = dropMember(block, "hash")
	var txs []json.RawMessage
	if json.Unmarshal(member(block, "transactions"), &txs) != nil {
		return block
	}
	for i, tx := range txs {
		if len(tx) > 0 && tx[0] == '{' {
			txs[i] = dropMember(tx, "blockHash")
		}
	}
	list, _ := json.Marshal(txs)
	return setMember(block, "transactions", list)
}

// TestAboveTheHeadNotCachedByNumber reads block 41 while the tracker's
// head is 40 (the endpoint a poll ahead, its polls failing), from a branch
// that the chain then leaves: the endpoint reorganises to another block
// 41 and finalizes past it. Block 41 is then the new branch's, not the
// one read above the head, kept as if it had been final.
func TestAboveTheHeadNotCachedByNumber(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 12})
	b.AddBlocks(40, chaintest.Txs(1))
	x, y := b.Fork(40), b.Fork(40)
	x.AddBlocks(2, func(i int, g *chaintest.BlockGen) {
		g.SetExtraData([]byte("x"))
		chaintest.Txs(1)(i, g)
	})
	y.AddBlocks(5, func(i int, g *chaintest.BlockGen) {
		g.SetExtraData([]byte("y"))
		chaintest.Txs(2)(i, g)
	})
	storeA := copyStore(t, b.Store(), nil)
	storeX := copyBlocks(t, b.Store(), x.Head())
	storeY := copyBlocks(t, b.Store(), y.Head())
	for _, f := range []struct {
		s *memstore.Store
		n uint64
	}{{storeA, 10}, {storeX, 10}, {storeY, 43}} {
		if err := f.s.SetFinalized(f.n); err != nil {
			t.Fatal(err)
		}
	}
	node := newFakeNode(t, storeA)
	up := openUp(t, upstream.Config{PollInterval: 5 * time.Millisecond, Timeout: 200 * time.Millisecond}, node.URL)
	ctx := context.Background()

	// The polls fail from now on (one under way may still answer, from
	// storeA), and the endpoint moves on to branch x.
	var refused atomic.Int64
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(requestBody(r), `"latest"`) {
			refused.Add(1)
			http.Error(w, "busy", http.StatusInternalServerError)
			return true
		}
		return false
	})
	eventually(t, "two polls refused", func() bool { return refused.Load() >= 2 })
	node.SetStore(storeX)
	got, err := up.BlockByNumber(ctx, 41)
	if err != nil {
		t.Fatalf("block 41, above the head: %v", err)
	}
	if got.Hash != x.Block(41).Hash {
		t.Fatalf("block 41, above the head: %s, want branch x's %s", got.Hash, x.Block(41).Hash)
	}

	// The endpoint reorganises to branch y and finalizes its block 43.
	node.SetStore(storeY)
	node.SetFault(nil)
	eventually(t, "finalized 43", func() bool {
		f, err := up.BlockByNumber(ctx, backend.Finalized)
		return err == nil && f.Number == 43
	})
	got, err = up.BlockByNumber(ctx, 41)
	if err != nil {
		t.Fatal(err)
	}
	if want := y.Block(41); got.Hash != want.Hash {
		t.Fatalf("final block 41 is %s (extraData %q), the block read above the head before the reorganisation; want %s", got.Hash, got.ExtraData, want.Hash)
	}
}

// TestStatusHealthyAtMaxLag has endpoints MaxLag and MaxLag+1 blocks
// behind the best, MaxLag left at its default, 3: the first is healthy
// (it is used), the second is not.
func TestStatusHealthyAtMaxLag(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 13})
	b.AddBlocks(20, chaintest.Txs(1))
	best := newFakeNode(t, b.Store())
	atMax := newFakeNode(t, prefixStore(t, b.Store(), 17))
	past := newFakeNode(t, prefixStore(t, b.Store(), 16))
	up := openUp(t, upstream.Config{PollInterval: idle}, best.URL, atMax.URL, past.URL)
	st := up.Status()
	if !st[0].Healthy || st[0].Lag != 0 {
		t.Errorf("the best endpoint: %+v, want healthy", st[0])
	}
	if !st[1].Healthy || st[1].Lag != 3 {
		t.Errorf("an endpoint MaxLag behind: %+v, want healthy, lag 3", st[1])
	}
	if st[2].Healthy || st[2].Lag != 4 {
		t.Errorf("an endpoint MaxLag+1 behind: %+v, want unhealthy, lag 4", st[2])
	}
}

// TestCloseDuringPollIsNoFailure closes the Backend while a poll waits on
// the endpoint: the poll ends, and that is not the endpoint's failure. No
// warning is logged of it.
func TestCloseDuringPollIsNoFailure(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 14})
	b.AddBlocks(5, chaintest.Txs(1))
	node := newFakeNode(t, b.Store())
	logs := &logSink{}
	up := openUp(t, upstream.Config{PollInterval: 5 * time.Millisecond, Timeout: 5 * time.Second, Logger: slog.New(logs)}, node.URL)
	var hanging atomic.Int64
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if asksFor(r, "eth_getBlockByNumber") && strings.Contains(requestBody(r), `"latest"`) {
			hanging.Add(1)
			<-r.Context().Done()
			return true
		}
		return false
	})
	eventually(t, "a poll waiting on the endpoint", func() bool { return hanging.Load() > 0 })
	up.Close()
	if recs := logs.matching(slog.LevelWarn, "endpoint failed"); len(recs) > 0 {
		t.Errorf("closing the Backend during a poll logged the endpoint as failing: %v", recs)
	}
}

// TestMalformedAnswerIsNoNull has an endpoint answer a block by hash with
// what JSON-RPC does not allow: an answer with neither result nor error,
// one under an id that was not asked, no answer at all. Each is the
// endpoint's failure, never "not found" (a client would get null for a
// block that exists), and never takes the process down; an honest second
// endpoint serves the block.
func TestMalformedAnswerIsNoNull(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	ctx := context.Background()
	target := storeBlock(t, store, backend.BlockNumber(tamperFinalBlock))
	for _, tc := range []struct{ name, answer string }{
		{"neither result nor error", `{"jsonrpc":"2.0","id":0}`},
		{"an id past the calls", `{"jsonrpc":"2.0","id":1,"result":null}`},
		{"no answer in a batch", `[]`},
		{"the one call answered twice", `[{"jsonrpc":"2.0","id":0,"result":null},{"jsonrpc":"2.0","id":0,"result":null}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fault := func(w http.ResponseWriter, r *http.Request) bool {
				if !asksFor(r, "eth_getBlockByHash") {
					return false
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.answer))
				return true
			}
			node := newFakeNode(t, store)
			up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
			node.SetFault(fault)
			got, err := up.BlockByHash(ctx, target.Hash)
			checkRefused(t, tc.name, got, err)

			bad, honest := newFakeNode(t, store), newFakeNode(t, store)
			up2 := openUp(t, upstream.Config{PollInterval: idle}, bad.URL, honest.URL)
			bad.SetFault(fault)
			got, err = up2.BlockByHash(ctx, target.Hash)
			if err != nil {
				t.Fatalf("with an honest second endpoint: %v", err)
			}
			if d := diffAnswer(got, target); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// TestFinalReadAfterByHashServedFromCache reads a final block by hash
// first, then by number: the block, cached by hash, is then known by its
// number too, and answered from the cache while the endpoint is down.
func TestFinalReadAfterByHashServedFromCache(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	ctx := context.Background()
	target := storeBlock(t, store, backend.BlockNumber(tamperFinalBlock))
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	if _, err := up.BlockByHash(ctx, target.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := up.BlockByNumber(ctx, backend.BlockNumber(target.Number)); err != nil {
		t.Fatal(err)
	}
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	})
	got, err := up.BlockByNumber(ctx, backend.BlockNumber(target.Number))
	if err != nil {
		t.Fatalf("final block %d, cached, while the endpoint is down: %v", target.Number, err)
	}
	if d := diffAnswer(got, target); d != "" {
		t.Fatal(d)
	}
}
