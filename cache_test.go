package blockrpc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/google/go-cmp/cmp"
	"github.com/holiman/uint256"
)

// cacheCounter counts the answer cache's hits and misses.
type cacheCounter struct {
	mu           sync.Mutex
	hits, misses int
}

func (c *cacheCounter) observer() *blockrpc.Observer {
	return &blockrpc.Observer{Cache: func(_ context.Context, hit bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if hit {
			c.hits++
		} else {
			c.misses++
		}
	}}
}

func (c *cacheCounter) counts() (hits, misses int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// TestAnswerCacheServesWhatWasRendered checks that a block asked for again
// comes from the cache, byte for byte what was rendered, by number and by
// hash, with and without transactions as separate answers.
func TestAnswerCacheServesWhatWasRendered(t *testing.T) {
	c := newTestChain(t)
	var counter cacheCounter
	cached := newServer(t, c.store, blockrpc.WithObserver(counter.observer()))
	uncached := newServer(t, c.store, blockrpc.WithAnswerCache(0), blockrpc.WithObserver(counter.observer()))
	hash := c.blocks[1].Hash.String()
	requests := []string{
		rpcRequest("eth_getBlockByNumber", `["0x1",true]`),
		rpcRequest("eth_getBlockByNumber", `["0x1",false]`),
		rpcRequest("eth_getBlockByHash", `["`+hash+`",true]`),
		rpcRequest("eth_getBlockByHash", `["`+hash+`",false]`),
	}
	for round := range 2 {
		for _, req := range requests {
			_, want := post(t, uncached, req)
			_, got := post(t, cached, req)
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("round %d, %s: the cached server answers differently (-uncached +cached):\n%s", round, req, diff)
			}
		}
	}
	// Two answers per block (with and without transactions), rendered once
	// each; every other lookup is a hit. The uncached server never looks.
	if hits, misses := counter.counts(); hits != 6 || misses != 2 {
		t.Errorf("cache hits %d, misses %d; want 6 and 2", hits, misses)
	}
	// The pending block is never cached: it is rendered each time.
	post(t, cached, rpcRequest("eth_getBlockByNumber", `["pending",true]`))
	if hits, misses := counter.counts(); hits != 6 || misses != 2 {
		t.Errorf("the pending block went through the cache: hits %d, misses %d", hits, misses)
	}
}

// TestAnswerCacheFollowsReorgs checks that a block asked for by number is
// the canonical one after a reorganisation, though the old one is cached.
func TestAnswerCacheFollowsReorgs(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	before := resultObject(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["0x3",false]`)))

	c.compete(t, 3, "the other branch")
	after := resultObject(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["0x3",false]`)))
	if after["hash"] == before["hash"] {
		t.Fatalf("block 3 is still %v after the reorganisation", before["hash"])
	}
	if after["extraData"] != "0x746865206f74686572206272616e6368" {
		t.Errorf("block 3 after the reorganisation has extraData %v, want the new block's", after["extraData"])
	}
}

// tdBackend serves the chain with the total difficulty of every block
// replaced, as a store does that learns a block's ancestry after the block.
type tdBackend struct {
	backend.Backend
	td *uint256.Int
}

func (b tdBackend) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	block, err := b.Backend.BlockByNumber(ctx, n)
	if err != nil {
		return nil, err
	}
	changed := *block
	changed.TotalDifficulty = b.td
	return &changed, nil
}

// TestAnswerCacheChecksTotalDifficulty checks that a block whose total
// difficulty has changed since it was cached is rendered again.
func TestAnswerCacheChecksTotalDifficulty(t *testing.T) {
	c := newTestChain(t)
	b := &tdBackend{Backend: c.store}
	srv := newServer(t, b)
	req := rpcRequest("eth_getBlockByNumber", `["0x2",false]`)
	if td := resultObject(t, call(t, srv, req))["totalDifficulty"]; td != nil {
		t.Fatalf("totalDifficulty %v, want null", td)
	}
	b.td = uint256.NewInt(0x1234)
	if td := resultObject(t, call(t, srv, req))["totalDifficulty"]; td != "0x1234" {
		t.Errorf("totalDifficulty %v after it became known, want 0x1234", td)
	}
}

func TestAnswerCacheOff(t *testing.T) {
	c := newTestChain(t)
	var counter cacheCounter
	srv := newServer(t, c.store, blockrpc.WithAnswerCache(0), blockrpc.WithObserver(counter.observer()))
	for range 3 {
		if status, out := post(t, srv, rpcRequest("eth_getBlockByNumber", `["0x1",true]`)); status != http.StatusOK {
			t.Fatalf("%d %s", status, out)
		}
	}
	if hits, misses := counter.counts(); hits+misses != 0 {
		t.Errorf("a handler without a cache looked %d times in one", hits+misses)
	}
}

