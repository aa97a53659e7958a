package upstream_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// faultChain is the chain of the fault tests: 30 blocks of two
// transactions (of every kind in turn), with uncles before the merge; none is
// finalized, so that the tracker follows every number by hash.
func faultChain(t testing.TB) *memstore.Store {
	t.Helper()
	b := chaintest.New(chaintest.Config{Seed: 21, London: 4, Merge: 10, Shanghai: 12, Cancun: 14, Prague: 16})
	for range 30 {
		b.AddBlock(func(g *chaintest.BlockGen) {
			chaintest.Txs(2)(0, g)
			if n := g.Number(); n >= 2 && n < 10 && n%2 == 0 {
				g.AddUncle()
			}
		})
	}
	return b.Store()
}

// blockCalls counts the block requests a node answered.
func blockCalls(n *fakeNode) int64 {
	return n.Calls("eth_getBlockByHash") + n.Calls("eth_getBlockByNumber")
}

// readAll asks for every block of store by number and checks the answers.
func readAll(t *testing.T, up *upstream.Backend, store *memstore.Store, deadline time.Duration) {
	t.Helper()
	head := storeBlock(t, store, backend.Latest)
	for n := uint64(0); n <= head.Number; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(n))
		cancel()
		if err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		if d := diffAnswer(got, storeBlock(t, store, backend.BlockNumber(n))); d != "" {
			t.Fatalf("block %d: %s", n, d)
		}
	}
}

// statusAfterAsking asks for a block no endpoint has (and no cache holds)
// and returns the Status right after: a failing primary was asked, or is
// still waiting out its last failure, and is reported either way however
// long the reads before took.
func statusAfterAsking(t *testing.T, up *upstream.Backend) []upstream.EndpointStatus {
	t.Helper()
	if _, err := up.BlockByHash(context.Background(), backend.Hash{0x99}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("a block no endpoint has: %v", err)
	}
	return up.Status()
}

// TestPollFailsOver gives the tracker a primary that answers its head but
// whose chain below does not verify: the head is taken from the
// secondary, at Open and at every poll, rather than not at all.
func TestPollFailsOver(t *testing.T) {
	t.Parallel()
	store := faultChain(t)
	head := storeBlock(t, store, backend.Latest)
	bad := storeBlock(t, store, backend.BlockNumber(head.Number-3))
	primary, secondary := newFakeNode(t, store), newFakeNode(t, store)
	primary.SetRewrite(blockRewrite(bad.Hash, func(b json.RawMessage) json.RawMessage {
		return setMember(b, "gasUsed", plusOne(member(b, "gasUsed")))
	}))
	up := openUp(t, upstream.Config{PollInterval: 10 * time.Millisecond}, primary.URL, secondary.URL)
	got, err := up.BlockByNumber(context.Background(), backend.Latest)
	if err != nil || got.Hash != head.Hash {
		t.Fatalf("latest: %v", err)
	}
	got, err = up.BlockByNumber(context.Background(), backend.BlockNumber(bad.Number))
	if err != nil || diffAnswer(got, bad) != "" {
		t.Fatalf("the block the primary tampers with: %v", err)
	}
}

// TestTruncatedAnswer cuts the primary's answers to block requests in the
// middle: the Backend fails over, reports the primary, and serves the
// blocks; alone, the primary's blocks are refused until it answers whole.
func TestTruncatedAnswer(t *testing.T) {
	t.Parallel()
	truncate := func(w http.ResponseWriter, r *http.Request) bool {
		if !asksFor(r, "eth_getBlockByHash") && !asksFor(r, "eth_getUncleByBlockHashAndIndex") {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":0,"result":{"baseFeePerGas":"0x7","difficulty":"0x0","extraData":"0x","gasLimit":"0x1c9c380","gasUsed":"0x5`))
		return true
	}
	checkFault(t, truncate, "malformed")
}

// TestServerError answers the primary's block requests with HTTP 500.
func TestServerError(t *testing.T) {
	t.Parallel()
	checkFault(t, func(w http.ResponseWriter, r *http.Request) bool {
		if !asksFor(r, "eth_getBlockByHash") {
			return false
		}
		http.Error(w, "internal error", http.StatusInternalServerError)
		return true
	}, `HTTP 500: "internal error"`)
}

// TestRPCError answers the primary's block requests with a JSON-RPC error,
// as a provider whose node failed does.
func TestRPCError(t *testing.T) {
	t.Parallel()
	checkFault(t, func(w http.ResponseWriter, r *http.Request) bool {
		if !asksFor(r, "eth_getBlockByHash") {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"header not found"}}`))
		return true
	}, "header not found")
}

