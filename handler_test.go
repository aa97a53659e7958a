package blockrpc_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/google/go-cmp/cmp"
	"github.com/holiman/uint256"
)

// ---- A small chain to serve ------------------------------------------------

var (
	txSender    = backend.Address{0xa1, 0x01}
	txRecipient = backend.Address{0xb2, 0x02}
	blockMiner  = backend.Address{0xc3, 0x03}
)

// testChain is a canonical chain of blocks 0 to 3 in a memstore: block 1
// holds a legacy and a dynamic-fee transaction, block 3 has one uncle, and
// a pending block 4 with one transaction sits on top. Safe and finalized
// are not set.
type testChain struct {
	store   *memstore.Store
	blocks  []*backend.Block // the canonical blocks as stored, by number
	uncle   *backend.Uncle   // uncle 0 of blocks[3], as stored
	pending *backend.Block   // as given to SetPending
}

func testHeader(number uint64) backend.Header {
	return backend.Header{
		Number:     number,
		Difficulty: *uint256.NewInt(131_072 + number),
		GasLimit:   30_000_000,
		GasUsed:    21_000,
		Timestamp:  1_700_000_000 + 12*number,
		Miner:      blockMiner,
		ExtraData:  []byte("blockrpc handler tests"),
	}
}

func legacyTx(nonce uint64) *backend.Transaction {
	to := txRecipient
	return &backend.Transaction{
		Type:     backend.LegacyTxType,
		Nonce:    nonce,
		GasPrice: uint256.NewInt(20_000_000_000),
		Gas:      21_000,
		To:       &to,
		Value:    *uint256.NewInt(1_000_000_000_000_000_000),
		V:        *uint256.NewInt(27),
		R:        *uint256.NewInt(1),
		S:        *uint256.NewInt(2),
		From:     txSender,
	}
}

func dynamicFeeTx(nonce uint64) *backend.Transaction {
	to := txRecipient
	return &backend.Transaction{
		Type:                 backend.DynamicFeeTxType,
		ChainID:              uint256.NewInt(1),
		Nonce:                nonce,
		MaxPriorityFeePerGas: uint256.NewInt(1_000_000_000),
		MaxFeePerGas:         uint256.NewInt(50_000_000_000),
		Gas:                  50_000,
		To:                   &to,
		Input:                []byte{0xde, 0xad, 0xbe, 0xef},
		V:                    *uint256.NewInt(1),
		R:                    *uint256.NewInt(3),
		S:                    *uint256.NewInt(4),
		From:                 txSender,
	}
}

func newTestChain(t testing.TB) *testChain {
	t.Helper()
	c := &testChain{store: memstore.New()}
	c.add(t, &backend.Block{Header: testHeader(0)})

	b1 := &backend.Block{Header: testHeader(1), Transactions: []*backend.Transaction{legacyTx(0), dynamicFeeTx(1)}}
	b1.BaseFeePerGas = uint256.NewInt(7_000_000_000)
	c.add(t, b1)

	c.add(t, &backend.Block{Header: testHeader(2)})

	uncle := testHeader(2)
	uncle.ParentHash = c.blocks[1].Hash
	uncle.Timestamp++
	uncle.ExtraData = []byte("an uncle")
	c.add(t, &backend.Block{Header: testHeader(3)}, &backend.Uncle{Header: uncle})
	u, err := c.store.UncleByBlockHashAndIndex(context.Background(), c.blocks[3].Hash, 0)
	if err != nil {
		t.Fatalf("reading back the uncle: %v", err)
	}
	c.uncle = u

	c.pending = &backend.Block{Header: testHeader(4), Transactions: []*backend.Transaction{legacyTx(2)}}
	c.pending.ParentHash = c.blocks[3].Hash
	if err := c.store.SetPending(c.pending); err != nil {
		t.Fatalf("setting the pending block: %v", err)
	}
	return c
}

// add adds b on top of the chain and records it as the store has it.
func (c *testChain) add(t testing.TB, b *backend.Block, uncles ...*backend.Uncle) {
	t.Helper()
	if n := len(c.blocks); n > 0 {
		b.ParentHash = c.blocks[n-1].Hash
	}
	if err := c.store.AddBlock(b, uncles...); err != nil {
		t.Fatalf("adding block %d: %v", b.Number, err)
	}
	stored, err := c.store.BlockByNumber(context.Background(), backend.BlockNumber(b.Number))
	if err != nil {
		t.Fatalf("reading back block %d: %v", b.Number, err)
	}
	c.blocks = append(c.blocks, stored)
}

// ---- Backends that misbehave ------------------------------------------------

// secretPath is a server-side detail that a backend error names and that
// must never reach a client.
const secretPath = "/var/lib/secret.db"

var errDisk = errors.New(secretPath + ": disk I/O error")

// failingBackend fails every lookup.
type failingBackend struct{}

func (failingBackend) ChainID(context.Context) (uint64, error) { return 0, errDisk }

func (failingBackend) BlockByNumber(context.Context, backend.BlockNumber) (*backend.Block, error) {
	return nil, errDisk
}

func (failingBackend) BlockByHash(context.Context, backend.Hash) (*backend.Block, error) {
	return nil, errDisk
}

func (failingBackend) UncleByBlockHashAndIndex(context.Context, backend.Hash, uint64) (*backend.Uncle, error) {
	return nil, errDisk
}

// panicBlock is the block number for which panickingBackend panics.
const panicBlock = 13

// panickingBackend serves a store, but panics when asked for block 13 by
// number, and for any uncle.
type panickingBackend struct{ *memstore.Store }

func (b panickingBackend) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	if n == panicBlock {
		panic("index out of range in the block cache")
	}
	return b.Store.BlockByNumber(ctx, n)
}

func (panickingBackend) UncleByBlockHashAndIndex(context.Context, backend.Hash, uint64) (*backend.Uncle, error) {
	panic(errors.New("uncle cache corrupted"))
}

// blockingBackend answers nothing until the request's context is done.
type blockingBackend struct{}

