package blockrpc_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
)

const testKey = "test-key"

// newServer serves b on an httptest server with testKey accepted.
func newServer(t testing.TB, b backend.Backend, opts ...blockrpc.Option) *httptest.Server {
	t.Helper()
	opts = append([]blockrpc.Option{blockrpc.WithKeys(blockrpc.NewKeySet(testKey))}, opts...)
	srv := httptest.NewServer(blockrpc.NewHandler(blockrpc.NewService(b), opts...))
	t.Cleanup(srv.Close)
	return srv
}

// post sends body to the server's endpoint for testKey and returns the
// status and the body of the answer.
func post(t testing.TB, srv *httptest.Server, body string) (int, []byte) {
	t.Helper()
	return postTo(t, srv.URL+"/v3/"+testKey, "application/json", body)
}

func postTo(t testing.TB, url, contentType, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, contentType, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

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
