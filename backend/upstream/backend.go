package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
)

// Config configures a Backend. Only Endpoints is required.
type Config struct {
	// Endpoints are the JSON-RPC HTTP(S) URLs to read from, in order of
	// preference: the first usable one is asked, the next on failure.
	Endpoints []string
	// HTTPClient makes the requests; nil uses a client of its own, which
	// takes a redirect as a failure of the endpoint. One given should not
	// follow redirects to other hosts either: Go's client sends them the
	// endpoint's URL, a provider's key in its path, as the Referer.
	HTTPClient *http.Client
	// PollInterval is how often the head tracker asks each endpoint for its
	// latest, safe and finalized blocks; 0 means 2 s, which suits a chain
	// of 12 s blocks, and Open refuses less than a millisecond. A tag is
	// the one the last poll read; once no endpoint has answered for two
	// polls and a Timeout, tags fail rather than name a stale head.
	PollInterval time.Duration
	// Timeout bounds each request to an endpoint, within the deadline of
	// the request being answered; 0 means 5 s. A request that times out
	// fails over to the next endpoint.
	Timeout time.Duration
	// MaxLag is how many blocks an endpoint may be behind the best one
	// before it is skipped; 0 means 3.
	MaxLag uint64
	// ReorgDepth is how far below the head the tracker follows the chain
	// by number on a chain without a finalized block; 0 means 128. Below
	// it, a block by number is asked of the endpoint each time.
	ReorgDepth uint64
	// CacheBytes bounds the memory of the verified blocks kept by hash;
	// 0 means 64 MiB, negative turns the cache off.
	CacheBytes int64
	// Logger receives what went wrong with an endpoint, with its name
	// (scheme and host) and the check that failed; nil uses slog.Default.
	Logger *slog.Logger
}

// Backend is a backend.Backend that reads from JSON-RPC endpoints (nodes
// or providers), verifies every block before serving or caching it, and
// fails over between them. Open one with Open and Close it when done.
type Backend struct {
	cfg     Config
	eps     []*endpoint
	chainID uint64
	view    atomic.Pointer[view]
	// stale is set once the view is older than staleAfter, by staleness,
	// a timer that setView sets again with each view; staleMu orders the
	// two.
	stale     atomic.Bool
	staleness *time.Timer
	staleMu   sync.Mutex
	cache     *blockCache
	flight    flightGroup

	stop context.CancelFunc
	done chan struct{}
	// closeIdle closes the idle connections of the client the Backend
	// made for itself (none when Config.HTTPClient was given): left open,
	// each keeps a goroutine for 90 s after Close.
	closeIdle func()
}

var _ backend.Backend = (*Backend)(nil)

// errWrongChain marks an endpoint serving another chain than the first.
var errWrongChain = errors.New("endpoint serves another chain")

// Open checks the configuration, learns the chain id and the head from the
// endpoints, and starts the head tracker. It fails when no endpoint
// answers within ctx. The chain is that of the first endpoint, in the
// order given, that answers; an endpoint that reports another chain is
// logged, reported unhealthy, and never used.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("upstream: no endpoint given")
	}
	if cfg.PollInterval < 0 || cfg.PollInterval > 0 && cfg.PollInterval < minPollInterval {
		return nil, fmt.Errorf("upstream: PollInterval %v: it must be %v at least (or 0, for 2 s)", cfg.PollInterval, minPollInterval)
	}
	closeIdle := func() {}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: newTransport(64), CheckRedirect: noRedirects}
		closeIdle = cfg.HTTPClient.CloseIdleConnections
	}
	cfg = withDefaults(cfg)
	b, err := open(ctx, cfg)
	if err != nil {
		closeIdle()
		return nil, err
	}
	b.closeIdle = closeIdle
	return b, nil
}

// minPollInterval is the shortest PollInterval taken: one shorter is a
// mistake of units (PollInterval: 1 for a second), which would poll the
// endpoints as fast as they answer.
const minPollInterval = time.Millisecond

