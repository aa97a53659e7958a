package backend

import (
	"math/bits"

	"github.com/holiman/uint256"
	"golang.org/x/crypto/sha3"
)

// rlpWriter appends the RLP encoding of values to buf. It is the encoding
// the chain hashes, and all that the derived values (hashes, sizes, roots)
// need of RLP; hand-written because the only full RLP library is inside
// go-ethereum, which this module does not depend on.
//
// A list is written by remembering where it starts, writing its items, and
// inserting the list header once the content length is known.
type rlpWriter struct {
	buf []byte
}

// keccak returns the Keccak-256 hash of data, as the chain hashes RLP
// encodings: headers, transactions, trie nodes.
func keccak(data []byte) Hash {
	var h Hash
	d := sha3.NewLegacyKeccak256()
	d.Write(data)
	d.Sum(h[:0])
	return h
}

// emptyString is the RLP encoding of the empty byte string, which is also
// how zero and an absent optional field are written.
const emptyString = 0x80

func (w *rlpWriter) bytes(b []byte) {
	if len(b) == 1 && b[0] < 0x80 {
		w.buf = append(w.buf, b[0])
		return
	}
	w.buf = appendLength(w.buf, 0x80, len(b))
	w.buf = append(w.buf, b...)
}

func (w *rlpWriter) uint64(v uint64) {
	switch {
	case v == 0:
		w.buf = append(w.buf, emptyString)
	case v < 0x80:
		w.buf = append(w.buf, byte(v))
	default:
		n := (bits.Len64(v) + 7) / 8
		w.buf = append(w.buf, 0x80+byte(n))
		for i := n - 1; i >= 0; i-- {
			w.buf = append(w.buf, byte(v>>(8*i)))
		}
	}
}

func (w *rlpWriter) u256(z *uint256.Int) {
	if z.IsUint64() {
		w.uint64(z.Uint64())
		return
	}
	b := z.Bytes32()
	w.bytes(b[32-z.ByteLen():])
}

// optionalU256 writes z, or an empty string for an absent value.
func (w *rlpWriter) optionalU256(z *uint256.Int) {
	if z == nil {
		w.buf = append(w.buf, emptyString)
		return
	}
	w.u256(z)
}

// optionalUint64 writes *v, or an empty string for an absent value.
func (w *rlpWriter) optionalUint64(v *uint64) {
	if v == nil {
		w.buf = append(w.buf, emptyString)
		return
	}
	w.uint64(*v)
}

// optionalHash writes *h, or an empty string for an absent value.
func (w *rlpWriter) optionalHash(h *Hash) {
	if h == nil {
		w.buf = append(w.buf, emptyString)
		return
	}
	w.bytes(h[:])
}

// address writes a, or an empty string for a contract creation's absent
// recipient.
func (w *rlpWriter) address(a *Address) {
	if a == nil {
		w.buf = append(w.buf, emptyString)
		return
	}
	w.bytes(a[:])
}

// list starts a list and returns the mark that endList takes.
func (w *rlpWriter) list() int { return len(w.buf) }

// endList closes the list started at mark by inserting its header.
func (w *rlpWriter) endList(mark int) {
	size := len(w.buf) - mark
	header := appendLength(make([]byte, 0, 9), 0xc0, size)
	w.buf = append(w.buf, header...) // grow by the header's length
	copy(w.buf[mark+len(header):], w.buf[mark:mark+size])
	copy(w.buf[mark:], header)
}

// appendLength appends the header of a string (base 0x80) or a list (base
// 0xc0) whose payload is size bytes long.
func appendLength(dst []byte, base byte, size int) []byte {
	if size < 56 {
		return append(dst, base+byte(size))
	}
	n := (bits.Len64(uint64(size)) + 7) / 8
	dst = append(dst, base+55+byte(n))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(size>>(8*i)))
	}
	return dst
}
