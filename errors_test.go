package blockrpc

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// ctxKey marks the request context, to see that the log gets it.
type ctxKey struct{}

// contextHandler records, per log message, whether the request's context
// reached the logger.
type contextHandler struct {
	slog.Handler
	sawRequest *[]bool
}

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	*h.sawRequest = append(*h.sawRequest, ctx.Value(ctxKey{}) != nil)
	return h.Handler.Handle(ctx, r)
}

// TestUnknownErrorsStayInTheLog checks that an error the handler does not
// know is answered with a generic message, its details going to the log
// with the request's context.
func TestUnknownErrorsStayInTheLog(t *testing.T) {
	var logs bytes.Buffer
	var sawRequest []bool
	logger := slog.New(contextHandler{slog.NewTextHandler(&logs, nil), &sawRequest})
	h := NewHandler(&Service{}, WithKeys(AnyKey), WithLogger(logger)) // its methods replaced below
	h.methods = map[string]method{
		"secret_error": func(context.Context, []byte, []byte) ([]byte, error) {
			return nil, errors.New("dial tcp 10.1.2.3:5432: password authentication failed")
		},
		"known_error": func(context.Context, []byte, []byte) ([]byte, error) {
			return nil, ErrNoTransactionBodies
		},
	}
	for method, want := range map[string]string{
		"secret_error": `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"internal error"}}`,
		"known_error":  `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"transaction bodies are not available for this block"}}`,
	} {
		req := httptest.NewRequest(http.MethodPost, "/v3/k", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(context.WithValue(req.Context(), ctxKey{}, true))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if got := strings.TrimSpace(w.Body.String()); got != want {
			t.Errorf("%s: answered %s, want %s", method, got, want)
		}
	}
	if !strings.Contains(logs.String(), "password authentication failed") {
		t.Errorf("the unknown error's details are not in the log:\n%s", logs.String())
	}
	if len(sawRequest) == 0 {
		t.Fatal("nothing was logged")
	}
	for i, saw := range sawRequest {
		if !saw {
			t.Errorf("log message %d was written without the request's context", i)
		}
	}
}