func open(ctx context.Context, cfg Config) (b *Backend, err error) {
	loop, stop := context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			stop()
		}
	}()
	b = &Backend{cfg: cfg, done: make(chan struct{}), stop: stop}
	b.flight.life = loop
	staleness := time.AfterFunc(b.staleAfter(), b.markStale)
	b.staleness = staleness
	defer func() {
		if err != nil {
			staleness.Stop()
		}
	}()
	if cfg.CacheBytes > 0 {
		b.cache = newBlockCache(cfg.CacheBytes)
	}
	answers := newBudget()
	for _, raw := range cfg.Endpoints {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("upstream: endpoint %q is not an http or https URL", redact(raw))
		}
		b.eps = append(b.eps, &endpoint{client: newClient(raw, cfg.HTTPClient, answers)})
	}
	if err := b.learnChainID(ctx); err != nil {
		return nil, err
	}
	if err := b.poll(ctx); err != nil {
		return nil, err
	}
	go b.track(loop)
	return b, nil
}

// noRedirects makes a redirect the endpoint's answer, a failure like any
// other status but 200: followed, it would read from a host the operator
// did not name, and send it the endpoint's URL as the Referer.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// newTransport makes the transport of a Backend or Follower given no
// client, keeping idle connections for idlePerHost requests at once to an
// endpoint: the default transport keeps two, and the rest would be opened
// and closed for every request. It is made afresh rather than cloned from
// http.DefaultTransport, which a program may have replaced with a
// RoundTripper of its own (a tracing wrapper, a mock).
func newTransport(idlePerHost int) *http.Transport {
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: idlePerHost,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
	}
}

// withDefaults fills in the zero values of cfg, whose HTTPClient Open has
// set already.
func withDefaults(cfg Config) Config {
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxLag == 0 {
		cfg.MaxLag = 3
	}
	if cfg.ReorgDepth == 0 {
		cfg.ReorgDepth = 128
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// learnChainID asks every endpoint for its chain id at once. The first
// endpoint that answers, in the order of preference, sets the chain;
// one that answers another is never used.
func (b *Backend) learnChainID(ctx context.Context) error {
	ids := make([]*uint64, len(b.eps))
	errs := make([]error, len(b.eps))
	var wg sync.WaitGroup
	for i, ep := range b.eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
			defer cancel()
			c := &call{method: "eth_chainId"}
			err := ep.do(ctx, c)
			if err == nil {
				err = c.err
			}
			var id hexutil.Uint64
			if err == nil {
				if err = id.UnmarshalJSON(c.result); err != nil {
					err = fmt.Errorf("%w: eth_chainId: %v", errBadAnswer, err)
				}
			}
			if errs[i] = err; err == nil {
				v := uint64(id)
				ids[i] = &v
			}
		}()
	}
	wg.Wait()
	known := false
	for i, ep := range b.eps {
		switch {
		case ids[i] == nil:
			b.endpointFailed(ctx, ep, "eth_chainId", errs[i], time.Now(), false)
		case !known:
			b.chainID, known = *ids[i], true
			ep.learnedChain(*ids[i], b.chainID)
		default:
			b.learnedChain(ep, *ids[i])
		}
	}
	if !known {
		return fmt.Errorf("upstream: no endpoint answered eth_chainId: %w", errors.Join(errs...))
	}
	return nil
}

// learnedChain records an endpoint's chain id, logs one of another chain,
// and reports whether it is the Backend's.
func (b *Backend) learnedChain(ep *endpoint, id uint64) bool {
	if ep.learnedChain(id, b.chainID) {
		return true
	}
	b.cfg.Logger.Error("upstream: endpoint serves another chain; it will not be used", "endpoint", ep.name, "chainId", id, "want", b.chainID)
	return false
}

