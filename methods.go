package blockrpc

import (
	"context"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
)

// A method answers one JSON-RPC method: it reads the params and appends the
// result to dst. Methods are thin adapters: the params are read here, the
// answer is the Service's.
type method func(ctx context.Context, params, dst []byte) ([]byte, error)

// methodTable returns the methods that s answers, by name, with blocks
// from the cache when it holds them (a nil cache is none).
func methodTable(s *Service, cache *answerCache) map[string]method {
	return map[string]method{
		"eth_getBlockByNumber": func(ctx context.Context, params, dst []byte) ([]byte, error) {
			var number backend.BlockNumber
			var fullTx jsonBool
			if err := readParams(params, number.UnmarshalJSON, fullTx.UnmarshalJSON); err != nil {
				return dst, err
			}
			err := s.blockByNumber(ctx, number, bool(fullTx), func(v blockView) (err error) {
				dst, err = cache.appendBlock(ctx, dst, v)
				return err
			})
			return dst, err
		},
		"eth_getBlockByHash": func(ctx context.Context, params, dst []byte) ([]byte, error) {
			var hash hashArg
			var fullTx jsonBool
			if err := readParams(params, hash.UnmarshalJSON, fullTx.UnmarshalJSON); err != nil {
				return dst, err
			}
			err := s.blockByHash(ctx, backend.Hash(hash), bool(fullTx), func(v blockView) (err error) {
				dst, err = cache.appendBlock(ctx, dst, v)
				return err
			})
			return dst, err
		},
		"eth_getUncleByBlockHashAndIndex": func(ctx context.Context, params, dst []byte) ([]byte, error) {
			var hash hashArg
			var index indexArg
			if err := readParams(params, hash.UnmarshalJSON, index.UnmarshalJSON); err != nil {
				return dst, err
			}
			u, err := s.uncleByHash(ctx, backend.Hash(hash), uint64(index))
			return appendUncle(dst, u), err
		},
		"eth_getUncleByBlockNumberAndIndex": func(ctx context.Context, params, dst []byte) ([]byte, error) {
			var number backend.BlockNumber
			var index indexArg
			if err := readParams(params, number.UnmarshalJSON, index.UnmarshalJSON); err != nil {
				return dst, err
			}
			u, err := s.uncleByNumber(ctx, number, uint64(index))
			return appendUncle(dst, u), err
		},
		"eth_getUncleCountByBlockHash": func(ctx context.Context, params, dst []byte) ([]byte, error) {
			var hash hashArg
			if err := readParams(params, hash.UnmarshalJSON); err != nil {
				return dst, err
			}
			n, err := s.GetUncleCountByBlockHash(ctx, backend.Hash(hash))
			return appendQuantity(dst, n), err
		},
		"eth_getUncleCountByBlockNumber": func(ctx context.Context, params, dst []byte) ([]byte, error) {
			var number backend.BlockNumber
			if err := readParams(params, number.UnmarshalJSON); err != nil {
				return dst, err
			}
			n, err := s.GetUncleCountByBlockNumber(ctx, number)
			return appendQuantity(dst, n), err
		},
		"eth_blockNumber": func(ctx context.Context, params, dst []byte) ([]byte, error) {
			if err := readParams(params); err != nil {
				return dst, err
			}
			n, err := s.BlockNumber(ctx)
			return appendQuantity(dst, &n), err
		},
		"eth_chainId": func(ctx context.Context, params, dst []byte) ([]byte, error) {
			if err := readParams(params); err != nil {
				return dst, err
			}
			id, err := s.ChainID(ctx)
			return appendQuantity(dst, &id), err
		},
	}
}

// unsubscribe answers *_unsubscribe(id) as go-ethereum does over HTTP,
// where no subscription can exist.
func unsubscribe(_ context.Context, params, dst []byte) ([]byte, error) {
	var id subscriptionID
	if err := readParams(params, id.UnmarshalJSON); err != nil {
		return dst, err
	}
	return dst, &rpcError{codeServerError, "subscription not found"}
}

// appendUncle appends an uncle, or null.
func appendUncle(dst []byte, u *backend.Uncle) []byte {
	if u == nil {
		return append(dst, "null"...)
	}
	return u.AppendJSON(dst)
}

// appendQuantity appends a quantity, or null.
func appendQuantity(dst []byte, v *uint64) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	return append(hexutil.AppendUint64(dst, *v), '"')
}
