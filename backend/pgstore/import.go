package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/dumpcheck"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/holiman/uint256"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ImportOptions configure an Importer. The zero value (or nil) gives the
// defaults.
type ImportOptions struct {
	// BatchBlocks and BatchBytes bound a batch: the blocks written in one
	// transaction with COPY. Zero means DefaultBatchBlocks and
	// DefaultBatchBytes (of encoded blocks, which bounds the memory the
	// batch holds to a few times that).
	BatchBlocks int
	BatchBytes  int

	// SameChain refuses, with ErrOtherChain, a canonical block that a
	// store holding a chain cannot take as its own chain's, before it is
	// written: one that does not follow the block given before it must be
	// next to the store's chain, the store's block at its number, the
	// child of the store's block below it or the parent of the one above
	// (a dump of another chain, or one that leaves a gap, is refused). A
	// block the store holds is skipped, canonical or not, when it held a
	// chain before the dump, so that a dump imported again, or an old one,
	// leaves the store as it is. ImportDump sets it.
	SameChain bool

	// Progress, when set, is called after each batch is written.
	Progress func(ImportProgress)

	// Logger, when set, is given ImportDump's summary of the dump (see
	// memstore.Loader), and Close's lines on its vacuum: one before it,
	// one after it or its failure.
	Logger *slog.Logger
}

// Defaults of the zero ImportOptions.
const (
	DefaultBatchBlocks = 2000
	DefaultBatchBytes  = 16 << 20
)

// ImportProgress counts what an Importer has written so far.
type ImportProgress struct {
	Blocks  int           // blocks written (or found already stored)
	Bytes   int64         // their RLP size, the sum of their "size"
	Head    uint64        // the latest block's number after the batch
	Elapsed time.Duration // since the Importer was made
}

// ErrOtherChain is returned by an Importer with SameChain set (and so by
// ImportDump) for a dump whose first block is not the store's block at its
// number, or, above the store's latest block, not its child.
var ErrOtherChain = errors.New("pgstore: the dump is of another chain than the store holds")

// Importer is a backend.Writer that writes through a Writer in batches:
// runs of new canonical blocks, each the child of the one before and the
// first a child of the latest block, go in with COPY, a batch in one
// transaction; blocks already stored, canonical where they are, are
// checked in one query a batch and skipped, so that importing the same
// dump again is quick and changes nothing. Anything else (a side block, a
// reorganisation, a block whose parent is not the head) is written as
// Writer.AddBlock writes it, after the batch before it.
//
// Each block is checked with backend.Seal, its chain id and its total
// difficulty when it is given, so that a bad block is refused by the call
// that gives it, once the blocks before it are written. A full batch is
// written in the background while the next is checked and buffered (one
// at a time); an error in writing it is returned by the call that fills
// the next batch, or by Flush or Close. Call Close at the end (ImportDump
// does): what is buffered is not served until it is written. An Importer
// is not safe for concurrent use, and nothing else should write through
// its Writer meanwhile.
type Importer struct {
	w   *Writer
	ctx context.Context // the caller's, ended too when w closes
	// release lets go of ctx, once the Importer is closed.
	release func()
	opts    ImportOptions
	start   time.Time

	mode  int // what the buffer holds: nothing, appends or readds
	items []*importItem
	bytes int
	// tail is the last block the next append must extend: the last
	// buffered, or the store's latest block.
	tail struct {
		valid  bool
		hash   backend.Hash
		number uint64
		td     *uint256.Int
	}
	// recent holds the total difficulties of the blocks appended last, for
	// the uncles of the next ones; bounded by recentLimit.
	recent      map[backend.Hash]*uint256.Int
	recentOrder []backend.Hash
	// readdTail is the last block given that is perhaps stored already,
	// with its total difficulty as given: the parent of the next one, in
	// a run of them.
	readdTail struct {
		hash backend.Hash
		td   *uint256.Int
	}
	chainID  *uint256.Int      // the buffer's, before it is the store's
	same     dumpcheck.Checker // SameChain's
	copied   int               // blocks written with COPY
	inflight *inflight         // the batch being written
	err      error             // the first error in writing: every later call returns it
	closed   bool
	closeErr error // what Close returned
	// storedBefore is how many canonical blocks the store held when the
	// Importer was made.
	storedBefore int
	progress     ImportProgress
}

