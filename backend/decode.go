package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
)

// Decoding reads the JSON-RPC objects back into the types above. It checks
// the form of each value and that required members are there, and that the
// values a block repeats (its position, in each transaction object) agree;
// checking derived values against the contents is memstore's job, with the
// functions of derive.go.

// FieldError reports a member of a JSON object that is missing or wrong.
type FieldError struct {
	Object string // "block", "uncle", "transaction 3", ...
	Field  string // the JSON key
	Err    error
}

// Error returns the object, the field and what is wrong with it.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Object + ": " + e.Err.Error()
	}
	return e.Object + ": " + e.Field + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *FieldError) Unwrap() error { return e.Err }

// Errors of a FieldError.
var (
	// ErrMissingField is for an absent required member.
	ErrMissingField = errors.New("missing required field")
	// ErrEmptyList is for a list that may not be empty: the blob hashes of a
	// blob transaction (EIP-4844), the authorizations of a set-code one
	// (EIP-7702).
	ErrEmptyList = errors.New("must not be empty")
	// ErrInvalidYParity is for a typed transaction's v other than 0 or 1.
	ErrInvalidYParity = errors.New("a typed transaction's v is its y-parity, 0 or 1")
)

func isYParity(v *uint256.Int) bool { return v.IsUint64() && v.Uint64() <= 1 }

type headerJSON struct {
	ParentHash            *Hash           `json:"parentHash"`
	Sha3Uncles            *Hash           `json:"sha3Uncles"`
	Miner                 *Address        `json:"miner"`
	StateRoot             *Hash           `json:"stateRoot"`
	TransactionsRoot      *Hash           `json:"transactionsRoot"`
	ReceiptsRoot          *Hash           `json:"receiptsRoot"`
	LogsBloom             *Bloom          `json:"logsBloom"`
	Difficulty            *hexutil.U256   `json:"difficulty"`
	Number                *hexutil.Uint64 `json:"number"`
	GasLimit              *hexutil.Uint64 `json:"gasLimit"`
	GasUsed               *hexutil.Uint64 `json:"gasUsed"`
	Timestamp             *hexutil.Uint64 `json:"timestamp"`
	ExtraData             *hexutil.Bytes  `json:"extraData"`
	MixHash               *Hash           `json:"mixHash"`
	Nonce                 *Nonce          `json:"nonce"`
	BaseFeePerGas         *hexutil.U256   `json:"baseFeePerGas"`
	WithdrawalsRoot       *Hash           `json:"withdrawalsRoot"`
	BlobGasUsed           *hexutil.Uint64 `json:"blobGasUsed"`
	ExcessBlobGas         *hexutil.Uint64 `json:"excessBlobGas"`
	ParentBeaconBlockRoot *Hash           `json:"parentBeaconBlockRoot"`
	RequestsHash          *Hash           `json:"requestsHash"`

	// Members of block and uncle objects that are not header fields.
	Hash            *Hash           `json:"hash"`
	Size            *hexutil.Uint64 `json:"size"`
	TotalDifficulty *hexutil.U256   `json:"totalDifficulty"`
}

// header returns the decoded header. A null or absent number marks the
// pending block, whose hash, nonce and logsBloom may be null too. The roots
// a block's contents determine (sha3Uncles, transactionsRoot) may be absent,
// and are left zero for the caller to compute.
func (d *headerJSON) header(object string) (Header, bool, error) {
	var h Header
	pending := d.Number == nil
	missing := func(field string) error {
		return &FieldError{Object: object, Field: field, Err: ErrMissingField}
	}
	switch {
	case d.ParentHash == nil:
		return h, false, missing("parentHash")
	case d.Miner == nil:
		return h, false, missing("miner")
	case d.StateRoot == nil:
		return h, false, missing("stateRoot")
	case d.ReceiptsRoot == nil:
		return h, false, missing("receiptsRoot")
	case d.LogsBloom == nil && !pending:
		return h, false, missing("logsBloom")
	case d.Difficulty == nil:
		return h, false, missing("difficulty")
	case d.GasLimit == nil:
		return h, false, missing("gasLimit")
	case d.GasUsed == nil:
		return h, false, missing("gasUsed")
	case d.Timestamp == nil:
		return h, false, missing("timestamp")
	case d.ExtraData == nil:
		return h, false, missing("extraData")
	case d.MixHash == nil:
		return h, false, missing("mixHash")
	case d.Nonce == nil && !pending:
		return h, false, missing("nonce")
	}
	h.ParentHash = *d.ParentHash
	h.Miner = *d.Miner
	h.StateRoot = *d.StateRoot
	h.ReceiptsRoot = *d.ReceiptsRoot
	h.Difficulty = uint256.Int(*d.Difficulty)
	h.GasLimit = uint64(*d.GasLimit)
	h.GasUsed = uint64(*d.GasUsed)
	h.Timestamp = uint64(*d.Timestamp)
	h.ExtraData = *d.ExtraData
	h.MixHash = *d.MixHash
	if d.Sha3Uncles != nil {
		h.Sha3Uncles = *d.Sha3Uncles
	}
	if d.TransactionsRoot != nil {
		h.TransactionsRoot = *d.TransactionsRoot
	}
	if d.LogsBloom != nil {
		h.LogsBloom = *d.LogsBloom
	}
	if d.Number != nil {
		h.Number = uint64(*d.Number)
	}
	if d.Nonce != nil {
		h.Nonce = *d.Nonce
	}
	if d.BaseFeePerGas != nil {
		h.BaseFeePerGas = (*uint256.Int)(d.BaseFeePerGas)
	}
	h.WithdrawalsRoot = d.WithdrawalsRoot
	h.BlobGasUsed = (*uint64)(d.BlobGasUsed)
	h.ExcessBlobGas = (*uint64)(d.ExcessBlobGas)
	h.ParentBeaconBlockRoot = d.ParentBeaconBlockRoot
	h.RequestsHash = d.RequestsHash
	return h, pending, nil
}

