package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc"
)

// TestLogSampling logs one routine request in N and every error, and a
// level above info silences the routine lines but not the errors.
func TestLogSampling(t *testing.T) {
	for _, tc := range []struct {
		level        slog.Level
		sample       uint64
		ok, failures int // lines of each kind logged
	}{
		{slog.LevelInfo, 1, 9, 3},
		{slog.LevelInfo, 3, 3, 3},
		{slog.LevelInfo, 100, 1, 3},
		{slog.LevelWarn, 1, 0, 3},
		{slog.LevelError, 3, 0, 3},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level}))
		a := newAccessLog(log, blockrpc.NewKeySet("k"), tc.sample, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Query().Get("do") {
			case "fail":
				w.WriteHeader(http.StatusServiceUnavailable)
			case "panic":
				panic("broken")
			}
		}))
		for _, do := range []string{"", "", "", "fail", "", "", "", "panic", "", "", "", "panic"} {
			w := httptest.NewRecorder()
			a.ServeHTTP(w, httptest.NewRequest("POST", "/v3/k?do="+do, nil))
			if want := map[string]int{"": 200, "fail": 503, "panic": 500}[do]; w.Code != want {
				t.Errorf("do=%q: status %d, want %d", do, w.Code, want)
			}
		}
		logs := buf.String()
		ok := strings.Count(logs, "level=INFO msg=request")
		failures := strings.Count(logs, "level=ERROR msg=request")
		if ok != tc.ok || failures != tc.failures {
			t.Errorf("level %v, sample %d: %d routine lines and %d errors logged, want %d and %d:\n%s",
				tc.level, tc.sample, ok, failures, tc.ok, tc.failures, logs)
		}
		if !regexp.MustCompile(`level=ERROR msg=request [^\n]*status=500 [^\n]*panic=broken`).MatchString(logs) {
			t.Errorf("the panic is not logged with its value:\n%s", logs)
		}
	}
}

// TestLogLevelFlag silences the request lines with -log-level warn.
func TestLogLevelFlag(t *testing.T) {
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-log-level", "warn")
	url := regexp.MustCompile(`http://\S+/v3/`).FindString(srv.stdout())
	resp, err := http.Post(url+"k", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.stop(t)
	if logs := srv.stderr(); strings.Contains(logs, "level=INFO") {
		t.Errorf("-log-level warn logs at info:\n%s", logs)
	}
}

// TestRoute follows the library's rule for where the key is, and names
// only an accepted key, by its id.
func TestRoute(t *testing.T) {
	a := newAccessLog(slog.New(slog.DiscardHandler), blockrpc.NewKeySet("good"), 1, nil)
	id := keyID("good")
	for path, want := range map[string][2]string{
		"/v3/good":        {"rpc", id},
		"/x/y/v3/good":    {"rpc", id},
		"v3/good":         {"rpc", id},
		"/v3/bad":         {"rpc", ""},
		"/v3/":            {"rpc", ""},
		"/v3":             {"rpc", ""},
		"/V3/good":        {"other", ""},
		"/v3good":         {"other", ""},
		"/v3/good/x":      {"other", ""},
		"/xv3/good":       {"other", ""},
		"/good":           {"other", ""},
		"":                {"other", ""},
		"/health":         {"other", ""},
		"/v3/good/v3/bad": {"rpc", ""},
	} {
		route, gotID := a.route(t.Context(), path)
		if route != want[0] || gotID != want[1] {
			t.Errorf("route(%q) = %q, %q; want %q, %q", path, route, gotID, want[0], want[1])
		}
	}
	if id != "770e6076" {
		t.Errorf("keyID(good) = %s, want the first 4 bytes of its SHA-256", id)
	}
}
