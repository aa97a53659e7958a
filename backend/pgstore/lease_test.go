package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/jackc/pgx/v5"
)

// TestSingleWriter checks the writer's lease: a second writer is refused,
// or waits until the first closes; a writer whose lease expired and was
// taken over can no longer write.
func TestSingleWriter(t *testing.T) {
	ctx := context.Background()
	b := chaintest.New(chaintest.Config{Seed: 8})
	b.AddBlocks(4, chaintest.Txs(1))
	src := b.Store()
	block := func(n uint64) *backend.Block {
		blk, err := src.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatal(err)
		}
		return blk
	}

	first, url, schema := openWriter(t, nil)
	if err := first.AddBlock(block(0)); err != nil {
		t.Fatal(err)
	}
	opts := &pgstore.Options{Schema: schema}

	// Refused, naming the holder.
	_, err := pgstore.OpenWriter(ctx, url, opts)
	if !errors.Is(err, pgstore.ErrWriterBusy) || !strings.Contains(err.Error(), first.Owner()) {
		t.Fatalf("a second writer: %v, want ErrWriterBusy naming %s", err, first.Owner())
	}
	t.Logf("refused: %v", err)

	// Waiting, until its context ends.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = pgstore.OpenWriter(short, url, &pgstore.Options{Schema: schema, WaitForLease: true})
	cancel()
	if !errors.Is(err, pgstore.ErrWriterBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second writer waiting 300ms: %v, want ErrWriterBusy and the context's deadline", err)
	}

	// Waiting, until the first closes.
	type opened struct {
		w   *pgstore.Writer
		err error
	}
	waiting := make(chan opened, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		w, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema, WaitForLease: true, LeaseTTL: 2 * time.Second})
		waiting <- opened{w, err}
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case o := <-waiting:
		t.Fatalf("the waiting writer opened while the first held the lease: %v", o.err)
	default:
	}
	if err := first.AddBlock(block(1)); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if err := first.AddBlock(block(2)); !errors.Is(err, pgstore.ErrClosed) {
		t.Errorf("a write after Close: %v, want ErrClosed", err)
	}
	o := <-waiting
	if o.err != nil {
		t.Fatalf("the waiting writer, once the first closed: %v", o.err)
	}
	second := o.w
	defer second.Close()
	if latest, err := second.BlockByNumber(ctx, backend.Latest); err != nil || latest.Number != 1 {
		t.Fatalf("the second writer's latest block: %v, %v; want the first's block 1", latest, err)
	}
	if err := second.AddBlock(block(2)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.LeaseLost():
		t.Fatal("LeaseLost is closed for a writer that holds its lease")
	default:
	}

	// The second stalls: its lease expires, and a third writer takes it
	// over. The second's next write is refused, and writes nothing.
	conn := pgtest.Connect(t, url)
	if _, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "writer_lease"}.Sanitize()+` SET expires_at = clock_timestamp() - INTERVAL '1 second'`); err != nil {
		t.Fatal(err)
	}
	third, err := pgstore.OpenWriter(ctx, url, opts)
	if err != nil {
		t.Fatalf("a writer after the lease expired: %v", err)
	}
	defer third.Close()
	if err := second.AddBlock(block(3)); !errors.Is(err, pgstore.ErrLeaseLost) {
		t.Fatalf("a write by the writer whose lease was taken over: %v, want ErrLeaseLost", err)
	}
	select {
	case <-second.LeaseLost():
	default:
		t.Error("LeaseLost is not closed once a write found the lease taken over")
	}
	if err := second.SetSafe(1); !errors.Is(err, pgstore.ErrLeaseLost) {
		t.Fatalf("SetSafe by the writer whose lease was taken over: %v, want ErrLeaseLost", err)
	}
	if _, err := third.BlockByHash(ctx, block(3).Hash); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the refused write's block: %v, want ErrNotFound", err)
	}
	if err := third.AddBlock(block(3)); err != nil {
		t.Fatal(err)
	}
	// The second serves what the third writes, as a reader does: it
	// polls the head row.
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		latest, err := second.BlockByNumber(ctx, backend.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if latest.Hash == block(3).Hash {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the writer whose lease was taken serves block %d as the latest 10s after the third wrote block 3", latest.Number)
		}
	}
}

