package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A Reader and a Writer are read as a backend.Backend.
var (
	_ backend.Backend = (*Reader)(nil)
	_ backend.Backend = (*Writer)(nil)
	_ backend.Writer  = (*Writer)(nil)
)

// Reader serves a chain that a Writer keeps in PostgreSQL. It is safe for
// concurrent use. What it returns is shared and must not be modified.
type Reader struct {
	pool *pgxpool.Pool
	// conns are the pool's connections, which Close interrupts; closing
	// is set as it begins.
	conns   *poolConns
	closing atomic.Bool
	opts    Options
	cache   *cache
	schema  int // the version of the tables it reads
	// head is what the last poll read of the head row (for a Writer, what
	// its last write left).
	head atomic.Pointer[headState]

	// unsure is set on a Writer whose last write failed where it may
	// have committed (a connection lost during its COMMIT): its next
	// write reads the head row again before it writes.
	unsure atomic.Bool
	// polling holds a token while the head row is read: one poll at a
	// time, and a read waiting for another's poll leaves at its own
	// deadline, which a mutex would not let it.
	polling chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

// headState is the head row: the canonical chain's bounds, the tags, the
// chain id and the pending block.
type headState struct {
	version        int64
	reorgVersion   int64
	hasCanonical   bool
	latest         uint64
	latestHash     backend.Hash
	earliest       uint64
	safe           tag
	finalized      tag
	chainID        uint64
	chainIDKnown   bool
	chainIDBound   bool
	pendingVersion int64
	pending        *backend.Block
	// pendingErr and chainIDErr, when not nil, are why the pending block
	// or the chain id could not be read: the errors of those reads alone,
	// so that a damaged row stops nothing else.
	pendingErr, chainIDErr error
	// migrated, when not nil, is the error of every read from then on:
	// the tables are at another version than the Reader's schema.
	migrated error
}

// tag is a block number that may be unset.
type tag struct {
	number uint64
	set    bool
}

// OpenReader connects to the database at url (a postgres:// URL or a
// key=value string, as pgx reads them) and reads the head row once; then
// it polls it every Options.PollInterval until Close. The tables must
// exist: ErrNoSchema means no writer has created them yet.
func OpenReader(ctx context.Context, url string, opts *Options) (*Reader, error) {
	o := opts.withDefaults()
	pool, conns, err := openPool(ctx, url, &o, readerPool)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	r := &Reader{}
	r.init(pool, conns, o, SchemaVersion())
	if err := r.Refresh(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	r.startPolling()
	return r, nil
}

// startPolling polls the head row every Options.PollInterval until
// stopPolling.
func (r *Reader) startPolling() {
	pollCtx, stop := context.WithCancel(context.Background())
	r.stop, r.done = stop, make(chan struct{})
	go r.poll(pollCtx)
}

// stopPolling stops the polling, if started, and waits for it to end.
func (r *Reader) stopPolling() {
	if r.stop != nil {
		r.stop()
		<-r.done
	}
}

func (r *Reader) init(pool *pgxpool.Pool, conns *poolConns, o Options, schema int) {
	r.pool, r.conns, r.opts, r.cache, r.schema = pool, conns, o, newCache(o.CacheBytes), schema
	r.polling = make(chan struct{}, 1)
	r.head.Store(&headState{})
}

// Close stops the polling and closes the connections. Reads under way end
// with ErrClosed, as do reads after Close. On a server that does not
// answer, Close can take 15 s, pgx's bound on closing a connection.
func (r *Reader) Close() {
	r.closing.Store(true)
	if r.stop != nil {
		r.stop() // a poll the interruption ends is not a failure to log
	}
	r.conns.interrupt(r.pool)
	r.stopPolling()
	r.pool.Close()
}

// pollWarnEvery is how often, at most, failing polls are logged while the
// database cannot be read: a poll every half second would fill the log.
const pollWarnEvery = time.Minute

func (r *Reader) poll(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(r.opts.PollInterval)
	defer t.Stop()
	var failingSince, warned time.Time
	failed := 0 // since the last warning
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, max(r.opts.PollInterval, 5*time.Second))
		err := r.Refresh(pctx)
		cancel()
		switch {
		case ctx.Err() != nil, errors.Is(err, ErrMigrated): // Refresh logs that one once
		case err != nil:
			now := time.Now()
			if failingSince.IsZero() {
				failingSince = now
			}
			if failed++; now.Sub(warned) >= pollWarnEvery {
				r.opts.Logger.Warn("pgstore: polling the head row failed; serving the last head read",
					"err", err, "failed_polls", failed, "failing_for", now.Sub(failingSince).Round(time.Millisecond))
				warned, failed = now, 0
			}
		case !failingSince.IsZero():
			r.opts.Logger.Info("pgstore: polling the head row again", "failed_for", time.Since(failingSince).Round(time.Millisecond))
			failingSince, warned, failed = time.Time{}, time.Time{}, 0
		}
	}
}