const (
	modeEmpty = iota
	modeAppend
	modeReadd
)

// recentLimit is how many blocks back an uncle's parent is looked for in
// memory: consensus allows 7.
const recentLimit = 64

type importItem struct {
	*item
	td       *uint256.Int   // settled (appends)
	uncleTDs []*uint256.Int // settled, or nil where the parent is to be looked up (appends)
	// uncleWaits tells the uncles whose parent's total difficulty is
	// unknown, so that theirs is worked out, or checked, once it is known
	// (appends).
	uncleWaits []bool
	body       []byte // encoded (appends)
}

// NewImporter returns an Importer writing through w; ctx ends it, a
// write under way too, as closing w does.
func (w *Writer) NewImporter(ctx context.Context, opts *ImportOptions) *Importer {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(w.ctx, func() { cancel(ErrClosed) })
	im := &Importer{w: w, ctx: ctx, release: func() { stop(); cancel(nil) }, start: time.Now(), recent: make(map[backend.Hash]*uint256.Int)}
	im.same.OtherChain = ErrOtherChain
	if st := w.head.Load(); st.hasCanonical {
		im.storedBefore = int(st.latest - st.earliest + 1)
	}
	if opts != nil {
		im.opts = *opts
	}
	if im.opts.BatchBlocks <= 0 {
		im.opts.BatchBlocks = DefaultBatchBlocks
	}
	if im.opts.BatchBytes <= 0 {
		im.opts.BatchBytes = DefaultBatchBytes
	}
	return im
}

// ImportDump reads a dump (memstore's JSON Lines format) into the store
// through an Importer with SameChain set: every block checked as
// memstore.Load checks it, new blocks written with COPY, blocks already
// stored skipped. A line that fails its checks ends the import with a
// *memstore.LineError naming it. Blocks are written a batch at a time:
// the batches written before an error stay written, the one being written
// does not. A batch that fails to be written (the database's error) ends
// the import with a *memstore.LineError naming the line whose block was
// read when the batch was sent, or, for the last batch, with the
// database's error alone. The same import run again goes on from what the
// store holds.
func (w *Writer) ImportDump(ctx context.Context, r io.Reader, opts *ImportOptions) error {
	o := ImportOptions{}
	if opts != nil {
		o = *opts
	}
	o.SameChain = true
	im := w.NewImporter(ctx, &o)
	err := (&memstore.Loader{Logger: o.Logger}).LoadInto(r, im)
	if cerr := im.Close(); err == nil {
		err = cerr
	}
	return err
}

// Progress returns what the Importer has written so far.
func (im *Importer) Progress() ImportProgress {
	p := im.progress
	p.Elapsed = time.Since(im.start)
	return p
}

// AddBlock implements backend.Writer.
func (im *Importer) AddBlock(block *backend.Block, uncles ...*backend.Uncle) error {
	return im.add(block, uncles, true)
}

// AddSideBlock implements backend.Writer.
func (im *Importer) AddSideBlock(block *backend.Block, uncles ...*backend.Uncle) error {
	return im.add(block, uncles, false)
}

// SetPending implements backend.Writer, after the buffered blocks.
func (im *Importer) SetPending(block *backend.Block) error {
	if err := im.Flush(); err != nil {
		return err
	}
	return im.w.SetPending(block)
}

// SetSafe implements backend.Writer, after the buffered blocks.
func (im *Importer) SetSafe(number uint64) error {
	if err := im.Flush(); err != nil {
		return err
	}
	return im.w.SetSafe(number)
}

// SetFinalized implements backend.Writer, after the buffered blocks.
func (im *Importer) SetFinalized(number uint64) error {
	if err := im.Flush(); err != nil {
		return err
	}
	return im.w.SetFinalized(number)
}

// SetChainID implements backend.Writer, after the buffered blocks.
func (im *Importer) SetChainID(id uint64) error {
	if err := im.Flush(); err != nil {
		return err
	}
	return im.w.SetChainID(id)
}

// refuse writes what is buffered, then returns err, the error of the block
// that was being added.
func (im *Importer) refuse(err error) error {
	if ferr := im.Flush(); ferr != nil {
		return ferr
	}
	return err
}