// TestMigrationUnderLease opens a writer of a newer pgstore, one more
// migration, beside a writer of this one: refused the lease, it leaves the
// tables as they are; waiting for it, it migrates them only once the older
// writer has let go.
func TestMigrationUnderLease(t *testing.T) {
	older, url, schema := openWriter(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := pgtest.Connect(t, url)
	const migration, marker = "0002_marker.sql", "newer_marker"
	tables := func() (version int, marked bool) {
		t.Helper()
		err := conn.QueryRow(ctx, `SELECT version, to_regclass($1) IS NOT NULL FROM `+pgx.Identifier{schema, "blockrpc_pgstore_version"}.Sanitize(),
			pgx.Identifier{schema, marker}.Sanitize()).Scan(&version, &marked)
		if err != nil {
			t.Fatal(err)
		}
		return version, marked
	}
	newer := func(opts *pgstore.Options) (*pgstore.Writer, error) {
		return pgstore.OpenWriterMigrating(ctx, url, opts, migration, `CREATE TABLE `+marker+` (id INT)`)
	}

	if _, err := newer(&pgstore.Options{Schema: schema}); !errors.Is(err, pgstore.ErrWriterBusy) {
		t.Fatalf("a newer writer beside the older one: %v, want ErrWriterBusy", err)
	}
	if v, marked := tables(); v != pgstore.SchemaVersion() || marked {
		t.Errorf("a writer refused the lease changed the tables: version %d, its table made: %v", v, marked)
	}

	type opened struct {
		w   *pgstore.Writer
		err error
	}
	waiting := make(chan opened, 1)
	go func() {
		w, err := newer(&pgstore.Options{Schema: schema, WaitForLease: true})
		waiting <- opened{w, err}
	}()
	time.Sleep(300 * time.Millisecond)
	if v, marked := tables(); v != pgstore.SchemaVersion() || marked {
		t.Errorf("a writer waiting for the lease changed the tables: version %d, its table made: %v", v, marked)
	}
	older.Close()
	o := <-waiting
	if o.err != nil {
		t.Fatalf("the newer writer once the older closed: %v", o.err)
	}
	defer o.w.Close()
	if v, marked := tables(); v != pgstore.SchemaVersion()+1 || !marked {
		t.Errorf("the newer writer with the lease: version %d, its table made: %v; want version %d and the table", v, marked, pgstore.SchemaVersion()+1)
	}
}

// TestReaderOfMigratedTables runs a reader while its tables are migrated
// to a newer version, by a newer writer or by hand with a change of the
// head row that the reader's poll cannot read: from its next poll on,
// every read fails with ErrMigrated, cached blocks too, rather than read
// tables no longer laid out as it reads them, even should the version
// row show its version again; and it is logged once.
func TestReaderOfMigratedTables(t *testing.T) {
	for _, c := range []struct {
		name    string
		migrate func(ctx context.Context, t *testing.T, url, schema string)
	}{
		{"a newer writer adds a table", func(ctx context.Context, t *testing.T, url, schema string) {
			newer, err := pgstore.OpenWriterMigrating(ctx, url, &pgstore.Options{Schema: schema}, "0002_marker.sql", `CREATE TABLE newer_marker (id INT)`)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { newer.Close() })
			if b, err := newer.BlockByNumber(ctx, 5); err != nil || b.Number != 5 {
				t.Errorf("the newer writer's block 5: %v, %v", b, err)
			}
		}},
		{"the head row changes", func(ctx context.Context, t *testing.T, url, schema string) {
			err := pgx.BeginFunc(ctx, pgtest.Connect(t, url), func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `ALTER TABLE `+pgx.Identifier{schema, "head"}.Sanitize()+` RENAME COLUMN safe TO safe_block;
					UPDATE `+pgx.Identifier{schema, "blockrpc_pgstore_version"}.Sanitize()+` SET version = version + 1`)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s := buildShared()
			older, url, schema := openWriter(t, nil)
			s.importMain(t, older, 10, 0)
			var logged syncbuf.Buffer
			r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{
				Schema: schema, PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logged, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			want := s.main.Block(5)
			if b, err := r.BlockByNumber(ctx, 5); err != nil || b.Hash != want.Hash {
				t.Fatalf("block 5 before the migration: %v, %v", b, err)
			}

			older.Close()
			c.migrate(ctx, t, url, schema)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := r.BlockByNumber(ctx, 5); errors.Is(err, pgstore.ErrMigrated) {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("block 5 once migrated: %v, want ErrMigrated", err)
				}
			}
			time.Sleep(200 * time.Millisecond) // about ten more polls
			versions := fmt.Sprintf("they are at version %d and this reader reads version %d", pgstore.SchemaVersion()+1, pgstore.SchemaVersion())
			errs := map[string]error{"Refresh": r.Refresh(ctx)}
			_, errs["ChainID"] = r.ChainID(ctx)
			_, errs["latest"] = r.BlockByNumber(ctx, backend.Latest)
			_, errs["BlockByHash"] = r.BlockByHash(ctx, want.Hash)
			_, errs["UncleByBlockHashAndIndex"] = r.UncleByBlockHashAndIndex(ctx, want.Hash, 0)
			for name, err := range errs {
				if !errors.Is(err, pgstore.ErrMigrated) || !strings.Contains(err.Error(), versions) {
					t.Errorf("%s once migrated: %v, want ErrMigrated saying %q", name, err, versions)
				}
			}
			// The version row back, as a standby behind the migration
			// would show it: the reader has been told, and stays told.
			if _, err := pgtest.Connect(t, url).Exec(ctx, `UPDATE `+pgx.Identifier{schema, "blockrpc_pgstore_version"}.Sanitize()+` SET version = $1`, pgstore.SchemaVersion()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			if _, err := r.BlockByNumber(ctx, 5); !errors.Is(err, pgstore.ErrMigrated) {
				t.Errorf("block 5 once the version row went back: %v, want ErrMigrated still", err)
			}
			if n := strings.Count(logged.String(), "migrated"); n != 1 {
				t.Errorf("the migration is logged %d times, want once:\n%s", n, logged.String())
			}
		})
	}
}

// TestNewReaderOfStandbyBehind upgrades the tables with a newer writer,
// and runs a reader of that version whose poll then reaches a standby
// that has not replayed the migration: its version row and head row are
// older. That is a server behind the one polled before, passed over as
// an older head row is; once the standby catches up, the reader serves
// on, where it would fail every read with ErrMigrated for good.
func TestNewReaderOfStandbyBehind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := buildShared()
	older, url, schema := openWriter(t, nil)
	s.importMain(t, older, 10, 0)
	older.Close()
	newer, err := pgstore.OpenWriterMigrating(ctx, url, &pgstore.Options{Schema: schema}, "0002_marker.sql", `CREATE TABLE newer_marker (id INT)`)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	version := pgstore.SchemaVersion() + 1
	r, err := pgstore.OpenReaderOfVersion(ctx, url, &pgstore.Options{Schema: schema, PollInterval: time.Hour}, version)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := s.main.Block(7)
	if b, err := r.BlockByNumber(ctx, 7); err != nil || b.Hash != want.Hash {
		t.Fatalf("block 7: %v, %v", b, err)
	}

	conn := pgtest.Connect(t, url)
	standby := func(versionRow int, headVersions string) {
		t.Helper()
		if _, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "blockrpc_pgstore_version"}.Sanitize()+` SET version = $1`, versionRow); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "head"}.Sanitize()+` SET version = version `+headVersions); err != nil {
			t.Fatal(err)
		}
	}
	standby(version-1, "- 5")
	if err := r.Refresh(ctx); err != nil {
		t.Errorf("a poll of a standby behind the migration: %v", err)
	}
	standby(version, "+ 5")
	if err := r.Refresh(ctx); err != nil {
		t.Errorf("a poll once the standby caught up: %v", err)
	}
	for _, n := range []backend.BlockNumber{7, backend.Latest} {
		if b, err := r.BlockByNumber(ctx, n); err != nil {
			t.Errorf("block %v once the standby caught up: %v, %v", n, b, err)
		}
	}
}

