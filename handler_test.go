package blockrpc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
)

// The HTTP side of the handler: methods, content types, paths, body limits,
// mounting, logging, compression and CORS.

func TestHTTPMethodNotAllowed(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		t.Run(method, func(t *testing.T) {
			resp, out := send(t, newRequest(t, method, srv.URL+"/v3/"+testKey, latestBlock, "Content-Type", "application/json"))
			checkRefusal(t, resp.StatusCode, out, http.StatusMethodNotAllowed)
			if allow := resp.Header.Get("Allow"); allow != "POST" {
				t.Errorf("Allow: %q, want POST", allow)
			}
		})
	}
}

func TestHTTPContentType(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, tc := range []struct {
		contentType string // "" sends none
		want        int
	}{
		{"application/json", http.StatusOK},
		{"application/json; charset=utf-8", http.StatusOK},
		{"application/json;charset=UTF-8", http.StatusOK},
		{"Application/JSON", http.StatusOK},
		{"text/plain", http.StatusUnsupportedMediaType},
		{"text/plain; charset=utf-8", http.StatusUnsupportedMediaType},
		{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"application/json-rpc", http.StatusUnsupportedMediaType},
		{"application/json; charset", http.StatusUnsupportedMediaType}, // malformed parameter
		{"", http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			req := newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, latestBlock)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, out := send(t, req)
			checkLatestOr(t, resp.StatusCode, out, tc.want)
		})
	}
}

func TestHTTPPaths(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/v3/" + testKey, http.StatusOK},
		{"/any/prefix/v3/" + testKey, http.StatusOK},
		{"/", http.StatusNotFound},
		{"/" + testKey, http.StatusNotFound},
		{"/v2/" + testKey, http.StatusNotFound},
		{"/v3/" + testKey + "/", http.StatusNotFound},
		{"/v3/" + testKey + "/extra", http.StatusNotFound},
		{"/xv3/" + testKey, http.StatusNotFound},
		{"/V3/" + testKey, http.StatusNotFound},
		{"/v3/", http.StatusUnauthorized},
		{"/v3", http.StatusUnauthorized},
		{"/api/v3/", http.StatusUnauthorized},
		{"/v3/wrong-key", http.StatusUnauthorized},
		{"/v3/" + strings.ToUpper(testKey), http.StatusUnauthorized},
	} {
		t.Run(tc.path, func(t *testing.T) {
			status, out := postTo(t, srv.URL+tc.path, latestBlock)
			checkLatestOr(t, status, out, tc.want)
		})
	}
}

func TestHTTPBodyLimit(t *testing.T) {
	const limit = 200
	srv := newServer(t, newTestChain(t).store, blockrpc.WithBodyLimit(limit))
	url := srv.URL + "/v3/" + testKey
	small := latestBlock
	// JSON allows any whitespace after a value: pad a valid request.
	padded := func(n int) string { return small + strings.Repeat(" ", n-len(small)) }

	for _, tc := range []struct {
		name    string
		body    string
		chunked bool // sent without a Content-Length
		want    int
	}{
		{"small", small, false, http.StatusOK},
		{"at the limit", padded(limit), false, http.StatusOK},
		{"one byte over", padded(limit + 1), false, http.StatusRequestEntityTooLarge},
		{"far over", padded(100 * limit), false, http.StatusRequestEntityTooLarge},
		{"chunked small", small, true, http.StatusOK},
		{"chunked at the limit", padded(limit), true, http.StatusOK},
		{"chunked one byte over", padded(limit + 1), true, http.StatusRequestEntityTooLarge},
		{"chunked far over", padded(100 * limit), true, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length from the client
			}
			req, err := http.NewRequest(http.MethodPost, url, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tc.chunked && req.ContentLength != 0 {
				t.Fatalf("the request has a known length %d", req.ContentLength)
			}
			resp, out := send(t, req)
			checkLatestOr(t, resp.StatusCode, out, tc.want)
		})
	}
}

// TestHTTPUnlimitedBodyLyingLength: with the body limit removed, a
// Content-Length that the body does not back must not be trusted to size
// memory. Any client can send such a header.
func TestHTTPUnlimitedBodyLyingLength(t *testing.T) {
	h := newHandler(newTestChain(t).store, blockrpc.WithBodyLimit(0))
	req := handlerRequest(context.Background(), latestBlock)
	req.ContentLength = 1 << 62 // claimed, never sent

	rec := httptest.NewRecorder()
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Content-Length %d with a %d-byte body: handler panicked: %v", req.ContentLength, len(latestBlock), p)
			}
		}()
		h.ServeHTTP(rec, req)
	}()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", rec.Code, rec.Body)
	}
	checkBlockNumber(t, resultObject(t, parseAnswer(t, rec.Body.Bytes())), "0x3")
}

