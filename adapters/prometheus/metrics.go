// Package blockrpcprom turns what a blockrpc handler observes into
// Prometheus metrics.
//
// It lives in a module of its own so that the blockrpc library itself
// requires nothing of Prometheus. Every label value comes from a small,
// fixed set (method names the handler serves, JSON-RPC error codes, HTTP
// statuses, Backend method names): no API key, key id or client-chosen
// string ever becomes a label, so the series stay few and reveal nothing.
//
// The metrics, all prefixed blockrpc_:
//
//	calls_total{method,code}                   calls answered; code is "0" for a result, else the JSON-RPC error code
//	call_duration_seconds{method}              how long calls took, the backend included (histogram)
//	call_answer_bytes{method}                  the size of each call's answer (histogram; _sum counts every byte)
//	http_requests_total{status}                HTTP requests by status
//	http_request_duration_seconds              how long requests took (histogram)
//	http_response_bytes_total                  body bytes written, after compression
//	http_responses_cut_total                   answers the client did not get whole
//	batch_calls                                the number of calls in each batch (histogram)
//	backend_call_duration_seconds{method}      how long Backend calls took (histogram)
//	backend_errors_total{method}               Backend calls that failed (not-found, canceled and timed-out requests are not failures)
//	answer_cache_hits_total                    answer-cache lookups that found the answer
//	answer_cache_misses_total                  answer-cache lookups that did not
//
// The cache hit ratio is then
//
//	rate(blockrpc_answer_cache_hits_total[5m])
//	  / (rate(blockrpc_answer_cache_hits_total[5m]) + rate(blockrpc_answer_cache_misses_total[5m]))
package blockrpcprom

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// OtherMethod is the method label of calls of a method the handler does not
// serve: their names are the client's to choose, a key among them.
const OtherMethod = "other"

// Answers take microseconds from memory and seconds from a slow backend, so
// the buckets span both; prometheus.DefBuckets starts at 5 ms, where every
// cached answer would fall into the first bucket.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// From an eth_blockNumber answer (tens of bytes) to a full block with
// hundreds of transactions (megabytes).
var sizeBuckets = prometheus.ExponentialBuckets(64, 4, 10)

// Up to the library's default batch limit of 1,000 calls.
var batchBuckets = prometheus.ExponentialBuckets(1, 2, 11)

// Metrics holds the Prometheus collectors fed by a handler's Observer.
// It is safe for concurrent use, and one Metrics may observe several
// handlers, whose counts then add up.
type Metrics struct {
	calls           *prometheus.CounterVec
	callDuration    *prometheus.HistogramVec
	answerBytes     *prometheus.HistogramVec
	requests        *prometheus.CounterVec
	requestDuration prometheus.Histogram
	responseBytes   prometheus.Counter
	cut             prometheus.Counter
	batchCalls      prometheus.Histogram
	backendDuration *prometheus.HistogramVec
	backendErrors   *prometheus.CounterVec
	cacheHits       prometheus.Counter
	cacheMisses     prometheus.Counter

	gatherer prometheus.Gatherer
}

