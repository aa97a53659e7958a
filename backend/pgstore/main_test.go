package pgstore_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/internal/fixturechains"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	os.Exit(pgtest.Main(m))
}

// sharedURL returns the shared server and its database's URL.
func sharedURL(t testing.TB) (*pgtest.Server, string) { return pgtest.Shared(t) }

// lockTable locks a table of schema in mode, in a transaction held until
// the test ends, as an operator's LOCK, REINDEX or VACUUM would, or until
// the release it returns is called.
func lockTable(t testing.TB, url, schema, table, mode string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pgtest.Connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{schema, table}.Sanitize()+" IN "+mode+" MODE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// lockWaiters returns a count of the store's sessions that wait for a
// table's lock (a row's, as a renewal of the lease waits for a write,
// is not counted), read on a connection of its own: those of
// application, or of any store when none is given.
func lockWaiters(t testing.TB, url string, application ...string) func() int {
	t.Helper()
	watcher := pgtest.Connect(t, url)
	name := "blockrpc-pgstore"
	if len(application) > 0 {
		name = application[0]
	}
	return func() int {
		t.Helper()
		var n int
		if err := watcher.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'relation'`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// awaitLockWait waits until one of the store's sessions waits for a lock,
// and fails the test when none has in 30 s, or when the call that was to
// wait ends first (on ended, which may be nil).
func awaitLockWait(t testing.TB, waiting func() int, what string, ended <-chan error) {
	t.Helper()
	for start := time.Now(); waiting() == 0; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-ended:
			t.Fatalf("%s ended before it waited for the lock: %v", what, err)
		default:
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("%s did not wait for the lock within 30 s", what)
		}
	}
}

// writerInWrite opens a writer on a new schema of the shared server,
// adds s's main branch up to block last, and writes the next block while
// a lock of the test's on table keeps the write waiting, the lease's row
// taken. It returns once the write waits: the writer, the server's URL,
// the schema, the count of the store's sessions waiting on a lock, and the
// write's end.
func writerInWrite(t *testing.T, s *shared, last uint64, table string) (w *pgstore.Writer, url, schema string, waiting func() int, written <-chan error) {
	t.Helper()
	w, url, schema = openWriter(t, nil)
	s.addMain(t, w, last)
	lockTable(t, url, schema, table, "ACCESS EXCLUSIVE")
	ended := make(chan error, 1)
	go func() { ended <- s.write(w, s.main.Block(last+1), true) }() // ends when the lock goes, or w closes
	waiting = lockWaiters(t, url)
	awaitLockWait(t, waiting, "the write", ended)
	return w, url, schema, waiting, ended
}

// openWriter opens a writer on a new schema of the shared server, closed
// when the test ends.
func openWriter(t testing.TB, opts *pgstore.Options) (*pgstore.Writer, string, string) {
	t.Helper()
	_, url := pgtest.Shared(t)
	o := pgstore.Options{}
	if opts != nil {
		o = *opts
	}
	if o.Schema == "" {
		o.Schema = pgtest.Schema(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := pgstore.OpenWriter(ctx, url, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, url, o.Schema
}

// openWriterThroughProxy opens a writer on a new schema of the shared
// server through a pgtest.Proxy, closed when the test ends, and returns it
// with the proxy, the server's own URL and the schema.
func openWriterThroughProxy(t testing.TB) (*pgstore.Writer, *pgtest.Proxy, string, string) {
	t.Helper()
	_, url := pgtest.Shared(t)
	proxy, viaProxy := pgtest.StartProxy(t, url)
	schema := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := pgstore.OpenWriter(ctx, viaProxy, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, proxy, url, schema
}

// TestConformance runs the conformance suite on writers, each on a schema
// of its own.
func TestConformance(t *testing.T) {
	backendtest.TestStore(t, func(t *testing.T) backendtest.Store {
		w, _, _ := openWriter(t, nil)
		return w
	})
}

// TestConformanceUncached runs the suite with the block cache off: every
// answer is decoded from what PostgreSQL returns.
func TestConformanceUncached(t *testing.T) {
	backendtest.TestStore(t, func(t *testing.T) backendtest.Store {
		w, _, _ := openWriter(t, &pgstore.Options{CacheBytes: -1})
		return w
	})
}

// TestConformanceImporter runs the suite through an Importer in batches of
// three, flushed before every read: appends by COPY, runs of blocks
// stored already, and the block-by-block path all answer as memstore does.
func TestConformanceImporter(t *testing.T) {
	backendtest.TestStore(t, func(t *testing.T) backendtest.Store {
		w, _, _ := openWriter(t, nil)
		opts := &pgstore.ImportOptions{BatchBlocks: 3}
		return &importerStore{w: w, opts: opts, im: w.NewImporter(context.Background(), opts)}
	})
}

// TestFixtures copies every chain of the shared fixtures into a writer,
// with its block cache and without, and through an Importer; each must
// serve it as memstore does, byte for byte, and so must a Reader of what
// the writer wrote.
func TestFixtures(t *testing.T) {
	ctx := context.Background()
	for _, c := range fixturechains.All(t) {
		t.Run(c.Name, func(t *testing.T) {
			w, url, schema := openWriter(t, nil)
			backendtest.TestCopy(t, w, c.Store, c.Hashes...)
			r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			backendtest.TestBlocks(t, r, c.Store, c.Hashes...)

			uncached, _, _ := openWriter(t, &pgstore.Options{CacheBytes: -1})
			backendtest.TestCopy(t, uncached, c.Store, c.Hashes...)

			w, _, _ = openWriter(t, nil)
			opts := &pgstore.ImportOptions{BatchBlocks: 3}
			backendtest.TestCopy(t, &importerStore{w: w, opts: opts, im: w.NewImporter(ctx, opts)}, c.Store, c.Hashes...)
		})
	}
}

// importerStore writes through an Importer and reads from its Writer once
// the buffer is written.
type importerStore struct {
	mu   sync.Mutex
	w    *pgstore.Writer
	opts *pgstore.ImportOptions
	im   *pgstore.Importer
}

func (s *importerStore) flushed() *pgstore.Writer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.im.Flush(); err != nil {
		panic(err)
	}
	return s.w
}

func (s *importerStore) ChainID(ctx context.Context) (uint64, error) {
	return s.flushed().ChainID(ctx)
}

func (s *importerStore) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	return s.flushed().BlockByNumber(ctx, n)
}

func (s *importerStore) BlockByHash(ctx context.Context, h backend.Hash) (*backend.Block, error) {
	return s.flushed().BlockByHash(ctx, h)
}

func (s *importerStore) UncleByBlockHashAndIndex(ctx context.Context, h backend.Hash, i uint64) (*backend.Uncle, error) {
	return s.flushed().UncleByBlockHashAndIndex(ctx, h, i)
}

func (s *importerStore) locked(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f()
}

// AddBlock adds through the Importer. A block at or below the latest one
// is checked with the batch it joins, when that is written, and not
// when added: such a block is written at once, so that what refuses it
// is the call's error, as the suite expects of a Writer. A refusal then
// ends the Importer, as it ends an import; the suite goes on with a new
// one, as a Writer goes on after refusing a block.
func (s *importerStore) AddBlock(b *backend.Block, u ...*backend.Uncle) error {
	return s.locked(func() error {
		latest, latestErr := s.w.BlockByNumber(context.Background(), backend.Latest)
		if err := s.im.AddBlock(b, u...); err != nil {
			return err
		}
		if latestErr != nil || b.Number > latest.Number {
			return nil // appended, or the first block
		}
		if err := s.im.Flush(); err != nil {
			s.im = s.w.NewImporter(context.Background(), s.opts)
			return err
		}
		return nil
	})
}

func (s *importerStore) AddSideBlock(b *backend.Block, u ...*backend.Uncle) error {
	return s.locked(func() error { return s.im.AddSideBlock(b, u...) })
}

func (s *importerStore) SetPending(b *backend.Block) error {
	return s.locked(func() error { return s.im.SetPending(b) })
}

func (s *importerStore) SetSafe(n uint64) error {
	return s.locked(func() error { return s.im.SetSafe(n) })
}

func (s *importerStore) SetFinalized(n uint64) error {
	return s.locked(func() error { return s.im.SetFinalized(n) })
}

func (s *importerStore) SetChainID(id uint64) error {
	return s.locked(func() error { return s.im.SetChainID(id) })
}
