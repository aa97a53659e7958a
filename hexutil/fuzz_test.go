package hexutil

import (
	"bytes"
	"encoding/hex"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/holiman/uint256"
)

// The fuzz targets check the decoders against independent references from
// the standard library, with go-ethereum's acceptance rules applied on top.

func FuzzDecodeUint64(f *testing.F) {
	for _, s := range []string{"0x0", "0x1", "0X1F", "0x01", "0x", "", "1", "0xffffffffffffffff", "0x10000000000000000", "0xg"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := DecodeUint64(s)
		want, wantErr := referenceUint64(s)
		if err != wantErr || got != want {
			t.Fatalf("DecodeUint64(%q) = %d, %v; reference %d, %v", s, got, err, want, wantErr)
		}
		if err == nil {
			if enc := EncodeUint64(got); !strings.EqualFold(enc, s) {
				t.Fatalf("EncodeUint64(DecodeUint64(%q)) = %q", s, enc)
			}
		}
	})
}

// referenceUint64 is go-ethereum's DecodeUint64: prefix and leading-zero rules
// first, then strconv.ParseUint.
func referenceUint64(s string) (uint64, error) {
	switch {
	case s == "":
		return 0, ErrEmptyString
	case len(s) < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'):
		return 0, ErrMissingPrefix
	case len(s) == 2:
		return 0, ErrEmptyNumber
	case len(s) > 3 && s[2] == '0':
		return 0, ErrLeadingZero
	}
	v, err := strconv.ParseUint(s[2:], 16, 64)
	if err != nil {
		if err.(*strconv.NumError).Err == strconv.ErrRange {
			return 0, ErrUint64Range
		}
		return 0, ErrSyntax
	}
	return v, nil
}

func FuzzDecodeU256(f *testing.F) {
	for _, s := range []string{"0x0", "0x1", "0xABCDEF0123456789abcdef0123456789", "0x01", "0x", "0x" + strings.Repeat("f", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var z uint256.Int
		err := DecodeU256(s, &z)
		digits, checkErr := checkNumber(s)
		if checkErr != nil {
			if err != checkErr {
				t.Fatalf("DecodeU256(%q) error %v, want %v", s, err, checkErr)
			}
			return
		}
		want, ok := new(big.Int).SetString(digits, 16)
		switch {
		case len(digits) > 64:
			if err != ErrBig256Range {
				t.Fatalf("DecodeU256(%q) error %v, want range error", s, err)
			}
		case !ok || strings.ContainsAny(digits, "_+-"):
			if err != ErrSyntax {
				t.Fatalf("DecodeU256(%q) error %v, want syntax error", s, err)
			}
		default:
			if err != nil || z.ToBig().Cmp(want) != 0 {
				t.Fatalf("DecodeU256(%q) = %s, %v; want %s", s, z.Hex(), err, want.Text(16))
			}
			if enc := string(AppendU256(nil, &z)); enc != "0x"+want.Text(16) {
				t.Fatalf("AppendU256 = %s, want 0x%s", enc, want.Text(16))
			}
		}
	})
}

func FuzzBytes(f *testing.F) {
	for _, b := range [][]byte{nil, {0}, {0xde, 0xad, 0xbe, 0xef}} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		enc := AppendBytes([]byte("prefix"), b)
		if string(enc) != "prefix0x"+hex.EncodeToString(b) {
			t.Fatalf("AppendBytes(%x) = %q", b, enc)
		}
		dec, err := Decode(string(enc[len("prefix"):]))
		if err != nil || !bytes.Equal(dec, b) {
			t.Fatalf("Decode(AppendBytes(%x)) = %x, %v", b, dec, err)
		}
		// Whatever the bytes, read as a hex string they decode or fail cleanly.
		if out, err := Decode(string(b)); err == nil && 2*len(out)+2 != len(b) {
			t.Fatalf("Decode(%q) = %x: wrong length", b, out)
		}
	})
}
