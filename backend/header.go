package backend

import (
	"slices"

	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
)

// Header is a block header. Fields are named after their JSON-RPC keys.
// Fields that a fork added are pointers, nil in blocks from before it.
//
// A new fork's field is added here, in the four places that list the
// fields: appendRLP (consensus order), appendObject (JSON key order),
// headerJSON (decoding) and Copy.
type Header struct {
	ParentHash       Hash
	Sha3Uncles       Hash
	Miner            Address
	StateRoot        Hash
	TransactionsRoot Hash
	ReceiptsRoot     Hash
	LogsBloom        Bloom
	Difficulty       uint256.Int
	Number           uint64
	GasLimit         uint64
	GasUsed          uint64
	Timestamp        uint64
	ExtraData        []byte
	MixHash          Hash
	Nonce            Nonce

	BaseFeePerGas         *uint256.Int // London (EIP-1559)
	WithdrawalsRoot       *Hash        // Shanghai (EIP-4895)
	BlobGasUsed           *uint64      // Cancun (EIP-4844)
	ExcessBlobGas         *uint64      // Cancun (EIP-4844)
	ParentBeaconBlockRoot *Hash        // Cancun (EIP-4788)
	RequestsHash          *Hash        // Prague (EIP-7685)
}

// HeaderHash returns the hash of a header: the block hash.
func HeaderHash(h *Header) Hash {
	var w rlpWriter
	h.appendRLP(&w)
	return keccak(w.buf)
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

// appendRLP writes the header in consensus order. A fork's optional field
// is written when it or any later one is present, as an empty string if it
// is itself absent, which is how go-ethereum encodes such headers.
func (h *Header) appendRLP(w *rlpWriter) {
	mark := w.list()
	w.bytes(h.ParentHash[:])
	w.bytes(h.Sha3Uncles[:])
	w.bytes(h.Miner[:])
	w.bytes(h.StateRoot[:])
	w.bytes(h.TransactionsRoot[:])
	w.bytes(h.ReceiptsRoot[:])
	w.bytes(h.LogsBloom[:])
	w.u256(&h.Difficulty)
	w.uint64(h.Number)
	w.uint64(h.GasLimit)
	w.uint64(h.GasUsed)
	w.uint64(h.Timestamp)
	w.bytes(h.ExtraData)
	w.bytes(h.MixHash[:])
	w.bytes(h.Nonce[:])

	// forks counts the fork fields to write: up to the last one present.
	forks := 0
	switch {
	case h.RequestsHash != nil:
		forks = 6
	case h.ParentBeaconBlockRoot != nil:
		forks = 5
	case h.ExcessBlobGas != nil:
		forks = 4
	case h.BlobGasUsed != nil:
		forks = 3
	case h.WithdrawalsRoot != nil:
		forks = 2
	case h.BaseFeePerGas != nil:
		forks = 1
	}
	if forks >= 1 {
		w.optionalU256(h.BaseFeePerGas)
	}
	if forks >= 2 {
		w.optionalHash(h.WithdrawalsRoot)
	}
	if forks >= 3 {
		w.optionalUint64(h.BlobGasUsed)
	}
	if forks >= 4 {
		w.optionalUint64(h.ExcessBlobGas)
	}
	if forks >= 5 {
		w.optionalHash(h.ParentBeaconBlockRoot)
	}
	if forks >= 6 {
		w.optionalHash(h.RequestsHash)
	}
	w.endList(mark)
}

// objectParts are the members of a block object that are not header fields.
type objectParts struct {
	hash    Hash
	size    uint64
	td      *uint256.Int // nil: "totalDifficulty": null
	pending bool         // hash, logsBloom, nonce and number are null
	// block is nil for an uncle, which has no "transactions" member and
	// "uncles": [].
	block  *Block
	fullTx bool
	// txs decodes the transactions of a lent block, and err keeps its
	// error.
	txs TransactionDecoder
	err error
}

// appendObject writes a block object: the header fields and the parts, in
// the sorted key order of go-ethereum's output.
func (h *Header) appendObject(dst []byte, p *objectParts) []byte {
	dst = append(dst, '{')
	if h.BaseFeePerGas != nil {
		dst = appendU256Member(dst, `"baseFeePerGas":`, h.BaseFeePerGas)
	}
	if h.BlobGasUsed != nil {
		dst = appendUint64Member(dst, `"blobGasUsed":`, *h.BlobGasUsed)
	}
	dst = appendU256Member(dst, `"difficulty":`, &h.Difficulty)
	if h.ExcessBlobGas != nil {
		dst = appendUint64Member(dst, `"excessBlobGas":`, *h.ExcessBlobGas)
	}
	dst = appendBytesMember(dst, `"extraData":`, h.ExtraData)
	dst = appendUint64Member(dst, `"gasLimit":`, h.GasLimit)
	dst = appendUint64Member(dst, `"gasUsed":`, h.GasUsed)
	if p.pending {
		dst = append(dst, `"hash":null,"logsBloom":null,`...)
	} else {
		dst = appendBytesMember(dst, `"hash":`, p.hash[:])
		dst = appendBytesMember(dst, `"logsBloom":`, h.LogsBloom[:])
	}
	dst = appendBytesMember(dst, `"miner":`, h.Miner[:])
	dst = appendBytesMember(dst, `"mixHash":`, h.MixHash[:])
	if p.pending {
		dst = append(dst, `"nonce":null,"number":null,`...)
	} else {
		dst = appendBytesMember(dst, `"nonce":`, h.Nonce[:])
		dst = appendUint64Member(dst, `"number":`, h.Number)
	}
	if h.ParentBeaconBlockRoot != nil {
		dst = appendBytesMember(dst, `"parentBeaconBlockRoot":`, h.ParentBeaconBlockRoot[:])
	}
	dst = appendBytesMember(dst, `"parentHash":`, h.ParentHash[:])
	dst = appendBytesMember(dst, `"receiptsRoot":`, h.ReceiptsRoot[:])
	if h.RequestsHash != nil {
		dst = appendBytesMember(dst, `"requestsHash":`, h.RequestsHash[:])
	}
	dst = appendBytesMember(dst, `"sha3Uncles":`, h.Sha3Uncles[:])
	dst = appendUint64Member(dst, `"size":`, p.size)
	dst = appendBytesMember(dst, `"stateRoot":`, h.StateRoot[:])
	dst = appendUint64Member(dst, `"timestamp":`, h.Timestamp)
	if p.td != nil {
		dst = appendU256Member(dst, `"totalDifficulty":`, p.td)
	} else {
		dst = append(dst, `"totalDifficulty":null,`...)
	}
	if p.block != nil {
		dst = p.block.appendTransactions(dst, p)
	}
	dst = appendBytesMember(dst, `"transactionsRoot":`, h.TransactionsRoot[:])
	if p.block != nil {
		dst = p.block.appendUncles(dst)
	} else {
		dst = append(dst, `"uncles":[],`...)
	}
	if h.WithdrawalsRoot != nil {
		if p.block != nil {
			dst = p.block.appendWithdrawals(dst)
		}
		dst = appendBytesMember(dst, `"withdrawalsRoot":`, h.WithdrawalsRoot[:])
	}
	return closeObject(dst)
}

// headerJSON is a block or uncle object as decoded, before it is checked:
// every member is a pointer, nil when absent or null.
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

// pending reports whether the object is the pending block's, which a null
// or absent number marks.
func (d *headerJSON) pending() bool { return d.Number == nil }

// check reports the first required member that is absent. The pending
// block's hash, nonce and logsBloom may be null. The roots a block's
// contents determine (sha3Uncles, transactionsRoot) may be absent, for the
// caller to compute.
func (d *headerJSON) check(object string) error {
	pending := d.pending()
	var field string
	switch {
	case d.ParentHash == nil:
		field = "parentHash"
	case d.Miner == nil:
		field = "miner"
	case d.StateRoot == nil:
		field = "stateRoot"
	case d.ReceiptsRoot == nil:
		field = "receiptsRoot"
	case d.LogsBloom == nil && !pending:
		field = "logsBloom"
	case d.Difficulty == nil:
		field = "difficulty"
	case d.GasLimit == nil:
		field = "gasLimit"
	case d.GasUsed == nil:
		field = "gasUsed"
	case d.Timestamp == nil:
		field = "timestamp"
	case d.ExtraData == nil:
		field = "extraData"
	case d.MixHash == nil:
		field = "mixHash"
	case d.Nonce == nil && !pending:
		field = "nonce"
	default:
		return nil
	}
	return &FieldError{Object: object, Field: field, Err: ErrMissingField}
}

// header returns the header of an object that check has passed. What is
// absent is left zero.
func (d *headerJSON) header() Header {
	h := Header{
		ParentHash:            *d.ParentHash,
		Miner:                 *d.Miner,
		StateRoot:             *d.StateRoot,
		ReceiptsRoot:          *d.ReceiptsRoot,
		Difficulty:            uint256.Int(*d.Difficulty),
		GasLimit:              uint64(*d.GasLimit),
		GasUsed:               uint64(*d.GasUsed),
		Timestamp:             uint64(*d.Timestamp),
		ExtraData:             *d.ExtraData,
		MixHash:               *d.MixHash,
		BaseFeePerGas:         (*uint256.Int)(d.BaseFeePerGas),
		WithdrawalsRoot:       d.WithdrawalsRoot,
		BlobGasUsed:           (*uint64)(d.BlobGasUsed),
		ExcessBlobGas:         (*uint64)(d.ExcessBlobGas),
		ParentBeaconBlockRoot: d.ParentBeaconBlockRoot,
		RequestsHash:          d.RequestsHash,
	}
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
	return h
}

// derived returns the members that are not header fields: what is absent
// is zero, and an absent total difficulty is nil.
func (d *headerJSON) derived() (hash Hash, size uint64, td *uint256.Int) {
	if d.Hash != nil {
		hash = *d.Hash
	}
	if d.Size != nil {
		size = uint64(*d.Size)
	}
	return hash, size, (*uint256.Int)(d.TotalDifficulty)
}