// Refresh reads the head row now, as the poll does: the latest block, the
// tags, the chain id, and the pending block when it changed. It also reads
// the tables' version, and returns ErrMigrated (as every read does from
// then on) when a writer of another version has migrated them.
func (r *Reader) Refresh(ctx context.Context) error {
	if err := r.refreshOn(ctx, r.pool); err != nil {
		if r.closing.Load() {
			return ErrClosed
		}
		return err
	}
	return nil
}

// refreshOn is Refresh, reading through q: a Writer reads on the
// connection of its transaction, since a pool of one connection would
// have none to spare.
func (r *Reader) refreshOn(ctx context.Context, q querier) error {
	if err := r.lockPoll(ctx); err != nil {
		return err
	}
	defer r.unlockPoll()
	return r.refresh(ctx, q)
}

// lockPoll waits for the poll under way, if any, to end, or for ctx.
func (r *Reader) lockPoll(ctx context.Context) error {
	select {
	case r.polling <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pgstore: waiting for a poll of the head row under way: %w", ctx.Err())
	}
}

func (r *Reader) unlockPoll() { <-r.polling }

// refresh is Refresh with the poll's token held, reading through q.
func (r *Reader) refresh(ctx context.Context, q querier) error {
	old := r.head.Load()
	if old.migrated != nil {
		// For good: a standby that has not replayed the migration yet
		// must not make the Reader serve again what it found migrated.
		return old.migrated
	}
	var (
		st                                 headState
		latest, earliest, safe, finalized  pgtype.Int8
		latestHash, pendingTD, pendingBody []byte
		chainID                            *string
		tables                             pgtype.Int8
	)
	// One statement: the pending block comes with the row that names it,
	// and only when it is not the one already held.
	err := q.QueryRow(ctx, `SELECT h.version, h.reorg_version, h.latest, h.latest_hash, h.earliest, h.safe,
			h.finalized, h.chain_id::TEXT, h.chain_id_bound, h.pending_version, p.td, p.body,
			(SELECT version FROM `+versionTable+` WHERE id = 1)
		FROM head h LEFT JOIN pending p ON p.id = 1 AND h.pending_version <> $1
		WHERE h.id = 1`, old.pendingVersion).Scan(
		&st.version, &st.reorgVersion, &latest, &latestHash, &earliest, &safe, &finalized,
		&chainID, &st.chainIDBound, &st.pendingVersion, &pendingTD, &pendingBody, &tables)
	if err != nil {
		// A migration may have changed the head row itself, or a standby
		// not have its first row yet.
		if v, verr := tablesVersion(ctx, q); verr == nil && v != r.schema {
			tables = pgtype.Int8{Int64: int64(v), Valid: true}
			err = nil
		}
	}
	if tables.Valid && tables.Int64 < int64(r.schema) {
		// Migrations only go forward: a server behind this reader's
		// migration (a standby that has not replayed it yet) is behind
		// the one polled before, and passed over as below.
		return nil
	}
	if tables.Valid && tables.Int64 != int64(r.schema) {
		m := *old
		m.migrated = fmt.Errorf("%w: they are at version %d and this reader reads version %d: restart it with a build that reads version %d",
			ErrMigrated, tables.Int64, r.schema, tables.Int64)
		r.head.Store(&m)
		r.opts.Logger.Error("pgstore: every read fails from now on", "err", m.migrated)
		return m.migrated
	}
	if errors.Is(err, pgx.ErrNoRows) {
		// The tables exist, their first row not yet: an empty store, or
		// a standby further behind than the server of the last poll.
		if old.version == 0 {
			r.head.Store(&headState{})
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgstore: reading the head row: %w", err)
	}
	if st.version < old.version {
		// A standby further behind than the server of the last poll (a
		// load balancer in front of several): what is served never
		// moves back.
		return nil
	}
	if latest.Valid {
		st.hasCanonical, st.latest, st.earliest = true, uint64(latest.Int64), uint64(earliest.Int64)
		copy(st.latestHash[:], latestHash)
	}
	st.safe = tag{uint64(safe.Int64), safe.Valid}
	st.finalized = tag{uint64(finalized.Int64), finalized.Valid}
	if chainID != nil {
		v, err := strconv.ParseUint(*chainID, 10, 64)
		if err != nil {
			st.chainIDErr = fmt.Errorf("pgstore: the head row's chain id: %w", err)
		}
		st.chainID, st.chainIDKnown = v, err == nil
	}
	switch {
	case st.pendingVersion == old.pendingVersion:
		st.pending, st.pendingErr = old.pending, old.pendingErr
	case pendingBody != nil:
		st.pending, st.pendingErr = decodePending(pendingTD, pendingBody)
	}
	// Each damaged value is logged once, as it is first read.
	damaged := func(err error) {
		r.opts.Logger.Error("pgstore: a damaged value of the head row: its reads fail, the others are served", "err", err)
	}
	if st.chainIDErr != nil && (old.chainIDErr == nil || st.chainIDErr.Error() != old.chainIDErr.Error()) {
		damaged(st.chainIDErr)
	}
	if st.pendingErr != nil && st.pendingVersion != old.pendingVersion {
		damaged(st.pendingErr)
	}
	if st.reorgVersion != old.reorgVersion {
		r.cache.resetHints(st.reorgVersion)
	}
	r.head.Store(&st)
	return nil
}

// readPollTimeout bounds a poll that a read starts, so that a statement
// stuck on the server (a lock, a network that dropped the connection
// unsaid) holds neither that read, whatever its deadline, nor the polls
// behind it for longer.
const readPollTimeout = 5 * time.Second

// refreshPast reads the head row unless a poll has already read a version
// past version: a read found the chain newer than the last poll.
func (r *Reader) refreshPast(ctx context.Context, version int64) error {
	if err := r.lockPoll(ctx); err != nil {
		return err
	}
	defer r.unlockPoll()
	if r.head.Load().version > version {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, readPollTimeout)
	defer cancel()
	if err := r.refresh(ctx, r.pool); err != nil {
		if r.closing.Load() {
			return ErrClosed // interrupted by Close, or refused since
		}
		return err
	}
	return nil
}

func decodePending(td, body []byte) (*backend.Block, error) {
	b, err := decodeBlock(body)
	if err != nil {
		return nil, fmt.Errorf("pgstore: the pending block: %w", err)
	}
	if b.TotalDifficulty, err = decodeTD(td); err != nil {
		return nil, fmt.Errorf("pgstore: the pending block: %w", err)
	}
	b.Pending = true
	return b, nil
}

// state is what a read starts from: the head row of the last poll, unless
// ctx is done or the tables were migrated.
func (r *Reader) state(ctx context.Context) (*headState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.closing.Load() {
		return nil, ErrClosed
	}
	st := r.head.Load()
	if st.migrated != nil {
		return nil, st.migrated
	}
	return st, nil
}

// ChainID implements backend.Backend: the chain id the head row gives, set
// by the writer's SetChainID or learnt from the transactions it stored.
func (r *Reader) ChainID(ctx context.Context) (uint64, error) {
	st, err := r.state(ctx)
	if err != nil {
		return 0, err
	}
	switch {
	case st.chainIDErr != nil:
		return 0, st.chainIDErr
	case !st.chainIDKnown:
		return 0, backend.ErrNotFound
	}
	return st.chainID, nil
}

// BlockByNumber implements backend.Backend. A number is looked up in the
// canonical table when asked; the tags resolve to the head row's values at
// the last poll (for a Writer, its last write): latest to its block by
// hash, earliest, safe and finalized to their numbers, whose block is the
// one of that poll's chain.
func (r *Reader) BlockByNumber(ctx context.Context, number backend.BlockNumber) (*backend.Block, error) {
	st, err := r.state(ctx)
	if err != nil {
		return nil, err
	}
	switch number {
	case backend.Pending:
		switch {
		case st.pendingErr != nil:
			return nil, st.pendingErr
		case st.pending == nil:
			return nil, backend.ErrNotFound
		}
		return st.pending, nil
	case backend.Latest:
		if !st.hasCanonical {
			return nil, backend.ErrNotFound
		}
		b, err := r.BlockByHash(ctx, st.latestHash)
		switch {
		case errors.Is(err, backend.ErrNotFound):
			// Blocks are never deleted: the server read is behind.
			return nil, fmt.Errorf("pgstore: the latest block %s has no row: the server read is behind the head row polled (a standby further behind), or rows were deleted", st.latestHash)
		case err == nil && b.Number != st.latest:
			return nil, fmt.Errorf("pgstore: the head row's latest block is %d, and its hash names block %d (%s): %w", st.latest, b.Number, b.Hash, record.ErrCorrupt)
		}
		return b, err
	case backend.Earliest, backend.Safe, backend.Finalized:
		return r.tagged(ctx, number, st)
	}
	n, ok := number.Uint64()
	if !ok {
		return nil, fmt.Errorf("pgstore: invalid block number %v", number)
	}
	b, _, err := r.canonicalAt(ctx, n, st)
	return b, err
}

// tagTries bounds the reads of a tag's block that each find the chain
// changed since the poll the tag was read from.
const tagTries = 3

// tagged reads the block that the tag earliest, safe or finalized names.
// Read by its number, the block found may be of a chain written after the
// poll the number came from, which a reorganisation may have taken the tag
// from: the tag is then read again from the poll that the read makes.
func (r *Reader) tagged(ctx context.Context, number backend.BlockNumber, st *headState) (*backend.Block, error) {
	for range tagTries {
		var t tag
		switch number {
		case backend.Earliest:
			t = tag{st.earliest, st.hasCanonical}
		case backend.Safe:
			t = st.safe
		default:
			t = st.finalized
		}
		if !t.set {
			return nil, backend.ErrNotFound
		}
		b, polled, err := r.canonicalAt(ctx, t.number, st)
		if !polled || (err != nil && !errors.Is(err, backend.ErrNotFound)) {
			return b, err
		}
		if st, err = r.state(ctx); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("pgstore: %v: the chain changed at each of %d reads", number, tagTries)
}

// canonicalAt is canonical after a look in the cache, which holds blocks
// by number as of st's reorganisation counter.
func (r *Reader) canonicalAt(ctx context.Context, n uint64, st *headState) (*backend.Block, bool, error) {
	if n > math.MaxInt64 {
		return nil, false, backend.ErrNotFound
	}
	if b, ok := r.cache.block(n, st.reorgVersion); ok {
		return b, false, nil
	}
	return r.canonical(ctx, n, st)
}

// canonical reads the canonical block at n, its hash, the block and the
// head row in one statement: all of it as it was at one instant, so that a
// number without a block (past the chain's ends, or in a gap of it, which
// the Writer's contract allows) is told from a server behind the one
// polled, and from a block row deleted. A block written after the last
// poll, or a number that no longer has one, makes a Reader poll, so that
// what it serves by number never goes back to a chain it has seen
// replaced; canonical then reports that it polled, its answer being of a
// state later than st.
func (r *Reader) canonical(ctx context.Context, n uint64, st *headState) (*backend.Block, bool, error) {
	var hash, td, body []byte
	var version pgtype.Int8
	var headVersion, reorgVersion int64
	err := r.pool.QueryRow(ctx, `SELECT h.version, h.reorg_version, c.hash, c.version, b.td, b.body
		FROM head h LEFT JOIN canonical c ON c.number = $1 LEFT JOIN blocks b ON b.hash = c.hash
		WHERE h.id = 1`, int64(n)).Scan(&headVersion, &reorgVersion, &hash, &version, &td, &body)
	// A server behind the head row read (a standby further behind than
	// the one polled, where one address leads to several) has the blocks
	// of the chain read, unless it has not got them yet, or a
	// reorganisation has replaced them since. Past the ends of the chain
	// read, there is no block to miss.
	behind := err == nil && headVersion < st.version && (hash == nil || reorgVersion != st.reorgVersion)
	outside := !st.hasCanonical || n < st.earliest || n > st.latest
	switch {
	case (errors.Is(err, pgx.ErrNoRows) || behind) && outside:
		return nil, false, backend.ErrNotFound
	case errors.Is(err, pgx.ErrNoRows), behind:
		return nil, false, fmt.Errorf("pgstore: block %d: the server read is behind the head row polled (version %d): a standby further behind", n, st.version)
	case err != nil:
		return nil, false, r.readError(ctx, err)
	case hash != nil && body == nil:
		return nil, false, fmt.Errorf("pgstore: block %d: its canonical row names block %x, which has no row: rows deleted", n, hash)
	case hash == nil:
		if headVersion > st.version {
			// The chain was shortened since the state read (below).
			if err := r.refreshPast(ctx, st.version); err != nil {
				return nil, false, err
			}
			return nil, true, backend.ErrNotFound
		}
		return nil, false, backend.ErrNotFound
	}
	// A row newer than the state read makes the Reader read the head row,
	// so that what it serves next is at least as new: newer than a
	// Reader's last poll, or than a Writer's last write, whose COMMIT's
	// answer may be on its way, or whose lease another writer may have
	// taken over. Served on a Writer's state, it would answer by number
	// from a chain that replaced the one its latest block is of. The row
	// is of a state between the two reads, which may have been
	// reorganised again by the second: it is served, once, but not noted
	// as the canonical block at n under the second's reorganisation
	// counter.
	polled := false
	if version.Int64 > st.version {
		if err := r.refreshPast(ctx, version.Int64-1); err != nil {
			return nil, false, err
		}
		polled = true
	}
	h, err := hashOf(hash)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: canonical block %d: %w", n, err)
	}
	b, err := r.decodeBlock(h, td, body)
	if err != nil {
		return nil, false, err
	}
	if b.Number != n {
		return nil, false, fmt.Errorf("pgstore: canonical block %d: its row names block %d (%s): %w", n, b.Number, b.Hash, record.ErrCorrupt)
	}
	if !polled {
		r.cache.addHint(n, h, st.reorgVersion)
	}
	return b, polled, nil
}

// BlockByHash implements backend.Backend.
func (r *Reader) BlockByHash(ctx context.Context, hash backend.Hash) (*backend.Block, error) {
	if _, err := r.state(ctx); err != nil {
		return nil, err
	}
	key := cacheKey{hash: hash, index: -1}
	if v, ok := r.cache.get(key); ok {
		return v.(*backend.Block), nil
	}
	var td, body []byte
	err := r.pool.QueryRow(ctx, `SELECT td, body FROM blocks WHERE hash = $1`, hash[:]).Scan(&td, &body)
	if err != nil {
		return nil, r.readError(ctx, err)
	}
	return r.decodeBlock(hash, td, body)
}

// decodeBlock decodes a block as stored, and keeps it in the cache when it
// can no longer change.
func (r *Reader) decodeBlock(hash backend.Hash, td, body []byte) (*backend.Block, error) {
	b, err := decodeBlock(body)
	if err != nil {
		return nil, fmt.Errorf("block %s: %w", hash, err)
	}
	if b.Hash != hash {
		// A row restored from another, or changed by hand: served, it
		// would answer for a block it is not.
		return nil, fmt.Errorf("block %s: its row holds the record of block %d (%s): %w", hash, b.Number, b.Hash, record.ErrCorrupt)
	}
	if b.TotalDifficulty, err = decodeTD(td); err != nil {
		return nil, fmt.Errorf("block %s: %w", hash, err)
	}
	if b.TotalDifficulty != nil {
		r.cache.add(cacheKey{hash: hash, index: -1}, b, len(body))
	}
	return b, nil
}

// UncleByBlockHashAndIndex implements backend.Backend.
func (r *Reader) UncleByBlockHashAndIndex(ctx context.Context, hash backend.Hash, index uint64) (*backend.Uncle, error) {
	if _, err := r.state(ctx); err != nil {
		return nil, err
	}
	if index > math.MaxInt32 {
		return nil, backend.ErrNotFound
	}
	if v, ok := r.cache.get(cacheKey{hash: hash, index: -1}); ok && index >= uint64(len(v.(*backend.Block).Uncles)) {
		return nil, backend.ErrNotFound
	}
	key := cacheKey{hash: hash, index: int32(index)}
	if v, ok := r.cache.get(key); ok {
		return v.(*backend.Uncle), nil
	}
	// The uncle's row with the front of its block's record, which lists
	// its uncles, in one statement: a row copied from another block's
	// uncle is not served as this one's, and a row missing is told from an
	// uncle the block does not have, as of one snapshot. (Read apart, the
	// block could be written between the two reads, and look like one
	// whose uncle's row was deleted.) A block's row and its uncles' are
	// written in one transaction: a standby has both or neither.
	var td, header, front []byte
	var whole bool
	err := r.pool.QueryRow(ctx, `SELECT u.td, u.header, substring(b.body FROM 1 FOR $3), length(b.body) <= $3
		FROM blocks b LEFT JOIN uncles u ON u.block_hash = b.hash AND u.idx = $2 WHERE b.hash = $1`,
		hash[:], int32(index), uncleFrontBytes).Scan(&td, &header, &front, &whole)
	if err != nil {
		return nil, r.readError(ctx, err) // no row: no such block
	}
	b, err := r.recordFront(ctx, hash, front, whole)
	if err != nil {
		return nil, err
	}
	if header == nil {
		if index < uint64(len(b.Uncles)) {
			return nil, fmt.Errorf("pgstore: uncle %d of block %s, which its record lists, has no row: rows deleted", index, hash)
		}
		return nil, backend.ErrNotFound
	}
	u, err := decodeUncle(header)
	if err != nil {
		return nil, fmt.Errorf("uncle %d of block %s: %w", index, hash, err)
	}
	if index >= uint64(len(b.Uncles)) || b.Uncles[index] != u.Hash {
		return nil, fmt.Errorf("uncle %d of block %s: its row holds uncle %s, which the block's record does not list there: %w", index, hash, u.Hash, record.ErrCorrupt)
	}
	if u.TotalDifficulty, err = decodeTD(td); err != nil {
		return nil, fmt.Errorf("uncle %d of block %s: %w", index, hash, err)
	}
	if u.TotalDifficulty != nil {
		r.cache.add(key, u, len(header))
	}
	return u, nil
}

// recordFront decodes the header and uncles of block hash from front, the
// first uncleFrontBytes of its record (the whole record when whole), and
// reads the whole record when the front was longer (a long extra data).
func (r *Reader) recordFront(ctx context.Context, hash backend.Hash, front []byte, whole bool) (*backend.Block, error) {
	b, _, err := record.DecodeHeader(front)
	if err != nil && !whole {
		if err := r.pool.QueryRow(ctx, `SELECT body FROM blocks WHERE hash = $1`, hash[:]).Scan(&front); err != nil {
			return nil, r.readError(ctx, err)
		}
		b, _, err = record.DecodeHeader(front)
	}
	if err != nil {
		return nil, fmt.Errorf("block %s: %w", hash, err)
	}
	if b.Hash != hash {
		return nil, fmt.Errorf("block %s: its row holds the record of block %d (%s): %w", hash, b.Number, b.Hash, record.ErrCorrupt)
	}
	return b, nil
}

// uncleFrontBytes is how much of its block's body an uncle's read fetches
// first: a header and two uncles' of mainnet's sizes with room to spare.
const uncleFrontBytes = 8 << 10

// readError turns no row into backend.ErrNotFound, and keeps the context's
// error recognisable.
func (r *Reader) readError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return backend.ErrNotFound
	case r.closing.Load():
		return ErrClosed
	case ctx.Err() != nil:
		return fmt.Errorf("pgstore: %w (%v)", ctx.Err(), err)
	}
	return fmt.Errorf("pgstore: %w", err)
}
