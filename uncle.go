package blockrpc

import (
	"context"
	"errors"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
)

// GetUncleByBlockHashAndIndex returns the index'th uncle of the block with
// the given hash, or nil when there is no such block or uncle. The result is
// the caller's to keep and change: it is what eth_getUncleByBlockHashAndIndex
// answers, as a Go value.
func (s *Service) GetUncleByBlockHashAndIndex(ctx context.Context, hash backend.Hash, index uint64) (*backend.Uncle, error) {
	u, err := s.uncle(ctx, hash, index)
	if u == nil || err != nil {
		return nil, err
	}
	return u.Copy(), nil
}

func (s *Service) uncle(ctx context.Context, hash backend.Hash, index uint64) (*backend.Uncle, error) {
	u, err := s.backend.UncleByBlockHashAndIndex(ctx, hash, index)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, &backendError{err: err}
	}
	return u, nil
}

// serveUncle answers eth_getUncleByBlockHashAndIndex(hash, index).
func (s *Service) serveUncle(ctx context.Context, params, dst []byte) ([]byte, error) {
	var hash hashArg
	var index hexutil.Uint
	if err := readParams(params, hash.UnmarshalJSON, index.UnmarshalJSON); err != nil {
		return dst, err
	}
	u, err := s.uncle(ctx, backend.Hash(hash), uint64(index))
	return appendUncle(dst, u, err)
}

// appendUncle appends the result of an uncle lookup: the uncle, or null.
func appendUncle(dst []byte, u *backend.Uncle, err error) ([]byte, error) {
	if u == nil || err != nil {
		return append(dst, "null"...), err
	}
	return u.AppendJSON(dst), nil
}

// GetUncleByBlockNumberAndIndex returns the index'th uncle of the block that
// number selects, or nil when there is no such block or uncle, as
// GetUncleByBlockHashAndIndex does.
func (s *Service) GetUncleByBlockNumberAndIndex(ctx context.Context, number backend.BlockNumber, index uint64) (*backend.Uncle, error) {
	if err := checkBlockNumber(number); err != nil {
		return nil, err
	}
	u, err := s.uncleByNumber(ctx, number, index)
	if u == nil || err != nil {
		return nil, err
	}
	return u.Copy(), nil
}

func (s *Service) uncleByNumber(ctx context.Context, number backend.BlockNumber, index uint64) (*backend.Uncle, error) {
	b, err := s.blockByNumber(ctx, number, false)
	if b == nil || err != nil || index >= uint64(len(b.Uncles)) {
		return nil, err
	}
	return s.uncle(ctx, b.Hash, index)
}

// GetUncleCountByBlockHash returns the number of uncles of the block with
// the given hash, and false when there is no such block.
func (s *Service) GetUncleCountByBlockHash(ctx context.Context, hash backend.Hash) (uint64, bool, error) {
	return uncleCount(s.blockByHash(ctx, hash, false))
}

// GetUncleCountByBlockNumber returns the number of uncles of the block that
// number selects, and false when there is no such block.
func (s *Service) GetUncleCountByBlockNumber(ctx context.Context, number backend.BlockNumber) (uint64, bool, error) {
	if err := checkBlockNumber(number); err != nil {
		return 0, false, err
	}
	return uncleCount(s.blockByNumber(ctx, number, false))
}

func uncleCount(b *backend.Block, err error) (uint64, bool, error) {
	if b == nil || err != nil {
		return 0, false, err
	}
	return uint64(len(b.Uncles)), true, nil
}

// serveUncleByNumber answers eth_getUncleByBlockNumberAndIndex(number, index).
func (s *Service) serveUncleByNumber(ctx context.Context, params, dst []byte) ([]byte, error) {
	var number backend.BlockNumber
	var index hexutil.Uint
	if err := readParams(params, number.UnmarshalJSON, index.UnmarshalJSON); err != nil {
		return dst, err
	}
	u, err := s.uncleByNumber(ctx, number, uint64(index))
	return appendUncle(dst, u, err)
}

// serveUncleCountByHash answers eth_getUncleCountByBlockHash(hash).
func (s *Service) serveUncleCountByHash(ctx context.Context, params, dst []byte) ([]byte, error) {
	var hash hashArg
	if err := readParams(params, hash.UnmarshalJSON); err != nil {
		return dst, err
	}
	n, found, err := s.GetUncleCountByBlockHash(ctx, backend.Hash(hash))
	return appendCount(dst, n, found, err)
}

// serveUncleCountByNumber answers eth_getUncleCountByBlockNumber(number).
func (s *Service) serveUncleCountByNumber(ctx context.Context, params, dst []byte) ([]byte, error) {
	var number backend.BlockNumber
	if err := readParams(params, number.UnmarshalJSON); err != nil {
		return dst, err
	}
	n, found, err := s.GetUncleCountByBlockNumber(ctx, number)
	return appendCount(dst, n, found, err)
}

// appendCount appends a count result, or null when the block was not found.
func appendCount(dst []byte, n uint64, found bool, err error) ([]byte, error) {
	if !found || err != nil {
		return append(dst, "null"...), err
	}
	return appendQuantity(dst, n, nil)
}
