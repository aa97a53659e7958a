// Package browser drives the example server's dashboard in a real, headless
// Chromium, as an operator would use it. It is a module of its own so that
// the browser driver never enters the library's build.
package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Environment variables the test reads.
const (
	// chromiumEnv names the browser to run; by default the first of
	// chromium, chromium-browser and google-chrome on the PATH.
	chromiumEnv = "BLOCKRPC_CHROMIUM"
	// requiredEnv makes a missing browser a failure, not a skip: make
	// test sets it, since it installs the browser first.
	requiredEnv = "BLOCKRPC_BROWSER_REQUIRED"
	// artifactsEnv is where the screenshots go, kept; by default a new
	// temporary directory, named in the test's log and kept only when the
	// test fails, so that passing runs leave nothing behind.
	artifactsEnv = "BLOCKRPC_ARTIFACTS"
)

const adminToken = "browser-admin-token-0c7d51e2"

func chromium(t *testing.T) string {
	if p := os.Getenv(chromiumEnv); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (set " + chromiumEnv + ", or install Debian's chromium package: make chromium)"
	if os.Getenv(requiredEnv) != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// server is the example server, built and run as an operator runs it.
type server struct {
	admin, rpc string // base URLs
	stdout     *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startServer(t *testing.T) *server {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "server")
	// The server is built in the repository's workspace, where the
	// library is the checkout's own.
	workspace, err := filepath.Abs(filepath.Join("..", "..", "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	build.Env = append(os.Environ(), "GOWORK="+workspace)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the server: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-keystore", "memory", "-key-refresh", "200ms")
	cmd.Env = append(os.Environ(), "BLOCKRPC_ADMIN_TOKEN="+adminToken)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := new(lockedBuffer)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if strings.Contains(logs.String(), adminToken) {
			t.Error("the server's log holds the admin token")
		}
	})

	s := &server{stdout: new(lockedBuffer)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			fmt.Fprintln(s.stdout, sc.Text())
			if strings.HasPrefix(sc.Text(), "JSON-RPC endpoint:") && !signalled {
				close(ready)
				signalled = true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not start:\n%s\n%s", s.stdout, logs)
	}
	out := s.stdout.String()
	admin := regexp.MustCompile(`Dashboard \(API keys\): (http://\S+)/`).FindStringSubmatch(out)
	rpc := regexp.MustCompile(`JSON-RPC endpoint: (http://\S+/v3/)`).FindStringSubmatch(out)
	if admin == nil || rpc == nil {
		t.Fatalf("no dashboard or endpoint printed:\n%s", out)
	}
	s.admin, s.rpc = admin[1], rpc[1]
	return s
}

// call posts a JSON-RPC body with key and returns the status and body.
func (s *server) call(t *testing.T, key, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(s.rpc+key, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// api reads the admin API as a script would, with the admin token.
func (s *server) api(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", s.admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

const latestBlock = `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",true]}`

// browser is one headless Chromium tab, and where its screenshots go.
type browser struct {
	t         *testing.T
	ctx       context.Context
	artifacts string
	shot      int
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromium(t)
	artifacts := os.Getenv(artifactsEnv)
	if artifacts == "" {
		var err error
		if artifacts, err = os.MkdirTemp("", "blockrpc-dashboard-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if !t.Failed() {
				os.RemoveAll(artifacts)
			}
		})
	} else if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", artifacts)
	// Chromium makes a directory of its own in TMPDIR, which it leaves
	// behind when it is stopped: given one of the test's, removed once
	// the browser is (this cleanup runs after the one below). Removed as
	// far as it can be: a child process of the browser still exiting may
	// keep a file in it, which is not the test's failure.
	tmp, err := os.MkdirTemp("", "blockrpc-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.WindowSize(1280, 900),
		chromedp.NoSandbox, // the tests may run as root, which the sandbox refuses
		chromedp.DisableGPU,
		chromedp.Env("TMPDIR="+tmp), // the last TMPDIR of the environment is the one the browser gets
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc() // stops the browser
	})
	return &browser{t: t, ctx: ctx, artifacts: artifacts}
}

// run runs actions, failing the test with what was being done.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.screenshot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
}

// clear empties an input, as a user selecting its text and deleting it.
func clear(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.querySelector(` + strconv.Quote(sel) + `).value = ''`)
}

// get runs one action that returns a value.
func get[T any](b *browser, what string, action chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, action)
	if err != nil {
		b.screenshot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// screenshot saves the page as it is now, numbered in the order taken.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	b.shot++
	path := filepath.Join(b.artifacts, fmt.Sprintf("%02d-%s.png", b.shot, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Error(err)
	}
}

// html returns the whole page's DOM as it is now, values of inputs
// included, to look for a key in it.
func (b *browser) html() string {
	b.t.Helper()
	return get(b, "reading the page", chromedp.Evaluate[string](
		`document.documentElement.outerHTML + [...document.querySelectorAll('input,textarea')].map(e => e.value).join(' ')`))
}

// waitText waits until the element's text satisfies ok, clicking refresh
// first when given, for up to limit.
func (b *browser) waitText(what, sel string, limit time.Duration, refresh string, ok func(string) bool) string {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	var last string
	for {
		if refresh != "" {
			b.run("refreshing", chromedp.Click(chromedp.CSS(refresh)))
		}
		if len(get(b, "looking for "+sel, chromedp.Nodes(chromedp.CSSAll(sel), chromedp.AtLeast(0)))) > 0 {
			last, _ = chromedp.Run(b.ctx, chromedp.TextContent(chromedp.CSS(sel)))
			if ok(strings.TrimSpace(last)) {
				return strings.TrimSpace(last)
			}
		}
		if time.Now().After(deadline) {
			b.screenshot("timeout")
			b.t.Fatalf("%s: %s is %q after %v", what, sel, last, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// recorder keeps the text of every answer to the page's fetch calls.
const recorder = `
window.blockrpcAnswers = [];
const pageFetch = window.fetch;
window.fetch = async (...args) => {
	const resp = await pageFetch(...args);
	window.blockrpcAnswers.push(await resp.clone().text());
	return resp;
};`

// TestDashboardInBrowser signs in, makes a key, uses it, watches its usage,
// limits it and revokes it, all on the page, and checks at each step what
// a client of the key gets and that no page or answer holds the key once
// it was shown.
func TestDashboardInBrowser(t *testing.T) {
	srv := startServer(t)
	b := newBrowser(t)

	// Every answer the page's own requests get is kept, to look for the
	// key in. The recorder is added by the test, past the page's
	// Content-Security-Policy, as a browser extension would be.
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recorder}); err != nil {
		t.Fatal(err)
	}

	// Signing in: a wrong token first.
	b.run("opening the dashboard", chromedp.Navigate(srv.admin+"/"), chromedp.WaitVisible(chromedp.CSS("#signin")))
	b.screenshot("sign-in")
	b.run("signing in wrongly",
		chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"),
		chromedp.Click(chromedp.CSS("#signin-button")))
	b.waitText("a wrong token refused", "#signin-error", 5*time.Second, "", func(s string) bool { return s != "" })
	b.screenshot("wrong-token")
	b.run("signing in",
		clear("#token"),
		chromedp.SendKeys(chromedp.CSS("#token"), adminToken),
		chromedp.Click(chromedp.CSS("#signin-button")),
		chromedp.WaitVisible(chromedp.CSS("#keys-view")))
	if strings.Contains(b.html(), adminToken) {
		t.Error("the page holds the admin token after signing in")
	}

	// A key, read off the page.
	b.run("creating a key",
		chromedp.SendKeys(chromedp.CSS("#new-label"), "browser test"),
		chromedp.Click(chromedp.CSS("#create-button")),
		chromedp.WaitVisible(chromedp.CSS("#new-key")))
	key := get(b, "reading the key", chromedp.Value(chromedp.CSS("#new-key-value")))
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(key) {
		t.Fatalf("the page shows the new key as %q", key)
	}
	b.screenshot("key-created")
	// The answer that made the key is the first recorded that holds it.
	answers := get(b, "reading the answers", chromedp.Evaluate[[]string](`window.blockrpcAnswers`))
	shownAt := slices.IndexFunc(answers, func(a string) bool { return strings.Contains(a, key) })
	if shownAt < 0 {
		t.Fatalf("none of the page's %d answers holds the key it shows", len(answers))
	}

	status, body := srv.call(t, key, latestBlock)
	if status != http.StatusOK || !strings.Contains(body, `"result":{`) {
		t.Fatalf("eth_getBlockByNumber with the new key: %d %.200s", status, body)
	}
	for range 4 {
		srv.call(t, key, latestBlock)
	}

	b.run("dismissing the key", chromedp.Click(chromedp.CSS("#dismiss-key")), chromedp.WaitNotVisible(chromedp.CSS("#new-key")))
	noKey := func(where string) {
		t.Helper()
		if strings.Contains(b.html(), key) {
			t.Errorf("%s: the page holds the key", where)
		}
	}
	noKey("after dismissing it")

	// Its usage, on the list and in the chart.
	id := get(b, "finding the key's row", chromedp.AttributeValue(chromedp.CSS(`#keys-table tbody tr`), "data-id")).Value
	row := fmt.Sprintf(`#keys-table tr[data-id="%s"]`, id)
	b.waitText("the usage on the list", row+" .requests", 15*time.Second, "#refresh", func(s string) bool { return s == "5" })
	b.screenshot("usage-listed")
	b.run("showing the key", chromedp.Click(chromedp.CSS(row+" .show")), chromedp.WaitVisible(chromedp.CSS("#detail")))
	// Every minute has a bar; the bars' titles say what each counted.
	charted := 0
	deadline := time.Now().Add(10 * time.Second)
	for charted != 5 && time.Now().Before(deadline) {
		charted = get(b, "reading the chart", chromedp.Evaluate[int](`[...document.querySelectorAll('#chart rect.bar title')]
			.map(t => parseInt((t.textContent.match(/— (\d+) request/) || [0, 0])[1], 10))
			.reduce((a, b) => a + b, 0)`))
		time.Sleep(100 * time.Millisecond)
	}
	if charted != 5 {
		t.Errorf("the chart's bars count %d requests, want the 5 made", charted)
	}
	b.screenshot("detail-chart")

	// A limit: one call a second, one at once.
	b.run("limiting the key",
		clear("#edit-rate"), chromedp.SendKeys(chromedp.CSS("#edit-rate"), "0.01"),
		clear("#edit-burst"), chromedp.SendKeys(chromedp.CSS("#edit-burst"), "1"),
		chromedp.Click(chromedp.CSS("#save-button")))
	b.waitText("the new limit listed", row+" .limit", 5*time.Second, "", func(s string) bool { return strings.Contains(s, "0.01") })
	b.screenshot("limited")
	var limited []int
	for range 3 {
		s, _ := srv.call(t, key, latestBlock)
		limited = append(limited, s)
	}
	if limited[0] != http.StatusOK || limited[1] != http.StatusTooManyRequests || limited[2] != http.StatusTooManyRequests {
		t.Errorf("three calls under a burst of 1: %v, want 200 429 429", limited)
	}

	// Revocation, confirmed.
	b.run("revoking", chromedp.Click(chromedp.CSS("#revoke-button")), chromedp.WaitVisible(chromedp.CSS("#confirm-revoke")))
	b.screenshot("confirm-revoke")
	b.run("confirming", chromedp.Click(chromedp.CSS("#confirm-revoke-yes")))
	b.waitText("the key listed revoked", row+" .status", 5*time.Second, "", func(s string) bool { return s == "revoked" })
	b.screenshot("revoked")
	if s, _ := srv.call(t, key, latestBlock); s != http.StatusUnauthorized {
		t.Errorf("the revoked key: %d, want 401", s)
	}
	noKey("after the revocation")

	// No answer the page got after the one that made the key holds it,
	// nor any the API gives a script.
	answers = get(b, "reading the answers", chromedp.Evaluate[[]string](`window.blockrpcAnswers`))
	for i, a := range answers[shownAt+1:] {
		if strings.Contains(a, key) {
			t.Errorf("the page's answer %d, after the key was made, holds it: %.200s", shownAt+1+i, a)
		}
	}
	t.Logf("%d answers the page got after the key was made hold no key", len(answers)-shownAt-1)
	for _, path := range []string{"/api/keys", "/api/keys/" + id} {
		if out := srv.api(t, path); strings.Contains(out, key) {
			t.Errorf("GET %s holds the key", path)
		}
	}
	var shown struct {
		Requests int64 `json:"requests"`
		Errors   int64 `json:"errors"`
	}
	json.Unmarshal([]byte(srv.api(t, "/api/keys/"+id)), &shown)
	if shown.Requests != 8 || shown.Errors != 2 {
		t.Errorf("the key's usage: %+v, want 8 requests of which 2 refused", shown)
	}

	b.run("signing out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#signin")))
}
