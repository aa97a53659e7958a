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
	var hash backend.Hash
	var index hexutil.Uint
	if err := readParams(params, hash.UnmarshalJSON, index.UnmarshalJSON); err != nil {
		return dst, err
	}
	u, err := s.uncle(ctx, hash, uint64(index))
	if u == nil || err != nil {
		return append(dst, "null"...), err
	}
	return u.AppendJSON(dst), nil
}
