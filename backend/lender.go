package backend

import "context"

// A Lender is a Backend that keeps its blocks encoded and can lend one
// rather than hand out a decoded copy of its own: the lent block holds
// everything but its transactions' bodies, which are decoded one at a time
// into the same memory as they are written (Block.AppendLentJSON). Serving
// a lent block allocates next to nothing, and a store keeps its blocks in
// about the size of their encoding. blockrpc's handler borrows from a
// Backend that is a Lender; everything else reads through Backend.
//
// A type that wraps a Lender to change what it serves (to count, delay or
// fail lookups) should embed the Backend interface, not the Lender's own
// type: embedding the type passes its Lend methods on, and blockrpc would
// borrow past the methods the wrapper changes.
type Lender interface {
	// LendBlockByNumber calls f with the block that BlockByNumber would
	// return, and returns what f returns; when BlockByNumber would fail,
	// it returns that error without calling f. A block that holds its
	// Transactions itself comes with a nil txs. Otherwise txs decodes its
	// transactions' bodies, and the block has no Transactions but may
	// have their TransactionHashes, which it then serves without bodies
	// faster. Both are lent: valid until f returns, and read by f alone.
	LendBlockByNumber(ctx context.Context, number BlockNumber, f func(b *Block, txs TransactionDecoder) error) error
	// LendBlockByHash is LendBlockByNumber for BlockByHash.
	LendBlockByHash(ctx context.Context, hash Hash, f func(b *Block, txs TransactionDecoder) error) error
}

// A TransactionDecoder decodes a lent block's transactions, in order, one
// at a time.
type TransactionDecoder interface {
	// DecodeNext decodes the next transaction into tx, overwriting all
	// of it; what tx then refers to is valid until the next call. It
	// reports false after the last transaction, and an error for one
	// that does not decode.
	DecodeNext(tx *Transaction) (bool, error)
}
