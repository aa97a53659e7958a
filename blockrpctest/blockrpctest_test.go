package blockrpctest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/blockrpctest"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

func chain(t testing.TB) *memstore.Store {
	t.Helper()
	b := chaintest.New(chaintest.Config{Seed: 1})
	b.AddBlocks(3, chaintest.Txs(2))
	return b.Store()
}

type answer struct {
	status     int
	retryAfter string
	body       []byte
}

func post(t *testing.T, url, body string) (answer, error) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Retry-After"), b}, err
}

const latest = `{"jsonrpc":"2.0","id":7,"method":"eth_getBlockByNumber","params":["latest",false]}`

func TestServesTheChain(t *testing.T) {
	srv := blockrpctest.NewServer(t, chain(t))
	if !strings.HasSuffix(srv.URL, "/v3/"+srv.Key) || !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Errorf("URL %s does not end in /v3/<key> on loopback", srv.URL)
	}
	a, err := post(t, srv.URL, latest)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID     int
		Result struct{ Number string }
	}
	if err := json.Unmarshal(a.body, &got); err != nil || a.status != 200 || got.ID != 7 || got.Result.Number != "0x3" {
		t.Errorf("answer %d %s (%v), want block 0x3 for id 7", a.status, a.body, err)
	}
	// Another key is refused.
	if a, _ := post(t, strings.TrimSuffix(srv.URL, srv.Key)+"other", latest); a.status != http.StatusUnauthorized {
		t.Errorf("another key answered %d, want 401", a.status)
	}
}

func TestClosedWhenTheTestEnds(t *testing.T) {
	var url string
	t.Run("inner", func(t *testing.T) { url = blockrpctest.NewServer(t, chain(t)).URL })
	if _, err := post(t, url, latest); err == nil {
		t.Error("the server still answers after its test ended")
	}
}

func TestLatency(t *testing.T) {
	srv := blockrpctest.NewServer(t, chain(t), blockrpctest.WithLatency(150*time.Millisecond))
	start := time.Now()
	if a, err := post(t, srv.URL, latest); err != nil || a.status != 200 {
		t.Fatalf("%v %v", a.status, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("answered after %v, want 150ms or more", d)
	}
	if s := srv.Stats(); s.Delayed != 1 || s.Requests != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestLatencyEndsWithTheClient has a client give up during the latency:
// the server stops waiting then, so that Close (the test's cleanup) does
// not wait out the rest, and the fault drawn for the request is not
// counted, since no one met it.
func TestLatencyEndsWithTheClient(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault blockrpctest.Option
		count func(blockrpctest.Stats) int
	}{
		{"none", blockrpctest.WithServerErrors(0), func(blockrpctest.Stats) int { return 0 }},
		{"ServerErrors", blockrpctest.WithServerErrors(1), func(s blockrpctest.Stats) int { return s.ServerErrors }},
		{"RateLimited", blockrpctest.WithRateLimited(1, time.Second), func(s blockrpctest.Stats) int { return s.RateLimited }},
		{"Dropped", blockrpctest.WithDroppedConnections(1), func(s blockrpctest.Stats) int { return s.Dropped }},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := blockrpctest.StartServer(chain(t), blockrpctest.WithLatency(5*time.Second), c.fault)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(latest))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatal("an answer within 100ms of a 5s latency")
			}
			start := time.Now()
			srv.Close()
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Close took %v after the only client had given up", d.Round(time.Millisecond))
			}
			if s := srv.Stats(); c.count(s) != 0 || s.Requests != 1 {
				t.Errorf("stats %+v: a request whose client gave up during the latency is counted as met by %s", s, c.name)
			}
		})
	}
}

// TestKeyInURL gives keys that a URL must escape: URL still reaches the
// server under the key given.
func TestKeyInURL(t *testing.T) {
	for _, key := range []string{"team%41", "key?v=1", "key#1", "key 1"} {
		srv := blockrpctest.NewServer(t, chain(t), blockrpctest.WithKey(key))
		if a, err := post(t, srv.URL, latest); err != nil || a.status != http.StatusOK {
			t.Errorf("WithKey(%q): %s answered %d %s (%v), want 200", key, srv.URL, a.status, a.body, err)
		}
	}
}

