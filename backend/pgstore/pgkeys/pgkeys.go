// Package pgkeys is a keystore.Store in PostgreSQL, for API keys shared by
// many serving processes and the operator's tools: a key made, limited or
// revoked by any of them is what every other reads next, and each
// process's usage adds to the same totals.
//
//	keys, err := pgkeys.Open(ctx, "postgres://blockrpc@db/chain?search_path=mainnet")
//	...
//	defer keys.Close()
//	k, err := keystore.Open(ctx, keys, keystore.Options{})
//
// # What is stored
//
// Open creates and migrates the key store's own tables (versioned SQL
// embedded in the package, recorded in blockrpc_keys_version) in the
// schema of the URL's search_path, which must exist: the schema of a
// pgstore chain store may hold them, beside its tables. blockrpc_keys
// holds each key's id, SHA-256 digest (never the key), label, limit,
// creation and revocation times and usage totals; blockrpc_key_minutes its
// counts by minute, of the last day (keystore.History);
// blockrpc_key_flushes the ids of the flushes of usage recorded in the
// last day, so that a flush sent again after a lost answer counts once,
// and one whose answer was lost and whose tries then all failed is asked
// about by the next flush, which leaves its counts out if it was
// recorded (a flush in doubt for more than a day is counted again).
// Processes that open the store at once migrate it once, one after the
// other, serialised by a lock on the version row; a database migrated by a
// newer pgkeys is refused with ErrNewerSchema.
//
// # CockroachDB
//
// As in package pgstore, the SQL is kept to what CockroachDB documents as
// supported: plain tables, an identity column, INSERT ... ON CONFLICT,
// UPDATE ... RETURNING and transactions; no advisory locks, no
// LISTEN/NOTIFY, no PL/pgSQL. Its tests run against PostgreSQL only.
package pgkeys

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/blockrpc/blockrpc/keystore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is a keystore.Store in PostgreSQL. Its methods are safe for
// concurrent use, and each reads or writes the database afresh: it keeps
// nothing in memory that another process could change (keystore.Keys
// keeps the copy that requests are checked against).
type Store struct {
	pool   *pgxpool.Pool
	closed atomic.Bool

	// recordMu serialises Record. doubt is a flush whose COMMIT was sent
	// and went unanswered, and whose Record failed without learning
	// whether it was recorded: its counts, kept by the caller, come
	// again merged into a later flush, which leaves them out if it was.
	recordMu sync.Mutex
	doubt    *sentFlush
}

// sentFlush is a flush's id and what it held.
type sentFlush struct {
	id    []byte
	usage []keystore.Usage
}

var _ keystore.Store = (*Store)(nil)

// ErrNewerSchema is returned by Open on a database whose key tables a
// newer version of this package has migrated: this one could misread
// them, or undo what the newer one relies on.
var ErrNewerSchema = errors.New("pgkeys: the key tables were made by a newer pgkeys")

// ErrClosed is returned by the methods of a Store after Close.
var ErrClosed = errors.New("pgkeys: closed")

// Open connects to the database at url (a PostgreSQL URL or keyword/value
// string, as pgxpool.ParseConfig reads it; its search_path chooses the
// schema), creates or migrates the key tables, and returns the store. It
// fails when the database cannot be reached now, so that a server does not
// start without its keys.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgkeys: %w", err)
	}
	if _, given := cfg.ConnConfig.RuntimeParams["application_name"]; !given {
		cfg.ConnConfig.RuntimeParams["application_name"] = "blockrpc-pgkeys"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgkeys: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgkeys: connecting: %w", err)
	}
	if err := migrateTables(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool}, nil
}

// Close closes the store's connections, waiting for the calls under way.
// Calls after Close fail with ErrClosed.
func (s *Store) Close() {
	s.closed.Store(true)
	s.pool.Close()
}

// usable is ErrClosed once Close has begun, and nil before: a call made
// then is told so, rather than of the pool closed under it.
func (s *Store) usable() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// keyColumns are the columns scanKey reads, in its order.
const keyColumns = `id, digest, label, rate, burst, created, revoked, requests, errors, bytes, last_used`

