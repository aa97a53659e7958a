-- pgkeys schema version 2: the flushes of usage recorded lately, each by
-- the id its process drew for it. A process that lost the answer to a
-- flush's COMMIT sends the flush again under the same id, and finds the
-- id there when the first one was committed, so that no usage counts
-- twice. Rows older than an hour are deleted as flushes are recorded.
CREATE TABLE blockrpc_key_flushes (
	id       BYTEA PRIMARY KEY CHECK (octet_length(id) = 16),
	recorded TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX blockrpc_key_flushes_recorded ON blockrpc_key_flushes (recorded);