func (blockingBackend) ChainID(ctx context.Context) (uint64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (blockingBackend) BlockByNumber(ctx context.Context, _ backend.BlockNumber) (*backend.Block, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (blockingBackend) BlockByHash(ctx context.Context, _ backend.Hash) (*backend.Block, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (blockingBackend) UncleByBlockHashAndIndex(ctx context.Context, _ backend.Hash, _ uint64) (*backend.Uncle, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// ---- HTTP and JSON-RPC helpers ----------------------------------------------

// rawClient does not ask for gzip by itself, nor decompress what it gets,
// so that tests see the Accept-Encoding they set and the bytes sent back.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// newRequest builds a request; header holds name, value pairs.
func newRequest(t testing.TB, method, url, body string, header ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// send sends req and returns the response with its body read.
func send(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL.Path, err)
	}
	return resp, body
}

// rpcRequest returns the body of a call with id 1; an empty params leaves
// the member out.
func rpcRequest(method, params string) string {
	if params == "" {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `"}`
	}
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
}

// call posts body to srv and returns its single answer, which must come
// with status 200.
func call(t testing.TB, srv *httptest.Server, body string) answer {
	t.Helper()
	status, out := post(t, srv, body)
	if status != http.StatusOK {
		t.Fatalf("request %s: status %d, want 200; body %s", body, status, out)
	}
	return parseAnswer(t, out)
}

// callBatch posts a batch to srv and returns its answers, which must come
// as a JSON array with status 200.
func callBatch(t testing.TB, srv *httptest.Server, body string) []answer {
	t.Helper()
	status, out := post(t, srv, body)
	if status != http.StatusOK {
		t.Fatalf("batch %s: status %d, want 200; body %s", body, status, out)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("batch %s: answer %s is not a JSON array: %v", body, out, err)
	}
	answers := make([]answer, len(raw))
	for i, r := range raw {
		answers[i] = parseAnswer(t, r)
	}
	return answers
}

// checkError checks that a is an error answer with the given code and
// message, and no result.
func checkError(t testing.TB, a answer, code int, message string) {
	t.Helper()
	switch {
	case a.Error == nil:
		t.Errorf("answer has result %.200s, want error %d %q", a.Result, code, message)
	case a.Error.Code != code || a.Error.Message != message:
		t.Errorf("error = %d %q, want %d %q", a.Error.Code, a.Error.Message, code, message)
	case a.Result != nil:
		t.Errorf("error answer also has a result: %.200s", a.Result)
	}
}

// resultObject returns the result of a, which must be a JSON object.
func resultObject(t testing.TB, a answer) map[string]any {
	t.Helper()
	if a.Error != nil {
		t.Fatalf("answer is error %d %q, want a result", a.Error.Code, a.Error.Message)
	}
	obj, ok := decode(t, a.Result).(map[string]any)
	if !ok {
		t.Fatalf("result is %.200s, want an object", a.Result)
	}
	return obj
}

// checkNullResult checks that a is a successful answer with a null result.
func checkNullResult(t testing.TB, a answer) {
	t.Helper()
	if a.Error != nil {
		t.Errorf("answer is error %d %q, want result null", a.Error.Code, a.Error.Message)
	} else if string(a.Result) != "null" {
		t.Errorf("result is %.200s, want null", a.Result)
	}
}

// checkRefusal checks an answer that never reached JSON-RPC: the status,
// and a JSON-RPC error body with a null id.
func checkRefusal(t testing.TB, status int, body []byte, wantStatus int) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("status %d, want %d; body %s", status, wantStatus, body)
	}
	a := parseAnswer(t, body)
	if string(a.ID) != "null" {
		t.Errorf("refusal has id %s, want null", a.ID)
	}
	if a.Error == nil || a.Error.Message == "" {
		t.Errorf("refusal %s has no error message", body)
	}
	if a.Result != nil {
		t.Errorf("refusal %s has a result", body)
	}
}

// checkBlockNumber checks the "number" member of a block object.
func checkBlockNumber(t testing.TB, block map[string]any, want string) {
	t.Helper()
	if got := block["number"]; got != want {
		t.Errorf("number = %v, want %s", got, want)
	}
}

func hexU256(z *uint256.Int) string { return z.Hex() }

// withDeadline gives every request a context that expires after d.
func withDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// lockedBuffer is a log destination safe to read while handlers write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ---- HTTP ---------------------------------------------------------------------

// checkLatestOr checks the answer to a request for the test chain's latest
// block: refused with wantStatus, or, when that is 200, block 3.
func checkLatestOr(t testing.TB, status int, out []byte, wantStatus int) {
	t.Helper()
	if wantStatus != http.StatusOK {
		checkRefusal(t, status, out, wantStatus)
		return
	}
	if status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", status, out)
	}
	checkBlockNumber(t, resultObject(t, parseAnswer(t, out)), "0x3")
}

func TestHTTPMethodNotAllowed(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	body := rpcRequest("eth_getBlockByNumber", `["latest",false]`)
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		t.Run(method, func(t *testing.T) {
			resp, out := send(t, newRequest(t, method, srv.URL+"/v3/"+testKey, body, "Content-Type", "application/json"))
			checkRefusal(t, resp.StatusCode, out, http.StatusMethodNotAllowed)
			if allow := resp.Header.Get("Allow"); allow != "POST" {
				t.Errorf("Allow: %q, want POST", allow)
			}
		})
	}
}

func TestHTTPContentType(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	body := rpcRequest("eth_getBlockByNumber", `["latest",false]`)
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
			req := newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, body)
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
	body := rpcRequest("eth_getBlockByNumber", `["latest",false]`)
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
			status, out := postTo(t, srv.URL+tc.path, "application/json", body)
			checkLatestOr(t, status, out, tc.want)
		})
	}
}

