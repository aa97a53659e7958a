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
		a := newAccessLog(log, tc.sample, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

// TestLogEntry logs what the handler's account of a request says: the
// route its answer shows, the key id it gives, the method or batch it read,
// and whether the answer was cut.
func TestLogEntry(t *testing.T) {
	for _, tc := range []struct {
		info blockrpc.RequestInfo
		want logEntry
	}{
		{blockrpc.RequestInfo{Status: 200, Calls: 1, Method: "eth_blockNumber", KeyID: "770e6076", Written: 41},
			logEntry{route: "rpc", keyID: "770e6076", rpc: "eth_blockNumber", status: 200, bytes: 41}},
		{blockrpc.RequestInfo{Status: 200, Calls: 1, KeyID: "770e6076", Written: 90},
			logEntry{route: "rpc", keyID: "770e6076", rpc: "other", status: 200, bytes: 90}},
		{blockrpc.RequestInfo{Status: 200, Calls: 3, Batch: true, KeyID: "770e6076", Written: 128},
			logEntry{route: "rpc", keyID: "770e6076", rpc: "batch of 3", status: 200, bytes: 128}},
		{blockrpc.RequestInfo{Status: 200, Calls: 1000, Batch: true, KeyID: "770e6076", Written: 4096, Cut: true},
			logEntry{route: "rpc", keyID: "770e6076", rpc: "batch of 1000", status: 200, bytes: 4096, cut: true}},
		{blockrpc.RequestInfo{Status: 200, KeyID: "770e6076", Written: 52},
			logEntry{route: "rpc", keyID: "770e6076", status: 200, bytes: 52}}, // a parse error
		{blockrpc.RequestInfo{Status: 408, KeyID: "770e6076", Written: 90},
			logEntry{route: "rpc", keyID: "770e6076", status: 408, bytes: 90}},
		{blockrpc.RequestInfo{Status: 401, Written: 70},
			logEntry{route: "rpc", status: 401, bytes: 70}},
		{blockrpc.RequestInfo{Status: 404, Written: 99},
			logEntry{route: "other", status: 404, bytes: 99}},
		{blockrpc.RequestInfo{Status: 405, Written: 80},
			logEntry{status: 405, bytes: 80}},
	} {
		got := entryOf(&outcome{info: tc.info, observed: true}, &statusRecorder{status: 200}, nil)
		if got != tc.want {
			t.Errorf("entryOf(%+v) = %+v, want %+v", tc.info, got, tc.want)
		}
	}
	// Without the handler's account, what the recorder saw.
	rec := &statusRecorder{status: 503, bytes: 12, failed: true}
	if got, want := entryOf(new(outcome), rec, nil), (logEntry{status: 503, bytes: 12, cut: true}); got != want {
		t.Errorf("entryOf(no account) = %+v, want %+v", got, want)
	}
}

// TestLogServerErrorsUnsampled answers 500 without a panic, under a
// sampling that logs one line in 100: every such answer is logged, at
// error; and a panic is logged with its stack, where the operator finds
// what broke.
func TestLogServerErrorsUnsampled(t *testing.T) {
	var buf bytes.Buffer
	a := newAccessLog(slog.New(slog.NewTextHandler(&buf, nil)), 100, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("do") {
		case "fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "panic":
			panic("broken")
		}
	}))
	for _, do := range []string{"", "fail", "fail", "fail", "panic"} {
		a.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v3/k?do="+do, nil))
	}
	logs := buf.String()
	if got := strings.Count(logs, "level=ERROR msg=request method=POST status=500"); got != 4 {
		t.Errorf("%d lines of 500 logged at error, want 4 (three answers and a panic):\n%s", got, logs)
	}
	if !regexp.MustCompile(`panic=broken stack="goroutine \d+`).MatchString(logs) {
		t.Errorf("the panic is not logged with its stack:\n%s", logs)
	}
}
