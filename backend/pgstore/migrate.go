package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The migrations: migrations/NNNN_name.sql, applied in order, each in one
// transaction with the version it brings the schema to. A released file is
// never changed; a change of the schema is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order; their versions are
// 1, 2, ... without gaps.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			return nil, fmt.Errorf("pgstore: migration %s is not named NNNN_name.sql", e.Name())
		}
		sql, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(sql)})
	}
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgstore: migration %s out of sequence, want version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the version of the tables this package reads and
// writes: that of its last migration.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		panic(err)
	}
	return len(ms)
}

// versionTable holds the schema's version in its one row.
const versionTable = "blockrpc_pgstore_version"

// migrate creates the schema and the tables, or brings them to this
// package's version. Concurrent writers opening at once are serialised by
// the version row's lock; the race to create the version table itself is
// retried.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	if schema != "" {
		if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil && !isUniqueViolation(err) {
			return fmt.Errorf("pgstore: creating schema %s: %w", schema, err)
		}
	}
	for attempt := 0; ; attempt++ {
		err := migrateOnce(ctx, pool, ms)
		if err == nil {
			break
		}
		if attempt == 3 || !isUniqueViolation(err) {
			return err
		}
	}
	return seed(ctx, pool)
}

// seed writes the rows the tables start with, when they are not there.
func seed(ctx context.Context, pool *pgxpool.Pool) error {
	for _, sql := range []string{
		`INSERT INTO head (id, version, chain_id_bound, reorg_version, pending_version) VALUES (1, 0, false, 0, 0) ON CONFLICT (id) DO NOTHING`,
		`INSERT INTO writer_lease (id) VALUES (1) ON CONFLICT (id) DO NOTHING`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
	}
	return nil
}

func migrateOnce(ctx context.Context, pool *pgxpool.Pool, ms []migration) error {
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+versionTable+` (
		id      INT PRIMARY KEY CHECK (id = 1),
		version INT NOT NULL
	)`); err != nil {
		return fmt.Errorf("pgstore: creating the version table: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+versionTable+` (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var version int
		if err := tx.QueryRow(ctx, `SELECT version FROM `+versionTable+` WHERE id = 1 FOR UPDATE`).Scan(&version); err != nil {
			return fmt.Errorf("pgstore: reading the schema version: %w", err)
		}
		if version > len(ms) {
			return fmt.Errorf("pgstore: the tables are at version %d, written by a newer pgstore; this one knows versions up to %d", version, len(ms))
		}
		for _, m := range ms[version:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("pgstore: migration %s: %w", m.name, err)
			}
		}
		if version < len(ms) {
			if _, err := tx.Exec(ctx, `UPDATE `+versionTable+` SET version = $1 WHERE id = 1`, len(ms)); err != nil {
				return fmt.Errorf("pgstore: %w", err)
			}
		}
		return nil
	})
}

// checkVersion is a Reader's check of the tables: they must be there, at
// this package's version.
func checkVersion(ctx context.Context, pool *pgxpool.Pool) error {
	var version int
	err := pool.QueryRow(ctx, `SELECT version FROM `+versionTable+` WHERE id = 1`).Scan(&version)
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

// isUniqueViolation reports a unique_violation, what two sessions creating
// the same table at once may get from PostgreSQL's catalogs.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42P07")
}

// tuneStorage sets how PostgreSQL keeps block bodies, which are mostly
// larger than its 2 kB TOAST threshold: compressed with lz4 (PostgreSQL 14
// and later, when built with it), or else stored out of line without
// compression. Its default, pglz, spends more time trying to compress a
// body than writing it, and then mostly keeps it as it was. It changes
// only what is not set yet, and does nothing on CockroachDB, which has
// neither TOAST nor these settings. Only values written afterwards are
// affected.
func tuneStorage(ctx context.Context, pool *pgxpool.Pool) error {
	var version string
	if err := pool.QueryRow(ctx, `SELECT version()`).Scan(&version); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	if strings.Contains(version, "CockroachDB") {
		return nil
	}
	var compression string
	err := pool.QueryRow(ctx, `SELECT attcompression::TEXT FROM pg_attribute
		WHERE attrelid = 'blocks'::regclass AND attname = 'body'`).Scan(&compression)
	if err == nil && compression == "l" {
		return nil
	}
	if err == nil {
		if _, err = pool.Exec(ctx, `ALTER TABLE blocks ALTER COLUMN body SET COMPRESSION lz4`); err == nil {
			return nil
		}
	}
	// Before PostgreSQL 14, or without lz4.
	var storage string
	if err := pool.QueryRow(ctx, `SELECT attstorage::TEXT FROM pg_attribute
		WHERE attrelid = 'blocks'::regclass AND attname = 'body'`).Scan(&storage); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	if storage == "e" {
		return nil
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE blocks ALTER COLUMN body SET STORAGE EXTERNAL`); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}