func TestHTTPMounting(t *testing.T) {
	h := newHandler(newTestChain(t).store)
	mux := http.NewServeMux()
	mux.Handle("/rpc/", http.StripPrefix("/rpc", h))
	mux.Handle("/strip-slash/", http.StripPrefix("/strip-slash/", h))
	mux.Handle("/eth/v3/{key}", h) // the README's pattern, without a method
	muxed := serve(t, mux)
	bare := serve(t, h)

	for _, tc := range []struct {
		name, url string
		want      int
	}{
		{"StripPrefix", muxed.URL + "/rpc/v3/" + testKey, http.StatusOK},
		{"StripPrefix with the slash", muxed.URL + "/strip-slash/v3/" + testKey, http.StatusOK},
		{"StripPrefix wrong key", muxed.URL + "/rpc/v3/nope", http.StatusUnauthorized},
		{"StripPrefix no key", muxed.URL + "/rpc/v3/", http.StatusUnauthorized},
		{"StripPrefix wrong path", muxed.URL + "/rpc/v4/" + testKey, http.StatusNotFound},
		{"pattern", muxed.URL + "/eth/v3/" + testKey, http.StatusOK},
		{"pattern wrong key", muxed.URL + "/eth/v3/nope", http.StatusUnauthorized},
		{"bare", bare.URL + "/anything/v3/" + testKey, http.StatusOK},
		{"bare root", bare.URL + "/v3/" + testKey, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := postTo(t, tc.url, latestBlock)
			checkLatestOr(t, status, out, tc.want)
		})
	}
	// Other methods reach the handler through the pattern: its JSON 405,
	// not the mux's text.
	resp, out := send(t, newRequest(t, http.MethodGet, muxed.URL+"/eth/v3/"+testKey, ""))
	checkRefusal(t, resp.StatusCode, out, http.StatusMethodNotAllowed)
}

func TestLogging(t *testing.T) {
	const (
		secretKey = "sk-live-4f9a0c2e7b1d"
		wrongKey  = "sk-live-0000deadbeef"
	)
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newTestChain(t)

	keys := blockrpc.WithKeys(blockrpc.NewKeySet(secretKey))
	failing := newServer(t, failingBackend{}, keys, blockrpc.WithLogger(logger))
	panicking := newServer(t, panickingBackend{c.store}, keys, blockrpc.WithLogger(logger))
	unavailable := newServer(t, c.store, blockrpc.WithKeys(blockrpc.KeyFunc(func(context.Context, string) (bool, error) {
		return false, errors.New("key service down")
	})), blockrpc.WithLogger(logger))

	postWith := func(srv *httptest.Server, key, body string) (int, []byte) {
		return postTo(t, srv.URL+"/v3/"+key, body)
	}
	byNumber := rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`["0x%x",false]`, panicBlock))

	_, out := postWith(failing, secretKey, byNumber)
	checkError(t, parseAnswer(t, out), -32000, "backend failure")
	_, out = postWith(panicking, secretKey, byNumber)
	checkError(t, parseAnswer(t, out), -32603, "method handler crashed")
	status, out := postWith(failing, wrongKey, byNumber)
	checkRefusal(t, status, out, http.StatusUnauthorized)
	status, out = postWith(unavailable, secretKey, byNumber)
	checkRefusal(t, status, out, http.StatusServiceUnavailable)

	got := logs.String()
	for _, want := range []string{"disk I/O error", secretPath, "eth_getBlockByNumber", "method handler crashed", "index out of range in the block cache", "key service down"} {
		if !strings.Contains(got, want) {
			t.Errorf("the logs do not mention %q:\n%s", want, got)
		}
	}
	for _, key := range []string{secretKey, wrongKey} {
		if strings.Contains(got, key) {
			t.Errorf("the logs hold the API key %q:\n%s", key, got)
		}
	}
}

// ---- Compression and CORS --------------------------------------------------------------

