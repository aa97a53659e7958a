package blockrpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limit is a rate of calls: Rate calls a second on average, and up to Burst
// at once. A zero Limit allows nothing, and so does a Burst of 0 whatever
// the Rate, as golang.org/x/time/rate's Limiter, unless Rate is
// math.Inf(1), which allows everything. A negative or NaN Rate, or a negative Burst, is refused: the
// handler answers 503 and logs it, as it does for a failing limiter.
type Limit struct {
	Rate  float64
	Burst int
}

// A Limiter decides whether the calls of a request may run. The handler asks
// it once per request, with every call of a batch counted, before any call
// runs, so that a batch past the limit is refused whole.
//
// A Limiter shared by many serving processes (over Redis, or a database)
// implements the same interface. It is never given a key: id is the hex
// SHA-256 of the key, stable across processes, so that nothing a limiter
// stores or reports can reveal a key.
type Limiter interface {
	// Allow reports whether calls more calls of the key with the given id
	// may run now under limit, taking them if so; when not, retryAfter is
	// how long until they may (0 when they never can, for more calls than
	// the burst). An error means the decision could not be made; the
	// request is then refused with 503, as it is when Allow, or the
	// KeyLimit of the handler's keys, panics.
	Allow(ctx context.Context, id string, limit Limit, calls int) (ok bool, retryAfter time.Duration, err error)
}

// KeyLimits is implemented by KeyValidators that give keys limits of their
// own, such as a KeySet or a store of keys. A key without one gets the
// handler's default limit.
type KeyLimits interface {
	KeyLimit(ctx context.Context, key string) (Limit, bool)
}

// WithLimiter sets a limiter of calls per API key, and the limit of keys
// that have none of their own (see KeyLimits). Past it a request is
// refused with HTTP 429 and JSON-RPC error -32005, as hosted providers
// answer, with a Retry-After header unless waiting cannot help (more calls
// at once than the burst, or a rate of 0 spent). Without it, or with a nil
// l, nothing is limited.
func WithLimiter(l Limiter, byDefault Limit) Option {
	return func(c *config) { c.limiter, c.defaultLimit = l, byDefault }
}

// RateLimiter is a Limiter of this process alone: a token bucket per key.
// Buckets that have refilled are let go, a full bucket being what a key
// not seen before gets, so that its memory follows the keys in use, even
// where every request may bring a key of its own (AnyKey). Its zero value
// is ready to use.
type RateLimiter struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	// The buckets are looked over every sweepEvery, and whenever they
	// have grown to sweepAt.
	swept   time.Time
	sweepAt int
}

const (
	sweepEvery = 10 * time.Minute
	// minSweepAt is the fewest buckets that make a sweep before its time:
	// past it, a sweep comes when the buckets kept by the last have
	// doubled, so that sweeping costs a constant time a new key.
	minSweepAt = 1024
)

// full reports whether a bucket may be let go: full again. A bucket let go
// before it refilled (a limit of an hour a call, or a burst that takes
// longer than sweepEvery to earn back) would hand its key a whole burst it
// had not earned.
func full(b *rate.Limiter, now time.Time) bool {
	return b.Limit() == rate.Inf || b.TokensAt(now) >= float64(b.Burst())
}

// NewRateLimiter returns an empty RateLimiter.
func NewRateLimiter() *RateLimiter { return &RateLimiter{} }

// Allow implements Limiter.
func (l *RateLimiter) Allow(_ context.Context, id string, limit Limit, calls int) (bool, time.Duration, error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.bucketOf(id, limit, now).ReserveN(now, calls)
	if !r.OK() {
		return false, 0, nil
	}
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		if delay == rate.InfDuration {
			delay = 0 // a rate of 0, its burst spent: never
		}
		return false, delay, nil
	}
	return true, 0, nil
}

