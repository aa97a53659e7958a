package backend

import (
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
)

// Transaction types.
const (
	LegacyTxType     = 0x00
	AccessListTxType = 0x01 // EIP-2930
	DynamicFeeTxType = 0x02 // EIP-1559
	BlobTxType       = 0x03 // EIP-4844
	SetCodeTxType    = 0x04 // EIP-7702
)

// Transaction is a signed transaction with its hash and sender. Fields are
// named after their JSON-RPC keys; those a type does not have are nil.
//
// Where it sits in a block (blockHash, blockNumber, blockTimestamp,
// transactionIndex) is not stored here: a block writes it from its own
// header, so that the two cannot disagree.
type Transaction struct {
	Type    uint8
	ChainID *uint256.Int // nil for a legacy transaction without EIP-155 replay protection
	Nonce   uint64
	// GasPrice is the price of a legacy or access-list transaction, and the
	// effective price paid (min(maxFeePerGas, baseFee+maxPriorityFeePerGas))
	// of a mined transaction of a later type. When it is nil for a later
	// type, a block computes it from its base fee.
	GasPrice             *uint256.Int
	MaxPriorityFeePerGas *uint256.Int // type 2 and later
	MaxFeePerGas         *uint256.Int // type 2 and later
	Gas                  uint64
	To                   *Address // nil for a contract creation
	Value                uint256.Int
	Input                []byte
	AccessList           []AccessTuple          // type 1 and later
	MaxFeePerBlobGas     *uint256.Int           // type 3
	BlobVersionedHashes  []Hash                 // type 3
	AuthorizationList    []SetCodeAuthorization // type 4
	// V is the signature's recovery value: 27 or 28, or chainId*2+35 or +36,
	// for a legacy transaction, and the y-parity (0 or 1) for later types.
	V, R, S uint256.Int

	Hash Hash    // derived: keccak256 of the encoding below
	From Address // derived: the signer, recovered from the signature
}

// AccessTuple is an entry of an EIP-2930 access list.
type AccessTuple struct {
	Address     Address
	StorageKeys []Hash
}

// SetCodeAuthorization is an EIP-7702 authorization to set an account's code.
type SetCodeAuthorization struct {
	ChainID uint256.Int
	Address Address
	Nonce   uint64
	YParity uint8
	R, S    uint256.Int
}

// appendEncoding writes the transaction as the chain encodes it: the RLP
// list of a legacy transaction, or the type byte followed by the RLP list of
// a typed one. Its keccak256 is the transaction hash, and it is the value
// stored in the transactions trie.
func (tx *Transaction) appendEncoding(w *rlpWriter) {
	if tx.Type == LegacyTxType {
		mark := w.list()
		w.uint64(tx.Nonce)
		w.optionalU256(tx.GasPrice)
		w.uint64(tx.Gas)
		w.address(tx.To)
		w.u256(&tx.Value)
		w.bytes(tx.Input)
		w.u256(&tx.V)
		w.u256(&tx.R)
		w.u256(&tx.S)
		w.endList(mark)
		return
	}
	w.buf = append(w.buf, tx.Type)
	mark := w.list()
	w.optionalU256(tx.ChainID)
	w.uint64(tx.Nonce)
	if tx.Type == AccessListTxType {
		w.optionalU256(tx.GasPrice)
	} else {
		w.optionalU256(tx.MaxPriorityFeePerGas)
		w.optionalU256(tx.MaxFeePerGas)
	}
	w.uint64(tx.Gas)
	w.address(tx.To)
	w.u256(&tx.Value)
	w.bytes(tx.Input)
	w.accessList(tx.AccessList)
	switch tx.Type {
	case BlobTxType:
		w.optionalU256(tx.MaxFeePerBlobGas)
		hashes := w.list()
		for i := range tx.BlobVersionedHashes {
			w.bytes(tx.BlobVersionedHashes[i][:])
		}
		w.endList(hashes)
	case SetCodeTxType:
		auths := w.list()
		for i := range tx.AuthorizationList {
			a := &tx.AuthorizationList[i]
			item := w.list()
			w.u256(&a.ChainID)
			w.bytes(a.Address[:])
			w.uint64(a.Nonce)
			w.uint64(uint64(a.YParity))
			w.u256(&a.R)
			w.u256(&a.S)
			w.endList(item)
		}
		w.endList(auths)
	}
	w.u256(&tx.V)
	w.u256(&tx.R)
	w.u256(&tx.S)
	w.endList(mark)
}