func TestServerErrors(t *testing.T) {
	srv := blockrpctest.NewServer(t, chain(t), blockrpctest.WithServerErrors(1))
	a, err := post(t, srv.URL, latest)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"backend failure"}}`; a.status != 200 || strings.TrimSpace(string(a.body)) != want {
		t.Errorf("answer %d %s, want 200 %s", a.status, a.body, want)
	}
	a, err = post(t, srv.URL, `[{"jsonrpc":"2.0","id":"a","method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`)
	if err != nil {
		t.Fatal(err)
	}
	var batch []struct {
		ID    json.RawMessage
		Error struct{ Code int }
	}
	if err := json.Unmarshal(a.body, &batch); err != nil || len(batch) != 2 || string(batch[0].ID) != `"a"` || string(batch[1].ID) != "2" || batch[1].Error.Code != -32000 {
		t.Errorf("batch answer %s (%v), want an error for each id", a.body, err)
	}
}

func TestRateLimited(t *testing.T) {
	srv := blockrpctest.NewServer(t, chain(t), blockrpctest.WithRateLimited(1, 1500*time.Millisecond))
	a, err := post(t, srv.URL, latest)
	if err != nil {
		t.Fatal(err)
	}
	if a.status != http.StatusTooManyRequests || a.retryAfter != "2" || !bytes.Contains(a.body, []byte(`"code":-32005`)) {
		t.Errorf("answer %d, Retry-After %q, %s; want 429, 2 and -32005", a.status, a.retryAfter, a.body)
	}
	if s := srv.Stats(); s.RateLimited != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestDroppedConnections(t *testing.T) {
	srv := blockrpctest.NewServer(t, chain(t), blockrpctest.WithDroppedConnections(1))
	_, err := post(t, srv.URL, latest)
	if err == nil || !(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset")) {
		t.Errorf("error %v, want a dropped connection", err)
	}
	if s := srv.Stats(); s.Dropped == 0 {
		t.Errorf("stats %+v", s)
	}
}

// outcomes sends n requests one after another and describes each answer.
func outcomes(t *testing.T, srv *blockrpctest.Server, n int) []string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var out []string
	for range n {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", srv.URL, strings.NewReader(latest))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			out = append(out, "dropped")
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == 429:
			out = append(out, "429")
		case bytes.Contains(body, []byte("-32000")):
			out = append(out, "-32000")
		default:
			out = append(out, "ok")
		}
	}
	return out
}

// TestFaultsAreDeterministic checks that two servers of the same seed fail
// the same requests, that another seed fails others, and that the shares
// are about those asked for.
func TestFaultsAreDeterministic(t *testing.T) {
	s := chain(t)
	opts := func(seed uint64) []blockrpctest.Option {
		return []blockrpctest.Option{blockrpctest.WithSeed(seed), blockrpctest.WithServerErrors(0.2),
			blockrpctest.WithRateLimited(0.2, time.Second), blockrpctest.WithDroppedConnections(0.1)}
	}
	const n = 200
	first := outcomes(t, blockrpctest.NewServer(t, s, opts(5)...), n)
	second := outcomes(t, blockrpctest.NewServer(t, s, opts(5)...), n)
	other := outcomes(t, blockrpctest.NewServer(t, s, opts(6)...), n)
	if strings.Join(first, " ") != strings.Join(second, " ") {
		t.Error("two servers of the same seed failed different requests")
	}
	if strings.Join(first, " ") == strings.Join(other, " ") {
		t.Error("servers of seeds 5 and 6 failed the same requests")
	}
	counts := map[string]int{}
	for _, o := range first {
		counts[o]++
	}
	t.Logf("outcomes of %d requests: %v", n, counts)
	for outcome, want := range map[string]int{"ok": n / 2, "-32000": n / 5, "429": n / 5, "dropped": n / 10} {
		if got := counts[outcome]; got < want/2 || got > want*2 {
			t.Errorf("%d %s answers of %d, want about %d", got, outcome, n, want)
		}
	}
}