type blockJSON struct {
	headerJSON
	Transactions []json.RawMessage `json:"transactions"`
	Uncles       []Hash            `json:"uncles"`
	Withdrawals  []Withdrawal      `json:"withdrawals"`
}

// UnmarshalJSON reads a block object as eth_getBlockByNumber answers it,
// with transaction objects or hashes. Absent hash, size and roots are left
// zero; a totalDifficulty of null is nil.
func (b *Block) UnmarshalJSON(input []byte) error {
	var d blockJSON
	if err := json.Unmarshal(input, &d); err != nil {
		return err
	}
	h, pending, err := d.header("block")
	if err != nil {
		return err
	}
	out := Block{Header: h, Pending: pending, Uncles: d.Uncles, Withdrawals: d.Withdrawals}
	if d.Hash != nil && !pending {
		out.Hash = *d.Hash
	}
	if d.Size != nil {
		out.Size = uint64(*d.Size)
	}
	if d.TotalDifficulty != nil {
		out.TotalDifficulty = (*uint256.Int)(d.TotalDifficulty)
	}
	if d.Transactions == nil {
		return &FieldError{Object: "block", Field: "transactions", Err: ErrMissingField}
	}
	if d.Withdrawals != nil && d.WithdrawalsRoot == nil {
		return &FieldError{Object: "block", Field: "withdrawals", Err: errors.New("given without withdrawalsRoot")}
	}
	if err := out.decodeTransactions(d.Transactions, d.Hash != nil); err != nil {
		return err
	}
	*b = out
	return nil
}

// decodeTransactions reads the transactions member: all hashes or all
// objects. Each object's block members, where given, must be the block's.
func (b *Block) decodeTransactions(raw []json.RawMessage, hashGiven bool) error {
	if len(raw) == 0 {
		return nil
	}
	if raw[0][0] == '"' {
		b.TransactionHashes = make([]Hash, len(raw))
		for i, r := range raw {
			if err := b.TransactionHashes[i].UnmarshalJSON(r); err != nil {
				return &FieldError{Object: "block", Field: fmt.Sprintf("transactions[%d]", i), Err: err}
			}
		}
		return nil
	}
	b.Transactions = make([]*Transaction, len(raw))
	for i, r := range raw {
		object := fmt.Sprintf("transaction %d", i)
		tx, pos, err := decodeTransaction(r, object)
		if err != nil {
			return err
		}
		if err := b.checkPosition(pos, uint64(i), hashGiven, object); err != nil {
			return err
		}
		b.Transactions[i] = tx
	}
	return nil
}

// checkPosition compares the block members of a transaction object with the
// block. A block without a hash member takes the hash its transactions give,
// so that the caller checks it against the header like any given hash.
func (b *Block) checkPosition(pos *positionJSON, index uint64, hashGiven bool, object string) error {
	mismatch := func(field, got, want string) error {
		return &FieldError{Object: object, Field: field, Err: fmt.Errorf("%s, but the block's is %s", got, want)}
	}
	if pos.BlockHash != nil && !b.Pending {
		if !hashGiven && b.Hash == (Hash{}) {
			b.Hash = *pos.BlockHash
		}
		if *pos.BlockHash != b.Hash {
			return mismatch("blockHash", pos.BlockHash.String(), b.Hash.String())
		}
	}
	if pos.BlockNumber != nil && !b.Pending && uint64(*pos.BlockNumber) != b.Number {
		return mismatch("blockNumber", pos.BlockNumber.String(), hexutil.EncodeUint64(b.Number))
	}
	if pos.BlockTimestamp != nil && uint64(*pos.BlockTimestamp) != b.Timestamp {
		return mismatch("blockTimestamp", pos.BlockTimestamp.String(), hexutil.EncodeUint64(b.Timestamp))
	}
	if pos.TransactionIndex != nil && uint64(*pos.TransactionIndex) != index {
		return mismatch("transactionIndex", pos.TransactionIndex.String(), hexutil.EncodeUint64(index))
	}
	return nil
}