func TestHTTPKeys(t *testing.T) {
	store := newTestChain(t).store
	body := rpcRequest("eth_getBlockByNumber", `["latest",false]`)
	serve := func(t *testing.T, opts ...blockrpc.Option) *httptest.Server {
		srv := httptest.NewServer(blockrpc.NewHandler(blockrpc.NewService(store), opts...))
		t.Cleanup(srv.Close)
		return srv
	}
	postKey := func(t *testing.T, srv *httptest.Server, key string) (int, []byte) {
		t.Helper()
		return postTo(t, srv.URL+"/v3/"+key, "application/json", body)
	}

	t.Run("revoked key", func(t *testing.T) {
		keys := blockrpc.NewKeySet("alice", "bob")
		srv := serve(t, blockrpc.WithKeys(keys))
		status, out := postKey(t, srv, "alice")
		checkLatestOr(t, status, out, http.StatusOK)
		keys.Revoke("alice")
		status, out = postKey(t, srv, "alice")
		checkRefusal(t, status, out, http.StatusUnauthorized)
		status, out = postKey(t, srv, "bob")
		checkLatestOr(t, status, out, http.StatusOK)
	})
	t.Run("added key", func(t *testing.T) {
		keys := blockrpc.NewKeySet()
		srv := serve(t, blockrpc.WithKeys(keys))
		status, out := postKey(t, srv, "carol")
		checkRefusal(t, status, out, http.StatusUnauthorized)
		keys.Add("carol")
		status, out = postKey(t, srv, "carol")
		checkLatestOr(t, status, out, http.StatusOK)
	})
	t.Run("no configuration refuses everything", func(t *testing.T) {
		srv := serve(t)
		for _, key := range []string{testKey, "anything", "0"} {
			status, out := postKey(t, srv, key)
			checkRefusal(t, status, out, http.StatusUnauthorized)
		}
	})
	t.Run("AnyKey", func(t *testing.T) {
		srv := serve(t, blockrpc.WithKeys(blockrpc.AnyKey))
		for _, key := range []string{testKey, "anything", "0"} {
			status, out := postKey(t, srv, key)
			checkLatestOr(t, status, out, http.StatusOK)
		}
		status, out := postKey(t, srv, "")
		checkRefusal(t, status, out, http.StatusUnauthorized)
	})
	t.Run("KeyFunc sees the key", func(t *testing.T) {
		var mu sync.Mutex
		var seen []string
		srv := serve(t, blockrpc.WithKeys(blockrpc.KeyFunc(func(_ context.Context, key string) (bool, error) {
			mu.Lock()
			seen = append(seen, key)
			mu.Unlock()
			return key == "good", nil
		})))
		status, out := postKey(t, srv, "good")
		checkLatestOr(t, status, out, http.StatusOK)
		status, out = postKey(t, srv, "bad")
		checkRefusal(t, status, out, http.StatusUnauthorized)
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff([]string{"good", "bad"}, seen); diff != "" {
			t.Errorf("keys given to the KeyFunc (-want +got):\n%s", diff)
		}
	})
	t.Run("KeyFunc error", func(t *testing.T) {
		srv := serve(t, blockrpc.WithKeys(blockrpc.KeyFunc(func(context.Context, string) (bool, error) {
			return false, errors.New("key database unreachable")
		})))
		status, out := postKey(t, srv, testKey)
		checkRefusal(t, status, out, http.StatusServiceUnavailable)
		if bytes.Contains(out, []byte("unreachable")) {
			t.Errorf("the validator's error reached the client: %s", out)
		}
	})
}

func TestHTTPBodyLimit(t *testing.T) {
	const limit = 200
	srv := newServer(t, newTestChain(t).store, blockrpc.WithBodyLimit(limit))
	url := srv.URL + "/v3/" + testKey
	small := rpcRequest("eth_getBlockByNumber", `["latest",false]`)
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
	h := blockrpc.NewHandler(blockrpc.NewService(newTestChain(t).store),
		blockrpc.WithKeys(blockrpc.NewKeySet(testKey)), blockrpc.WithBodyLimit(0))
	body := rpcRequest("eth_getBlockByNumber", `["latest",false]`)
	req := httptest.NewRequest(http.MethodPost, "/v3/"+testKey, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = 1 << 62 // claimed, never sent

	rec := httptest.NewRecorder()
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Content-Length %d with a %d-byte body: handler panicked: %v", req.ContentLength, len(body), p)
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
	h := blockrpc.NewHandler(blockrpc.NewService(newTestChain(t).store), blockrpc.WithKeys(blockrpc.NewKeySet(testKey)))
	mux := http.NewServeMux()
	mux.Handle("/rpc/", http.StripPrefix("/rpc", h))
	mux.Handle("/strip-slash/", http.StripPrefix("/strip-slash/", h))
	mux.Handle("POST /eth/v3/{key}", h)
	muxed := httptest.NewServer(mux)
	t.Cleanup(muxed.Close)
	bare := httptest.NewServer(h)
	t.Cleanup(bare.Close)

	body := rpcRequest("eth_getBlockByNumber", `["latest",false]`)
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
			status, out := postTo(t, tc.url, "application/json", body)
			checkLatestOr(t, status, out, tc.want)
		})
	}
}

// ---- The JSON-RPC envelope ------------------------------------------------------

// errorAnswer is the JSON of an error answer.
func errorAnswer(id string, code int, message string) string {
	msg, _ := json.Marshal(message)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, code, msg)
}

func TestEnvelopeErrors(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	const params = `,"params":["latest",false]`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"invalid JSON", `{"jsonrpc":"2.0",`, errorAnswer("null", -32700, "parse error")},
		{"empty body", ``, errorAnswer("null", -32700, "parse error")},
		{"only whitespace", " \n\t", errorAnswer("null", -32700, "parse error")},
		{"two values: the first is answered", `{} {}`, errorAnswer("null", -32600, "invalid request")},
		{"unterminated batch", `[{"jsonrpc":"2.0","id":1,"method":"eth_foo"}`, errorAnswer("null", -32700, "parse error")},
		{"number", `1`, errorAnswer("null", -32600, "invalid request")},
		{"string", `"x"`, errorAnswer("null", -32600, "invalid request")},
		{"null", `null`, errorAnswer("null", -32600, "invalid request")},
		{"boolean", `true`, errorAnswer("null", -32600, "invalid request")},
		{"empty object", `{}`, errorAnswer("null", -32600, "invalid request")},
		{"missing jsonrpc", `{"id":7,"method":"eth_getBlockByNumber"` + params + `}`, errorAnswer("7", -32600, "invalid request")},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":7,"method":"eth_getBlockByNumber"` + params + `}`, errorAnswer("7", -32600, "invalid request")},
		{"jsonrpc as a number", `{"jsonrpc":2.0,"id":"seven","method":"eth_getBlockByNumber"` + params + `}`, errorAnswer(`"seven"`, -32600, "invalid request")},
		{"missing method", `{"jsonrpc":"2.0","id":7` + params + `}`, errorAnswer("7", -32600, "invalid request")},
		{"method not a string", `{"jsonrpc":"2.0","id":7,"method":1` + params + `}`, errorAnswer("7", -32600, "invalid request")},
		{"empty method", `{"jsonrpc":"2.0","id":7,"method":""` + params + `}`, errorAnswer("7", -32600, "invalid request")},
		{"notification without jsonrpc", `{"method":"eth_getBlockByNumber"` + params + `}`, errorAnswer("null", -32600, "invalid request")},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"eth_getBlockByNumber"` + params + `}`, errorAnswer("null", -32600, "invalid request")},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"eth_getBlockByNumber"` + params + `}`, errorAnswer("null", -32600, "invalid request")},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"eth_foo"` + params + `}`, errorAnswer("7", -32601, "the method eth_foo does not exist/is not available")},
		{"method name in another case", `{"jsonrpc":"2.0","id":7,"method":"ETH_GETBLOCKBYNUMBER"` + params + `}`, errorAnswer("7", -32601, "the method ETH_GETBLOCKBYNUMBER does not exist/is not available")},
		{"method name too long", `{"jsonrpc":"2.0","id":7,"method":"` + strings.Repeat("m", 2049) + `"}`, errorAnswer("7", -32600, "method name too long: 2049 > 2048")},
		{"longest method name", `{"jsonrpc":"2.0","id":7,"method":"` + strings.Repeat("m", 2048) + `"}`, errorAnswer("7", -32601, "the method "+strings.Repeat("m", 2048)+" does not exist/is not available")},
		{"method of another namespace", `{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":[]}`, errorAnswer("7", -32601, "the method eth_getBalance does not exist/is not available")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := post(t, srv, tc.body)
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200; body %s", status, out)
			}
			parseAnswer(t, out) // a single answer object
			if diff := cmp.Diff(decode(t, []byte(tc.want)), decode(t, out)); diff != "" {
				t.Errorf("request %s: answer differs (-want +got):\n%s", tc.body, diff)
			}
		})
	}
}

