package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/blockrpc/blockrpc/backend/pgstore/internal/migrate"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The chain tables' migrations, recorded in their own version row.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = migrate.Set{
	Files: migrationFiles,
	Table: versionTable,
	Owner: "pgstore",
	Newer: errNewerTables,
}

// errNewerTables is the error of tables a newer pgstore migrated: this one
// could misread them, or undo what the newer one relies on.
var errNewerTables = errors.New("pgstore: the tables were made by a newer pgstore")

// SchemaVersion is the version of the tables this package reads and
// writes: that of its last migration.
func SchemaVersion() int { return migrations.Version() }

// versionTable holds the schema's version in its one row.
const versionTable = "blockrpc_pgstore_version"

// migrateTables creates the schema and the tables, or brings them to the
// version of set (this package's migrations but in tests), and seeds them.
func migrateTables(ctx context.Context, pool *pgxpool.Pool, schema string, set migrate.Set) error {
	if schema != "" {
		_, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
		if err != nil && !migrate.IsCatalogRace(err) && !(migrate.IsPermissionDenied(err) && schemaExists(ctx, pool, schema)) {
			return fmt.Errorf("pgstore: creating schema %s: %w", schema, err)
		}
	}
	if err := set.Apply(ctx, pool); err != nil {
		if schema != "" && migrate.IsMissingSchema(err) {
			// The schema is there but left out of the search_path.
			return fmt.Errorf("pgstore: schema %s: permission denied to use it (this role needs USAGE on it): %w", schema, err)
		}
		return err
	}
	return seed(ctx, pool)
}

// schemaExists reports whether the database has the schema.
func schemaExists(ctx context.Context, pool *pgxpool.Pool, schema string) bool {
	var found bool
	err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&found)
	return err == nil && found
}

// hasLeaseTable reports whether the writer's lease table is there for
// this role to read.
func hasLeaseTable(ctx context.Context, pool *pgxpool.Pool) bool {
	_, err := pool.Exec(ctx, `SELECT 1 FROM writer_lease LIMIT 0`)
	return err == nil
}

// seedLease writes the lease's row, free, when it is not there.
const seedLease = `INSERT INTO writer_lease (id) VALUES (1) ON CONFLICT (id) DO NOTHING`

// seed writes the rows the tables start with, when they are not there.
func seed(ctx context.Context, pool *pgxpool.Pool) error {
	for _, sql := range []string{
		`INSERT INTO head (id, version, chain_id_bound, reorg_version, pending_version) VALUES (1, 0, false, 0, 0) ON CONFLICT (id) DO NOTHING`,
		seedLease,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
	}
	return nil
}

// checkVersion is a Reader's check of the tables: they must be there, at
// this package's version.
func checkVersion(ctx context.Context, pool *pgxpool.Pool) error {
	version, err := tablesVersion(ctx, pool)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01", errors.Is(err, pgx.ErrNoRows): // undefined_table
		return ErrNoSchema
	case err != nil:
		return fmt.Errorf("pgstore: reading the schema version: %w", err)
	case version == 0:
		return ErrNoSchema
	case version != SchemaVersion():
		return fmt.Errorf("pgstore: the tables are at version %d and this reader reads version %d: open a writer of this version to migrate them, or run a reader of theirs", version, SchemaVersion())
	}
	return nil
}

// tablesVersion reads the version the tables are at.
func tablesVersion(ctx context.Context, q querier) (int, error) {
	var version int
	err := q.QueryRow(ctx, `SELECT version FROM `+versionTable+` WHERE id = 1`).Scan(&version)
	return version, err
}

// server is what a Writer knows of the database server it writes to.
type server struct {
	cockroach bool // CockroachDB, which has no TOAST, no storage settings and no VACUUM
	version   int  // PostgreSQL's server_version_num, as 150004
}

