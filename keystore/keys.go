package keystore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc"
)

// The defaults of Options. DefaultStale is long enough to ride out a
// database's restart or failover, and short enough that a revocation is
// not ignored for long.
const (
	DefaultRefresh = 5 * time.Second
	DefaultStale   = 5 * time.Minute
	DefaultFlush   = 10 * time.Second
)

// Options configures Keys. The zero value is a sensible configuration.
type Options struct {
	// Refresh is how often the keys are read again from the store: a
	// key made, revoked or limited by any process takes effect here
	// within it. Default DefaultRefresh.
	Refresh time.Duration
	// Stale is how long the keys last read are served while the store
	// cannot be read; past it, requests are refused with 503 until it
	// can. It must be longer than Refresh, or every refresh would come
	// too late. Default DefaultStale, or twice Refresh when that is
	// longer.
	Stale time.Duration
	// Flush is how often usage is written to the store, apart from the
	// refreshes: a write that is slow does not hold them up. Default
	// DefaultFlush.
	Flush time.Duration
	// Logger tells of store outages, recoveries and failed flushes. Nil
	// logs nothing.
	Logger *slog.Logger
}

// Keys gives a blockrpc.Handler the keys of a Store: it is a
// blockrpc.KeyValidator and blockrpc.KeyLimits over a copy of the keys
// kept in memory and read again every Refresh, so that a request never
// waits for the store; and its Observer counts each key's usage, which is
// written to the store every Flush. Usage is counted by key id, never as
// a metrics label.
type Keys struct {
	store Store
	opts  Options

	known atomic.Pointer[known]

	// reads numbers the refreshes in the order they begin to read. The
	// keys one read are taken only if no read begun after it has had its
	// keys taken, and its outcome sets the health only if no read begun
	// after it has set it: a failed read carries no keys, and must not
	// make a later-ending read of a change (a revocation) be dropped.
	reads atomic.Uint64

	health    sync.Mutex
	keysTaken uint64    // the number of the last read whose keys are taken
	toldOf    uint64    // the number of the last read that set failing
	failing   error     // the last refresh's error; nil once one succeeds
	failedAt  time.Time // when refreshes began to fail

	meter meter

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// known is the keys as last read, by digest. Revoked ones stay, so that a
// request accepted just before its key was revoked is still counted.
type known struct {
	keys map[Digest]knownKey
	read time.Time
}

type knownKey struct {
	id    string
	valid bool
	limit blockrpc.Limit
	own   bool
}

// Open reads the keys of store and starts refreshing them and flushing
// their usage, until Close. It fails when the store cannot be read now: a
// server should not start without its keys.
func Open(ctx context.Context, store Store, opts Options) (*Keys, error) {
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Stale <= 0 {
		opts.Stale = max(DefaultStale, 2*opts.Refresh)
	}
	if opts.Stale <= opts.Refresh {
		return nil, fmt.Errorf("keystore: Stale %v must be longer than Refresh %v, or every refresh would come too late", opts.Stale, opts.Refresh)
	}
	if opts.Flush <= 0 {
		opts.Flush = DefaultFlush
	}
	k := &Keys{store: store, opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
	k.meter.usage = make(map[string]*Usage)
	if err := k.Refresh(ctx); err != nil {
		return nil, err
	}
	go k.run()
	return k, nil
}

// run refreshes and flushes, each on its own ticker and goroutine, so
// that a write of usage that waits (locked rows, a stalled disk) does
// not hold up the reads that bring revocations.
func (k *Keys) run() {
	defer close(k.done)
	// Close ends a call under way too: one stuck in the store (locked
	// rows, a stalled disk) would hold it for up to a period.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-k.stop
		cancel()
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go k.every(ctx, &wg, k.opts.Refresh, k.Refresh)
	go k.every(ctx, &wg, k.opts.Flush, k.Flush)
	wg.Wait()
}

// every calls f every period until ctx ends, each call bounded by the
// period (2 seconds at least).
func (k *Keys) every(ctx context.Context, wg *sync.WaitGroup, period time.Duration, f func(context.Context) error) {
	defer wg.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return // a tick that came with Close
			}
			callCtx, cancel := context.WithTimeout(ctx, max(period, 2*time.Second))
			f(callCtx)
			cancel()
		}
	}
}

// Close stops refreshing and writes the usage counted since the last
// flush.
func (k *Keys) Close() error {
	k.once.Do(func() { close(k.stop) })
	<-k.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return k.Flush(ctx)
}

