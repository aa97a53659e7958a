package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc"
)

// accessLog logs requests and counts those in flight, so that a shutdown
// can say how many it cut.
//
// What it logs of a request is what the handler made of it, as the
// handler's observer tells (see accessObserver): the handler alone knows
// where the key is, whether it was accepted, which method was called and
// whether the answer reached the client whole.
//
// A client may put its key anywhere: in a path of any shape, the query, a
// header, even the method. So nothing the request carries is logged unless
// it is known not to be a key: the path is reduced to a route shape, an
// accepted key to its id, the HTTP method and the JSON-RPC method to names
// known to the server.
type accessLog struct {
	log      *slog.Logger
	sample   uint64 // log one request line in sample
	next     http.Handler
	seen     atomic.Uint64
	inFlight atomic.Int64
}

func newAccessLog(log *slog.Logger, sample uint64, next http.Handler) *accessLog {
	return &accessLog{log: log, sample: max(sample, 1), next: next}
}

// outcomeKey is the context key of a request's *outcome.
type outcomeKey struct{}

// outcome carries the handler's account of a request from its observer to
// the access log, which put it in the request's context.
type outcome struct {
	info     blockrpc.RequestInfo
	observed bool
	loading  bool // answered while the chain loads, not by the handler
}

// accessObserver is the handler's observer that feeds the access log.
var accessObserver = &blockrpc.Observer{Request: observeRequest}

// observeRequest keeps the handler's account where the access log finds it.
// It runs on the request's goroutine, before the handler returns.
func observeRequest(ctx context.Context, info blockrpc.RequestInfo) {
	if o, ok := ctx.Value(outcomeKey{}).(*outcome); ok {
		o.info, o.observed = info, true
	}
}

// observeLoading feeds the access log with the answers given while the
// chain loads (see gate).
func observeLoading(ctx context.Context, info blockrpc.RequestInfo) {
	if o, ok := ctx.Value(outcomeKey{}).(*outcome); ok {
		o.info, o.observed, o.loading = info, true, true
	}
}

func (a *accessLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	o := new(outcome)
	r = r.WithContext(context.WithValue(r.Context(), outcomeKey{}, o))
	defer func() {
		p := recover()
		a.logRequest(r, o, rec, time.Since(start), p)
		if p == nil {
			return
		}
		if rec.wrote || p == http.ErrAbortHandler {
			// Part of an answer is out: only closing the connection
			// tells the client it is not all.
			panic(http.ErrAbortHandler)
		}
		http.Error(w, "internal server error", http.StatusInternalServerError)
	}()
	a.next.ServeHTTP(rec, r)
}

func (a *accessLog) logRequest(r *http.Request, o *outcome, rec *statusRecorder, took time.Duration, panicked any) {
	e := entryOf(o, rec, panicked)
	level := slog.LevelInfo
	// A server that loads its chain answers 503 by design, not as a fault.
	if (e.status >= 500 && !e.loading) || panicked != nil {
		level = slog.LevelError
	}
	// Sampling thins the routine lines only: an error is always logged.
	if n := a.seen.Add(1) - 1; level < slog.LevelError && n%a.sample != 0 {
		return
	}
	ctx := r.Context()
	if !a.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("method", knownMethod(r.Method)))
	if e.route != "" {
		attrs = append(attrs, slog.String("route", e.route))
	}
	if e.keyID != "" {
		attrs = append(attrs, slog.String("key_id", e.keyID))
	}
	if e.rpc != "" {
		attrs = append(attrs, slog.String("rpc", e.rpc))
	}
	attrs = append(attrs, slog.Int("status", e.status), slog.Int64("bytes", e.bytes))
	if e.loading {
		attrs = append(attrs, slog.Bool("loading", true))
	}
	if e.cut {
		// The client has not the whole answer: it left, was too slow for
		// the write timeout, or the shutdown closed its connection. The
		// bytes are those written before the cut.
		attrs = append(attrs, slog.Bool("cut", true))
	}
	attrs = append(attrs,
		slog.Duration("duration", took.Round(time.Microsecond)),
		slog.String("remote", r.RemoteAddr),
	)
	if panicked != nil && panicked != http.ErrAbortHandler {
		// The value is the program's, not the request's; the stack holds
		// addresses, not the strings behind them.
		attrs = append(attrs, slog.String("panic", fmt.Sprint(panicked)), slog.String("stack", string(debug.Stack())))
	}
	a.log.LogAttrs(ctx, level, "request", attrs...)
}

// logEntry is what a request line says of the request's outcome.
type logEntry struct {
	route, keyID, rpc string
	status            int
	bytes             int64
	cut, loading      bool
}

// entryOf takes the handler's account when it gave one, and otherwise what
// the recorder saw of the answer: a handler that is not blockrpc's, or one
// that panicked before its observer ran.
func entryOf(o *outcome, rec *statusRecorder, panicked any) logEntry {
	e := logEntry{status: rec.status, bytes: int64(rec.bytes), cut: rec.failed}
	switch {
	case o.loading:
		// The answer while the chain loads looks at neither the path nor the body.
		e = logEntry{status: o.info.Status, bytes: o.info.Written, cut: o.info.Cut, loading: true}
	case o.observed && o.info.Status != 0:
		info := o.info
		e = logEntry{route: route(info.Status), keyID: info.KeyID, rpc: rpcOf(info), status: info.Status, bytes: info.Written, cut: info.Cut}
	}
	if panicked != nil && panicked != http.ErrAbortHandler {
		e.status = http.StatusInternalServerError
	}
	return e
}

// route returns the shape of the request's path as the handler's answer
// tells it: "other" for its 404, which it answers to a path not ending in
// /v3/<key>; "" for its 405, which it answers before looking at the path;
// "rpc" for the rest.
func route(status int) string {
	switch status {
	case http.StatusNotFound:
		return "other"
	case http.StatusMethodNotAllowed:
		return ""
	}
	return "rpc"
}

// rpcOf names what was called: the method of a single call the handler
// serves, "other" for another name (any string is a method name to a
// client, so its key too), "batch of N" for a batch, and "" when the body
// was not read or held no call.
func rpcOf(info blockrpc.RequestInfo) string {
	switch {
	case info.Batch:
		return "batch of " + strconv.Itoa(info.Calls)
	case info.Calls == 0:
		return ""
	case info.Method == "":
		return "other"
	}
	return info.Method
}

// knownMethod returns the method if it is a standard one: any token is a
// method to the server, so a client could send its key there too.
func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "other"
}

type statusRecorder struct {
	http.ResponseWriter
	status, bytes int
	wrote         bool
	failed        bool // a write failed: the client has not the whole answer
}

func (r *statusRecorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	r.wrote = true
	n, err := r.ResponseWriter.Write(p)
	r.bytes += n
	r.failed = r.failed || err != nil
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
