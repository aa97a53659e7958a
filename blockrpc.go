// Package blockrpc serves Ethereum block data over JSON-RPC 2.0 the way a
// hosted node provider does: POST {base}/v3/<API_KEY>, with the methods
// eth_getBlockByNumber and eth_getUncleByBlockHashAndIndex.
//
// A Service answers the two queries from a backend.Backend, as typed Go
// calls, and with them the companion methods clients ask for alongside:
// eth_getBlockByHash, eth_getUncleByBlockNumberAndIndex,
// eth_getUncleCountByBlockHash, eth_getUncleCountByBlockNumber,
// eth_blockNumber and eth_chainId. A Handler wraps the same Service in the
// JSON-RPC envelope over HTTP, to mount in any mux. Answers are byte-for-byte
// those of go-ethereum, except where this service's specification differs
// (see the README): every block carries its totalDifficulty, uncles are full
// block objects without transactions, and the pending block hides its hash,
// nonce, logsBloom and number.
//
// The block and uncle lookups share one convention: a lookup that finds
// nothing returns a nil result and a nil error, as its JSON-RPC answer is
// null. An error is a failure, never "not found". BlockNumber and ChainID,
// whose answers are errors when there is nothing to give, return
// ErrNoBlocks and ErrChainIDUnknown.
//
// The memstore package is a ready Backend: an in-memory chain that loads
// JSONL dumps, for serving small chains and for tests.
package blockrpc

import "github.com/blockrpc/blockrpc/backend"

// Service answers block queries from a Backend. It is safe for concurrent
// use, and holds no state of its own but its Backend: make one with
// NewService.
type Service struct {
	backend backend.Backend
}

// NewService returns a Service reading from b. It panics if b is nil, a
// mistake that would otherwise show only as every request failing.
func NewService(b backend.Backend) *Service {
	if b == nil {
		panic("blockrpc: NewService of a nil Backend")
	}
	return &Service{backend: b}
}
