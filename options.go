package blockrpc

import (
	"log/slog"
	"runtime"
)

// The defaults of the per-request limits are go-ethereum's.
const (
	DefaultBatchLimit    = 1000
	DefaultResponseLimit = 25_000_000
	DefaultBodyLimit     = 5 * 1024 * 1024
)

// DefaultBacklogLimit is the default bound on the bytes that all requests
// together hold: their bodies, and their answers while their clients read
// them.
const DefaultBacklogLimit = 256 << 20

// An Option configures a Handler.
type Option func(*config)

type config struct {
	keys          KeyValidator
	batchLimit    int
	responseLimit int
	bodyLimit     int64
	gzip          bool
	corsOrigins   []string
	logger        *slog.Logger
	observer      *Observer
	limiter       Limiter
	defaultLimit  Limit

	batchConcurrency int
	backlogLimit     int64
	answerCache      int64
}

func defaultConfig() config {
	return config{
		batchLimit:       DefaultBatchLimit,
		responseLimit:    DefaultResponseLimit,
		bodyLimit:        DefaultBodyLimit,
		batchConcurrency: max(1, runtime.GOMAXPROCS(0)/2),
		backlogLimit:     DefaultBacklogLimit,
		answerCache:      DefaultAnswerCache,
	}
}

// WithKeys sets the validator of API keys. Without it every request is
// refused with 401: serving without keys is a choice, made explicit with
// WithKeys(AnyKey).
func WithKeys(v KeyValidator) Option { return func(c *config) { c.keys = v } }

// WithBatchLimit sets the most calls a batch may hold (default 1,000); a
// larger batch is refused whole. 0 or less removes the limit.
func WithBatchLimit(n int) Option { return func(c *config) { c.batchLimit = n } }

// WithResponseLimit sets the most bytes of results a batch may produce
// (default 25 MB), counted as go-ethereum counts them; calls past it are
// answered with an error. 0 or less removes the limit.
func WithResponseLimit(n int) Option { return func(c *config) { c.responseLimit = n } }

// WithBodyLimit sets the largest request body accepted (default 5 MiB);
// a larger one is refused with 413. 0 or less removes the limit.
func WithBodyLimit(n int64) Option { return func(c *config) { c.bodyLimit = n } }

// WithGzip compresses answers of 1 KiB and more for clients that accept
// gzip.
func WithGzip() Option { return func(c *config) { c.gzip = true } }

// WithCORS lets browser pages from the given origins call the handler, and
// answers their preflight requests. "*" allows every origin.
func WithCORS(origins ...string) Option {
	return func(c *config) { c.corsOrigins = append(c.corsOrigins, origins...) }
}

// WithLogger sets where the handler reports backend failures, recovered
// panics and refused keys (never the keys themselves). By default it
// reports nothing.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithBatchConcurrency sets how many batches are rendered at once (default
// half of GOMAXPROCS, at least 1); the others wait their turn, so that big
// batches leave CPU to single calls, which never wait. A batch waits only
// while it renders, never while its client reads. 0 or less removes the
// limit.
func WithBatchConcurrency(n int) Option { return func(c *config) { c.batchConcurrency = n } }

// WithBacklogLimit bounds the bytes that all requests together hold: the
// answers written while their clients read them, and the request bodies
// read and being served (default 256 MiB). The requests of one API key may
// hold half of it, so that one key's clients cannot go on taking it from
// the others. Past either bound, new requests (of that key) are refused
// with 503 and a Retry-After header until the backlog drains, and so is a
// request whose body takes it past while others hold part of it. The
// bounds are checked as a request arrives and as its body is read: the
// answers of requests already admitted are written even past them. A
// request holds its body, and at most a chunk of a batch's answers at a
// time, or its one answer. 0 or less removes the limit.
func WithBacklogLimit(n int64) Option { return func(c *config) { c.backlogLimit = n } }