func TestEnvelopeMembers(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, tc := range []struct {
		name, body string
	}{
		{"member order", `{"params":["0x1",false],"method":"eth_getBlockByNumber","id":1,"jsonrpc":"2.0"}`},
		{"whitespace", " \n{ \"jsonrpc\" : \"2.0\" ,\t\"id\" : 1 , \"method\" : \"eth_getBlockByNumber\" , \"params\" : [ \"0x1\" , false ] }\n"},
		{"keys in another case", `{"JSONRPC":"2.0","Id":1,"Method":"eth_getBlockByNumber","PARAMS":["0x1",false]}`},
		{"escaped method name", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlock\u0042yNumber","params":["0x1",false]}`},
		{"escaped version", `{"jsonrpc":"2\u002e0","id":1,"method":"eth_getBlockByNumber","params":["0x1",false]}`},
		{"unknown members", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",false],"extra":{"x":[1,2]}}`},
		{"last duplicate wins", `{"jsonrpc":"2.0","id":1,"method":"eth_foo","method":"eth_getBlockByNumber","params":["0x1",false]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, srv, tc.body)
			if string(a.ID) != "1" {
				t.Errorf("id %s, want 1", a.ID)
			}
			checkBlockNumber(t, resultObject(t, a), "0x1")
		})
	}
}

func TestEnvelopeIDEcho(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, id := range []string{
		`1`,
		`0`,
		`-7`,
		`1.50`,
		`1e3`,
		`123456789012345678901234567890123456789`,
		`"abc"`,
		`""`,
		`"a \"quoted\" \\ \u00e9 \n word"`,
		`"0x1"`,
		`null`,
		`true`,
	} {
		t.Run(id, func(t *testing.T) {
			a := call(t, srv, `{"jsonrpc":"2.0","id":`+id+`,"method":"eth_getBlockByNumber","params":["latest",false]}`)
			if string(a.ID) != id {
				t.Errorf("id echoed as %s, want %s exactly", a.ID, id)
			}
			checkBlockNumber(t, resultObject(t, a), "0x3")
		})
	}
	// An error answer echoes the id too.
	a := call(t, srv, `{"jsonrpc":"2.0","id":1.50,"method":"eth_foo"}`)
	if string(a.ID) != "1.50" {
		t.Errorf("error answer: id echoed as %s, want 1.50", a.ID)
	}
	checkError(t, a, -32601, "the method eth_foo does not exist/is not available")
}

func TestEnvelopeNotifications(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, tc := range []struct {
		name, body string
	}{
		{"call", `{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]}`},
		{"unknown method", `{"jsonrpc":"2.0","method":"eth_foo"}`},
		{"invalid params", `{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["0x01"]}`},
		{"batch of notifications", `[{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]},{"jsonrpc":"2.0","method":"eth_foo"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, tc.body, "Content-Type", "application/json"))
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want 200", resp.StatusCode)
			}
			if len(out) != 0 {
				t.Errorf("a notification was answered: %s", out)
			}
		})
	}
}

// summary describes an answer in a line: its id, then "result" or the
// error's code and message.
func summary(a answer) string {
	if a.Error != nil {
		return fmt.Sprintf("%s error %d %s", a.ID, a.Error.Code, a.Error.Message)
	}
	return fmt.Sprintf("%s result", a.ID)
}

func TestBatch(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	const (
		notification = `{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]}`
		unknown      = `{"jsonrpc":"2.0","id":"x","method":"eth_foo"}`
	)
	byNumber := func(id, number string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"eth_getBlockByNumber","params":["` + number + `",false]}`
	}
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{
			name: "answers in request order",
			body: "[" + byNumber("3", "0x2") + "," + byNumber("1", "0x0") + "," + byNumber("2", "0x1") + "]",
			want: []string{"3 result", "1 result", "2 result"},
		},
		{
			name: "notifications omitted",
			body: "[" + notification + "," + byNumber("3", "0x2") + "," + notification + "," + unknown + "," + notification + "]",
			want: []string{"3 result", `"x" error -32601 the method eth_foo does not exist/is not available`},
		},
		{
			name: "elements that are not objects",
			body: `[1, "x", null, true, [], ` + byNumber("5", "0x0") + `]`,
			want: []string{
				"null error -32600 invalid request",
				"null error -32600 invalid request",
				"null error -32600 invalid request",
				"null error -32600 invalid request",
				"null error -32600 invalid request",
				"5 result",
			},
		},
		{
			name: "invalid calls keep their ids",
			body: `[{"id":1,"method":"eth_foo"},{"jsonrpc":"2.0","id":{},"method":"eth_foo"},{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":[]}]`,
			want: []string{
				"1 error -32600 invalid request",
				"null error -32600 invalid request",
				"2 error -32602 missing value for required argument 0",
			},
		},
		{
			name: "single call",
			body: " [ " + byNumber("9", "latest") + " ] ",
			want: []string{"9 result"},
		},
		{
			name: "nested batch",
			body: "[[" + byNumber("1", "latest") + "]]",
			want: []string{"null error -32600 invalid request"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range callBatch(t, srv, tc.body) {
				got = append(got, summary(a))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("batch %s: answers differ (-want +got):\n%s", tc.body, diff)
			}
		})
	}

	t.Run("results match their calls", func(t *testing.T) {
		answers := callBatch(t, srv, "["+byNumber("1", "0x2")+","+byNumber("2", "0x0")+","+byNumber("3", "latest")+"]")
		for i, want := range []string{"0x2", "0x0", "0x3"} {
			checkBlockNumber(t, resultObject(t, answers[i]), want)
		}
	})
	t.Run("empty batch", func(t *testing.T) {
		for _, body := range []string{`[]`, " [ \n ] "} {
			status, out := post(t, srv, body)
			if status != http.StatusOK {
				t.Errorf("status %d, want 200", status)
			}
			// A single error, not an array.
			checkError(t, parseAnswer(t, out), -32600, "empty batch")
			if id := parseAnswer(t, out).ID; string(id) != "null" {
				t.Errorf("id %s, want null", id)
			}
		}
	})
}

