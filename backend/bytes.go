package backend

import (
	"reflect"

	"github.com/blockrpc/blockrpc/hexutil"
)

// Hash is a 32-byte Keccak-256 hash: of a block, a transaction, a trie root.
type Hash [32]byte

// Address is a 20-byte account address.
type Address [20]byte

// Bloom is the 256-byte log bloom filter of a block header.
type Bloom [256]byte

// Nonce is the 8-byte proof-of-work nonce of a block header.
type Nonce [8]byte

var (
	hashType    = reflect.TypeFor[Hash]()
	addressType = reflect.TypeFor[Address]()
	bloomType   = reflect.TypeFor[Bloom]()
	nonceType   = reflect.TypeFor[Nonce]()
)

// ParseHash parses a 0x-prefixed hex string of exactly 32 bytes.
func ParseHash(s string) (Hash, error) {
	var h Hash
	err := hexutil.DecodeFixed([]byte(s), h[:])
	return h, err
}

// ParseAddress parses a 0x-prefixed hex string of exactly 20 bytes.
func ParseAddress(s string) (Address, error) {
	var a Address
	err := hexutil.DecodeFixed([]byte(s), a[:])
	return a, err
}

// String returns the 0x-prefixed hex form of h.
func (h Hash) String() string { return hexutil.Encode(h[:]) }

// String returns the 0x-prefixed hex form of a, in lower case.
func (a Address) String() string { return hexutil.Encode(a[:]) }

// String returns the 0x-prefixed hex form of b.
func (b Bloom) String() string { return hexutil.Encode(b[:]) }

// String returns the 0x-prefixed hex form of n.
func (n Nonce) String() string { return hexutil.Encode(n[:]) }

// MarshalText implements encoding.TextMarshaler.
func (h Hash) MarshalText() ([]byte, error) { return hexutil.AppendBytes(nil, h[:]), nil }

// MarshalText implements encoding.TextMarshaler.
func (a Address) MarshalText() ([]byte, error) { return hexutil.AppendBytes(nil, a[:]), nil }

// MarshalText implements encoding.TextMarshaler.
func (b Bloom) MarshalText() ([]byte, error) { return hexutil.AppendBytes(nil, b[:]), nil }

// MarshalText implements encoding.TextMarshaler.
func (n Nonce) MarshalText() ([]byte, error) { return hexutil.AppendBytes(nil, n[:]), nil }

// UnmarshalJSON implements json.Unmarshaler: a JSON string of exactly 32
// bytes of hex.
func (h *Hash) UnmarshalJSON(input []byte) error {
	return hexutil.UnmarshalFixedJSON(hashType, input, h[:])
}

// UnmarshalJSON implements json.Unmarshaler: a JSON string of exactly 20
// bytes of hex.
func (a *Address) UnmarshalJSON(input []byte) error {
	return hexutil.UnmarshalFixedJSON(addressType, input, a[:])
}

// UnmarshalJSON implements json.Unmarshaler: a JSON string of exactly 256
// bytes of hex.
func (b *Bloom) UnmarshalJSON(input []byte) error {
	return hexutil.UnmarshalFixedJSON(bloomType, input, b[:])
}

// UnmarshalJSON implements json.Unmarshaler: a JSON string of exactly 8
// bytes of hex.
func (n *Nonce) UnmarshalJSON(input []byte) error {
	return hexutil.UnmarshalFixedJSON(nonceType, input, n[:])
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (h *Hash) UnmarshalText(input []byte) error {
	return hexutil.UnmarshalFixedText("backend.Hash", input, h[:])
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Address) UnmarshalText(input []byte) error {
	return hexutil.UnmarshalFixedText("backend.Address", input, a[:])
}