// checkFault runs fault on a primary with an honest secondary, then on
// the primary alone.
func checkFault(t *testing.T, fault func(w http.ResponseWriter, r *http.Request) bool, lastError string) {
	store := faultChain(t)
	t.Run("failover", func(t *testing.T) {
		primary, secondary := newFakeNode(t, store), newFakeNode(t, store)
		up := openUp(t, upstream.Config{PollInterval: idle}, primary.URL, secondary.URL)
		primary.SetFault(fault)
		readAll(t, up, store, untilTimeout)
		st := statusAfterAsking(t, up)
		if st[0].Healthy || !strings.Contains(st[0].LastError, lastError) {
			t.Errorf("the failing primary's status: %+v; want unhealthy, with %q", st[0], lastError)
		}
		if !st[1].Healthy {
			t.Errorf("the secondary's status: %+v", st[1])
		}
	})
	t.Run("alone", func(t *testing.T) {
		node := newFakeNode(t, store)
		up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
		node.SetFault(fault)
		head := storeBlock(t, store, backend.Latest)
		for _, n := range []backend.BlockNumber{1, backend.BlockNumber(head.Number), backend.Latest} {
			got, err := up.BlockByNumber(context.Background(), n)
			checkRefused(t, "block "+n.String(), got, err)
		}
		node.SetFault(nil)
		readAll(t, up, store, untilTimeout)
	})
}

// TestRateLimited answers the primary's first block request with 429 and
// Retry-After: 1. Nothing reaches the primary for that second, polls
// included, while the secondary serves; then the primary is asked again.
func TestRateLimited(t *testing.T) {
	store := faultChain(t)
	primary, secondary := newFakeNode(t, store), newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: 10 * time.Millisecond}, primary.URL, secondary.URL)

	var limited atomic.Bool
	var mu sync.Mutex
	var limitedAt time.Time
	var early []string // requests that reached the primary within the second
	primary.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if !limitedAt.IsZero() && time.Since(limitedAt) < time.Second-50*time.Millisecond {
			early = append(early, strings.Join(requestMethods(r), ","))
		}
		if asksFor(r, "eth_getBlockByHash") && limited.CompareAndSwap(false, true) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "rate limited", http.StatusTooManyRequests)
			limitedAt = time.Now()
			return true
		}
		return false
	})
	ctx := context.Background()
	head := storeBlock(t, store, backend.Latest)
	got, err := up.BlockByNumber(ctx, backend.BlockNumber(head.Number))
	if err != nil || diffAnswer(got, head) != "" {
		t.Fatalf("the head: %v", err)
	}
	if !limited.Load() {
		t.Fatal("the primary was not asked first")
	}
	st := up.Status()
	if st[0].Healthy || !strings.Contains(st[0].LastError, "429") {
		t.Errorf("the rate-limited primary's status: %+v", st[0])
	}
	// For the second the primary asked for, blocks come from the secondary.
	mu.Lock()
	start := limitedAt
	mu.Unlock()
	before := secondary.Calls("eth_getBlockByHash")
	for n := uint64(1); time.Since(start) < 800*time.Millisecond; n = n%head.Number + 1 {
		got, err := up.BlockByHash(ctx, storeBlock(t, store, backend.BlockNumber(n)).Hash)
		if err != nil || got.Number != n {
			t.Fatalf("block %d while the primary is rate limited: %v", n, err)
		}
	}
	if secondary.Calls("eth_getBlockByHash") == before {
		t.Error("the secondary answered nothing while the primary was rate limited")
	}
	eventually(t, "the Retry-After second to pass", func() bool { return time.Since(start) > time.Second })
	mu.Lock()
	if len(early) > 0 {
		t.Errorf("%d requests reached the primary within its Retry-After second: %q", len(early), early)
	}
	mu.Unlock()
	// Then the primary is used again.
	eventually(t, "the primary to be asked again", func() bool { return askedPrimary(t, up, primary) })
}