// bucketOf returns the key's bucket, at the key's current limit.
func (l *RateLimiter) bucketOf(id string, limit Limit, now time.Time) *rate.Limiter {
	if now.Sub(l.swept) > sweepEvery || len(l.buckets) >= max(l.sweepAt, minSweepAt) {
		for k, b := range l.buckets {
			if full(b, now) {
				delete(l.buckets, k)
			}
		}
		l.swept, l.sweepAt = now, 2*len(l.buckets)
	}
	if l.buckets == nil {
		l.buckets = make(map[string]*rate.Limiter)
	}
	every := rate.Limit(limit.Rate)
	if math.IsInf(limit.Rate, 1) {
		every = rate.Inf
	}
	b, ok := l.buckets[id]
	if !ok || b.Limit() != every || b.Burst() != limit.Burst {
		// A key's limit that changed while it is in use starts afresh,
		// with its whole burst, as the operator who set it expects: a
		// bucket carried over from no limit at all would hold nothing.
		b = rate.NewLimiter(every, limit.Burst)
		l.buckets[id] = b
	}
	return b
}

// keyDigest is the id a Limiter knows a key by.
func keyDigest(key string) string {
	digest := sha256.Sum256([]byte(key))
	return hex.EncodeToString(digest[:])
}

// allow asks the limiter whether the calls of a request may run, and
// answers the request with its refusal when they may not.
func (h *Handler) allow(ctx context.Context, a *answerWriter, c caller, body []byte, calls int) bool {
	if h.cfg.limiter == nil {
		return true
	}
	limit, ok, retryAfter, err := h.limit(ctx, c, calls)
	var code int
	var message string
	switch {
	case err != nil:
		// The limiter was given a digest, never the key: its error is
		// safe to log.
		h.log(ctx, slog.LevelError, "blockrpc: rate limiter failed", "err", err)
		a.answerStatus = http.StatusServiceUnavailable
		code, message = codeServerError, "rate limiter unavailable"
	case ok:
		return true
	case retryAfter > 0:
		a.answerStatus = http.StatusTooManyRequests
		a.w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(retryAfter.Seconds())), 10))
		code, message = codeLimitExceeded, "request rate exceeded"
	case limit.Burst == 0:
		a.answerStatus = http.StatusTooManyRequests
		code, message = codeLimitExceeded, "request rate exceeded: the limit allows no call (its burst is 0)"
	case calls > limit.Burst:
		a.answerStatus = http.StatusTooManyRequests
		code, message = codeLimitExceeded, fmt.Sprintf("request rate exceeded: %d calls at once are more than the limit allows (%d)", calls, limit.Burst)
	default:
		// Never again: a limit whose rate is 0, spent.
		a.answerStatus = http.StatusTooManyRequests
		code, message = codeLimitExceeded, "request rate exceeded"
	}
	out := a.out()
	if body[0] == '[' {
		*out = h.refuseBatch(body, *out, code, message)
	} else {
		// The call's own answer, as a batch's calls refused one by one
		// are told of.
		q, _, _ := classify(body)
		mark := len(*out)
		*out = appendError(*out, echoedID(q), code, message)
		h.observeCall(ctx, body, (*out)[mark:], time.Now(), 0)
	}
	return false
}

// limit asks the key's limit and the limiter whether calls may run. A
// panic in either, the user's code, is the limiter failing, as the key
// validator's is: the request is refused, the server goes on.
func (h *Handler) limit(ctx context.Context, c caller, calls int) (limit Limit, ok bool, retryAfter time.Duration, err error) {
	defer func() {
		if p := recover(); p != nil {
			ok, err = false, fmt.Errorf("rate limiter panicked: %v", p)
		}
	}()
	limit = h.cfg.defaultLimit
	if kl, isKL := h.cfg.keys.(KeyLimits); isKL {
		if own, found := kl.KeyLimit(ctx, c.key); found {
			limit = own
		}
	}
	if math.IsNaN(limit.Rate) || limit.Rate < 0 || limit.Burst < 0 {
		// A limiter may take such a limit for none at all (x/time's
		// does, for a NaN rate): it is a mistake in the limits, refused.
		return limit, false, 0, fmt.Errorf("invalid limit of key %s: rate %v, burst %d", c.digest[:8], limit.Rate, limit.Burst)
	}
	ok, retryAfter, err = h.cfg.limiter.Allow(ctx, c.digest, limit, calls)
	return limit, ok, retryAfter, err
}
