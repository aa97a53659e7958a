package pgstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pgstore/internal/migrate"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Writer is the one process that writes a chain into PostgreSQL; it also
// serves it, as a Reader does, from what it wrote (it does not poll). It
// is safe for concurrent use: writes are done one at a time.
type Writer struct {
	Reader
	owner  string // this writer's name in the lease row
	server server

	closed    atomic.Bool   // set by the first Close
	closeDone chan struct{} // closed when the first Close has returned
	mu        sync.Mutex    // one write at a time
	lost      atomic.Bool
	leaseGone chan struct{}  // closed when lost is set
	polling   sync.Once      // started once the lease is lost (or never, once closed)
	vacuums   sync.WaitGroup // an Importer's vacuum, on a connection of its own

	ctx      context.Context // ends at Close: the context of the writes
	cancel   context.CancelFunc
	renew    chan struct{}           // closed when the renewal has stopped
	inflight atomic.Pointer[writing] // the write under way, which the renewal watches
}

// OpenWriter connects to the database at url, creates or migrates the
// store's tables, and takes the writer's lease: ErrWriterBusy when another
// writer holds it, unless Options.WaitForLease is set. The Writer serves
// what the database holds and then what it writes. Close releases the
// lease.
func OpenWriter(ctx context.Context, url string, opts *Options) (*Writer, error) {
	return openWriter(ctx, url, opts, migrations)
}

// openWriter is OpenWriter with the migrations of set.
func openWriter(ctx context.Context, url string, opts *Options, set migrate.Set) (*Writer, error) {
	o := opts.withDefaults()
	// A write holds the lease's row locked until it ends: should the
	// writer's host or its network fail in the middle of one, the server
	// ends the session, idle in its transaction, once the lease would
	// have run out, rather than when TCP gives up on the connection
	// (hours), and another writer can take the lease over.
	pool, conns, err := openPool(ctx, url, &o, poolSpec{params: map[string]string{
		"idle_in_transaction_session_timeout": strconv.FormatInt(serverMillis(o.LeaseTTL), 10),
	}})
	if err != nil {
		return nil, err
	}
	w := &Writer{owner: ownerName(), leaseGone: make(chan struct{}), closeDone: make(chan struct{})}
	w.Reader.init(pool, conns, o, set.Version())
	if err := w.takeLease(ctx, set); err != nil {
		pool.Close()
		return nil, err
	}
	srv, err := identifyServer(ctx, pool)
	if err == nil {
		w.server = srv
		err = tuneStorage(ctx, pool, srv)
	}
	if err != nil {
		w.release()
		pool.Close()
		return nil, err
	}
	if err := w.Reader.Refresh(ctx); err != nil {
		w.release()
		pool.Close()
		return nil, err
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.renew = make(chan struct{})
	go w.renewLease()
	return w, nil
}

// ownerName names this writer in the lease row: host, process and a
// random part, so that two writers of one process differ too.
func ownerName() string {
	host, _ := os.Hostname()
	var r [6]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(r[:]))
}

// Refresh does nothing while the Writer holds its lease: it serves what
// it wrote, which the lease makes the database's state. A Writer whose
// lease another writer took serves what that one writes, as a Reader
// does: it polls the head row, and Refresh reads it.
func (w *Writer) Refresh(ctx context.Context) error {
	if w.lost.Load() {
		return w.Reader.Refresh(ctx)
	}
	return ctx.Err()
}

// loseLease marks the lease as another writer's: writes fail with
// ErrLeaseLost, and the Writer serves as a Reader from then on.
func (w *Writer) loseLease() {
	if w.lost.CompareAndSwap(false, true) {
		close(w.leaseGone)
	}
	w.polling.Do(func() {
		if !w.closed.Load() {
			w.Reader.startPolling()
		}
	})
}

// LeaseLost returns a channel that is closed once the Writer finds that
// another writer has taken its lease over: from then on its writes fail
// with ErrLeaseLost, and it serves what the other writes. Whatever feeds
// it blocks (a follower of a node) can stop then, and leave that work to
// the other writer.
func (w *Writer) LeaseLost() <-chan struct{} { return w.leaseGone }

// Owner returns the name this writer holds the lease under.
func (w *Writer) Owner() string { return w.owner }

func (w *Writer) ttlMillis() int64 { return w.opts.LeaseTTL.Milliseconds() }

