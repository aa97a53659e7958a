package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
)

// Store is what a Follower writes to: a chain it can read back, to resume
// where it stopped and to find where a reorganisation forks, and write.
// memstore.Store is one.
type Store interface {
	backend.Backend
	backend.Writer
}

// FollowConfig sets up a Follower.
type FollowConfig struct {
	// Endpoint is the JSON-RPC HTTP URL of the node or provider to copy
	// from. Logs show only its scheme and host: a provider's key is often
	// in the path.
	Endpoint string
	// HTTPClient sends the requests; nil is a client of the follower's
	// own, which keeps a connection open per block fetched at once, and
	// takes a redirect as a failure (see Config.HTTPClient).
	HTTPClient *http.Client

	// From is the first block to copy when the store is empty: 0 copies
	// the chain from its genesis. A store that holds blocks is continued
	// from its latest, whatever From says.
	From uint64
	// FromTotalDifficulty is the total difficulty of block From when From
	// is above 0, from which the store computes every later block's. Nil
	// leaves it unknown (null), unless block From is past the merge of a
	// chain whose total difficulty is known to have frozen there
	// (mainnet, Sepolia, Holesky, Hoodi).
	FromTotalDifficulty *uint256.Int

	// Concurrency is how many blocks are fetched at once while
	// backfilling; 0 means 8. They are written in order, one at a time.
	Concurrency int
	// PollInterval is how often the endpoint's head is asked for once the
	// store has caught up; 0 means 2 s, which suits a chain of 12 s blocks;
	// less than a millisecond is refused. A failed request is retried after
	// a backoff that starts at a quarter of it (10 ms to 1 s) and doubles up
	// to 15 times it (1 s to 30 s), or after what a 429 or 503 answer's
	// Retry-After asks for when that is longer.
	PollInterval time.Duration
	// Timeout bounds each request to the endpoint (a block and its
	// uncles count as one); 0 means 10 s.
	Timeout time.Duration

	// Logger receives the progress, reorganisations and failures; nil is
	// slog.Default().
	Logger *slog.Logger
}

// The defaults of FollowConfig's zero fields.
const (
	DefaultFollowConcurrency  = 8
	DefaultFollowPollInterval = 2 * time.Second
	DefaultFollowTimeout      = 10 * time.Second
)

// Progress is how far a Follower has come.
type Progress struct {
	// Height is the number of the store's latest block (0 while empty).
	Height uint64
	// Head is the number of the endpoint's latest block, as last polled.
	Head uint64
	// BlocksPerSecond is the rate at which blocks were written over about
	// the last 10 seconds.
	BlocksPerSecond float64
	// Synced reports that the store held the endpoint's latest block,
	// canonical, when it was last polled.
	Synced bool
}

// Follower copies a chain from one JSON-RPC endpoint into a Store and keeps
// it current: it backfills from the genesis (or from FollowConfig.From),
// then follows the head. Every block is verified as the upstream Backend
// verifies what it serves (hashes, roots, sizes, senders, chain id)
// before it is written; a block that fails is never written, and is asked
// for again after a backoff. A reorganisation is found by walking the new
// head's parentHash back to a block the store holds canonical, and the new
// branch becomes canonical in one write. The store computes every total
// difficulty from its parent's: the endpoint's values are not written.
//
// Readers of the store see it grow while the follower writes, as long as
// the store is safe for concurrent use (memstore is).
type Follower struct {
	store  Store
	cfg    FollowConfig
	c      *client
	log    *slog.Logger
	closer func() // closes the idle connections of a client of our own

	first, maxBackoff time.Duration
	running           atomic.Bool

	// chainID is the endpoint's, learnt when Run starts (0: not known).
	chainID uint64

	pauseMu    sync.Mutex
	pauseUntil time.Time // no request goes out before: a Retry-After

	// final is the endpoint's finalized block, from the last poll that
	// found the store holding it canonical: a branch that leaves it is
	// not followed. Read and written by Run's goroutine alone.
	final *ref

	mu           sync.Mutex
	progress     Progress
	written      uint64       // blocks written since NewFollower
	samples      []rateSample // (time, written), one a second or less often
	lastLog      time.Time    // of the last progress line
	loggedHeight uint64       // the height it showed
	// caughtUp is set when "caught up" was logged, and cleared when a
	// poll finds the store more than a block behind, so that the line
	// marks the end of a backfill, not every new block.
	caughtUp bool
}

// rateSample is the count of blocks written at a moment, to measure the
// rate over a window.
type rateSample struct {
	at      time.Time
	written uint64
}

const (
	// rateWindow is how far back BlocksPerSecond looks, and
	// progressLogInterval how often progress is logged while the store is
	// behind (or, caught up, while it changes).
	rateWindow          = 10 * time.Second
	progressLogInterval = 10 * time.Second
	// maxPause bounds what a Retry-After can make the follower wait.
	maxPause = 5 * time.Minute
	// minBatch is the fewest blocks a backfill writes before it polls the
	// head again, which keeps Progress.Head current while it runs; it is
	// raised to 32 fetches a worker.
	minBatch = 1024
)