// track polls until Close.
// A poll that fails only like the one before is logged at debug level.
func (b *Backend) track(ctx context.Context) {
	defer close(b.done)
	t := time.NewTicker(b.cfg.PollInterval)
	defer t.Stop()
	failed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := b.poll(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err == nil && failed > 0:
				b.cfg.Logger.Info("upstream: head updated again", "after_failed_polls", failed)
				failed = 0
			case err != nil:
				failed++
				level := slog.LevelWarn
				if failed > 1 {
					level = slog.LevelDebug
				}
				b.cfg.Logger.Log(ctx, level, "upstream: head not updated", "failed_polls", failed, "err", err)
			}
		}
	}
}

// Close stops the head tracker and ends every request to the endpoints
// under way: the reads waiting for one fail, and so does a read that
// would ask the endpoints after it. A read its cache answers still
// succeeds, but the Backend should not be used after Close.
func (b *Backend) Close() error {
	b.stop()
	<-b.done
	b.staleness.Stop()
	b.flight.wait()
	b.closeIdle()
	return nil
}

// Status reports on each endpoint, in the order of preference. An
// endpoint whose last answer failed is reported failing until one
// succeeds: the end of its wait makes it worth asking again, not healthy,
// and a dead endpoint that no request has reached since is dead still.
func (b *Backend) Status() []EndpointStatus {
	best := b.view.Load().best
	out := make([]EndpointStatus, len(b.eps))
	for i, ep := range b.eps {
		ep.mu.Lock()
		s := EndpointStatus{Endpoint: ep.name, Head: ep.head, Lag: ep.lag(best)}
		s.Healthy = ep.chainKnown && ep.lastErr == nil && s.Lag <= b.cfg.MaxLag
		switch {
		case ep.wrongChain:
			s.LastError = errWrongChain.Error()
		case ep.lastErr != nil:
			s.LastError = ep.lastErr.Error()
		}
		ep.mu.Unlock()
		out[i] = s
	}
	return out
}

// endpointFailed logs a failure and makes the endpoint wait its turn.
// A failure that only repeats the one before is logged at debug level, so
// that a dead endpoint is one warning and one recovery, not a line per
// poll; a block that does not verify is always an error. read is set for
// the failure of a block read (see endpoint.succeeded).
func (b *Backend) endpointFailed(ctx context.Context, ep *endpoint, what string, err error, now time.Time, read bool) {
	if ctx.Err() != nil {
		return // the request, or the Backend, was closed: not the endpoint's fault
	}
	inARow := ep.failed(err, now, read)
	level := slog.LevelWarn
	var ve *VerifyError
	switch {
	case errors.As(err, &ve):
		level = slog.LevelError // a node that serves what does not verify
	case inARow > 1:
		level = slog.LevelDebug
	}
	b.cfg.Logger.LogAttrs(ctx, level, "upstream: endpoint failed", slog.String("endpoint", ep.name), slog.String("request", what), slog.Int("in_a_row", inARow), slog.String("err", err.Error()))
}

// endpointAnswered records a success, of a block read when read is set,
// of a request sent at sent, and logs the recovery of an endpoint that was
// failing.
func (b *Backend) endpointAnswered(ctx context.Context, ep *endpoint, read bool, sent time.Time) {
	if failures := ep.succeeded(read, sent); failures > 0 {
		b.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "upstream: endpoint recovered", slog.String("endpoint", ep.name), slog.Int("after_failures", failures))
	}
}

// ChainID implements backend.Backend: the endpoints' eth_chainId.
func (b *Backend) ChainID(ctx context.Context) (uint64, error) {
	return b.chainID, ctx.Err()
}

