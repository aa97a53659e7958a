-- pgstore schema version 1. Applied by the writer, in one transaction,
-- in the schema the store was opened on (its search_path). Keep to SQL
-- that CockroachDB also runs: no PL/pgSQL, no table inheritance, no
-- advisory locks, no LISTEN/NOTIFY; and only DDL here, since CockroachDB
-- refuses a schema change after a write in one transaction (the rows the
-- tables start with are written by the writer once they exist: seed in
-- migrate.go).

-- Every block ever stored, canonical or not, by hash. body is the block's
-- record (backend/record) with its uncle headers; td is its total
-- difficulty, NULL until known, which overrides the record's: it may
-- become known later, when body never changes.
CREATE TABLE blocks (
	hash        BYTEA PRIMARY KEY,
	number      BIGINT NOT NULL,
	parent_hash BYTEA NOT NULL,
	td          BYTEA,
	body        BYTEA NOT NULL
);

-- The uncles of each block, in the block's order, each as the record of its
-- header, and with its total difficulty as for blocks.
CREATE TABLE uncles (
	block_hash  BYTEA NOT NULL,
	idx         INT NOT NULL,
	parent_hash BYTEA NOT NULL,
	td          BYTEA,
	header      BYTEA NOT NULL,
	PRIMARY KEY (block_hash, idx)
);

-- The canonical chain: one block hash a number, and the head version of
-- the write that made it so.
CREATE TABLE canonical (
	number  BIGINT PRIMARY KEY,
	hash    BYTEA NOT NULL,
	version BIGINT NOT NULL
);

-- Blocks (idx -1) and uncles (idx >= 0) stored while the total difficulty
-- of their parent was unknown: when it becomes known, theirs follows. In
-- a chain written in order this table stays empty.
CREATE TABLE td_waiting (
	parent_hash BYTEA NOT NULL,
	hash        BYTEA NOT NULL,
	idx         INT NOT NULL,
	PRIMARY KEY (parent_hash, hash, idx)
);

-- The one row readers poll: the head of the canonical chain, the tags and
-- the chain id. version grows with every write; reorg_version with every
-- write that replaced or removed a canonical block; pending_version with
-- every change of the pending block.
CREATE TABLE head (
	id              INT PRIMARY KEY CHECK (id = 1),
	version         BIGINT NOT NULL,
	latest          BIGINT,
	latest_hash     BYTEA,
	earliest        BIGINT,
	safe            BIGINT,
	finalized       BIGINT,
	chain_id        NUMERIC(20, 0),
	chain_id_bound  BOOLEAN NOT NULL,
	reorg_version   BIGINT NOT NULL,
	pending_version BIGINT NOT NULL
);

-- The pending block, when there is one.
CREATE TABLE pending (
	id   INT PRIMARY KEY CHECK (id = 1),
	td   BYTEA,
	body BYTEA NOT NULL
);

-- The writer's lease: the one writer holds it, renews it, and checks it in
-- every transaction that writes, so that a writer that lost it (paused
-- past expires_at, say) can no longer write.
CREATE TABLE writer_lease (
	id         INT PRIMARY KEY CHECK (id = 1),
	owner      TEXT,
	expires_at TIMESTAMPTZ
);