// NewFollower returns a Follower that copies the chain at cfg.Endpoint into
// store when Run is called.
func NewFollower(store Store, cfg FollowConfig) (*Follower, error) {
	if store == nil {
		return nil, errors.New("upstream: NewFollower needs a store")
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("upstream: the endpoint %q is not an http or https URL", redact(cfg.Endpoint))
	}
	switch {
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("upstream: Concurrency %d is negative", cfg.Concurrency)
	case cfg.PollInterval < 0:
		return nil, fmt.Errorf("upstream: PollInterval %s is negative", cfg.PollInterval)
	case cfg.PollInterval > 0 && cfg.PollInterval < minPollInterval:
		return nil, fmt.Errorf("upstream: PollInterval %v: it must be %v at least (or 0, for the default)", cfg.PollInterval, minPollInterval)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("upstream: Timeout %s is negative", cfg.Timeout)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultFollowConcurrency
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultFollowPollInterval
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultFollowTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FromTotalDifficulty != nil {
		cfg.FromTotalDifficulty = new(uint256.Int).Set(cfg.FromTotalDifficulty)
	}
	f := &Follower{
		store:      store,
		cfg:        cfg,
		first:      min(max(cfg.PollInterval/4, 10*time.Millisecond), time.Second),
		maxBackoff: min(max(cfg.PollInterval*15, time.Second), 30*time.Second),
		closer:     func() {},
	}
	hc := cfg.HTTPClient
	if hc == nil {
		t := newTransport(cfg.Concurrency + 2)
		hc = &http.Client{Transport: t, CheckRedirect: noRedirects}
		f.closer = t.CloseIdleConnections
	}
	f.c = newClient(cfg.Endpoint, hc, newBudget())
	f.log = cfg.Logger.With(slog.String("endpoint", f.c.name))
	return f, nil
}

// fatalError is a failure that retrying cannot mend: Run returns it.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func fatalf(format string, args ...any) error {
	return &fatalError{fmt.Errorf(format, args...)}
}

// Run copies the chain and follows it until ctx is done, when it returns
// nil, or until a failure that retrying cannot mend, which it returns: the
// endpoint serves another chain than the store holds (its chain id
// differs, or its block at the number of the store's first block has
// another parent, or it forks below that block), or the store refuses the
// chain id as another chain's (a backend.MismatchError). A reorganisation
// that replaces the store's first block with one of the same parent
// replaces it in the store too. An endpoint that will not serve the
// store's first block (one that expired its old blocks) is followed
// without that check. Network failures, answers that do not verify,
// failed reads and writes of the store and its refusals of blocks are
// logged and retried, and so is a branch that leaves the block the
// endpoint gave as finalized, which is not followed; an endpoint that
// announces a block it does not serve, or has fallen below the store's
// first block, is asked again at the next poll. The store's pending block is cleared before its head
// moves, and set again from the endpoint's once the store is current. Run
// must not be called again before it returns.
func (f *Follower) Run(ctx context.Context) error {
	if !f.running.CompareAndSwap(false, true) {
		return errors.New("upstream: the Follower is already running")
	}
	defer f.running.Store(false)
	defer f.closer()

	started := false
	var bo backoff
	for {
		var again bool
		var err error
		if started {
			again, err = f.step(ctx)
		} else if err = f.start(ctx); err == nil {
			started, again = true, true
		}
		var fatal *fatalError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &fatal):
			return fatal.err
		case err != nil:
			d := bo.next(f.first, f.maxBackoff)
			f.log.Error("upstream: following failed", slog.Any("err", err), slog.Duration("retry_in", d))
			err = sleep(ctx, d)
		case again:
			bo.reset()
		default:
			bo.reset()
			err = sleep(ctx, f.cfg.PollInterval)
		}
		if err != nil {
			return nil // sleep ends early only with ctx
		}
	}
}

