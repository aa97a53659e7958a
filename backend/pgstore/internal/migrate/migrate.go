// Package migrate creates and migrates the tables of the module's stores
// (the chain store and the key store) from SQL files embedded in them, each
// store recording its tables' version in a one-row table of its own, so
// that stores sharing a schema migrate at their own pace.
package migrate

import (
	"context"
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

// A Set is one store's migrations: Files holds migrations/NNNN_name.sql,
// applied in order, each in one transaction with the version it brings the
// tables to. A released file is never changed; a change of the tables is
// a new file.
type Set struct {
	Files fs.FS
	// Table is the one-row table of the tables' version.
	Table string
	// Owner names the store in errors: "pgstore", "pgkeys".
	Owner string
	// Newer is wrapped by the error of tables a newer version migrated.
	Newer error
}

type migration struct {
	version int
	name    string
	sql     string
}

// load returns the migrations in order; their versions are 1, 2, ...
// without gaps.
func (s Set) load() ([]migration, error) {
	entries, err := fs.ReadDir(s.Files, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s: migration %s is not named NNNN_name.sql", s.Owner, e.Name())
		}
		sql, err := fs.ReadFile(s.Files, path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(sql)})
	}
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("%s: migration %s out of sequence, want version %d", s.Owner, m.name, i+1)
		}
	}
	return ms, nil
}

// Version is the version the migrations bring the tables to: that of the
// last. The files are embedded, so an error is a build's mistake: it
// panics.
func (s Set) Version() int {
	ms, err := s.load()
	if err != nil {
		panic(err)
	}
	return len(ms)
}

// Apply creates the tables, or brings them to the set's version. Processes
// applying it at once are serialised by the lock on the version row (a
// row, not an advisory lock, which CockroachDB does not have); the race to
// create the version table itself is retried.
func (s Set) Apply(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := s.load()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := s.applyOnce(ctx, pool, ms)
		if err == nil || attempt == 3 || !IsCatalogRace(err) {
			return err
		}
	}
}

func (s Set) applyOnce(ctx context.Context, pool *pgxpool.Pool, ms []migration) error {
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.Table+` (
		id      INT PRIMARY KEY CHECK (id = 1),
		version INT NOT NULL
	)`); err != nil && !(IsPermissionDenied(err) && readable(ctx, pool, s.Table)) {
		return fmt.Errorf("%s: creating the version table: %w", s.Owner, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+s.Table+` (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`); err != nil {
		return fmt.Errorf("%s: writing the tables' version: %w", s.Owner, err)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var version int
		if err := tx.QueryRow(ctx, `SELECT version FROM `+s.Table+` WHERE id = 1 FOR UPDATE`).Scan(&version); err != nil {
			return fmt.Errorf("%s: reading the tables' version: %w", s.Owner, err)
		}
		if version > len(ms) {
			return fmt.Errorf("%w: they are at version %d, this %s knows versions up to %d", s.Newer, version, s.Owner, len(ms))
		}
		for _, m := range ms[version:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("%s: migration %s: %w", s.Owner, m.name, err)
			}
		}
		if version < len(ms) {
			if _, err := tx.Exec(ctx, `UPDATE `+s.Table+` SET version = $1 WHERE id = 1`, len(ms)); err != nil {
				return fmt.Errorf("%s: writing the tables' version: %w", s.Owner, err)
			}
		}
		return nil
	})
}

// IsCatalogRace reports a unique_violation, duplicate_table or
// duplicate_object (a table's row type): what two sessions running CREATE
// ... IF NOT EXISTS at once may get from PostgreSQL's catalogs, since IF
// NOT EXISTS checks before it inserts, and which a second attempt does not.
func IsCatalogRace(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42P07" || pgErr.Code == "42710")
}

// IsMissingSchema reports invalid_schema_name: the search_path names no
// schema that exists.
func IsMissingSchema(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3F000"
}

// IsPermissionDenied reports insufficient_privilege. PostgreSQL checks
// the privilege to create before it looks for what CREATE ... IF NOT
// EXISTS names, so that a role allowed to write the tables but not to
// create any (as an administrator may grant) gets it for tables that are
// there.
func IsPermissionDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// readable reports whether table is there for this role to read.
func readable(ctx context.Context, pool *pgxpool.Pool, table string) bool {
	_, err := pool.Exec(ctx, `SELECT 1 FROM `+table+` LIMIT 0`)
	return err == nil
}