// TestWithKey serves under the key given.
func TestWithKey(t *testing.T) {
	srv := blockrpctest.NewServer(t, chain(t), blockrpctest.WithKey("my-key"))
	if srv.Key != "my-key" || !strings.HasSuffix(srv.URL, "/v3/my-key") {
		t.Errorf("WithKey(\"my-key\"): Key %q, URL %s", srv.Key, srv.URL)
	}
}

func TestDefaultSeedIsOne(t *testing.T) {
	s := chain(t)
	faults := []blockrpctest.Option{blockrpctest.WithServerErrors(0.3), blockrpctest.WithRateLimited(0.3, time.Second)}
	def := outcomes(t, blockrpctest.NewServer(t, s, faults...), 40)
	one := outcomes(t, blockrpctest.NewServer(t, s, append(faults, blockrpctest.WithSeed(1))...), 40)
	if strings.Join(def, " ") != strings.Join(one, " ") {
		t.Errorf("a server without WithSeed failed other requests than one of seed 1:\n%v\n%v", def, one)
	}
}

// TestSharesAddUp gives every request a fault, half dropped and half rate
// limited: none is answered, and the stats count each fault met.
func TestSharesAddUp(t *testing.T) {
	srv := blockrpctest.NewServer(t, chain(t), blockrpctest.WithDroppedConnections(0.5), blockrpctest.WithRateLimited(0.5, time.Second))
	const n = 20
	for i, o := range outcomes(t, srv, n) {
		if o != "dropped" && o != "429" {
			t.Errorf("request %d: %s, want dropped or 429", i, o)
		}
	}
	if s := srv.Stats(); s.Requests != n || s.Dropped+s.RateLimited != n || s.Dropped == 0 || s.RateLimited == 0 {
		t.Errorf("stats %+v, want %d requests, all dropped or rate limited, some of each", s, n)
	}
}

// TestFaultAnswers checks what the fault answers say beyond the error:
// JSON, a count of server errors, a Retry-After of 1 second at least, and
// a null id for a body without one or with no call.
func TestFaultAnswers(t *testing.T) {
	srv := blockrpctest.NewServer(t, chain(t), blockrpctest.WithServerErrors(1))
	for _, body := range []string{"not json", "[]", `{"jsonrpc":"2.0","method":"eth_blockNumber"}`} {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q, want application/json", body, ct)
		}
		if want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"backend failure"}}`; strings.TrimSpace(string(got)) != want {
			t.Errorf("%s: answer %s, want %s", body, got, want)
		}
	}
	if s := srv.Stats(); s.ServerErrors != 3 || s.Requests != 3 {
		t.Errorf("stats %+v, want 3 requests answered -32000", s)
	}

	limited := blockrpctest.NewServer(t, chain(t), blockrpctest.WithRateLimited(1, 0))
	if a, err := post(t, limited.URL, latest); err != nil || a.status != http.StatusTooManyRequests || a.retryAfter != "1" {
		t.Errorf("WithRateLimited(1, 0): %d, Retry-After %q (%v); want 429 and 1", a.status, a.retryAfter, err)
	}
}

// TestWithHandlerOptions passes options to the handler: a batch limit of 1
// refuses a batch of two calls.
func TestWithHandlerOptions(t *testing.T) {
	batch := `[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`
	plain := blockrpctest.NewServer(t, chain(t))
	limited := blockrpctest.NewServer(t, chain(t), blockrpctest.WithHandlerOptions(blockrpc.WithBatchLimit(1)))
	a, err := post(t, plain.URL, batch)
	if err != nil || a.status != http.StatusOK || !bytes.Contains(a.body, []byte(`"result"`)) {
		t.Fatalf("a batch of two without a limit: %d %s (%v)", a.status, a.body, err)
	}
	if a, err := post(t, limited.URL, batch); err != nil || bytes.Contains(a.body, []byte(`"result"`)) {
		t.Errorf("a batch of two with WithBatchLimit(1): %d %s (%v), want it refused", a.status, a.body, err)
	}
}
