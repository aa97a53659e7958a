// Package pgstore is a chain store in PostgreSQL shared by many serving
// processes: one Writer keeps the chain current (importing dumps,
// following a node, reorganising), and any number of Readers, in as many
// processes, serve it. Both implement backend.Backend; the Writer also
// implements backend.Writer.
//
//	w, err := pgstore.OpenWriter(ctx, "postgres://blockrpc@db/chain", nil)
//	...
//	r, err := pgstore.OpenReader(ctx, "postgres://reader@replica/chain", nil)
//	svc := blockrpc.NewService(r)
//
// # What is stored
//
// The store creates and migrates its own tables (versioned SQL embedded in
// the package, applied by the writer) in the schema given by
// Options.Schema or, without it, the connection's search_path: blocks by
// hash, each with its uncle headers, in the record encoding the persistent
// stores share (backend/record); the canonical chain as a number→hash
// table; and a
// one-row head table with the latest block, the tags and the chain id.
// Blocks are never deleted or changed once stored (but for a total
// difficulty that becomes known later), so every block stays reachable by
// hash.
//
// # One writer
//
// A Writer holds a lease, a row of the writer_lease table that it renews
// in the background and checks (and extends) in every transaction that
// writes. A second OpenWriter is refused with ErrWriterBusy, or waits for
// the lease with Options.WaitForLease. A writer that lost its lease (it
// stalled past Options.LeaseTTL and another took over) fails every write
// with ErrLeaseLost rather than write beside the new one, closes the
// channel of Writer.LeaseLost, and serves what the new one writes, polling
// the head row as a Reader. Each AddBlock, and so each reorganisation
// however deep, is one transaction.
//
// Blocks go in through the backend.Writer methods, each checked with
// backend.Seal as memstore checks them, or through an Importer, which
// writes runs of new canonical blocks with COPY, a batch a transaction,
// and is what ImportDump uses; its Close vacuums the tables after a large
// import.
//
// # Readers
//
// A Reader serves the chain as of its last poll of the head row (every
// Options.PollInterval): the latest block, the tags, the chain id and the
// pending block come from it. A block asked for by number comes from the
// Reader's cache when it found that block canonical there since the last
// reorganisation the head row counted, and otherwise from one statement
// that reads the canonical hash and the block together. A read that finds
// a block written after the last poll, or no block at a number the last
// poll had, polls at once before answering (a poll that takes more than 5
// seconds fails that read; reads that wait for it leave at their
// deadline): what a Reader serves moves forward only, each answer a block
// that was canonical at that number, before a reorganisation or after it,
// and never a chain it has seen replaced. Blocks are kept in the cache by
// hash (Options.CacheBytes): they do not change. A Reader needs only
// SELECT, so it may read from a hot standby; it never writes. A head row
// older than the last one read, as a standby further behind gives it, is
// passed over, so that a Reader may also poll several standbys behind one
// address. Each poll also reads the tables' version: once a writer of a
// newer version has migrated them, every read fails with ErrMigrated
// until a Reader of their version replaces this one. An older version is
// a standby behind the migration, passed over as an older head row is.
//
// # CockroachDB
//
// The SQL is kept to what CockroachDB documents as supported, so that a
// deployment that outgrows one PostgreSQL can move: no advisory locks
// (the writer's lease is a row), no LISTEN/NOTIFY (readers poll), no
// PL/pgSQL, and what is PostgreSQL's own skipped there: the storage
// settings (where block bodies are kept, their compression) and the
// vacuum at the end of an import. Upserts are INSERT ... ON CONFLICT,
// arrays are passed as = ANY($1), the schema is chosen with search_path,
// and imports use COPY FROM STDIN. What was checked and what was not is
// in README.md beside this file: every test runs against PostgreSQL 15;
// none runs against CockroachDB.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configure a Reader or a Writer. The zero value (or nil) gives
// the defaults.
type Options struct {
	// Schema is the PostgreSQL schema that holds the store's tables; the
	// writer creates it when it is missing. Empty means the connection's
	// search_path (public, by default).
	Schema string

	// PollInterval is how often a Reader reads the head row to learn the
	// latest block, the tags, the chain id and the pending block. Zero
	// means DefaultPollInterval.
	PollInterval time.Duration

	// CacheBytes bounds the blocks and uncles kept in the process, by
	// hash, measured roughly by their in-memory size. Zero means
	// DefaultCacheBytes; a negative value turns the cache off.
	CacheBytes int64

	// MaxConns is the size of the connection pool. Zero means
	// max(4, 2×GOMAXPROCS); a pool_max_conns in the URL also sets it. A
	// Writer opens one more connection, outside the pool, the first time
	// a write lasts past a third of LeaseTTL, to watch it.
	MaxConns int32

	// LeaseTTL is how long a Writer's lease lasts without being renewed:
	// how long a writer that died without closing keeps another from
	// writing. It is renewed every LeaseTTL/3. It also bounds how long
	// the server keeps a writer's session idle in a transaction (one
	// whose host failed in the middle of a write), how long a writer
	// taking the lease waits for a write under way, and how long a write
	// waits on a server that has stopped answering. Zero means
	// DefaultLeaseTTL.
	LeaseTTL time.Duration

	// WaitForLease makes OpenWriter wait, until its context ends, for the
	// lease that another writer holds, instead of failing with
	// ErrWriterBusy.
	WaitForLease bool

	// Logger receives what the store does in the background: a poll or a
	// renewal of the lease that failed, the lease taken by another writer,
	// the tables migrated under a reader. Nil means slog.Default().
	Logger *slog.Logger
}

