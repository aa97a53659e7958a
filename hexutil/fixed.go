package hexutil

import (
	"fmt"
	"reflect"
)

// LengthError reports a fixed-size byte string, such as a hash or an
// address, of the wrong length. Its message is go-ethereum's.
type LengthError struct {
	Digits, Want int    // hex digits given and wanted
	TypeName     string // the type decoded, or "" when none was named
}

// Error returns the message go-ethereum gives, naming the type when there
// is one: "hex string has length 62, want 64 for common.Hash".
func (e *LengthError) Error() string {
	msg := fmt.Sprintf("hex string has length %d, want %d", e.Digits, e.Want)
	if e.TypeName != "" {
		msg += " for " + e.TypeName
	}
	return msg
}

// DecodeFixed decodes a byte string with 0x prefix that must be exactly
// len(out) bytes long, as a hash or an address is. A wrong length is a
// *LengthError naming no type. On error out is unchanged.
func DecodeFixed(input, out []byte) error {
	return UnmarshalFixedText("", input, out)
}

// UnmarshalFixedText decodes input, a byte string with 0x prefix, into out,
// whose length is the length required. It is the UnmarshalText of a
// fixed-size type: a wrong length is a *LengthError naming typname, and the
// other errors are the plain decoding errors. On error out is unchanged.
func UnmarshalFixedText(typname string, input, out []byte) error {
	if !has0xPrefix(input) {
		if len(input) == 0 {
			return &LengthError{Digits: 0, Want: 2 * len(out), TypeName: typname}
		}
		return ErrMissingPrefix
	}
	digits := input[2:]
	if len(digits)%2 != 0 {
		return ErrOddLength
	}
	if len(digits) != 2*len(out) {
		return &LengthError{Digits: len(digits), Want: 2 * len(out), TypeName: typname}
	}
	// Every digit is checked before out is written, so that a failed
	// decoding leaves it as it was.
	for _, c := range digits {
		if nibbles[c] == badNibble {
			return ErrSyntax
		}
	}
	return decodeDigits(out, digits)
}

// UnmarshalFixedJSON is the UnmarshalJSON of a fixed-size type: it decodes
// a JSON string as UnmarshalFixedText does, naming typ. The length error is
// returned as it is, since it names the type already; the other errors are
// *json.UnmarshalTypeError, as go-ethereum's are: "json: cannot unmarshal
// invalid hex string into Go value of type common.Hash".
func UnmarshalFixedJSON(typ reflect.Type, input, out []byte) error {
	s, err := jsonString(input, typ)
	if err != nil {
		return err
	}
	return wrapTypeError(UnmarshalFixedText(typ.String(), s, out), typ)
}