// askedPrimary reports whether a request the Backend cannot answer from
// its cache, for a hash no endpoint has, reached the primary.
func askedPrimary(t *testing.T, up *upstream.Backend, primary *fakeNode) bool {
	t.Helper()
	before := primary.Calls("eth_getBlockByHash")
	if _, err := up.BlockByHash(context.Background(), backend.Hash{0x42}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("an unknown hash: %v", err)
	}
	return primary.Calls("eth_getBlockByHash") > before
}

// TestAnswersInFlightBounded has an endpoint answer a block's hash with
// a gzip answer that inflates to 10 MiB (a hostile one's could be 250
// MiB for 250 KB on the wire), under a bound of 8 MiB for the answers of
// a Backend read at once: the read fails as the endpoint's, where it took
// the memory. Answers within the bound are read one after the other, the
// bound given back after each; and an ordinary answer read while another
// holds most of the bound fails without blaming its endpoint.
func TestAnswersInFlightBounded(t *testing.T) {
	defer upstream.SetAnswersInFlight(8 << 20)()
	node := newFakeNode(t, faultChain(t))
	inflated := func(size int) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(`{"jsonrpc":"2.0","id":0,"result":`))
		zw.Write(bytes.Repeat([]byte(" "), size))
		zw.Write([]byte(`null}`))
		zw.Close()
		return b.Bytes()
	}
	var answer atomic.Pointer[[]byte]
	held, release := make(chan struct{}), make(chan struct{})
	var released sync.Once
	defer released.Do(func() { close(release) }) // the server's Close waits for the held answer
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if !asksFor(r, "eth_getBlockByHash") {
			return false
		}
		if strings.Contains(requestBody(r), "0xaaaa") {
			// Most of the bound, then held until released.
			io.WriteString(w, `{"jsonrpc":"2.0","id":0,"result":`+strings.Repeat(" ", 7<<20+1<<19))
			w.(http.Flusher).Flush()
			close(held)
			<-release
			io.WriteString(w, `null}`)
			return true
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "application/json")
		w.Write(*answer.Load())
		return true
	})
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	ctx := context.Background()
	big := inflated(10 << 20)
	answer.Store(&big)
	if _, err := up.BlockByHash(ctx, backend.Hash{0xee}); err == nil || !strings.Contains(err.Error(), "past the 8 MiB") {
		t.Errorf("an answer of 10 MiB under a bound of 8: %v, want it refused naming the bound", err)
	}
	fits := inflated(6 << 20)
	answer.Store(&fits)
	for i := range 3 {
		if _, err := up.BlockByHash(ctx, backend.Hash{0xef, byte(i)}); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("answer %d of 6 MiB, one after the other under a bound of 8: %v, want the endpoint's null", i, err)
		}
	}

	// 7.5 MiB read and held; an answer of 1 MiB beside it.
	small := inflated(1 << 20)
	answer.Store(&small)
	first := make(chan error, 1)
	go func() {
		_, err := up.BlockByHash(ctx, backend.Hash{0xaa, 0xaa})
		first <- err
	}()
	<-held
	// Time for the client to read what was sent, which would otherwise
	// cross the bound beside the next answer, and be refused for it;
	// until then that answer may fit.
	time.Sleep(500 * time.Millisecond)
	for i := 0; ; i++ {
		_, err := up.BlockByHash(ctx, backend.Hash{0xbb, byte(i)})
		if err != nil && strings.Contains(err.Error(), "take their bound") {
			break
		}
		if !errors.Is(err, backend.ErrNotFound) || i == 1000 {
			t.Fatalf("an answer of 1 MiB beside one of 7.5 MiB under a bound of 8: %v, want it refused as the bound's", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := up.Status()[0]; !st.Healthy {
		t.Errorf("the endpoint after an ordinary answer refused for the bound: %+v, want healthy", st)
	}
	released.Do(func() { close(release) })
	if err := <-first; !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the held answer: %v, want the endpoint's null", err)
	}
	if _, err := up.BlockByHash(ctx, backend.Hash{0xbb}); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the answer of 1 MiB once the other is read: %v, want the endpoint's null", err)
	}
}