func TestGzip(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store, blockrpc.WithGzip())
	url := srv.URL + "/v3/" + testKey
	large := rpcRequest("eth_getBlockByNumber", `["0x1",true]`)
	small := rpcRequest("eth_foo", `[]`)

	plainResp, plain := send(t, newRequest(t, http.MethodPost, url, large, "Content-Type", "application/json"))
	if plainResp.StatusCode != http.StatusOK {
		t.Fatalf("status %d; body %s", plainResp.StatusCode, plain)
	}
	if len(plain) < 1024 {
		t.Fatalf("the answer is %d bytes: too small to test compression", len(plain))
	}
	checkBlockNumber(t, resultObject(t, parseAnswer(t, plain)), "0x1")

	for _, tc := range []struct {
		name, acceptEncoding, body string
		wantGzip                   bool
	}{
		{"plain", "", large, false},
		{"gzip", "gzip", large, true},
		{"gzip among others", "br, gzip, deflate", large, true},
		{"gzip with a weight", "gzip;q=0.5", large, true},
		{"gzip with a weight among others", "br;q=1.0, gzip;q=0.8, *;q=0.1", large, true},
		{"gzip with weight 1", "gzip;q=1", large, true},
		{"gzip in upper case", "GZIP", large, true},
		{"gzip refused", "gzip;q=0", large, false},
		{"gzip weighed out of range, above 1", "gzip;q=2", large, false},
		{"gzip refused, the weight named in capitals", "gzip;Q=0", large, false},
		{"gzip refused with decimals", "gzip; q=0.000", large, false},
		{"other encodings", "br, deflate", large, false},
		{"small answer", "gzip", small, false},
		// "*" covers gzip when gzip is not named.
		{"any encoding", "*", large, true},
		{"any encoding with a weight among others", "br, *;q=0.5", large, true},
		{"any encoding but gzip", "gzip;q=0, *", large, false},
		{"any encoding but gzip, weighed out of range", "gzip;q=-1, *", large, false},
		{"any encoding but gzip, weighed NaN", "gzip;q=NaN, *", large, false},
		{"any encoding refused", "*;q=0", large, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, http.MethodPost, url, tc.body, "Content-Type", "application/json")
			if tc.acceptEncoding != "" {
				req.Header.Set("Accept-Encoding", tc.acceptEncoding)
			}
			resp, out := send(t, req)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d; body %s", resp.StatusCode, out)
			}
			if vary := resp.Header.Values("Vary"); !strings.Contains(strings.Join(vary, ","), "Accept-Encoding") {
				t.Errorf("Vary: %q, want Accept-Encoding", vary)
			}
			encoding := resp.Header.Get("Content-Encoding")
			if !tc.wantGzip {
				if encoding != "" {
					t.Errorf("Content-Encoding: %q, want none", encoding)
				}
				parseAnswer(t, out)
				return
			}
			if encoding != "gzip" {
				t.Fatalf("Content-Encoding: %q, want gzip", encoding)
			}
			if len(out) >= len(plain) {
				t.Errorf("compressed answer is %d bytes, the plain one %d", len(out), len(plain))
			}
			zr, err := gzip.NewReader(bytes.NewReader(out))
			if err != nil {
				t.Fatalf("the answer is not gzip: %v", err)
			}
			unzipped, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("decompressing: %v", err)
			}
			if !bytes.Equal(unzipped, plain) {
				t.Errorf("decompressed answer differs from the plain one:\n%.300s\nwant\n%.300s", unzipped, plain)
			}
		})
	}

	t.Run("without the option", func(t *testing.T) {
		srv := newServer(t, c.store)
		resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, large, "Content-Type", "application/json", "Accept-Encoding", "gzip"))
		if encoding := resp.Header.Get("Content-Encoding"); encoding != "" {
			t.Errorf("Content-Encoding: %q, want none", encoding)
		}
		if !bytes.Equal(out, plain) {
			t.Errorf("answer differs from the plain one")
		}
	})
}