// TestReaderNeedsTables checks that a reader of a schema no writer made
// says so.
func TestReaderNeedsTables(t *testing.T) {
	_, url := sharedURL(t)
	_, err := pgstore.OpenReader(context.Background(), url, &pgstore.Options{Schema: "nothing_here"})
	if !errors.Is(err, pgstore.ErrNoSchema) {
		t.Errorf("a reader of an empty schema: %v, want ErrNoSchema", err)
	}
}

// TestLeaseOverPartitionedWrite cuts a writer off from the database in
// the middle of a write, as a failed host or network does: the server's
// session holds the lease's row locked, idle in its transaction, and
// hears nothing more. The server ends that session once the lease would
// have run out, and a second writer waiting for the lease takes it over,
// and writes. Before, the session lived until TCP gave up on it (hours),
// and the second writer waited on the row's lock all that time. The cut
// off write fails once the server has been silent for the lease's TTL;
// it used to wait for the writer's Close.
func TestLeaseOverPartitionedWrite(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	_, url := pgtest.Shared(t)
	schema := pgtest.Schema(t)
	// Closed after the proxy has stopped (cleanups run last first), so
	// that it does not wait on connections that lead nowhere.
	var first *pgstore.Writer
	t.Cleanup(func() {
		if first != nil {
			first.Close()
		}
	})
	proxy, viaProxy := pgtest.StartProxy(t, url)
	const ttl = 2 * time.Second
	// Named, so that the wait below is its write's, whatever else waits.
	const application = "blockrpc-pgstore-partitioned"
	named, err := neturl.Parse(viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	query := named.Query()
	query.Set("application_name", application)
	named.RawQuery = query.Encode()
	first, err = pgstore.OpenWriter(ctx, named.String(),
		&pgstore.Options{Schema: schema, LeaseTTL: ttl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.addMain(t, first, 5)

	// The write waits for a lock on the blocks table, having locked the
	// lease's row; the network fails; then the table's lock goes, and
	// the write's statement ends on the server, unheard.
	release := lockTable(t, url, schema, "blocks", "SHARE")
	firstWrite := make(chan error, 1)
	go func() { firstWrite <- s.write(first, s.main.Block(6), true) }()
	awaitLockWait(t, lockWaiters(t, url, application), "the write", nil)
	proxy.Partition()
	cut := time.Now()
	release()

	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	second, err := pgstore.OpenWriter(openCtx, url, &pgstore.Options{Schema: schema, LeaseTTL: ttl, WaitForLease: true})
	if err != nil {
		t.Fatalf("a second writer, %v after the first was cut off in a write: %v", time.Since(start).Round(time.Millisecond), err)
	}
	defer second.Close()
	t.Logf("the second writer took the lease after %v", time.Since(start).Round(time.Millisecond))
	if err := s.write(second, s.main.Block(6), true); err != nil {
		t.Fatal(err)
	}
	if b, err := second.BlockByNumber(ctx, backend.Latest); err != nil || b.Hash != s.main.Block(6).Hash {
		t.Errorf("the second writer's latest block: %v, want block 6", err)
	}
	select {
	case err := <-firstWrite:
		if err == nil {
			t.Fatal("the write cut off from the database succeeded")
		}
		t.Logf("the cut off write failed %v after the cut: %v", time.Since(cut).Round(time.Millisecond), err)
	case <-time.After(writeGiveUp(ttl) - time.Since(cut)):
		t.Fatalf("the cut off write had not returned %v after the cut", writeGiveUp(ttl))
	}
}

// writeGiveUp bounds how long a write whose answer is lost waits: for the
// lease's TTL, or two of the checks a third of it apart, then for the 5 s
// a statement cancelled on the server is given to end; with room for a
// loaded machine.
func writeGiveUp(ttl time.Duration) time.Duration { return 3*ttl + 10*time.Second }

// TestWriterTakenOverServesOneChain has a writer's lease expire, and
// another writer take it over and reorganise to the long branch (block 60
// and up replaced, head 90), before the first has renewed it and so
// noticed. What the first serves by number is then of the chain of the
// latest block it serves next, never block 80 of the long branch next to
// latest of the main one (its own head, 80), nor a block above it.
func TestWriterTakenOverServesOneChain(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	first, url, schema := openWriter(t, &pgstore.Options{LeaseTTL: time.Minute})
	s.importMain(t, first, s.main.Head().Number, s.long.Head().Number+1)
	for n := range backend.BlockNumber(81) {
		if _, err := first.BlockByNumber(ctx, n); err != nil { // its cache, of the main branch
			t.Fatal(err)
		}
	}
	lease := pgx.Identifier{schema, "writer_lease"}.Sanitize()
	if _, err := pgtest.Connect(t, url).Exec(ctx, `UPDATE `+lease+` SET expires_at = clock_timestamp() - INTERVAL '1 second'`); err != nil {
		t.Fatal(err)
	}
	second, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := s.write(second, s.long.Head(), true); err != nil {
		t.Fatal(err)
	}

	for _, n := range []uint64{85, 80, 70} {
		got, err := first.BlockByNumber(ctx, backend.BlockNumber(n))
		latest, lerr := first.BlockByNumber(ctx, backend.Latest)
		if lerr != nil {
			t.Fatal(lerr)
		}
		chain, name := s.main, "main"
		if latest.Hash == s.long.Head().Hash {
			chain, name = s.long, "long"
		}
		switch {
		case n > latest.Number:
			if err == nil {
				t.Errorf("block %d (%s) served, above the latest block served next, %d of the %s branch", n, got.Hash, latest.Number, name)
			}
		case err != nil:
			t.Errorf("block %d: %v", n, err)
		case got.Hash != chain.Block(n).Hash:
			t.Errorf("block %d served is %s, not the %s branch's, of the latest block served next (%d)", n, got.Hash, name, latest.Number)
		}
	}
}

// TestSecondWriterDuringWrite opens a second writer, with a context of a
// second, while the first is in a write that waits for a lock (as under an
// operator's LOCK TABLE, or a large import's transaction) and so holds the
// lease's row: it is told ErrWriterBusy, and, waiting for the lease, the
// context's end too, rather than PostgreSQL's cancelled statement.
func TestSecondWriterDuringWrite(t *testing.T) {
	ctx := context.Background()
	_, url, schema, _, _ := writerInWrite(t, buildShared(), 5, "canonical")

	for _, wait := range []bool{false, true} {
		openCtx, cancel := context.WithTimeout(ctx, time.Second)
		second, err := pgstore.OpenWriter(openCtx, url, &pgstore.Options{Schema: schema, WaitForLease: wait})
		cancel()
		if err == nil {
			second.Close()
			t.Fatalf("a second writer (WaitForLease %v) opened while the first writes", wait)
		}
		if !errors.Is(err, pgstore.ErrWriterBusy) || wait && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a second writer (WaitForLease %v) while the first writes: %v, want ErrWriterBusy and, waiting, the context's end", wait, err)
		}
	}
}

// TestLeaseRowLockedPastTTL has a session hold the lease's row locked, as
// a write of a writer whose host is gone does until the server ends it,
// past the lease's expiry: a new writer is told ErrWriterBusy, and why,
// within about the lease's length, where it used to wait on the lock
// until its context ended.
func TestLeaseRowLockedPastTTL(t *testing.T) {
	const ttl = time.Second
	w, url, schema := openWriter(t, &pgstore.Options{LeaseTTL: ttl})
	owner := w.Owner()
	w.Close()
	ctx := context.Background()
	orphan, err := pgtest.Connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer orphan.Rollback(ctx)
	if _, err := orphan.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "writer_lease"}.Sanitize()+`
		SET owner = $1, expires_at = clock_timestamp() + $2 * INTERVAL '1 millisecond' WHERE id = 1`, owner, ttl.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl) // past the lease's expiry

	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	w2, err := pgstore.OpenWriter(openCtx, url, &pgstore.Options{Schema: schema, LeaseTTL: ttl})
	took := time.Since(start)
	if err == nil {
		w2.Close()
		t.Fatal("a writer took the lease whose row another session holds locked")
	}
	if !errors.Is(err, pgstore.ErrWriterBusy) || !strings.Contains(err.Error(), "in a write") || took > 5*ttl {
		t.Errorf("OpenWriter: %v after %v; want ErrWriterBusy, saying the holder is in a write, within about %v", err, took.Round(time.Millisecond), ttl)
	}
}

