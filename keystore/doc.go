// Package keystore keeps a service's API keys as data: made, limited,
// revoked and counted, by an operator's dashboard or a script, while the
// servers run.
//
// A Store keeps the keys: Memory for tests, File for one serving process,
// and the PostgreSQL store of package backend/pgstore/pgkeys for many. A
// store holds a key's SHA-256 digest, never the key: NewKey makes a random
// key and returns it once, to be shown to its owner and forgotten.
//
// Keys serves a store's keys to a blockrpc.Handler: it checks keys and
// gives their limits from a copy in memory, read again every few seconds,
// so that a revocation or a new limit made by any process takes effect in
// all of them within that time, and a store outage keeps the known keys
// served for a bounded time. Its Observer counts each key's requests,
// errors and answer bytes, by minute, and writes them to the store now
// and then.
package keystore
