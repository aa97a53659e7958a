package blockrpc_test

// The one stack of helpers the tests talk to the handler with: servers,
// requests, and the checks of what comes back. The chains and backends they
// serve are in testchain_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/google/go-cmp/cmp"
	"github.com/holiman/uint256"
)

const testKey = "test-key"

// ---- Servers -------------------------------------------------------------------

// newHandler is the handler serving b with testKey accepted; opts come
// after, so they can replace the keys.
func newHandler(b backend.Backend, opts ...blockrpc.Option) http.Handler {
	opts = append([]blockrpc.Option{blockrpc.WithKeys(blockrpc.NewKeySet(testKey))}, opts...)
	return blockrpc.NewHandler(blockrpc.NewService(b), opts...)
}

// serve serves h on an httptest server closed when the test ends.
func serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newServer serves b on an httptest server with testKey accepted.
func newServer(t testing.TB, b backend.Backend, opts ...blockrpc.Option) *httptest.Server {
	t.Helper()
	return serve(t, newHandler(b, opts...))
}

// withDeadline gives every request a context that expires after d.
func withDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// ---- Requests ------------------------------------------------------------------

// rawClient does not ask for gzip by itself, nor decompress what it gets,
// so that tests see the Accept-Encoding they set and the bytes sent back.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// rpcRequest returns the body of a call with id 1; an empty params leaves
// the member out.
func rpcRequest(method, params string) string {
	if params == "" {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `"}`
	}
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
}

// latestBlock is a call for the latest block, without its transactions.
var latestBlock = rpcRequest("eth_getBlockByNumber", `["latest",false]`)

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

// postTo posts body as JSON to url and returns the status and the body of
// the answer.
func postTo(t testing.TB, url, body string) (int, []byte) {
	t.Helper()
	resp, out := send(t, newRequest(t, http.MethodPost, url, body, "Content-Type", "application/json"))
	return resp.StatusCode, out
}

// post sends body to the server's endpoint for testKey and returns the
// status and the body of the answer.
func post(t testing.TB, srv *httptest.Server, body string) (int, []byte) {
	t.Helper()
	return postTo(t, srv.URL+"/v3/"+testKey, body)
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

// handlerRequest is a POST of body to /v3/testKey with ctx, for calling a
// handler directly.
func handlerRequest(ctx context.Context, body string) *http.Request {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v3/"+testKey, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return req
}

// serveBody answers body as a POST to /v3/testKey, calling h directly.
func serveBody(h http.Handler, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, handlerRequest(context.Background(), string(body)))
	return rec
}

// ---- Answers -------------------------------------------------------------------

// decode parses JSON into generic values for comparing answers as JSON.
func decode(t testing.TB, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("invalid JSON %q: %v", data, err)
	}
	return v
}

// rpcError is the error member of a JSON-RPC answer.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// answer is a JSON-RPC answer, for checking its parts.
type answer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
}

func parseAnswer(t testing.TB, data []byte) answer {
	t.Helper()
	var a answer
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("answer %q is not a JSON-RPC response: %v", data, err)
	}
	if a.JSONRPC != "2.0" {
		t.Errorf("answer %q has jsonrpc %q", data, a.JSONRPC)
	}
	return a
}

// errorAnswer is the JSON of an error answer.
func errorAnswer(id string, code int, message string) string {
	msg, _ := json.Marshal(message)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, code, msg)
}

// summary describes an answer in a line: its id, then "result" or the
// error's code and message.
func summary(a answer) string {
	if a.Error != nil {
		return fmt.Sprintf("%s error %d %s", a.ID, a.Error.Code, a.Error.Message)
	}
	return fmt.Sprintf("%s result", a.ID)
}

// checkAnswers checks the answers to body, a line of summary each, and
// that no error answer also has a result. It reports whether they were as
// wanted.
func checkAnswers(t testing.TB, body string, answers []answer, want []string) bool {
	t.Helper()
	ok := true
	var got []string
	for _, a := range answers {
		got = append(got, summary(a))
		if a.Error != nil && a.Result != nil {
			t.Errorf("error answer %s also has a result: %.200s", a.ID, a.Result)
			ok = false
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("batch %.300s: answers differ (-want +got):\n%s", body, diff)
		ok = false
	}
	return ok
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

// checkLatestOr checks the answer to latestBlock sent to a server of the
// test chain: refused with wantStatus, or, when that is 200, block 3.
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

func hexU256(z *uint256.Int) string { return z.Hex() }

func repeatHex(s string, n int) string { return strings.Repeat(s, n) }
