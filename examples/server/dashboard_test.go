package main

// The dashboard's API: every route, its errors, sessions, and the keys it
// makes serving, limited and revoked.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
	"github.com/blockrpc/blockrpc/keystore"
)

const testAdminToken = "admin-token-for-the-tests-5b1e"

// api calls the admin API and returns the status and the body.
type api struct {
	t      *testing.T
	base   string
	client *http.Client
	header map[string]string
	// bodies are every answer seen, to check that none holds a key
	// after the one that made it.
	bodies []string
}

func newAPI(t *testing.T, base string) *api {
	jar, _ := cookiejar.New(nil)
	return &api{t: t, base: base, client: &http.Client{Jar: jar, Timeout: 10 * time.Second},
		header: map[string]string{"Authorization": "Bearer " + testAdminToken}}
}

func (a *api) do(method, path, body string) (int, string) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range a.header {
		req.Header.Set(k, v)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusNoContent && ct != "application/json" {
		a.t.Errorf("%s %s: Content-Type %q, want JSON", method, path, ct)
	}
	a.bodies = append(a.bodies, string(b))
	return resp.StatusCode, string(b)
}

// want calls the API and fails unless the status is the one wanted; an
// error's message must say something.
func (a *api) want(status int, method, path, body string) string {
	a.t.Helper()
	got, out := a.do(method, path, body)
	if got != status {
		a.t.Fatalf("%s %s %s: %d %s, want %d", method, path, body, got, out, status)
	}
	if status >= 400 {
		var e struct{ Error string }
		if json.Unmarshal([]byte(out), &e) != nil || len(e.Error) < 10 {
			a.t.Errorf("%s %s: error body %q, want {\"error\": a clear message}", method, path, out)
		}
	}
	return out
}

type apiKey struct {
	ID       string     `json:"id"`
	Key      string     `json:"key"`
	Label    string     `json:"label"`
	Rate     float64    `json:"rate"`
	Burst    int        `json:"burst"`
	Revoked  *time.Time `json:"revoked"`
	Requests int64      `json:"requests"`
	Errors   int64      `json:"errors"`
	Bytes    int64      `json:"bytes"`
	LastUsed *time.Time `json:"last_used"`
	Minutes  []struct {
		Start    time.Time `json:"start"`
		Requests int64     `json:"requests"`
		Errors   int64     `json:"errors"`
	} `json:"minutes"`
}

func decodeKey(t *testing.T, body string) apiKey {
	t.Helper()
	var k apiKey
	if err := json.Unmarshal([]byte(body), &k); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return k
}

func startDashboard(t *testing.T, args ...string) (*server, *api) {
	t.Helper()
	srv := start(t, append([]string{"-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-admin-token", testAdminToken}, args...)...)
	return srv, newAPI(t, srv.adminURL(t))
}

func rpcStatus(t *testing.T, srv *server, key string) int {
	t.Helper()
	return rpcStatusAt(t, srv.rpcURL(t), key)
}