// start learns the endpoint's chain id and checks that it serves the chain
// the store holds.
func (f *Follower) start(ctx context.Context) error {
	var id uint64
	err := f.retry(ctx, "eth_chainId", func(ctx context.Context) error {
		cl := &call{method: "eth_chainId"}
		if err := f.c.do(ctx, cl); err != nil {
			return err
		}
		if cl.err != nil {
			return cl.err
		}
		var v hexutil.Uint64
		if err := json.Unmarshal(cl.result, &v); err != nil {
			return fmt.Errorf("%w: eth_chainId: %v", errBadAnswer, err)
		}
		id = uint64(v)
		return nil
	})
	if err != nil {
		return err
	}
	stored, err := f.store.ChainID(ctx)
	switch {
	case err == nil && stored != id:
		return fatalf("upstream: %s serves chain %d, the store holds chain %d", f.c.name, id, stored)
	case errors.Is(err, backend.ErrNotFound):
		err := f.store.SetChainID(id)
		var mismatch *backend.MismatchError
		switch {
		case errors.As(err, &mismatch):
			return fatalf("upstream: the store refuses the chain id %d of %s: %w", id, f.c.name, err)
		case err != nil: // the store failed, and may not another time
			return fmt.Errorf("upstream: setting the store's chain id: %w", err)
		}
	case err != nil:
		return fmt.Errorf("upstream: the store's chain id: %w", err)
	}
	f.chainID = id

	// The store's finalized block, set when an endpoint gave it as
	// finalized (by this follower before a restart, say), is not left
	// either: without it, a follower started again would follow a branch
	// that leaves it until its first poll that finds the store synced.
	switch fin, err := f.store.BlockByNumber(ctx, backend.Finalized); {
	case err == nil:
		f.final = &ref{number: fin.Number, hash: fin.Hash}
	case !errors.Is(err, backend.ErrNotFound):
		return fmt.Errorf("upstream: the store's finalized block: %w", err)
	}

	// A store that holds blocks must hold the endpoint's: its first block
	// is checked once, which spares a walk back to it, block by block,
	// before the last one would tell.
	earliest, err := f.store.BlockByNumber(ctx, backend.Earliest)
	if errors.Is(err, backend.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("upstream: the store's first block: %w", err)
	}
	// The endpoint's block is verified first: an answer that does not
	// hold together says nothing of its chain. One the endpoint does not
	// serve (an error, as a node that expired its old blocks answers)
	// leaves the walk back of a reorganisation to tell another chain.
	theirs, err := f.theirHeader(ctx, earliest.Number)
	if err != nil {
		return err
	}
	switch {
	case theirs == nil || theirs.hash == earliest.Hash:
	case earliest.Number > 0 && theirs.parentHash == earliest.ParentHash:
		// A reorganisation replaced the store's first block: the first
		// step finds it, and switchBranch replaces it too.
		f.log.Info("upstream: the store's first block has been replaced on the endpoint's chain",
			slog.Uint64("number", earliest.Number), slog.String("stored", earliest.Hash.String()), slog.String("theirs", theirs.hash.String()))
	default:
		return fatalf("upstream: %s serves another chain: its block %d is %s, the store's is %s", f.c.name, earliest.Number, theirs.hash, earliest.Hash)
	}
	// Progress shows where the store stands before the first poll; the
	// log waits for the endpoint's head, which it would show as 0.
	if local, err := f.latest(ctx); err == nil && local != nil {
		f.mu.Lock()
		f.progress.Height = local.Number
		f.mu.Unlock()
	}
	return nil
}

// step polls the endpoint's head once and brings the store towards it: a
// batch of the blocks it lacks, or a reorganisation, then the tags. It
// reports whether to go on at once, without waiting for the next poll.
func (f *Follower) step(ctx context.Context) (again bool, err error) {
	var head *blockRef
	err = f.retry(ctx, "latest", func(ctx context.Context) error {
		var err error
		head, err = f.ref(ctx, "latest")
		if err == nil && head == nil {
			err = fmt.Errorf("%w: no latest block", errBadAnswer)
		}
		return err
	})
	if err != nil {
		return false, err
	}
	headNumber := head.num()

	local, err := f.latest(ctx)
	if err != nil {
		return false, err
	}
	if local == nil {
		f.noteHead(headNumber, false, 0)
		if headNumber < f.cfg.From {
			return false, nil // the endpoint has yet to reach From
		}
		return f.backfill(ctx, f.cfg.From, min(headNumber, f.cfg.From+f.batch()-1), nil)
	}
	ours, err := f.canonical(ctx, headNumber)
	if err != nil {
		return false, err
	}
	synced := ours != nil && ours.Hash == head.Hash
	f.noteHead(headNumber, synced, local.Number)
	if ours == nil {
		earliest, err := f.earliestNumber(ctx)
		if err != nil {
			return false, err
		}
		if headNumber < earliest {
			// The endpoint is below the store's first block (restarted,
			// or syncing again): nothing of its chain can be compared
			// with the store's before it is back above.
			return false, nil
		}
	}
	switch {
	case synced:
		// The store holds the endpoint's head (or the endpoint lags
		// behind the store on the same chain): only the tags move.
		f.updateTags(ctx, head, local)
		f.noteHeight(ctx, 0)
		return false, nil
	case headNumber <= local.Number:
		// The endpoint's head is on another branch than the store's.
		v, err := f.fetchByHash(ctx, head.Hash)
		switch {
		case err != nil:
			return false, err
		case v == nil:
			return false, nil // gone already: the next poll sees where it is
		}
		return f.reorg(ctx, v)
	}
	return f.backfill(ctx, local.Number+1, min(headNumber, local.Number+f.batch()), local)
}

