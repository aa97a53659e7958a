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

// text is what the internal decoders read: a Go string, or a JSON string's
// bytes as they sit in a request body. Reading either in place needs no
// conversion, and so no allocation, on the path of every request.
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
func Decode(input string) ([]byte, error) {
	b, err := decodeBytes(input)
	if err == ErrOddLength {
		// go-ethereum's Decode, through encoding/hex, tells a bad digit
		// before the odd length; its Bytes, like decodeBytes, the length.
		for i := 2; i < len(input); i++ {
			if nibbles[input[i]] == badNibble {
				return nil, ErrSyntax
			}
		}
	}
	return b, err
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
func DecodeUint64(input string) (uint64, error) {
	digits, err := checkNumber(input)
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
func DecodeU256(input string, z *uint256.Int) error {
	return decodeU256(input, z)
}

func decodeU256[T text](s T, z *uint256.Int) error {
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