func (im *Importer) add(block *backend.Block, uncles []*backend.Uncle, canonical bool) error {
	if im.err != nil {
		return im.err
	}
	if err := im.ended(); err != nil {
		return im.refuse(im.stopped(err))
	}
	it, err := sealItem(block, uncles, canonical)
	if err != nil {
		return im.refuse(err)
	}
	st := im.w.head.Load()
	if it.chainID != nil {
		known := *st
		if im.chainID != nil {
			known.chainID, known.chainIDKnown = im.chainID.Uint64(), true
		}
		if err := agreeChainID(&known, it.chainID); err != nil {
			return im.refuse(blockError(it.b, err))
		}
	}
	if canonical && im.opts.SameChain {
		if !im.same.Follows(it.b) {
			// Checked against the store, which must hold the blocks
			// buffered before it.
			if err := im.Flush(); err != nil {
				return err
			}
			if err := im.same.Check(im.ctx, im.w, it.b); err != nil {
				return im.refuse(err)
			}
		}
		im.same.Took(it.b)
	}
	if !canonical && im.opts.SameChain {
		// A side block is the child of a block the store holds, which
		// must hold the blocks buffered before it.
		if err := im.Flush(); err != nil {
			return err
		}
		if err := im.same.CheckSide(im.ctx, im.w, it.b); err != nil {
			return im.refuse(err)
		}
	}

	if canonical && im.mode != modeReadd {
		ok, err := im.extends(it.b)
		if err != nil {
			return im.refuse(err)
		}
		if ok {
			return im.append(it)
		}
	}
	if canonical && im.mode == modeReadd {
		// A run of blocks already stored may go on with new ones: check
		// the run before taking them.
		if st.hasCanonical && it.b.Number == st.latest+1 && it.b.ParentHash == st.latestHash {
			if err := im.Flush(); err != nil {
				return err
			}
			if ok, err := im.extends(it.b); err != nil {
				return im.refuse(err)
			} else if ok {
				return im.append(it)
			}
		}
	}
	if im.mode != modeAppend && (!canonical || (st.hasCanonical && it.b.Number <= st.latest)) {
		// Perhaps a block already stored: checked with the batch.
		if err := im.checkReaddTD(it.b); err != nil {
			return im.refuse(err)
		}
		im.mode = modeReadd
		im.items = append(im.items, &importItem{item: it})
		if len(im.items) >= im.opts.BatchBlocks {
			return im.launch()
		}
		return nil
	}
	if err := im.Flush(); err != nil {
		return err
	}
	im.tail.valid = false
	if err := im.w.addItem(im.ctx, it); err != nil {
		var be *blockErr
		if !errors.As(err, &be) {
			err = im.stopped(err)
			im.err = err // not the block's fault: the store's
		}
		return err
	}
	im.count(it)
	im.report()
	return nil
}

// extends reports whether b is the next block after the tail, whose total
// difficulty is known.
func (im *Importer) extends(b *backend.Block) (bool, error) {
	if !im.tail.valid {
		if err := im.join(); err != nil {
			return false, err
		}
		st := im.w.head.Load()
		if !st.hasCanonical {
			return false, nil
		}
		td, err := im.w.headTD(im.ctx)
		if err != nil {
			return false, err
		}
		im.tail.valid, im.tail.hash, im.tail.number, im.tail.td = true, st.latestHash, st.latest, td
		im.remember(st.latestHash, td)
	}
	return im.tail.td != nil && b.ParentHash == im.tail.hash && b.Number == im.tail.number+1, nil
}

// checkReaddTD checks the total difficulty given with a block that is
// perhaps stored already against its parent's, as AddBlock does, so that
// the call that gives it refuses it: its batch, written later, finds it
// stored or writes it. The parent's is the last such block's (as given),
// an appended block's, or else the store's, read once for a run of them.
func (im *Importer) checkReaddTD(b *backend.Block) error {
	given := b.TotalDifficulty
	last := im.readdTail
	if given == nil {
		im.readdTail.hash, im.readdTail.td = b.Hash, nil
		return nil
	}
	var parentTD *uint256.Int
	switch {
	case last.td != nil && last.hash == b.ParentHash:
		parentTD = last.td
	case im.recent[b.ParentHash] != nil:
		parentTD = im.recent[b.ParentHash]
	default:
		found, err := lookup(im.ctx, im.w.pool, [][]byte{b.ParentHash[:]})
		if err != nil {
			return im.stopped(fmt.Errorf("pgstore: %w", err))
		}
		if p, ok := found[b.ParentHash]; ok {
			parentTD = p.td
		}
	}
	if err := backend.SettleTotalDifficulty("totalDifficulty", &given, parentTD, &b.Difficulty); err != nil {
		return blockError(b, err) // and the block refused leaves readdTail as it was
	}
	im.readdTail.hash, im.readdTail.td = b.Hash, given
	return nil
}

