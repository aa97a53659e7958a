package hexutil

import (
	"encoding/binary"
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

// pairs holds the two hex digits of every byte value, as the little-endian
// 16-bit word they make, so that four bytes are encoded with four look-ups
// and one 8-byte store.
var pairs = func() (t [256]uint16) {
	for i := range t {
		t[i] = uint16(digits[i>>4]) | uint16(digits[i&0xf])<<8
	}
	return t
}()

// AppendBytes appends b to dst as a 0x-prefixed byte string, through
// encodePairs: sixteen bytes a step in vector registers where the
// architecture has them (encode_amd64.go), eight from the pairs table
// elsewhere.
func AppendBytes(dst, b []byte) []byte {
	n := len(dst) + 2
	dst = slices.Grow(dst, 2+2*len(b))[:n+2*len(b)]
	dst[n-2], dst[n-1] = '0', 'x'
	encodePairs(dst[n:], b)
	return dst
}

// encodeTable writes the hex digits of b into out, which holds 2*len(b)
// bytes, from the pairs table, eight bytes a step in two 8-byte stores:
// every input where there are no vector instructions, and inputs shorter
// than sixteen bytes where there are.
func encodeTable(out, b []byte) {
	for len(b) >= 8 && len(out) >= 16 {
		binary.LittleEndian.PutUint64(out, uint64(pairs[b[0]])|uint64(pairs[b[1]])<<16|uint64(pairs[b[2]])<<32|uint64(pairs[b[3]])<<48)
		binary.LittleEndian.PutUint64(out[8:], uint64(pairs[b[4]])|uint64(pairs[b[5]])<<16|uint64(pairs[b[6]])<<32|uint64(pairs[b[7]])<<48)
		b, out = b[8:], out[16:]
	}
	for i, c := range b {
		binary.LittleEndian.PutUint16(out[2*i:], pairs[c])
	}
}

// AppendUint64 appends v to dst as a quantity.
func AppendUint64(dst []byte, v uint64) []byte {
	if v == 0 {
		return append(dst, '0', 'x', '0')
	}
	n := (bits.Len64(v) + 3) / 4
	dst = append(dst, '0', 'x')
	if n <= 4 {
		// Most quantities of a block (a type, an index, a nonce, gas)
		// fit in two bytes: two look-ups rather than eight
		// (BenchmarkAppendUint64, same run).
		var digits [4]byte
		binary.LittleEndian.PutUint16(digits[:], pairs[v>>8])
		binary.LittleEndian.PutUint16(digits[2:], pairs[v&0xff])
		return append(dst, digits[4-n:]...)
	}
	// All sixteen digits at once, from the pairs table, then the
	// significant ones: a digit a step would wait at every step for the
	// shift before it.
	var digits [16]byte
	encodeWord(&digits, v)
	return append(dst, digits[16-n:]...)
}

// AppendU256 appends z to dst as a quantity.
//
// A quantity wider than a word is encoded as its big-endian bytes, so that
// the significant ones go through encodePairs at once: 2x faster than a
// word at a time on a signature's r (BenchmarkAppendU256, same run).
func AppendU256(dst []byte, z *uint256.Int) []byte {
	if z[3]|z[2]|z[1] == 0 {
		return AppendUint64(dst, z[0])
	}
	b := z.Bytes32()
	i := 32 - (z.BitLen()+7)/8
	dst = append(dst, '0', 'x')
	if b[i] < 0x10 {
		// A quantity has no leading zero digit.
		dst = append(dst, digits[b[i]])
		i++
	}
	n := len(dst)
	dst = slices.Grow(dst, 2*(32-i))[:n+2*(32-i)]
	encodePairs(dst[n:], b[i:])
	return dst
}

// encodeWord writes the sixteen hex digits of v, leading zeros included.
func encodeWord(out *[16]byte, v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	encodePairs(out[:], b[:])
}