func TestBatchLimit(t *testing.T) {
	store := newTestChain(t).store
	calls := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["0x0",false]}`, 10+i)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	const notification = `{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]}`

	limited := newServer(t, store, blockrpc.WithBatchLimit(2))
	t.Run("at the limit", func(t *testing.T) {
		if answers := callBatch(t, limited, calls(2)); len(answers) != 2 {
			t.Errorf("%d answers, want 2", len(answers))
		}
	})
	t.Run("over the limit", func(t *testing.T) {
		answers := callBatch(t, limited, calls(3))
		if len(answers) != 1 {
			t.Fatalf("%d answers, want one error", len(answers))
		}
		checkError(t, answers[0], -32600, "batch too large")
		if string(answers[0].ID) != "10" {
			t.Errorf("id %s, want 10: the first call's", answers[0].ID)
		}
	})
	t.Run("first call after a notification and an invalid element", func(t *testing.T) {
		answers := callBatch(t, limited, "["+notification+`,1,{"jsonrpc":"2.0","id":"first","method":"eth_foo"},{"jsonrpc":"2.0","id":2,"method":"eth_foo"}]`)
		if len(answers) != 1 {
			t.Fatalf("%d answers, want one error", len(answers))
		}
		checkError(t, answers[0], -32600, "batch too large")
		if string(answers[0].ID) != `"first"` {
			t.Errorf(`id %s, want "first": the first call's`, answers[0].ID)
		}
	})
	t.Run("no call at all", func(t *testing.T) {
		answers := callBatch(t, limited, "["+notification+","+notification+","+notification+"]")
		if len(answers) != 1 {
			t.Fatalf("%d answers, want one error", len(answers))
		}
		checkError(t, answers[0], -32600, "batch too large")
		if string(answers[0].ID) != "null" {
			t.Errorf("id %s, want null", answers[0].ID)
		}
	})
	t.Run("default limit", func(t *testing.T) {
		srv := newServer(t, store)
		if answers := callBatch(t, srv, calls(blockrpc.DefaultBatchLimit)); len(answers) != blockrpc.DefaultBatchLimit {
			t.Errorf("%d answers to %d calls", len(answers), blockrpc.DefaultBatchLimit)
		}
		answers := callBatch(t, srv, calls(blockrpc.DefaultBatchLimit+1))
		if len(answers) != 1 {
			t.Fatalf("%d answers, want one error", len(answers))
		}
		checkError(t, answers[0], -32600, "batch too large")
	})
	t.Run("no limit", func(t *testing.T) {
		srv := newServer(t, store, blockrpc.WithBatchLimit(0))
		n := blockrpc.DefaultBatchLimit + 1
		answers := callBatch(t, srv, calls(n))
		if len(answers) != n {
			t.Fatalf("%d answers to %d calls", len(answers), n)
		}
		for _, a := range answers {
			if a.Error != nil {
				t.Fatalf("answer %s: error %d %q", a.ID, a.Error.Code, a.Error.Message)
			}
		}
	})
}