// rpcStatusAt calls eth_blockNumber at endpoint, a URL ending in /v3/, with
// key, and returns the status.
func rpcStatusAt(t *testing.T, endpoint, key string) int {
	t.Helper()
	resp, _ := call(t, http.DefaultClient, endpoint+key, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`)
	return resp.StatusCode
}

// TestDashboardAPI walks a key through its life by the API, with every
// error the API gives on the way.
func TestDashboardAPI(t *testing.T) {
	srv, a := startDashboard(t, "-keystore", "memory", "-key-refresh", "100ms")

	// Authorization.
	anonymous := newAPI(t, a.base)
	anonymous.header = nil
	anonymous.want(http.StatusUnauthorized, "GET", "/api/keys", "")
	wrong := newAPI(t, a.base)
	wrong.header["Authorization"] = "Bearer " + testAdminToken + "x"
	wrong.want(http.StatusUnauthorized, "GET", "/api/keys", "")
	wrong.header["Authorization"] = "Basic " + testAdminToken
	wrong.want(http.StatusUnauthorized, "POST", "/api/keys", `{}`)

	// Bad requests.
	a.want(http.StatusBadRequest, "POST", "/api/keys", `{"label":`)
	a.want(http.StatusBadRequest, "POST", "/api/keys", `{"label":"x","colour":"red"}`)
	a.want(http.StatusBadRequest, "POST", "/api/keys", `{"label":"x","burst":1.5}`)
	a.want(http.StatusBadRequest, "POST", "/api/keys", `{"label":"x"} {"label":"y"}`)
	a.want(http.StatusBadRequest, "POST", "/api/keys", `[]`)
	a.want(http.StatusRequestEntityTooLarge, "POST", "/api/keys", `{"label":"`+strings.Repeat("x", 20<<10)+`"}`)
	a.want(http.StatusUnprocessableEntity, "POST", "/api/keys", `{"label":"x","rate":-1}`)
	a.want(http.StatusUnprocessableEntity, "POST", "/api/keys", `{"label":"x","rate":2000000}`)
	a.want(http.StatusUnprocessableEntity, "POST", "/api/keys", `{"label":"x","burst":5}`)
	a.want(http.StatusUnprocessableEntity, "POST", "/api/keys", `{"label":"`+strings.Repeat("x", 201)+`"}`)
	a.want(http.StatusNotFound, "GET", "/api/nothing", "")
	a.want(http.StatusMethodNotAllowed, "PUT", "/api/keys", `{"label":"x"}`)
	a.want(http.StatusMethodNotAllowed, "POST", "/api/keys/0000000000000000", `{"label":"x"}`)
	a.header["Content-Type"] = "text/plain"
	a.want(http.StatusUnsupportedMediaType, "POST", "/api/keys", `{"label":"x"}`)
	delete(a.header, "Content-Type")
	if out := a.want(http.StatusOK, "GET", "/api/keys", ""); out != "{\"keys\":[]}\n" {
		t.Errorf("refused creations made keys: %s", out)
	}

	// A key, limited to a burst of 2.
	created := decodeKey(t, a.want(http.StatusCreated, "POST", "/api/keys", `{"label":"ci runner","rate":0.001,"burst":2}`))
	secret := created.Key
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(secret) || created.ID == "" || created.Label != "ci runner" || created.Burst != 2 {
		t.Fatalf("created: %+v", created)
	}
	statuses := []int{rpcStatus(t, srv, secret), rpcStatus(t, srv, secret), rpcStatus(t, srv, secret)}
	if statuses[0] != 200 || statuses[1] != 200 || statuses[2] != http.StatusTooManyRequests {
		t.Errorf("three calls of a key with a burst of 2: %v, want 200 200 429", statuses)
	}

	// Usage, current for this process when read, once counted: a request
	// is counted just after its answer went out.
	var list struct{ Keys []apiKey }
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		list.Keys = nil
		json.Unmarshal([]byte(a.want(http.StatusOK, "GET", "/api/keys", "")), &list)
		if len(list.Keys) == 1 && list.Keys[0].Requests == 3 || time.Now().After(deadline) {
			break
		}
	}
	if len(list.Keys) != 1 || list.Keys[0].Requests != 3 || list.Keys[0].Errors != 1 || list.Keys[0].Bytes == 0 || list.Keys[0].LastUsed == nil {
		t.Errorf("the list after 3 calls, one refused: %+v", list.Keys)
	}
	shown := decodeKey(t, a.want(http.StatusOK, "GET", "/api/keys/"+created.ID, ""))
	if len(shown.Minutes) == 0 || shown.Minutes[len(shown.Minutes)-1].Requests == 0 {
		t.Errorf("the key's minutes: %+v", shown.Minutes)
	}
	a.want(http.StatusNotFound, "GET", "/api/keys/0000000000000000", "")

	// Changes.
	renamed := decodeKey(t, a.want(http.StatusOK, "PATCH", "/api/keys/"+created.ID, `{"label":"ci"}`))
	if renamed.Label != "ci" || renamed.Burst != 2 {
		t.Errorf("renamed: %+v", renamed)
	}
	a.want(http.StatusUnprocessableEntity, "PATCH", "/api/keys/"+created.ID, `{}`)
	a.want(http.StatusUnprocessableEntity, "PATCH", "/api/keys/"+created.ID, `{"rate":-3}`)
	a.want(http.StatusNotFound, "PATCH", "/api/keys/0000000000000000", `{"label":"x"}`)
	unlimited := decodeKey(t, a.want(http.StatusOK, "PATCH", "/api/keys/"+created.ID, `{"rate":0}`))
	if unlimited.Rate != 0 || unlimited.Burst != 0 {
		t.Errorf("back to the default: %+v", unlimited)
	}
	for i := range 5 {
		if got := rpcStatus(t, srv, secret); got != http.StatusOK {
			t.Fatalf("call %d with the limit lifted: %d", i, got)
		}
	}

	// Revocation, applied at once in the process that made it.
	revoked := decodeKey(t, a.want(http.StatusOK, "DELETE", "/api/keys/"+created.ID, ""))
	if revoked.Revoked == nil {
		t.Fatalf("revoked: %+v", revoked)
	}
	if got := rpcStatus(t, srv, secret); got != http.StatusUnauthorized {
		t.Errorf("a revoked key: %d, want 401", got)
	}
	again := decodeKey(t, a.want(http.StatusOK, "DELETE", "/api/keys/"+created.ID, ""))
	if !again.Revoked.Equal(*revoked.Revoked) {
		t.Errorf("revoked twice: at %v, then %v", revoked.Revoked, again.Revoked)
	}
	a.want(http.StatusConflict, "PATCH", "/api/keys/"+created.ID, `{"label":"back"}`)
	a.want(http.StatusNotFound, "DELETE", "/api/keys/0000000000000000", "")

	// The key was shown once, and never again, nor logged.
	for i, body := range a.bodies {
		if strings.Contains(body, secret) && !strings.Contains(body, `"label":"ci runner"`) {
			t.Errorf("answer %d holds the key: %s", i, body)
		}
	}
	srv.stop(t)
	logged := srv.stderr()
	if strings.Contains(logged, secret) || strings.Contains(logged, testAdminToken) {
		t.Error("the log holds a key or the admin token")
	}
	// Named as the page and the access log name the key.
	ids := " id=" + created.ID + " key_id=" + sha256Prefix(secret)
	for _, line := range []string{"msg=\"admin: create\"" + ids, "msg=\"admin: update\"" + ids, "msg=\"admin: revoke\"" + ids} {
		if !strings.Contains(logged, line) {
			t.Errorf("no audit line %q in the log:\n%s", line, logged)
		}
	}
}

// TestDashboardSession signs in as the page does, and checks the cookie's
// attributes and that a change needs the CSRF token.
func TestDashboardSession(t *testing.T) {
	_, tokenAPI := startDashboard(t, "-keystore", "memory")
	a := newAPI(t, tokenAPI.base)
	a.header = map[string]string{}
	a.want(http.StatusUnauthorized, "GET", "/api/session", "")
	a.want(http.StatusUnauthorized, "POST", "/api/session", `{"token":"wrong"}`)

	req, _ := http.NewRequest("POST", a.base+"/api/session", strings.NewReader(`{"token":"`+testAdminToken+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ CSRF string }
	json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusOK || len(cookies) != 1 || s.CSRF == "" {
		t.Fatalf("sign-in: %d, cookies %v, csrf %q", resp.StatusCode, cookies, s.CSRF)
	}
	if c := cookies[0]; !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || strings.Contains(c.Value, testAdminToken) {
		t.Errorf("the session cookie: %+v; want HttpOnly, SameSite=Strict, not the token", c)
	}

	a.want(http.StatusOK, "GET", "/api/keys", "")
	a.want(http.StatusForbidden, "POST", "/api/keys", `{"label":"no csrf"}`)
	a.header[csrfHeader] = "wrong"
	a.want(http.StatusForbidden, "POST", "/api/keys", `{"label":"wrong csrf"}`)
	a.header[csrfHeader] = s.CSRF
	a.want(http.StatusCreated, "POST", "/api/keys", `{"label":"by the page"}`)
	if got, _ := a.do("DELETE", "/api/session", ""); got != http.StatusNoContent {
		t.Errorf("sign-out: %d", got)
	}
	a.want(http.StatusUnauthorized, "GET", "/api/keys", "")

	// The page itself is served with a policy that forbids what it
	// does not need.
	resp, err = http.Get(a.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(string(page), "app.js") {
		t.Errorf("the page: %d, CSP %q, X-Frame-Options %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), resp.Header.Get("X-Frame-Options"))
	}
}

// TestDashboardFlags checks the rules of the admin token and -keystore.
func TestDashboardFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-keystore", "memory", "-admin", "0.0.0.0:0"},
		{"-keystore", "memory", "-admin", ":0"},
		{"-keystore", "memory", "-admin-token", "short"},
		{"-admin-token", testAdminToken},
		{"-keystore", "memory", "-keys", "k1"},
		{"-keystore", "mysql://x"},
		{"-keystore", "file:"},
		{"-keystore", "memory", "-key-refresh", "0s"},
	} {
		if err := run(t.Context(), append([]string{"-addr", "127.0.0.1:0"}, args...), io.Discard, io.Discard); err == nil {
			t.Errorf("run %q succeeded, want an error", args)
		}
	}

	// Without a token, a loopback listener gets one for the run, printed
	// on the terminal and not in the log.
	srv := start(t, "-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-keystore", "memory")
	m := regexp.MustCompile(`Admin token \(generated for this run\): ([0-9a-f]{32})`).FindStringSubmatch(srv.stdout())
	if m == nil {
		t.Fatalf("no generated token printed:\n%s", srv.stdout())
	}
	a := newAPI(t, srv.adminURL(t))
	a.header["Authorization"] = "Bearer " + m[1]
	a.want(http.StatusOK, "GET", "/api/keys", "")
	srv.stop(t)
	if strings.Contains(srv.stderr(), m[1]) {
		t.Error("the generated admin token is in the log")
	}
}

// TestKeystoreFile checks that keys made on the dashboard of a server with
// a file store serve after a restart, and revoked ones stay revoked.
func TestKeystoreFile(t *testing.T) {
	path := t.TempDir() + "/keys.json"
	srv, a := startDashboard(t, "-keystore", "file:"+path)
	kept := decodeKey(t, a.want(http.StatusCreated, "POST", "/api/keys", `{"label":"kept"}`))
	gone := decodeKey(t, a.want(http.StatusCreated, "POST", "/api/keys", `{"label":"gone"}`))
	a.want(http.StatusOK, "DELETE", "/api/keys/"+gone.ID, "")
	rpcStatus(t, srv, kept.Key)
	srv.stop(t)

	srv, a = startDashboard(t, "-keystore", "file:"+path)
	if got := rpcStatus(t, srv, kept.Key); got != http.StatusOK {
		t.Errorf("a kept key after a restart: %d", got)
	}
	if got := rpcStatus(t, srv, gone.Key); got != http.StatusUnauthorized {
		t.Errorf("a revoked key after a restart: %d", got)
	}
	var shown apiKey
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		shown = decodeKey(t, a.want(http.StatusOK, "GET", "/api/keys/"+kept.ID, ""))
		if shown.Requests == 2 || time.Now().After(deadline) {
			break
		}
	}
	if shown.Requests != 2 {
		t.Errorf("usage across the restart: %d requests, want 2 (one before, one after)", shown.Requests)
	}
	srv.stop(t)
}

// waitingWrites is a key store whose keys read well and whose writes of
// usage wait until released or their context ends: locked rows, a disk
// that stalls.
type waitingWrites struct {
	keystore.Store
	release chan struct{}
}

func (s waitingWrites) Record(ctx context.Context, u []keystore.Usage) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.release:
		return s.Store.Record(ctx, u)
	}
}

