package backend

import (
	"golang.org/x/crypto/sha3"
)

// The functions below compute the values a block's contents determine. A
// Backend that keeps blocks its own way uses them to fill in or check what
// it stores; memstore does both on every block it is given.

func keccak(data []byte) Hash {
	var h Hash
	d := sha3.NewLegacyKeccak256()
	d.Write(data)
	d.Sum(h[:0])
	return h
}

// HeaderHash returns the hash of a header: the block hash.
func HeaderHash(h *Header) Hash {
	var w rlpWriter
	h.appendRLP(&w)
	return keccak(w.buf)
}

// EncodeTransaction returns a transaction as the chain encodes it: the RLP
// list of a legacy transaction, or the type byte and RLP list of a typed one.
func EncodeTransaction(tx *Transaction) []byte {
	var w rlpWriter
	tx.appendEncoding(&w)
	return w.buf
}

// TransactionHash returns the hash of a transaction computed from its
// contents.
func TransactionHash(tx *Transaction) Hash {
	return keccak(EncodeTransaction(tx))
}

// UnclesHash returns the sha3Uncles of a block with these uncle headers.
func UnclesHash(uncles []*Header) Hash {
	var w rlpWriter
	mark := w.list()
	for _, u := range uncles {
		u.appendRLP(&w)
	}
	w.endList(mark)
	return keccak(w.buf)
}

// TransactionsRoot returns the transactionsRoot of a block with these
// transactions.
func TransactionsRoot(txs []*Transaction) Hash {
	values := make([][]byte, len(txs))
	for i, tx := range txs {
		values[i] = EncodeTransaction(tx)
	}
	return orderedTrieRoot(values)
}

// WithdrawalsRoot returns the withdrawalsRoot of a block with these
// withdrawals.
func WithdrawalsRoot(withdrawals []Withdrawal) Hash {
	values := make([][]byte, len(withdrawals))
	for i := range withdrawals {
		var w rlpWriter
		withdrawals[i].appendRLP(&w)
		values[i] = w.buf
	}
	return orderedTrieRoot(values)
}

// BlockSize returns the length of a block's RLP encoding: the header, the
// transactions, the uncle headers and, from Shanghai on (when the header has
// a withdrawals root), the withdrawals. This is the block's "size".
func BlockSize(h *Header, txs []*Transaction, uncles []*Header, withdrawals []Withdrawal) uint64 {
	return blockSize(h, txs, uncles, withdrawals, h.WithdrawalsRoot != nil)
}

func blockSize(h *Header, txs []*Transaction, uncles []*Header, withdrawals []Withdrawal, withWithdrawals bool) uint64 {
	var w rlpWriter
	mark := w.list()
	h.appendRLP(&w)
	list := w.list()
	for _, tx := range txs {
		if tx.Type == LegacyTxType {
			tx.appendEncoding(&w)
			continue
		}
		// A typed transaction sits in the block as a byte string.
		var enc rlpWriter
		tx.appendEncoding(&enc)
		w.bytes(enc.buf)
	}
	w.endList(list)
	list = w.list()
	for _, u := range uncles {
		u.appendRLP(&w)
	}
	w.endList(list)
	if withWithdrawals {
		list = w.list()
		for i := range withdrawals {
			withdrawals[i].appendRLP(&w)
		}
		w.endList(list)
	}
	w.endList(mark)
	return uint64(len(w.buf))
}

// UncleSize returns the size go-ethereum reports for an uncle: that of a
// block made of the header alone, without even a withdrawals list.
func UncleSize(h *Header) uint64 {
	return blockSize(h, nil, nil, nil, false)
}
