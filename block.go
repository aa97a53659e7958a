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
	var n *uint64
	err := s.blockByNumber(ctx, backend.Latest, false, func(v blockView) error {
		if v.block != nil {
			number := v.block.Number // the view is lent: keep a copy
			n = &number
		}
		return nil
	})
	switch {
	case err != nil:
		return 0, err
	case n == nil:
		return 0, ErrNoBlocks
	}
	return *n, nil
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
	var b *backend.Block
	err := s.blockByNumber(ctx, number, fullTx, func(v blockView) (err error) {
		b, err = v.copy()
		return err
	})
	return b, err
}

// GetBlockByHash returns the block with the given hash, canonical or not,
// as GetBlockByNumber does, or nil when there is none.
func (s *Service) GetBlockByHash(ctx context.Context, hash backend.Hash, fullTx bool) (*backend.Block, error) {
	var b *backend.Block
	err := s.blockByHash(ctx, hash, fullTx, func(v blockView) (err error) {
		b, err = v.copy()
		return err
	})
	return b, err
}

// blockView is a block as one answer shows it. The rules of what an answer
// shows (the pending block's nulls, hashes or bodies) are decided here, once;
// the typed methods hand out a copy of the view, the wire appends it as JSON,
// so the backend's shared block is never copied for the wire.
type blockView struct {
	block *backend.Block // the backend's, shared or lent: never modified; nil for none
	// txs decodes the bodies of a lent block that holds its transactions'
	// hashes only; nil when block holds them.
	txs     backend.TransactionDecoder
	fullTx  bool
	pending bool
}

// lender is the callback of a backend.Lender.
type lender = func(*backend.Block, backend.TransactionDecoder) error

// blockByNumber calls f with the view of the block a number or tag
// selects, borrowed from a backend that lends (backend.Lender): the view
// is valid until f returns. The tag decides: the pending block is shown as
// pending even from a backend that did not mark it.
func (s *Service) blockByNumber(ctx context.Context, number backend.BlockNumber, fullTx bool, f func(blockView) error) error {
	if number < backend.Earliest {
		return fmt.Errorf("%w %d", ErrInvalidBlockNumber, int64(number))
	}
	show := shown{fullTx: fullTx, pending: number == backend.Pending, f: f}
	if l, ok := s.backend.(backend.Lender); ok {
		return show.borrow(func(f lender) error { return l.LendBlockByNumber(ctx, number, f) })
	}
	b, err := s.backend.BlockByNumber(ctx, number)
	return show.view(b, nil, err)
}

// blockByHash is blockByNumber for a block hash.
func (s *Service) blockByHash(ctx context.Context, hash backend.Hash, fullTx bool, f func(blockView) error) error {
	show := shown{fullTx: fullTx, f: f}
	if l, ok := s.backend.(backend.Lender); ok {
		return show.borrow(func(f lender) error { return l.LendBlockByHash(ctx, hash, f) })
	}
	b, err := s.backend.BlockByHash(ctx, hash)
	return show.view(b, nil, err)
}

// shown is how a lookup's block is to be shown, and to whom.
type shown struct {
	fullTx  bool
	pending bool // selected by the pending tag
	f       func(blockView) error
}

// borrow calls f with the view of the block that lend lends. What f
// returns comes back as it is; lend's own errors are the backend's, those
// after f's success too (a store that fails to let the block go).
func (s shown) borrow(lend func(lender) error) error {
	called := false
	var ferr error
	err := lend(func(b *backend.Block, txs backend.TransactionDecoder) error {
		called = true
		ferr = s.view(b, txs, nil)
		return ferr
	})
	switch {
	case called && err != nil && ferr == nil:
		return &backendError{err: err}
	case called:
		return err
	}
	return s.view(nil, nil, err)
}

// view sorts out what a backend lookup gave (the block to show, none, or
// the error to answer), and calls f with the view of a block or none.
func (s shown) view(b *backend.Block, txs backend.TransactionDecoder, err error) error {
	switch {
	case errors.Is(err, backend.ErrNotFound), err == nil && b == nil:
		return s.f(blockView{})
	case err != nil:
		return &backendError{err: err}
	case s.fullTx && txs == nil && !b.HasTransactionBodies():
		return ErrNoTransactionBodies
	}
	return s.f(blockView{block: b, txs: txs, fullTx: s.fullTx, pending: b.Pending || s.pending})
}

// copy returns the caller's copy of the view, or nil for none.
func (v blockView) copy() (*backend.Block, error) {
	if v.block == nil {
		return nil, nil
	}
	c := v.block.Copy()
	// Without details, a lent block's hashes are its answer, as the
	// handler writes it: its transactions are not read.
	if v.txs != nil && (v.fullTx || v.block.TransactionHashes == nil) {
		c.TransactionHashes = nil
		c.Transactions = make([]*backend.Transaction, 0, len(v.block.TransactionHashes))
		txs := backend.CheckedTransactions(v.block, v.txs)
		var tx backend.Transaction
		for {
			more, err := txs.DecodeNext(&tx)
			if err != nil {
				return nil, &backendError{err: err}
			}
			if !more {
				break
			}
			c.Transactions = append(c.Transactions, tx.Copy())
		}
	}
	if v.pending {
		c.Pending = true
		c.Hash, c.Number, c.Nonce, c.LogsBloom = backend.Hash{}, 0, backend.Nonce{}, backend.Bloom{}
	}
	if !v.fullTx && c.Transactions != nil {
		c.TransactionHashes = backend.TransactionHashes(c.Transactions)
		c.Transactions = nil
	}
	return c, nil
}

// appendJSON appends the view as its answer shows it: the block, or null.
func (v blockView) appendJSON(dst []byte) ([]byte, error) {
	b := v.block
	switch {
	case b == nil:
		return append(dst, "null"...), nil
	case v.pending && !b.Pending:
		marked := *b // a shallow copy: the backend's block stays as it is
		marked.Pending = true
		b = &marked
	}
	dst, err := b.AppendLentJSON(dst, v.fullTx, v.txs)
	if err != nil {
		return dst, &backendError{err: err}
	}
	return dst, nil
}
