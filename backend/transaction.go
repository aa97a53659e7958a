package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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

// Validate checks that tx has what its type requires: a known type, the
// fee fields of that type, a chain id and a y-parity v for a typed
// transaction, a recipient for a blob or set-code transaction (neither can
// create a contract), and their lists not empty. It returns the first
// field at fault as a *FieldError without an Object: the caller knows
// which transaction it asked about. The derived Hash and From are not
// checked; they are computed from the rest.
func (tx *Transaction) Validate() error {
	if field, err := tx.validate(); err != nil {
		return &FieldError{Field: field, Err: err}
	}
	return nil
}

// validate is Validate's rules, returning the field and the error apart so
// that decoding can name the object.
func (tx *Transaction) validate() (field string, err error) {
	if err := unsupportedType(uint64(tx.Type)); err != nil {
		return "type", err
	}
	typed := tx.Type != LegacyTxType
	switch {
	case tx.Type <= AccessListTxType && tx.GasPrice == nil:
		return "gasPrice", ErrMissingField
	case tx.Type >= DynamicFeeTxType && tx.MaxFeePerGas == nil:
		return "maxFeePerGas", ErrMissingField
	case tx.Type >= DynamicFeeTxType && tx.MaxPriorityFeePerGas == nil:
		return "maxPriorityFeePerGas", ErrMissingField
	case typed && tx.ChainID == nil:
		return "chainId", ErrMissingField
	case tx.Type >= BlobTxType && tx.To == nil:
		return "to", ErrMissingField
	case tx.Type == BlobTxType && tx.MaxFeePerBlobGas == nil:
		return "maxFeePerBlobGas", ErrMissingField
	case tx.Type == BlobTxType && len(tx.BlobVersionedHashes) == 0:
		return "blobVersionedHashes", ErrEmptyList
	case tx.Type == SetCodeTxType && len(tx.AuthorizationList) == 0:
		return "authorizationList", ErrEmptyList
	case typed && !isYParity(&tx.V):
		return "v", fmt.Errorf("%s: %w", hexutil.EncodeU256(&tx.V), ErrInvalidYParity)
	}
	return "", nil
}

func isYParity(v *uint256.Int) bool { return v.IsUint64() && v.Uint64() <= 1 }

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

