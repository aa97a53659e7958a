package backend

import (
	"github.com/holiman/uint256"
)

// Header is a block header. Fields are named after their JSON-RPC keys.
// Fields that a fork added are pointers, nil in blocks from before it.
//
// A new fork's field is added here, in the three places that list the
// fields: appendRLP (consensus order), appendObject (JSON key order), and
// headerJSON (decoding).
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
		dst = p.block.appendTransactions(dst, p.fullTx, p.pending)
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