// Create implements keystore.Store.
func (s *Store) Create(ctx context.Context, k keystore.Key) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := k.Check(); err != nil {
		return err
	}
	// ON CONFLICT DO NOTHING covers both the id and the digest, and tells a
	// key stored already by the rows written rather than by an error that
	// would abort a transaction.
	tag, err := s.pool.Exec(ctx, `INSERT INTO blockrpc_keys (`+keyColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT DO NOTHING`,
		k.ID, k.Digest[:], k.Label, k.Rate, k.Burst, dbTime(k.Created), nullTime(k.Revoked),
		k.Used.Requests, k.Used.Errors, k.Used.Bytes, nullTime(k.Used.LastUsed))
	if err != nil {
		return fmt.Errorf("pgkeys: creating key %q: %w", k.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return keystore.ErrExists
	}
	return nil
}

// Key implements keystore.Store.
func (s *Store) Key(ctx context.Context, id string) (keystore.Key, error) {
	if err := s.usable(); err != nil {
		return keystore.Key{}, err
	}
	if !storable(id) {
		return keystore.Key{}, keystore.ErrNotFound
	}
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM blockrpc_keys WHERE id = $1`, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return keystore.Key{}, keystore.ErrNotFound
	case err != nil:
		return keystore.Key{}, fmt.Errorf("pgkeys: reading key %q: %w", id, err)
	}
	return k, nil
}

// storable reports whether PostgreSQL's text can hold id: valid UTF-8
// without a NUL. Any other, asked for (an admin API's path, percent-
// decoded), is no stored key's, where the database would answer an error.
func storable(id string) bool {
	return utf8.ValidString(id) && !strings.ContainsRune(id, 0)
}

