package upstream

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestStatusReason checks what of a refusal's body reaches StatusError.
func TestStatusReason(t *testing.T) {
	long := strings.Repeat("é", maxReasonBytes) // two bytes a rune: cut within one
	for _, c := range []struct{ name, body, want string }{
		{"JSON-RPC error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"rejected due to project ID settings"}}`, "rejected due to project ID settings"},
		{"plain text", "invalid project id\nsee the dashboard\n", "invalid project id"},
		{"padded text", "  \r\n too many requests \r\n", "too many requests"},
		{"HTML page", "<html><body><h1>502 Bad Gateway</h1></body></html>", ""},
		{"JSON without an error", `{"message":"Unauthorized"}`, ""},
		{"empty", "", ""},
		{"not UTF-8", "bad \xff key", ""},
		{"long", long, long[:maxReasonBytes] + "…"},
	} {
		got := statusReason([]byte(c.body))
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: %q is not UTF-8", c.name, got)
		}
	}
	// Control characters reach the log quoted, never raw.
	e := &StatusError{Status: 401, Reason: statusReason([]byte("bad\x1b[31m key"))}
	if got, want := e.Error(), `HTTP 401: "bad\x1b[31m key"`; got != want {
		t.Errorf("Error() = %s, want %s", got, want)
	}
}

// TestRetryAnswersBusy checks that a follower's read refused for the bound
// of the answers in flight is tried again without a warning that blames
// the endpoint.
func TestRetryAnswersBusy(t *testing.T) {
	var logs bytes.Buffer
	f := &Follower{
		cfg:        FollowConfig{Timeout: time.Minute},
		log:        slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		first:      time.Millisecond,
		maxBackoff: 50 * time.Millisecond,
	}
	calls := 0
	err := f.retry(context.Background(), "block 7", func(context.Context) error {
		calls++
		switch {
		case calls <= 20:
			return errAnswersBusy
		case calls == 21:
			return errors.New("connection refused")
		}
		return nil
	})
	if err != nil || calls != 22 {
		t.Fatalf("retry: %v after %d calls, want nil after 22", err, calls)
	}
	if n := strings.Count(logs.String(), "request failed"); n != 1 {
		t.Errorf("%d warnings of a failed request, want 1 (the endpoint's failure only):\n%s", n, logs.String())
	}
}