// TestWriteLongerThanTTL keeps a write waiting for a lock for three lease
// TTLs on a network that works: the write is watched, not cut off, and
// succeeds once the lock goes; the lease's renewal, which would wait
// behind the write's own lock on the lease's row, logs no failure.
func TestWriteLongerThanTTL(t *testing.T) {
	const ttl = time.Second
	logged := &syncbuf.Buffer{}
	s := buildShared()
	w, url, schema := openWriter(t, &pgstore.Options{LeaseTTL: ttl, Logger: slog.New(slog.NewTextHandler(logged, nil))})
	s.addMain(t, w, 5)
	release := lockTable(t, url, schema, "blocks", "SHARE")
	written := make(chan error, 1)
	go func() { written <- s.write(w, s.main.Block(6), true) }()
	awaitLockWait(t, lockWaiters(t, url), "the write", written)
	time.Sleep(3 * ttl)
	release()
	if err := <-written; err != nil {
		t.Fatalf("a write that waited %v for a lock: %v", 3*ttl, err)
	}
	if b, err := w.BlockByNumber(context.Background(), backend.Latest); err != nil || b.Hash != s.main.Block(6).Hash {
		t.Errorf("latest after the write: %v, want block 6", err)
	}
	if out := logged.String(); out != "" {
		t.Errorf("logged while a write waited:\n%s", out)
	}
}

// TestLongLeaseTTL opens a writer with a lease of 30 days, past the 2^31-1
// ms that PostgreSQL's timeouts take: the timeouts the lease sets on the
// writer's sessions are cut to that, where the connection was refused.
func TestLongLeaseTTL(t *testing.T) {
	w, _, _ := openWriter(t, &pgstore.Options{LeaseTTL: 30 * 24 * time.Hour})
	if err := w.AddBlock(buildShared().main.Block(0)); err != nil {
		t.Fatal(err)
	}
}
