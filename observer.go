package blockrpc

import (
	"context"
	"errors"
	"time"

	"github.com/blockrpc/blockrpc/backend"
)

// An Observer is told what the handler does, for metrics and access logs.
// Every field is optional; a nil Observer observes nothing. The functions
// are called on the request's goroutine, so they should be quick. Nothing
// an Observer is given contains an API key.
type Observer struct {
	// Call is called after each call is answered, in a batch too.
	Call func(ctx context.Context, c CallInfo)
	// Request is called after each request is answered or refused.
	Request func(ctx context.Context, r RequestInfo)
	// Backend is called after each call of the Backend.
	Backend func(ctx context.Context, b BackendInfo)
	// Cache is called after each lookup in the answer cache.
	Cache func(ctx context.Context, hit bool)
}

// BackendInfo describes one call of the Backend.
type BackendInfo struct {
	// Method is the Backend method called: "ChainID", "BlockByNumber",
	// "BlockByHash" or "UncleByBlockHashAndIndex". A block lent by a
	// backend.Lender is reported as BlockByNumber or BlockByHash.
	Method string
	// Duration is how long it took: for a block lent, until the backend
	// lent it, not the writing of the answer from it that follows.
	Duration time.Duration
	// Err is the error it returned; backend.ErrNotFound is not a failure.
	Err error
}

// CallInfo describes one answered call.
type CallInfo struct {
	// Method is the name of the method called when the handler serves it,
	// and "" for any other name, so that it can be a metrics label.
	Method string
	// Code is 0 for a result, and the JSON-RPC error code otherwise.
	Code int
	// Duration is how long the call took to answer, the backend included.
	Duration time.Duration
	// Bytes is the length of the call's answer.
	Bytes int
}

// RequestInfo describes one HTTP request.
type RequestInfo struct {
	// Status is the HTTP status of the answer.
	Status int
	// Calls is the number of calls in a batch, 1 for a single call, and
	// 0 when the body was not read, or was not JSON (a parse error).
	Calls int
	// Batch reports whether the body was a batch.
	Batch bool
	// Method is the method of a single call the handler serves, else "".
	Method string
	// KeyID is a short, stable id of an accepted API key: the first 4
	// bytes of its SHA-256, in hex. It is "" for a refused key.
	KeyID string
	// KeyDigest is the hex SHA-256 of an accepted API key, the id a
	// Limiter knows it by: what a store of keys finds a key's usage by.
	// It is "" for a refused key.
	KeyDigest string
	// Errors is the number of error answers: one for each call answered
	// with a JSON-RPC error, and one for a request refused whole or
	// answered with a single error (a parse error, an empty batch).
	Errors int
	// Written is the number of body bytes written.
	Written int64
	// Cut reports that the answer could not be written whole: the client
	// went away (a write failed, or the request was canceled) or was too
	// slow for the server's write timeout.
	Cut bool
	// Duration is how long the request took, from the handler's start.
	Duration time.Duration
}

// WithObserver adds an observer of calls and requests. Given more than
// once it adds each, as a server with metrics and a store of keys needs
// (adapters/prometheus and keystore each give one): each hook is called
// for every observer that has it, in the order they were given. A nil
// observer adds nothing.
func WithObserver(o *Observer) Option {
	return func(c *config) { c.observer = joinObservers(c.observer, o) }
}

// joinObservers returns an Observer calling a's hooks, then b's.
func joinObservers(a, b *Observer) *Observer {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return &Observer{
		Call:    joinHooks(a.Call, b.Call),
		Request: joinHooks(a.Request, b.Request),
		Backend: joinHooks(a.Backend, b.Backend),
		Cache:   joinHooks(a.Cache, b.Cache),
	}
}

// joinHooks keeps a hook nil when neither observer has it: the handler
// skips the work of filling in what no one reads.
func joinHooks[T any](f, g func(context.Context, T)) func(context.Context, T) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(ctx context.Context, v T) {
		f(ctx, v)
		g(ctx, v)
	}
}

// observedBackend tells an observer about each call of a Backend.
type observedBackend struct {
	backend  backend.Backend
	observer *Observer
}

func (o observedBackend) observe(ctx context.Context, method string, start time.Time, err error) {
	o.observer.Backend(ctx, BackendInfo{Method: method, Duration: time.Since(start), Err: err})
}

func (o observedBackend) ChainID(ctx context.Context) (uint64, error) {
	start := time.Now()
	id, err := o.backend.ChainID(ctx)
	o.observe(ctx, "ChainID", start, err)
	return id, err
}

func (o observedBackend) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	start := time.Now()
	b, err := o.backend.BlockByNumber(ctx, n)
	o.observe(ctx, "BlockByNumber", start, err)
	return b, err
}

func (o observedBackend) BlockByHash(ctx context.Context, hash backend.Hash) (*backend.Block, error) {
	start := time.Now()
	b, err := o.backend.BlockByHash(ctx, hash)
	o.observe(ctx, "BlockByHash", start, err)
	return b, err
}

func (o observedBackend) UncleByBlockHashAndIndex(ctx context.Context, hash backend.Hash, index uint64) (*backend.Uncle, error) {
	start := time.Now()
	u, err := o.backend.UncleByBlockHashAndIndex(ctx, hash, index)
	o.observe(ctx, "UncleByBlockHashAndIndex", start, err)
	return u, err
}

// observedLender is an observedBackend over a backend.Lender, which lends
// on: wrapped as a plain Backend, every block would be decoded whole and
// copied, where a Lender's are written from its own memory.
type observedLender struct {
	observedBackend
	lender backend.Lender
}

func (o observedLender) LendBlockByNumber(ctx context.Context, n backend.BlockNumber, f func(*backend.Block, backend.TransactionDecoder) error) error {
	return o.lend(ctx, "BlockByNumber", f, func(f lender) error { return o.lender.LendBlockByNumber(ctx, n, f) })
}

func (o observedLender) LendBlockByHash(ctx context.Context, hash backend.Hash, f func(*backend.Block, backend.TransactionDecoder) error) error {
	return o.lend(ctx, "BlockByHash", f, func(f lender) error { return o.lender.LendBlockByHash(ctx, hash, f) })
}

// lend reports the backend's part of a loan: the time until it lends the
// block, and its own error, not one of f's that it passes on, but for the
// failures of the lent transactions' decoder, which are the backend's.
func (o observedLender) lend(ctx context.Context, method string, f lender, lend func(lender) error) error {
	start := time.Now()
	var took time.Duration
	var ferr error
	called := false
	err := lend(func(b *backend.Block, txs backend.TransactionDecoder) error {
		took, called = time.Since(start), true
		ferr = f(b, txs)
		return ferr
	})
	berr := err
	switch {
	case !called:
		took = time.Since(start)
	case err == ferr:
		berr = nil
		if be := (*backendError)(nil); errors.As(ferr, &be) {
			berr = be.err
		}
	}
	o.observer.Backend(ctx, BackendInfo{Method: method, Duration: took, Err: berr})
	return err
}
