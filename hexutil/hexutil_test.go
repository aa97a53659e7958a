package hexutil

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/holiman/uint256"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		in   string
		want []byte
		err  error
	}{
		{"", nil, ErrEmptyString},
		{"0", nil, ErrMissingPrefix},
		{"x01", nil, ErrMissingPrefix},
		{"0x0", nil, ErrOddLength},
		{"0x023", nil, ErrOddLength},
		{"0xxx", nil, ErrSyntax},
		{"0x01zz01", nil, ErrSyntax},
		// go-ethereum's Decode (encoding/hex) tells a bad digit before
		// an odd length.
		{"0xg", nil, ErrSyntax},
		{"0x0g1", nil, ErrSyntax},
		{"0x12g", nil, ErrSyntax},
		{"0x", []byte{}, nil},
		{"0X", []byte{}, nil},
		{"0x02", []byte{0x02}, nil},
		{"0X02", []byte{0x02}, nil},
		{"0xffFFfF", []byte{0xff, 0xff, 0xff}, nil},
		{"0x0123456789abcdefABCDEF", []byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xab, 0xcd, 0xef}, nil},
	}
	for _, tt := range tests {
		got, err := Decode(tt.in)
		if !errors.Is(err, tt.err) {
			t.Errorf("Decode(%q) error = %v, want %v", tt.in, err, tt.err)
			continue
		}
		if tt.err == nil && !bytes.Equal(got, tt.want) {
			t.Errorf("Decode(%q) = %x, want %x", tt.in, got, tt.want)
		}
	}
}