func TestBatchResponseLimit(t *testing.T) {
	// Every block answer is over 1 KiB: the first call uses up the limit.
	srv := newServer(t, newTestChain(t).store, blockrpc.WithResponseLimit(100))
	byNumber := func(id, number string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"eth_getBlockByNumber","params":["` + number + `",true]}`
	}
	const notification = `{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]}`

	t.Run("batch", func(t *testing.T) {
		body := "[" + byNumber("1", "0x1") + "," + notification + "," + byNumber("2", "0x2") + "," + byNumber(`"three"`, "latest") + "," + notification + "]"
		var got []string
		for _, a := range callBatch(t, srv, body) {
			got = append(got, summary(a))
		}
		want := []string{
			"1 result",
			"2 error -32003 response too large",
			`"three" error -32003 response too large`,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answers differ (-want +got):\n%s", diff)
		}
	})
	t.Run("single call", func(t *testing.T) {
		// The limit is on a batch's answers; a single answer is whole.
		checkBlockNumber(t, resultObject(t, call(t, srv, byNumber("1", "0x1"))), "0x1")
	})
}

// ---- Parameters -------------------------------------------------------------------

// paramCase is a params value and the -32602 message it gets, or "" when it
// is accepted.
type paramCase struct {
	params string // "" leaves the member out
	want   string
}

func runParamCases(t *testing.T, srv *httptest.Server, method string, cases []paramCase) {
	t.Helper()
	for _, tc := range cases {
		name := tc.params
		if name == "" {
			name = "no params"
		}
		t.Run(name, func(t *testing.T) {
			a := call(t, srv, rpcRequest(method, tc.params))
			if string(a.ID) != "1" {
				t.Errorf("id %s, want 1", a.ID)
			}
			if tc.want != "" {
				checkError(t, a, -32602, tc.want)
				return
			}
			if a.Error != nil {
				t.Errorf("params %s: error %d %q, want them accepted", tc.params, a.Error.Code, a.Error.Message)
			}
		})
	}
}

func TestParamsGetBlockByNumber(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	runParamCases(t, srv, "eth_getBlockByNumber", []paramCase{
		{`["0xA",false]`, ""},
		{`["0XA",false]`, ""},
		{`["0xa",true]`, ""},
		{`["0x0",true]`, ""},
		{`["0x7fffffffffffffff",false]`, ""},
		{`["latest",false]`, ""},
		{`["earliest",false]`, ""},
		{`["pending",false]`, ""},
		{`["safe",false]`, ""},
		{`["finalized",false]`, ""},
		{`[ "latest" , true ]`, ""},
		{`["0x01",false]`, "invalid argument 0: hex number with leading zero digits"},
		{`["0x00",false]`, "invalid argument 0: hex number with leading zero digits"},
		{`["0x",false]`, `invalid argument 0: hex string "0x"`},
		{`["",false]`, "invalid argument 0: empty hex string"},
		{`["10",false]`, "invalid argument 0: hex string without 0x prefix"},
		{`["0xg",false]`, "invalid argument 0: invalid hex string"},
		{`["0x1g",false]`, "invalid argument 0: invalid hex string"},
		{`["0x8000000000000000",false]`, "invalid argument 0: block number larger than int64"},
		{`["0xffffffffffffffff",false]`, "invalid argument 0: block number larger than int64"},
		{`["0x10000000000000000",false]`, "invalid argument 0: hex number > 64 bits"},
		{`[5,false]`, "invalid argument 0: hex string without 0x prefix"},
		{`[null,false]`, "invalid argument 0: hex string without 0x prefix"},
		{`["Latest",false]`, "invalid argument 0: hex string without 0x prefix"},
		{`["LATEST",false]`, "invalid argument 0: hex string without 0x prefix"},
		{`[" latest",false]`, "invalid argument 0: hex string without 0x prefix"},
		{`["latest","true"]`, "invalid argument 1: json: cannot unmarshal string into Go value of type bool"},
		{`["latest",null]`, "invalid argument 1: json: cannot unmarshal null into Go value of type bool"},
		{`["latest",1]`, "invalid argument 1: json: cannot unmarshal number into Go value of type bool"},
		{`["latest",0]`, "invalid argument 1: json: cannot unmarshal number into Go value of type bool"},
		{`["latest",{}]`, "invalid argument 1: json: cannot unmarshal object into Go value of type bool"},
		{`["latest",[true]]`, "invalid argument 1: json: cannot unmarshal array into Go value of type bool"},
		{``, "missing value for required argument 0"},
		{`null`, "missing value for required argument 0"},
		{`[]`, "missing value for required argument 0"},
		{`["latest"]`, "missing value for required argument 1"},
		{`["latest",true,3]`, "too many arguments, want at most 2"},
		{`["latest",true,null]`, "too many arguments, want at most 2"},
		{`{"0":"latest","1":true}`, "non-array args"},
		{`"latest"`, "non-array args"},
		{`["0x01",true,3]`, "invalid argument 0: hex number with leading zero digits"},
		{`["latest","x",3]`, "invalid argument 1: json: cannot unmarshal string into Go value of type bool"},
	})
}

func TestParamsGetUncleByBlockHashAndIndex(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	hash := `"` + c.blocks[3].Hash.String() + `"`
	short := `"` + c.blocks[3].Hash.String()[:64] + `"` // 62 digits
	noPrefix := `"` + c.blocks[3].Hash.String()[2:] + `"`
	upper := `"0x` + strings.ToUpper(c.blocks[3].Hash.String()[2:]) + `"`
	notHex := `"0x` + strings.Repeat("zz", 32) + `"`
	runParamCases(t, srv, "eth_getUncleByBlockHashAndIndex", []paramCase{
		{`[` + hash + `,"0x0"]`, ""},
		{`[` + hash + `,"0X0"]`, ""},
		{`[` + hash + `,"0x1"]`, ""},
		{`[` + upper + `,"0x0"]`, ""},
		{`[` + hash + `,"0xffffffffffffffff"]`, ""},
		{`[` + short + `,"0x0"]`, "invalid argument 0: hex string has length 62, want 64 for common.Hash"},
		{`[` + noPrefix + `,"0x0"]`, "invalid argument 0: json: cannot unmarshal hex string without 0x prefix into Go value of type common.Hash"},
		{`[` + notHex + `,"0x0"]`, "invalid argument 0: json: cannot unmarshal invalid hex string into Go value of type common.Hash"},
		{`["0x123","0x0"]`, "invalid argument 0: json: cannot unmarshal hex string of odd length into Go value of type common.Hash"},
		{`[1,"0x0"]`, "invalid argument 0: json: cannot unmarshal non-string into Go value of type common.Hash"},
		{`[` + hash + `,"0x01"]`, "invalid argument 1: json: cannot unmarshal hex number with leading zero digits into Go value of type hexutil.Uint"},
		{`[` + hash + `,"0x"]`, `invalid argument 1: json: cannot unmarshal hex string "0x" into Go value of type hexutil.Uint`},
		{`[` + hash + `,""]`, "invalid argument 1: json: cannot unmarshal empty hex string into Go value of type hexutil.Uint"},
		{`[` + hash + `,"1"]`, "invalid argument 1: json: cannot unmarshal hex string without 0x prefix into Go value of type hexutil.Uint"},
		{`[` + hash + `,"0xg"]`, "invalid argument 1: json: cannot unmarshal invalid hex string into Go value of type hexutil.Uint"},
		{`[` + hash + `,"0x10000000000000000"]`, "invalid argument 1: json: cannot unmarshal hex number > 64 bits into Go value of type hexutil.Uint"},
		{`[` + hash + `,0]`, "invalid argument 1: json: cannot unmarshal non-string into Go value of type hexutil.Uint"},
		{`[` + hash + `,null]`, "invalid argument 1: json: cannot unmarshal non-string into Go value of type hexutil.Uint"},
		{``, "missing value for required argument 0"},
		{`[]`, "missing value for required argument 0"},
		{`[` + hash + `]`, "missing value for required argument 1"},
		{`[` + hash + `,"0x0","0x0"]`, "too many arguments, want at most 2"},
		{`{"hash":` + hash + `}`, "non-array args"},
		{`[` + short + `,"0x0",3]`, "invalid argument 0: hex string has length 62, want 64 for common.Hash"},
	})
}

// ---- Results ---------------------------------------------------------------------

// checkBlockObject checks what every block answer has: a hash, or null for
// the pending block, and a totalDifficulty member.
func checkBlockObject(t testing.TB, block map[string]any) {
	t.Helper()
	if _, ok := block["totalDifficulty"]; !ok {
		t.Errorf("block %v has no totalDifficulty member", block["number"])
	}
	for _, member := range []string{"hash", "parentHash", "number", "transactions", "uncles", "difficulty", "size"} {
		if _, ok := block[member]; !ok {
			t.Errorf("block %v has no %s member", block["number"], member)
		}
	}
}

func TestGetBlockByNumberResults(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	svc := blockrpc.NewService(c.store)
	for _, tc := range []struct {
		param string
		want  int // the canonical block answered, -1 for null
	}{
		{"0x0", 0},
		{"0x1", 1},
		{"0x2", 2},
		{"0x3", 3},
		{"0x4", -1}, // the pending block is not canonical
		{"0xA", -1},
		{"0x7fffffffffffffff", -1},
		{"latest", 3},
		{"earliest", 0},
		{"safe", -1},
		{"finalized", -1},
	} {
		for _, fullTx := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fullTx=%v", tc.param, fullTx), func(t *testing.T) {
				a := call(t, srv, rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`[%q,%v]`, tc.param, fullTx)))
				if tc.want < 0 {
					checkNullResult(t, a)
					return
				}
				want := c.blocks[tc.want]
				block := resultObject(t, a)
				checkBlockObject(t, block)
				checkBlockNumber(t, block, fmt.Sprintf("0x%x", tc.want))
				if block["hash"] != want.Hash.String() {
					t.Errorf("hash %v, want %s", block["hash"], want.Hash)
				}
				if block["totalDifficulty"] != hexU256(want.TotalDifficulty) {
					t.Errorf("totalDifficulty %v, want %s", block["totalDifficulty"], hexU256(want.TotalDifficulty))
				}
				txs, _ := block["transactions"].([]any)
				if len(txs) != len(want.Transactions) {
					t.Fatalf("%d transactions, want %d", len(txs), len(want.Transactions))
				}
				for i, tx := range txs {
					wantHash := want.Transactions[i].Hash.String()
					if !fullTx {
						if tx != wantHash {
							t.Errorf("transactions[%d] = %v, want the hash %s", i, tx, wantHash)
						}
						continue
					}
					obj, ok := tx.(map[string]any)
					if !ok || obj["hash"] != wantHash || obj["blockHash"] != want.Hash.String() || obj["transactionIndex"] != fmt.Sprintf("0x%x", i) {
						t.Errorf("transactions[%d] = %v, want the object of %s at index %d of block %s", i, tx, wantHash, i, want.Hash)
					}
				}

				// The handler answers what the typed Service returns.
				number, err := backend.ParseBlockNumber(tc.param)
				if err != nil {
					t.Fatal(err)
				}
				typed, err := svc.GetBlockByNumber(context.Background(), number, fullTx)
				if err != nil {
					t.Fatalf("Service.GetBlockByNumber: %v", err)
				}
				typedJSON, err := json.Marshal(typed)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(decode(t, typedJSON), decode(t, a.Result)); diff != "" {
					t.Errorf("answer differs from Service.GetBlockByNumber (-typed +answer):\n%s", diff)
				}
			})
		}
	}
}

func TestGetBlockByNumberTagsFollowTheChain(t *testing.T) {
	// A chain held from block 100 on, without its ancestry.
	c := &testChain{store: memstore.New()}
	for n := uint64(100); n <= 102; n++ {
		c.add(t, &backend.Block{Header: testHeader(n)})
	}
	if err := c.store.SetSafe(101); err != nil {
		t.Fatal(err)
	}
	if err := c.store.SetFinalized(100); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, c.store)
	for _, tc := range []struct{ tag, want string }{
		{"earliest", "0x64"},
		{"latest", "0x66"},
		{"safe", "0x65"},
		{"finalized", "0x64"},
		{"0x65", "0x65"},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			block := resultObject(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["`+tc.tag+`",false]`)))
			checkBlockObject(t, block)
			checkBlockNumber(t, block, tc.want)
			// Without the ancestry the total difficulty is unknown, and
			// the member is there all the same.
			if td, ok := block["totalDifficulty"]; !ok || td != nil {
				t.Errorf("totalDifficulty %v (present %v), want null", td, ok)
			}
		})
	}
	checkNullResult(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["0x63",false]`)))
	checkNullResult(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["pending",false]`)))

	// An empty chain has no block for any tag.
	empty := newServer(t, memstore.New())
	for _, tag := range []string{"earliest", "latest", "pending", "safe", "finalized", "0x0"} {
		checkNullResult(t, call(t, empty, rpcRequest("eth_getBlockByNumber", `["`+tag+`",true]`)))
	}
}