// TestDashboardUsageWriteWaits lists and shows keys while the writes of
// usage wait: the answers come, with the counts stored, rather than wait
// with the write.
func TestDashboardUsageWriteWaits(t *testing.T) {
	ctx := context.Background()
	store := waitingWrites{Store: keystore.NewMemory(), release: make(chan struct{})}
	secret, k, err := keystore.NewKey("k", 0, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	keys, err := keystore.Open(ctx, store, keystore.Options{Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	defer close(store.release) // before Close, which flushes
	keys.Observer().Request(ctx, blockrpc.RequestInfo{Status: 200, Calls: 1, KeyDigest: keystore.DigestOf(secret).String()})

	dash := newDashboard(slog.New(slog.DiscardHandler), store, keys, testAdminToken)
	mux := http.NewServeMux()
	dash.register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	a := newAPI(t, srv.URL) // its client gives up after 10 s
	if got := decodeKey(t, a.want(http.StatusOK, "GET", "/api/keys/"+k.ID, "")); got.Requests != 0 {
		t.Errorf("the key shows %d requests, with the write of its usage waiting; want the 0 stored", got.Requests)
	}
	a.want(http.StatusOK, "GET", "/api/keys", "")
}

// heldBody is a request body whose first Read tells that the handler
// has begun to read it, past every check made before the body.
type heldBody struct {
	io.Reader
	once    sync.Once
	reading chan struct{}
}

func (b *heldBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.reading) })
	return b.Reader.Read(p)
}

