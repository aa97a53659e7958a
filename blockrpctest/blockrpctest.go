// Package blockrpctest runs a blockrpc server for the tests of services
// that call a hosted node provider, in the spirit of net/http/httptest:
//
//	srv := blockrpctest.NewServer(t, store)
//	client := myservice.New(srv.URL) // http://127.0.0.1:port/v3/<key>
//
// The server can also misbehave the way real providers do, so that a
// service's retry logic meets every failure in a test: latency, JSON-RPC
// -32000 errors, HTTP 429 with Retry-After, and connections dropped without
// an answer. Which request meets which fault is drawn from a seeded random
// source: a test that sends its requests one after another sees the same
// faults in every run. A request meets one fault at most: the shares are
// laid end to end (dropped, then rate limited, then server errors), so
// that shares adding up to 1 or more leave no request answered, and the
// last share is cut to what the others leave.
package blockrpctest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
)

// Server is a blockrpc server on a loopback port, closed when the test
// that made it ends.
type Server struct {
	// URL is the endpoint a client is given: http://127.0.0.1:port/v3/<Key>.
	URL string
	// Key is the API key the server accepts, generated for the server.
	Key string
	// Server is the underlying test server; its URL has no path.
	Server *httptest.Server

	faults faults
	mu     sync.Mutex
	rng    *mrand.Rand
	stats  Stats
}

// Stats counts what the server did with the requests it received.
type Stats struct {
	Requests     int // every request, faulty or not
	Delayed      int // requests held back by WithLatency
	ServerErrors int // answered -32000 by WithServerErrors
	RateLimited  int // answered 429 by WithRateLimited
	Dropped      int // connections closed by WithDroppedConnections
}

// Option sets up a Server.
type Option func(*config)

type config struct {
	faults   faults
	seed     uint64
	key      string
	handlers []blockrpc.Option
}

type faults struct {
	latency    time.Duration
	errShare   float64
	limitShare float64
	retryAfter time.Duration
	dropShare  float64
}

// WithLatency delays every answer by d, as a distant provider does.
func WithLatency(d time.Duration) Option { return func(c *config) { c.faults.latency = d } }

// WithServerErrors answers a share (0 to 1) of the requests with the
// JSON-RPC error -32000 and HTTP 200, as a provider whose node failed
// does: one error per call of a batch, each with its call's id.
func WithServerErrors(share float64) Option { return func(c *config) { c.faults.errShare = share } }

// WithRateLimited answers a share (0 to 1) of the requests with HTTP 429,
// a Retry-After header of retryAfter (in whole seconds, at least 1) and
// the JSON-RPC error -32005 that blockrpc's own limiter answers.
func WithRateLimited(share float64, retryAfter time.Duration) Option {
	return func(c *config) { c.faults.limitShare, c.faults.retryAfter = share, retryAfter }
}

// WithDroppedConnections closes the connection of a share (0 to 1) of the
// requests without an answer: the client sees an EOF or a reset.
func WithDroppedConnections(share float64) Option {
	return func(c *config) { c.faults.dropShare = share }
}

// WithSeed seeds the draw of which request meets which fault; the default
// is 1.
func WithSeed(seed uint64) Option { return func(c *config) { c.seed = seed } }

// WithKey sets the API key instead of a generated one.
func WithKey(key string) Option { return func(c *config) { c.key = key } }

// WithHandlerOptions passes options to blockrpc.NewHandler, after the key
// set: WithGzip, WithBatchLimit, WithLimiter, ... A WithKeys among them
// replaces the server's key set, and Server.URL's key is then refused
// unless the new set holds it.
func WithHandlerOptions(opts ...blockrpc.Option) Option {
	return func(c *config) { c.handlers = append(c.handlers, opts...) }
}

// NewServer starts a server of b on a loopback port, closed by t.Cleanup.
func NewServer(t testing.TB, b backend.Backend, opts ...Option) *Server {
	t.Helper()
	s := StartServer(b, opts...)
	t.Cleanup(s.Close)
	return s
}

// StartServer starts a server as NewServer does, for code without a
// testing.TB (an Example, a TestMain): the caller closes it.
func StartServer(b backend.Backend, opts ...Option) *Server {
	cfg := config{seed: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.key == "" {
		cfg.key = newKey()
	}
	h := blockrpc.NewHandler(blockrpc.NewService(b),
		append([]blockrpc.Option{blockrpc.WithKeys(blockrpc.NewKeySet(cfg.key))}, cfg.handlers...)...)
	s := &Server{Key: cfg.key, faults: cfg.faults, rng: mrand.New(mrand.NewPCG(cfg.seed, 0))}
	s.Server = httptest.NewServer(s.wrap(h))
	s.URL = s.Server.URL + "/v3/" + url.PathEscape(cfg.key)
	return s
}

// Close shuts the server down, waiting for the requests being served.
// A server from NewServer closes when its test ends.
func (s *Server) Close() { s.Server.Close() }

// Stats returns the counts of what the server did so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func newKey() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails on supported platforms
	return hex.EncodeToString(b)
}

// fault is what happens to one request.
type fault int

const (
	none fault = iota
	drop
	rateLimit
	serverError
)

// draw picks the fault of the next request. One number is drawn per
// request, so that the sequence depends only on the seed and the order of
// the requests.
func (s *Server) draw() (fault, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	if s.faults.latency > 0 {
		s.stats.Delayed++
	}
	u := s.rng.Float64()
	f := s.faults
	switch {
	case u < f.dropShare:
		return drop, f.latency
	case u < f.dropShare+f.limitShare:
		return rateLimit, f.latency
	case u < f.dropShare+f.limitShare+f.errShare:
		return serverError, f.latency
	}
	return none, f.latency
}

// count counts a fault once it is carried out: a client that gave up
// during the latency met none.
func (s *Server) count(f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f {
	case drop:
		s.stats.Dropped++
	case rateLimit:
		s.stats.RateLimited++
	case serverError:
		s.stats.ServerErrors++
	}
}

func (s *Server) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, delay := s.draw()
		if delay > 0 {
			// net/http notices a client that goes away only once the
			// body is read: read it first, or the delay is slept out
			// for a client long gone, and Close waits for it.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		s.count(f)
		switch f {
		case drop:
			dropConnection(w)
		case rateLimit:
			secs := max(int64((s.faults.retryAfter+time.Second-1)/time.Second), 1)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			writeErrors(w, http.StatusTooManyRequests, r, -32005, "request rate exceeded")
		case serverError:
			writeErrors(w, http.StatusOK, r, -32000, "backend failure")
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// dropConnection closes the connection under the request without writing
// a byte, as a provider's load balancer that gives up does.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2 cannot hijack; aborting the handler resets the stream.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// writeErrors answers each call of the request with the error, echoing its
// id: one object for a single call, an array for a batch.
func writeErrors(w http.ResponseWriter, status int, r *http.Request, code int, message string) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	type answer struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}
	answerTo := func(id json.RawMessage) answer {
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		return answer{JSONRPC: "2.0", ID: id, Error: rpcError{code, message}}
	}
	var out any
	trimmed := bytes.TrimSpace(body)
	var batch []struct{ ID json.RawMessage }
	var single struct{ ID json.RawMessage }
	if len(trimmed) > 0 && trimmed[0] == '[' && json.Unmarshal(trimmed, &batch) == nil && len(batch) > 0 {
		answers := make([]answer, len(batch))
		for i, c := range batch {
			answers[i] = answerTo(c.ID)
		}
		out = answers
	} else {
		json.Unmarshal(trimmed, &single) // an unreadable body gets a null id
		out = answerTo(single.ID)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(out)
}