// UnmarshalJSON reads an uncle object as eth_getUncleByBlockHashAndIndex
// answers it. Absent hash and size are left zero.
func (u *Uncle) UnmarshalJSON(input []byte) error {
	var d headerJSON
	if err := json.Unmarshal(input, &d); err != nil {
		return err
	}
	h, pending, err := d.header("uncle")
	if err != nil {
		return err
	}
	if pending {
		return &FieldError{Object: "uncle", Field: "number", Err: ErrMissingField}
	}
	out := Uncle{Header: h}
	if d.Hash != nil {
		out.Hash = *d.Hash
	}
	if d.Size != nil {
		out.Size = uint64(*d.Size)
	}
	if d.TotalDifficulty != nil {
		out.TotalDifficulty = (*uint256.Int)(d.TotalDifficulty)
	}
	*u = out
	return nil
}

// positionJSON holds the block members of a transaction object.
type positionJSON struct {
	BlockHash        *Hash           `json:"blockHash"`
	BlockNumber      *hexutil.Uint64 `json:"blockNumber"`
	BlockTimestamp   *hexutil.Uint64 `json:"blockTimestamp"`
	TransactionIndex *hexutil.Uint64 `json:"transactionIndex"`
}

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

func decodeTransaction(input []byte, object string) (*Transaction, *positionJSON, error) {
	input = bytes.TrimSpace(input)
	if len(input) == 0 || input[0] != '{' {
		return nil, nil, &FieldError{Object: object, Field: "", Err: errors.New("not a JSON object")}
	}
	var d txJSON
	if err := json.Unmarshal(input, &d); err != nil {
		return nil, nil, &FieldError{Object: object, Err: err}
	}
	tx := new(Transaction)
	if d.Type != nil {
		if *d.Type > SetCodeTxType {
			return nil, nil, &FieldError{Object: object, Field: "type", Err: fmt.Errorf("unsupported transaction type %s", d.Type)}
		}
		tx.Type = uint8(*d.Type)
	}
	missing := func(field string) error {
		return &FieldError{Object: object, Field: field, Err: ErrMissingField}
	}
	switch {
	case d.From == nil:
		return nil, nil, missing("from")
	case d.Gas == nil:
		return nil, nil, missing("gas")
	case d.Input == nil:
		return nil, nil, missing("input")
	case d.Nonce == nil:
		return nil, nil, missing("nonce")
	case d.Value == nil:
		return nil, nil, missing("value")
	case d.R == nil:
		return nil, nil, missing("r")
	case d.S == nil:
		return nil, nil, missing("s")
	case d.V == nil && (d.YParity == nil || tx.Type == LegacyTxType):
		return nil, nil, missing("v")
	case tx.Type <= AccessListTxType && d.GasPrice == nil:
		return nil, nil, missing("gasPrice")
	case tx.Type >= DynamicFeeTxType && d.MaxFeePerGas == nil:
		return nil, nil, missing("maxFeePerGas")
	case tx.Type >= DynamicFeeTxType && d.MaxPriorityFeePerGas == nil:
		return nil, nil, missing("maxPriorityFeePerGas")
	case tx.Type >= AccessListTxType && d.ChainID == nil:
		return nil, nil, missing("chainId")
	case tx.Type >= AccessListTxType && d.AccessList == nil:
		return nil, nil, missing("accessList")
	case tx.Type >= BlobTxType && d.To == nil:
		return nil, nil, missing("to")
	case tx.Type == BlobTxType && d.MaxFeePerBlobGas == nil:
		return nil, nil, missing("maxFeePerBlobGas")
	case tx.Type == BlobTxType && d.BlobVersionedHashes == nil:
		return nil, nil, missing("blobVersionedHashes")
	case tx.Type == BlobTxType && len(d.BlobVersionedHashes) == 0:
		return nil, nil, &FieldError{Object: object, Field: "blobVersionedHashes", Err: ErrEmptyList}
	case tx.Type == SetCodeTxType && d.AuthorizationList == nil:
		return nil, nil, missing("authorizationList")
	case tx.Type == SetCodeTxType && len(d.AuthorizationList) == 0:
		return nil, nil, &FieldError{Object: object, Field: "authorizationList", Err: ErrEmptyList}
	}
	tx.From = *d.From
	tx.Gas = uint64(*d.Gas)
	tx.Input = *d.Input
	tx.Nonce = uint64(*d.Nonce)
	tx.Value = uint256.Int(*d.Value)
	tx.R = uint256.Int(*d.R)
	tx.S = uint256.Int(*d.S)
	if d.V != nil {
		tx.V = uint256.Int(*d.V)
	}
	if tx.Type != LegacyTxType && d.V != nil && !isYParity(&tx.V) {
		return nil, nil, &FieldError{Object: object, Field: "v", Err: ErrInvalidYParity}
	}
	if d.YParity != nil && tx.Type != LegacyTxType {
		if d.V != nil && !tx.V.Eq(uint256.NewInt(uint64(*d.YParity))) {
			return nil, nil, &FieldError{Object: object, Field: "yParity", Err: fmt.Errorf("%s does not match v %s", d.YParity, hexutil.EncodeU256(&tx.V))}
		}
		tx.V.SetUint64(uint64(*d.YParity))
	}
	tx.GasPrice = (*uint256.Int)(d.GasPrice)
	if tx.Type >= DynamicFeeTxType {
		tx.MaxFeePerGas = (*uint256.Int)(d.MaxFeePerGas)
		tx.MaxPriorityFeePerGas = (*uint256.Int)(d.MaxPriorityFeePerGas)
	}
	tx.ChainID = (*uint256.Int)(d.ChainID)
	tx.To = d.To
	if tx.Type >= AccessListTxType {
		tx.AccessList = *d.AccessList
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
	return tx, &d.positionJSON, nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *AccessTuple) UnmarshalJSON(input []byte) error {
	var d struct {
		Address     *Address `json:"address"`
		StorageKeys *[]Hash  `json:"storageKeys"`
	}
	if err := json.Unmarshal(input, &d); err != nil {
		return err
	}
	switch {
	case d.Address == nil:
		return &FieldError{Object: "access list entry", Field: "address", Err: ErrMissingField}
	case d.StorageKeys == nil:
		return &FieldError{Object: "access list entry", Field: "storageKeys", Err: ErrMissingField}
	}
	*t = AccessTuple{Address: *d.Address, StorageKeys: *d.StorageKeys}
	return nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (a *SetCodeAuthorization) UnmarshalJSON(input []byte) error {
	var d struct {
		ChainID *hexutil.U256   `json:"chainId"`
		Address *Address        `json:"address"`
		Nonce   *hexutil.Uint64 `json:"nonce"`
		YParity *hexutil.Uint64 `json:"yParity"`
		R       *hexutil.U256   `json:"r"`
		S       *hexutil.U256   `json:"s"`
	}
	if err := json.Unmarshal(input, &d); err != nil {
		return err
	}
	missing := func(field string) error {
		return &FieldError{Object: "authorization", Field: field, Err: ErrMissingField}
	}
	switch {
	case d.ChainID == nil:
		return missing("chainId")
	case d.Address == nil:
		return missing("address")
	case d.Nonce == nil:
		return missing("nonce")
	case d.YParity == nil:
		return missing("yParity")
	case d.R == nil:
		return missing("r")
	case d.S == nil:
		return missing("s")
	case *d.YParity > 0xff:
		return &FieldError{Object: "authorization", Field: "yParity", Err: errors.New("out of range")}
	}
	*a = SetCodeAuthorization{
		ChainID: uint256.Int(*d.ChainID),
		Address: *d.Address,
		Nonce:   uint64(*d.Nonce),
		YParity: uint8(*d.YParity),
		R:       uint256.Int(*d.R),
		S:       uint256.Int(*d.S),
	}
	return nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (wd *Withdrawal) UnmarshalJSON(input []byte) error {
	var d struct {
		Index          *hexutil.Uint64 `json:"index"`
		ValidatorIndex *hexutil.Uint64 `json:"validatorIndex"`
		Address        *Address        `json:"address"`
		Amount         *hexutil.Uint64 `json:"amount"`
	}
	if err := json.Unmarshal(input, &d); err != nil {
		return err
	}
	missing := func(field string) error {
		return &FieldError{Object: "withdrawal", Field: field, Err: ErrMissingField}
	}
	switch {
	case d.Index == nil:
		return missing("index")
	case d.ValidatorIndex == nil:
		return missing("validatorIndex")
	case d.Address == nil:
		return missing("address")
	case d.Amount == nil:
		return missing("amount")
	}
	*wd = Withdrawal{Index: uint64(*d.Index), ValidatorIndex: uint64(*d.ValidatorIndex), Address: *d.Address, Amount: uint64(*d.Amount)}
	return nil
}
