package backend

import (
	"encoding/json"

	"github.com/blockrpc/blockrpc/hexutil"
)

// Withdrawal is an EIP-4895 validator withdrawal from the consensus layer.
type Withdrawal struct {
	Index          uint64
	ValidatorIndex uint64
	Address        Address
	Amount         uint64 // in Gwei
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

func (wd *Withdrawal) appendRLP(w *rlpWriter) {
	mark := w.list()
	w.uint64(wd.Index)
	w.uint64(wd.ValidatorIndex)
	w.bytes(wd.Address[:])
	w.uint64(wd.Amount)
	w.endList(mark)
}

func (wd *Withdrawal) appendObject(dst []byte) []byte {
	dst = appendUint64Member(append(dst, '{'), `"index":`, wd.Index)
	dst = appendUint64Member(dst, `"validatorIndex":`, wd.ValidatorIndex)
	dst = appendBytesMember(dst, `"address":`, wd.Address[:])
	dst = appendUint64Member(dst, `"amount":`, wd.Amount)
	return closeObject(dst)
}

// MarshalJSON implements json.Marshaler.
func (wd Withdrawal) MarshalJSON() ([]byte, error) {
	return wd.appendObject(nil), nil
}

// UnmarshalJSON implements json.Unmarshaler. Every member is required.
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
	var field string
	switch {
	case d.Index == nil:
		field = "index"
	case d.ValidatorIndex == nil:
		field = "validatorIndex"
	case d.Address == nil:
		field = "address"
	case d.Amount == nil:
		field = "amount"
	default:
		*wd = Withdrawal{Index: uint64(*d.Index), ValidatorIndex: uint64(*d.ValidatorIndex), Address: *d.Address, Amount: uint64(*d.Amount)}
		return nil
	}
	return &FieldError{Object: "withdrawal", Field: field, Err: ErrMissingField}
}