// append buffers a block that extends the tail.
func (im *Importer) append(it *item) error {
	b := it.b
	td := b.TotalDifficulty
	if err := backend.SettleTotalDifficulty("totalDifficulty", &td, im.tail.td, &b.Difficulty); err != nil {
		return im.refuse(blockError(b, err))
	}
	x := &importItem{item: it, td: td, uncleTDs: make([]*uint256.Int, len(it.uncles)), uncleWaits: make([]bool, len(it.uncles))}
	for i, u := range it.uncles {
		if parent, ok := im.recent[u.ParentHash]; ok && parent != nil {
			x.uncleTDs[i] = u.TotalDifficulty
			if err := backend.SettleTotalDifficulty(fmt.Sprintf("uncle %d: totalDifficulty", i), &x.uncleTDs[i], parent, &u.Difficulty); err != nil {
				return im.refuse(blockError(b, err))
			}
		}
	}
	x.body = encodeBlock(nil, b, it.uncles)
	if it.chainID != nil {
		im.chainID = it.chainID
	}
	im.mode = modeAppend
	im.items = append(im.items, x)
	im.bytes += len(x.body)
	im.tail.hash, im.tail.number, im.tail.td = b.Hash, b.Number, td
	im.remember(b.Hash, td)
	if len(im.items) >= im.opts.BatchBlocks || im.bytes >= im.opts.BatchBytes {
		return im.launch()
	}
	return nil
}

func (im *Importer) remember(h backend.Hash, td *uint256.Int) {
	if _, ok := im.recent[h]; ok {
		return
	}
	im.recent[h] = td
	im.recentOrder = append(im.recentOrder, h)
	if len(im.recentOrder) > recentLimit {
		delete(im.recent, im.recentOrder[0])
		im.recentOrder = im.recentOrder[1:]
	}
}

func (im *Importer) count(it *item) {
	im.progress.Blocks++
	im.progress.Bytes += int64(it.b.Size)
}

func (im *Importer) report() {
	im.progress.Head = im.w.head.Load().latest
	if im.opts.Progress != nil {
		im.opts.Progress(im.Progress())
	}
}

// Flush writes the buffered blocks, and waits for the batch being written
// in the background.
func (im *Importer) Flush() error {
	if err := im.join(); err != nil {
		return err
	}
	if im.err != nil {
		return im.err
	}
	if len(im.items) == 0 {
		return nil
	}
	if err := im.launch(); err != nil {
		return err
	}
	return im.join()
}

// Close writes the buffered blocks, as Flush does, and ends the import:
// later writes through the Importer fail with ErrClosed, or with the error
// that stopped the import. After an import large enough for autovacuum to
// start on it (see vacuumDue), Close then has PostgreSQL vacuum and
// analyze the tables the blocks went into, the work autovacuum would
// otherwise do in the background while the store serves (not on
// CockroachDB, which has no VACUUM). The vacuum is upkeep, not part of
// the import: a vacuum that fails, or that a Close of the Writer stops,
// leaves the blocks as they were written, and Close logs it
// (ImportOptions.Logger) and returns nil; autovacuum does the work in
// time, as it does for a table PostgreSQL skips with a warning (one the
// writer's role may not vacuum): Close logs PostgreSQL's warnings. Another
// Close returns what the first returned. ImportDump calls Close.
func (im *Importer) Close() error {
	if im.closed {
		return im.closeErr
	}
	defer im.release()
	err := im.Flush()
	im.closed, im.closeErr = true, err
	if im.err == nil {
		im.err = ErrClosed
	}
	if err != nil || !im.vacuumDue() {
		return err
	}
	// It may take minutes after a long import: say what the wait is.
	l := im.opts.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	l.Info("pgstore: vacuuming and analyzing the imported tables", "copied", im.copied)
	warnings, err := im.w.vacuum(im.ctx)
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case err != nil:
		l.Warn("pgstore: the imported tables are left to autovacuum", "err", err, "warnings", warnings)
	case len(warnings) > 0:
		// Most often a table the role may not vacuum, skipped; but
		// PostgreSQL also warns of a vacuum that ran and could not do
		// all its work.
		l.Warn("pgstore: vacuumed with PostgreSQL's warnings (a table skipped is left to autovacuum)", "took", took, "warnings", warnings)
	default:
		l.Info("pgstore: vacuumed", "took", took)
	}
	return nil
}

