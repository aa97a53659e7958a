package blockrpc

import (
	"context"
	"errors"

	"github.com/blockrpc/blockrpc/backend"
)

// GetUncleByBlockHashAndIndex returns the index'th uncle of the block with
// the given hash, or nil when there is no such block or uncle. The result is
// the caller's to keep and change: it is what eth_getUncleByBlockHashAndIndex
// answers, as a Go value.
func (s *Service) GetUncleByBlockHashAndIndex(ctx context.Context, hash backend.Hash, index uint64) (*backend.Uncle, error) {
	u, err := s.uncleByHash(ctx, hash, index)
	return copyUncle(u), err
}

// GetUncleByBlockNumberAndIndex returns the index'th uncle of the block that
// number selects, or nil when there is no such block or uncle, as
// GetUncleByBlockHashAndIndex does.
func (s *Service) GetUncleByBlockNumberAndIndex(ctx context.Context, number backend.BlockNumber, index uint64) (*backend.Uncle, error) {
	u, err := s.uncleByNumber(ctx, number, index)
	return copyUncle(u), err
}

// GetUncleCountByBlockHash returns the number of uncles of the block with
// the given hash, or nil when there is no such block.
func (s *Service) GetUncleCountByBlockHash(ctx context.Context, hash backend.Hash) (*uint64, error) {
	var n *uint64
	err := s.blockByHash(ctx, hash, false, func(v blockView) error {
		n = uncleCount(v)
		return nil
	})
	return n, err
}

// GetUncleCountByBlockNumber returns the number of uncles of the block that
// number selects, or nil when there is no such block.
func (s *Service) GetUncleCountByBlockNumber(ctx context.Context, number backend.BlockNumber) (*uint64, error) {
	var n *uint64
	err := s.blockByNumber(ctx, number, false, func(v blockView) error {
		n = uncleCount(v)
		return nil
	})
	return n, err
}

// uncleByHash returns the backend's uncle, shared, or nil for none.
func (s *Service) uncleByHash(ctx context.Context, hash backend.Hash, index uint64) (*backend.Uncle, error) {
	u, err := s.backend.UncleByBlockHashAndIndex(ctx, hash, index)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, &backendError{err: err}
	}
	return u, nil
}

func (s *Service) uncleByNumber(ctx context.Context, number backend.BlockNumber, index uint64) (*backend.Uncle, error) {
	var hash *backend.Hash
	err := s.blockByNumber(ctx, number, false, func(v blockView) error {
		if v.block != nil && index < uint64(len(v.block.Uncles)) {
			h := v.block.Hash // the view is lent: keep a copy
			hash = &h
		}
		return nil
	})
	if hash == nil || err != nil {
		return nil, err
	}
	return s.uncleByHash(ctx, *hash, index)
}

func copyUncle(u *backend.Uncle) *backend.Uncle {
	if u == nil {
		return nil
	}
	return u.Copy()
}

// uncleCount returns the number of uncles of a view's block, or nil.
func uncleCount(v blockView) *uint64 {
	if v.block == nil {
		return nil
	}
	n := uint64(len(v.block.Uncles))
	return &n
}
