package main

// The listeners come before the chain: bound before a load or an import,
// and answering while it runs.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// TestPortInUseBeforeImport starts a server whose port is taken, with a
// dump to import into a Pebble store: it fails at once, and the store is
// never made.
func TestPortInUseBeforeImport(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dump := demoDump(t)
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"-addr", taken.Addr().String()}, "address already in use"},
		{[]string{"-addr", "127.0.0.1:0", "-admin", taken.Addr().String()}, "-admin: "},
	} {
		dir := filepath.Join(t.TempDir(), "db")
		args := append(c.flags, "-store", "pebble:"+dir, "-chain", dump)
		log, err := runFails(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("%v: %v, want the port in use (%q)", c.flags, err, c.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: the store was made before the port was found taken (%v):\n%s", c.flags, err, log)
		}
	}
}

// TestAnswersWhileLoading serves a dump that arrives through a named pipe:
// while it loads, the admin listener says the server is alive and not
// ready, and the JSON-RPC listener answers 503 with a JSON-RPC error and a
// Retry-After; once loaded, both serve.
func TestAnswersWhileLoading(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "chain.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipe: %v", err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, logs := new(syncbuf.Buffer), new(syncbuf.Buffer)
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, []string{"-addr", addr, "-admin", "127.0.0.1:0", "-keys", "k", "-chain", fifo}, out, logs, nil)
	}()
	var admin string
	for deadline := time.Now().Add(20 * time.Second); admin == ""; time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`Metrics and health: (http://\S+)/metrics`).FindStringSubmatch(out.String()); m != nil {
			admin = m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended before the load: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin listener before the load:\n%s", out.String())
		}
	}

	rpc, blockNumber := "http://"+addr+"/v3/k", `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`
	if code, body := get(t, admin+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while loading: %d %s, want 200", code, body)
	}
	if code, body := get(t, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "loading") {
		t.Errorf("/readyz while loading: %d %s, want 503 saying the chain loads", code, body)
	}
	resp, body := call(t, http.DefaultClient, rpc, blockNumber)
	var answer struct {
		Error struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || resp.StatusCode != http.StatusServiceUnavailable ||
		answer.Error.Code != -32000 || !strings.Contains(answer.Error.Message, "loading") || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a call while loading: %d, Retry-After %q, %s (%v); want 503, a Retry-After and a JSON-RPC error saying the chain loads",
			resp.StatusCode, resp.Header.Get("Retry-After"), body, err)
	}
	if resp.ContentLength != int64(len(body)) {
		t.Errorf("a call while loading: Content-Length %d for a body of %d bytes, want it given, as the handler's answers give it", resp.ContentLength, len(body))
	}
	// Counted as requests are once the chain is served: in the access log,
	// as a request turned away rather than a fault, and in the metrics.
	line := regexp.MustCompile(`level=(\w+) msg=request method=POST status=503 bytes=` + strconv.Itoa(len(body)) + ` loading=true `)
	for deadline := time.Now().Add(5 * time.Second); !line.MatchString(logs.String()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no request line for the answer while loading:\n%s", logs.String())
		}
	}
	if m := line.FindStringSubmatch(logs.String()); m[1] != "INFO" {
		t.Errorf("the answer while loading is logged at %s, want INFO: a server that loads is not failing", m[1])
	}
	if _, metrics := get(t, admin+"/metrics"); !strings.Contains(metrics, `blockrpc_http_requests_total{status="503"} 1`) {
		t.Errorf("the metrics do not count the answer while loading:\n%s", metrics)
	}

	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	chain, _ := demo.Dump()
	if _, err := w.Write(chain); err != nil {
		t.Fatal(err)
	}
	w.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, _ := get(t, admin+"/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready once the dump was written:\n%s", logs.String())
		}
	}
	if resp, body := call(t, http.DefaultClient, rpc, blockNumber); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result":"0x`) {
		t.Errorf("a call once loaded: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run ended with %v, want a clean shutdown", err)
	}
}

// TestGateCutAsTheHandler has a client go away before the loading answer
// is written: the gate reports the answer cut, as the handler reports its
// own, so that the access log and the cut count tell the two alike.
func TestGateCutAsTheHandler(t *testing.T) {
	gone := func() *http.Request {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := httptest.NewRequest(http.MethodPost, "/v3/k", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`)).WithContext(ctx)
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	var handlerSaw blockrpc.RequestInfo
	h := blockrpc.NewHandler(blockrpc.NewService(memstore.New()), blockrpc.WithKeys(blockrpc.NewKeySet("k")),
		blockrpc.WithObserver(&blockrpc.Observer{Request: func(_ context.Context, i blockrpc.RequestInfo) { handlerSaw = i }}))
	h.ServeHTTP(httptest.NewRecorder(), gone())
	if !handlerSaw.Cut {
		t.Fatalf("the handler's own report: %+v, want Cut", handlerSaw)
	}
	var gateSaw blockrpc.RequestInfo
	g := &gate{loading: answerLoading, observe: func(_ context.Context, i blockrpc.RequestInfo) { gateSaw = i }}
	g.ServeHTTP(httptest.NewRecorder(), gone())
	if !gateSaw.Cut || gateSaw.Status != http.StatusServiceUnavailable {
		t.Errorf("the gate's report of a loading answer to a client gone: %+v, want 503 and Cut", gateSaw)
	}
}

// TestReadTimeoutBoundsHeaders checks that -read-timeout bounds the
// headers too when it is shorter than the servers' own bound on them: a
// client sending its headers slowly holds a connection no longer than
// one sending its body slowly.
func TestReadTimeoutBoundsHeaders(t *testing.T) {
	for _, tc := range []struct {
		read, header time.Duration
	}{
		{200 * time.Millisecond, 200 * time.Millisecond},
		{time.Minute, 10 * time.Second},
	} {
		o, err := parseFlags([]string{"-addr", "127.0.0.1:0", "-read-timeout", tc.read.String()}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		ls, err := listen(o)
		if err != nil {
			t.Fatal(err)
		}
		ls.serve(slog.New(slog.DiscardHandler), o, nil, http.NotFoundHandler(), nil, nil)
		if s := ls.servers[0]; s.ReadHeaderTimeout != tc.header || s.ReadTimeout != tc.read {
			t.Errorf("-read-timeout %v: headers bounded by %v, requests by %v; want %v and %v", tc.read, s.ReadHeaderTimeout, s.ReadTimeout, tc.header, tc.read)
		}
		ls.stop()
	}
}