// dashboardMux is the dashboard's API over a key store in memory, with
// testAdminToken, for tests that call it without a server.
// askWithToken asks mux for a key with the token, from host, and returns
// the status of the answer.
func askWithToken(mux http.Handler, host, token string) int {
	r := httptest.NewRequest("GET", "/api/keys/none", nil)
	r.RemoteAddr = host + ":40000"
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	return w.Code
}

func dashboardMux(t *testing.T) *http.ServeMux {
	store := keystore.NewMemory()
	keys, err := keystore.Open(context.Background(), store, keystore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	mux := http.NewServeMux()
	newDashboard(slog.New(slog.DiscardHandler), store, keys, testAdminToken).register(mux)
	return mux
}

// TestSignInsWithHeldBodies opens 100 sign-ins from one host, each held
// at its body, then sends 100 wrong tokens and the right one: past the
// throttle's burst of wrong tokens, the right one gets 429 unchecked.
// Each sign-in used to pass the throttle before any token was found
// wrong, so that a host guessed as many tokens as it held requests open.
func TestSignInsWithHeldBodies(t *testing.T) {
	mux := dashboardMux(t)
	type signIn struct {
		body *io.PipeWriter
		held *heldBody
		code chan int
	}
	const wrong = 100
	signIns := make([]signIn, wrong+1)
	for i := range signIns {
		pr, pw := io.Pipe()
		s := signIn{pw, &heldBody{Reader: pr, reading: make(chan struct{})}, make(chan int, 1)}
		r := httptest.NewRequest(http.MethodPost, "/api/session", s.held)
		r.RemoteAddr = "192.0.2.7:40000"
		r.Header.Set("Content-Type", "application/json")
		go func() {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			s.code <- w.Code
		}()
		signIns[i] = s
	}
	for _, s := range signIns {
		select {
		case <-s.held.reading:
		case code := <-s.code:
			t.Fatalf("a sign-in answered %d before its body was read", code)
		}
	}
	for i, s := range signIns {
		token := "wrong-token-wrong-token"
		if i == wrong {
			token = testAdminToken
		}
		io.WriteString(s.body, `{"token":"`+token+`"}`)
		s.body.Close()
		if code := <-s.code; i == wrong && code != http.StatusTooManyRequests {
			t.Errorf("the right token after %d wrong ones from the same host: %d, want 429 (a burst of %d)", wrong, code, guessBurst)
		}
	}
}

// TestWrongAdminTokens sends wrong admin tokens from one host until it is
// throttled: its next tokens, the right one too, get 429 without being
// checked, so that a guesser learns nothing faster; the right token from
// another host is taken, as a sign-in from the first host is not. The
// throttle used to be one for all hosts, after the check: a right token
// always got through, and a guesser could tell it from a 429.
func TestWrongAdminTokens(t *testing.T) {
	mux := dashboardMux(t)
	call := func(host, token string) int { return askWithToken(mux, host, token) }
	for i := range guessBurst {
		if code := call("192.0.2.1", "wrong-token-wrong-token"); code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, code)
		}
	}
	if code := call("192.0.2.1", "wrong-token-wrong-token"); code != http.StatusTooManyRequests {
		t.Errorf("a wrong token past the burst: %d, want 429", code)
	}
	if code := call("192.0.2.1", testAdminToken); code != http.StatusTooManyRequests {
		t.Errorf("the right token from the throttled host: %d, want 429, unchecked", code)
	}
	if code := call("192.0.2.2", testAdminToken); code != http.StatusNotFound {
		t.Errorf("the right token from another host: %d, want it taken (404 for an unknown key)", code)
	}
	r := httptest.NewRequest("POST", "/api/session", strings.NewReader(`{"token":"`+testAdminToken+`"}`))
	r.RemoteAddr = "192.0.2.1:40001"
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("a sign-in with the right token from the throttled host: %d, want 429", w.Code)
	}

	// Past maxGuessers hosts throttled (a /64 of IPv6 holds far more), a
	// new host is held back by the allowance those past the bound share,
	// its right token unchecked as any throttled host's.
	for i := range maxGuessers {
		host := fmt.Sprintf("2001:db8::%x", i+1)
		for range guessBurst {
			call(host, "wrong-token-wrong-token")
		}
	}
	codes := map[int]int{}
	for range 3 * guessBurst {
		codes[call("2001:db8::ffff:1", "wrong-token-wrong-token")]++
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("wrong tokens of a host past %d throttled: %v, want 429 past a burst", maxGuessers, codes)
	}
	if code := call("2001:db8::ffff:1", testAdminToken); code != http.StatusTooManyRequests {
		t.Errorf("the right token from a host past %d throttled, after %d wrong ones: %d, want 429, unchecked", maxGuessers, 3*guessBurst, code)
	}
}

