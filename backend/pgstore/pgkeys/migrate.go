package pgkeys

import (
	"context"
	"embed"
	"fmt"

	"github.com/blockrpc/blockrpc/backend/pgstore/internal/migrate"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The key tables' migrations. Their version row is the key store's own,
// apart from pgstore's, so that each store migrates its tables at its own
// pace in a schema they share.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = migrate.Set{
	Files: migrationFiles,
	Table: "blockrpc_keys_version",
	Owner: "pgkeys",
	Newer: ErrNewerSchema,
}

// SchemaVersion is the version of the key tables this package reads and
// writes: that of its last migration. A database whose tables are at a
// later version is refused (ErrNewerSchema) rather than misread.
func SchemaVersion() int { return migrations.Version() }

// migrateTables creates the key tables, or brings them to this package's
// version.
func migrateTables(ctx context.Context, pool *pgxpool.Pool) error {
	err := migrations.Apply(ctx, pool)
	if migrate.IsMissingSchema(err) {
		return fmt.Errorf("pgkeys: no schema to create the key tables in: the search_path must name a schema that exists: %w", err)
	}
	return err
}