// identifyServer asks the database what server it is.
func identifyServer(ctx context.Context, pool *pgxpool.Pool) (server, error) {
	var version string
	var number int
	err := pool.QueryRow(ctx, `SELECT version(), current_setting('server_version_num')::INT`).Scan(&version, &number)
	if err != nil {
		return server{}, fmt.Errorf("pgstore: %w", err)
	}
	return server{cockroach: strings.Contains(version, "CockroachDB"), version: number}, nil
}

// tuneStorage sets how PostgreSQL keeps block bodies. It changes only
// what is not set yet, and does nothing on CockroachDB, which has neither
// TOAST nor these settings. Only values written afterwards are affected.
func tuneStorage(ctx context.Context, pool *pgxpool.Pool, srv server) error {
	if srv.cockroach {
		return nil
	}
	if srv.version >= 110000 { // toast_tuple_target is PostgreSQL 11's
		if err := keepInline(ctx, pool); err != nil {
			return err
		}
	}
	return compressBodies(ctx, pool)
}

// keepInline has a body that fits in a page kept in its row. By default
// PostgreSQL moves any value that leaves a row over 2 kB to the table's
// TOAST table, in chunks of 2 kB, so that reading such a block took a
// lookup in the TOAST index and two or three pages of chunks beside its
// row. Over 10^6 blocks of 5 kB, in two interleaved rounds of three sets
// of 4,096 cold reads, a set's p50 was 94-105 and 130-154 µs with the
// bodies in their rows, against 128-136 and 194-211 µs in TOAST. The
// cost is the pages' unused ends: that table was 1.11 times as large as
// in TOAST. A larger body is compressed in its row if that makes it fit,
// and goes to TOAST otherwise.
func keepInline(ctx context.Context, pool *pgxpool.Pool) error {
	var set bool
	err := pool.QueryRow(ctx, `SELECT COALESCE(array_to_string(reloptions, ',') LIKE '%toast_tuple_target=%', false)
		FROM pg_class WHERE oid = 'blocks'::regclass`).Scan(&set)
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	if set {
		return nil
	}
	// The largest target PostgreSQL accepts: a row of one page, less
	// the page's header and the row's pointer (8,160 bytes of 8 KB), on
	// a server built with pages of another size too.
	var page int
	if err := pool.QueryRow(ctx, `SELECT current_setting('block_size')::INT`).Scan(&page); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE blocks SET (toast_tuple_target = %d)`, page-pageOverhead)); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// pageOverhead is what of a page holding one row is not the row:
// PostgreSQL's page header (24 bytes) and item pointer (4), aligned to 8.
const pageOverhead = 32

// compressBodies has the bodies that go to TOAST compressed with lz4
// (PostgreSQL 14 and later, when built with it), or else stored without
// compression. Its default, pglz, spends more time trying to compress a
// body than writing it, and then mostly keeps it as it was.
//
// Each ALTER TABLE waits for every transaction that reads the table and
// holds up those that come after, so that a writer that opens makes none
// once a setting is made: neither lz4, nor the storage of a server
// without it, which would otherwise try lz4 again at every open.
func compressBodies(ctx context.Context, pool *pgxpool.Pool) error {
	var storage string
	if err := pool.QueryRow(ctx, `SELECT attstorage::TEXT FROM pg_attribute
		WHERE attrelid = 'blocks'::regclass AND attname = 'body'`).Scan(&storage); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	if storage != "x" {
		return nil // not the default: set already
	}
	var compression string
	err := pool.QueryRow(ctx, `SELECT attcompression::TEXT FROM pg_attribute
		WHERE attrelid = 'blocks'::regclass AND attname = 'body'`).Scan(&compression)
	if err == nil && compression != "" {
		return nil // lz4, or what the database's owner chose
	}
	if err == nil {
		if _, err = pool.Exec(ctx, `ALTER TABLE blocks ALTER COLUMN body SET COMPRESSION lz4`); err == nil {
			return nil
		}
	}
	// Before PostgreSQL 14, or without lz4.
	if _, err := pool.Exec(ctx, `ALTER TABLE blocks ALTER COLUMN body SET STORAGE EXTERNAL`); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}
