// Package gethconv converts go-ethereum's chain types into blockrpc's, so
// that chains built or imported with go-ethereum can be served by blockrpc.
//
// The hashes and sizes go-ethereum computed are passed on as given values:
// memstore checks each one against its own computation when the block is
// added, so every converted block is also a cross-check of the two.
package gethconv

import (
	"fmt"
	"math/big"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/holiman/uint256"
)

// Block converts a block and its uncle headers, recovering each
// transaction's sender with signer: types.LatestSignerForChainID of the
// chain recovers every kind of transaction.
func Block(signer types.Signer, b *types.Block) (*backend.Block, []*backend.Uncle, error) {
	header, err := Header(b.Header())
	if err != nil {
		return nil, nil, fmt.Errorf("block %d: %w", b.NumberU64(), err)
	}
	out := &backend.Block{
		Header:       header,
		Hash:         backend.Hash(b.Hash()),
		Size:         b.Size(),
		Transactions: make([]*backend.Transaction, len(b.Transactions())),
	}
	for i, tx := range b.Transactions() {
		t, err := Transaction(signer, tx)
		if err != nil {
			return nil, nil, fmt.Errorf("block %d: transaction %d: %w", b.NumberU64(), i, err)
		}
		out.Transactions[i] = t
	}
	if ws := b.Withdrawals(); ws != nil {
		out.Withdrawals = make([]backend.Withdrawal, len(ws))
		for i, w := range ws {
			out.Withdrawals[i] = backend.Withdrawal{Index: w.Index, ValidatorIndex: w.Validator, Address: backend.Address(w.Address), Amount: w.Amount}
		}
	}
	uncles := make([]*backend.Uncle, len(b.Uncles()))
	for i, u := range b.Uncles() {
		header, err := Header(u)
		if err != nil {
			return nil, nil, fmt.Errorf("block %d: uncle %d: %w", b.NumberU64(), i, err)
		}
		uncles[i] = &backend.Uncle{Header: header, Hash: backend.Hash(u.Hash())}
	}
	return out, uncles, nil
}

// Header converts a header. It fails for a value wider than blockrpc's 256
// bits, which go-ethereum's big integers allow in a crafted export.
func Header(h *types.Header) (backend.Header, error) {
	var c converter
	out := backend.Header{
		ParentHash:       backend.Hash(h.ParentHash),
		Sha3Uncles:       backend.Hash(h.UncleHash),
		Miner:            backend.Address(h.Coinbase),
		StateRoot:        backend.Hash(h.Root),
		TransactionsRoot: backend.Hash(h.TxHash),
		ReceiptsRoot:     backend.Hash(h.ReceiptHash),
		LogsBloom:        backend.Bloom(h.Bloom),
		Difficulty:       *c.u256(h.Difficulty),
		Number:           h.Number.Uint64(),
		GasLimit:         h.GasLimit,
		GasUsed:          h.GasUsed,
		Timestamp:        h.Time,
		ExtraData:        h.Extra,
		MixHash:          backend.Hash(h.MixDigest),
		Nonce:            backend.Nonce(h.Nonce),
		BlobGasUsed:      h.BlobGasUsed,
		ExcessBlobGas:    h.ExcessBlobGas,
	}
	if h.BaseFee != nil {
		out.BaseFeePerGas = c.u256(h.BaseFee)
	}
	out.WithdrawalsRoot = hashPtr(h.WithdrawalsHash)
	out.ParentBeaconBlockRoot = hashPtr(h.ParentBeaconRoot)
	out.RequestsHash = hashPtr(h.RequestsHash)
	return out, c.err
}

// Transaction converts a signed transaction, recovering its sender. The
// values blockrpc derives itself (a legacy transaction's chain id, the
// effective gas price) are left for the store to compute.
func Transaction(signer types.Signer, tx *types.Transaction) (*backend.Transaction, error) {
	from, err := types.Sender(signer, tx)
	if err != nil {
		return nil, fmt.Errorf("recovering the sender: %w", err)
	}
	v, r, s := tx.RawSignatureValues()
	var c converter
	out := &backend.Transaction{
		Type:  tx.Type(),
		Nonce: tx.Nonce(),
		Gas:   tx.Gas(),
		Value: *c.u256(tx.Value()),
		Input: tx.Data(),
		V:     *c.u256(v),
		R:     *c.u256(r),
		S:     *c.u256(s),
		Hash:  backend.Hash(tx.Hash()),
		From:  backend.Address(from),
	}
	if to := tx.To(); to != nil {
		a := backend.Address(*to)
		out.To = &a
	}
	if tx.Type() != types.LegacyTxType {
		out.ChainID = c.u256(tx.ChainId())
		out.AccessList = make([]backend.AccessTuple, len(tx.AccessList()))
		for i, t := range tx.AccessList() {
			keys := make([]backend.Hash, len(t.StorageKeys))
			for j, k := range t.StorageKeys {
				keys[j] = backend.Hash(k)
			}
			out.AccessList[i] = backend.AccessTuple{Address: backend.Address(t.Address), StorageKeys: keys}
		}
	}
	switch tx.Type() {
	case types.LegacyTxType, types.AccessListTxType:
		out.GasPrice = c.u256(tx.GasPrice())
	default:
		out.MaxFeePerGas = c.u256(tx.GasFeeCap())
		out.MaxPriorityFeePerGas = c.u256(tx.GasTipCap())
	}
	if tx.Type() == types.BlobTxType {
		out.MaxFeePerBlobGas = c.u256(tx.BlobGasFeeCap())
		for _, h := range tx.BlobHashes() {
			out.BlobVersionedHashes = append(out.BlobVersionedHashes, backend.Hash(h))
		}
	}
	if tx.Type() == types.SetCodeTxType {
		for _, a := range tx.SetCodeAuthorizations() {
			out.AuthorizationList = append(out.AuthorizationList, backend.SetCodeAuthorization{
				ChainID: a.ChainID,
				Address: backend.Address(a.Address),
				Nonce:   a.Nonce,
				YParity: a.V,
				R:       a.R,
				S:       a.S,
			})
		}
	}
	return out, c.err
}

// converter turns go-ethereum's big integers into uint256 values, and
// remembers the first that does not fit.
type converter struct{ err error }

func (c *converter) u256(b *big.Int) *uint256.Int {
	z, overflow := uint256.FromBig(b)
	if overflow && c.err == nil {
		c.err = fmt.Errorf("%s does not fit in 256 bits", b)
	}
	return z
}

func hashPtr(h *common.Hash) *backend.Hash {
	if h == nil {
		return nil
	}
	out := backend.Hash(*h)
	return &out
}
