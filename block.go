package blockrpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/blockrpc/blockrpc/backend"
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
	v, err := s.blockByNumber(ctx, backend.Latest, false)
	switch {
	case err != nil:
		return 0, err
	case v.block == nil:
		return 0, ErrNoBlocks
	}
	return v.block.Number, nil
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
	v, err := s.blockByNumber(ctx, number, fullTx)
	return v.copy(), err
}

// GetBlockByHash returns the block with the given hash, canonical or not,
// as GetBlockByNumber does, or nil when there is none.
func (s *Service) GetBlockByHash(ctx context.Context, hash backend.Hash, fullTx bool) (*backend.Block, error) {
	v, err := s.blockByHash(ctx, hash, fullTx)
	return v.copy(), err
}

// blockView is a block as one answer shows it. The rules of what an answer
// shows (the pending block's nulls, hashes or bodies) are decided here, once;
// the typed methods hand out a copy of the view, the wire appends it as JSON,
// so the backend's shared block is never copied for the wire.
type blockView struct {
	block   *backend.Block // the backend's, shared: never modified; nil for none
	fullTx  bool
	pending bool
}

// blockByNumber looks a block up by number or tag. The tag decides: the
// pending block is shown as pending even from a backend that did not mark
// it.
func (s *Service) blockByNumber(ctx context.Context, number backend.BlockNumber, fullTx bool) (blockView, error) {
	if number < backend.Earliest {
		return blockView{}, fmt.Errorf("%w %d", ErrInvalidBlockNumber, int64(number))
	}
	b, err := s.backend.BlockByNumber(ctx, number)
	v, err := view(b, err, fullTx)
	v.pending = v.pending || (v.block != nil && number == backend.Pending)
	return v, err
}

func (s *Service) blockByHash(ctx context.Context, hash backend.Hash, fullTx bool) (blockView, error) {
	b, err := s.backend.BlockByHash(ctx, hash)
	return view(b, err, fullTx)
}

// view sorts out what a backend lookup gave: the block to show, none, or
// the error to answer.
func view(b *backend.Block, err error, fullTx bool) (blockView, error) {
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return blockView{}, nil
	case err != nil:
		return blockView{}, &backendError{err: err}
	case b == nil:
		return blockView{}, nil
	case fullTx && !b.HasTransactionBodies():
		return blockView{}, ErrNoTransactionBodies
	}
	return blockView{block: b, fullTx: fullTx, pending: b.Pending}, nil
}

// copy returns the caller's copy of the view, or nil for none.
func (v blockView) copy() *backend.Block {
	if v.block == nil {
		return nil
	}
	c := v.block.Copy()
	if v.pending {
		c.Pending = true
		c.Hash, c.Number, c.Nonce, c.LogsBloom = backend.Hash{}, 0, backend.Nonce{}, backend.Bloom{}
	}
	if !v.fullTx && c.Transactions != nil {
		c.TransactionHashes = make([]backend.Hash, len(c.Transactions))
		for i, tx := range c.Transactions {
			c.TransactionHashes[i] = tx.Hash
		}
		c.Transactions = nil
	}
	return c
}

// appendJSON appends the view as its answer shows it: the block, or null.
func (v blockView) appendJSON(dst []byte) []byte {
	b := v.block
	switch {
	case b == nil:
		return append(dst, "null"...)
	case v.pending && !b.Pending:
		marked := *b // a shallow copy: the backend's block stays as it is
		marked.Pending = true
		b = &marked
	}
	return b.AppendJSON(dst, v.fullTx)
}