// signedIn signs in to the dashboard at base as the page does and returns
// a client whose jar holds the session's cookie, and the CSRF token.
func signedIn(t *testing.T, base string) (*api, string) {
	t.Helper()
	a := newAPI(t, base)
	a.header = map[string]string{}
	var s struct{ CSRF string }
	if err := json.Unmarshal([]byte(a.want(http.StatusOK, "POST", "/api/session", `{"token":"`+testAdminToken+`"}`)), &s); err != nil || s.CSRF == "" {
		t.Fatalf("sign-in: csrf %q (%v)", s.CSRF, err)
	}
	return a, s.CSRF
}

// TestDashboardSessionChangesNeedCSRF checks every change a session may
// make, not only the creation of a key: a page of another site that the
// operator opens while signed in must not rename, limit or revoke keys,
// nor sign the operator out.
func TestDashboardSessionChangesNeedCSRF(t *testing.T) {
	srv := httptest.NewServer(dashboardMux(t))
	defer srv.Close()
	token := newAPI(t, srv.URL)
	k := decodeKey(t, token.want(http.StatusCreated, "POST", "/api/keys", `{"label":"prod","rate":2,"burst":2}`))

	a, csrf := signedIn(t, srv.URL)
	for _, c := range []struct{ method, path, body string }{
		{"PATCH", "/api/keys/" + k.ID, `{"label":"renamed"}`},
		{"PATCH", "/api/keys/" + k.ID, `{"rate":1000}`},
		{"DELETE", "/api/keys/" + k.ID, ""},
		{"DELETE", "/api/session", ""},
	} {
		delete(a.header, csrfHeader)
		a.want(http.StatusForbidden, c.method, c.path, c.body)
		a.header[csrfHeader] = "wrong"
		a.want(http.StatusForbidden, c.method, c.path, c.body)
	}
	if got := decodeKey(t, token.want(http.StatusOK, "GET", "/api/keys/"+k.ID, "")); got.Label != "prod" || got.Rate != 2 || got.Revoked != nil {
		t.Errorf("the key after changes without the CSRF token: %+v, want it as made", got)
	}
	a.want(http.StatusOK, "GET", "/api/keys", "") // still signed in

	a.header[csrfHeader] = csrf
	a.want(http.StatusOK, "PATCH", "/api/keys/"+k.ID, `{"label":"renamed"}`)
	a.want(http.StatusOK, "DELETE", "/api/keys/"+k.ID, "")
}