// vacuumDue reports whether the import wrote enough blocks with COPY for
// autovacuum, with PostgreSQL's default settings, to start on the blocks
// table: 1,000 rows and a fifth of those the table held before
// (autovacuum_vacuum_insert_threshold and _scale_factor). Below that,
// autovacuum would leave the table alone, and so does Close. CockroachDB
// has no VACUUM.
func (im *Importer) vacuumDue() bool {
	return !im.w.server.cockroach && im.copied >= 1000+im.storedBefore/5
}

// vacuum has PostgreSQL vacuum and analyze the tables an import fills.
// The first read of a row after its import marks it as committed (its
// hint bits), which dirties its page, and autovacuum runs on the table
// during a long import and is still at work as it ends (in a probe of
// 10^6 blocks it had run twice and was running again). In probes over
// 10^6 blocks (sets of 4,096 reads of blocks not read before, one at a
// time, through the handler), the first set right after an import,
// autovacuum probably at work, had a p50 of 181 µs and the next one 100
// µs; in another probe, sets read right after a vacuum had 115 and 117
// µs. A vacuum marks every row and sets the pages' bits in the
// visibility map, reading only the pages not marked all visible yet; an
// analyze gives the planner the tables' statistics, as PostgreSQL's
// documentation advises after a bulk load.
func (w *Writer) vacuum(ctx context.Context) (warnings []string, err error) {
	w.mu.Lock()
	if err := w.usable(); err != nil {
		w.mu.Unlock()
		return nil, err
	}
	// Close waits for it: once a Writer is closed, nothing of it is left
	// on the server.
	w.vacuums.Add(1)
	w.mu.Unlock()
	defer w.vacuums.Done()
	// Stopped by a Close of the Writer too, which would otherwise wait
	// for it to end on its own.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(w.ctx, cancel)()
	// A connection of its own (one beyond the pool's MaxConns) to hear
	// PostgreSQL's warnings: a table the role may not vacuum is skipped
	// with a warning, not an error. pgx calls OnNotice on the goroutine
	// that runs Exec.
	cfg := w.pool.Config().ConnConfig.Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if n.SeverityUnlocalized == "WARNING" || n.SeverityUnlocalized == "" && n.Severity == "WARNING" {
			warnings = append(warnings, n.Message)
		}
	}
	// Stopped, the vacuum ends on the server before Exec returns: the
	// copy keeps the pool's answer to a cancelled context, a cancel
	// request (see openPool).
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connecting to vacuum: %w", err)
	}
	defer func() {
		// A Terminate message, given a second at most.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(ctx)
	}()
	for _, table := range []string{"blocks", "canonical", "uncles"} {
		// One table a statement: a list is PostgreSQL 11's.
		if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+table); err != nil {
			return warnings, fmt.Errorf("pgstore: vacuuming %s: %w", table, err)
		}
	}
	return warnings, nil
}

// inflight is a batch being written in the background, while the next is
// checked and buffered: on two cores, sealing and PostgreSQL's work
// overlap. One is written at a time.
type inflight struct {
	done  chan struct{}
	items []*importItem
	mode  int
	// skipHeld skips the blocks stored already, canonical or not (see
	// flushReadds).
	skipHeld bool
	oneByOne bool // written block by block
	written  int  // blocks written, in order
	err      error
}

// launch starts writing the buffer in the background, once the batch
// before it is written. That batch's error, if any, is returned, and the
// buffer is dropped.
func (im *Importer) launch() error {
	if err := im.join(); err != nil {
		return err
	}
	f := &inflight{done: make(chan struct{}), items: im.items, mode: im.mode}
	if im.opts.SameChain {
		empty, err := im.same.StoreWasEmpty(im.ctx, im.w)
		if err != nil {
			return err
		}
		f.skipHeld = !empty
	}
	im.items, im.bytes, im.mode = nil, 0, modeEmpty
	im.inflight = f
	go im.write(f)
	return nil
}