// TransactionsRoot returns the transactionsRoot of a block with these
// transactions.
func TransactionsRoot(txs []*Transaction) Hash {
	values := make([][]byte, len(txs))
	for i, tx := range txs {
		values[i] = EncodeTransaction(tx)
	}
	return orderedTrieRoot(values)
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

// Copy returns a deep copy of tx, nil for nil.
func (tx *Transaction) Copy() *Transaction {
	if tx == nil {
		return nil
	}
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

// String returns the transaction hash.
func (tx *Transaction) String() string { return hexutil.Encode(tx.Hash[:]) }

// appendEncoding writes the transaction as the chain encodes it: the RLP
// list of a legacy transaction, or the type byte followed by the RLP list of
// a typed one. Its keccak256 is the transaction hash, and it is the value
// stored in the transactions trie.
func (tx *Transaction) appendEncoding(w *rlpWriter) {
	if tx.Type != LegacyTxType {
		w.buf = append(w.buf, tx.Type)
	}
	mark := w.list()
	tx.appendSigned(w, tx.ChainID)
	w.u256(&tx.V)
	w.u256(&tx.R)
	w.u256(&tx.S)
	w.endList(mark)
}

// appendSigned writes, in consensus order and without the list around
// them, the fields that a transaction's signature covers and that its
// encoding holds before the signature: the encoding and the signing hash
// differ only in what follows. A legacy transaction has no chain id among
// them; a typed one starts with chainID.
func (tx *Transaction) appendSigned(w *rlpWriter, chainID *uint256.Int) {
	if tx.Type == LegacyTxType {
		w.uint64(tx.Nonce)
		w.optionalU256(tx.GasPrice)
		w.uint64(tx.Gas)
		w.address(tx.To)
		w.u256(&tx.Value)
		w.bytes(tx.Input)
		return
	}
	w.optionalU256(chainID)
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
		w.authorizationList(tx.AuthorizationList)
	}
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

// MarshalJSON writes the transaction object of a transaction outside any
// block: its block members are null. Blocks write their transactions with
// those members filled in. Its receiver is a value, as Block's.
func (tx Transaction) MarshalJSON() ([]byte, error) {
	return tx.appendObject(nil, &txPosition{}), nil
}

// legacyChainZero reports whether tx is a legacy transaction protected for
// chain id 0 (v of 35 or 36). go-ethereum writes a legacy transaction's
// chainId only when it is not zero, so such a transaction is served as one
// without replay protection is, and tells no chain id.
func legacyChainZero(tx *Transaction) bool {
	return tx.Type == LegacyTxType && tx.ChainID != nil && tx.ChainID.IsZero()
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
	if tx.ChainID != nil && !legacyChainZero(tx) {
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

// positionJSON holds the block members of a transaction object.
type positionJSON struct {
	BlockHash        *Hash           `json:"blockHash"`
	BlockNumber      *hexutil.Uint64 `json:"blockNumber"`
	BlockTimestamp   *hexutil.Uint64 `json:"blockTimestamp"`
	TransactionIndex *hexutil.Uint64 `json:"transactionIndex"`
}

// txJSON is a transaction object as decoded, before it is checked: every
// member is a pointer or a slice, nil when absent or null.
type txJSON struct {
	positionJSON
	From                 *Address               `json:"from"`
	Gas                  *hexutil.Uint64        `json:"gas"`
	GasPrice             *hexutil.U256          `json:"gasPrice"`
	MaxFeePerGas         *hexutil.U256          `json:"maxFeePerGas"`
	MaxPriorityFeePerGas *hexutil.U256          `json:"maxPriorityFeePerGas"`
	MaxFeePerBlobGas     *hexutil.U256          `json:"maxFeePerBlobGas"`
	Hash                 *Hash                  `json:"hash"`
	Input                *hexutil.Bytes         `json:"input"`
	Nonce                *hexutil.Uint64        `json:"nonce"`
	To                   *Address               `json:"to"`
	Value                *hexutil.U256          `json:"value"`
	Type                 *hexutil.Uint64        `json:"type"`
	AccessList           *[]AccessTuple         `json:"accessList"`
	ChainID              *hexutil.U256          `json:"chainId"`
	BlobVersionedHashes  []Hash                 `json:"blobVersionedHashes"`
	AuthorizationList    []SetCodeAuthorization `json:"authorizationList"`
	V                    *hexutil.U256          `json:"v"`
	R                    *hexutil.U256          `json:"r"`
	S                    *hexutil.U256          `json:"s"`
	YParity              *hexutil.Uint64        `json:"yParity"`
}

// UnmarshalJSON reads a transaction object. Its block members are not kept;
// Block.UnmarshalJSON checks them against the block.
func (tx *Transaction) UnmarshalJSON(input []byte) error {
	out, _, err := decodeTransaction(input, "transaction")
	if err != nil {
		return err
	}
	*tx = *out
	return nil
}

// errNotObject is for a transaction given as something other than a JSON
// object, such as a hash where the block's other entries are objects.
var errNotObject = errors.New("not a JSON object")

// decodeTransaction reads a transaction object in three steps: check finds
// what only the JSON can show (an absent member that would read as zero),
// transaction converts, and validate applies the rules every Transaction
// answers to, however it was made. Errors name the object.
func decodeTransaction(input []byte, object string) (*Transaction, *positionJSON, error) {
	input = bytes.TrimSpace(input)
	if len(input) == 0 || input[0] != '{' {
		return nil, nil, &FieldError{Object: object, Err: errNotObject}
	}
	var d txJSON
	if err := json.Unmarshal(input, &d); err != nil {
		return nil, nil, &FieldError{Object: object, Err: err}
	}
	if field, err := d.check(); err != nil {
		return nil, nil, &FieldError{Object: object, Field: field, Err: err}
	}
	tx := d.transaction()
	if field, err := tx.validate(); err != nil {
		return nil, nil, &FieldError{Object: object, Field: field, Err: err}
	}
	return tx, &d.positionJSON, nil
}

// txType returns the type the object gives, legacy when it gives none. It
// is narrowed to a byte only after check has seen that it fits.
func (d *txJSON) txType() uint8 {
	if d.Type == nil {
		return LegacyTxType
	}
	return uint8(*d.Type)
}

// check reports the first member that is absent, where the decoded value
// could not show it: members whose absence would read as zero, and the
// lists of typed transactions, whose absence would read as empty. A
// yParity given beside v must agree with it; a v that is no y-parity at
// all is left for validate to report, as it reports one without yParity.
func (d *txJSON) check() (field string, err error) {
	if d.Type != nil {
		if err := unsupportedType(uint64(*d.Type)); err != nil {
			return "type", err
		}
	}
	typ := d.txType()
	switch {
	case d.From == nil:
		return "from", ErrMissingField
	case d.Gas == nil:
		return "gas", ErrMissingField
	case d.Input == nil:
		return "input", ErrMissingField
	case d.Nonce == nil:
		return "nonce", ErrMissingField
	case d.Value == nil:
		return "value", ErrMissingField
	case d.R == nil:
		return "r", ErrMissingField
	case d.S == nil:
		return "s", ErrMissingField
	case d.V == nil && (d.YParity == nil || typ == LegacyTxType):
		return "v", ErrMissingField
	case typ >= AccessListTxType && d.AccessList == nil:
		return "accessList", ErrMissingField
	case typ == BlobTxType && d.BlobVersionedHashes == nil:
		return "blobVersionedHashes", ErrMissingField
	case typ == SetCodeTxType && d.AuthorizationList == nil:
		return "authorizationList", ErrMissingField
	}
	if typ != LegacyTxType && d.V != nil && d.YParity != nil {
		v := (*uint256.Int)(d.V)
		if isYParity(v) && !v.Eq(uint256.NewInt(uint64(*d.YParity))) {
			return "yParity", fmt.Errorf("%s does not match v %s", d.YParity, hexutil.EncodeU256(v))
		}
	}
	return "", nil
}

// transaction returns the transaction of an object that check has passed.
// A typed transaction's v is its yParity when only that is given.
func (d *txJSON) transaction() *Transaction {
	tx := &Transaction{
		Type:     d.txType(),
		ChainID:  (*uint256.Int)(d.ChainID),
		Nonce:    uint64(*d.Nonce),
		GasPrice: (*uint256.Int)(d.GasPrice),
		Gas:      uint64(*d.Gas),
		To:       d.To,
		Value:    uint256.Int(*d.Value),
		Input:    *d.Input,
		R:        uint256.Int(*d.R),
		S:        uint256.Int(*d.S),
		From:     *d.From,
	}
	if d.V != nil {
		tx.V = uint256.Int(*d.V)
	} else {
		tx.V.SetUint64(uint64(*d.YParity))
	}
	if tx.Type >= AccessListTxType {
		tx.AccessList = *d.AccessList
	}
	if tx.Type >= DynamicFeeTxType {
		tx.MaxFeePerGas = (*uint256.Int)(d.MaxFeePerGas)
		tx.MaxPriorityFeePerGas = (*uint256.Int)(d.MaxPriorityFeePerGas)
	}
	if tx.Type == BlobTxType {
		tx.MaxFeePerBlobGas = (*uint256.Int)(d.MaxFeePerBlobGas)
		tx.BlobVersionedHashes = d.BlobVersionedHashes
	}
	if tx.Type == SetCodeTxType {
		tx.AuthorizationList = d.AuthorizationList
	}
	if d.Hash != nil {
		tx.Hash = *d.Hash
	}
	return tx
}
