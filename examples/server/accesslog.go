package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc"
)

// accessLog logs requests and counts those in flight, so that a shutdown
// can say how many it cut.
//
// A client may put its key anywhere: in a path of any shape, the query, a
// header, even the method. So nothing the request carries is logged unless
// it is known not to be a key: the path is reduced to a route shape, an
// accepted key to a key id, the method to a known name.
type accessLog struct {
	log      *slog.Logger
	keys     *blockrpc.KeySet
	sample   uint64 // log one request line in sample
	next     http.Handler
	seen     atomic.Uint64
	inFlight atomic.Int64
}

func newAccessLog(log *slog.Logger, keys *blockrpc.KeySet, sample uint64, next http.Handler) *accessLog {
	return &accessLog{log: log, keys: keys, sample: max(sample, 1), next: next}
}

func (a *accessLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		p := recover()
		if p != nil && p != http.ErrAbortHandler {
			rec.status = http.StatusInternalServerError
		}
		a.logRequest(r, rec, time.Since(start), p)
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

func (a *accessLog) logRequest(r *http.Request, rec *statusRecorder, took time.Duration, panicked any) {
	level := slog.LevelInfo
	if rec.status >= 500 || panicked != nil {
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
	route, id := a.route(ctx, r.URL.Path)
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.String("method", knownMethod(r.Method)), slog.String("route", route))
	if id != "" {
		attrs = append(attrs, slog.String("key_id", id))
	}
	attrs = append(attrs,
		slog.Int("status", rec.status),
		slog.Int("bytes", rec.bytes),
		slog.Duration("duration", took.Round(time.Microsecond)),
		slog.String("remote", r.RemoteAddr),
	)
	if rec.failed {
		// A client that left, or a connection the shutdown cut: the
		// status and bytes are what was sent, not what arrived.
		attrs = append(attrs, slog.Bool("incomplete", true))
	}
	if panicked != nil && panicked != http.ErrAbortHandler {
		// The value is the program's, not the request's; the stack holds
		// addresses, not the strings behind them.
		attrs = append(attrs, slog.String("panic", fmt.Sprint(panicked)), slog.String("stack", string(debug.Stack())))
	}
	a.log.LogAttrs(ctx, level, "request", attrs...)
}

// route returns the shape of a path, "rpc" for the paths the handler
// serves and "other" for the rest, and, for a key the server accepts, its
// key id. A key it refuses gets no id: it may be a key of another service
// sent here by mistake, and its id would let a reader of the log test
// guesses of it.
func (a *accessLog) route(ctx context.Context, path string) (route, id string) {
	key, ok := apiKey(path)
	if !ok {
		return "other", ""
	}
	if valid, err := a.keys.ValidKey(ctx, key); err == nil && valid {
		id = keyID(key)
	}
	return "rpc", id
}

// apiKey is the library's rule for where the key is: the last segment of a
// path whose previous segment is "v3". A path ending in /v3 has no key.
func apiKey(path string) (string, bool) {
	i := strings.LastIndexByte(path, '/')
	dir, last := path[:max(i, 0)], path[i+1:]
	switch {
	case dir == "v3" || strings.HasSuffix(dir, "/v3"):
		return last, true
	case last == "v3":
		return "", true
	}
	return "", false
}

// keyID names a key in the log without revealing it: 4 bytes of its
// SHA-256 tell an operator's keys apart. Like any digest of a key, it lets
// a reader of the log test guesses of a weak key; a generated key is 128
// random bits.
func keyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
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