// write writes a batch: with COPY, or found stored already, or else block
// by block. It touches nothing of the Importer but the batch.
func (im *Importer) write(f *inflight) {
	defer close(f.done)
	var err error
	var found map[backend.Hash]*stored
	if f.mode == modeAppend {
		err = im.flushAppends(f.items)
	} else {
		found, err = im.flushReadds(f.items, f.skipHeld)
	}
	switch {
	case errors.Is(err, errOneByOne):
		f.oneByOne = true
		for _, x := range f.items {
			if f.skipHeld && heldAsGiven(found, x) {
				f.written++
				continue
			}
			if f.err = im.w.addItem(im.ctx, x.item); f.err != nil {
				return
			}
			f.written++
		}
	case err != nil:
		f.err = err
	default:
		f.written = len(f.items)
	}
}

// join waits for the batch being written, and takes in what it did.
func (im *Importer) join() error {
	f := im.inflight
	if f == nil {
		return nil
	}
	<-f.done
	im.inflight = nil
	for _, x := range f.items[:f.written] {
		im.count(x.item)
	}
	if f.mode == modeAppend && !f.oneByOne {
		im.copied += f.written
	}
	if f.oneByOne || f.err != nil {
		im.tail.valid = false
	}
	im.report()
	if f.err != nil {
		f.err = im.stopped(f.err)
		var be *blockErr
		if errors.As(f.err, &be) {
			// Returned by a later call, whose own block is not at fault.
			f.err = &blockErr{fmt.Errorf("a block given earlier, written with its batch: %w", f.err)}
		}
		im.err = f.err
		im.items, im.bytes, im.mode = nil, 0, modeEmpty
	}
	return f.err
}

// stopped is the error of a write that failed once the import had ended
// (see ended): the server's answer to a statement cancelled ("canceling statement due to
// user request") says less than why it was.
func (im *Importer) stopped(err error) error {
	if cause := im.ended(); cause != nil {
		return fmt.Errorf("pgstore: the import stopped: %w", cause)
	}
	return err
}

// ended returns why the import cannot go on, or nil: ErrClosed once the
// Writer closed, which its context tells only a moment later, or the end
// of the caller's context.
func (im *Importer) ended() error {
	if im.w.closed.Load() {
		return ErrClosed
	}
	if im.ctx.Err() != nil {
		return context.Cause(im.ctx)
	}
	return nil
}

// errOneByOne is how a batch says it must be written block by block: a
// block is stored already, a stored block waits for one of the batch's
// total difficulty, or an uncle's total difficulty disagrees.
var errOneByOne = errors.New("pgstore: the batch is written block by block")

// flushAppends writes a run of new blocks, each the child of the one
// before, with COPY in one transaction.
func (im *Importer) flushAppends(items []*importItem) error {
	first := items[0].b
	return im.w.write(im.ctx, func(ctx context.Context, t *txn, st *headState) error {
		if !st.hasCanonical || st.latestHash != first.ParentHash || st.latest+1 != first.Number {
			return errOneByOne // written to meanwhile
		}
		hashes := make([][]byte, len(items))
		for i, x := range items {
			hashes[i] = x.b.Hash[:]
		}
		var n int
		if err := t.QueryRow(ctx, `SELECT (SELECT count(*) FROM blocks WHERE hash = ANY($1)) + (SELECT count(*) FROM td_waiting WHERE parent_hash = ANY($1))`, hashes).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errOneByOne
		}
		if err := im.settleUncles(ctx, t, items); err != nil {
			return err
		}

		var uncleRows, canonicalRows [][]any
		for _, x := range items {
			for i, u := range x.uncles {
				uncleRows = append(uncleRows, []any{x.b.Hash[:], int32(i), u.ParentHash[:], encodeTD(x.uncleTDs[i]), encodeUncle(nil, u)})
				if x.uncleWaits[i] {
					t.queue(`INSERT INTO td_waiting (parent_hash, hash, idx) VALUES ($1, $2, $3)`, u.ParentHash[:], x.b.Hash[:], int32(i))
				}
			}
			canonicalRows = append(canonicalRows, []any{int64(x.b.Number), x.b.Hash[:], st.version})
		}
		if _, err := t.CopyFrom(ctx, pgx.Identifier{"blocks"}, []string{"hash", "number", "parent_hash", "td", "body"},
			pgx.CopyFromSlice(len(items), func(i int) ([]any, error) {
				x := items[i]
				return []any{x.b.Hash[:], int64(x.b.Number), x.b.ParentHash[:], encodeTD(x.td), x.body}, nil
			})); err != nil {
			return err
		}
		if len(uncleRows) > 0 {
			if _, err := t.CopyFrom(ctx, pgx.Identifier{"uncles"}, []string{"block_hash", "idx", "parent_hash", "td", "header"}, pgx.CopyFromRows(uncleRows)); err != nil {
				return err
			}
		}
		if _, err := t.CopyFrom(ctx, pgx.Identifier{"canonical"}, []string{"number", "hash", "version"}, pgx.CopyFromRows(canonicalRows)); err != nil {
			return err
		}
		for _, x := range items {
			bindChainID(st, x.chainID)
			st.setCanonical(x.b.Number, x.b.Hash)
		}
		// A long batch extends the lease again at its end.
		return im.w.fence(ctx, t.Tx)
	})
}

