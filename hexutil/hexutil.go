// Package hexutil implements the hex encoding of the Ethereum JSON-RPC API:
// byte strings as "0x" followed by an even number of hex digits, and
// quantities as "0x" followed by the shortest hex form of the number ("0x0"
// for zero, never leading zeros).
//
// The decoders are strict in the way go-ethereum's common/hexutil is, and
// return the same errors with the same messages, because those messages are
// what Ethereum clients and their users already recognise. Upper-case digits
// and the "0X" prefix are accepted, as go-ethereum accepts them.
//
// The Append functions write into a caller's buffer and allocate only to
// grow it; they are the encoding path of every answer the service gives.
package hexutil

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/holiman/uint256"
)

// Decoding errors. Their messages are those of go-ethereum's hexutil.
var (
	ErrEmptyString   = errors.New("empty hex string")
	ErrSyntax        = errors.New("invalid hex string")
	ErrMissingPrefix = errors.New("hex string without 0x prefix")
	ErrOddLength     = errors.New("hex string of odd length")
	ErrEmptyNumber   = errors.New("hex string \"0x\"")
	ErrLeadingZero   = errors.New("hex number with leading zero digits")
	ErrUint64Range   = errors.New("hex number > 64 bits")
	ErrUintRange     = fmt.Errorf("hex number > %d bits", bits.UintSize)
	ErrBig256Range   = errors.New("hex number > 256 bits")
)

// text is the input of the decoders: a JSON string's bytes as they sit in a
// request body, or a Go string. Decoding either needs no conversion and so no
// allocation.
type text interface{ ~string | ~[]byte }

const badNibble = 0xff

// nibbles maps an ASCII byte to its value as a hex digit, or badNibble.
var nibbles = func() (t [256]byte) {
	for i := range t {
		t[i] = badNibble
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
		t[c-'a'+'A'] = byte(c-'a') + 10
	}
	return t
}()

func has0xPrefix[T text](s T) bool {
	return len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
}

// Decode decodes a byte string with 0x prefix. "0x" is the empty byte string.
func Decode(s string) ([]byte, error) {
	return decodeBytes(s)
}

func decodeBytes[T text](s T) ([]byte, error) {
	if len(s) == 0 {
		return nil, ErrEmptyString
	}
	if !has0xPrefix(s) {
		return nil, ErrMissingPrefix
	}
	digits := s[2:]
	if len(digits)%2 != 0 {
		return nil, ErrOddLength
	}
	out := make([]byte, len(digits)/2)
	if err := decodeDigits(out, digits); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeFixed decodes a byte string with 0x prefix that must be exactly
// len(out) bytes long, as a hash or an address is. On error out is unchanged.
func DecodeFixed[T text](s T, out []byte) error {
	if !has0xPrefix(s) {
		if len(s) == 0 {
			return fixedLengthError(0, len(out))
		}
		return ErrMissingPrefix
	}
	digits := s[2:]
	if len(digits)%2 != 0 {
		return ErrOddLength
	}
	if len(digits) != 2*len(out) {
		return fixedLengthError(len(digits), len(out))
	}
	for i := 0; i < len(digits); i++ {
		if nibbles[digits[i]] == badNibble {
			return ErrSyntax
		}
	}
	return decodeDigits(out, digits)
}

// LengthError reports a fixed-size byte string of the wrong length. Its
// message names the digits, as go-ethereum's does.
type LengthError struct {
	Digits, Want int // hex digits given and wanted
}

// Error returns the message go-ethereum gives.
func (e *LengthError) Error() string {
	return fmt.Sprintf("hex string has length %d, want %d", e.Digits, e.Want)
}

func fixedLengthError(digits, size int) error {
	return &LengthError{Digits: digits, Want: 2 * size}
}

func decodeDigits[T text](out []byte, digits T) error {
	for i := range out {
		hi, lo := nibbles[digits[2*i]], nibbles[digits[2*i+1]]
		if hi == badNibble || lo == badNibble {
			return ErrSyntax
		}
		out[i] = hi<<4 | lo
	}
	return nil
}

// checkNumber returns the digits of a quantity, or the reason it is not one.
func checkNumber[T text](s T) (T, error) {
	if len(s) == 0 {
		return s, ErrEmptyString
	}
	if !has0xPrefix(s) {
		return s, ErrMissingPrefix
	}
	digits := s[2:]
	if len(digits) == 0 {
		return s, ErrEmptyNumber
	}
	if len(digits) > 1 && digits[0] == '0' {
		return s, ErrLeadingZero
	}
	return digits, nil
}

// DecodeUint64 decodes a quantity that fits in 64 bits.
func DecodeUint64[T text](s T) (uint64, error) {
	digits, err := checkNumber(s)
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := 0; i < len(digits); i++ {
		n := nibbles[digits[i]]
		if n == badNibble {
			return 0, ErrSyntax
		}
		if v>>60 != 0 {
			// Reported at the first digit that overflows, before any later
			// syntax error, exactly as go-ethereum (strconv) reports it.
			return 0, ErrUint64Range
		}
		v = v<<4 | uint64(n)
	}
	return v, nil
}

// DecodeU256 decodes a quantity of at most 256 bits into z. As in
// go-ethereum, an over-long number is a range error before it is a syntax
// error. On error z is unchanged.
func DecodeU256[T text](s T, z *uint256.Int) error {
	digits, err := checkNumber(s)
	if err != nil {
		return err
	}
	if len(digits) > 64 {
		return ErrBig256Range
	}
	var words [4]uint64
	end := len(digits)
	for w := 0; end > 0; w++ {
		start := max(end-16, 0)
		for i := start; i < end; i++ {
			n := nibbles[digits[i]]
			if n == badNibble {
				return ErrSyntax
			}
			words[w] = words[w]<<4 | uint64(n)
		}
		end = start
	}
	*z = words
	return nil
}

// Encode returns b as a 0x-prefixed byte string.
func Encode(b []byte) string {
	return string(AppendBytes(make([]byte, 0, 2+2*len(b)), b))
}

// EncodeUint64 returns v as a quantity.
func EncodeUint64(v uint64) string {
	var buf [18]byte
	return string(AppendUint64(buf[:0], v))
}

// EncodeU256 returns z as a quantity.
func EncodeU256(z *uint256.Int) string {
	var buf [66]byte
	return string(AppendU256(buf[:0], z))
}
