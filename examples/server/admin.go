package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc"
	blockrpcprom "github.com/blockrpc/blockrpc/adapters/prometheus"
	"github.com/blockrpc/blockrpc/keystore"
)

// readyTimeout bounds the readiness probe's call of the backend: a probe
// that hangs tells an orchestrator less than a 503 does, and probes usually
// time out themselves after a few seconds.
const readyTimeout = 1500 * time.Millisecond

// newAdminServer returns the server of the admin listener: metrics, health
// checks and, with a key store, the dashboard of keys, kept off the
// JSON-RPC listener so that neither clients nor their keys ever reach them,
// and so that they can be firewalled apart. svc holds the Service once the
// chain is loaded; until then the server is alive and not ready. On a
// loopback listener, requests must name a loopback host (see localOnly).
func newAdminServer(log *slog.Logger, metrics *blockrpcprom.Metrics, svc *atomic.Pointer[blockrpc.Service], dash *dashboard, loopback bool) *http.Server {
	mux := http.NewServeMux()
	if dash != nil {
		dash.register(mux)
	}
	mux.Handle("GET /metrics", metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		// The process is up and serving HTTP: all liveness means. A
		// backend that is down is readiness's business; restarting the
		// process would not bring it back.
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		loaded := svc.Load()
		if loaded == nil {
			// Not logged: the load logs its progress, and a probe
			// every few seconds through an import of hours would
			// bury it.
			plain(w, http.StatusServiceUnavailable, "not ready: the chain is loading")
			return
		}
		err := ready(r.Context(), loaded)
		var keysErr error
		if dash != nil {
			keysErr = dash.keys.Health()
		}
		switch {
		case err == nil && errors.Is(keysErr, keystore.ErrStale):
			err = keysErr
		case err == nil && keysErr != nil:
			// Known keys are still served: ready, but the operator
			// should see why the keys may be behind.
			plain(w, http.StatusOK, "ok, but "+keysErr.Error())
			return
		}
		if err != nil {
			log.Warn("not ready", "err", err)
			plain(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		plain(w, http.StatusOK, "ok")
	})
	var h http.Handler = mux
	if loopback {
		h = localOnly(mux)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// localOnly refuses a request whose Host is not a loopback address or
// localhost, with 403: a web page the operator opens may point a name of
// its own at 127.0.0.1 (DNS rebinding), and its browser then reads what a
// loopback listener serves as that page's own. A request without a Host
// (HTTP/1.0) is no browser's, and health probes send such. A listener on
// another address is reached by names no list here could know.
func localOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "" && !isLoopbackHost(r.Host) {
			plain(w, http.StatusForbidden, "forbidden: the admin listener answers requests for localhost or a loopback address only")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// isLoopbackHost reports whether host, a Host header with or without a
// port, names localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ready asks the backend for the latest block, as eth_blockNumber does,
// through the Service the handler serves.
func ready(ctx context.Context, svc *blockrpc.Service) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	_, err := svc.BlockNumber(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the backend did not answer eth_blockNumber within %v", readyTimeout)
	case err != nil:
		// The backend's error is the operator's own: the admin listener
		// is theirs, and the error holds no API key.
		return fmt.Errorf("eth_blockNumber failed: %w", err)
	}
	return nil
}

func plain(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintln(w, text)
}