// Keys implements keystore.Store.
func (s *Store) Keys(ctx context.Context) ([]keystore.Key, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM blockrpc_keys ORDER BY seq`)
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (keystore.Key, error) { return scanKey(row) })
	if err != nil {
		return nil, fmt.Errorf("pgkeys: reading the keys: %w", err)
	}
	return keys, nil
}

// Update implements keystore.Store.
func (s *Store) Update(ctx context.Context, id string, c keystore.Change) (keystore.Key, error) {
	if err := s.usable(); err != nil {
		return keystore.Key{}, err
	}
	if err := c.Check(); err != nil {
		return keystore.Key{}, err
	}
	if !storable(id) {
		return keystore.Key{}, keystore.ErrNotFound
	}
	var (
		label string
		rate  float64
		burst int
	)
	if c.Label != nil {
		label = *c.Label
	}
	if c.Limit != nil {
		rate, burst = c.Limit.Rate, c.Limit.Burst
	}
	// One statement, so that a revocation cannot come between the check
	// and the change: a revoked key's row is rewritten as it was, and read
	// back to tell ErrRevoked from ErrNotFound.
	k, err := scanKey(s.pool.QueryRow(ctx, `UPDATE blockrpc_keys SET
			label = CASE WHEN revoked IS NULL AND $2::BOOLEAN THEN $3::TEXT ELSE label END,
			rate  = CASE WHEN revoked IS NULL AND $4::BOOLEAN THEN $5::DOUBLE PRECISION ELSE rate END,
			burst = CASE WHEN revoked IS NULL AND $4::BOOLEAN THEN $6::INTEGER ELSE burst END
		WHERE id = $1
		RETURNING `+keyColumns,
		id, c.Label != nil, label, c.Limit != nil, rate, burst))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return keystore.Key{}, keystore.ErrNotFound
	case err != nil:
		return keystore.Key{}, fmt.Errorf("pgkeys: updating key %q: %w", id, err)
	case !k.Valid():
		return keystore.Key{}, keystore.ErrRevoked
	}
	return k, nil
}

// Revoke implements keystore.Store.
func (s *Store) Revoke(ctx context.Context, id string, at time.Time) (keystore.Key, error) {
	if err := s.usable(); err != nil {
		return keystore.Key{}, err
	}
	if !storable(id) {
		return keystore.Key{}, keystore.ErrNotFound
	}
	k, err := scanKey(s.pool.QueryRow(ctx, `UPDATE blockrpc_keys SET revoked = COALESCE(revoked, $2)
		WHERE id = $1 RETURNING `+keyColumns, id, dbTime(at)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return keystore.Key{}, keystore.ErrNotFound
	case err != nil:
		return keystore.Key{}, fmt.Errorf("pgkeys: revoking key %q: %w", id, err)
	}
	return k, nil
}

// Record implements keystore.Store. The usage is written in one
// transaction: a flush that fails adds nothing, and the caller's retry
// (keystore.Keys keeps the counts) does not count twice. A flush whose
// COMMIT went unanswered (the connection lost on the way) is sent again
// at once under the id it was first sent with, which the database keeps
// for a day: a second copy of a flush that was committed adds nothing,
// and waits for the first to end when it is still being committed. When
// ctx ends while the COMMIT's answer is awaited, Record asks the database
// whether it was committed, for up to 5 s past ctx's end, and returns nil
// if it was. A flush whose COMMIT went unanswered and that failed
// without learning whether it was recorded (the database out of reach
// at every try) is asked about by the next Record, whose usage, holding
// the counts the caller kept, leaves them out if it was.
func (s *Store) Record(ctx context.Context, usage []keystore.Usage) error {
	if err := s.usable(); err != nil {
		return err
	}
	if len(usage) == 0 {
		return nil
	}
	s.recordMu.Lock()
	defer s.recordMu.Unlock()
	if d := s.doubt; d != nil {
		recorded, err := s.committed(ctx, d.id)
		if err != nil {
			return fmt.Errorf("pgkeys: asking whether an earlier flush, its COMMIT unanswered, was recorded: %w", err)
		}
		if !recorded {
			s.doubt = nil
		} else if rest, ok := without(usage, d.usage); ok {
			s.doubt, usage = nil, rest
			if len(usage) == 0 {
				return nil
			}
		}
		// Else usage does not hold the earlier flush's counts (a flush
		// made before they were given back): they come with a later one.
	}
	// Every process locks the keys' rows in the order of their ids, so
	// that two flushes of the same keys wait for each other rather than
	// deadlock.
	usage = slices.Clone(usage)
	slices.SortStableFunc(usage, func(a, b keystore.Usage) int { return strings.Compare(a.ID, b.ID) })
	flush := make([]byte, 16)
	rand.Read(flush)
	var err error
	unanswered := false
	for attempt := 0; attempt < 3; attempt++ {
		var committing bool
		committing, err = s.recordOnce(ctx, flush, usage)
		if errors.Is(err, errRecorded) {
			return nil
		}
		unanswered = unanswered || committing && isConnectionLost(err)
		if ctx.Err() != nil {
			if unanswered {
				if recorded, cerr := s.committed(ctx, flush); cerr == nil && recorded {
					return nil
				}
			}
			break
		}
		if !isRetryable(err) && !isConnectionLost(err) {
			break
		}
	}
	if err != nil {
		if unanswered && s.doubt == nil {
			s.doubt = &sentFlush{id: flush, usage: sentCopy(usage)}
		}
		return fmt.Errorf("pgkeys: recording the usage of %d keys: %w", len(usage), err)
	}
	return nil
}

// sentCopy is a copy of usage down to its minutes, which the caller owns
// and may change once Record returns: a flush in doubt must keep what it
// sent.
func sentCopy(usage []keystore.Usage) []keystore.Usage {
	sent := slices.Clone(usage)
	for i := range sent {
		sent[i].Minutes = slices.Clone(sent[i].Minutes)
	}
	return sent
}

// without returns usage less sent, a flush recorded after all, whose
// counts the caller kept and merged into usage: each key's totals and
// minutes less sent's (a minute sent that usage no longer holds, past
// keystore.History, is left out). It reports false, and nothing, when
// usage holds less than sent of a key's totals.
func without(usage, sent []keystore.Usage) ([]keystore.Usage, bool) {
	byID := make(map[string]keystore.Usage, len(usage))
	for _, u := range usage {
		byID[u.ID] = u
	}
	for _, d := range sent {
		u, ok := byID[d.ID]
		if !ok || u.Requests < d.Requests || u.Errors < d.Errors || u.Bytes < d.Bytes {
			return nil, false
		}
		u.Requests, u.Errors, u.Bytes = u.Requests-d.Requests, u.Errors-d.Errors, u.Bytes-d.Bytes
		var minutes []keystore.Minute
		for _, m := range u.Minutes {
			for _, dm := range d.Minutes {
				if m.Start.Equal(dm.Start) {
					m.Requests, m.Errors = max(m.Requests-dm.Requests, 0), max(m.Errors-dm.Errors, 0)
				}
			}
			if m.Requests > 0 || m.Errors > 0 {
				minutes = append(minutes, m)
			}
		}
		u.Minutes = minutes
		byID[d.ID] = u
	}
	var out []keystore.Usage
	for _, u := range usage {
		// Its last use stays: recorded already or not, it is the latest.
		if u := byID[u.ID]; u.Requests > 0 || u.Errors > 0 || u.Bytes > 0 || len(u.Minutes) > 0 {
			out = append(out, u)
		}
	}
	return out, true
}

// errRecorded ends a transaction of Record that finds its flush recorded
// already.
var errRecorded = errors.New("pgkeys: the flush was recorded already")

// recordOnce runs one transaction of Record, and reports whether it sent
// its COMMIT: when it did and heard no answer, the flush may be recorded.
func (s *Store) recordOnce(ctx context.Context, flush []byte, usage []keystore.Usage) (committing bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	if err := record(ctx, tx, flush, usage); err != nil {
		tx.Rollback(ctx)
		return false, err
	}
	return true, tx.Commit(ctx)
}

// outcomeTimeout bounds how long Record, its context ended while its
// COMMIT went unanswered, asks the database whether it was committed.
const outcomeTimeout = 5 * time.Second

// committed reports whether the flush of that id was recorded, for a
// flush whose context ended while its COMMIT went unanswered: without
// asking, the caller would send its counts again in the next flush. The
// question is asked on a context of its own (outcomeTimeout at most), by
// a transaction that takes the id and gives it back, which waits for a
// COMMIT of that id still running on the server.
func (s *Store) committed(ctx context.Context, flush []byte) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outcomeTimeout)
	defer cancel()
	recorded := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO blockrpc_key_flushes (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, flush)
		if err != nil {
			return err
		}
		recorded = tag.RowsAffected() == 0
		return errGiveBack
	})
	if !errors.Is(err, errGiveBack) {
		return false, err
	}
	return recorded, nil
}

// errGiveBack rolls back the transaction of committed.
var errGiveBack = errors.New("pgkeys: the flush's id given back")

// flushMemory is how long the ids of recorded flushes are kept: far
// longer than Record takes to send a flush again, and as long as Keys
// keeps a flush's minutes, for a process whose flush went unanswered and
// whose database then stayed out of its reach for hours while other
// processes recorded theirs (each of which forgets the older ids).
const flushMemory = keystore.History

// record writes usage, sorted by id, in tx, unless the flush of that id
// was written already, when it returns errRecorded.
func record(ctx context.Context, tx pgx.Tx, flush []byte, usage []keystore.Usage) error {
	// First the flush's id, then the totals, which tell the ids the store
	// holds: the minutes of the others, deleted meanwhile, are dropped.
	var totals pgx.Batch
	recorded := false
	totals.Queue(`INSERT INTO blockrpc_key_flushes (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, flush).
		Exec(func(tag pgconn.CommandTag) error {
			recorded = tag.RowsAffected() == 0
			return nil
		})
	totals.Queue(`DELETE FROM blockrpc_key_flushes WHERE recorded < now() - $1::INTERVAL`, flushMemory)
	known := make(map[string]bool, len(usage))
	for _, u := range usage {
		totals.Queue(`UPDATE blockrpc_keys SET
				requests = requests + $2, errors = errors + $3, bytes = bytes + $4,
				last_used = GREATEST(COALESCE(last_used, $5), COALESCE($5, last_used))
			WHERE id = $1`,
			u.ID, u.Requests, u.Errors, u.Bytes, nullTime(u.LastUsed),
		).Exec(func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() > 0 {
				known[u.ID] = true
			}
			return nil
		})
	}
	if err := tx.SendBatch(ctx, &totals).Close(); err != nil {
		return err
	}
	if recorded {
		return errRecorded
	}
	if len(known) == 0 {
		return nil
	}
	var minutes pgx.Batch
	ids := make([]string, 0, len(known))
	for _, u := range usage {
		if !known[u.ID] {
			continue
		}
		if len(ids) == 0 || ids[len(ids)-1] != u.ID {
			ids = append(ids, u.ID)
		}
		for _, m := range u.Minutes {
			minutes.Queue(`INSERT INTO blockrpc_key_minutes (key_id, minute_start, requests, errors)
				VALUES ($1, $2, $3, $4)
				ON CONFLICT (key_id, minute_start) DO UPDATE SET
					requests = blockrpc_key_minutes.requests + excluded.requests,
					errors = blockrpc_key_minutes.errors + excluded.errors`,
				u.ID, m.Start.UTC().Truncate(time.Minute), m.Requests, m.Errors)
		}
	}
	// Only the keys just recorded, whose minutes are at hand in the
	// primary key: the old minutes of a key no longer used stay until it
	// is, unseen (Minutes reads the last day only). The database's clock
	// decides, the same for every process.
	minutes.Queue(`DELETE FROM blockrpc_key_minutes
		WHERE key_id = ANY($1) AND minute_start < now() - $2::INTERVAL`, ids, keystore.History)
	return tx.SendBatch(ctx, &minutes).Close()
}