// TestDashboardSignOutEndsTheSession sends the cookie of a session signed
// out again, as one copied from the browser would be: refused, since the
// server forgot the session, not only the browser its cookie.
func TestDashboardSignOutEndsTheSession(t *testing.T) {
	srv := httptest.NewServer(dashboardMux(t))
	defer srv.Close()
	a, csrf := signedIn(t, srv.URL)
	u, _ := url.Parse(srv.URL)
	var cookie *http.Cookie
	for _, c := range a.client.Jar.Cookies(u) {
		if c.Name == sessionCookie {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("no session cookie after the sign-in")
	}
	a.header[csrfHeader] = csrf
	if got, out := a.do("DELETE", "/api/session", ""); got != http.StatusNoContent {
		t.Fatalf("sign-out: %d %s", got, out)
	}

	stolen := newAPI(t, srv.URL)
	stolen.header = map[string]string{csrfHeader: csrf}
	stolen.client.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: cookie.Value, Path: "/"}})
	stolen.want(http.StatusUnauthorized, "GET", "/api/keys", "")
	stolen.want(http.StatusUnauthorized, "GET", "/api/session", "")
	stolen.want(http.StatusUnauthorized, "POST", "/api/keys", `{"label":"after sign-out"}`)
}

// TestDashboardSessionExpires checks that a session past its lifetime is
// refused, its cookie kept by the browser or not.
func TestDashboardSessionExpires(t *testing.T) {
	store := keystore.NewMemory()
	keys, err := keystore.Open(context.Background(), store, keystore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	d := newDashboard(slog.New(slog.DiscardHandler), store, keys, testAdminToken)
	mux := http.NewServeMux()
	d.register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	a, csrf := signedIn(t, srv.URL)
	a.want(http.StatusOK, "GET", "/api/keys", "")

	d.mu.Lock()
	for id, s := range d.sessions {
		s.expires = time.Now().Add(-time.Second)
		d.sessions[id] = s
	}
	d.mu.Unlock()
	a.header[csrfHeader] = csrf
	a.want(http.StatusUnauthorized, "GET", "/api/keys", "")
	a.want(http.StatusUnauthorized, "GET", "/api/session", "")
	a.want(http.StatusUnauthorized, "POST", "/api/keys", `{"label":"expired"}`)
}

// TestDashboardBurstAloneKeepsRate changes a key's burst only: its rate
// stays what it was.
func TestDashboardBurstAloneKeepsRate(t *testing.T) {
	srv := httptest.NewServer(dashboardMux(t))
	defer srv.Close()
	a := newAPI(t, srv.URL)
	k := decodeKey(t, a.want(http.StatusCreated, "POST", "/api/keys", `{"label":"k","rate":2.5,"burst":3}`))
	got := decodeKey(t, a.want(http.StatusOK, "PATCH", "/api/keys/"+k.ID, `{"burst":7}`))
	if got.Rate != 2.5 || got.Burst != 7 {
		t.Errorf("after a change of the burst alone: rate %v burst %d, want rate 2.5 burst 7", got.Rate, got.Burst)
	}
}

// TestWrongAdminTokensLogged checks that the operator hears of wrong
// admin tokens, by remote address, and that the log never holds what was
// sent.
func TestWrongAdminTokensLogged(t *testing.T) {
	var logged syncbuf.Buffer
	store := keystore.NewMemory()
	keys, err := keystore.Open(context.Background(), store, keystore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	mux := http.NewServeMux()
	newDashboard(slog.New(slog.NewTextHandler(&logged, nil)), store, keys, testAdminToken).register(mux)
	const guess = "guessed-token-guessed-token"

	r := httptest.NewRequest("GET", "/api/keys", nil)
	r.RemoteAddr = "192.0.2.9:40000"
	r.Header.Set("Authorization", "Bearer "+guess)
	mux.ServeHTTP(httptest.NewRecorder(), r)
	r = httptest.NewRequest("POST", "/api/session", strings.NewReader(`{"token":"`+guess+`"}`))
	r.RemoteAddr = "192.0.2.9:40001"
	r.Header.Set("Content-Type", "application/json")
	mux.ServeHTTP(httptest.NewRecorder(), r)

	out := logged.String()
	for _, want := range []string{
		`msg="admin: refused a wrong admin token" remote=192.0.2.9:40000`,
		`msg="admin: refused a sign-in with a wrong admin token" remote=192.0.2.9:40001`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in the log:\n%s", want, out)
		}
	}
	if strings.Contains(out, guess) || strings.Contains(out, testAdminToken) {
		t.Errorf("the log holds a token:\n%s", out)
	}
}

// TestThrottledHostNotLetGo throttles a host, then has as many other hosts
// guess as the throttle keeps: the host still throttled must stay so,
// or a guesser with many addresses would free its own.
func TestThrottledHostNotLetGo(t *testing.T) {
	mux := dashboardMux(t)
	call := func(host, token string) int { return askWithToken(mux, host, token) }
	for i := range maxGuessers - 1 {
		for range guessBurst {
			call(fmt.Sprintf("2001:db8::%x", i+1), "wrong-token-wrong-token")
		}
	}
	for range 2 * guessBurst {
		call("192.0.2.1", "wrong-token-wrong-token")
	}
	call("2001:db8::ffff:1", "wrong-token-wrong-token") // a host past the bound
	if code := call("192.0.2.1", testAdminToken); code != http.StatusTooManyRequests {
		t.Errorf("the right token from a throttled host, once a host past %d came: %d, want 429, unchecked", maxGuessers, code)
	}
}

// TestDashboardTokenWhole sends a token whose SHA-256 begins as the admin
// token's does: refused, the whole digest being compared.
func TestDashboardTokenWhole(t *testing.T) {
	mux := dashboardMux(t)
	want := sha256.Sum256([]byte(testAdminToken))
	for i := 0; ; i++ {
		guess := fmt.Sprintf("near-guess-%d", i)
		if d := sha256.Sum256([]byte(guess)); d[0] != want[0] || d[1] != want[1] {
			if i < 1<<20 {
				continue
			}
			t.Fatal("no guess found")
		}
		r := httptest.NewRequest("GET", "/api/keys", nil)
		r.Header.Set("Authorization", "Bearer "+guess)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("a token whose digest begins as the admin token's: %d, want 401", w.Code)
		}
		return
	}
}