// BlockByNumber implements backend.Backend. Tags are the head tracker's
// at its last poll. A number in the tracker's window from the finalized
// block to the head is read by the hash the tracker saw there, so that
// after a reorg no reader gets the old branch; one at or below the
// finalized block is cached by number; any other is asked of the
// endpoints.
func (b *Backend) BlockByNumber(ctx context.Context, number backend.BlockNumber) (*backend.Block, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // a request its client left, whatever the cache holds
	}
	v := b.view.Load()
	var tagged *ref
	switch number {
	case backend.Pending:
		return b.pending(ctx)
	case backend.Latest:
		tagged = &v.head
	case backend.Safe:
		tagged = v.safe
	case backend.Finalized:
		tagged = v.finalized
	case backend.Earliest:
		number = 0
	}
	if number < 0 {
		if err := b.fresh(); err != nil {
			return nil, err
		}
		if tagged == nil {
			return nil, backend.ErrNotFound
		}
		return b.blockByHash(ctx, tagged.hash, true)
	}
	n := uint64(number)
	if h, ok := v.canon[n]; ok {
		return b.blockByHash(ctx, h, true)
	}
	final := v.isFinal(n)
	if final && b.cache != nil {
		if c := b.cache.byNumber(n); c != nil {
			return c.block, nil
		}
	}
	var only func(*endpoint) bool
	if final || n > v.head.number {
		// A final block comes from an endpoint whose chain is known to
		// hold the finalized block: any other may be on a branch that
		// does not, and its block would be served for that number for
		// good. So does a block above the head: one of a branch that
		// left the finalized block would be served next to the head it
		// contradicts, where one of a node a poll ahead, or that has
		// just reorganised, is the chain's.
		only = v.onFinalizedChain
	}
	// A final number names a block the chain holds, and so does one
	// below the tracker's window on a chain without finality: an
	// endpoint's null for it (a node that pruned it) is not believed, and
	// the next is asked. In the window and above, a null may be the
	// chain's own, after a reorganisation to a shorter one.
	held := final || n < v.low
	var onFinalized *ref
	if final {
		onFinalized = v.finalized
	}
	got, err := b.fetch(ctx, "eth_getBlockByNumber", hexutil.EncodeUint64(n), held, only, onFinalized)
	if err != nil {
		return nil, err
	}
	if b.cache != nil {
		got = b.cache.put(got, final)
	}
	return got.block, nil
}

// fresh refuses tags when the view is too old to name the head: when no
// endpoint has answered a poll for two intervals and a timeout, the latest
// block it names is a guess, and an error says so better. A timer keeps
// the verdict, so that a request pays no clock reading for it.
func (b *Backend) fresh() error {
	if b.stale.Load() {
		return fmt.Errorf("upstream: the head is unknown: no endpoint has answered a poll for %s", time.Since(b.view.Load().at).Round(time.Second))
	}
	return nil
}

// staleAfter is how old a view may grow before tags are refused.
func (b *Backend) staleAfter() time.Duration { return 2*b.cfg.PollInterval + b.cfg.Timeout }

// setView makes v the view, fresh, until staleAfter from its time.
func (b *Backend) setView(v *view) {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	b.view.Store(v)
	b.stale.Store(false)
	b.staleness.Reset(max(0, b.staleAfter()-time.Since(v.at)))
}

// markStale marks the view stale, unless a newer one came as it fired.
func (b *Backend) markStale() {
	b.staleMu.Lock()
	defer b.staleMu.Unlock()
	if v := b.view.Load(); v != nil && time.Since(v.at) >= b.staleAfter() {
		b.stale.Store(true)
	}
}

// BlockByHash implements backend.Backend.
func (b *Backend) BlockByHash(ctx context.Context, hash backend.Hash) (*backend.Block, error) {
	got, err := b.byHash(ctx, hash)
	if err != nil {
		return nil, err
	}
	return got.block, nil
}

// byHash returns the block of hash, from the cache or else the endpoints.
// A block the tracker saw is not denied by a lagging endpoint: a client
// that was just given the latest block asks for it next, or for its
// parent. Whether it saw it is asked only on a miss, off the path of the
// answers the cache gives.
func (b *Backend) byHash(ctx context.Context, hash backend.Hash) (*verified, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if b.cache != nil {
		if c := b.cache.get(hash); c != nil {
			return c, nil
		}
	}
	return b.verifiedByHash(ctx, hash, b.view.Load().tracked(hash))
}

