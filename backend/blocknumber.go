package backend

import (
	"errors"
	"math"
	"strconv"

	"github.com/blockrpc/blockrpc/hexutil"
)

// BlockNumber selects a block by its number or by a tag naming a position
// in the chain. Numbers are 0 and up; tags are the negative constants.
type BlockNumber int64

// The block tags of the JSON-RPC API.
const (
	// Earliest is the lowest block of the canonical chain: the genesis for
	// a full chain, the first block held for a partial one.
	Earliest BlockNumber = -5
	// Safe is the block the consensus layer considers safe from reorgs.
	Safe BlockNumber = -4
	// Finalized is the most recent finalized block.
	Finalized BlockNumber = -3
	// Latest is the head of the canonical chain.
	Latest BlockNumber = -2
	// Pending is the block being built on top of the head.
	Pending BlockNumber = -1
)

// ErrBlockNumberRange is the error for a block number above the int64
// range; its message is go-ethereum's.
var ErrBlockNumberRange = errors.New("block number larger than int64")

var tags = [...]struct {
	name string
	tag  BlockNumber
}{
	{"earliest", Earliest},
	{"safe", Safe},
	{"finalized", Finalized},
	{"latest", Latest},
	{"pending", Pending},
}

// ParseBlockNumber parses the wire form of a block number: a tag, or a hex
// quantity as hexutil.DecodeUint64 accepts it that fits in an int64.
func ParseBlockNumber(s string) (BlockNumber, error) {
	for _, t := range tags {
		if s == t.name {
			return t.tag, nil
		}
	}
	n, err := hexutil.DecodeUint64(s)
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt64 {
		return 0, ErrBlockNumberRange
	}
	return BlockNumber(n), nil
}

// UnmarshalJSON implements json.Unmarshaler. Like go-ethereum, it reads the
// text inside the quotes of a JSON string, and any other JSON value as it
// stands, so that a number or null fails with the hex error a client of
// go-ethereum would see ("hex string without 0x prefix").
func (n *BlockNumber) UnmarshalJSON(input []byte) error {
	if len(input) >= 2 && input[0] == '"' && input[len(input)-1] == '"' {
		input = input[1 : len(input)-1]
	}
	// ParseBlockNumber keeps its argument from escaping, so the conversion
	// of a block number's few bytes is made on the stack: no allocation.
	v, err := ParseBlockNumber(string(input))
	if err != nil {
		return err
	}
	*n = v
	return nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (n *BlockNumber) UnmarshalText(input []byte) error {
	v, err := ParseBlockNumber(string(input))
	if err != nil {
		return err
	}
	*n = v
	return nil
}

// MarshalText implements encoding.TextMarshaler: the tag name or the hex
// quantity.
func (n BlockNumber) MarshalText() ([]byte, error) {
	return []byte(n.String()), nil
}

// String returns the wire form of n.
func (n BlockNumber) String() string {
	for _, t := range tags {
		if n == t.tag {
			return t.name
		}
	}
	if n < 0 {
		return "BlockNumber(" + strconv.FormatInt(int64(n), 10) + ")"
	}
	return hexutil.EncodeUint64(uint64(n))
}

// Uint64 returns the number n selects and true, or false when n is a tag.
func (n BlockNumber) Uint64() (uint64, bool) {
	if n < 0 {
		return 0, false
	}
	return uint64(n), true
}