// TestRetryAfterOutlastsAnEarlierPoll holds a poll of the primary under
// way while a read gets a 429 with Retry-After: 5, then lets the poll be
// answered: the answer to a request sent before the 429 does not end the
// wait it asked for, and nothing more reaches the primary meanwhile. It
// used to make the primary healthy again, and the polls after it went
// straight back to it (TestRateLimited met this by chance on a loaded
// machine).
func TestRetryAfterOutlastsAnEarlierPoll(t *testing.T) {
	store := faultChain(t)
	primary, secondary := newFakeNode(t, store), newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: 10 * time.Millisecond}, primary.URL, secondary.URL)

	held, release := make(chan struct{}), make(chan struct{})
	var holding, limited, afterLimit atomic.Bool
	var early atomic.Int32
	primary.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if afterLimit.Load() {
			early.Add(1)
		}
		byHash := asksFor(r, "eth_getBlockByHash")
		if !byHash && holding.CompareAndSwap(false, true) {
			close(held)
			<-release // a poll, answered after the 429
			return false
		}
		if byHash && limited.CompareAndSwap(false, true) {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "rate limited", http.StatusTooManyRequests)
			return true
		}
		return false
	})
	<-held
	if _, err := up.BlockByHash(context.Background(), storeBlock(t, store, 7).Hash); err != nil {
		t.Fatalf("a block while the primary is rate limited: %v", err)
	}
	if !limited.Load() {
		t.Fatal("the primary was not asked for the block")
	}
	afterLimit.Store(true)
	close(release)
	// Time for the held poll's answer to be taken, and for the polls
	// after it to reach the primary if the wait had ended: well within
	// the 5 s asked for.
	time.Sleep(time.Second)
	if st := up.Status()[0]; st.Healthy || !strings.Contains(st.LastError, "429") {
		t.Errorf("the primary 1 s into its 5 s Retry-After, a poll sent before the 429 answered since: %+v", st)
	}
	if n := early.Load(); n > 0 {
		t.Errorf("%d requests reached the primary within its Retry-After", n)
	}
}

// TestSlowEndpoint makes the primary answer block requests after 5 s, far
// past Config.Timeout (500 ms): a request with a deadline of 4 s gets its
// block from the secondary within it.
func TestSlowEndpoint(t *testing.T) {
	store := faultChain(t)
	primary, secondary := newFakeNode(t, store), newFakeNode(t, store)
	const timeout, deadline = 500 * time.Millisecond, 4 * time.Second
	up := openUp(t, upstream.Config{PollInterval: idle, Timeout: timeout}, primary.URL, secondary.URL)
	primary.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if !asksFor(r, "eth_getBlockByHash") {
			return false // the tracker's polls are answered at once
		}
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return false // then answer, too late
	})
	ctx := context.Background()
	for _, n := range []uint64{29, 28, 3} {
		want := storeBlock(t, store, backend.BlockNumber(n))
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, deadline)
		got, err := up.BlockByNumber(rctx, backend.BlockNumber(n))
		cancel()
		if err != nil || diffAnswer(got, want) != "" {
			t.Fatalf("block %d: %v after %s, with %s per endpoint and %s for the request", n, err, time.Since(start), timeout, deadline)
		}
	}
	if st := statusAfterAsking(t, up); st[0].Healthy || !strings.Contains(st[0].LastError, "deadline") {
		t.Errorf("the slow primary's status: %+v", st[0])
	}

	// Alone, the slow endpoint makes a request fail at its own deadline,
	// not later.
	alone := openUp(t, upstream.Config{PollInterval: idle, Timeout: time.Second}, primary.URL)
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	got, err := alone.BlockByNumber(rctx, 27)
	if elapsed := time.Since(start); got != nil || !errors.Is(err, context.DeadlineExceeded) || elapsed > 1500*time.Millisecond {
		t.Errorf("a slow endpoint alone: %v, %v after %s; want the request's deadline after 200ms", got != nil, err, elapsed)
	}
}

// TestDeadPrimary closes the primary's server: the secondary serves, and
// the primary is reported. A Backend opened with the primary already dead
// starts on the secondary.
func TestDeadPrimary(t *testing.T) {
	t.Parallel()
	store := faultChain(t)
	primary, secondary := newFakeNode(t, store), newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle, Timeout: time.Second}, primary.URL, secondary.URL)
	primary.srv.Close()
	readAll(t, up, store, 5*time.Second)
	if st := statusAfterAsking(t, up); st[0].Healthy || st[0].LastError == "" {
		t.Errorf("the dead primary's status: %+v", st[0])
	}
	// Its wait over, it is worth asking again, but no answer has come
	// from it: it is reported failing still, not healthy until asked.
	// The wait doubles with each failure the reads met, up to 30 s.
	for deadline := time.Now().Add(40 * time.Second); !up.Usable(0); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the dead primary is still waiting after 40 s, where a wait lasts 30 s at most")
		}
	}
	if st := up.Status(); st[0].Healthy || st[0].LastError == "" {
		t.Errorf("the dead primary's status once its wait ended: %+v", st[0])
	}

	late := openUp(t, upstream.Config{PollInterval: idle, Timeout: time.Second}, primary.URL, secondary.URL)
	if id, err := late.ChainID(context.Background()); err != nil || id != chaintest.DefaultChainID {
		t.Fatalf("chain id %d, %v", id, err)
	}
	readAll(t, late, store, 5*time.Second)
}