// Refresh reads the keys from the store now. The admin API calls it after
// a change, so that the process that made the change applies it at once.
func (k *Keys) Refresh(ctx context.Context) error {
	n := k.reads.Add(1)
	keys, err := k.store.Keys(ctx)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		// Its caller gave up (an admin request whose client left): that
		// says nothing of the store, whose health stays as it was.
		return fmt.Errorf("keystore: reading the keys: %w", err)
	}
	now := time.Now()
	k.health.Lock()
	defer k.health.Unlock()
	latest := n > k.toldOf // no read begun after it has ended
	if latest {
		k.toldOf = n
	}
	if err != nil {
		if !latest {
			return fmt.Errorf("keystore: reading the keys: %w", err)
		}
		if k.failing == nil {
			k.failedAt = now
			if last := k.known.Load(); last != nil {
				k.log(slog.LevelWarn, "keystore: the key store cannot be read: serving the keys last read until it can, for a while",
					"err", err, "keys", len(last.keys), "read_at", last.read, "until", last.read.Add(k.opts.Stale))
			}
		}
		k.failing = err
		return fmt.Errorf("keystore: reading the keys: %w", err)
	}
	if latest && k.failing != nil {
		k.log(slog.LevelInfo, "keystore: the key store can be read again", "down_for", now.Sub(k.failedAt).Round(time.Millisecond))
		k.failing = nil
	}
	if n < k.keysTaken {
		// A slow read, begun before one already taken: what it read may
		// be older, and would undo a change (a revocation) made between.
		return nil
	}
	k.keysTaken = n
	next := &known{keys: make(map[Digest]knownKey, len(keys)), read: now}
	for _, key := range keys {
		limit, own := key.Limit()
		next.keys[key.Digest] = knownKey{id: key.ID, valid: key.Valid(), limit: limit, own: own}
	}
	k.known.Store(next)
	return nil
}

// ErrStale is the error of a key check once the store has not been read
// for longer than Options.Stale: the handler answers 503.
var ErrStale = errors.New("keystore: the key store has not been readable for too long to trust the keys last read")

// ValidKey implements blockrpc.KeyValidator.
func (k *Keys) ValidKey(_ context.Context, key string) (bool, error) {
	kn := k.known.Load()
	if time.Since(kn.read) > k.opts.Stale {
		return false, ErrStale
	}
	return kn.keys[DigestOf(key)].valid, nil
}

// KeyLimit implements blockrpc.KeyLimits.
func (k *Keys) KeyLimit(_ context.Context, key string) (blockrpc.Limit, bool) {
	e := k.known.Load().keys[DigestOf(key)]
	return e.limit, e.own
}

// Health reports whether the keys are current: nil when the last read of
// the store succeeded within Options.Stale, and otherwise an error that
// says since when the store cannot be read and until when the keys last
// read are served (ErrStale once that time is past, as ValidKey then
// refuses every key), for a readiness check to show.
func (k *Keys) Health() error {
	k.health.Lock()
	failing, since := k.failing, k.failedAt
	k.health.Unlock()
	read := k.known.Load().read
	if failing == nil {
		if time.Since(read) > k.opts.Stale {
			// No read has failed, and none has ended since: one that
			// waits (on a store whose disk stalls) refuses the keys as
			// surely, and ValidKey does.
			return fmt.Errorf("%w: no read of it has ended since %s", ErrStale, read.UTC().Format(time.RFC3339))
		}
		return nil
	}
	if time.Since(read) > k.opts.Stale {
		return fmt.Errorf("%w: unreadable since %s: %v", ErrStale, since.UTC().Format(time.RFC3339), failing)
	}
	return fmt.Errorf("keystore: the key store is unreadable since %s (%v): serving the keys read at %s until %s",
		since.UTC().Format(time.RFC3339), failing, read.UTC().Format(time.RFC3339), read.Add(k.opts.Stale).UTC().Format(time.RFC3339))
}

// idOf returns the id of a key known by its digest in hex, as
// blockrpc.RequestInfo.KeyDigest gives it, revoked or not.
func (k *Keys) idOf(digest string) (string, bool) {
	d, err := ParseDigest(digest)
	if err != nil {
		return "", false
	}
	e, ok := k.known.Load().keys[d]
	return e.id, ok
}

func (k *Keys) log(level slog.Level, msg string, args ...any) {
	if k.opts.Logger != nil {
		k.opts.Logger.Log(context.Background(), level, msg, args...)
	}
}
