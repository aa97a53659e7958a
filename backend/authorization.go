package backend

import (
	"encoding/json"
	"errors"

	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
)

// SetCodeAuthorization is an EIP-7702 authorization to set an account's code.
type SetCodeAuthorization struct {
	ChainID uint256.Int
	Address Address
	Nonce   uint64
	YParity uint8
	R, S    uint256.Int
}

func (w *rlpWriter) authorizationList(auths []SetCodeAuthorization) {
	mark := w.list()
	for i := range auths {
		a := &auths[i]
		item := w.list()
		w.u256(&a.ChainID)
		w.bytes(a.Address[:])
		w.uint64(a.Nonce)
		w.uint64(uint64(a.YParity))
		w.u256(&a.R)
		w.u256(&a.S)
		w.endList(item)
	}
	w.endList(mark)
}

func appendAuthorizations(dst []byte, auths []SetCodeAuthorization) []byte {
	dst = append(dst, `"authorizationList":[`...)
	for i := range auths {
		dst = append(auths[i].appendObject(dst), ',')
	}
	return closeArray(dst, len(auths))
}

// appendObject writes the authorization as go-ethereum's
// types.SetCodeAuthorization marshals.
func (a *SetCodeAuthorization) appendObject(dst []byte) []byte {
	dst = appendU256Member(append(dst, '{'), `"chainId":`, &a.ChainID)
	dst = appendBytesMember(dst, `"address":`, a.Address[:])
	dst = appendUint64Member(dst, `"nonce":`, a.Nonce)
	dst = appendUint64Member(dst, `"yParity":`, uint64(a.YParity))
	dst = appendU256Member(dst, `"r":`, &a.R)
	dst = appendU256Member(dst, `"s":`, &a.S)
	return closeObject(dst)
}

// MarshalJSON implements json.Marshaler, by value as Withdrawal's.
func (a SetCodeAuthorization) MarshalJSON() ([]byte, error) {
	return a.appendObject(nil), nil
}

// errYParityRange is for an authorization's yParity that does not fit the
// byte the signature gives it.
var errYParityRange = errors.New("out of range")

// UnmarshalJSON implements json.Unmarshaler. Every member is required.
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
	var field string
	switch {
	case d.ChainID == nil:
		field = "chainId"
	case d.Address == nil:
		field = "address"
	case d.Nonce == nil:
		field = "nonce"
	case d.YParity == nil:
		field = "yParity"
	case d.R == nil:
		field = "r"
	case d.S == nil:
		field = "s"
	case *d.YParity > 0xff:
		return &FieldError{Object: "authorization", Field: "yParity", Err: errYParityRange}
	default:
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
	return &FieldError{Object: "authorization", Field: field, Err: ErrMissingField}
}
