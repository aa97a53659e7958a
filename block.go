package blockrpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
)

// Errors of the typed methods, answered with code -32000 and their message.
var (
	// ErrNoTransactionBodies is the error for a block asked for with full
	// transactions when its backend holds only their hashes.
	ErrNoTransactionBodies = errors.New("transaction bodies are not available for this block")
	// ErrChainIDUnknown is the error of ChainID when the backend does not
	// know the chain's id.
	ErrChainIDUnknown = errors.New("the chain id is not known")
	// ErrNoBlocks is the error of BlockNumber for a chain without blocks.
	ErrNoBlocks = errors.New("the chain has no blocks")
)

// ChainID returns the id of the chain: what eth_chainId answers.
func (s *Service) ChainID(ctx context.Context) (uint64, error) {
	id, err := s.backend.ChainID(ctx)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return 0, ErrChainIDUnknown
	case err != nil:
		return 0, &backendError{err: err}
	}
	return id, nil
}

// BlockNumber returns the number of the latest block: what eth_blockNumber
// answers.
func (s *Service) BlockNumber(ctx context.Context) (uint64, error) {
	b, err := s.blockByNumber(ctx, backend.Latest, false)
	switch {
	case err != nil:
		return 0, err
	case b == nil:
		return 0, ErrNoBlocks
	}
	return b.Number, nil
}

// GetBlockByNumber returns the block that number selects, with transaction
// objects when fullTx is set and transaction hashes otherwise, or nil when
// there is none. The result is the caller's to keep and change: it is what
// eth_getBlockByNumber answers, as a Go value.
//
// Without fullTx, the result has TransactionHashes and no Transactions. For
// the pending block, Pending is set and Hash, Number, Nonce and LogsBloom
// are zero, as the answer has them null.
func (s *Service) GetBlockByNumber(ctx context.Context, number backend.BlockNumber, fullTx bool) (*backend.Block, error) {
	if err := checkBlockNumber(number); err != nil {
		return nil, err
	}
	b, err := s.blockByNumber(ctx, number, fullTx)
	if b == nil || err != nil {
		return nil, err
	}
	return result(b, fullTx, b.Pending || number == backend.Pending), nil
}

// GetBlockByHash returns the block with the given hash, canonical or not,
// as GetBlockByNumber does, or nil when there is none.
func (s *Service) GetBlockByHash(ctx context.Context, hash backend.Hash, fullTx bool) (*backend.Block, error) {
	b, err := s.blockByHash(ctx, hash, fullTx)
	if b == nil || err != nil {
		return nil, err
	}
	return result(b, fullTx, b.Pending), nil
}

// checkBlockNumber refuses a negative number that is not a tag, which the
// wire form cannot give but a Go caller can.
func checkBlockNumber(number backend.BlockNumber) error {
	if number < backend.Earliest {
		return fmt.Errorf("invalid block number %v", number)
	}
	return nil
}

// result is the caller's copy of a block as the wire shows it.
func result(b *backend.Block, fullTx, pending bool) *backend.Block {
	c := b.Copy()
	if pending {
		c.Pending = true
		c.Hash, c.Number, c.Nonce, c.LogsBloom = backend.Hash{}, 0, backend.Nonce{}, backend.Bloom{}
	}
	if !fullTx && c.Transactions != nil {
		c.TransactionHashes = make([]backend.Hash, len(c.Transactions))
		for i, tx := range c.Transactions {
			c.TransactionHashes[i] = tx.Hash
		}
		c.Transactions = nil
	}
	return c
}

// blockByNumber returns the backend's block, shared, or nil when there is
// none; it is the lookup behind both the typed method and the handler.
func (s *Service) blockByNumber(ctx context.Context, number backend.BlockNumber, fullTx bool) (*backend.Block, error) {
	b, err := s.backend.BlockByNumber(ctx, number)
	return found(b, err, fullTx)
}

func (s *Service) blockByHash(ctx context.Context, hash backend.Hash, fullTx bool) (*backend.Block, error) {
	b, err := s.backend.BlockByHash(ctx, hash)
	return found(b, err, fullTx)
}

// found sorts out what a backend lookup gave: the block to serve, nil for
// nothing found, or the error to answer.
func found(b *backend.Block, err error, fullTx bool) (*backend.Block, error) {
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, &backendError{err: err}
	case b == nil:
		return nil, nil
	case fullTx && !b.HasTransactionBodies():
		return nil, ErrNoTransactionBodies
	}
	return b, nil
}

// serveBlockByNumber answers eth_getBlockByNumber(number, fullTx).
func (s *Service) serveBlockByNumber(ctx context.Context, params, dst []byte) ([]byte, error) {
	var number backend.BlockNumber
	var fullTx jsonBool
	if err := readParams(params, number.UnmarshalJSON, fullTx.UnmarshalJSON); err != nil {
		return dst, err
	}
	b, err := s.blockByNumber(ctx, number, bool(fullTx))
	if b != nil && number == backend.Pending && !b.Pending {
		// The tag decides: the pending block is served as pending even
		// from a backend that did not mark it.
		pending := *b
		pending.Pending = true
		b = &pending
	}
	return appendBlock(dst, b, err, bool(fullTx))
}

// serveBlockByHash answers eth_getBlockByHash(hash, fullTx).
func (s *Service) serveBlockByHash(ctx context.Context, params, dst []byte) ([]byte, error) {
	var hash hashArg
	var fullTx jsonBool
	if err := readParams(params, hash.UnmarshalJSON, fullTx.UnmarshalJSON); err != nil {
		return dst, err
	}
	b, err := s.blockByHash(ctx, backend.Hash(hash), bool(fullTx))
	return appendBlock(dst, b, err, bool(fullTx))
}

// appendBlock appends the result of a block lookup: the block, or null.
func appendBlock(dst []byte, b *backend.Block, err error, fullTx bool) ([]byte, error) {
	if b == nil || err != nil {
		return append(dst, "null"...), err
	}
	return b.AppendJSON(dst, fullTx), nil
}

// serveChainID answers eth_chainId().
func (s *Service) serveChainID(ctx context.Context, params, dst []byte) ([]byte, error) {
	if err := readParams(params); err != nil {
		return dst, err
	}
	id, err := s.ChainID(ctx)
	return appendQuantity(dst, id, err)
}

// serveBlockNumber answers eth_blockNumber().
func (s *Service) serveBlockNumber(ctx context.Context, params, dst []byte) ([]byte, error) {
	if err := readParams(params); err != nil {
		return dst, err
	}
	n, err := s.BlockNumber(ctx)
	return appendQuantity(dst, n, err)
}

// appendQuantity appends a quantity result.
func appendQuantity(dst []byte, v uint64, err error) ([]byte, error) {
	if err != nil {
		return dst, err
	}
	dst = append(dst, '"')
	return append(hexutil.AppendUint64(dst, v), '"'), nil
}