// batch is how many blocks a backfill takes at most before polling the
// head again.
func (f *Follower) batch() uint64 {
	return uint64(max(minBatch, 32*f.cfg.Concurrency))
}

// slot is one block of a backfill, fetched by a worker and written in turn.
type slot struct {
	number uint64
	v      *verified
	err    error
	done   chan struct{}
}

// backfill fetches the blocks from..to, Concurrency at a time, and writes
// them in order on top of parent (nil: into an empty store). It stops at a
// block that is not the child of the one below: the endpoint's chain has
// reorganised, and the new branch is written as reorg does. It reports
// whether to poll again at once.
func (f *Follower) backfill(ctx context.Context, from, to uint64, parent *backend.Block) (bool, error) {
	fetchCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Stop the workers, and wait for them, before returning: a worker
	// left fetching would outlive Run.
	defer wg.Wait()
	defer cancel()

	// slots holds the blocks in their order, fetched or being fetched; its
	// capacity bounds how far the fetches run ahead of the writes, and
	// sem how many run at once.
	window := 2 * f.cfg.Concurrency
	slots := make(chan *slot, window)
	sem := make(chan struct{}, f.cfg.Concurrency)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(slots)
		// n >= from stops the loop where n++ would wrap past the largest
		// number.
		for n := from; n <= to && n >= from; n++ {
			s := &slot{number: n, done: make(chan struct{})}
			select {
			case sem <- struct{}{}:
			case <-fetchCtx.Done():
				return
			}
			select {
			case slots <- s:
			case <-fetchCtx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				defer close(s.done)
				s.v, s.err = f.fetchByNumber(fetchCtx, s.number)
			}()
		}
	}()

	movedHead := false
	for s := range slots {
		select {
		case <-s.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		if s.err != nil {
			return false, s.err
		}
		if s.v == nil {
			// The endpoint does not have a block it announced: its chain
			// has become shorter, or the machine behind its address that
			// answered is behind the one that announced it. The next
			// poll sees where it is; asking again at once could go on
			// as fast as it answers.
			return false, nil
		}
		b := s.v.block
		if parent != nil && b.ParentHash != parent.Hash {
			cancel()
			return f.reorg(ctx, s.v)
		}
		if !movedHead {
			if err := f.dropPending(ctx); err != nil {
				return false, err
			}
			movedHead = true
		}
		first := parent == nil
		stripTotalDifficulty(s.v)
		if first && b.Number > 0 {
			// The first block of a store that starts past the genesis:
			// its total difficulty is given, or known for a chain that
			// froze it, or unknown.
			b.TotalDifficulty = f.cfg.FromTotalDifficulty
			if b.TotalDifficulty == nil {
				b.TotalDifficulty = frozenTotalDifficulty(f.chainID, &b.Header)
			}
		}
		if err := f.store.AddBlock(b, s.v.uncles...); err != nil {
			return false, fmt.Errorf("the store refused block %d (%s): %w", b.Number, b.Hash, err)
		}
		parent = b
		f.noteHeight(ctx, 1)
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return true, nil
}

// reorg makes the branch that ends in top the store's canonical chain: it
// walks top's parentHash back to a block the store holds canonical,
// fetching by hash those the store does not hold, then writes them as side
// blocks and top with AddBlock, which switches the chain in one step. It
// also serves a new branch shorter than the old: the old blocks above top
// stop being canonical. It reports whether to poll again at once: not
// when the endpoint no longer has a block of the branch.
func (f *Follower) reorg(ctx context.Context, top *verified) (bool, error) {
	err := f.switchBranch(ctx, top)
	if errors.Is(err, errBranchGone) {
		return false, nil
	}
	return err == nil, err
}

// errBranchGone is switchBranch's when the endpoint no longer has a block
// of the branch: it moved on again, and the next poll sees where.
var errBranchGone = errors.New("upstream: the branch is gone")

func (f *Follower) switchBranch(ctx context.Context, top *verified) error {
	oldHead, err := f.latest(ctx)
	if err != nil {
		return err
	}
	branch := []*verified{top} // from the top down
	cur := &top.block.Header
	// replaced is the store's first block when the branch replaces it:
	// a reorganisation at the first number of a store that starts past
	// the genesis, whose parent both blocks share.
	var replaced *backend.Block
	for {
		if f.final != nil && cur.Number <= f.final.number {
			// A node does not leave a block it finalized: this one has
			// been swapped for one on another branch (behind a load
			// balancer), whose blocks would replace final ones.
			return fmt.Errorf("upstream: %s serves a branch that leaves block %d (%s), which it gave as finalized: not followed", f.c.name, f.final.number, f.final.hash)
		}
		if cur.Number == 0 {
			return fatalf("upstream: %s serves another chain: its genesis is not the store's", f.c.name)
		}
		n := cur.Number - 1
		ours, err := f.canonical(ctx, n)
		if err != nil {
			return err
		}
		if ours != nil && ours.Hash == cur.ParentHash {
			break // the common ancestor
		}
		if ours == nil {
			first, err := f.store.BlockByNumber(ctx, backend.Earliest)
			if err != nil {
				return fmt.Errorf("the store's first block: %w", err)
			}
			if n < first.Number {
				if cur.Number == first.Number && cur.ParentHash == first.ParentHash {
					replaced = first
					break
				}
				return fatalf("upstream: %s forks from the store's chain below its first block", f.c.name)
			}
		}
		// A block the store holds off the canonical chain (the branch
		// was seen before) need not be fetched: AddBlock makes it
		// canonical again with its descendant. Its number is checked as
		// a fetched block's is, so that the walk always goes down.
		stored, err := f.store.BlockByHash(ctx, cur.ParentHash)
		switch {
		case err == nil && stored.Number == n:
			cur = &stored.Header
			continue
		case err != nil && !errors.Is(err, backend.ErrNotFound):
			return fmt.Errorf("the store's block %s: %w", cur.ParentHash, err)
		}
		v, err := f.fetchByHash(ctx, cur.ParentHash)
		if err != nil {
			return err
		}
		if v == nil {
			return errBranchGone
		}
		if v.block.Number != n {
			return &VerifyError{Endpoint: f.c.name, Block: cur.ParentHash.String(),
				Err: fmt.Errorf("the parent of block %d has number %d", cur.Number, v.block.Number)}
		}
		branch = append(branch, v)
		cur = &v.block.Header
	}
	ancestor := cur.Number - 1
	for _, v := range branch {
		stripTotalDifficulty(v)
	}
	// The branch's block at the first number needs its total difficulty
	// only when it was fetched: one the store holds (a branch switched
	// back to, a switch cut short) has the one it was stored with.
	if bottom := branch[len(branch)-1].block; replaced != nil && bottom.Number == replaced.Number {
		bottom.TotalDifficulty = replacedTotalDifficulty(f.chainID, replaced, bottom)
	}
	if err := f.dropPending(ctx); err != nil {
		return err
	}
	for i := len(branch) - 1; i > 0; i-- {
		v := branch[i]
		if err := f.store.AddSideBlock(v.block, v.uncles...); err != nil {
			return fmt.Errorf("the store refused block %d (%s) of a new branch: %w", v.block.Number, v.block.Hash, err)
		}
	}
	if err := f.store.AddBlock(top.block, top.uncles...); err != nil {
		return fmt.Errorf("the store refused block %d (%s), the head of a new branch: %w", top.block.Number, top.block.Hash, err)
	}
	attrs := []any{
		slog.Uint64("ancestor", ancestor),
		slog.Uint64("new_head", top.block.Number), slog.String("new_hash", top.block.Hash.String()),
		slog.Int("written", len(branch)),
	}
	if oldHead != nil {
		attrs = append(attrs, slog.Uint64("old_head", oldHead.Number), slog.String("old_hash", oldHead.Hash.String()),
			slog.Uint64("depth", oldHead.Number-ancestor))
	}
	if replaced != nil {
		attrs = append(attrs, slog.String("replaced_first_block", replaced.Hash.String()))
	}
	f.log.Warn("upstream: chain reorganised", attrs...)
	f.noteHeight(ctx, len(branch))
	return nil
}

// replacedTotalDifficulty is the total difficulty of block, which replaces
// first, the store's first block, from the same parent: the parent's
// (first's less its difficulty) plus block's difficulty; when first's is
// not known, the chain's frozen value or none, as backfill gives a first
// block.
func replacedTotalDifficulty(chainID uint64, first, block *backend.Block) *uint256.Int {
	if first.TotalDifficulty == nil || first.TotalDifficulty.Lt(&first.Difficulty) {
		return frozenTotalDifficulty(chainID, &block.Header)
	}
	td := new(uint256.Int).Sub(first.TotalDifficulty, &first.Difficulty)
	if _, overflow := td.AddOverflow(td, &block.Difficulty); overflow {
		return nil
	}
	return td
}

// dropPending clears the store's pending block before its head moves: it
// is built on the head being left, and would contradict the chain until a
// poll that finds the store synced takes the endpoint's again.
func (f *Follower) dropPending(ctx context.Context) error {
	_, err := f.store.BlockByNumber(ctx, backend.Pending)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("the store's pending block: %w", err)
	}
	if err := f.store.SetPending(nil); err != nil {
		return fmt.Errorf("the store did not clear its pending block: %w", err)
	}
	return nil
}