// settleUncles works out the total difficulty of the uncles whose parent
// was not among the blocks appended last, from the stored parents.
func (im *Importer) settleUncles(ctx context.Context, t *txn, items []*importItem) error {
	var parents [][]byte
	inBatch := make(map[backend.Hash]*uint256.Int, len(items))
	for _, x := range items {
		inBatch[x.b.Hash] = x.td
	}
	for _, x := range items {
		for i, u := range x.uncles {
			if x.uncleTDs[i] == nil {
				if _, ok := inBatch[u.ParentHash]; !ok {
					parents = append(parents, u.ParentHash[:])
				}
			}
		}
	}
	var found map[backend.Hash]*stored
	if len(parents) > 0 {
		var err error
		if found, err = lookup(ctx, t, parents); err != nil {
			return err
		}
	}
	for _, x := range items {
		for i, u := range x.uncles {
			if x.uncleTDs[i] != nil {
				continue
			}
			parentTD := inBatch[u.ParentHash]
			if s, ok := found[u.ParentHash]; ok {
				parentTD = s.td
			}
			td := u.TotalDifficulty
			if err := backend.SettleTotalDifficulty("uncle totalDifficulty", &td, parentTD, &u.Difficulty); err != nil {
				return errOneByOne // the block by block path names the block
			}
			x.uncleTDs[i], x.uncleWaits[i] = td, parentTD == nil
		}
	}
	return nil
}

// flushReadds checks that a run of blocks is stored already, as given:
// adding them again would change nothing. Otherwise they are written block
// by block. It returns the blocks it found stored, by hash.
//
// With skipHeld (a dump's import into a store that held a chain before
// it), a block stored off the chain is skipped too, rather than made
// canonical again: a dump imported again would otherwise go through its
// reorganisations again (the tags at their numbers cleared), and an old
// dump take a store that has moved on back.
func (im *Importer) flushReadds(items []*importItem, skipHeld bool) (map[backend.Hash]*stored, error) {
	var hashes [][]byte
	for _, x := range items {
		hashes = append(hashes, x.b.Hash[:], x.b.ParentHash[:])
	}
	found, err := lookup(im.ctx, im.w.pool, hashes)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	for _, x := range items {
		switch {
		case !heldAsGiven(found, x):
			return found, errOneByOne
		case !x.canonical || skipHeld:
			continue
		case !found[x.b.Hash].canonical:
			return found, errOneByOne
		}
		// Adding a canonical block again makes its stored parent canonical
		// when it is not.
		if p, ok := found[x.b.ParentHash]; ok && !p.canonical && p.number+1 == x.b.Number {
			return found, errOneByOne
		}
	}
	return found, nil
}

// heldAsGiven reports whether found holds x's block, with the total
// difficulty given with it, if any.
func heldAsGiven(found map[backend.Hash]*stored, x *importItem) bool {
	s, ok := found[x.b.Hash]
	return ok && (x.b.TotalDifficulty == nil || s.td != nil && s.td.Eq(x.b.TotalDifficulty))
}