// TestDashboardSessionsSideBySide signs in twice, as from two browsers:
// the second sign-in leaves the first session signed in.
func TestDashboardSessionsSideBySide(t *testing.T) {
	srv := httptest.NewServer(dashboardMux(t))
	defer srv.Close()
	first, csrf := signedIn(t, srv.URL)
	second, _ := signedIn(t, srv.URL)
	first.want(http.StatusOK, "GET", "/api/keys", "")
	first.header[csrfHeader] = csrf
	first.want(http.StatusCreated, "POST", "/api/keys", `{"label":"from the first"}`)
	second.want(http.StatusOK, "GET", "/api/keys", "")
}

// TestDashboardBodyWhole refuses a body with text after its JSON object:
// a script's body cut or doubled is not taken for what it begins with.
func TestDashboardBodyWhole(t *testing.T) {
	srv := httptest.NewServer(dashboardMux(t))
	defer srv.Close()
	a := newAPI(t, srv.URL)
	for _, body := range []string{`{"label":"x"}}`, `{"label":"x"}]`} {
		a.want(http.StatusBadRequest, "POST", "/api/keys", body)
	}
	if out := a.want(http.StatusOK, "GET", "/api/keys", ""); out != "{\"keys\":[]}\n" {
		t.Errorf("refused bodies made keys: %s", out)
	}
}

