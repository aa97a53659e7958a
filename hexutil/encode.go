package hexutil

import (
	"math/bits"
	"slices"

	"github.com/holiman/uint256"
)

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

const digits = "0123456789abcdef"

// pairs holds the two hex digits of every byte value, so that encoding a byte
// is one two-byte copy instead of two table look-ups and shifts.
var pairs = func() (t [512]byte) {
	for i := 0; i < 256; i++ {
		t[2*i], t[2*i+1] = digits[i>>4], digits[i&0xf]
	}
	return t
}()

// AppendBytes appends b to dst as a 0x-prefixed byte string.
func AppendBytes(dst, b []byte) []byte {
	n := len(dst) + 2
	dst = slices.Grow(dst, 2+2*len(b))[:n+2*len(b)]
	dst[n-2], dst[n-1] = '0', 'x'
	out := dst[n:]
	for i, c := range b {
		copy(out[2*i:2*i+2], pairs[2*int(c):2*int(c)+2])
	}
	return dst
}

// AppendUint64 appends v to dst as a quantity.
func AppendUint64(dst []byte, v uint64) []byte {
	if v == 0 {
		return append(dst, '0', 'x', '0')
	}
	n := (bits.Len64(v) + 3) / 4
	start := len(dst) + 2
	dst = slices.Grow(dst, 2+n)[:start+n]
	dst[start-2], dst[start-1] = '0', 'x'
	for i := start + n - 1; i >= start; i-- {
		dst[i] = digits[v&0xf]
		v >>= 4
	}
	return dst
}

// AppendU256 appends z to dst as a quantity.
func AppendU256(dst []byte, z *uint256.Int) []byte {
	top := 3
	for top > 0 && z[top] == 0 {
		top--
	}
	dst = AppendUint64(dst, z[top])
	for w := top - 1; w >= 0; w-- {
		dst = appendWord(dst, z[w])
	}
	return dst
}

// appendWord appends all 16 hex digits of v, leading zeros included: the
// lower words of a number wider than 64 bits.
func appendWord(dst []byte, v uint64) []byte {
	start := len(dst)
	dst = slices.Grow(dst, 16)[:start+16]
	for i := start + 15; i >= start; i-- {
		dst[i] = digits[v&0xf]
		v >>= 4
	}
	return dst
}
