package backend

import (
	"errors"
	"fmt"

	"github.com/blockrpc/blockrpc/hexutil"
)

// FieldError reports a field that is missing or invalid: a member of a JSON
// object being decoded, or a field of a value being validated.
type FieldError struct {
	// Object names what holds the field, as "block", "uncle",
	// "transaction 3" or "withdrawal". It is empty when the error comes
	// from a method of the object itself, whose caller knows which it is.
	Object string
	Field  string // the JSON key; empty when the error is about the whole object
	Err    error
}

// Error returns the object, the field and what is wrong with it.
func (e *FieldError) Error() string {
	msg := e.Err.Error()
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	if e.Object != "" {
		msg = e.Object + ": " + msg
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *FieldError) Unwrap() error { return e.Err }

// Errors of a FieldError.
var (
	// ErrMissingField is for an absent required field.
	ErrMissingField = errors.New("missing required field")
	// ErrEmptyList is for a list that may not be empty: the blob hashes of a
	// blob transaction (EIP-4844), the authorizations of a set-code one
	// (EIP-7702).
	ErrEmptyList = errors.New("must not be empty")
	// ErrInvalidYParity is for a typed transaction's v other than 0 or 1.
	ErrInvalidYParity = errors.New("a typed transaction's v is its y-parity, 0 or 1")
	// ErrUnsupportedType is for a transaction type this package does not
	// know; the error names the type after it.
	ErrUnsupportedType = errors.New("unsupported transaction type")
)

// unsupportedType returns the error for a transaction type above the last
// known one, or nil. The type is checked as a uint64 because that is how it
// is decoded, before it is narrowed to the uint8 a Transaction holds.
func unsupportedType(t uint64) error {
	if t <= SetCodeTxType {
		return nil
	}
	return fmt.Errorf("%w %s", ErrUnsupportedType, hexutil.EncodeUint64(t))
}
