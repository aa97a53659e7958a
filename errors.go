package blockrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Errors of the typed methods. The handler answers each with code -32000
// and its message.
var (
	// ErrNoTransactionBodies is the error for a block asked for with full
	// transactions when its backend holds only their hashes.
	ErrNoTransactionBodies = errors.New("transaction bodies are not available for this block")
	// ErrChainIDUnknown is the error of ChainID when the backend does not
	// know the chain's id.
	ErrChainIDUnknown = errors.New("the chain id is not known")
	// ErrNoBlocks is the error of BlockNumber for a chain without blocks.
	ErrNoBlocks = errors.New("the chain has no blocks")
	// ErrInvalidBlockNumber is the error for a negative block number that
	// is not a tag: a Go caller can pass one, the wire form cannot.
	ErrInvalidBlockNumber = errors.New("invalid block number")
)

// JSON-RPC error codes; the messages that go with them are go-ethereum's.
const (
	codeParseError       = -32700
	codeInvalidRequest   = -32600
	codeMethodNotFound   = -32601
	codeInvalidParams    = -32602
	codeInternalError    = -32603 // a recovered panic
	codeServerError      = -32000 // a backend failure, or a typed method's error
	codeTimeout          = -32002
	codeResponseTooLarge = -32003
	codeLimitExceeded    = -32005 // a rate or capacity limit, as hosted providers answer
)

// rpcError is an error answered with its own code and message.
type rpcError struct {
	code    int
	message string
}

// Error returns the message.
func (e *rpcError) Error() string { return e.message }

func invalidArgument(i int, err error) error {
	return &rpcError{codeInvalidParams, fmt.Sprintf("invalid argument %d: %v", i, err)}
}

// backendError is a failure of the backend. Its details go to the log, not
// to the client.
type backendError struct{ err error }

// Error returns the backend's error, for logs.
func (e *backendError) Error() string { return "backend: " + e.err.Error() }

// Unwrap returns the backend's error.
func (e *backendError) Unwrap() error { return e.err }

// answeredErrors are the typed methods' errors whose message the client
// sees as it is.
var answeredErrors = []error{ErrNoTransactionBodies, ErrChainIDUnknown, ErrNoBlocks, ErrInvalidBlockNumber}

// errorCode turns a method's error into the code and message the client
// sees. Only errors known here reach the client with their own words: any
// other error could carry details meant for the operator, so it is logged
// and answered with a generic message.
func (h *Handler) errorCode(ctx context.Context, err error, method string) (int, string) {
	var re *rpcError
	var be *backendError
	switch {
	case errors.As(err, &re):
		return re.code, re.message
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		// The request's own deadline. A deadline of the backend's (a
		// query's, an endpoint's) with the request's time left is the
		// backend's failure, and logged as one.
		return codeTimeout, "request timed out"
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		// The request's own cancellation. The backend's own (its pool
		// closed, a fetch it shares cancelled) with the request alive is
		// its failure, as for a deadline.
		return codeServerError, "request canceled"
	case errors.As(err, &be):
		h.log(ctx, slog.LevelError, "blockrpc: backend failure", "method", method, "err", be.err)
		return codeServerError, "backend failure"
	}
	for _, known := range answeredErrors {
		if errors.Is(err, known) {
			return codeServerError, known.Error()
		}
	}
	h.log(ctx, slog.LevelError, "blockrpc: method failed", "method", method, "err", err)
	return codeServerError, "internal error"
}