func (w *rlpWriter) accessList(list []AccessTuple) {
	mark := w.list()
	for i := range list {
		item := w.list()
		w.bytes(list[i].Address[:])
		keys := w.list()
		for j := range list[i].StorageKeys {
			w.bytes(list[i].StorageKeys[j][:])
		}
		w.endList(keys)
		w.endList(item)
	}
	w.endList(mark)
}

// txPosition is where a transaction sits: its block's hash, number and
// time, and its index. A zero block hash means "not in a block", and all
// four are null; pending blocks have a null hash and number only.
type txPosition struct {
	blockHash      Hash
	blockNumber    uint64
	blockTimestamp uint64
	index          uint64
	pending        bool
	baseFee        *uint256.Int // the block's, for the effective gas price
}

// appendObject writes the transaction object in go-ethereum's member order.
func (tx *Transaction) appendObject(dst []byte, pos *txPosition) []byte {
	mined := pos.blockHash != Hash{} || pos.pending
	dst = append(dst, '{')
	switch {
	case !mined:
		dst = append(dst, `"blockHash":null,"blockNumber":null,"blockTimestamp":null,`...)
	case pos.pending:
		dst = append(dst, `"blockHash":null,"blockNumber":null,`...)
		dst = appendUint64Member(dst, `"blockTimestamp":`, pos.blockTimestamp)
	default:
		dst = appendBytesMember(dst, `"blockHash":`, pos.blockHash[:])
		dst = appendUint64Member(dst, `"blockNumber":`, pos.blockNumber)
		dst = appendUint64Member(dst, `"blockTimestamp":`, pos.blockTimestamp)
	}
	dst = appendBytesMember(dst, `"from":`, tx.From[:])
	dst = appendUint64Member(dst, `"gas":`, tx.Gas)
	dst = tx.appendGasPrice(dst, mined, pos.baseFee)
	if tx.Type >= DynamicFeeTxType {
		dst = appendOptionalU256Member(dst, `"maxFeePerGas":`, tx.MaxFeePerGas)
		dst = appendOptionalU256Member(dst, `"maxPriorityFeePerGas":`, tx.MaxPriorityFeePerGas)
	}
	if tx.Type == BlobTxType {
		dst = appendOptionalU256Member(dst, `"maxFeePerBlobGas":`, tx.MaxFeePerBlobGas)
	}
	dst = appendBytesMember(dst, `"hash":`, tx.Hash[:])
	dst = appendBytesMember(dst, `"input":`, tx.Input)
	dst = appendUint64Member(dst, `"nonce":`, tx.Nonce)
	if tx.To != nil {
		dst = appendBytesMember(dst, `"to":`, tx.To[:])
	} else {
		dst = append(dst, `"to":null,`...)
	}
	if mined {
		dst = appendUint64Member(dst, `"transactionIndex":`, pos.index)
	} else {
		dst = append(dst, `"transactionIndex":null,`...)
	}
	dst = appendU256Member(dst, `"value":`, &tx.Value)
	dst = appendUint64Member(dst, `"type":`, uint64(tx.Type))
	if tx.Type != LegacyTxType {
		dst = appendAccessList(dst, tx.AccessList)
	}
	if tx.ChainID != nil {
		dst = appendU256Member(dst, `"chainId":`, tx.ChainID)
	}
	if tx.Type == BlobTxType && len(tx.BlobVersionedHashes) > 0 {
		dst = append(dst, `"blobVersionedHashes":[`...)
		for i := range tx.BlobVersionedHashes {
			dst = appendHashString(dst, &tx.BlobVersionedHashes[i])
			dst = append(dst, ',')
		}
		dst = closeArray(dst, len(tx.BlobVersionedHashes))
	}
	if tx.Type == SetCodeTxType && len(tx.AuthorizationList) > 0 {
		dst = appendAuthorizations(dst, tx.AuthorizationList)
	}
	dst = appendU256Member(dst, `"v":`, &tx.V)
	dst = appendU256Member(dst, `"r":`, &tx.R)
	dst = appendU256Member(dst, `"s":`, &tx.S)
	if tx.Type != LegacyTxType {
		dst = appendUint64Member(dst, `"yParity":`, tx.V.Uint64())
	}
	return closeObject(dst)
}

