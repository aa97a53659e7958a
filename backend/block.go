package backend

import (
	"github.com/holiman/uint256"
)

// Block is a block as the service answers for it: the header, the values
// derived from it, and the body.
//
// A Backend may return the same *Block to many callers at once; nobody
// modifies a Block after handing it over.
type Block struct {
	Header
	Hash Hash   // keccak256 of the header's RLP encoding
	Size uint64 // length of the block's RLP encoding
	// TotalDifficulty is the sum of the difficulty of every block from the
	// genesis to this one, or nil when it cannot be known (a block held
	// without its ancestry).
	TotalDifficulty *uint256.Int

	// Transactions holds the transactions with their bodies. A block known
	// only by its transaction hashes (a pruned or header-only store) has
	// TransactionHashes instead, and can only be served without details.
	Transactions      []*Transaction
	TransactionHashes []Hash

	Uncles      []Hash       // hashes of the uncle (ommer) headers
	Withdrawals []Withdrawal // nil before Shanghai

	// Pending marks the block being built on top of the head. It is served
	// with a null hash, nonce, logsBloom and number, and its transactions
	// with a null blockHash and blockNumber.
	Pending bool
}

// HasTransactionBodies reports whether the block's transactions can be
// served in full, which a block known only by transaction hashes cannot.
func (b *Block) HasTransactionBodies() bool {
	return b.Transactions != nil || len(b.TransactionHashes) == 0
}

// TxCount returns the number of transactions in the block.
func (b *Block) TxCount() int {
	if b.Transactions != nil {
		return len(b.Transactions)
	}
	return len(b.TransactionHashes)
}

// AppendJSON appends the block object that eth_getBlockByNumber answers:
// with transaction objects when fullTx is set and the bodies are known, and
// transaction hashes otherwise.
func (b *Block) AppendJSON(dst []byte, fullTx bool) []byte {
	return b.Header.appendObject(dst, &objectParts{
		hash:    b.Hash,
		size:    b.Size,
		td:      b.TotalDifficulty,
		pending: b.Pending,
		block:   b,
		fullTx:  fullTx && b.Transactions != nil,
	})
}

// MarshalJSON implements json.Marshaler: transaction objects when the block
// holds them, hashes when it holds only hashes. Its receiver is a value so
// that a Block marshals alike by value, by pointer and as a struct field.
func (b Block) MarshalJSON() ([]byte, error) {
	return b.AppendJSON(nil, true), nil
}

func (b *Block) appendTransactions(dst []byte, fullTx, pending bool) []byte {
	dst = append(dst, `"transactions":[`...)
	switch {
	case fullTx:
		pos := txPosition{
			blockHash:      b.Hash,
			blockNumber:    b.Number,
			blockTimestamp: b.Timestamp,
			pending:        pending,
			baseFee:        b.BaseFeePerGas,
		}
		for i, tx := range b.Transactions {
			pos.index = uint64(i)
			dst = append(tx.appendObject(dst, &pos), ',')
		}
	case b.Transactions != nil:
		for _, tx := range b.Transactions {
			dst = append(appendHashString(dst, &tx.Hash), ',')
		}
	default:
		for i := range b.TransactionHashes {
			dst = append(appendHashString(dst, &b.TransactionHashes[i]), ',')
		}
	}
	return closeArray(dst, b.TxCount())
}

func (b *Block) appendUncles(dst []byte) []byte {
	dst = append(dst, `"uncles":[`...)
	for i := range b.Uncles {
		dst = append(appendHashString(dst, &b.Uncles[i]), ',')
	}
	return closeArray(dst, len(b.Uncles))
}

func (b *Block) appendWithdrawals(dst []byte) []byte {
	dst = append(dst, `"withdrawals":[`...)
	for i := range b.Withdrawals {
		dst = append(b.Withdrawals[i].appendObject(dst), ',')
	}
	return closeArray(dst, len(b.Withdrawals))
}

// Uncle is an uncle (ommer) header as eth_getUncleByBlockHashAndIndex
// answers for it: a block object without transactions and uncles.
type Uncle struct {
	Header
	Hash Hash // keccak256 of the header's RLP encoding
	// Size is the length of the RLP encoding of a block made of the header
	// alone, with no transactions and no uncles: what go-ethereum reports.
	Size uint64
	// TotalDifficulty is the uncle's parent's total difficulty plus its own
	// difficulty, or nil when the parent's is not known.
	TotalDifficulty *uint256.Int
}

// AppendJSON appends the uncle object.
func (u *Uncle) AppendJSON(dst []byte) []byte {
	return u.Header.appendObject(dst, &objectParts{hash: u.Hash, size: u.Size, td: u.TotalDifficulty})
}

// MarshalJSON implements json.Marshaler, by value as Block's.
func (u Uncle) MarshalJSON() ([]byte, error) {
	return u.AppendJSON(nil), nil
}
