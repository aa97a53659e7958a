-- pgkeys schema version 1. Applied by Open, in one transaction, in the
-- schema of the connection's search_path. Keep to SQL that CockroachDB
-- also runs (no PL/pgSQL, no advisory locks, no LISTEN/NOTIFY), and to DDL
-- only, since CockroachDB refuses a schema change after a write in one
-- transaction. The names all begin with blockrpc_key so that the tables
-- sit beside a pgstore chain store's in one schema.

-- The keys: a digest, never the key. seq is the order the keys were made
-- in, which their creation times cannot give (two keys made in one
-- microsecond, or a clock set back); revoked is NULL while the key is
-- valid. The totals are what the serving processes have told.
CREATE TABLE blockrpc_keys (
	id        TEXT PRIMARY KEY,
	seq       BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
	digest    BYTEA NOT NULL UNIQUE CHECK (octet_length(digest) = 32),
	label     TEXT NOT NULL,
	rate      DOUBLE PRECISION NOT NULL,
	burst     INTEGER NOT NULL,
	created   TIMESTAMPTZ NOT NULL,
	revoked   TIMESTAMPTZ,
	requests  BIGINT NOT NULL DEFAULT 0,
	errors    BIGINT NOT NULL DEFAULT 0,
	bytes     BIGINT NOT NULL DEFAULT 0,
	last_used TIMESTAMPTZ
);

-- Each key's counts by minute of the clock, of the last day (older rows
-- are deleted as the key's usage is recorded, and never read). A key
-- deleted by the operator takes its minutes with it.
CREATE TABLE blockrpc_key_minutes (
	key_id       TEXT NOT NULL REFERENCES blockrpc_keys (id) ON DELETE CASCADE,
	minute_start TIMESTAMPTZ NOT NULL,
	requests     BIGINT NOT NULL,
	errors       BIGINT NOT NULL,
	PRIMARY KEY (key_id, minute_start)
);