// appendGasPrice writes gasPrice as go-ethereum does: for fee-market types,
// the effective price once mined and the fee cap before.
func (tx *Transaction) appendGasPrice(dst []byte, mined bool, baseFee *uint256.Int) []byte {
	if tx.Type < DynamicFeeTxType {
		return appendOptionalU256Member(dst, `"gasPrice":`, tx.GasPrice)
	}
	if !mined || baseFee == nil {
		return appendOptionalU256Member(dst, `"gasPrice":`, tx.MaxFeePerGas)
	}
	if tx.GasPrice != nil {
		return appendU256Member(dst, `"gasPrice":`, tx.GasPrice)
	}
	price, ok := tx.EffectiveGasPrice(baseFee)
	if !ok {
		return appendOptionalU256Member(dst, `"gasPrice":`, tx.MaxFeePerGas)
	}
	return appendU256Member(dst, `"gasPrice":`, &price)
}

// EffectiveGasPrice returns what a fee-market transaction pays per gas in a
// block with the given base fee: min(maxFeePerGas, baseFee+maxPriorityFeePerGas).
// It reports false for a transaction without fee caps.
func (tx *Transaction) EffectiveGasPrice(baseFee *uint256.Int) (uint256.Int, bool) {
	if tx.MaxFeePerGas == nil || tx.MaxPriorityFeePerGas == nil || baseFee == nil {
		return uint256.Int{}, false
	}
	var price uint256.Int
	if _, overflow := price.AddOverflow(baseFee, tx.MaxPriorityFeePerGas); overflow || price.Gt(tx.MaxFeePerGas) {
		price = *tx.MaxFeePerGas
	}
	return price, true
}

func appendOptionalU256Member(dst []byte, key string, z *uint256.Int) []byte {
	if z == nil {
		dst = append(dst, key...)
		return append(dst, `null,`...)
	}
	return appendU256Member(dst, key, z)
}

func appendAccessList(dst []byte, list []AccessTuple) []byte {
	dst = append(dst, `"accessList":[`...)
	for i := range list {
		dst = appendBytesMember(append(dst, '{'), `"address":`, list[i].Address[:])
		dst = append(dst, `"storageKeys":[`...)
		for j := range list[i].StorageKeys {
			dst = appendHashString(dst, &list[i].StorageKeys[j])
			dst = append(dst, ',')
		}
		dst = closeArray(dst, len(list[i].StorageKeys))
		dst = append(closeObject(dst), ',')
	}
	return closeArray(dst, len(list))
}

func appendAuthorizations(dst []byte, auths []SetCodeAuthorization) []byte {
	dst = append(dst, `"authorizationList":[`...)
	for i := range auths {
		a := &auths[i]
		dst = appendU256Member(append(dst, '{'), `"chainId":`, &a.ChainID)
		dst = appendBytesMember(dst, `"address":`, a.Address[:])
		dst = appendUint64Member(dst, `"nonce":`, a.Nonce)
		dst = appendUint64Member(dst, `"yParity":`, uint64(a.YParity))
		dst = appendU256Member(dst, `"r":`, &a.R)
		dst = appendU256Member(dst, `"s":`, &a.S)
		dst = append(closeObject(dst), ',')
	}
	return closeArray(dst, len(auths))
}

// closeArray ends an array member whose n elements were each followed by a
// comma: the last comma becomes ']', and the member gets its own comma.
func closeArray(dst []byte, n int) []byte {
	if n == 0 {
		return append(dst, ']', ',')
	}
	dst[len(dst)-1] = ']'
	return append(dst, ',')
}

// MarshalJSON writes the transaction object of a transaction outside any
// block: its block members are null. Blocks write their transactions with
// those members filled in. Its receiver is a value, as Block's.
func (tx Transaction) MarshalJSON() ([]byte, error) {
	return tx.appendObject(nil, &txPosition{}), nil
}

// String returns the transaction hash.
func (tx *Transaction) String() string { return hexutil.Encode(tx.Hash[:]) }
