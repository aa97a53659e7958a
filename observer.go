package blockrpc

import (
	"context"
	"time"
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
	// 0 when the body was not read.
	Calls int
	// Batch reports whether the body was a batch.
	Batch bool
	// Method is the method of a single call the handler serves, else "".
	Method string
	// KeyID is a short, stable id of an accepted API key: the first 4
	// bytes of its SHA-256, in hex. It is "" for a refused key.
	KeyID string
	// Written is the number of body bytes written.
	Written int64
	// Cut reports that the answer could not be written whole: the client
	// went away (a write failed, or the request was canceled) or was too
	// slow for the server's write timeout.
	Cut bool
	// Duration is how long the request took, from the handler's start.
	Duration time.Duration
}

// WithObserver sets the observer of calls and requests.
func WithObserver(o *Observer) Option { return func(c *config) { c.observer = o } }
