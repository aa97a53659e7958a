package pgkeys

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
// transaction with the version it brings the tables to. A released file
// is never changed; a change of the tables is a new file.
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
			return nil, fmt.Errorf("pgkeys: migration %s is not named NNNN_name.sql", e.Name())
		}
		sql, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(sql)})
	}
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgkeys: migration %s out of sequence, want version %d", m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the version of the key tables this package reads and
// writes: that of its last migration. A database whose tables are at a
// later version is refused (ErrNewerSchema) rather than misread.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		panic(err)
	}
	return len(ms)
}

// versionTable holds the key tables' version in its one row. It is the key
// store's own, apart from pgstore's, so that each store migrates its
// tables at its own pace in a schema they share.
const versionTable = "blockrpc_keys_version"

// migrate creates the key tables, or brings them to this package's
// version. Processes opening the store at once are serialised by the lock
// on the version row (a row, not an advisory lock, which CockroachDB does
// not have); the race to create the version table itself is retried.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := migrateOnce(ctx, pool, ms)
		if err == nil || attempt == 3 || !isCatalogRace(err) {
			return err
		}
	}
}

func migrateOnce(ctx context.Context, pool *pgxpool.Pool, ms []migration) error {
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+versionTable+` (
		id      INT PRIMARY KEY CHECK (id = 1),
		version INT NOT NULL
	)`); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "3F000" { // invalid_schema_name
			return fmt.Errorf("pgkeys: no schema to create the key tables in: the search_path must name a schema that exists: %w", err)
		}
		return fmt.Errorf("pgkeys: creating the version table: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+versionTable+` (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`); err != nil {
		return fmt.Errorf("pgkeys: writing the schema version: %w", err)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var version int
		if err := tx.QueryRow(ctx, `SELECT version FROM `+versionTable+` WHERE id = 1 FOR UPDATE`).Scan(&version); err != nil {
			return fmt.Errorf("pgkeys: reading the schema version: %w", err)
		}
		if version > len(ms) {
			return fmt.Errorf("%w: they are at version %d, this pgkeys knows versions up to %d", ErrNewerSchema, version, len(ms))
		}
		for _, m := range ms[version:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("pgkeys: migration %s: %w", m.name, err)
			}
		}
		if version < len(ms) {
			if _, err := tx.Exec(ctx, `UPDATE `+versionTable+` SET version = $1 WHERE id = 1`, len(ms)); err != nil {
				return fmt.Errorf("pgkeys: writing the schema version: %w", err)
			}
		}
		return nil
	})
}

// isCatalogRace reports a unique_violation, duplicate_table or
// duplicate_object (of the table's row type): what two sessions running
// CREATE TABLE IF NOT EXISTS at once may get from PostgreSQL's catalogs,
// since IF NOT EXISTS checks before it inserts, and which a second
// attempt does not.
func isCatalogRace(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42P07" || pgErr.Code == "42710")
}