// UncleByBlockHashAndIndex implements backend.Backend.
func (b *Backend) UncleByBlockHashAndIndex(ctx context.Context, hash backend.Hash, index uint64) (*backend.Uncle, error) {
	got, err := b.byHash(ctx, hash)
	if err != nil {
		return nil, err
	}
	if index >= uint64(len(got.uncles)) {
		return nil, backend.ErrNotFound
	}
	return got.uncles[index], nil
}

func (b *Backend) blockByHash(ctx context.Context, hash backend.Hash, known bool) (*backend.Block, error) {
	got, err := b.verifiedByHash(ctx, hash, known)
	if err != nil {
		return nil, err
	}
	return got.block, nil
}

// verifiedByHash returns a block from the cache, or else fetches it, once
// however many readers ask for it at the same time. known is set for a
// hash the head tracker saw, which an endpoint must not deny having.
func (b *Backend) verifiedByHash(ctx context.Context, hash backend.Hash, known bool) (*verified, error) {
	if b.cache != nil {
		if c := b.cache.get(hash); c != nil {
			return c, nil
		}
	}
	return b.flight.do(ctx, flightKey{hash, known}, func(ctx context.Context) (*verified, error) {
		got, err := b.fetch(ctx, "eth_getBlockByHash", hash, known, nil, nil)
		if err != nil {
			return nil, err
		}
		if b.cache != nil {
			got = b.cache.put(got, false)
		}
		return got, nil
	})
}

// fetch asks the endpoints in turn (those only allows, when given) for a
// block until one gives one that verifies, with its total difficulty
// settled. With onFinalized, the endpoint's block at its number is asked
// for in the same request, and must be it: an endpoint whose last poll
// gave the finalized block may answer from another chain since (the node
// of a load balancer on a branch that left it), and a final block read by
// number from it would be cached as the chain's for good.
func (b *Backend) fetch(ctx context.Context, method string, arg any, known bool, only func(*endpoint) bool, onFinalized *ref) (*verified, error) {
	return b.failover(ctx, fmt.Sprintf("%s %v", method, arg), known, only, func(ctx context.Context, ep *endpoint) (*verified, error) {
		var fin *call
		var also []*call
		if onFinalized != nil {
			fin = &call{method: "eth_getBlockByNumber", params: []any{hexutil.EncodeUint64(onFinalized.number), false}}
			also = append(also, fin)
		}
		got, err := ep.fetchBlock(ctx, method, arg, b.chainID, also...)
		if err == nil && fin != nil {
			err = onChainOf(ep, fin, onFinalized)
		}
		if err == nil && got != nil {
			err = isAsked(ep, arg, got)
		}
		return got, err
	})
}

// onChainOf checks the answer to fin, the call for the endpoint's block at
// f's number, against f.
func onChainOf(ep *endpoint, fin *call, f *ref) error {
	if fin.err != nil {
		return fin.err
	}
	h, err := decodeHeader(fin.result)
	switch {
	case err != nil:
		return &VerifyError{Endpoint: ep.name, Block: hexutil.EncodeUint64(f.number), Err: err}
	case h == nil || h.hash != f.hash:
		given := "none"
		if h != nil {
			given = h.hash.String()
		}
		return &VerifyError{Endpoint: ep.name, Block: hexutil.EncodeUint64(f.number), Err: &backend.MismatchError{
			Field: "hash of the finalized block", Given: given, Computed: f.hash.String()}}
	}
	return nil
}