// TestAnswerCacheWholeAnswers checks a cached block sent as a single
// answer, plain and gzipped, against the answer of a server without a
// cache, and that its size is what an observer is told.
func TestAnswerCacheWholeAnswers(t *testing.T) {
	t.Run("small block", func(t *testing.T) {
		testWholeAnswers(t, newTestChain(t).store, "0x1")
	})
	t.Run("mainnet block", func(t *testing.T) { // 650 KB: written in parts
		store, _ := largestMainnetBlock(t)
		testWholeAnswers(t, store, "0x112A880")
	})
}

func testWholeAnswers(t *testing.T, store backend.Backend, number string) {
	var sizes []int
	observer := &blockrpc.Observer{Call: func(_ context.Context, ci blockrpc.CallInfo) { sizes = append(sizes, ci.Bytes) }}
	cached := newServer(t, store, blockrpc.WithGzip(), blockrpc.WithObserver(observer))
	uncached := newServer(t, store, blockrpc.WithGzip(), blockrpc.WithAnswerCache(0))
	body := rpcRequest("eth_getBlockByNumber", `["`+number+`",true]`)
	for _, encoding := range []string{"", "gzip"} {
		for round := range 2 { // the second is a hit
			get := func(srv *httptest.Server) []byte {
				resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, body, "Content-Type", "application/json", "Accept-Encoding", encoding))
				if resp.Header.Get("Content-Encoding") != encoding {
					t.Fatalf("Content-Encoding %q, want %q", resp.Header.Get("Content-Encoding"), encoding)
				}
				if resp.ContentLength != int64(len(out)) {
					t.Errorf("Content-Length %d for %d bytes", resp.ContentLength, len(out))
				}
				return gunzipIf(t, out, encoding == "gzip")
			}
			want, got := get(uncached), get(cached)
			if string(got) != string(want) {
				t.Errorf("encoding %q, round %d: the cached answer differs:\n%.300s\nwant\n%.300s", encoding, round, got, want)
			}
			if n := sizes[len(sizes)-1]; n != len(want)-1 { // the answer but its newline
				t.Errorf("encoding %q, round %d: the observer was told %d bytes, the answer has %d", encoding, round, n, len(want)-1)
			}
		}
	}
}

func gunzipIf(t *testing.T, data []byte, zipped bool) []byte {
	t.Helper()
	if !zipped {
		return data
	}
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeCounter is a ResponseWriter that counts the writes of the body.
type writeCounter struct {
	*httptest.ResponseRecorder
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.ResponseRecorder.Write(p)
}

// TestAnswerCacheHitTwoWrites checks that a cached answer reaches net/http
// as two writes, the last ending the answer: a write of the answer's last
// bytes alone costs the server another system call and TCP segment.
func TestAnswerCacheHitTwoWrites(t *testing.T) {
	store, _ := largestMainnetBlock(t)
	h := newHandler(store)
	body := rpcRequest("eth_getBlockByNumber", `["0x112A880",false]`)
	var answers [2]string
	for round := range answers {
		w := &writeCounter{ResponseRecorder: httptest.NewRecorder()}
		h.ServeHTTP(w, handlerRequest(context.Background(), body))
		answers[round] = w.Body.String()
		if round == 1 && w.writes != 2 {
			t.Errorf("a cached answer of %d bytes took %d writes, want 2", w.Body.Len(), w.writes)
		}
	}
	if answers[0] != answers[1] || !strings.HasSuffix(answers[1], "}}\n") {
		t.Errorf("the cached answer differs from the rendered one, or ends wrongly: ...%q", answers[1][len(answers[1])-20:])
	}
}

// TestAnswerCacheTotalDifficultyDropped checks that a block cached with a
// total difficulty, which its backend no longer gives, is rendered again
// without one, not served with the one it had.
func TestAnswerCacheTotalDifficultyDropped(t *testing.T) {
	c := newTestChain(t)
	b := &tdBackend{Backend: c.store, td: uint256.NewInt(0x1234)}
	srv := newServer(t, b)
	req := rpcRequest("eth_getBlockByNumber", `["0x2",false]`)
	for range 2 { // the second is a hit
		if td := resultObject(t, call(t, srv, req))["totalDifficulty"]; td != "0x1234" {
			t.Fatalf("totalDifficulty %v, want 0x1234", td)
		}
	}
	b.td = nil
	if td, ok := resultObject(t, call(t, srv, req))["totalDifficulty"]; ok && td != nil {
		t.Errorf("totalDifficulty %v after the backend dropped it, want none", td)
	}
}
