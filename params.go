package blockrpc

import (
	"errors"
	"fmt"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
)

// readParams decodes the arguments of a params array in order, one decoder
// each: all of them required, no more allowed.
func readParams(params []byte, decoders ...func([]byte) error) error {
	args, err := readArgs(params)
	if err != nil {
		return err
	}
	for _, decode := range decoders {
		if err := args.next(decode); err != nil {
			return err
		}
	}
	return args.end()
}

// args reads positional parameters one by one, reporting errors as
// go-ethereum does and in the same order: an argument is checked before any
// later one is looked at.
//
// Where this service's specification is stricter than go-ethereum (a null
// fullTx, an empty uncle index), go-ethereum would take the value and go
// on, so such a refusal is held back until every other check has passed:
// a request go-ethereum refuses gets go-ethereum's error.
type args struct {
	raw     []byte // the params array, or nil
	pos     int    // next position in raw
	n       int    // arguments read so far
	refusal error  // the first held-back refusal, if any
}

// stricterError is an argument go-ethereum accepts and this service
// refuses.
type stricterError struct{ msg string }

func (e *stricterError) Error() string { return e.msg }

// readArgs starts reading a params value: an array, or absent or null for
// no arguments.
func readArgs(params []byte) (args, error) {
	if len(params) == 0 || string(params) == "null" {
		return args{}, nil
	}
	if params[0] != '[' {
		return args{}, &rpcError{codeInvalidParams, "non-array args"}
	}
	return args{raw: params, pos: skipSpace(params, 1)}, nil
}

// next decodes the next argument with decode.
func (a *args) next(decode func([]byte) error) error {
	if a.raw == nil || a.raw[a.pos] == ']' {
		return &rpcError{codeInvalidParams, fmt.Sprintf("missing value for required argument %d", a.n)}
	}
	end := valueEnd(a.raw, a.pos)
	if err := decode(a.raw[a.pos:end]); err != nil {
		var stricter *stricterError
		if !errors.As(err, &stricter) {
			return invalidArgument(a.n, err)
		}
		if a.refusal == nil {
			a.refusal = invalidArgument(a.n, err)
		}
	}
	a.n++
	a.pos = nextMember(a.raw, end)
	return nil
}

// end checks that no arguments are left, then reports a held-back refusal.
func (a *args) end() error {
	if a.raw != nil && a.raw[a.pos] != ']' {
		return &rpcError{codeInvalidParams, fmt.Sprintf("too many arguments, want at most %d", a.n)}
	}
	return a.refusal
}

// jsonBool is a boolean argument: JSON true or false, and nothing else.
type jsonBool bool

// UnmarshalJSON accepts only the literals true and false. Unlike
// encoding/json, it refuses null: the specification asks for a boolean.
func (b *jsonBool) UnmarshalJSON(raw []byte) error {
	switch string(raw) {
	case "true":
		*b = true
		return nil
	case "false":
		*b = false
		return nil
	case "null":
		return &stricterError{"json: cannot unmarshal null into Go value of type bool"}
	}
	return errors.New("json: cannot unmarshal " + jsonKind(raw) + " into Go value of type bool")
}

// indexArg is an uncle index: a hex quantity string.
type indexArg uint64

// UnmarshalJSON reads the index as hexutil.Uint does, which refuses the
// empty string where go-ethereum reads it as 0.
func (i *indexArg) UnmarshalJSON(raw []byte) error {
	var index hexutil.Uint
	err := index.UnmarshalJSON(raw)
	if err != nil && string(raw) == `""` {
		return &stricterError{err.Error()}
	}
	*i = indexArg(index)
	return err
}

// hashArg is a hash argument. Its errors name go-ethereum's type, as
// go-ethereum's own messages do ("hex string has length 62, want 64 for
// common.Hash"): clients and their users know those words.
type hashArg backend.Hash

// UnmarshalJSON reads a JSON string of exactly 32 bytes of hex.
func (h *hashArg) UnmarshalJSON(raw []byte) error {
	if len(raw) < 2 || raw[0] != '"' {
		return errors.New("json: cannot unmarshal non-string into Go value of type common.Hash")
	}
	err := hexutil.DecodeFixed(raw[1:len(raw)-1], h[:])
	var short *hexutil.LengthError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &short):
		return errors.New(short.Error() + " for common.Hash")
	}
	return errors.New("json: cannot unmarshal " + err.Error() + " into Go value of type common.Hash")
}

// subscriptionID is the argument of *_unsubscribe: a string, named in
// errors as go-ethereum names it.
type subscriptionID struct{}

// UnmarshalJSON accepts any string, and null, which go-ethereum decodes
// into its string type as "".
func (subscriptionID) UnmarshalJSON(raw []byte) error {
	if raw[0] == '"' || raw[0] == 'n' {
		return nil
	}
	return errors.New("json: cannot unmarshal " + jsonKind(raw) + " into Go value of type rpc.ID")
}

// jsonKind names the kind of a JSON value as encoding/json's errors do.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 'n':
		return "null"
	case 't', 'f':
		return "bool"
	}
	return "number"
}
