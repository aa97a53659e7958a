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
	return uncleCount(s.blockByHash(ctx, hash, false))
}

// GetUncleCountByBlockNumber returns the number of uncles of the block that
// number selects, or nil when there is no such block.
func (s *Service) GetUncleCountByBlockNumber(ctx context.Context, number backend.BlockNumber) (*uint64, error) {
	return uncleCount(s.blockByNumber(ctx, number, false))
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
	v, err := s.blockByNumber(ctx, number, false)
	if v.block == nil || err != nil || index >= uint64(len(v.block.Uncles)) {
		return nil, err
	}
	return s.uncleByHash(ctx, v.block.Hash, index)
}

func copyUncle(u *backend.Uncle) *backend.Uncle {
	if u == nil {
		return nil
	}
	return u.Copy()
}

func uncleCount(v blockView, err error) (*uint64, error) {
	if v.block == nil || err != nil {
		return nil, err
	}
	n := uint64(len(v.block.Uncles))
	return &n, nil
}
