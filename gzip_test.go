package blockrpc_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
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

// TestStreamedBatch checks a batch whose answers pass a chunk (64 KiB):
// it is streamed, without a Content-Length, ends with a newline as every
// batch's answers do, and says that it varies with Accept-Encoding
// whether or not the client takes gzip, so that no cache hands a gzip
// stream to a client that cannot read it.
func TestStreamedBatch(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store, blockrpc.WithGzip())
	calls := make([]string, 200)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["0x%x",true]}`, i, i%4)
	}
	body := "[" + strings.Join(calls, ",") + "]"
	url := srv.URL + "/v3/" + testKey
	resp, plain := send(t, newRequest(t, http.MethodPost, url, body, "Content-Type", "application/json"))
	if len(plain) <= 64<<10 {
		t.Fatalf("the batch's answers are %d bytes, want more than a chunk", len(plain))
	}
	if resp.ContentLength != -1 {
		t.Errorf("a batch of %d bytes of answers has Content-Length %d, want it streamed", len(plain), resp.ContentLength)
	}
	if !strings.HasSuffix(string(plain), "]\n") {
		t.Errorf("a streamed batch's answers end with %q, want ]\\n", plain[max(0, len(plain)-10):])
	}
	if n := len(callBatchAnswers(t, plain)); n != len(calls) {
		t.Errorf("%d answers, want %d", n, len(calls))
	}
	zresp, zipped := send(t, newRequest(t, http.MethodPost, url, body, "Content-Type", "application/json", "Accept-Encoding", "gzip"))
	if zresp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("a streamed batch asked with gzip: Content-Encoding %q", zresp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(unzipped, plain) {
		t.Errorf("the gzip stream differs from the plain answers (%d vs %d bytes)", len(unzipped), len(plain))
	}
	for name, r := range map[string]*http.Response{"plain": resp, "gzip": zresp} {
		if vary := strings.Join(r.Header.Values("Vary"), ","); !strings.Contains(vary, "Accept-Encoding") {
			t.Errorf("%s streamed batch: Vary %q, want Accept-Encoding", name, vary)
		}
	}
}

// TestGzipThreshold checks the bound of WithGzip: answers of 1 KiB and
// more are compressed, shorter ones are not.
func TestGzipThreshold(t *testing.T) {
	srv := newServer(t, newTestChain(t).store, blockrpc.WithGzip())
	url := srv.URL + "/v3/" + testKey
	// An unknown method's name is echoed in its error: its length sets
	// the answer's.
	unknown := func(n int) string {
		return rpcRequest("eth_"+strings.Repeat("x", n), `[]`)
	}
	_, out := post(t, srv, unknown(0))
	base := len(out)
	for _, size := range []int{1023, 1024, 1025} {
		body := unknown(size - base)
		_, plain := post(t, srv, body)
		if len(plain) != size {
			t.Fatalf("the answer is %d bytes, want %d", len(plain), size)
		}
		resp, _ := send(t, newRequest(t, http.MethodPost, url, body, "Content-Type", "application/json", "Accept-Encoding", "gzip"))
		if zipped := resp.Header.Get("Content-Encoding") == "gzip"; zipped != (size >= 1024) {
			t.Errorf("an answer of %d bytes: compressed %v, want %v", size, zipped, size >= 1024)
		}
	}
}
