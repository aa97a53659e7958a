package blockrpc_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
)

// slowly is a limit that does not refill within a test.
var slowly = blockrpc.Limit{Rate: 1.0 / 3600, Burst: 3}

func TestLimiterRefusesPastTheBurst(t *testing.T) {
	c := newTestChain(t)
	counted := &countingBackend{Backend: c.store, calls: new(atomic.Int32)}
	srv := newServer(t, counted, blockrpc.WithLimiter(blockrpc.NewRateLimiter(), slowly))
	for i := range 3 {
		if status, out := post(t, srv, latestBlock); status != http.StatusOK {
			t.Fatalf("call %d within the burst: %d %s", i, status, out)
		}
	}
	resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, rpcRequest("eth_blockNumber", "[]"), "Content-Type", "application/json"))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the call past the burst: status %d, want 429", resp.StatusCode)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want a number of seconds", resp.Header.Get("Retry-After"))
	}
	a := parseAnswer(t, out)
	checkError(t, a, -32005, "request rate exceeded")
	if string(a.ID) != "1" {
		t.Errorf("the refusal's id is %s, want the call's (1)", a.ID)
	}
	if n := counted.calls.Load(); n != 3 {
		t.Errorf("%d lookups reached the backend, want the 3 allowed", n)
	}
}

// TestLimiterRateZero spends a limit that never refills: the calls past
// it are refused for good, without a Retry-After to wait for.
func TestLimiterRateZero(t *testing.T) {
	srv := newServer(t, newTestChain(t).store, blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: 0, Burst: 2}))
	for i := range 2 {
		if status, out := post(t, srv, latestBlock); status != http.StatusOK {
			t.Fatalf("call %d within the burst: %d %s", i, status, out)
		}
	}
	for range 2 {
		resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, latestBlock, "Content-Type", "application/json"))
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a call past a burst that never refills: status %d, want 429", resp.StatusCode)
		}
		if after := resp.Header.Get("Retry-After"); after != "" {
			t.Errorf("Retry-After %q for a limit that never refills, want none", after)
		}
		checkError(t, parseAnswer(t, out), -32005, "request rate exceeded")
	}
}

// TestLimiterBurstZero gives a rate without a burst, a mistake easily made
// (golang.org/x/time/rate's Limiter allows nothing with a burst of 0,
// whatever its rate): the refusal says why, where it said "1 calls at
// once are more than the limit allows (0)".
func TestLimiterBurstZero(t *testing.T) {
	srv := newServer(t, newTestChain(t).store, blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: 100}))
	resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, latestBlock, "Content-Type", "application/json"))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" {
		t.Errorf("a call under a limit of burst 0: status %d, Retry-After %q; want 429 and none", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	checkError(t, parseAnswer(t, out), -32005, "request rate exceeded: the limit allows no call (its burst is 0)")
}

