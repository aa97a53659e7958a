package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc"
	blockrpcprom "github.com/blockrpc/blockrpc/adapters/prometheus"
)

// listeners are the JSON-RPC listener and, with -admin, the admin one,
// bound and served before the chain is loaded or imported: a port in use
// is found at once, not once an import of hours has ended, and until the
// chain is ready they answer (alive, not ready, come back later) rather
// than refuse connections or leave them waiting.
type listeners struct {
	rpc, admin net.Listener // admin is nil without -admin
	servers    []*http.Server
	errc       chan error // what each server's Serve returned
	front      gate
	loaded     atomic.Pointer[blockrpc.Service] // for /readyz, once the chain is ready
}

// listen binds the listeners of -addr and -admin.
func listen(o options) (*listeners, error) {
	rpc, err := net.Listen("tcp", o.addr)
	if err != nil {
		return nil, err
	}
	l := &listeners{rpc: rpc, front: gate{loading: answerLoading}}
	if o.admin != "" {
		if l.admin, err = net.Listen("tcp", o.admin); err != nil {
			rpc.Close()
			return nil, fmt.Errorf("-admin: %w", err)
		}
	}
	return l, nil
}

// close closes listeners that are not served.
func (l *listeners) close() {
	l.rpc.Close()
	if l.admin != nil {
		l.admin.Close()
	}
}

// serve serves the listeners in the background: the JSON-RPC one with rpc,
// which serves through the gate, over TLS when tlsConfig is not nil; the
// admin one with metrics, health checks and, with a key store, the
// dashboard.
func (l *listeners) serve(log *slog.Logger, o options, tlsConfig *tls.Config, rpc http.Handler, metrics *blockrpcprom.Metrics, dash *dashboard) {
	srv := &http.Server{
		Handler:           rpc,
		ReadHeaderTimeout: min(10*time.Second, o.readTimeout),
		ReadTimeout:       o.readTimeout,
		WriteTimeout:      o.writeTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		TLSConfig:         tlsConfig,
	}
	l.servers = []*http.Server{srv}
	if l.admin != nil {
		l.servers = append(l.servers, newAdminServer(log, metrics, &l.loaded, dash, isLoopback(l.admin.Addr().String())))
	}
	l.errc = make(chan error, len(l.servers))
	go func() {
		if tlsConfig != nil {
			// ServeTLS offers HTTP/2 beside HTTP/1.1; the certificate
			// is in tlsConfig already.
			l.errc <- srv.ServeTLS(l.rpc, "", "")
		} else {
			l.errc <- srv.Serve(l.rpc)
		}
	}()
	if l.admin != nil {
		go func() { l.errc <- l.servers[1].Serve(l.admin) }()
	}
}

// open serves the chain: h on the JSON-RPC listener, and svc to /readyz.
func (l *listeners) open(h http.Handler, svc *blockrpc.Service) {
	l.front.open(h)
	l.loaded.Store(svc)
}

// stop closes the servers at once, connections and all, and waits for
// them: what they served before open was only the answer that the chain
// loads.
func (l *listeners) stop() {
	for _, s := range l.servers {
		s.Close()
	}
	for range l.servers {
		<-l.errc
	}
}

// gate serves through the handler it is opened to, and until then answers
// with loading, telling observe (when not nil) of each such answer as the
// handler tells its observer of its own: the access log and the metrics
// count the answers given while the chain loads.
type gate struct {
	next    atomic.Pointer[http.Handler]
	loading func(http.ResponseWriter, *http.Request) (written int64, err error)
	observe func(context.Context, blockrpc.RequestInfo)
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.next.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	start := time.Now()
	// As the handler: a client gone before the answer began has not got
	// it, and a write that fails is seen only once the answer is flushed.
	left := errors.Is(r.Context().Err(), context.Canceled)
	n, err := g.loading(w, r)
	if err == nil && g.observe != nil {
		if ferr := http.NewResponseController(w).Flush(); !errors.Is(ferr, http.ErrNotSupported) {
			err = ferr
		}
	}
	if g.observe != nil {
		g.observe(r.Context(), blockrpc.RequestInfo{
			Status:   http.StatusServiceUnavailable,
			Errors:   1,
			Written:  n,
			Cut:      err != nil || left,
			Duration: time.Since(start),
		})
	}
}

// open makes g serve through h from now on.
func (g *gate) open(h http.Handler) { g.next.Store(&h) }

// loadingRetryAfter is the Retry-After of an answer while the chain loads,
// in seconds.
const loadingRetryAfter = "10"

// loadingAnswer is the body of answerLoading.
const loadingAnswer = `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"the server is loading its chain: retry later"}}` + "\n"

// answerLoading is the JSON-RPC listener's answer while the chain loads,
// whatever the request, since none can be served yet: 503 with a JSON-RPC
// error, as the handler answers when its backend cannot.
func answerLoading(w http.ResponseWriter, _ *http.Request) (int64, error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Retry-After", loadingRetryAfter)
	// Given, as the handler gives it: the gate flushes the answer, and
	// net/http would send it chunked.
	h.Set("Content-Length", strconv.Itoa(len(loadingAnswer)))
	w.WriteHeader(http.StatusServiceUnavailable)
	n, err := io.WriteString(w, loadingAnswer)
	return int64(n), err
}