func TestGetBlockByNumberPending(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	for _, fullTx := range []bool{false, true} {
		t.Run(fmt.Sprintf("fullTx=%v", fullTx), func(t *testing.T) {
			block := resultObject(t, call(t, srv, rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`["pending",%v]`, fullTx))))
			checkBlockObject(t, block)
			for _, member := range []string{"hash", "nonce", "logsBloom", "number"} {
				if v, ok := block[member]; !ok || v != nil {
					t.Errorf("%s = %v (present %v), want null", member, v, ok)
				}
			}
			if block["parentHash"] != c.blocks[3].Hash.String() {
				t.Errorf("parentHash %v, want %s", block["parentHash"], c.blocks[3].Hash)
			}
			wantTime := fmt.Sprintf("0x%x", c.pending.Timestamp)
			if block["timestamp"] != wantTime {
				t.Errorf("timestamp %v, want %s", block["timestamp"], wantTime)
			}
			txs, _ := block["transactions"].([]any)
			if len(txs) != 1 {
				t.Fatalf("transactions %v, want one", block["transactions"])
			}
			if !fullTx {
				if s, ok := txs[0].(string); !ok || len(s) != 66 {
					t.Errorf("transactions[0] = %v, want a hash", txs[0])
				}
				return
			}
			tx, ok := txs[0].(map[string]any)
			if !ok {
				t.Fatalf("transactions[0] = %v, want an object", txs[0])
			}
			for _, member := range []string{"blockHash", "blockNumber"} {
				if v, ok := tx[member]; !ok || v != nil {
					t.Errorf("transaction %s = %v (present %v), want null", member, v, ok)
				}
			}
			if tx["blockTimestamp"] != wantTime {
				t.Errorf("transaction blockTimestamp %v, want %s", tx["blockTimestamp"], wantTime)
			}
			if tx["transactionIndex"] != "0x0" {
				t.Errorf("transaction transactionIndex %v, want 0x0", tx["transactionIndex"])
			}
		})
	}
	t.Run("cleared", func(t *testing.T) {
		if err := c.store.SetPending(nil); err != nil {
			t.Fatal(err)
		}
		checkNullResult(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["pending",true]`)))
	})
}

func TestGetBlockByNumberSafeAndFinalized(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	get := func(tag string) answer {
		return call(t, srv, rpcRequest("eth_getBlockByNumber", `["`+tag+`",false]`))
	}
	checkNullResult(t, get("safe"))
	checkNullResult(t, get("finalized"))
	if err := c.store.SetSafe(2); err != nil {
		t.Fatal(err)
	}
	if err := c.store.SetFinalized(1); err != nil {
		t.Fatal(err)
	}
	checkBlockNumber(t, resultObject(t, get("safe")), "0x2")
	checkBlockNumber(t, resultObject(t, get("finalized")), "0x1")
}

func TestGetBlockByHash(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	byHash := func(hash backend.Hash, fullTx bool) answer {
		return call(t, srv, rpcRequest("eth_getBlockByHash", fmt.Sprintf(`[%q,%v]`, hash, fullTx)))
	}
	for n, b := range c.blocks {
		for _, fullTx := range []bool{false, true} {
			t.Run(fmt.Sprintf("block %d/fullTx=%v", n, fullTx), func(t *testing.T) {
				got := byHash(b.Hash, fullTx)
				block := resultObject(t, got)
				checkBlockObject(t, block)
				want := call(t, srv, rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`["0x%x",%v]`, n, fullTx)))
				if diff := cmp.Diff(decode(t, want.Result), decode(t, got.Result)); diff != "" {
					t.Errorf("block by hash differs from block by number (-number +hash):\n%s", diff)
				}
			})
		}
	}
	t.Run("unknown hash", func(t *testing.T) {
		checkNullResult(t, byHash(backend.Hash{0x12, 0x34}, false))
		checkNullResult(t, byHash(c.uncle.Hash, true)) // an uncle is no block
	})
	t.Run("block off the canonical chain", func(t *testing.T) {
		old := c.blocks[3]
		fork := &backend.Block{Header: testHeader(3)}
		fork.ParentHash = c.blocks[2].Hash
		fork.ExtraData = []byte("a competing block 3")
		if err := c.store.AddBlock(fork); err != nil {
			t.Fatal(err)
		}
		latest := resultObject(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["latest",false]`)))
		if latest["hash"] == old.Hash.String() {
			t.Fatalf("the fork did not become canonical")
		}
		block := resultObject(t, byHash(old.Hash, false))
		if block["hash"] != old.Hash.String() {
			t.Errorf("hash %v, want %s", block["hash"], old.Hash)
		}
	})
	t.Run("params", func(t *testing.T) {
		checkError(t, call(t, srv, rpcRequest("eth_getBlockByHash", `["0x12",false]`)), -32602, "invalid argument 0: hex string has length 2, want 64 for common.Hash")
		checkError(t, call(t, srv, rpcRequest("eth_getBlockByHash", fmt.Sprintf(`[%q]`, c.blocks[0].Hash))), -32602, "missing value for required argument 1")
		checkError(t, call(t, srv, rpcRequest("eth_getBlockByHash", fmt.Sprintf(`[%q,null]`, c.blocks[0].Hash))), -32602, "invalid argument 1: json: cannot unmarshal null into Go value of type bool")
	})
}