// TestLagging serves a chain five blocks behind from one endpoint, with
// MaxLag 3: it is reported as lagging and not asked for blocks, whether it
// is the primary or the secondary; within MaxLag it stays healthy.
func TestLagging(t *testing.T) {
	t.Parallel()
	store := faultChain(t)
	head := storeBlock(t, store, backend.Latest)
	behind := prefixStore(t, store, head.Number-5)
	ctx := context.Background()
	t.Run("primary", func(t *testing.T) {
		lagging, current := newFakeNode(t, behind), newFakeNode(t, store)
		up := openUp(t, upstream.Config{PollInterval: idle, MaxLag: 3}, lagging.URL, current.URL)
		st := up.Status()
		if st[0].Healthy || st[0].Lag != 5 || st[0].Head != head.Number-5 || !st[1].Healthy || st[1].Head != head.Number {
			t.Errorf("status %+v", st)
		}
		if got, err := up.BlockByNumber(ctx, backend.Latest); err != nil || got.Hash != head.Hash {
			t.Fatalf("latest is not the current endpoint's head: %v", err)
		}
		before := blockCalls(lagging)
		readAll(t, up, store, untilTimeout)
		if c := blockCalls(lagging) - before; c != 0 {
			t.Errorf("the lagging primary was asked for %d blocks", c)
		}
	})
	t.Run("secondary", func(t *testing.T) {
		current, lagging := newFakeNode(t, store), newFakeNode(t, behind)
		up := openUp(t, upstream.Config{PollInterval: idle, MaxLag: 3}, current.URL, lagging.URL)
		st := up.Status()
		if !st[0].Healthy || st[1].Healthy || st[1].Lag != 5 {
			t.Errorf("status %+v", st)
		}
		before := blockCalls(lagging)
		readAll(t, up, store, untilTimeout)
		if c := blockCalls(lagging) - before; c != 0 {
			t.Errorf("the lagging secondary was asked for %d blocks", c)
		}
	})
	t.Run("within MaxLag", func(t *testing.T) {
		slightly := prefixStore(t, store, head.Number-2)
		a, b := newFakeNode(t, slightly), newFakeNode(t, store)
		up := openUp(t, upstream.Config{PollInterval: idle, MaxLag: 3}, a.URL, b.URL)
		st := up.Status()
		if !st[0].Healthy || st[0].Lag != 2 || !st[1].Healthy {
			t.Errorf("status %+v", st)
		}
	})
	t.Run("catching up", func(t *testing.T) {
		lagging, current := newFakeNode(t, behind), newFakeNode(t, store)
		up := openUp(t, upstream.Config{PollInterval: 10 * time.Millisecond, MaxLag: 3}, lagging.URL, current.URL)
		lagging.SetStore(store)
		eventually(t, "the primary to catch up", func() bool {
			st := up.Status()
			return st[0].Healthy && st[0].Lag == 0 && st[0].Head == head.Number
		})
	})
}

// Shapes of other clients: the same blocks, their members in another
// order and with members go-ethereum does not send.

// erigonShape reverses the order of the members of every object, at every
// depth, and adds none: members in another order than go-ethereum's.
func erigonShape(method string, _ []json.RawMessage, result json.RawMessage) json.RawMessage {
	if !strings.HasPrefix(method, "eth_get") {
		return result
	}
	return reorder(result, func(ms []jsonMember) []jsonMember {
		for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
			ms[i], ms[j] = ms[j], ms[i]
		}
		return ms
	})
}

