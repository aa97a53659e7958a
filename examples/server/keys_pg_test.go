package main

// Keys in PostgreSQL: two serving processes on one key store, and the
// store going away under a server.

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
)

// keySchema makes an empty schema for a key store and returns the URL that
// selects it.
func keySchema(t *testing.T, base string) string {
	t.Helper()
	schema := pgtest.Schema(t)
	if _, err := pgtest.Connect(t, base).Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	return base + "&search_path=" + schema
}

// waitStatus calls endpoint (a URL ending in /v3/) with key until the
// status is want, and returns how long that took and how many calls were
// accepted on the way, the last included.
func waitStatus(t *testing.T, endpoint, key string, want int, limit time.Duration) (took time.Duration, accepted int64) {
	t.Helper()
	start := time.Now()
	for {
		got := rpcStatusAt(t, endpoint, key)
		if got == http.StatusOK {
			accepted++
		}
		if got == want {
			return time.Since(start), accepted
		}
		if time.Since(start) > limit {
			t.Fatalf("still %d after %v, want %d", got, limit, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKeystorePostgresTwoServers checks that a key made on one server's
// dashboard serves on a second server process on the same key store, and
// that its revocation reaches the second within the refresh interval;
// usage of both adds up.
func TestKeystorePostgresTwoServers(t *testing.T) {
	_, base := pgtest.Shared(t)
	url := keySchema(t, base)
	const refresh = 300 * time.Millisecond
	a, adminA := startDashboard(t, "-keystore", url, "-key-refresh", refresh.String())
	b := startBinary(t, "-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-admin-token", testAdminToken,
		"-keystore", url, "-key-refresh", refresh.String())
	b.waitServing(t)
	endpointB := regexp.MustCompile(`JSON-RPC endpoint: (\S+/v3/)`).FindStringSubmatch(b.stdout.String())[1]

	k := decodeKey(t, adminA.want(http.StatusCreated, "POST", "/api/keys", `{"label":"shared"}`))
	took, acceptedB := waitStatus(t, endpointB, k.Key, http.StatusOK, 5*refresh)
	t.Logf("a new key served by the second process after %v", took.Round(time.Millisecond))
	if got := rpcStatus(t, a, k.Key); got != http.StatusOK {
		t.Fatalf("the key on its own server: %d", got)
	}

	adminA.want(http.StatusOK, "DELETE", "/api/keys/"+k.ID, "")
	if got := rpcStatus(t, a, k.Key); got != http.StatusUnauthorized {
		t.Errorf("the revoked key on the server that revoked it: %d, want 401 at once", got)
	}
	took, more := waitStatus(t, endpointB, k.Key, http.StatusUnauthorized, 5*time.Second)
	acceptedB += more
	// The interval, and the time a refresh and a request take on a busy
	// machine: well under the default interval (5 s), which a server that
	// ignored -key-refresh would take.
	if took > refresh+2*time.Second {
		t.Errorf("the revocation reached the second process after %v, refreshing every %v", took, refresh)
	}
	t.Logf("the revocation reached the second process after %v, refreshing every %v", took.Round(time.Millisecond), refresh)

	// Both servers' usage, in one total once both have flushed.
	a.stop(t)
	b.cmd.Process.Signal(os.Interrupt)
	if code, _ := b.wait(t, 15*time.Second); code != 0 {
		t.Errorf("the second process exited with %d:\n%s", code, b.stderr.String())
	}
	c, adminC := startDashboard(t, "-keystore", url)
	defer c.stop(t)
	shown := decodeKey(t, adminC.want(http.StatusOK, "GET", "/api/keys/"+k.ID, ""))
	if want := 1 + acceptedB; shown.Requests != want || shown.Revoked == nil {
		t.Errorf("the key in the store: %d requests, revoked %v; want %d (1 by the first process, %d by the second) and the revocation",
			shown.Requests, shown.Revoked, want, acceptedB)
	}
}

// TestKeystorePostgresOutage stops the database under a server: the keys
// it knows keep serving, /readyz and the log say why, and past -key-stale
// requests get 503 until the database is back.
func TestKeystorePostgresOutage(t *testing.T) {
	if err := pgtest.Available(); err != nil {
		t.Skip(err)
	}
	db, err := pgtest.Start(pgtest.Config{Settings: pgtest.Fast})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			db.Stop()
		}
	}()
	url, err := db.CreateDatabase("keys")
	if err != nil {
		t.Fatal(err)
	}
	const stale = 2 * time.Second
	srv, admin := startDashboard(t, "-keystore", url, "-key-refresh", "100ms", "-key-stale", stale.String())
	k := decodeKey(t, admin.want(http.StatusCreated, "POST", "/api/keys", `{"label":"known"}`))
	if got := rpcStatus(t, srv, k.Key); got != http.StatusOK {
		t.Fatalf("the key before the outage: %d", got)
	}

	if err := db.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	down := time.Now()
	deadline := down.Add(stale / 2)
	for {
		status, body := get(t, admin.base+"/readyz")
		if status == http.StatusOK && strings.Contains(body, "unreadable") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz during the outage: %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := rpcStatus(t, srv, k.Key); got != http.StatusOK {
		t.Errorf("a known key during the outage: %d, want 200", got)
	}
	admin.want(http.StatusServiceUnavailable, "POST", "/api/keys", `{"label":"while down"}`)

	waitStatus(t, srv.rpcURL(t), k.Key, http.StatusServiceUnavailable, 2*stale)
	if held := time.Since(down); held < stale/2 {
		t.Errorf("known keys served for %v of the outage, want about %v", held, stale)
	}
	if status, body := get(t, admin.base+"/readyz"); status != http.StatusServiceUnavailable {
		t.Errorf("/readyz past -key-stale: %d %s, want 503", status, body)
	}
	srv.stop(t)
	if !strings.Contains(srv.stderr(), "serving the keys last read") {
		t.Errorf("the log does not tell of the outage:\n%s", srv.stderr())
	}
}