// takeLease takes the writer's lease and brings the tables to the version
// of set. Tables that are there change only under the lease: a writer of a
// newer version waits for one of an older version to let go before it
// migrates them, and a writer refused the lease changes nothing. New
// tables are made first, since the lease is a row of them; a migration
// keeps the lease's columns, which acquire uses before it.
func (w *Writer) takeLease(ctx context.Context, set migrate.Set) error {
	if !hasLeaseTable(ctx, w.pool) {
		if err := migrateTables(ctx, w.pool, w.opts.Schema, set); err != nil {
			return err
		}
		return w.acquire(ctx)
	}
	if err := w.acquire(ctx); err != nil {
		return err
	}
	if err := migrateTables(ctx, w.pool, w.opts.Schema, set); err != nil {
		w.release()
		return err
	}
	return nil
}

// acquire takes the lease when it is free or expired, or waits for it.
func (w *Writer) acquire(ctx context.Context) error {
	for {
		taken, err := w.tryLease(ctx)
		if isQueryCanceled(err) && ctx.Err() != nil {
			// Ended as it waited for the lease's row, which the holder's
			// write keeps locked: the holder, whose name that row holds,
			// is busy.
			return fmt.Errorf("%w: its holder is in a write, which holds the lease's row (waited until %w)", ErrWriterBusy, ctx.Err())
		}
		locked := isLockTimeout(err)
		if err != nil && !locked {
			return fmt.Errorf("pgstore: taking the writer's lease: %w", err)
		}
		if taken {
			return nil
		}
		var holder string
		var until time.Time
		if err := w.pool.QueryRow(ctx, `SELECT COALESCE(owner, ''), COALESCE(expires_at, clock_timestamp()) FROM writer_lease WHERE id = 1`).Scan(&holder, &until); err != nil {
			return fmt.Errorf("pgstore: reading the writer's lease: %w", err)
		}
		busy := fmt.Errorf("%w: %s, until %s unless renewed", ErrWriterBusy, holder, until.UTC().Format(time.RFC3339))
		if locked {
			busy = fmt.Errorf("%w: %s, whose lease runs to %s, is in a write that has held the lease's row for longer than the lease lasts",
				ErrWriterBusy, holder, until.UTC().Format(time.RFC3339))
		}
		if !w.opts.WaitForLease {
			return busy
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waited until %w)", busy, ctx.Err())
		case <-time.After(min(time.Second, w.opts.LeaseTTL/3)):
		}
	}
}