// stripTotalDifficulty drops the endpoint's total difficulties from a block
// and its uncles: the store computes them from the parents it holds, and
// checks given ones against them, so an endpoint's value (absent, frozen
// or wrong) never decides what is stored.
func stripTotalDifficulty(v *verified) {
	v.block.TotalDifficulty = nil
	for _, u := range v.uncles {
		u.TotalDifficulty = nil
	}
}

// updateTags sets the store's safe and finalized blocks to the endpoint's
// when the store holds them canonical (a finalized block below the one
// given before, or the store's, is not taken), and its pending block to the
// endpoint's when that is built on the store's head (and clears it
// otherwise). An endpoint that has no such tag (an error or null, as a
// chain without a consensus client answers) leaves the store's as it is.
// Failures are only logged: the next poll tries again.
func (f *Follower) updateTags(ctx context.Context, head *blockRef, local *backend.Block) {
	calls := []*call{
		{method: "eth_getBlockByNumber", params: []any{"safe", false}},
		{method: "eth_getBlockByNumber", params: []any{"finalized", false}},
	}
	err := f.once(ctx, func(ctx context.Context) error { return f.c.do(ctx, calls...) })
	if err != nil {
		f.log.Debug("upstream: safe and finalized not polled", slog.Any("err", err))
	} else {
		f.setTag(ctx, calls[0], backend.Safe, f.store.SetSafe)
		f.setTag(ctx, calls[1], backend.Finalized, f.store.SetFinalized)
	}

	// The pending block follows the store's head: one built on another
	// block would contradict it.
	var pending *verified
	if head.Hash == local.Hash {
		err = f.once(ctx, func(ctx context.Context) error {
			var err error
			pending, err = f.c.fetchPending(ctx, f.chainID, func(parent backend.Hash) (*backend.Block, error) {
				if parent != local.Hash {
					return nil, errNotOnHead
				}
				return local, nil
			})
			return err
		})
		if err != nil && !errors.Is(err, errNotOnHead) {
			f.log.Warn("upstream: pending block not taken", slog.Any("err", err))
		}
	}
	if pending == nil {
		if err := f.dropPending(ctx); err != nil {
			f.log.Error("upstream: the pending block not cleared", slog.Any("err", err))
		}
		return
	}
	pending.block.TotalDifficulty = nil
	if err := f.store.SetPending(pending.block); err != nil {
		f.log.Error("upstream: the store refused the pending block", slog.Any("err", err))
	}
}

