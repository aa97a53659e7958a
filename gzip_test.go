package blockrpc_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"testing"

	"github.com/blockrpc/blockrpc"
)

// TestGzipSameAsPlain compares, for answers of every shape the writer has
// (single, a miss and a cache hit; a small batch; a streamed one), what a
// client that takes gzip reads, decompressed, with what another reads.
func TestGzipSameAsPlain(t *testing.T) {
	store, _ := largestMainnetBlock(t)
	for _, opts := range [][]blockrpc.Option{
		{blockrpc.WithGzip()},
		{blockrpc.WithGzip(), blockrpc.WithAnswerCache(0)},
		{blockrpc.WithGzip(), blockrpc.WithObserver(&blockrpc.Observer{})},
	} {
		srv := newServer(t, store, opts...)
		url := srv.URL + "/v3/" + testKey
		for _, body := range []string{
			rpcRequest("eth_getBlockByNumber", `["0x112A880",true]`),
			rpcRequest("eth_getBlockByNumber", `["0x112A880",true]`),
			rpcRequest("eth_getBlockByNumber", `["0x112A880",false]`),
			rpcRequest("eth_getBlockByNumber", `["0x112A880",false]`),
			"[" + rpcRequest("eth_getBlockByNumber", `["0x112A880",false]`) + "]",
			fullBlockBatch(3),
			fullBlockBatch(3),
		} {
			_, plain := send(t, newRequest(t, http.MethodPost, url, body, "Content-Type", "application/json"))
			resp, zipped := send(t, newRequest(t, http.MethodPost, url, body, "Content-Type", "application/json", "Accept-Encoding", "gzip"))
			got := zipped
			if resp.Header.Get("Content-Encoding") == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(zipped))
				if err != nil {
					t.Fatalf("%.80s: %v", body, err)
				}
				got, err = io.ReadAll(zr)
				if err != nil {
					t.Fatalf("%.80s: %v", body, err)
				}
			}
			if !bytes.Equal(got, plain) {
				t.Errorf("%.80s: gzip answer differs from plain (%d vs %d bytes)", body, len(got), len(plain))
			}
		}
	}
}