func TestGetUncleByBlockHashAndIndex(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	uncleAt := func(hash backend.Hash, index string) answer {
		return call(t, srv, rpcRequest("eth_getUncleByBlockHashAndIndex", fmt.Sprintf(`[%q,%q]`, hash, index)))
	}

	t.Run("found", func(t *testing.T) {
		a := uncleAt(c.blocks[3].Hash, "0x0")
		uncle := resultObject(t, a)
		if _, ok := uncle["transactions"]; ok {
			t.Errorf("the uncle has a transactions member: %v", uncle["transactions"])
		}
		if uncles, ok := uncle["uncles"].([]any); !ok || len(uncles) != 0 {
			t.Errorf("uncles = %v, want []", uncle["uncles"])
		}
		if td, ok := uncle["totalDifficulty"]; !ok {
			t.Error("the uncle has no totalDifficulty member")
		} else if want := new(uint256.Int).Add(c.blocks[1].TotalDifficulty, &c.uncle.Difficulty); td != hexU256(want) {
			t.Errorf("totalDifficulty %v, want %s: its parent's plus its own", td, hexU256(want))
		}
		checkBlockNumber(t, uncle, "0x2")
		for member, want := range map[string]string{
			"hash":       c.uncle.Hash.String(),
			"parentHash": c.blocks[1].Hash.String(),
			"extraData":  "0x" + fmt.Sprintf("%x", "an uncle"),
		} {
			if uncle[member] != want {
				t.Errorf("%s = %v, want %s", member, uncle[member], want)
			}
		}
		if c.blocks[3].Uncles[0] != c.uncle.Hash {
			t.Errorf("block 3 lists uncle %s, the answer is %s", c.blocks[3].Uncles[0], c.uncle.Hash)
		}

		typed, err := blockrpc.NewService(c.store).GetUncleByBlockHashAndIndex(context.Background(), c.blocks[3].Hash, 0)
		if err != nil {
			t.Fatal(err)
		}
		typedJSON, err := json.Marshal(typed)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(decode(t, typedJSON), decode(t, a.Result)); diff != "" {
			t.Errorf("answer differs from Service.GetUncleByBlockHashAndIndex (-typed +answer):\n%s", diff)
		}
	})
	t.Run("index out of range", func(t *testing.T) {
		checkNullResult(t, uncleAt(c.blocks[3].Hash, "0x1"))
		checkNullResult(t, uncleAt(c.blocks[3].Hash, "0xffffffffffffffff"))
	})
	t.Run("block without uncles", func(t *testing.T) {
		checkNullResult(t, uncleAt(c.blocks[2].Hash, "0x0"))
	})
	t.Run("unknown hash", func(t *testing.T) {
		checkNullResult(t, uncleAt(backend.Hash{0xff}, "0x0"))
		checkNullResult(t, uncleAt(c.uncle.Hash, "0x0"))
	})
}

// ---- Failures ----------------------------------------------------------------------

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
		answers := callBatch(t, srv, "["+
			`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",true]},`+
			`{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["0xd",true]},`+
			`{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["0x2",true]}]`)
		var got []string
		for _, a := range answers {
			got = append(got, summary(a))
		}
		want := []string{"1 result", "2 error -32603 method handler crashed", "3 result"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("answers differ (-want +got):\n%s", diff)
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
	h := blockrpc.NewHandler(blockrpc.NewService(blockingBackend{}), blockrpc.WithKeys(blockrpc.NewKeySet(testKey)))

	t.Run("deadline", func(t *testing.T) {
		// The backend waits for the context, however long it takes: the
		// answer does not depend on the duration.
		srv := httptest.NewServer(withDeadline(h, 20*time.Millisecond))
		t.Cleanup(srv.Close)
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
	t.Run("deadline already passed", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v3/"+testKey, strings.NewReader(rpcRequest("eth_getBlockByNumber", `["latest",false]`)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d, want 200; body %s", rec.Code, rec.Body)
		}
		checkError(t, parseAnswer(t, rec.Body.Bytes()), -32002, "request timed out")
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v3/"+testKey, strings.NewReader(rpcRequest("eth_getBlockByNumber", `["latest",false]`)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d, want 200; body %s", rec.Code, rec.Body)
		}
		checkError(t, parseAnswer(t, rec.Body.Bytes()), -32000, "request canceled")
	})
}

func TestLogging(t *testing.T) {
	const (
		secretKey = "sk-live-4f9a0c2e7b1d"
		wrongKey  = "sk-live-0000deadbeef"
	)
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newTestChain(t)

	serve := func(b backend.Backend, keys blockrpc.KeyValidator) *httptest.Server {
		srv := httptest.NewServer(blockrpc.NewHandler(blockrpc.NewService(b), blockrpc.WithKeys(keys), blockrpc.WithLogger(logger)))
		t.Cleanup(srv.Close)
		return srv
	}
	keys := blockrpc.NewKeySet(secretKey)
	failing := serve(failingBackend{}, keys)
	panicking := serve(panickingBackend{c.store}, keys)
	unavailable := serve(c.store, blockrpc.KeyFunc(func(context.Context, string) (bool, error) {
		return false, errors.New("key service down")
	}))

	postWith := func(srv *httptest.Server, key, body string) (int, []byte) {
		return postTo(t, srv.URL+"/v3/"+key, "application/json", body)
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
		{"gzip refused with decimals", "gzip; q=0.000", large, false},
		{"other encodings", "br, deflate", large, false},
		{"small answer", "gzip", small, false},
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
	body := rpcRequest("eth_getBlockByNumber", `["latest",false]`)

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