// errNotOnHead is a pending block built on another block than the head:
// the store's, or the one a Backend serves.
var errNotOnHead = errors.New("the pending block is not built on the head")

// setTag sets one tag from an answer to eth_getBlockByNumber(tag, false).
func (f *Follower) setTag(ctx context.Context, cl *call, tag backend.BlockNumber, set func(uint64) error) {
	if cl.err != nil || isNull(cl.result) {
		return
	}
	var r blockRef
	if err := json.Unmarshal(cl.result, &r); err != nil || r.Number == nil {
		f.log.Debug("upstream: a tag's block is malformed", slog.String("tag", tag.String()), slog.Any("err", err))
		return
	}
	ours, err := f.canonical(ctx, r.num())
	if err != nil {
		f.log.Warn("upstream: a tag's block not read from the store", slog.String("tag", tag.String()), slog.Any("err", err))
		return
	}
	if ours == nil || ours.Hash != r.Hash {
		return // not held (yet): the tag waits for the chain
	}
	if tag == backend.Finalized {
		if f.final != nil && ours.Number < f.final.number {
			// An endpoint behind on finality (a node behind a load
			// balancer): finality does not go back, and the block given
			// before stays the one no branch may leave.
			return
		}
		f.final = &ref{number: ours.Number, hash: ours.Hash}
	}
	if cur, err := f.store.BlockByNumber(ctx, tag); err == nil && cur.Hash == r.Hash {
		return // already set: a persistent store is spared a write a poll
	}
	if err := set(ours.Number); err != nil {
		f.log.Error("upstream: the store refused a tag", slog.String("tag", tag.String()), slog.Any("err", err))
	}
}

// blockRef is what the follower reads of a block given with transaction
// hashes: where it sits in the chain.
type blockRef struct {
	Number     *hexutil.Uint64 `json:"number"`
	Hash       backend.Hash    `json:"hash"`
	ParentHash backend.Hash    `json:"parentHash"`
}

// ref asks for a block by number or tag, with transaction hashes, for its
// number and hash; nil when the endpoint has none.
func (f *Follower) ref(ctx context.Context, arg string) (*blockRef, error) {
	cl := &call{method: "eth_getBlockByNumber", params: []any{arg, false}}
	if err := f.c.do(ctx, cl); err != nil {
		return nil, err
	}
	if cl.err != nil {
		return nil, cl.err
	}
	if isNull(cl.result) {
		return nil, nil
	}
	var r blockRef
	if err := json.Unmarshal(cl.result, &r); err != nil {
		return nil, fmt.Errorf("%w: block %s: %v", errBadAnswer, arg, err)
	}
	if r.Number == nil || r.Hash == (backend.Hash{}) {
		return nil, fmt.Errorf("%w: block %s without number or hash", errBadAnswer, arg)
	}
	return &r, nil
}