// New creates the collectors and registers them with reg. With a nil reg it
// uses a registry of its own, which also collects the Go runtime's and the
// process's metrics, and which Handler serves.
//
// Registering twice with the same registry fails, as prometheus does for
// any duplicate collector; a New that fails leaves nothing registered.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		own := prometheus.NewRegistry()
		if err := own.Register(prometheus.NewGoCollector()); err != nil {
			return nil, err
		}
		if err := own.Register(prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{})); err != nil {
			return nil, err
		}
		reg = own
	}
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "blockrpc_calls_total",
			Help: `JSON-RPC calls answered, batched ones included, by method ("other" for a method not served) and code ("0" for a result, else the JSON-RPC error code).`,
		}, []string{"method", "code"}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "blockrpc_call_duration_seconds",
			Help:    "How long JSON-RPC calls took to answer, the backend included.",
			Buckets: latencyBuckets,
		}, []string{"method"}),
		answerBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "blockrpc_call_answer_bytes",
			Help:    "The size of each JSON-RPC call's answer, before compression.",
			Buckets: sizeBuckets,
		}, []string{"method"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "blockrpc_http_requests_total",
			Help: "HTTP requests answered or refused, by status.",
		}, []string{"status"}),
		requestDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "blockrpc_http_request_duration_seconds",
			Help:    "How long HTTP requests took, from the handler's start to its last write.",
			Buckets: latencyBuckets,
		}),
		responseBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "blockrpc_http_response_bytes_total",
			Help: "HTTP body bytes written, after compression.",
		}),
		cut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "blockrpc_http_responses_cut_total",
			Help: "Answers the client did not get whole: it went away, or was too slow for the write timeout.",
		}),
		batchCalls: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "blockrpc_batch_calls",
			Help:    "The number of calls in each batch.",
			Buckets: batchBuckets,
		}),
		backendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "blockrpc_backend_call_duration_seconds",
			Help:    "How long calls of the Backend took, by Backend method.",
			Buckets: latencyBuckets,
		}, []string{"method"}),
		backendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "blockrpc_backend_errors_total",
			Help: "Calls of the Backend that failed, by Backend method; not found is not a failure, nor is a call the client canceled or that ran out of the request's time.",
		}, []string{"method"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "blockrpc_answer_cache_hits_total",
			Help: "Lookups in the answer cache that found the rendered answer.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "blockrpc_answer_cache_misses_total",
			Help: "Lookups in the answer cache that had to render the answer.",
		}),
	}
	collectors := []prometheus.Collector{
		m.calls, m.callDuration, m.answerBytes,
		m.requests, m.requestDuration, m.responseBytes, m.cut, m.batchCalls,
		m.backendDuration, m.backendErrors,
		m.cacheHits, m.cacheMisses,
	}
	for i, c := range collectors {
		if err := reg.Register(c); err != nil {
			// None left behind: they would make the next New fail too,
			// and export metrics nothing updates.
			for _, registered := range collectors[:i] {
				reg.Unregister(registered)
			}
			return nil, err
		}
	}
	m.gatherer = prometheus.DefaultGatherer
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	}
	return m, nil
}

// Observer returns the observer to give the handler with
// blockrpc.WithObserver. Its functions only count, so they add little to a
// request.
func (m *Metrics) Observer() *blockrpc.Observer {
	return &blockrpc.Observer{
		Call:    m.observeCall,
		Request: m.observeRequest,
		Backend: m.observeBackend,
		Cache:   m.observeCache,
	}
}

// Handler serves the metrics in Prometheus's text format, for a /metrics
// route. It serves the registry New was given when that registry is also a
// prometheus.Gatherer (a *prometheus.Registry is), New's own registry for a
// nil one, and prometheus.DefaultGatherer otherwise.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}

func (m *Metrics) observeCall(_ context.Context, c blockrpc.CallInfo) {
	method := c.Method
	if method == "" {
		method = OtherMethod
	}
	m.calls.WithLabelValues(method, strconv.Itoa(c.Code)).Inc()
	m.callDuration.WithLabelValues(method).Observe(c.Duration.Seconds())
	m.answerBytes.WithLabelValues(method).Observe(float64(c.Bytes))
}

func (m *Metrics) observeRequest(_ context.Context, r blockrpc.RequestInfo) {
	m.requests.WithLabelValues(strconv.Itoa(r.Status)).Inc()
	m.requestDuration.Observe(r.Duration.Seconds())
	m.responseBytes.Add(float64(r.Written))
	if r.Cut {
		m.cut.Inc()
	}
	if r.Batch {
		m.batchCalls.Observe(float64(r.Calls))
	}
}

func (m *Metrics) observeBackend(ctx context.Context, b blockrpc.BackendInfo) {
	m.backendDuration.WithLabelValues(b.Method).Observe(b.Duration.Seconds())
	// A block that does not exist is an answer (null), and a client that
	// went away, or the request's own deadline, says nothing of the
	// backend's health: counting either would page someone for nothing.
	// A cancellation or a deadline of the backend's own, with the request
	// alive, is its failure, as the handler tells it.
	switch {
	case b.Err == nil, errors.Is(b.Err, backend.ErrNotFound):
	case (errors.Is(b.Err, context.Canceled) || errors.Is(b.Err, context.DeadlineExceeded)) && ctx.Err() != nil:
	default:
		m.backendErrors.WithLabelValues(b.Method).Inc()
	}
}

func (m *Metrics) observeCache(_ context.Context, hit bool) {
	if hit {
		m.cacheHits.Inc()
	} else {
		m.cacheMisses.Inc()
	}
}