func TestCORS(t *testing.T) {
	const allowed = "https://app.example"
	srv := newServer(t, newTestChain(t).store, blockrpc.WithCORS(allowed))
	url := srv.URL + "/v3/" + testKey
	body := latestBlock

	t.Run("preflight", func(t *testing.T) {
		resp, out := send(t, newRequest(t, http.MethodOptions, url, "",
			"Origin", allowed,
			"Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "content-type"))
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("status %d, want 204; body %s", resp.StatusCode, out)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != allowed {
			t.Errorf("Access-Control-Allow-Origin: %q, want %q", got, allowed)
		}
		if got := resp.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(got, "POST") {
			t.Errorf("Access-Control-Allow-Methods: %q, want POST among them", got)
		}
		if got := resp.Header.Get("Access-Control-Allow-Headers"); !strings.Contains(strings.ToLower(got), "content-type") {
			t.Errorf("Access-Control-Allow-Headers: %q, want Content-Type among them", got)
		}
	})
	t.Run("preflight without a key", func(t *testing.T) {
		// Browsers send preflights without credentials: the path's key is
		// not checked until the real request.
		resp, _ := send(t, newRequest(t, http.MethodOptions, srv.URL+"/v3/wrong", "", "Origin", allowed, "Access-Control-Request-Method", "POST"))
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("status %d, want 204", resp.StatusCode)
		}
	})
	t.Run("allowed origin", func(t *testing.T) {
		resp, out := send(t, newRequest(t, http.MethodPost, url, body, "Content-Type", "application/json", "Origin", allowed))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d; body %s", resp.StatusCode, out)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != allowed {
			t.Errorf("Access-Control-Allow-Origin: %q, want %q", got, allowed)
		}
		if vary := strings.Join(resp.Header.Values("Vary"), ","); !strings.Contains(vary, "Origin") {
			t.Errorf("Vary: %q, want Origin", vary)
		}
		if got := resp.Header.Get("Access-Control-Expose-Headers"); got != "Retry-After" {
			t.Errorf("Access-Control-Expose-Headers: %q, want Retry-After, which a page that was refused must read to wait", got)
		}
		checkBlockNumber(t, resultObject(t, parseAnswer(t, out)), "0x3")
	})
	t.Run("refusal to an allowed origin", func(t *testing.T) {
		resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/wrong", body, "Content-Type", "application/json", "Origin", allowed))
		checkRefusal(t, resp.StatusCode, out, http.StatusUnauthorized)
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != allowed {
			t.Errorf("Access-Control-Allow-Origin: %q, want %q: the page must be able to read the refusal", got, allowed)
		}
	})
	for _, origin := range []string{"https://evil.example", "https://app.example.evil", "http://app.example", ""} {
		t.Run("disallowed origin "+origin, func(t *testing.T) {
			preflight, _ := send(t, newRequest(t, http.MethodOptions, url, "", "Origin", origin, "Access-Control-Request-Method", "POST"))
			if preflight.StatusCode == http.StatusNoContent {
				t.Errorf("preflight answered with 204")
			}
			resp, out := send(t, newRequest(t, http.MethodPost, url, body, "Content-Type", "application/json", "Origin", origin))
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d; body %s: CORS is the browser's to enforce", resp.StatusCode, out)
			}
			for _, r := range []*http.Response{preflight, resp} {
				for _, h := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers"} {
					if got := r.Header.Get(h); got != "" {
						t.Errorf("%s answer has %s: %q", r.Request.Method, h, got)
					}
				}
			}
		})
	}
	t.Run("any origin", func(t *testing.T) {
		srv := newServer(t, newTestChain(t).store, blockrpc.WithCORS("*"))
		resp, _ := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, body, "Content-Type", "application/json", "Origin", "https://anywhere.example"))
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "*" {
			t.Errorf("Access-Control-Allow-Origin: %q, want *", got)
		}
	})
}

// TestCORSOptionsWithoutPreflight checks that an OPTIONS request of an
// allowed origin that asks for no method is no preflight: it is refused
// as any method but POST is, not answered as a preflight.
func TestCORSOptionsWithoutPreflight(t *testing.T) {
	const allowed = "https://app.example"
	srv := newServer(t, newTestChain(t).store, blockrpc.WithCORS(allowed))
	resp, out := send(t, newRequest(t, http.MethodOptions, srv.URL+"/v3/"+testKey, "", "Origin", allowed))
	checkRefusal(t, resp.StatusCode, out, http.StatusMethodNotAllowed)
	if got := resp.Header.Get("Access-Control-Allow-Methods"); got != "" {
		t.Errorf("Access-Control-Allow-Methods %q for a request that is no preflight", got)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != allowed {
		t.Errorf("Access-Control-Allow-Origin: %q, want %q: the page must be able to read the refusal", got, allowed)
	}
}