func TestDecodeUint64(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		err  error
	}{
		{"", 0, ErrEmptyString},
		{"0", 0, ErrMissingPrefix},
		{"12", 0, ErrMissingPrefix},
		{"0x", 0, ErrEmptyNumber},
		{"0x01", 0, ErrLeadingZero},
		{"0x00", 0, ErrLeadingZero},
		{"0xfffffffffffffffff", 0, ErrUint64Range},
		{"0x10000000000000000", 0, ErrUint64Range},
		// The range error wins over a later syntax error, as in go-ethereum.
		{"0x1ffffffffffffffffzz", 0, ErrUint64Range},
		{"0xx", 0, ErrSyntax},
		{"0x1zz01", 0, ErrSyntax},
		{"0x-1", 0, ErrSyntax},
		{"0x1_0", 0, ErrSyntax},
		{"0x0", 0, nil},
		{"0X0", 0, nil},
		{"0x2", 0x2, nil},
		{"0x2F2", 0x2f2, nil},
		{"0X2F2", 0x2f2, nil},
		{"0x1122aaff", 0x1122aaff, nil},
		{"0xbbb", 0xbbb, nil},
		{"0xffffffffffffffff", math.MaxUint64, nil},
	}
	for _, tt := range tests {
		got, err := DecodeUint64(tt.in)
		if !errors.Is(err, tt.err) {
			t.Errorf("DecodeUint64(%q) error = %v, want %v", tt.in, err, tt.err)
			continue
		}
		if got != tt.want {
			t.Errorf("DecodeUint64(%q) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
}

func TestDecodeU256(t *testing.T) {
	tests := []struct {
		in   string
		want string // decimal
		err  error
	}{
		{"", "", ErrEmptyString},
		{"0", "", ErrMissingPrefix},
		{"0x", "", ErrEmptyNumber},
		{"0x01", "", ErrLeadingZero},
		{"0xx", "", ErrSyntax},
		{"0x1zz01", "", ErrSyntax},
		// Length is checked before syntax, as go-ethereum's DecodeBig does.
		{"0x10000000000000000000000000000000000000000000000000000000000000000", "", ErrBig256Range},
		{"0xzz000000000000000000000000000000000000000000000000000000000000000", "", ErrBig256Range},
		{"0x0", "0", nil},
		{"0x2", "2", nil},
		{"0x2F2", "754", nil},
		{"0X2F2", "754", nil},
		{"0x1122aaff", "287484671", nil},
		{"0x10000000000000000", "18446744073709551616", nil},
		{"0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
			"115792089237316195423570985008687907853269984665640564039457584007913129639935", nil},
	}
	for _, tt := range tests {
		z := uint256.NewInt(77)
		err := DecodeU256(tt.in, z)
		if !errors.Is(err, tt.err) {
			t.Errorf("DecodeU256(%q) error = %v, want %v", tt.in, err, tt.err)
			continue
		}
		if err != nil {
			if z.Uint64() != 77 {
				t.Errorf("DecodeU256(%q) changed its target on error", tt.in)
			}
			continue
		}
		if z.Dec() != tt.want {
			t.Errorf("DecodeU256(%q) = %s, want %s", tt.in, z.Dec(), tt.want)
		}
	}
}

func TestDecodeFixed(t *testing.T) {
	tests := []struct {
		in  string
		err string
	}{
		{"0x0102", ""},
		{"0X0A0b", ""},
		{"", "hex string has length 0, want 4"},
		{"0x", "hex string has length 0, want 4"},
		{"0x01", "hex string has length 2, want 4"},
		{"0x010203", "hex string has length 6, want 4"},
		{"0x010", ErrOddLength.Error()},
		{"0102", ErrMissingPrefix.Error()},
		{"0x01zz", ErrSyntax.Error()},
	}
	for _, tt := range tests {
		out := []byte{0xaa, 0xbb}
		err := DecodeFixed([]byte(tt.in), out)
		if got := errString(err); got != tt.err {
			t.Errorf("DecodeFixed(%q) error = %q, want %q", tt.in, got, tt.err)
		}
		if err != nil && !bytes.Equal(out, []byte{0xaa, 0xbb}) {
			t.Errorf("DecodeFixed(%q) wrote %x on error", tt.in, out)
		}
	}
}

func TestEncode(t *testing.T) {
	if got := Encode(nil); got != "0x" {
		t.Errorf("Encode(nil) = %q", got)
	}
	if got := Encode([]byte{0, 1, 0xab, 0xff}); got != "0x0001abff" {
		t.Errorf("Encode = %q", got)
	}
	uints := map[uint64]string{0: "0x0", 1: "0x1", 0xf: "0xf", 0x10: "0x10", 0x1122aaff: "0x1122aaff", math.MaxUint64: "0xffffffffffffffff"}
	for v, want := range uints {
		if got := EncodeUint64(v); got != want {
			t.Errorf("EncodeUint64(%d) = %q, want %q", v, got, want)
		}
	}
	bigs := map[string]string{
		"0":                    "0x0",
		"1":                    "0x1",
		"18446744073709551615": "0xffffffffffffffff",
		"18446744073709551616": "0x10000000000000000",
		"340282366920938463463374607431768211456": "0x100000000000000000000000000000000",
	}
	for dec, want := range bigs {
		if got := EncodeU256(uint256.MustFromDecimal(dec)); got != want {
			t.Errorf("EncodeU256(%s) = %q, want %q", dec, got, want)
		}
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	dst := []byte(`"a":`)
	dst = AppendBytes(dst, []byte{0xde, 0xad})
	dst = append(dst, ',')
	dst = AppendUint64(dst, 0x1f)
	dst = append(dst, ',')
	dst = AppendU256(dst, uint256.NewInt(0))
	if got := string(dst); got != `"a":0xdead,0x1f,0x0` {
		t.Errorf("appends gave %q", got)
	}
}

func TestAppendAllocations(t *testing.T) {
	buf := make([]byte, 0, 1024)
	data := bytes.Repeat([]byte{0x5a}, 100)
	z := uint256.MustFromHex("0x123456789abcdef0123456789abcdef")
	allocs := testing.AllocsPerRun(100, func() {
		b := AppendBytes(buf[:0], data)
		b = AppendUint64(b, 12345)
		_ = AppendU256(b, z)
	})
	if allocs != 0 {
		t.Errorf("appending into a buffer with room allocated %v times", allocs)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestAppendBytesEveryLength checks the encoder against encoding/hex for
// every length around its sixteen- and eight-byte steps, the overlapping
// tail included, and every byte value; and that it writes nothing past the
// digits, into the room the buffer has left.
func TestAppendBytesEveryLength(t *testing.T) {
	data := make([]byte, 300)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for n := 0; n <= len(data); n++ {
		buf := append(make([]byte, 0, 4+2*n+64), "x:"...)
		got := AppendBytes(buf, data[:n])
		if want := "x:0x" + hex.EncodeToString(data[:n]); string(got) != want {
			t.Fatalf("AppendBytes of %d bytes = %q, want %q", n, got, want)
		}
		for i, c := range got[len(got):cap(got)] {
			if c != 0 {
				t.Fatalf("AppendBytes of %d bytes wrote %#x at %d past its end", n, c, i)
			}
		}
	}
}

// TestAppendQuantities checks the quantity encoders against strconv and
// uint256 for values of every width.
func TestAppendQuantities(t *testing.T) {
	for shift := range 64 {
		for _, v := range []uint64{1 << shift, 1<<shift - 1, 1<<shift + 0x5a5a5a5a5a5a5a5a>>(63-shift)} {
			if got, want := string(AppendUint64([]byte("x"), v)), "x0x"+strconv.FormatUint(v, 16); got != want {
				t.Errorf("AppendUint64(%d) = %s, want %s", v, got, want)
			}
		}
	}
	for _, hex := range []string{"0x0", "0x1", "0xffffffffffffffff", "0x10000000000000000", "0x1000000000000000f0000000000000001",
		"0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", "0x100000000000000000000000000000000000000000000000000000000000000"} {
		z := uint256.MustFromHex(hex)
		if got := string(AppendU256(nil, z)); got != z.Hex() {
			t.Errorf("AppendU256(%s) = %s", hex, got)
		}
	}
	// Every bit width, with mixed digits below the top one and with all
	// ones: the leading digit is where a byte-wise encoder can go wrong.
	pattern := uint256.MustFromHex("0x5a3c96e1f00f87d2b4c1e6a9d3f5b7c9e2a4c6e8f1a3b5c7d9e0f2a4b6c8d0e1")
	one := uint256.NewInt(1)
	for width := uint(1); width <= 256; width++ {
		top := new(uint256.Int).Lsh(one, width-1)
		mixed := new(uint256.Int).Rsh(pattern, 256-width)
		mixed.Or(mixed, top)
		ones := new(uint256.Int).Sub(new(uint256.Int).Lsh(top, 1), one) // wraps to all ones at 256
		for _, z := range []*uint256.Int{top, mixed, ones} {
			if got := string(AppendU256([]byte("x"), z)); got != "x"+z.Hex() {
				t.Errorf("AppendU256 of %d bits = %s, want x%s", width, got, z.Hex())
			}
		}
	}
}
