// Package answertest asks an http.Handler for a block as a client does,
// for the tests of what a backend's failures look like from the other end
// of blockrpc's handler: the upstream backend's, and the stores' when their
// disk or database fails.
package answertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Path is the path the requests are posted to: a handler asked through it
// must accept any key (blockrpc.AnyKey), or this one.
const Path = "/v3/answertest"

// Answer is a JSON-RPC answer, as a client reads it.
type Answer struct {
	Result json.RawMessage
	Error  *struct {
		Code    int
		Message string
		Data    json.RawMessage
	}
	Body []byte `json:"-"` // the answer as sent
}

// BlockByNumber asks h for eth_getBlockByNumber(number, fullTx).
func BlockByNumber(t testing.TB, h http.Handler, number uint64, fullTx bool) Answer {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x%x",%v]}`, number, fullTx)
	req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	a := Answer{Body: rec.Body.Bytes()}
	if err := json.Unmarshal(a.Body, &a); err != nil {
		t.Fatalf("block %d: the answer %q (HTTP %d): %v", number, a.Body, rec.Code, err)
	}
	return a
}

// CheckBackendFailure checks that a is what a client gets when the
// backend fails: the error -32000 "backend failure" alone, without a
// result, and without anything of why (no data).
func (a Answer) CheckBackendFailure(t testing.TB, what string) {
	t.Helper()
	if a.Result != nil || a.Error == nil || a.Error.Code != -32000 || a.Error.Message != "backend failure" || a.Error.Data != nil {
		t.Errorf("%s: the answer %s; want the error -32000 \"backend failure\" and nothing more", what, a.Body)
	}
}
