package keystore_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
	"github.com/blockrpc/blockrpc/keystore"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// flaky is a Store that fails while down is set, as a database does while
// it is unreachable.
type flaky struct {
	keystore.Store
	down atomic.Bool
}

var errDown = errors.New("connection refused")

func (f *flaky) Keys(ctx context.Context) ([]keystore.Key, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.Keys(ctx)
}

func (f *flaky) Record(ctx context.Context, u []keystore.Usage) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.Record(ctx, u)
}

func addKey(t *testing.T, s keystore.Store, label string, rate float64, burst int) (string, keystore.Key) {
	t.Helper()
	secret, k, err := keystore.NewKey(label, rate, burst, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return secret, k
}

// serve returns a handler of the demo chain whose keys are keys', limited
// and counted by them, as the example server wires them.
func serve(t *testing.T, keys *keystore.Keys) *httptest.Server {
	t.Helper()
	chain, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	h := blockrpc.NewHandler(blockrpc.NewService(chain),
		blockrpc.WithKeys(keys),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: 1000, Burst: 1000}),
		blockrpc.WithObserver(keys.Observer()))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func status(t *testing.T, srv *httptest.Server, key, body string) int {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v3/"+key, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

const blockNumber = `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`

// waitFor polls cond until it holds, for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// TestKeysFollowTheStore checks that a key made, limited or revoked in the
// store, as another process would, takes effect within the refresh
// interval, and a key's own limit is applied.
func TestKeysFollowTheStore(t *testing.T) {
	store := keystore.NewMemory()
	keys, err := keystore.Open(context.Background(), store, keystore.Options{Refresh: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	srv := serve(t, keys)

	secret, k := addKey(t, store, "new", 0, 0)
	waitFor(t, time.Second, "a new key accepted", func() bool { return status(t, srv, secret, blockNumber) == http.StatusOK })

	rate := 1e-6
	if _, err := store.Update(context.Background(), k.ID, keystore.Change{Limit: &blockrpc.Limit{Rate: rate, Burst: 2}}); err != nil {
		t.Fatal(err)
	}
	// The burst of 2 takes effect: the third call of a quick series is
	// refused, whatever the bucket held before.
	waitFor(t, time.Second, "the key's own limit applied", func() bool {
		return status(t, srv, secret, blockNumber) == http.StatusTooManyRequests
	})

	if _, err := store.Revoke(context.Background(), k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, time.Second, "the revoked key refused", func() bool { return status(t, srv, secret, blockNumber) == http.StatusUnauthorized })
	t.Logf("a revocation applied after %v, refreshing every 50ms", took.Round(time.Millisecond))
	if status(t, srv, "0123456789abcdef0123456789abcdef", blockNumber) != http.StatusUnauthorized {
		t.Error("a key the store never held is accepted")
	}
}

// slowRead is a Store whose next read of the keys, once armed, waits to
// return what it read until released: a periodic refresh slowed down.
type slowRead struct {
	keystore.Store
	armed         atomic.Bool
	read, release chan struct{}
}

func (s *slowRead) Keys(ctx context.Context) ([]keystore.Key, error) {
	keys, err := s.Store.Keys(ctx)
	if s.armed.CompareAndSwap(true, false) {
		close(s.read)
		<-s.release
	}
	return keys, err
}

// TestKeysSlowRefresh revokes a key while a periodic refresh is slow to
// return what it read before: the refresh the admin API makes after the
// revocation applies it at once, and the slow one, ending after it, must
// not bring the key back.
func TestKeysSlowRefresh(t *testing.T) {
	ctx := context.Background()
	store := &slowRead{Store: keystore.NewMemory(), read: make(chan struct{}), release: make(chan struct{})}
	secret, k := addKey(t, store, "slow", 0, 0)
	keys, err := keystore.Open(ctx, store, keystore.Options{Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()

	store.armed.Store(true)
	slow := make(chan error, 1)
	go func() { slow <- keys.Refresh(ctx) }()
	<-store.read // the key read valid
	if _, err := store.Revoke(ctx, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := keys.ValidKey(ctx, secret); ok {
		t.Fatal("the key is valid after the refresh that follows its revocation")
	}
	close(store.release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	if ok, _ := keys.ValidKey(ctx, secret); ok {
		t.Error("the revoked key is valid again: the slow refresh took the keys it read before the revocation")
	}
}

// TestKeysSlowRefreshThenFailure revokes a key and refreshes, slowly,
// while a refresh begun later fails: the failure carries no keys, so the
// slow refresh's read of the revocation is taken when it returns, and the
// health stays the failure's, the later read's.
func TestKeysSlowRefreshThenFailure(t *testing.T) {
	ctx := context.Background()
	store := &flaky{Store: keystore.NewMemory()}
	slow := &slowRead{Store: store, read: make(chan struct{}), release: make(chan struct{})}
	secret, k := addKey(t, store, "revoked", 0, 0)
	keys, err := keystore.Open(ctx, slow, keystore.Options{Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()

	if _, err := store.Revoke(ctx, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	slow.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- keys.Refresh(ctx) }()
	<-slow.read // the key read revoked
	store.down.Store(true)
	if err := keys.Refresh(ctx); !errors.Is(err, errDown) {
		t.Fatalf("Refresh while the store is down = %v, want %v", err, errDown)
	}
	store.down.Store(false)
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ok, _ := keys.ValidKey(ctx, secret); ok {
		t.Error("the revoked key is valid: the read of its revocation was dropped for a failed read begun after it")
	}
	if err := keys.Health(); err == nil || !strings.Contains(err.Error(), errDown.Error()) {
		t.Errorf("Health = %v, want the failure of the read begun last", err)
	}
}

// TestKeysStuckRead has a read of the store never return, as one of a
// file store waiting behind a save on a disk that stalls would: past
// Stale, the keys are refused and Health says so, where it reported them
// current, no read having failed; once the read returns, both are well.
func TestKeysStuckRead(t *testing.T) {
	ctx := context.Background()
	store := &slowRead{Store: keystore.NewMemory(), read: make(chan struct{}), release: make(chan struct{})}
	secret, _ := addKey(t, store, "known", 0, 0)
	keys, err := keystore.Open(ctx, store, keystore.Options{Refresh: 20 * time.Millisecond, Stale: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	released := false
	defer func() {
		if !released {
			close(store.release)
		}
	}()
	store.armed.Store(true)
	<-store.read
	waitFor(t, 5*time.Second, "the keys refused past Stale", func() bool {
		_, err := keys.ValidKey(ctx, secret)
		return errors.Is(err, keystore.ErrStale)
	})
	if err := keys.Health(); !errors.Is(err, keystore.ErrStale) {
		t.Errorf("Health while keys are refused, a read of the store stuck: %v, want ErrStale", err)
	}
	close(store.release)
	released = true
	waitFor(t, 5*time.Second, "the keys current again", func() bool {
		ok, err := keys.ValidKey(ctx, secret)
		return ok && err == nil && keys.Health() == nil
	})
}

// TestKeysOutage checks that while the store cannot be read, the keys last
// read are served for Stale, the log and Health say so, and then requests
// get 503 until the store is back.
func TestKeysOutage(t *testing.T) {
	store := &flaky{Store: keystore.NewMemory()}
	secret, _ := addKey(t, store, "known", 0, 0)
	var log syncbuf.Buffer
	// Long enough that a stalled goroutine does not pass it between the
	// outage seen and the checks made within it.
	const stale = 2 * time.Second
	keys, err := keystore.Open(context.Background(), store, keystore.Options{
		Refresh: 20 * time.Millisecond, Stale: stale, Logger: slog.New(slog.NewTextHandler(&log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	srv := serve(t, keys)
	if err := keys.Health(); err != nil {
		t.Fatalf("Health before the outage: %v", err)
	}

	store.down.Store(true)
	waitFor(t, time.Second, "the outage seen by Health", func() bool { return keys.Health() != nil })
	if err := keys.Health(); errors.Is(err, keystore.ErrStale) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Health within the bound: %v; want the store's error, not ErrStale", err)
	}
	if got := status(t, srv, secret, blockNumber); got != http.StatusOK {
		t.Errorf("a known key during the outage: %d, want 200", got)
	}
	if !strings.Contains(log.String(), "serving the keys last read") {
		t.Errorf("the log does not tell of the outage:\n%s", log.String())
	}

	waitFor(t, 2*stale, "requests refused past the bound", func() bool { return status(t, srv, secret, blockNumber) == http.StatusServiceUnavailable })
	if err := keys.Health(); !errors.Is(err, keystore.ErrStale) {
		t.Errorf("Health past the bound: %v, want ErrStale", err)
	}

	store.down.Store(false)
	waitFor(t, time.Second, "the key served again", func() bool { return status(t, srv, secret, blockNumber) == http.StatusOK })
	if err := keys.Health(); err != nil {
		t.Errorf("Health after the outage: %v", err)
	}
	if !strings.Contains(log.String(), "can be read again") {
		t.Errorf("the log does not tell of the recovery:\n%s", log.String())
	}
	if strings.Contains(log.String(), secret) {
		t.Error("the log holds a key")
	}
}

// TestKeysUsage checks that requests, errors and bytes are counted against
// the key that made them, by minute, and that a flush the store refuses
// loses nothing.
func TestKeysUsage(t *testing.T) {
	store := &flaky{Store: keystore.NewMemory()}
	a, ka := addKey(t, store, "a", 0, 0)
	b, kb := addKey(t, store, "b", 0, 0)
	keys, err := keystore.Open(context.Background(), store, keystore.Options{Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	srv := serve(t, keys)
	for range 3 {
		status(t, srv, a, blockNumber)
	}
	status(t, srv, a, `{"jsonrpc":"2.0","id":1,"method":"eth_nothing","params":[]}`)
	status(t, srv, b, blockNumber)
	status(t, srv, "not-a-key", blockNumber)

	store.down.Store(true)
	if err := keys.Flush(context.Background()); err == nil {
		t.Fatal("a flush to a store that is down succeeded")
	}
	status(t, srv, b, blockNumber) // counted while the first counts wait
	store.down.Store(false)
	// A request is counted just after its answer went out: flush until
	// the last is in.
	ctx := context.Background()
	var ga, gb keystore.Key
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := keys.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		ga, _ = store.Key(ctx, ka.ID)
		gb, _ = store.Key(ctx, kb.ID)
		if ga.Used.Requests+gb.Used.Requests >= 6 || time.Now().After(deadline) {
			break
		}
	}
	if ga.Used.Requests != 4 || ga.Used.Errors != 1 || ga.Used.Bytes < 4*40 || ga.Used.LastUsed.IsZero() {
		t.Errorf("key a: %+v; want 4 requests, 1 error, their bytes, a last use", ga.Used)
	}
	if gb.Used.Requests != 2 || gb.Used.Errors != 0 {
		t.Errorf("key b: %+v; want 2 requests, no error", gb.Used)
	}
	minutes, err := store.Minutes(ctx, ka.ID, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var sum, errs int64
	for _, m := range minutes {
		sum += m.Requests
		errs += m.Errors
	}
	if sum != 4 || errs != 1 {
		t.Errorf("key a's minutes sum to %d requests and %d errors, want 4 and 1: %+v", sum, errs, minutes)
	}
}

// TestOpenFailsWithoutTheStore checks that a server does not start without
// its keys.
func TestOpenFailsWithoutTheStore(t *testing.T) {
	store := &flaky{Store: keystore.NewMemory()}
	store.down.Store(true)
	if _, err := keystore.Open(context.Background(), store, keystore.Options{}); !errors.Is(err, errDown) {
		t.Errorf("Open of a store that is down: %v, want its error", err)
	}
}

// TestOpenRefusesStaleWithinRefresh checks that Options whose keys would
// go stale between two refreshes are refused, with both values named.
func TestOpenRefusesStaleWithinRefresh(t *testing.T) {
	for _, opts := range []keystore.Options{
		{Refresh: time.Minute, Stale: time.Minute},
		{Refresh: time.Minute, Stale: 30 * time.Second},
	} {
		_, err := keystore.Open(context.Background(), keystore.NewMemory(), opts)
		if err == nil || !strings.Contains(err.Error(), opts.Stale.String()) || !strings.Contains(err.Error(), opts.Refresh.String()) {
			t.Errorf("Open with Refresh %v and Stale %v: %v, want an error naming both", opts.Refresh, opts.Stale, err)
		}
	}
}

// canceledReads is a Store whose reads of the keys end with their
// context, as a database's do.
type canceledReads struct{ keystore.Store }

func (s canceledReads) Keys(ctx context.Context) ([]keystore.Key, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.Store.Keys(ctx)
}

// TestRefreshCanceled refreshes with a context its caller has canceled
// (an admin request whose client left): the refresh fails, and the keys
// are not reported unreadable for it.
func TestRefreshCanceled(t *testing.T) {
	store := canceledReads{keystore.NewMemory()}
	keys, err := keystore.Open(context.Background(), store, keystore.Options{Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := keys.Refresh(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled refresh: %v, want context.Canceled", err)
	}
	if err := keys.Health(); err != nil {
		t.Errorf("Health after a canceled refresh of a store that reads well: %v", err)
	}
}

// TestKeysOutageLoggedOnce fails several refreshes in a row: the outage is
// logged once, when it begins, not at every refresh.
func TestKeysOutageLoggedOnce(t *testing.T) {
	ctx := context.Background()
	store := &flaky{Store: keystore.NewMemory()}
	var log syncbuf.Buffer
	keys, err := keystore.Open(ctx, store, keystore.Options{Refresh: time.Hour, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	store.down.Store(true)
	for range 3 {
		if err := keys.Refresh(ctx); !errors.Is(err, errDown) {
			t.Fatalf("Refresh while the store is down = %v, want %v", err, errDown)
		}
	}
	if n := strings.Count(log.String(), "cannot be read"); n != 1 {
		t.Errorf("the outage is logged %d times, want once:\n%s", n, log.String())
	}
}

// TestKeysSlowFailureThenSuccess has a refresh fail slowly while a refresh
// begun later succeeds: the store was read after the failure began, so the
// keys are current, and Health says so.
func TestKeysSlowFailureThenSuccess(t *testing.T) {
	ctx := context.Background()
	store := &flaky{Store: keystore.NewMemory()}
	slow := &slowRead{Store: store, read: make(chan struct{}), release: make(chan struct{})}
	keys, err := keystore.Open(ctx, slow, keystore.Options{Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()

	store.down.Store(true)
	slow.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- keys.Refresh(ctx) }()
	<-slow.read // the read failed, and waits to say so
	store.down.Store(false)
	if err := keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	close(slow.release)
	if err := <-done; !errors.Is(err, errDown) {
		t.Fatalf("the slow refresh = %v, want %v", err, errDown)
	}
	if err := keys.Health(); err != nil {
		t.Errorf("Health = %v, want nil: a read begun after the failed one succeeded", err)
	}
}
