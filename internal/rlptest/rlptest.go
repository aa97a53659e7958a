// Package rlptest is a small RLP decoder for the tests of the library's RLP
// encoder.
//
// It is written apart from that encoder on purpose: a test that read the
// library's RLP back with the library's own code would pass any mistake
// the two sides share. The decoder trusts its input (fixtures and the
// encodings under test) and checks only what keeps it from panicking; it
// accepts non-canonical encodings, so a test that cares compares bytes
// with Item.Raw.
package rlptest

import "errors"

// Item is one decoded RLP value: a string or a list.
type Item struct {
	// Raw is the value's whole encoding, its header included, for tests
	// that compare a re-encoding byte for byte or measure a size.
	Raw []byte
	// Bytes is a string's content; nil for a list.
	Bytes []byte
	// List is a list's items, in order.
	List []Item
	// IsList tells an empty list from an empty string: neither has
	// content.
	IsList bool
}

// Decode splits the first RLP value off b and returns it with the rest of
// b, so that a caller can read a stream of values such as a chain.rlp
// file. The item's slices share b's memory.
func Decode(b []byte) (Item, []byte, error) {
	if len(b) == 0 {
		return Item{}, nil, errors.New("unexpected end of input")
	}
	prefix := b[0]
	var header, size int
	switch {
	case prefix < 0x80:
		return Item{Raw: b[:1], Bytes: b[:1]}, b[1:], nil
	case prefix < 0xb8:
		header, size = 1, int(prefix-0x80)
	case prefix < 0xc0:
		n := int(prefix - 0xb7)
		header, size = 1+n, readSize(b[1:], n)
	case prefix < 0xf8:
		header, size = 1, int(prefix-0xc0)
	default:
		n := int(prefix - 0xf7)
		header, size = 1+n, readSize(b[1:], n)
	}
	if size < 0 || header+size > len(b) {
		return Item{}, nil, errors.New("value longer than its input")
	}
	item := Item{Raw: b[:header+size], IsList: prefix >= 0xc0}
	payload := b[header : header+size]
	if !item.IsList {
		item.Bytes = payload
		return item, b[header+size:], nil
	}
	for len(payload) > 0 {
		var sub Item
		var err error
		if sub, payload, err = Decode(payload); err != nil {
			return Item{}, nil, err
		}
		item.List = append(item.List, sub)
	}
	return item, b[header+size:], nil
}

// readSize reads the n-byte big-endian length of a long string or list.
// It gives -1 when b is shorter than n or n is over 4: no fixture holds a
// value of 4 GiB, and the limit keeps a corrupt header from overflowing
// the int (on a 32-bit platform 4 bytes can still turn it negative, which
// Decode rejects).
func readSize(b []byte, n int) int {
	if n > len(b) || n > 4 {
		return -1
	}
	size := 0
	for _, c := range b[:n] {
		size = size<<8 | int(c)
	}
	return size
}

// Uint64 reads a string as a big-endian unsigned integer. Trusting its
// input like Decode, it does not reject a string over 8 bytes: only the
// last 8 count.
func (it Item) Uint64() uint64 {
	var v uint64
	for _, c := range it.Bytes {
		v = v<<8 | uint64(c)
	}
	return v
}
