package hexutil

import (
	"encoding/json"
	"reflect"

	"github.com/holiman/uint256"
)

// The JSON types below decode strictly: a JSON string holding the hex form,
// nothing else. A decoding error is a *json.UnmarshalTypeError naming the
// type, as go-ethereum's are, e.g. "json: cannot unmarshal hex number with
// leading zero digits into Go value of type hexutil.Uint"; inside a struct,
// encoding/json adds the field to it.
//
// One difference from go-ethereum is deliberate: the empty string "" is an
// error (ErrEmptyString), where go-ethereum reads it as zero or as no bytes.
//
// Their marshalling methods have value receivers, so that a value encodes
// alike whether it is held by value or by pointer, as go-ethereum's do.

var (
	bytesType  = reflect.TypeFor[Bytes]()
	uint64Type = reflect.TypeFor[Uint64]()
	uintType   = reflect.TypeFor[Uint]()
	u256Type   = reflect.TypeFor[U256]()
)

// Bytes is a byte string that marshals as 0x-prefixed hex.
type Bytes []byte

// MarshalText implements encoding.TextMarshaler.
func (b Bytes) MarshalText() ([]byte, error) {
	return AppendBytes(make([]byte, 0, 2+2*len(b)), b), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (b *Bytes) UnmarshalJSON(input []byte) error {
	s, err := jsonString(input, bytesType)
	if err != nil {
		return err
	}
	return wrapTypeError(b.UnmarshalText(s), bytesType)
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *Bytes) UnmarshalText(input []byte) error {
	out, err := decodeBytes(input)
	if err != nil {
		return err
	}
	*b = out
	return nil
}

// String returns the hex form of b.
func (b Bytes) String() string { return Encode(b) }

// Uint64 is a quantity of at most 64 bits.
type Uint64 uint64

// MarshalText implements encoding.TextMarshaler.
func (v Uint64) MarshalText() ([]byte, error) {
	return AppendUint64(make([]byte, 0, 18), uint64(v)), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (v *Uint64) UnmarshalJSON(input []byte) error {
	s, err := jsonString(input, uint64Type)
	if err != nil {
		return err
	}
	return wrapTypeError(v.UnmarshalText(s), uint64Type)
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *Uint64) UnmarshalText(input []byte) error {
	n, err := decodeUint64Text(input)
	if err != nil {
		return err
	}
	*v = Uint64(n)
	return nil
}

// decodeUint64Text decodes a quantity as go-ethereum's JSON types do: more
// than 16 digits is a range error before any digit is looked at (where
// DecodeUint64, like go-ethereum's, reports the first bad digit first).
func decodeUint64Text(input []byte) (uint64, error) {
	digits, err := checkNumber(input)
	if err != nil {
		return 0, err
	}
	if len(digits) > 16 {
		return 0, ErrUint64Range
	}
	var v uint64
	for _, c := range digits {
		n := nibbles[c]
		if n == badNibble {
			return 0, ErrSyntax
		}
		v = v<<4 | uint64(n)
	}
	return v, nil
}

// String returns the hex form of v.
func (v Uint64) String() string { return EncodeUint64(uint64(v)) }

// Uint is a quantity that fits in a uint: an index or a count.
type Uint uint

// MarshalText implements encoding.TextMarshaler.
func (v Uint) MarshalText() ([]byte, error) {
	return Uint64(v).MarshalText()
}

// UnmarshalJSON implements json.Unmarshaler.
func (v *Uint) UnmarshalJSON(input []byte) error {
	s, err := jsonString(input, uintType)
	if err != nil {
		return err
	}
	return wrapTypeError(v.UnmarshalText(s), uintType)
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *Uint) UnmarshalText(input []byte) error {
	n, err := decodeUint64Text(input)
	if err == ErrUint64Range || err == nil && uint64(uint(n)) != n {
		return ErrUintRange
	}
	if err != nil {
		return err
	}
	*v = Uint(n)
	return nil
}

// String returns the hex form of v.
func (v Uint) String() string { return EncodeUint64(uint64(v)) }

// U256 is a quantity of at most 256 bits: a balance, a price, a difficulty.
type U256 uint256.Int

// MarshalText implements encoding.TextMarshaler.
func (z U256) MarshalText() ([]byte, error) {
	return AppendU256(make([]byte, 0, 66), (*uint256.Int)(&z)), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (z *U256) UnmarshalJSON(input []byte) error {
	s, err := jsonString(input, u256Type)
	if err != nil {
		return err
	}
	return wrapTypeError(z.UnmarshalText(s), u256Type)
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (z *U256) UnmarshalText(input []byte) error {
	return decodeU256(input, (*uint256.Int)(z))
}

// String returns the hex form of z.
func (z U256) String() string { return EncodeU256((*uint256.Int)(&z)) }

// jsonString returns the content of a JSON string without its quotes. Escape
// sequences are not decoded: no valid hex string contains one, and go-ethereum
// rejects them the same way, as invalid hex.
func jsonString(input []byte, typ reflect.Type) ([]byte, error) {
	if len(input) < 2 || input[0] != '"' || input[len(input)-1] != '"' {
		return nil, &json.UnmarshalTypeError{Value: "non-string", Type: typ}
	}
	return input[1 : len(input)-1], nil
}

// wrapTypeError gives a decoding error the form of encoding/json's own,
// naming the type. A *LengthError names its type already, and is returned
// as it is, as go-ethereum returns its length error.
func wrapTypeError(err error, typ reflect.Type) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*LengthError); ok {
		return err
	}
	return &json.UnmarshalTypeError{Value: err.Error(), Type: typ}
}
