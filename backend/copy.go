package backend

import (
	"slices"
)

// The Copy methods return deep copies: nothing of the result is shared with
// the original, so either can be changed without affecting the other. A
// store copies what it is given and what it gives out to callers that may
// write to it.

// Copy returns a deep copy of h.
func (h *Header) Copy() Header {
	c := *h
	c.ExtraData = slices.Clone(h.ExtraData)
	c.BaseFeePerGas = copyPtr(h.BaseFeePerGas)
	c.WithdrawalsRoot = copyPtr(h.WithdrawalsRoot)
	c.BlobGasUsed = copyPtr(h.BlobGasUsed)
	c.ExcessBlobGas = copyPtr(h.ExcessBlobGas)
	c.ParentBeaconBlockRoot = copyPtr(h.ParentBeaconBlockRoot)
	c.RequestsHash = copyPtr(h.RequestsHash)
	return c
}

// Copy returns a deep copy of b.
func (b *Block) Copy() *Block {
	c := *b
	c.Header = b.Header.Copy()
	c.TotalDifficulty = copyPtr(b.TotalDifficulty)
	if b.Transactions != nil {
		c.Transactions = make([]*Transaction, len(b.Transactions))
		for i, tx := range b.Transactions {
			c.Transactions[i] = tx.Copy()
		}
	}
	c.TransactionHashes = slices.Clone(b.TransactionHashes)
	c.Uncles = slices.Clone(b.Uncles)
	c.Withdrawals = slices.Clone(b.Withdrawals)
	return &c
}

// Copy returns a deep copy of u.
func (u *Uncle) Copy() *Uncle {
	c := *u
	c.Header = u.Header.Copy()
	c.TotalDifficulty = copyPtr(u.TotalDifficulty)
	return &c
}

// Copy returns a deep copy of tx.
func (tx *Transaction) Copy() *Transaction {
	c := *tx
	c.ChainID = copyPtr(tx.ChainID)
	c.GasPrice = copyPtr(tx.GasPrice)
	c.MaxPriorityFeePerGas = copyPtr(tx.MaxPriorityFeePerGas)
	c.MaxFeePerGas = copyPtr(tx.MaxFeePerGas)
	c.To = copyPtr(tx.To)
	c.Input = slices.Clone(tx.Input)
	if tx.AccessList != nil {
		c.AccessList = make([]AccessTuple, len(tx.AccessList))
		for i, t := range tx.AccessList {
			c.AccessList[i] = AccessTuple{Address: t.Address, StorageKeys: slices.Clone(t.StorageKeys)}
		}
	}
	c.MaxFeePerBlobGas = copyPtr(tx.MaxFeePerBlobGas)
	c.BlobVersionedHashes = slices.Clone(tx.BlobVersionedHashes)
	c.AuthorizationList = slices.Clone(tx.AuthorizationList)
	return &c
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