// tryLease takes the lease if it is free or expired. A write holds the
// lease's row locked until it ends: tryLease waits for it no longer than
// the lease lasts, and then fails with PostgreSQL's lock_not_available,
// so that a write stuck on a session its writer has left (its host gone)
// makes it fail rather than wait until the server ends that session.
func (w *Writer) tryLease(ctx context.Context) (taken bool, err error) {
	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", serverMillis(w.opts.LeaseTTL))); err != nil {
			return err
		}
		// The row, had a first writer stopped between making the tables
		// and seeding them.
		if _, err := tx.Exec(ctx, seedLease); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE writer_lease
			SET owner = $1, expires_at = clock_timestamp() + $2 * INTERVAL '1 millisecond'
			WHERE id = 1 AND (owner IS NULL OR expires_at < clock_timestamp())`, w.owner, w.ttlMillis())
		taken = err == nil && tag.RowsAffected() == 1
		return err
	})
	return taken && err == nil, err
}

// serverMillis is d as PostgreSQL's timeouts take it: whole milliseconds,
// 1 at least (0 turns them off) and 2^31-1 at most (about 24 days; more
// is refused when connecting).
func serverMillis(d time.Duration) int64 {
	return min(max(d.Milliseconds(), 1), math.MaxInt32)
}

// isLockTimeout reports PostgreSQL's error for a lock waited for past
// lock_timeout.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// isQueryCanceled reports PostgreSQL's error for a statement cancelled
// while it ran, as pgx cancels one whose context ends.
func isQueryCanceled(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57014"
}

// renewLease extends the lease every third of its TTL until Close. A
// renewal that finds the lease taken marks the writer as having lost it.
// While a write runs, which extended the lease as it began and holds it
// locked, the write is watched instead.
func (w *Writer) renewLease() {
	defer close(w.renew)
	t := time.NewTicker(w.opts.LeaseTTL / 3)
	defer t.Stop()
	watch := &watcher{w: w}
	defer watch.close()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		if wr := w.inflight.Load(); wr != nil {
			watch.check(wr)
			continue
		}
		ctx, cancel := context.WithTimeout(w.ctx, w.opts.LeaseTTL/3)
		tag, err := w.pool.Exec(ctx, `UPDATE writer_lease SET expires_at = clock_timestamp() + $2 * INTERVAL '1 millisecond'
			WHERE id = 1 AND owner = $1`, w.owner, w.ttlMillis())
		cancel()
		switch {
		case w.ctx.Err() != nil:
			return
		case err != nil:
			w.opts.Logger.Warn("pgstore: renewing the writer's lease failed", "err", err)
		case tag.RowsAffected() != 1:
			w.opts.Logger.Error("pgstore: the writer's lease was taken by another writer; this one no longer writes, and serves what that one writes")
			w.loseLease()
			return
		}
	}
}

// release gives the lease up, if this writer still holds it.
func (w *Writer) release() {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	w.releaseOn(ctx, w.pool)
}

// releaseAlone is release on a connection of its own, outside the pool,
// which Close has made refuse statements: no read waiting for one of the
// pool's can take it first, and wait on the server with it.
func (w *Writer) releaseAlone() {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, w.pool.Config().ConnConfig)
	if err != nil {
		return // the lease expires in its time
	}
	defer conn.Close(ctx)
	w.releaseOn(ctx, conn)
}

// releaseTimeout bounds the lease's release: a server that does not answer
// leaves the lease to expire.
const releaseTimeout = 5 * time.Second

func (w *Writer) releaseOn(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}) {
	_, _ = db.Exec(ctx, `UPDATE writer_lease SET owner = NULL, expires_at = NULL WHERE id = 1 AND owner = $1`, w.owner)
}

// Close stops the writer, and a write or an Importer's vacuum under way
// (rolled back, cancelled on the server), releases its lease and closes
// the connections. Reads and writes after Close fail with ErrClosed. A
// Close while another runs returns once that one has: the lease is given
// up then.
func (w *Writer) Close() error {
	if !w.closed.CompareAndSwap(false, true) {
		<-w.closeDone
		return nil
	}
	defer close(w.closeDone)
	w.Reader.closing.Store(true)
	// Then a write under way ends, even one that waits on the server for
	// a table lock, and the writes that wait for it find w closed. The
	// lease is given up once it has ended: the write lock is free then.
	w.cancel()
	w.mu.Lock()
	w.mu.Unlock()
	<-w.renew
	w.polling.Do(func() {}) // no polling starts now, and one started is seen
	w.Reader.stopPolling()
	w.vacuums.Wait()
	// Reads held on the server (behind an operator's lock, say) may hold
	// every connection of the pool, and more wait for one: they end, and
	// the lease is given up on a connection none of them can take.
	w.conns.interrupt(w.pool)
	w.releaseAlone()
	w.pool.Close()
	return nil
}

// fence extends the lease within a writing transaction, and fails it when
// the lease is no longer this writer's. The row lock it takes also orders
// the transaction after any other that touches the lease.
func (w *Writer) fence(ctx context.Context, tx pgx.Tx) error {
	tag, err := tx.Exec(ctx, `UPDATE writer_lease SET expires_at = clock_timestamp() + $2 * INTERVAL '1 millisecond'
		WHERE id = 1 AND owner = $1`, w.owner, w.ttlMillis())
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		w.loseLease()
		return ErrLeaseLost
	}
	return nil
}

// usable returns why the Writer can no longer write, or nil; w.mu is
// held.
func (w *Writer) usable() error {
	switch {
	case w.closed.Load():
		return ErrClosed
	case w.lost.Load():
		return ErrLeaseLost
	}
	return nil
}

// write runs fn in one transaction that holds the lease and ends by
// writing the head row from the state fn leaves. The new state is served
// once the transaction has committed; on any error nothing is. ctx ends
// the write, as Close does: an Importer's, or the Writer's own.
func (w *Writer) write(ctx context.Context, fn func(ctx context.Context, tx *txn, st *headState) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	var old *headState
	var st headState
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer w.inflight.Store(nil)
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		w.inflight.Store(&writing{pid: tx.Conn().PgConn().PID(), started: time.Now(), cancel: cancel})
		if err := w.fence(ctx, tx); err != nil {
			return err
		}
		if w.unsure.Load() || w.head.Load().chainIDErr != nil {
			// The lease's row lock, which fence holds, orders this read
			// after the last write's commit, if there was one.
			if err := w.Reader.refreshOn(ctx, tx); err != nil {
				return err
			}
			w.unsure.Store(false)
		}
		old = w.head.Load()
		if old.chainIDErr != nil {
			// Written back, the head row would lose it.
			return &blockErr{fmt.Errorf("%w: no write until it is set right in the database", old.chainIDErr)}
		}
		st = *old
		st.version++ // what the canonical rows written now are marked with
		t := &txn{Tx: tx}
		if err := fn(ctx, t, &st); err != nil {
			return err
		}
		if t.reorged {
			st.reorgVersion++
		}
		t.queue(`UPDATE head SET version = $1, latest = $2, latest_hash = $3, earliest = $4, safe = $5,
			finalized = $6, chain_id = $7::NUMERIC, chain_id_bound = $8, reorg_version = $9, pending_version = $10
			WHERE id = 1`,
			st.version, optNumber(st.latest, st.hasCanonical), optHash(st.latestHash, st.hasCanonical),
			optNumber(st.earliest, st.hasCanonical), optNumber(st.safe.number, st.safe.set),
			optNumber(st.finalized.number, st.finalized.set), optChainID(st.chainID, st.chainIDKnown),
			st.chainIDBound, st.reorgVersion, st.pendingVersion)
		return t.flush(ctx)
	})
	if err != nil {
		var be *blockErr
		if errors.As(err, &be) || errors.Is(err, ErrLeaseLost) {
			return err
		}
		w.unsure.Store(true)
		if cause := context.Cause(ctx); errors.Is(cause, errWriteLost) || errors.Is(cause, errServerSilent) {
			return fmt.Errorf("pgstore: %w (%w)", cause, err)
		}
		return fmt.Errorf("pgstore: %w", err)
	}
	if st.reorgVersion != old.reorgVersion {
		w.cache.resetHints(st.reorgVersion)
	}
	w.head.Store(&st)
	return nil
}

// txn is a writing transaction that queues its writes and sends them in
// one batch: what it reads never depends on what it has queued.
type txn struct {
	pgx.Tx
	writes  pgx.Batch
	reorged bool // a canonical block was replaced or removed
}

func (t *txn) queue(sql string, args ...any) { t.writes.Queue(sql, args...) }

// flush sends the queued writes and checks each.
func (t *txn) flush(ctx context.Context) error {
	if t.writes.Len() == 0 {
		return nil
	}
	n := t.writes.Len()
	br := t.SendBatch(ctx, &t.writes)
	for i := 0; i < n; i++ {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
	}
	t.writes = pgx.Batch{}
	return br.Close()
}

func optNumber(n uint64, set bool) any {
	if !set {
		return nil
	}
	return int64(n)
}

func optHash(h backend.Hash, set bool) any {
	if !set {
		return nil
	}
	return h[:]
}

func optChainID(id uint64, known bool) any {
	if !known {
		return nil
	}
	return strconv.FormatUint(id, 10)
}

// blockErr is an error about one block, which the caller gets as it is.
type blockErr struct{ err error }

func (e *blockErr) Error() string { return e.err.Error() }
func (e *blockErr) Unwrap() error { return e.err }

// blockError names the block an error is about, as memstore does.
func blockError(b *backend.Block, err error) error {
	return &blockErr{fmt.Errorf("block %d (%s): %w", b.Number, b.Hash, err)}
}

// errPendingInAdd is returned for a block marked pending given to AddBlock.
var errPendingInAdd = errors.New("a pending block is set with SetPending, not added")

// item is a block sealed for writing: a copy of what the caller gave,
// with its derived values filled in and checked.
type item struct {
	b         *backend.Block // TotalDifficulty as given
	uncles    []*backend.Uncle
	chainID   *uint256.Int
	canonical bool
}

func sealItem(block *backend.Block, uncles []*backend.Uncle, canonical bool) (*item, error) {
	if block != nil && block.Pending {
		return nil, errPendingInAdd
	}
	b, us, id, err := backend.SealCopies(block, uncles)
	if err != nil {
		return nil, blockError(b, err)
	}
	return &item{b: b, uncles: us, chainID: id, canonical: canonical}, nil
}

// agreeChainID checks a block's chain id against the store's.
func agreeChainID(st *headState, id *uint256.Int) error {
	if id != nil && st.chainIDKnown && id.Uint64() != st.chainID {
		return &backend.MismatchError{Field: "chainId", Given: hexutil.EncodeU256(id), Computed: hexutil.EncodeUint64(st.chainID) + " (of the store)"}
	}
	return nil
}

// bindChainID makes a stored block's chain id the store's, for good.
func bindChainID(st *headState, id *uint256.Int) {
	if id != nil {
		st.chainID, st.chainIDKnown, st.chainIDBound = id.Uint64(), true, true
	}
}

// setCanonical notes in the head state that number is canonical, with hash.
// untag clears the safe and finalized tags that select a number from lo
// to hi, whose canonical block leaves the chain: kept, a tag would select
// the block that takes its number, which nobody marked.
func (st *headState) untag(lo, hi uint64) {
	for _, t := range []*tag{&st.safe, &st.finalized} {
		if t.set && t.number >= lo && t.number <= hi {
			*t = tag{}
		}
	}
}

func (st *headState) setCanonical(number uint64, hash backend.Hash) {
	if !st.hasCanonical {
		st.hasCanonical, st.earliest, st.latest, st.latestHash = true, number, number, hash
		return
	}
	st.earliest = min(st.earliest, number)
	if number >= st.latest {
		st.latest, st.latestHash = number, hash
	}
}

// AddBlock implements backend.Writer, with memstore's semantics: the block
// is checked with backend.Seal (on a copy), its total difficulty settled
// against its parent's, and it becomes canonical at its number, the chain
// reorganising around it. It is one transaction: readers see all of it or
// none of it.
func (w *Writer) AddBlock(block *backend.Block, uncles ...*backend.Uncle) error {
	return w.add(block, uncles, true)
}

// AddSideBlock implements backend.Writer: the block is stored and checked
// as AddBlock does, and the canonical chain is left as it is.
func (w *Writer) AddSideBlock(block *backend.Block, uncles ...*backend.Uncle) error {
	return w.add(block, uncles, false)
}

func (w *Writer) add(block *backend.Block, uncles []*backend.Uncle, canonical bool) error {
	it, err := sealItem(block, uncles, canonical)
	if err != nil {
		return err
	}
	return w.addItem(w.ctx, it)
}

func (w *Writer) addItem(ctx context.Context, it *item) error {
	return w.write(ctx, func(ctx context.Context, t *txn, st *headState) error {
		return addInTx(ctx, t, st, it)
	})
}

// stored is what the blocks table says of a block.
type stored struct {
	number    uint64
	parent    backend.Hash
	td        *uint256.Int
	canonical bool // at its number
}

// querier is a transaction or the pool.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// lookup reads the stored blocks among hashes.
func lookup(ctx context.Context, tx querier, hashes [][]byte) (map[backend.Hash]*stored, error) {
	rows, err := tx.Query(ctx, `SELECT b.hash, b.number, b.parent_hash, b.td, c.hash IS NOT NULL
		FROM blocks b LEFT JOIN canonical c ON c.number = b.number AND c.hash = b.hash
		WHERE b.hash = ANY($1)`, hashes)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := make(map[backend.Hash]*stored)
	for rows.Next() {
		var (
			hash, parent, td []byte
			number           int64
			s                stored
		)
		if err := rows.Scan(&hash, &number, &parent, &td, &s.canonical); err != nil {
			return nil, err
		}
		if s.td, err = decodeTD(td); err != nil {
			return nil, err
		}
		s.number = uint64(number)
		copy(s.parent[:], parent)
		h, err := hashOf(hash)
		if err != nil {
			return nil, err
		}
		found[h] = &s
	}
	return found, rows.Err()
}

// addInTx writes one sealed block in a transaction, as memstore's add does.
func addInTx(ctx context.Context, t *txn, st *headState, it *item) error {
	b := it.b
	if err := agreeChainID(st, it.chainID); err != nil {
		return blockError(b, err)
	}
	hashes := [][]byte{b.Hash[:], b.ParentHash[:]}
	for _, u := range it.uncles {
		hashes = append(hashes, u.ParentHash[:])
	}
	known, err := lookup(ctx, t, hashes)
	if err != nil {
		return err
	}
	if self, ok := known[b.Hash]; ok {
		if err := readd(ctx, t, b.Hash, self, b.TotalDifficulty); err != nil {
			return blockError(b, err)
		}
		if it.canonical {
			return makeCanonical(ctx, t, st, b, known)
		}
		return nil
	}

	// The total difficulties of the block and its uncles, from their
	// parents'; a given value must agree.
	tdOf := func(h backend.Hash) *uint256.Int {
		if s, ok := known[h]; ok {
			return s.td
		}
		return nil
	}
	parentTD := tdOf(b.ParentHash)
	if b.Number == 0 && b.ParentHash == (backend.Hash{}) {
		parentTD = new(uint256.Int) // the genesis: its own difficulty is the total
	}
	td := b.TotalDifficulty
	if err := backend.SettleTotalDifficulty("totalDifficulty", &td, parentTD, &b.Difficulty); err != nil {
		return blockError(b, err)
	}
	uncleTDs := make([]*uint256.Int, len(it.uncles))
	for i, u := range it.uncles {
		uncleTDs[i] = u.TotalDifficulty
		if err := backend.SettleTotalDifficulty(fmt.Sprintf("uncle %d: totalDifficulty", i), &uncleTDs[i], tdOf(u.ParentHash), &u.Difficulty); err != nil {
			return blockError(b, err)
		}
	}
	var updates []backend.Descendant
	var settled [][]byte
	if td != nil {
		if updates, settled, err = descendantTDs(ctx, t, b.Hash, td); err != nil {
			return blockError(b, err)
		}
	}

	t.queue(`INSERT INTO blocks (hash, number, parent_hash, td, body) VALUES ($1, $2, $3, $4, $5)`,
		b.Hash[:], int64(b.Number), b.ParentHash[:], encodeTD(td), encodeBlock(nil, b, it.uncles))
	if parentTD == nil {
		t.queue(`INSERT INTO td_waiting (parent_hash, hash, idx) VALUES ($1, $2, -1)`, b.ParentHash[:], b.Hash[:])
	}
	for i, u := range it.uncles {
		t.queue(`INSERT INTO uncles (block_hash, idx, parent_hash, td, header) VALUES ($1, $2, $3, $4, $5)`,
			b.Hash[:], int32(i), u.ParentHash[:], encodeTD(uncleTDs[i]), encodeUncle(nil, u))
		if tdOf(u.ParentHash) == nil {
			t.queue(`INSERT INTO td_waiting (parent_hash, hash, idx) VALUES ($1, $2, $3)`, u.ParentHash[:], b.Hash[:], int32(i))
		}
	}
	queueTDUpdates(t, updates, settled)
	bindChainID(st, it.chainID)
	if it.canonical {
		return makeCanonical(ctx, t, st, b, known)
	}
	return nil
}

func queueTDUpdates(t *txn, updates []backend.Descendant, settled [][]byte) {
	for i := range updates {
		u := &updates[i]
		if u.Uncle < 0 {
			t.queue(`UPDATE blocks SET td = $2 WHERE hash = $1`, u.Hash[:], encodeTD(u.TD))
		} else {
			t.queue(`UPDATE uncles SET td = $3 WHERE block_hash = $1 AND idx = $2`, u.Hash[:], int32(u.Uncle), encodeTD(u.TD))
		}
	}
	if len(settled) > 0 {
		t.queue(`DELETE FROM td_waiting WHERE parent_hash = ANY($1)`, settled)
	}
}

// readd checks what a block added again gives against the stored block. A
// total difficulty given for a stored block without one becomes known: the
// block and its stored descendants take it, as if it were new.
func readd(ctx context.Context, t *txn, hash backend.Hash, s *stored, given *uint256.Int) error {
	switch {
	case given == nil:
		return nil
	case s.td != nil:
		if !given.Eq(s.td) {
			return &backend.MismatchError{Field: "totalDifficulty", Given: hexutil.EncodeU256(given), Computed: hexutil.EncodeU256(s.td) + " (stored)"}
		}
		return nil
	}
	updates, settled, err := descendantTDs(ctx, t, hash, given)
	if err != nil {
		return err
	}
	updates = append(updates, backend.Descendant{Hash: hash, Uncle: -1, TD: given})
	queueTDUpdates(t, updates, settled)
	return nil
}

// descendantTDs is the store's side of
// backend.DescendantTotalDifficulties: the children it walks are those in
// td_waiting, stored while their parent's total was unknown. It also
// returns the blocks whose waiting descendants are now settled, as their
// rows can go.
func descendantTDs(ctx context.Context, t *txn, hash backend.Hash, td *uint256.Int) ([]backend.Descendant, [][]byte, error) {
	var settled [][]byte
	children := func(parent backend.Hash) ([]backend.Descendant, error) {
		settled = append(settled, parent[:])
		rows, err := t.Query(ctx, `SELECT w.hash, w.idx, COALESCE(b.td, u.td), COALESCE(b.body, u.header)
			FROM td_waiting w
			LEFT JOIN blocks b ON w.idx = -1 AND b.hash = w.hash
			LEFT JOIN uncles u ON w.idx >= 0 AND u.block_hash = w.hash AND u.idx = w.idx
			WHERE w.parent_hash = $1`, parent[:])
		if err != nil {
			return nil, err
		}
		type waiting struct {
			hash, td, enc []byte
			index         int32
		}
		var ws []waiting
		for rows.Next() {
			var w waiting
			if err := rows.Scan(&w.hash, &w.index, &w.td, &w.enc); err != nil {
				rows.Close()
				return nil, err
			}
			ws = append(ws, w)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out := make([]backend.Descendant, len(ws))
		for i, w := range ws {
			var header *backend.Header
			if w.index < 0 {
				b, _, err := record.DecodeHeader(w.enc)
				if err != nil {
					return nil, err
				}
				header = &b.Header
			} else {
				u, err := decodeUncle(w.enc)
				if err != nil {
					return nil, err
				}
				header = &u.Header
			}
			have, err := decodeTD(w.td)
			if err != nil {
				return nil, err
			}
			h, err := hashOf(w.hash)
			if err != nil {
				return nil, err
			}
			out[i] = backend.Descendant{Hash: h, Uncle: int(w.index), Difficulty: header.Difficulty, TD: have}
		}
		return out, nil
	}
	updates, err := backend.DescendantTotalDifficulties(hash, td, children)
	if err != nil {
		return nil, nil, err
	}
	return updates, settled, nil
}

// makeCanonical makes b the canonical block at its number, reorganising
// the chain around it as memstore does: its stored ancestors become
// canonical down to the first that already is, and the canonical blocks
// above stay so only while each is the child of the one below (for a
// block that fills a gap, the one above it).
func makeCanonical(ctx context.Context, t *txn, st *headState, b *backend.Block, known map[backend.Hash]*stored) error {
	number, hash := b.Number, b.Hash
	var old []byte
	err := t.QueryRow(ctx, `SELECT hash FROM canonical WHERE number = $1`, int64(number)).Scan(&old)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return err
	}
	replaced := old != nil && !bytes.Equal(old, hash[:])
	if old == nil || replaced {
		upsertCanonical(t, st, number, hash)
	}
	if replaced {
		st.untag(number, number)
	}
	st.setCanonical(number, hash)

	// The known ancestors become canonical, down to the first that already
	// is or is not stored. The lookup tells whether there is any to walk.
	parent := b.ParentHash
	if s, ok := known[parent]; ok && !s.canonical {
		for n := number; n > 0; n-- {
			var num int64
			var pp, atNumber []byte
			err := t.QueryRow(ctx, `SELECT b.number, b.parent_hash, c.hash
				FROM blocks b LEFT JOIN canonical c ON c.number = b.number
				WHERE b.hash = $1`, parent[:]).Scan(&num, &pp, &atNumber)
			if errors.Is(err, pgx.ErrNoRows) {
				break
			}
			if err != nil {
				return err
			}
			if uint64(num) != n-1 || bytes.Equal(atNumber, parent[:]) {
				break
			}
			if atNumber != nil {
				replaced = true
				st.untag(n-1, n-1)
			}
			upsertCanonical(t, st, n-1, parent)
			st.setCanonical(n-1, parent)
			copy(parent[:], pp)
		}
	}
	if !replaced {
		if old != nil || number >= st.latest {
			return nil
		}
		// A gap filled: the block above, when there is one, stays
		// canonical only as its child (the blocks above it are already).
		var p []byte
		err := t.QueryRow(ctx, `SELECT b.parent_hash FROM canonical c JOIN blocks b ON b.hash = c.hash
			WHERE c.number = $1`, int64(number+1)).Scan(&p)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		case bytes.Equal(p, hash[:]):
			return nil
		}
		t.queue(`DELETE FROM canonical WHERE number > $1`, int64(number))
		st.untag(number+1, math.MaxUint64)
		t.reorged = true
		st.latest, st.latestHash = number, hash
		return nil
	}
	t.reorged = true
	if number >= st.latest {
		return nil
	}

	// Above the new block, the chain continues only through its children.
	prev, at := hash, number
	for at < st.latest {
		rows, err := t.Query(ctx, `SELECT c.number, c.hash, b.parent_hash
			FROM canonical c JOIN blocks b ON b.hash = c.hash
			WHERE c.number > $1 ORDER BY c.number LIMIT 256`, int64(at))
		if err != nil {
			return err
		}
		broken, read := false, 0
		for rows.Next() {
			var num int64
			var h, p []byte
			if err := rows.Scan(&num, &h, &p); err != nil {
				rows.Close()
				return err
			}
			read++
			if uint64(num) != at+1 || !bytes.Equal(p, prev[:]) {
				broken = true
				break
			}
			at = uint64(num)
			if prev, err = hashOf(h); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if broken || read == 0 {
			t.queue(`DELETE FROM canonical WHERE number > $1`, int64(at))
			st.untag(at+1, math.MaxUint64)
			t.reorged = true
			st.latest, st.latestHash = at, prev
			return nil
		}
	}
	return nil
}

func upsertCanonical(t *txn, st *headState, number uint64, hash backend.Hash) {
	t.queue(`INSERT INTO canonical (number, hash, version) VALUES ($1, $2, $3)
		ON CONFLICT (number) DO UPDATE SET hash = excluded.hash, version = excluded.version`, int64(number), hash[:], st.version)
}

// SetPending implements backend.Writer: the block served for the "pending"
// tag, checked as memstore checks it, or none when block is nil.
func (w *Writer) SetPending(block *backend.Block) error {
	if block == nil {
		return w.write(w.ctx, func(ctx context.Context, t *txn, st *headState) error {
			t.queue(`DELETE FROM pending WHERE id = 1`)
			st.pending, st.pendingErr = nil, nil
			st.pendingVersion++
			return nil
		})
	}
	b, id, err := backend.SealPending(block)
	if err != nil {
		return blockError(b, fmt.Errorf("pending: %w", err))
	}
	return w.write(w.ctx, func(ctx context.Context, t *txn, st *headState) error {
		if err := agreeChainID(st, id); err != nil {
			return blockError(b, fmt.Errorf("pending: %w", err))
		}
		var parentTD *uint256.Int
		var td []byte
		err := t.QueryRow(ctx, `SELECT td FROM blocks WHERE hash = $1`, b.ParentHash[:]).Scan(&td)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if parentTD, err = decodeTD(td); err != nil {
			return err
		}
		if err := backend.SettleTotalDifficulty("totalDifficulty", &b.TotalDifficulty, parentTD, &b.Difficulty); err != nil {
			return blockError(b, fmt.Errorf("pending: %w", err))
		}
		t.queue(`INSERT INTO pending (id, td, body) VALUES (1, $1, $2)
			ON CONFLICT (id) DO UPDATE SET td = excluded.td, body = excluded.body`, encodeTD(b.TotalDifficulty), encodeBlock(nil, b, nil))
		st.pending, st.pendingErr = b, nil
		st.pendingVersion++
		return nil
	})
}

// SetSafe implements backend.Writer.
func (w *Writer) SetSafe(number uint64) error { return w.setTag(number, "safe") }

// SetFinalized implements backend.Writer.
func (w *Writer) SetFinalized(number uint64) error { return w.setTag(number, "finalized") }

func (w *Writer) setTag(number uint64, name string) error {
	return w.write(w.ctx, func(ctx context.Context, t *txn, st *headState) error {
		var one int
		err := pgx.ErrNoRows
		if number <= math.MaxInt64 {
			err = t.QueryRow(ctx, `SELECT 1 FROM canonical WHERE number = $1`, int64(number)).Scan(&one)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return &blockErr{fmt.Errorf("pgstore: cannot mark block %d %s: no canonical block has that number", number, name)}
		}
		if err != nil {
			return err
		}
		if name == "safe" {
			st.safe = tag{number, true}
		} else {
			st.finalized = tag{number, true}
		}
		return nil
	})
}

// SetChainID implements backend.Writer: the chain id, for a chain whose
// transactions do not tell it. It fails when stored transactions are signed
// for another chain.
func (w *Writer) SetChainID(id uint64) error {
	return w.write(w.ctx, func(ctx context.Context, t *txn, st *headState) error {
		if st.chainIDBound && st.chainID != id {
			return &blockErr{&backend.MismatchError{Field: "chainId", Given: hexutil.EncodeUint64(id), Computed: hexutil.EncodeUint64(st.chainID) + " (of the stored transactions)"}}
		}
		st.chainID, st.chainIDKnown = id, true
		return nil
	})
}

// headTD returns the total difficulty of the latest block, nil when it is
// unknown or there is none.
func (w *Writer) headTD(ctx context.Context) (*uint256.Int, error) {
	st := w.head.Load()
	if !st.hasCanonical {
		return nil, nil
	}
	var td []byte
	if err := w.pool.QueryRow(ctx, `SELECT td FROM blocks WHERE hash = $1`, st.latestHash[:]).Scan(&td); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return decodeTD(td)
}