// Defaults of the zero Options.
const (
	DefaultPollInterval = 500 * time.Millisecond
	DefaultCacheBytes   = 256 << 20
	DefaultLeaseTTL     = 15 * time.Second
)

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Errors of opening a store and of writing.
var (
	// ErrWriterBusy is returned by OpenWriter when another writer holds
	// the lease (and Options.WaitForLease is not set).
	ErrWriterBusy = errors.New("pgstore: another writer holds the lease")
	// ErrLeaseLost is returned by every write of a Writer whose lease
	// expired and was taken by another writer.
	ErrLeaseLost = errors.New("pgstore: the writer's lease was lost")
	// ErrNoSchema is returned by OpenReader on a database where no writer
	// has created the store's tables yet.
	ErrNoSchema = errors.New("pgstore: no pgstore tables in this schema (a writer creates them)")
	// ErrMigrated is returned by every read of a Reader whose tables a
	// writer of another version migrated while it ran, since they may no
	// longer be laid out as it reads them: a Reader of their version
	// serves them.
	ErrMigrated = errors.New("pgstore: the tables were migrated to another version while this reader ran")
	// ErrClosed is returned by a Writer's writes after its Close, by an
	// Importer's after its own, and by the reads of a Reader or a Writer
	// after its Close, or under way as it closes.
	ErrClosed = errors.New("pgstore: closed")
)

// maxConnsSetting matches pool_max_conns in a connection string of
// either form, a URL's query or key=value settings.
var maxConnsSetting = regexp.MustCompile(`(^|[?&\s])pool_max_conns\s*=`)

// givesMaxConns reports whether the connection string sets the pool's
// size: pgxpool.ParseConfig takes pool_max_conns out of what it parses.
func givesMaxConns(connString string) bool { return maxConnsSetting.MatchString(connString) }

// poolSpec is what the pools of Readers and Writers differ in.
type poolSpec struct {
	// params are settings of the pool's sessions.
	params map[string]string
	// cancelGrace is how long a statement whose context ended is given to
	// be cancelled by the server before its connection is closed.
	cancelGrace time.Duration
}

// Reader's pool: a read holds no lock on the server that a cancel would
// let go, so that a statement whose context ended on a server that does
// not answer (a partition) need not hold its caller long past the
// deadline the caller set.
var readerPool = poolSpec{cancelGrace: 250 * time.Millisecond}

// openPool connects to url with the options' schema and pool size, and
// returns the pool and its connections.
func openPool(ctx context.Context, url string, o *Options, spec poolSpec) (*pgxpool.Pool, *poolConns, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	} else if !givesMaxConns(url) && cfg.MaxConns < int32(max(4, 2*runtime.GOMAXPROCS(0))) {
		cfg.MaxConns = int32(max(4, 2*runtime.GOMAXPROCS(0)))
	}
	if o.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	}
	// A statement whose context ends is cancelled on the server, which
	// then lets go of its locks (a write's, of the lease's row among
	// them), rather than left running on a connection pgx closes, until
	// the server notices; the deadline is the fallback should the server
	// not answer the cancel.
	grace := spec.cancelGrace
	if grace == 0 {
		grace = 5 * time.Second
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: grace}
	}
	if _, given := cfg.ConnConfig.RuntimeParams["application_name"]; !given {
		cfg.ConnConfig.RuntimeParams["application_name"] = "blockrpc-pgstore"
	}
	maps.Copy(cfg.ConnConfig.RuntimeParams, spec.params)
	conns := new(poolConns)
	conns.track(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("pgstore: %w", err)
	}
	return pool, conns, nil
}