// isConnectionLost reports an error that is not the server's: the
// connection failed, perhaps with a transaction committed unbeknown to
// its client.
func isConnectionLost(err error) bool {
	var pgErr *pgconn.PgError
	return err != nil && !errors.As(err, &pgErr)
}

// isRetryable reports a serialization failure or a deadlock: what a
// transaction of Record may meet beside another process's (CockroachDB
// asks its clients to retry the first), and which a second attempt of
// the whole transaction does not.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// Minutes implements keystore.Store.
func (s *Store) Minutes(ctx context.Context, id string, since time.Time) ([]keystore.Minute, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if !storable(id) {
		return nil, keystore.ErrNotFound
	}
	// One statement reads the key and its minutes: no row means no key,
	// and a key without minutes since then gives one row of NULLs.
	rows, _ := s.pool.Query(ctx, `SELECT m.minute_start, m.requests, m.errors
		FROM blockrpc_keys k
		LEFT JOIN blockrpc_key_minutes m ON m.key_id = k.id
			AND m.minute_start >= $2 AND m.minute_start >= now() - $3::INTERVAL
		WHERE k.id = $1
		ORDER BY m.minute_start`, id, dbTime(since), keystore.History)
	var (
		minutes []keystore.Minute
		found   bool
	)
	for rows.Next() {
		found = true
		var (
			start          *time.Time
			requests, errs *int64
		)
		if err := rows.Scan(&start, &requests, &errs); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgkeys: reading the minutes of key %q: %w", id, err)
		}
		if start != nil {
			minutes = append(minutes, keystore.Minute{Start: start.UTC(), Requests: *requests, Errors: *errs})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgkeys: reading the minutes of key %q: %w", id, err)
	}
	if !found {
		return nil, keystore.ErrNotFound
	}
	return minutes, nil
}

// scanKey reads a row of keyColumns.
func scanKey(row pgx.Row) (keystore.Key, error) {
	var (
		k                 keystore.Key
		digest            []byte
		revoked, lastUsed *time.Time
	)
	if err := row.Scan(&k.ID, &digest, &k.Label, &k.Rate, &k.Burst, &k.Created, &revoked,
		&k.Used.Requests, &k.Used.Errors, &k.Used.Bytes, &lastUsed); err != nil {
		return keystore.Key{}, err
	}
	if len(digest) != len(k.Digest) {
		return keystore.Key{}, fmt.Errorf("key %q has a digest of %d bytes, not %d", k.ID, len(digest), len(k.Digest))
	}
	copy(k.Digest[:], digest)
	k.Created = k.Created.UTC()
	if revoked != nil {
		k.Revoked = revoked.UTC()
	}
	if lastUsed != nil {
		k.Used.LastUsed = lastUsed.UTC()
	}
	return k, nil
}

// dbTime is t as PostgreSQL keeps it, to microseconds, so that what a
// caller passes and what it reads back are equal.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// nullTime is dbTime, and NULL for the zero time, which means "never".
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = dbTime(t)
	return &t
}
