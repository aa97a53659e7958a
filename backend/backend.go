// Package backend defines the chain data that blockrpc serves and the
// Backend interface through which it reads it.
//
// The types (Block, Uncle, Header, Transaction, ...) are the JSON-RPC block
// objects as Go values: they encode to exactly the bytes go-ethereum writes
// for the same block, and decode from them. Decoding checks the form of
// each value and that required members are there; Transaction.Validate
// holds the rules a transaction's type sets, for values made in Go too.
// Both report a *FieldError. The functions named after derived values
// (HeaderHash, TransactionsRoot, BlockSize, ...) compute what a block's
// contents determine, for backends that need to fill in or check those
// values.
//
// The source is organised by type: each type's file holds all of it, its
// JSON encoding and decoding, its RLP encoding, its validation, its copy
// and the values derived from it (block.go, uncle.go, header.go,
// transaction.go, accesslist.go, authorization.go, withdrawal.go,
// blocknumber.go, bytes.go). What the types share sits apart: the RLP
// writer and keccak (rlp.go), the trie root (trie.go), the JSON member
// writers (members.go) and the errors (errors.go).
package backend

import (
	"context"
	"errors"
)

// ErrNotFound is what a Backend returns when nothing matches a request. The
// service answers it with a null result, and any other error with a server
// error, so a Backend must keep the two apart.
var ErrNotFound = errors.New("not found")

// Backend is a source of chain data. Implementations must be safe for
// concurrent use, honour the context, and never modify a Block or Uncle
// after returning it (callers read them without copying).
type Backend interface {
	// ChainID returns the id of the chain (EIP-155), or ErrNotFound when it
	// is not known.
	ChainID(ctx context.Context) (uint64, error)

	// BlockByNumber returns the canonical block with the given number, or
	// the block a tag names: Latest (the highest canonical block), Earliest
	// (the lowest), Safe, Finalized and Pending (each nil when not set,
	// which is reported as ErrNotFound). The pending block has Pending set.
	BlockByNumber(ctx context.Context, number BlockNumber) (*Block, error)

	// BlockByHash returns the block with the given hash, canonical or not.
	// The pending block is not found by hash.
	BlockByHash(ctx context.Context, hash Hash) (*Block, error)

	// UncleByBlockHashAndIndex returns the index'th uncle of the block with
	// the given hash, canonical or not. An unknown block and an index past
	// the block's uncles are both ErrNotFound.
	UncleByBlockHashAndIndex(ctx context.Context, hash Hash, index uint64) (*Uncle, error)
}
