package blockrpc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/blockrpc/blockrpc"
)

// TestConcurrentMixedAnswers serves cached, gzipped, streamed and limited
// answers at once, each the same as when served alone (and, with -race,
// without a race).
func TestConcurrentMixedAnswers(t *testing.T) {
	store, _ := largestMainnetBlock(t)
	obs := &blockrpc.Observer{
		Call:    func(context.Context, blockrpc.CallInfo) {},
		Request: func(context.Context, blockrpc.RequestInfo) {},
		Cache:   func(context.Context, bool) {},
		Backend: func(context.Context, blockrpc.BackendInfo) {},
	}
	srv := newServer(t, store, blockrpc.WithGzip(), blockrpc.WithObserver(obs), blockrpc.WithAnswerCache(3<<20),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: 1e9, Burst: 1e6}))
	url := srv.URL + "/v3/" + testKey
	bodies := []string{
		rpcRequest("eth_getBlockByNumber", `["0x112A880",true]`),
		rpcRequest("eth_getBlockByNumber", `["0x112A880",false]`),
		rpcRequest("eth_getBlockByNumber", `["latest",false]`),
		fullBlockBatch(2),
	}
	want := map[string][]byte{}
	for _, b := range bodies {
		_, want[b] = send(t, newRequest(t, http.MethodPost, url, b, "Content-Type", "application/json"))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				b := bodies[(g+i)%len(bodies)]
				req := newRequest(t, http.MethodPost, url, b, "Content-Type", "application/json")
				if i%2 == 0 {
					req.Header.Set("Accept-Encoding", "gzip")
				}
				resp, err := rawClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				var r io.Reader = resp.Body
				if resp.Header.Get("Content-Encoding") == "gzip" {
					zr, err := gzip.NewReader(resp.Body)
					if err != nil {
						t.Error(err)
						return
					}
					r = zr
				}
				out, err := io.ReadAll(r)
				resp.Body.Close()
				if err != nil || !bytes.Equal(out, want[b]) {
					t.Errorf("%.60s: %v, %d bytes, want %d", b, err, len(out), len(want[b]))
				}
			}
		}()
	}
	wg.Wait()
}