// num returns the block's number, which ref and setTag make sure it has.
func (r *blockRef) num() uint64 { return uint64(*r.Number) }

// theirHeader asks the endpoint for its block n, with transaction hashes,
// retrying until its hash is its header's and its number n; nil when the
// endpoint has none, or will not serve it (an error answer, as a node
// that expired its old blocks gives).
func (f *Follower) theirHeader(ctx context.Context, n uint64) (*header, error) {
	var h *header
	arg := hexutil.EncodeUint64(n)
	err := f.retry(ctx, "block "+arg, func(ctx context.Context) error {
		h = nil
		cl := &call{method: "eth_getBlockByNumber", params: []any{arg, false}}
		if err := f.c.do(ctx, cl); err != nil {
			return err
		}
		if cl.err != nil {
			f.log.Info("upstream: the endpoint does not serve a block", slog.String("block", arg), slog.Any("err", cl.err))
			return nil
		}
		got, err := decodeHeader(cl.result)
		switch {
		case err != nil:
			return &VerifyError{Endpoint: f.c.name, Block: arg, Err: err}
		case got != nil && got.number != n:
			return &VerifyError{Endpoint: f.c.name, Block: arg, Err: fmt.Errorf("the endpoint answered block %d", got.number)}
		}
		h = got
		return nil
	})
	return h, err
}

// fetchByNumber fetches and verifies a block by number, retrying until it
// verifies; nil when the endpoint has none.
func (f *Follower) fetchByNumber(ctx context.Context, n uint64) (*verified, error) {
	var v *verified
	arg := hexutil.EncodeUint64(n)
	err := f.retry(ctx, "block "+arg, func(ctx context.Context) error {
		var err error
		v, err = f.c.fetchBlock(ctx, "eth_getBlockByNumber", arg, f.chainID)
		if err == nil && v != nil && v.block.Number != n {
			err = &VerifyError{Endpoint: f.c.name, Block: arg, Err: fmt.Errorf("the endpoint answered block %d", v.block.Number)}
		}
		return err
	})
	return v, err
}

// fetchByHash fetches and verifies a block by hash, retrying until it
// verifies; nil when the endpoint has none.
func (f *Follower) fetchByHash(ctx context.Context, h backend.Hash) (*verified, error) {
	var v *verified
	err := f.retry(ctx, "block "+h.String(), func(ctx context.Context) error {
		var err error
		v, err = f.c.fetchBlock(ctx, "eth_getBlockByHash", h, f.chainID)
		if err == nil && v != nil && v.block.Hash != h {
			err = &VerifyError{Endpoint: f.c.name, Block: h.String(), Err: fmt.Errorf("the endpoint answered block %s", v.block.Hash)}
		}
		return err
	})
	return v, err
}

// latest returns the store's latest block, or nil when it is empty.
func (f *Follower) latest(ctx context.Context) (*backend.Block, error) {
	b, err := f.store.BlockByNumber(ctx, backend.Latest)
	if errors.Is(err, backend.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the store's latest block: %w", err)
	}
	return b, nil
}

// canonical returns the store's canonical block at n, or nil.
func (f *Follower) canonical(ctx context.Context, n uint64) (*backend.Block, error) {
	if n > uint64(1<<63-1) {
		return nil, nil // no block number is that high
	}
	b, err := f.store.BlockByNumber(ctx, backend.BlockNumber(n))
	if errors.Is(err, backend.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the store's block %d: %w", n, err)
	}
	return b, nil
}

// earliestNumber returns the number of the store's first canonical block,
// 0 when it holds none. A read that failed is an error: taken for 0, it
// would make a node below the store's first block look like a fork of its
// chain, which is fatal.
func (f *Follower) earliestNumber(ctx context.Context) (uint64, error) {
	b, err := f.store.BlockByNumber(ctx, backend.Earliest)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("the store's first block: %w", err)
	}
	return b.Number, nil
}