// nethermindShape moves hash and number first, adds "author" (the miner),
// "sealFields" and "signature" to blocks and uncles, and "data" (the
// input) and "creates" to transactions, and drops a null totalDifficulty.
func nethermindShape(method string, _ []json.RawMessage, result json.RawMessage) json.RawMessage {
	if !strings.HasPrefix(method, "eth_get") {
		return result
	}
	return reorder(result, func(ms []jsonMember) []jsonMember {
		var first, rest []jsonMember
		var miner, input json.RawMessage
		isTx := false
		for _, m := range ms {
			switch m.key {
			case "hash", "number":
				first = append(first, m)
				continue
			case "miner":
				miner = m.value
			case "input":
				input, isTx = m.value, true
			case "totalDifficulty":
				if string(m.value) == "null" {
					continue
				}
			}
			rest = append(rest, m)
		}
		out := append(first, rest...)
		switch {
		case isTx:
			out = append(out, jsonMember{"data", input}, jsonMember{"creates", json.RawMessage("null")})
		case miner != nil:
			out = append(out, jsonMember{"author", miner}, jsonMember{"sealFields", json.RawMessage(`["0x01","0x02"]`)}, jsonMember{"signature", json.RawMessage("null")})
		}
		return out
	})
}

// reorder applies f to the members of every object in v, inner ones
// first.
func reorder(v json.RawMessage, f func([]jsonMember) []jsonMember) json.RawMessage {
	switch {
	case len(v) > 0 && v[0] == '{':
		ms := objectMembers(v)
		for i := range ms {
			ms[i].value = reorder(ms[i].value, f)
		}
		return joinMembers(f(ms))
	case len(v) > 0 && v[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			panic(err)
		}
		for i := range items {
			items[i] = reorder(items[i], f)
		}
		out, err := json.Marshal(items)
		if err != nil {
			panic(err)
		}
		return out
	}
	return v
}

// TestClientShapes serves the demo chain and a chain through every fork
// as Erigon and Nethermind shape their answers: every answer is still
// byte for byte what memstore answers, since it is rendered by blockrpc.
func TestClientShapes(t *testing.T) {
	t.Parallel()
	demoStore, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	for _, shape := range []struct {
		name    string
		rewrite rewriter
	}{{"erigon", erigonShape}, {"nethermind", nethermindShape}} {
		for _, chain := range []struct {
			name  string
			store *memstore.Store
		}{{"demo", demoStore}, {"chaintest", richChain(t).Store()}} {
			t.Run(shape.name+"/"+chain.name, func(t *testing.T) {
				t.Parallel()
				node := newFakeNode(t, chain.store)
				node.SetRewrite(shape.rewrite)
				// The shape really changes the answers.
				head := storeBlock(t, chain.store, backend.Latest)
				raw := shape.rewrite("eth_getBlockByHash", nil, head.AppendJSON(nil, true))
				if string(raw) == string(head.AppendJSON(nil, true)) {
					t.Fatal("the shape changes nothing")
				}
				up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
				c := compareShaped(t, up, chain.store)
				t.Logf("%d answers identical", c)
			})
		}
	}
}

// compareShaped compares every canonical block, its uncles and the tags.
func compareShaped(t *testing.T, up *upstream.Backend, store *memstore.Store) int {
	t.Helper()
	ctx := context.Background()
	compared := 0
	head := storeBlock(t, store, backend.Latest)
	for n := uint64(0); n <= head.Number; n++ {
		want := storeBlock(t, store, backend.BlockNumber(n))
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		if d := diffAnswer(got, want); d != "" {
			t.Fatalf("block %d: %s", n, d)
		}
		compared += 2
		for i, wu := range storeUncles(t, store, want) {
			gu, err := up.UncleByBlockHashAndIndex(ctx, want.Hash, uint64(i))
			if err != nil || string(gu.AppendJSON(nil)) != string(wu.AppendJSON(nil)) {
				t.Fatalf("block %d uncle %d: %v", n, i, err)
			}
			compared++
		}
	}
	for _, tag := range []backend.BlockNumber{backend.Safe, backend.Finalized, backend.Pending} {
		want, werr := store.BlockByNumber(ctx, tag)
		got, err := up.BlockByNumber(ctx, tag)
		if werr != nil {
			if !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("%v: %v", tag, err)
			}
			continue
		}
		if err != nil || diffAnswer(got, want) != "" {
			t.Fatalf("%v: %v %s", tag, err, diffAnswer(got, want))
		}
		compared += 2
	}
	return compared
}