// TestLimiterCountsEveryCallOfABatch checks that a batch takes one unit
// per call and is refused whole, running nothing, when the units left are
// fewer than its calls.
func TestLimiterCountsEveryCallOfABatch(t *testing.T) {
	c := newTestChain(t)
	counted := &countingBackend{Backend: c.store, calls: new(atomic.Int32)}
	srv := newServer(t, counted, blockrpc.WithLimiter(blockrpc.NewRateLimiter(), slowly))
	two := `[{"jsonrpc":"2.0","id":7,"method":"eth_getBlockByNumber","params":["0x1",false]},{"jsonrpc":"2.0","id":8,"method":"eth_getBlockByNumber","params":["0x2",false]}]`
	if status, out := post(t, srv, two); status != http.StatusOK {
		t.Fatalf("a batch of 2 within a burst of 3: %d %s", status, out)
	}
	status, out := post(t, srv, two) // one unit left
	if status != http.StatusTooManyRequests {
		t.Fatalf("a batch of 2 with 1 unit left: status %d, want 429: %s", status, out)
	}
	answers := callBatchAnswers(t, out)
	if len(answers) != 1 || string(answers[0].ID) != "7" {
		t.Fatalf("the refusal of a batch: %s, want one error with the first id", out)
	}
	checkError(t, answers[0], -32005, "request rate exceeded")
	if n := counted.calls.Load(); n != 2 {
		t.Errorf("%d lookups reached the backend, want the first batch's 2", n)
	}
	// The refused batch took nothing: the unit left still serves a call.
	if status, out := post(t, srv, latestBlock); status != http.StatusOK {
		t.Errorf("the last unit after a refused batch: %d %s", status, out)
	}

	big := `[` + strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},`, 3) + `{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`
	srv = newServer(t, c.store, blockrpc.WithLimiter(blockrpc.NewRateLimiter(), slowly))
	resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, big, "Content-Type", "application/json"))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" {
		t.Errorf("a batch larger than the burst: status %d, Retry-After %q; want 429 and none (it never fits)", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	checkError(t, callBatchAnswers(t, out)[0], -32005, "request rate exceeded: 4 calls at once are more than the limit allows (3)")
}

func callBatchAnswers(t *testing.T, out []byte) []answer {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("not a batch answer: %s", out)
	}
	answers := make([]answer, len(raw))
	for i, r := range raw {
		answers[i] = parseAnswer(t, r)
	}
	return answers
}

// TestKeysOwnLimits checks that a key added with a limit of its own is
// held to it, and the others to the default.
func TestKeysOwnLimits(t *testing.T) {
	c := newTestChain(t)
	keys := blockrpc.NewKeySet(testKey)
	keys.AddWithLimit("gold", blockrpc.Limit{Rate: 1.0 / 3600, Burst: 5})
	srv := serve(t, blockrpc.NewHandler(blockrpc.NewService(c.store), blockrpc.WithKeys(keys),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: 1.0 / 3600, Burst: 1})))
	allowed := func(key string) int {
		n := 0
		for range 10 {
			if status, _ := postTo(t, srv.URL+"/v3/"+key, latestBlock); status == http.StatusOK {
				n++
			}
		}
		return n
	}
	if n := allowed(testKey); n != 1 {
		t.Errorf("a key under the default limit made %d calls, want 1", n)
	}
	if n := allowed("gold"); n != 5 {
		t.Errorf("a key with a limit of its own made %d calls, want 5", n)
	}
	keys.AddWithLimit("silver", blockrpc.Limit{Rate: 1.0 / 3600, Burst: 5})
	for range 2 {
		postTo(t, srv.URL+"/v3/silver", latestBlock)
	}
	keys.AddWithLimit("silver", blockrpc.Limit{Rate: 1.0 / 3600, Burst: 1}) // lowered while in use
	if n := allowed("silver"); n != 1 {
		t.Errorf("with 3 of 5 left and the burst lowered to 1, the key made %d more calls, want 1", n)
	}
	// A key limited only by an unlimited default, then given a limit of
	// its own: the new limit starts with its burst.
	open := blockrpc.NewKeySet("bronze")
	srv = serve(t, blockrpc.NewHandler(blockrpc.NewService(c.store), blockrpc.WithKeys(open),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: math.Inf(1)})))
	if n := allowed("bronze"); n != 10 {
		t.Errorf("a key without a limit made %d calls of 10", n)
	}
	open.AddWithLimit("bronze", blockrpc.Limit{Rate: 1.0 / 3600, Burst: 2})
	if n := allowed("bronze"); n != 2 {
		t.Errorf("a key limited after it was used without a limit made %d calls, want its burst, 2", n)
	}
}

// TestInvalidLimit gives keys limits that mean nothing: every request of
// such a key is refused as when the limiter fails, and logged, where
// x/time's limiter would have taken a NaN rate for no limit at all.
func TestInvalidLimit(t *testing.T) {
	c := newTestChain(t)
	keys := blockrpc.NewKeySet()
	invalid := map[string]blockrpc.Limit{
		"nan":            {Rate: math.NaN(), Burst: 5},
		"negative-rate":  {Rate: -1, Burst: 5},
		"negative-burst": {Rate: 1, Burst: -1},
	}
	for key, l := range invalid {
		keys.AddWithLimit(key, l)
	}
	var logs syncbuf.Buffer
	srv := serve(t, blockrpc.NewHandler(blockrpc.NewService(c.store), blockrpc.WithKeys(keys),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), slowly),
		blockrpc.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))))
	for key := range invalid {
		for range 3 {
			status, out := postTo(t, srv.URL+"/v3/"+key, latestBlock)
			if status != http.StatusServiceUnavailable {
				t.Fatalf("key %s: status %d (%s), want 503", key, status, out)
			}
		}
	}
	if !strings.Contains(logs.String(), "invalid limit") {
		t.Errorf("the invalid limits are not in the log:\n%s", logs.String())
	}
}

// failingLimiter fails, with the id it was given in its error.
type failingLimiter struct{ seen *string }

func (f failingLimiter) Allow(_ context.Context, id string, _ blockrpc.Limit, _ int) (bool, time.Duration, error) {
	*f.seen = id
	return false, 0, errors.New("redis: connection refused for " + id)
}

// TestLimiterNeverSeesTheKey checks that a limiter is given a digest of the
// key, and that its failure is a 503 whose log line holds no key.
func TestLimiterNeverSeesTheKey(t *testing.T) {
	c := newTestChain(t)
	var logs syncbuf.Buffer
	var seen string
	srv := newServer(t, c.store, blockrpc.WithLimiter(failingLimiter{&seen}, slowly),
		blockrpc.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	status, out := post(t, srv, latestBlock)
	if status != http.StatusServiceUnavailable {
		t.Fatalf("a failing limiter: status %d, want 503", status)
	}
	checkError(t, parseAnswer(t, out), -32000, "rate limiter unavailable")
	digest := sha256.Sum256([]byte(testKey))
	if seen != hex.EncodeToString(digest[:]) {
		t.Errorf("the limiter was given %q, want the key's SHA-256", seen)
	}
	if strings.Contains(logs.String(), testKey) {
		t.Errorf("the log holds the key:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "rate limiter failed") {
		t.Errorf("the limiter's failure is not in the log:\n%s", logs.String())
	}
}

// panickingLimiter panics, as a limiter with a bug does.
type panickingLimiter struct{}

func (panickingLimiter) Allow(context.Context, string, blockrpc.Limit, int) (bool, time.Duration, error) {
	panic("index out of range")
}

// panickingLimits is a KeyValidator whose KeyLimit panics.
type panickingLimits struct{ *blockrpc.KeySet }

func (panickingLimits) KeyLimit(context.Context, string) (blockrpc.Limit, bool) {
	panic("nil map")
}

// TestLimiterPanics has the limiter, and then a key's own limit, panic:
// the request is refused as when the limiter fails, and the server goes
// on serving, as it does when a key validator panics.
func TestLimiterPanics(t *testing.T) {
	c := newTestChain(t)
	for name, opts := range map[string][]blockrpc.Option{
		"the limiter": {blockrpc.WithKeys(blockrpc.NewKeySet(testKey)), blockrpc.WithLimiter(panickingLimiter{}, slowly)},
		"a key's limit": {blockrpc.WithKeys(panickingLimits{blockrpc.NewKeySet(testKey)}),
			blockrpc.WithLimiter(blockrpc.NewRateLimiter(), slowly)},
	} {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, blockrpc.NewHandler(blockrpc.NewService(c.store), append(opts, blockrpc.WithLogger(slog.New(slog.DiscardHandler)))...))
			for range 2 {
				status, out := postTo(t, srv.URL+"/v3/"+testKey, latestBlock)
				if status != http.StatusServiceUnavailable {
					t.Fatalf("status %d (%s), want 503", status, out)
				}
				checkError(t, parseAnswer(t, out), -32000, "rate limiter unavailable")
			}
		})
	}
}

// TestKeyRateRaisedWhileInUse checks that a key's new rate holds from its
// next request even when its burst stays the same: an operator who lifts
// a spent key's limit sees it lifted.
func TestKeyRateRaisedWhileInUse(t *testing.T) {
	c := newTestChain(t)
	keys := blockrpc.NewKeySet()
	keys.AddWithLimit("gold", blockrpc.Limit{Rate: 1.0 / 3600, Burst: 1})
	srv := serve(t, blockrpc.NewHandler(blockrpc.NewService(c.store), blockrpc.WithKeys(keys),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{})))
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		if status, out := postTo(t, srv.URL+"/v3/gold", latestBlock); status != want {
			t.Fatalf("call %d under a burst of 1: status %d, want %d: %s", i, status, want, out)
		}
	}
	keys.AddWithLimit("gold", blockrpc.Limit{Rate: math.Inf(1), Burst: 1}) // the same burst, no limit on the rate
	for i := range 5 {
		if status, out := postTo(t, srv.URL+"/v3/gold", latestBlock); status != http.StatusOK {
			t.Fatalf("call %d after the key's rate was lifted: status %d: %s", i, status, out)
		}
	}
	keys.AddWithLimit("gold", blockrpc.Limit{Rate: 1.0 / 3600, Burst: 1}) // and lowered again
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		if status, out := postTo(t, srv.URL+"/v3/gold", latestBlock); status != want {
			t.Fatalf("call %d after the key's rate was lowered again: status %d, want %d: %s", i, status, want, out)
		}
	}
}

// TestLimiterRetryAfterRoundsUp checks that Retry-After, in whole seconds,
// is never less than the wait: a client told 0 would ask again at once and
// be refused again.
func TestLimiterRetryAfterRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		// The wait is 1/rate less the time between the two calls: up
		// to 0.9 s of it, on a loaded machine, leaves the answer as is.
		want string
	}{
		{1 / 0.95, "1"},
		{1 / 2.95, "3"},
	} {
		srv := newServer(t, newTestChain(t).store, blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: tc.rate, Burst: 1}))
		if status, out := post(t, srv, latestBlock); status != http.StatusOK {
			t.Fatalf("rate %v: the first call: %d %s", tc.rate, status, out)
		}
		resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, latestBlock, "Content-Type", "application/json"))
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("rate %v: the call past the burst: status %d, want 429: %s", tc.rate, resp.StatusCode, out)
		}
		if got := resp.Header.Get("Retry-After"); got != tc.want {
			t.Errorf("rate %v a second, burst spent: Retry-After %q, want %q", tc.rate, got, tc.want)
		}
	}
}

// TestLimiterRateZeroBatchOfTheBurst spends a limit that never refills and
// then sends a batch of as many calls as the burst: it is refused because
// the limit is spent, not because the batch is larger than the burst,
// which it is not.
func TestLimiterRateZeroBatchOfTheBurst(t *testing.T) {
	srv := newServer(t, newTestChain(t).store, blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: 0, Burst: 2}))
	two := `[` + rpcRequest("eth_chainId", `[]`) + `,` + rpcRequest("eth_chainId", `[]`) + `]`
	if status, out := post(t, srv, two); status != http.StatusOK {
		t.Fatalf("a batch of the burst, 2: %d %s", status, out)
	}
	resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, two, "Content-Type", "application/json"))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("a batch of the burst once it is spent for good: status %d, Retry-After %q; want 429 and none", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	checkError(t, callBatchAnswers(t, out)[0], -32005, "request rate exceeded")
}