// retry runs op, with the request timeout, until it succeeds or ctx is
// done, backing off after each failure: a block that does not verify is
// never taken, only asked for again.
func (f *Follower) retry(ctx context.Context, what string, op func(context.Context) error) error {
	var bo backoff
	for {
		err := f.once(ctx, op)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errAnswersBusy) {
			// Not the endpoint's doing: other answers of this follower
			// take the bound of those read at once. They end soon, and
			// a backoff grown for it would slow the next failures'.
			f.log.Debug("upstream: waiting for the answers being read", slog.String("what", what), slog.Any("err", err))
			if err := sleep(ctx, f.first); err != nil {
				return err
			}
			continue
		}
		d := bo.next(f.first, f.maxBackoff)
		var ve *VerifyError
		if errors.As(err, &ve) {
			f.log.Error("upstream: refused a block that does not verify", slog.String("block", what), slog.Any("err", err), slog.Duration("retry_in", d))
		} else {
			f.log.Warn("upstream: request failed", slog.String("what", what), slog.Any("err", err), slog.Duration("retry_in", d))
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
}

// once waits out a pause that the endpoint asked for, then runs op with the
// request timeout. An answer with a Retry-After pauses every request.
func (f *Follower) once(ctx context.Context, op func(context.Context) error) error {
	f.pauseMu.Lock()
	until := f.pauseUntil
	f.pauseMu.Unlock()
	if d := time.Until(until); d > 0 {
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	err := op(rctx)
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		until := time.Now().Add(min(se.RetryAfter, maxPause))
		f.pauseMu.Lock()
		if until.After(f.pauseUntil) {
			f.pauseUntil = until
		}
		f.pauseMu.Unlock()
	}
	return err
}

// backoff is the wait after consecutive failures: it doubles from first up
// to a cap, with jitter, so that workers that failed together do not all
// come back at once.
type backoff struct{ cur time.Duration }

func (b *backoff) next(first, limit time.Duration) time.Duration {
	if b.cur == 0 {
		b.cur = first
	} else {
		b.cur = min(2*b.cur, limit)
	}
	return b.cur/2 + rand.N(b.cur/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits for d or until ctx is done, whose error it then returns.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Progress returns how far the follower has come. It is safe to call
// while Run runs.
func (f *Follower) Progress() Progress {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.progress
	p.BlocksPerSecond = f.rateLocked(time.Now())
	return p
}

// rateLocked is the rate of writes since the last sample at or before the
// window's start (the first one, when none is that old). It is taken
// against now, not the last write: once nothing has been written for the
// window, it is 0, however fast the writes before.
func (f *Follower) rateLocked(now time.Time) float64 {
	if len(f.samples) == 0 {
		return 0
	}
	base := f.samples[0]
	for _, s := range f.samples[1:] {
		if now.Sub(s.at) < rateWindow {
			break
		}
		base = s
	}
	elapsed := now.Sub(base.at).Seconds()
	if elapsed <= 0 {
		return 0
	}
	return float64(f.written-base.written) / elapsed
}

// noteHead records a poll of the endpoint's head: its number, whether the
// store holds it, and the store's height then.
func (f *Follower) noteHead(head uint64, synced bool, height uint64) {
	f.mu.Lock()
	f.progress.Head, f.progress.Synced = head, synced
	if !synced && head > height+1 {
		f.caughtUp = false
	}
	f.mu.Unlock()
}

// noteHeight counts blocks written and reads the store's height, then logs
// progress when it is time to.
func (f *Follower) noteHeight(ctx context.Context, wrote int) {
	// A read that failed leaves the height as it was: 0 would tell of an
	// empty store.
	latest, err := f.latest(ctx)
	now := time.Now()
	f.mu.Lock()
	f.written += uint64(wrote)
	if err == nil && latest != nil {
		f.progress.Height = latest.Number
	}
	// The newest sample follows every call until a second has passed
	// since the one before it: the count is then known as of the last
	// write, and a stall shows as one.
	if n := len(f.samples); n >= 2 && now.Sub(f.samples[n-2].at) < time.Second {
		f.samples[n-1] = rateSample{at: now, written: f.written}
	} else {
		f.samples = append(f.samples, rateSample{at: now, written: f.written})
	}
	// Keep one sample at or before the window's start, so that the rate
	// covers the whole window.
	for len(f.samples) > 1 && now.Sub(f.samples[1].at) >= rateWindow {
		f.samples = f.samples[1:]
	}
	f.mu.Unlock()
	f.logProgress(now)
}

// logProgress logs the progress at Info: when the store has caught up
// with the endpoint, and every progressLogInterval while it is behind or
// its height changes.
func (f *Follower) logProgress(now time.Time) {
	f.mu.Lock()
	p := f.progress
	p.BlocksPerSecond = f.rateLocked(now)
	var msg string
	switch {
	case p.Synced && !f.caughtUp:
		msg = "upstream: caught up with the endpoint"
		f.caughtUp = true
	case now.Sub(f.lastLog) >= progressLogInterval && (!p.Synced || p.Height != f.loggedHeight):
		msg = "upstream: following"
	default:
		f.mu.Unlock()
		return
	}
	f.lastLog, f.loggedHeight = now, p.Height
	f.mu.Unlock()

	var lag uint64
	if p.Head > p.Height {
		lag = p.Head - p.Height
	}
	f.log.Info(msg,
		slog.Uint64("height", p.Height), slog.Uint64("head", p.Head), slog.Uint64("lag", lag),
		slog.Float64("blocks_per_second", p.BlocksPerSecond), slog.Bool("synced", p.Synced))
}