// failover calls get with each endpoint in turn (those only allows, when
// given), within the per-endpoint timeout, until one gives a block, then
// settles its total difficulty. An endpoint's null is believed
// (backend.ErrNotFound) unless known is set; a failure or a block that
// does not verify moves on to the next endpoint. It stops when ctx is
// done.
func (b *Backend) failover(ctx context.Context, what string, known bool, only func(*endpoint) bool, get func(context.Context, *endpoint) (*verified, error)) (*verified, error) {
	v := b.view.Load()
	var errs []error
	nulls := 0
	for _, ep := range order(b.eps, time.Now(), v.best, b.cfg.MaxLag) {
		if only != nil && !only(ep) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if b.flight.life.Err() != nil {
			return nil, errClosed
		}
		// Close ends the request under way, whoever reads: a read no
		// other reader shares runs on its caller's context alone.
		actx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
		endsWithClose := context.AfterFunc(b.flight.life, cancel)
		sent := time.Now()
		got, err := get(actx, ep)
		if err == nil && got != nil {
			err = b.settleTotalDifficulty(actx, ep, got)
		}
		endsWithClose()
		cancel()
		switch {
		case errors.Is(err, errNotOnHead):
			// The pending block of an endpoint that lags the head: it
			// answered, and one further on may do.
			errs = append(errs, fmt.Errorf("%s: %w", ep.name, err))
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if b.flight.life.Err() != nil {
				return nil, errClosed
			}
			if errors.Is(err, errAnswersBusy) {
				return nil, err // no endpoint's fault, and none would do better now
			}
			b.endpointFailed(ctx, ep, what, err, time.Now(), true)
			errs = append(errs, fmt.Errorf("%s: %w", ep.name, err))
		case got == nil:
			if !known {
				b.endpointAnswered(ctx, ep, true, sent)
				return nil, backend.ErrNotFound
			}
			nulls++
		default:
			b.endpointAnswered(ctx, ep, true, sent)
			return got, nil
		}
	}
	switch {
	case nulls > 0 && len(errs) == 0:
		return nil, fmt.Errorf("upstream: %s, which the chain the head tracker follows holds, is unknown to the endpoints", what)
	case nulls == 0 && len(errs) == 0:
		return nil, fmt.Errorf("upstream: no endpoint could be asked for %s: each serves another chain, waits out the Retry-After it answered, or is not known to hold the finalized block", what)
	}
	return nil, fmt.Errorf("upstream: no endpoint answered %s with a block that verifies: %w", what, errors.Join(errs...))
}

// isAsked checks that a block that verifies is the one asked for, by hash
// or by number: another block, however well it holds together, is the
// endpoint's fault like any block that does not verify.
func isAsked(ep *endpoint, arg any, got *verified) error {
	field, given, asked := "hash", got.block.Hash.String(), fmt.Sprint(arg)
	if _, byNumber := arg.(string); byNumber {
		field, given = "number", hexutil.EncodeUint64(got.block.Number)
	}
	if given == asked {
		return nil
	}
	return &VerifyError{Endpoint: ep.name, Block: asked, Err: &backend.MismatchError{Field: field, Given: given, Computed: asked + " (asked for)"}}
}

// pending fetches the pending block from the endpoints, verified as far
// as it can be: it is never cached. As a block above the head, it comes
// from an endpoint whose chain holds the finalized block, and it must be
// above the head served as latest: one of an endpoint that lags would
// contradict it.
func (b *Backend) pending(ctx context.Context) (*backend.Block, error) {
	if err := b.fresh(); err != nil {
		return nil, err // no head to build on, as for the other tags
	}
	v := b.view.Load()
	got, err := b.failover(ctx, "pending", false, v.onFinalizedChain, func(ctx context.Context, ep *endpoint) (*verified, error) {
		return ep.fetchPending(ctx, b.chainID, func(h backend.Hash) (*backend.Block, error) {
			parent, err := b.blockByHash(ctx, h, true)
			if err == nil && parent.Number < v.head.number {
				err = fmt.Errorf("%w: it is built on block %d, below the head, block %d", errNotOnHead, parent.Number, v.head.number)
			}
			return parent, err
		})
	})
	if err != nil {
		return nil, err
	}
	return got.block, nil
}