// TestDashboardPageHeaders checks the headers every file of the page is
// served with, beside its policy.
func TestDashboardPageHeaders(t *testing.T) {
	mux := dashboardMux(t)
	for _, path := range []string{"/", "/app.js", "/style.css"} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		h := w.Header()
		if w.Code != http.StatusOK || h.Get("Content-Security-Policy") != dashboardPolicy || h.Get("X-Frame-Options") != "DENY" ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: %d %v", path, w.Code, h)
		}
	}
}

// TestDashboardCookieLifetime checks that the browser keeps the session's
// cookie as long as the server keeps the session, and no longer.
func TestDashboardCookieLifetime(t *testing.T) {
	mux := dashboardMux(t)
	r := httptest.NewRequest("POST", "/api/session", strings.NewReader(`{"token":"`+testAdminToken+`"}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	cookies := w.Result().Cookies()
	if w.Code != http.StatusOK || len(cookies) != 1 {
		t.Fatalf("sign-in: %d, cookies %v", w.Code, cookies)
	}
	if c := cookies[0]; c.MaxAge != int(sessionLifetime/time.Second) || c.Path != "/" || c.Name != sessionCookie {
		t.Errorf("the session cookie: %+v, want Max-Age %d and Path /", c, int(sessionLifetime/time.Second))
	}
}
