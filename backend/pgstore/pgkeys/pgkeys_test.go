package pgkeys_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgkeys"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/keystore"
	"github.com/blockrpc/blockrpc/keystore/storetest"
	"github.com/jackc/pgx/v5"
)

// withSearchPath returns dbURL with its search_path set to schema.
func withSearchPath(t testing.TB, dbURL, schema string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", pgx.Identifier{schema}.Sanitize())
	u.RawQuery = q.Encode()
	return u.String()
}

// execSQL runs sql on the database at dbURL.
func execSQL(t testing.TB, dbURL, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// newSchema creates an empty schema on the shared server, and returns the
// URL that chooses it.
func newSchema(t testing.TB) string {
	t.Helper()
	_, dbURL := pgtest.Shared(t)
	schema := pgtest.Schema(t)
	execSQL(t, dbURL, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	return withSearchPath(t, dbURL, schema)
}

// open opens the store at dbURL, closed when the test ends.
func open(t testing.TB, dbURL string) *pgkeys.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgkeys.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestConformance runs keystore's suite, each store on a schema of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) keystore.Store { return open(t, newSchema(t)) })
}

// TestTwoProcesses opens two stores on one database, each with its own
// pool as two serving processes would have: what either writes, the other
// reads next, through keystore.Keys too.
func TestTwoProcesses(t *testing.T) {
	ctx := context.Background()
	dbURL := newSchema(t)
	a, b := open(t, dbURL), open(t, dbURL)
	now := time.Now().UTC().Truncate(time.Microsecond)

	secret, k1, err := keystore.NewKey("made by a", 0, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Create(ctx, k1); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Key(ctx, k1.ID); err != nil || got.Digest != k1.Digest || got.Label != k1.Label {
		t.Fatalf("b reads a's key: %+v, %v", got, err)
	}
	_, k2, _ := keystore.NewKey("made by b", 0, 0, now)
	if err := b.Create(ctx, k2); err != nil {
		t.Fatal(err)
	}
	if err := a.Create(ctx, k2); !errors.Is(err, keystore.ErrExists) {
		t.Errorf("a creates the key b made: %v, want ErrExists", err)
	}
	keys, err := a.Keys(ctx)
	if err != nil || len(keys) != 2 || keys[0].ID != k1.ID || keys[1].ID != k2.ID {
		t.Fatalf("a's Keys after b's creation: %+v, %v; want %s then %s", keys, err, k1.ID, k2.ID)
	}

	// b serves the keys; a is the operator's tool.
	served, err := keystore.Open(ctx, b, keystore.Options{Refresh: time.Hour, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	if ok, err := served.ValidKey(ctx, secret); !ok || err != nil {
		t.Fatalf("b serves a's key: %v, %v", ok, err)
	}
	if _, err := a.Update(ctx, k1.ID, keystore.Change{Limit: &blockrpc.Limit{Rate: 7, Burst: 9}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Key(ctx, k1.ID); got.Rate != 7 || got.Burst != 9 {
		t.Errorf("b reads a's new limit: %+v", got)
	}
	if err := served.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if lim, own := served.KeyLimit(ctx, secret); !own || lim != (blockrpc.Limit{Rate: 7, Burst: 9}) {
		t.Errorf("b serves a's new limit: %+v, %v", lim, own)
	}

	// Both count the key's use, at once, flush after flush: the totals
	// are the sums, whatever the order of the keys in each flush.
	minute := now.Truncate(time.Minute)
	const flushes = 20
	var wg sync.WaitGroup
	for i, s := range []*pgkeys.Store{a, b} {
		wg.Go(func() {
			for n := range flushes {
				usage := []keystore.Usage{
					{ID: k1.ID, Totals: keystore.Totals{Requests: 1, Bytes: 10, LastUsed: now.Add(time.Duration(i) * time.Second)},
						Minutes: []keystore.Minute{{Start: minute, Requests: 1}}},
					{ID: k2.ID, Totals: keystore.Totals{Requests: 2, Errors: 1, LastUsed: now},
						Minutes: []keystore.Minute{{Start: minute, Requests: 2, Errors: 1}}},
				}
				if (n+i)%2 == 1 {
					usage[0], usage[1] = usage[1], usage[0]
				}
				if err := s.Record(ctx, usage); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, _ := b.Key(ctx, k1.ID)
	if u := got.Used; u.Requests != 2*flushes || u.Errors != 0 || u.Bytes != 20*flushes || !u.LastUsed.Equal(now.Add(time.Second)) {
		t.Errorf("k1's totals after both recorded: %+v, want %d requests, %d bytes, last used at %v (the later)",
			u, 2*flushes, 20*flushes, now.Add(time.Second))
	}
	minutes, err := a.Minutes(ctx, k2.ID, minute)
	if err != nil || !sameMinutes(minutes, []keystore.Minute{{Start: minute, Requests: 4 * flushes, Errors: 2 * flushes}}) {
		t.Errorf("k2's minutes after both recorded: %+v, %v", minutes, err)
	}

	revokedAt := now.Add(time.Minute)
	if _, err := b.Revoke(ctx, k1.ID, revokedAt); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Key(ctx, k1.ID); err != nil || !got.Revoked.Equal(revokedAt) {
		t.Errorf("a reads b's revocation: %+v, %v", got, err)
	}
	tooLate := "too late"
	if _, err := a.Update(ctx, k1.ID, keystore.Change{Label: &tooLate}); !errors.Is(err, keystore.ErrRevoked) {
		t.Errorf("a updates the key b revoked: %v, want ErrRevoked", err)
	}
	if got, err := a.Revoke(ctx, k1.ID, revokedAt.Add(time.Hour)); err != nil || !got.Revoked.Equal(revokedAt) {
		t.Errorf("a revokes it again: %v at %v, want b's time %v", err, got.Revoked, revokedAt)
	}
	if err := served.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := served.ValidKey(ctx, secret); ok {
		t.Error("b still serves the key it revoked")
	}
}

// TestConcurrentOpen starts processes that open the store of one empty
// database at the same instant, twice each: all of them succeed, and the
// tables are migrated once.
func TestConcurrentOpen(t *testing.T) {
	srv, _ := pgtest.Shared(t)
	for round := range 3 {
		var target string
		if srv != nil {
			var err error
			if target, err = srv.CreateDatabase(pgtest.Schema(t)); err != nil {
				t.Fatal(err)
			}
		} else { // a server given by URL: an empty schema of its database
			target = newSchema(t)
		}
		at := time.Now().Add(time.Second)
		const procs = 4
		cmds := make([]*exec.Cmd, procs)
		outs := make([]strings.Builder, procs)
		for i := range cmds {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), roleEnv+"=open", urlEnv+"="+target, atEnv+"="+strconv.FormatInt(at.UnixNano(), 10))
			cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[i] = cmd
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("round %d, process %d: %v\n%s", round, i, err, outs[i].String())
			}
		}
		var version, tables int
		s := open(t, target)
		if err := pgxQueryRow(t, target, `SELECT version FROM blockrpc_keys_version WHERE id = 1`, &version); err != nil || version != pgkeys.SchemaVersion() {
			t.Errorf("round %d: version %d, %v; want %d", round, version, err, pgkeys.SchemaVersion())
		}
		if err := pgxQueryRow(t, target, `SELECT count(*) FROM blockrpc_keys_version`, &tables); err != nil || tables != 1 {
			t.Errorf("round %d: %d version rows, %v; want 1", round, tables, err)
		}
		if _, err := s.Keys(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// pgxQueryRow scans the one row of sql on the database at dbURL.
func pgxQueryRow(t testing.TB, dbURL, sql string, dest ...any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// TestNewerSchema opens a store on key tables that a newer pgkeys has
// migrated: it is refused, and the tables are left as they are.
func TestNewerSchema(t *testing.T) {
	dbURL := newSchema(t)
	s := open(t, dbURL)
	_, k, _ := keystore.NewKey("kept", 0, 0, time.Now())
	if err := s.Create(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	newer := pgkeys.SchemaVersion() + 1
	execSQL(t, dbURL, `UPDATE blockrpc_keys_version SET version = $1 WHERE id = 1`, newer)

	_, err := pgkeys.Open(context.Background(), dbURL)
	if !errors.Is(err, pgkeys.ErrNewerSchema) {
		t.Fatalf("Open on tables of version %d: %v, want ErrNewerSchema", newer, err)
	}
	t.Log(err)
	for _, want := range []string{"newer", strconv.Itoa(newer), strconv.Itoa(pgkeys.SchemaVersion())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	var version int
	if err := pgxQueryRow(t, dbURL, `SELECT version FROM blockrpc_keys_version WHERE id = 1`, &version); err != nil || version != newer {
		t.Errorf("the version after the refusal: %d, %v; want %d", version, err, newer)
	}
	if got, err := s.Key(context.Background(), k.ID); err != nil || got.Label != "kept" {
		t.Errorf("the key after the refusal: %+v, %v", got, err)
	}
}

// TestClosed calls every method of a closed store: each says the store
// is closed, rather than what the pool under it says.
func TestClosed(t *testing.T) {
	ctx := context.Background()
	s := open(t, newSchema(t))
	_, k, _ := keystore.NewKey("made", 0, 0, time.Now())
	if err := s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	s.Close()
	label := "renamed"
	calls := map[string]error{
		"Create": s.Create(ctx, k),
		"Record": s.Record(ctx, []keystore.Usage{{ID: k.ID, Totals: keystore.Totals{Requests: 1}}}),
	}
	_, calls["Key"] = s.Key(ctx, k.ID)
	_, calls["Keys"] = s.Keys(ctx)
	_, calls["Update"] = s.Update(ctx, k.ID, keystore.Change{Label: &label})
	_, calls["Revoke"] = s.Revoke(ctx, k.ID, time.Now())
	_, calls["Minutes"] = s.Minutes(ctx, k.ID, time.Now().Add(-time.Hour))
	for name, err := range calls {
		if !errors.Is(err, pgkeys.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// TestBesideChainStore keeps the keys in the schema of a pgstore chain
// store: each has its own tables and version, and both open again.
func TestBesideChainStore(t *testing.T) {
	_, dbURL := pgtest.Shared(t)
	schema := pgtest.Schema(t)
	ctx := context.Background()
	for range 2 {
		w, err := pgstore.OpenWriter(ctx, dbURL, &pgstore.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		s := open(t, withSearchPath(t, dbURL, schema))
		_, k, _ := keystore.NewKey("", 0, 0, time.Now())
		if err := s.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	var keyVersion, chainVersion int
	if err := pgxQueryRow(t, withSearchPath(t, dbURL, schema),
		`SELECT k.version, c.version FROM blockrpc_keys_version k, blockrpc_pgstore_version c`, &keyVersion, &chainVersion); err != nil {
		t.Fatal(err)
	}
	if keyVersion != pgkeys.SchemaVersion() || chainVersion != pgstore.SchemaVersion() {
		t.Errorf("versions: keys %d, chain %d; want %d, %d", keyVersion, chainVersion, pgkeys.SchemaVersion(), pgstore.SchemaVersion())
	}
}

// TestMissingSchema opens a store on a search_path whose schema is not
// there: the error says what to look at.
func TestMissingSchema(t *testing.T) {
	_, dbURL := pgtest.Shared(t)
	_, err := pgkeys.Open(context.Background(), withSearchPath(t, dbURL, pgtest.Schema(t)))
	if err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("Open on a schema that is not there: %v", err)
	}
	t.Log(err)
}

// TestOldMinutes records minutes older than keystore.History: they are
// neither returned nor kept, and the recent ones are.
func TestOldMinutes(t *testing.T) {
	ctx := context.Background()
	dbURL := newSchema(t)
	s := open(t, dbURL)
	_, k, _ := keystore.NewKey("old", 0, 0, time.Now())
	if err := s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Minute)
	old, kept := now.Add(-keystore.History-time.Hour), now.Add(-keystore.History+time.Hour)
	// A minute left from the key's use of two days ago, which no record
	// has deleted since: it is not read.
	execSQL(t, dbURL, `INSERT INTO blockrpc_key_minutes (key_id, minute_start, requests, errors) VALUES ($1, $2, 5, 0)`,
		k.ID, now.Add(-2*keystore.History))
	if minutes, err := s.Minutes(ctx, k.ID, time.Time{}); err != nil || len(minutes) != 0 {
		t.Errorf("Minutes with only a minute of two days ago: %+v, %v; want none", minutes, err)
	}
	if err := s.Record(ctx, []keystore.Usage{{ID: k.ID, Minutes: []keystore.Minute{
		{Start: old, Requests: 1}, {Start: kept, Requests: 2}, {Start: now, Requests: 3},
	}}}); err != nil {
		t.Fatal(err)
	}
	minutes, err := s.Minutes(ctx, k.ID, time.Time{})
	want := []keystore.Minute{{Start: kept, Requests: 2}, {Start: now, Requests: 3}}
	if err != nil || !sameMinutes(minutes, want) {
		t.Errorf("Minutes from the start: %+v, %v; want %+v", minutes, err, want)
	}
	var rows int
	if err := pgxQueryRow(t, dbURL, `SELECT count(*) FROM blockrpc_key_minutes`, &rows); err != nil || rows != 2 {
		t.Errorf("%d minute rows kept, %v; want 2", rows, err)
	}
}

// sameMinutes reports whether got and want are the same minutes, with the
// same counts.
func sameMinutes(got, want []keystore.Minute) bool {
	return slices.EqualFunc(got, want, func(g, w keystore.Minute) bool {
		return g.Start.Equal(w.Start) && g.Requests == w.Requests && g.Errors == w.Errors
	})
}

// TestCommitAnswerLost loses the answer to the COMMIT of a flush of
// usage, as a network failing at that moment does: the server has the
// usage, the serving process does not know it. However many flushes it
// takes, each request counts once.
func TestCommitAnswerLost(t *testing.T) {
	ctx := context.Background()
	u := countThroughProxy(t, "lost answers", 7)
	u.proxy.LoseCommitAnswers(1)
	flushes := 0
	var err error
	for ; flushes < 3; flushes++ {
		if err = u.keys.Flush(ctx); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("%d flushes failed, the last with %v", flushes, err)
	}
	if n := u.proxy.CommitAnswersToLose(); n != 0 {
		t.Fatalf("no COMMIT went through the proxy: %d answers still to lose", n)
	}
	u.check(t, fmt.Sprintf("after %d failed flushes and one that succeeded", flushes))
	minutes, err := u.store.Minutes(ctx, u.id, time.Time{})
	if sum := sumRequests(minutes); err != nil || sum != u.requests {
		t.Errorf("the minutes count %d requests (%v), want %d", sum, err, u.requests)
	}
}

// TestCommitAnswerLostThenOutage loses the answer to the COMMIT of a
// flush, and then the database is out of reach for the flush's other
// tries: the flush fails not knowing whether it was recorded, and the
// serving process keeps its counts. The next flush, the database back,
// finds it was, and counts each request once, where it counted them
// twice.
func TestCommitAnswerLostThenOutage(t *testing.T) {
	ctx := context.Background()
	u := countThroughProxy(t, "lost answer, then an outage", 7)
	u.proxy.LoseCommitAnswerThenRefuse()
	first := u.keys.Flush(ctx)
	if first == nil {
		t.Fatal("the flush whose COMMIT's answer was lost, the database then out of reach, succeeded")
	}
	if n := u.proxy.CommitAnswersToLose(); n != 0 {
		t.Fatalf("no COMMIT went through the proxy: %d answers still to lose", n)
	}
	u.proxy.Refuse(false)
	if err := u.keys.Flush(ctx); err != nil {
		t.Fatalf("the flush after the outage: %v", err)
	}
	u.check(t, fmt.Sprintf("a flush that failed not knowing (%v), then another", first))
	minutes, err := u.store.Minutes(ctx, u.id, time.Time{})
	if sum := sumRequests(minutes); err != nil || sum != u.requests {
		t.Errorf("the minutes count %d requests (%v), want %d", sum, err, u.requests)
	}
}

// TestCommitAnswerLostForHours asks about a flush in doubt 23 hours after
// it was sent, other processes having recorded flushes meanwhile (each of
// which forgets the ids of flushes older than the store remembers): a
// process whose database was out of its reach that long still counts
// each request once.
func TestCommitAnswerLostForHours(t *testing.T) {
	ctx := context.Background()
	u := countThroughProxy(t, "lost answer, then a long outage", 7)
	u.proxy.LoseCommitAnswerThenRefuse()
	if err := u.keys.Flush(ctx); err == nil {
		t.Fatal("the flush whose COMMIT's answer was lost, the database then out of reach, succeeded")
	}
	execSQL(t, u.direct, `UPDATE blockrpc_key_flushes SET recorded = recorded - INTERVAL '23 hours'`)
	other := open(t, u.direct)
	_, k, _ := keystore.NewKey("another process's", 0, 0, time.Now())
	if err := other.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := other.Record(ctx, []keystore.Usage{{ID: k.ID, Totals: keystore.Totals{Requests: 1}}}); err != nil {
		t.Fatal(err)
	}
	u.proxy.Refuse(false)
	if err := u.keys.Flush(ctx); err != nil {
		t.Fatalf("the flush after the outage: %v", err)
	}
	u.check(t, "a flush in doubt for 23 hours, then another")
}

// TestCommitAnswerLostThenMoreRequests counts more requests in the same
// minute between a flush whose COMMIT's answer was lost and the next
// flush: the minutes, not only the totals, must count each request once.
func TestCommitAnswerLostThenMoreRequests(t *testing.T) {
	ctx := context.Background()
	u := countThroughProxy(t, "lost answer, then more requests", 7)
	u.proxy.LoseCommitAnswerThenRefuse()
	if err := u.keys.Flush(ctx); err == nil {
		t.Fatal("the flush whose COMMIT's answer was lost, the database then out of reach, succeeded")
	}
	u.proxy.Refuse(false)
	k, err := u.store.Key(ctx, u.id)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		u.keys.Observer().Request(ctx, blockrpc.RequestInfo{KeyDigest: k.Digest.String(), Written: 100})
	}
	u.requests += 3
	if err := u.keys.Flush(ctx); err != nil {
		t.Fatalf("the flush after the outage: %v", err)
	}
	u.check(t, "a flush that failed not knowing, more requests, then another flush")
	minutes, err := open(t, u.direct).Minutes(ctx, u.id, time.Time{})
	if sum := sumRequests(minutes); err != nil || sum != u.requests {
		t.Errorf("the minutes count %d requests (%v), want %d", sum, err, u.requests)
	}
}

// TestCommitAnswerHeld is TestCommitAnswerLost with the flush's context
// ending while it waits for the COMMIT's answer: the flush was committed,
// and the next one must not count it again.
func TestCommitAnswerHeld(t *testing.T) {
	u := countThroughProxy(t, "held answers", 5)
	u.proxy.HoldCommitAnswers(1)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	first := u.keys.Flush(ctx)
	cancel()
	if n := u.proxy.CommitAnswersToHold(); n != 0 {
		t.Fatalf("no COMMIT went through the proxy: %d answers still to hold", n)
	}
	if err := u.keys.Flush(context.Background()); err != nil {
		t.Fatalf("the flush after the one whose context ended (%v): %v", first, err)
	}
	u.check(t, fmt.Sprintf("a flush whose context ended at its COMMIT (%v), then another", first))
}

// counted is a key's usage counted by a keystore.Keys whose store
// reaches the database through a proxy, not yet flushed.
type counted struct {
	proxy    *pgtest.Proxy
	store    *pgkeys.Store // through the proxy
	direct   string        // the database's URL, not through the proxy
	keys     *keystore.Keys
	id       string
	requests int64
}

// countThroughProxy counts requests of 100 bytes each against a new key.
func countThroughProxy(t *testing.T, label string, requests int64) *counted {
	t.Helper()
	ctx := context.Background()
	dbURL := newSchema(t)
	proxy, viaProxy := pgtest.StartProxy(t, dbURL)
	s := open(t, viaProxy)
	_, k, _ := keystore.NewKey(label, 0, 0, time.Now())
	if err := s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	keys, err := keystore.Open(ctx, s, keystore.Options{Refresh: time.Hour, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	observer := keys.Observer()
	for range requests {
		observer.Request(ctx, blockrpc.RequestInfo{KeyDigest: k.Digest.String(), Written: 100})
	}
	return &counted{proxy: proxy, store: s, direct: dbURL, keys: keys, id: k.ID, requests: requests}
}

// check reads the key's totals from the database, not through the proxy:
// each request must count once.
func (c *counted) check(t *testing.T, after string) {
	t.Helper()
	got, err := open(t, c.direct).Key(context.Background(), c.id)
	if err != nil {
		t.Fatal(err)
	}
	if u := got.Used; u.Requests != c.requests || u.Bytes != 100*c.requests {
		t.Errorf("%s: %d requests and %d bytes recorded, want %d and %d", after, u.Requests, u.Bytes, c.requests, 100*c.requests)
	}
}

func sumRequests(minutes []keystore.Minute) int64 {
	var n int64
	for _, m := range minutes {
		n += m.Requests
	}
	return n
}