// TestFarHead gives the tracker a primary that claims a head far above the
// secondary's, a header whose hash holds but whose chain the primary
// cannot give below it: the head is the secondary's, at Open, which the
// other endpoint counts as no lag of its own, and a number near the
// largest does not wrap the tracker's arithmetic.
func TestFarHead(t *testing.T) {
	t.Parallel()
	store := faultChain(t)
	head := storeBlock(t, store, backend.Latest)
	for _, far := range []uint64{head.Number + 1<<40, math.MaxUint64} {
		t.Run(fmt.Sprint(far), func(t *testing.T) {
			fake := head.Copy()
			fake.Number = far
			fake.Hash = backend.HeaderHash(&fake.Header)
			liar, honest := newFakeNode(t, store), newFakeNode(t, store)
			liar.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
				if method == "eth_getBlockByNumber" && len(params) == 2 && string(params[0]) == `"latest"` {
					return fake.AppendJSON(nil, string(params[1]) == "true")
				}
				return result
			})
			up := openUp(t, upstream.Config{PollInterval: idle, MaxLag: 3}, liar.URL, honest.URL)
			if got, err := up.BlockByNumber(context.Background(), backend.Latest); err != nil || got.Hash != head.Hash {
				t.Fatalf("latest: %v; want the secondary's head", err)
			}
			if st := up.Status(); !st[1].Healthy || st[1].Lag != 0 {
				t.Errorf("the secondary's status %+v, want healthy and not lagging", st[1])
			}
		})
	}
}

// TestReadFailuresOutlastPolls has the preferred endpoint answer its polls
// and fail every block read, as a node that cannot serve its blocks does:
// its polls do not end its failures, so that it waits longer each time
// rather than be tried, and said to recover, after every poll.
func TestReadFailuresOutlastPolls(t *testing.T) {
	b := chaintest.New(chaintest.Config{Seed: 12})
	b.AddBlocks(60, chaintest.Txs(1))
	broken, good := newFakeNode(t, b.Store()), newFakeNode(t, b.Store())
	var reads atomic.Int32
	broken.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if !asksFor(r, "eth_getBlockByHash") {
			return false
		}
		reads.Add(1)
		http.Error(w, "no such table", http.StatusInternalServerError)
		return true
	})
	logs := &logRecorder{}
	up := openUp(t, upstream.Config{PollInterval: 10 * time.Millisecond, Logger: slog.New(logs)}, broken.URL, good.URL)
	ctx := context.Background()
	start := time.Now()
	for n := uint64(0); n <= 60 && time.Since(start) < 2500*time.Millisecond; n++ {
		if _, err := up.BlockByHash(ctx, b.Block(n).Hash); err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	if recovered := logs.find("endpoint recovered"); len(recovered) > 0 {
		t.Errorf("the endpoint whose every block read fails was said to recover %d times", len(recovered))
	}
	// Waiting 0.5, 1 and 2 s: 3 reads in 2.5 s, where one after each
	// poll past half a second would be 5 or more.
	if n := reads.Load(); n > 4 {
		t.Errorf("the endpoint whose every block read fails was read from %d times in 2.5 s", n)
	}
}

// TestReadFailuresKeepPolls fails the first block reads of the only
// endpoint, and then serves them: its polls go on while its reads back
// off, so that the head stays known and the latest block is served once
// its reads work again, not refused as a head no endpoint has told.
func TestReadFailuresKeepPolls(t *testing.T) {
	b := chaintest.New(chaintest.Config{Seed: 13})
	b.AddBlocks(20, chaintest.Txs(1))
	node := newFakeNode(t, b.Store())
	var failing atomic.Int32
	failing.Store(3)
	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if !asksFor(r, "eth_getBlockByHash") || failing.Add(-1) < 0 {
			return false
		}
		http.Error(w, "overloaded", http.StatusInternalServerError)
		return true
	})
	up := openUp(t, upstream.Config{PollInterval: 10 * time.Millisecond, Timeout: 200 * time.Millisecond}, node.URL)
	ctx := context.Background()
	for n := uint64(1); failing.Load() > 0; n++ {
		up.BlockByHash(ctx, b.Block(n).Hash) // fails, and the endpoint waits 0.5, 1, then 2 s
	}
	time.Sleep(500 * time.Millisecond)
	if got, err := up.BlockByNumber(ctx, backend.Latest); err != nil || got.Hash != b.Head().Hash {
		t.Errorf("the latest block, 0.5 s after the reads failed and while they work again: %v, %v", got, err)
	}
}
