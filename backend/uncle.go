package backend

import (
	"encoding/json"

	"github.com/holiman/uint256"
)

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

// UncleSize returns the size go-ethereum reports for an uncle: that of a
// block made of the header alone, without even a withdrawals list.
func UncleSize(h *Header) uint64 {
	return blockSize(h, nil, nil, nil, false)
}

// Copy returns a deep copy of u, nil for nil.
func (u *Uncle) Copy() *Uncle {
	if u == nil {
		return nil
	}
	c := *u
	c.Header = u.Header.Copy()
	c.TotalDifficulty = copyPtr(u.TotalDifficulty)
	return &c
}

// AppendJSON appends the uncle object.
func (u *Uncle) AppendJSON(dst []byte) []byte {
	return u.Header.appendObject(dst, &objectParts{hash: u.Hash, size: u.Size, td: u.TotalDifficulty})
}

// MarshalJSON implements json.Marshaler, by value as Block's.
func (u Uncle) MarshalJSON() ([]byte, error) {
	return u.AppendJSON(nil), nil
}

// UnmarshalJSON reads an uncle object as eth_getUncleByBlockHashAndIndex
// answers it. Absent hash and size are left zero. An uncle is never
// pending, so its number is required.
func (u *Uncle) UnmarshalJSON(input []byte) error {
	var d headerJSON
	if err := json.Unmarshal(input, &d); err != nil {
		return err
	}
	if err := d.check("uncle"); err != nil {
		return err
	}
	if d.pending() {
		return &FieldError{Object: "uncle", Field: "number", Err: ErrMissingField}
	}
	out := Uncle{Header: d.header()}
	out.Hash, out.Size, out.TotalDifficulty = d.derived()
	*u = out
	return nil
}
