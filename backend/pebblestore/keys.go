package pebblestore

import (
	"encoding/binary"
	"errors"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// The keys, after go-ethereum's schema (core/rawdb/schema.go), with one
// change: the canonical block's record is the value of its number's entry,
// so that a block asked for by number, the call a server answers most, is
// one lookup, not two (an index entry, then the record), which a read that
// misses the cache pays for with a block read from disk each. Records are
// written under their number, so that a chain written in order is written
// in key order, which an LSM tree takes with the least rewriting; a
// reorganisation moves the records of the blocks it swaps between the two
// forms, in the batch that changes the chain. The canonical entries sort
// before every other key: each file a flush writes then spans the
// canonical numbers of the blocks it holds and the keys after them, not
// the canonical numbers of every block before (as it would if the hash
// index, whose keys are random, or the tags, rewritten as the chain grows,
// sorted first), so that a read by number checks one file, not one more in
// every level a flush or a compaction has left such a file in.
//
//	'C' number(8)               the canonical block's hash(32), then its record
//	                            (record.Append); the first and last keys are
//	                            the lowest and highest canonical numbers
//	'h' number(8) hash(32)      the record of a block not canonical at its number
//	'h' number(8) hash(32) 't'  the total difficulties learnt after the block was stored
//	'H' hash(32)                the block's number
//	'c' parent(32) child(32) index(4)
//	                            a block (index 0xffffffff) or an uncle of a block
//	                            (its index) stored while its parent's total
//	                            difficulty was unknown: what learning it updates
//	'm' name                    the store's own values: the schema version,
//	                            the genesis, the chain id, the tags, the pending block
const (
	prefixRecord    = 'h'
	prefixNumber    = 'H'
	prefixCanonical = 'C'
	prefixChild     = 'c'
	prefixMeta      = 'm'
)

var (
	keyVersion   = []byte("mversion")
	keyGenesis   = []byte("mgenesis")
	keyChainID   = []byte("mchainid")
	keySafe      = []byte("msafe")
	keyFinalized = []byte("mfinalized")
	keyPending   = []byte("mpending")
)

// schemaVersion is the layout above; a store of another is refused.
// Version 1 kept every record under 'h' and only the hash under 'n';
// version 2 had the canonical entries of this one under 'n'.
const schemaVersion = 3

func recordKey(number uint64, hash backend.Hash) []byte {
	k := make([]byte, 0, 1+8+32+1)
	k = append(k, prefixRecord)
	k = binary.BigEndian.AppendUint64(k, number)
	return append(k, hash[:]...)
}

func tdKey(number uint64, hash backend.Hash) []byte {
	return append(recordKey(number, hash), 't')
}

func numberKey(hash backend.Hash) []byte {
	return append([]byte{prefixNumber}, hash[:]...)
}

func canonicalKey(number uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixCanonical}, number)
}

// splitCanonical splits the value of a canonical entry into the block's
// hash and record.
func splitCanonical(val []byte) (hash backend.Hash, rec []byte, err error) {
	if len(val) < len(hash) {
		return hash, nil, errCorrupt
	}
	copy(hash[:], val)
	return hash, val[len(hash):], nil
}

// canonicalValue is the value of the canonical entry of the block hash
// with the record rec.
func canonicalValue(hash backend.Hash, rec []byte) []byte {
	return append(append(make([]byte, 0, len(hash)+len(rec)), hash[:]...), rec...)
}

// childBlock is the index of a child entry for the block itself.
const childBlock = 0xffffffff

func childPrefix(parent backend.Hash) []byte {
	return append([]byte{prefixChild}, parent[:]...)
}

func childKey(parent, child backend.Hash, index uint32) []byte {
	k := append(childPrefix(parent), child[:]...)
	return binary.BigEndian.AppendUint32(k, index)
}

// prefixEnd returns the first key after every key with the prefix.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func encodeUint64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeUint64(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// tdInfo is what a tdKey record holds: the total difficulty of the block
// and of each uncle, nil where unknown.
type tdInfo struct {
	block  *uint256.Int
	uncles []*uint256.Int
}

func (t *tdInfo) complete() bool {
	if t.block == nil {
		return false
	}
	for _, u := range t.uncles {
		if u == nil {
			return false
		}
	}
	return true
}

// encodeTD writes a tdKey record: each value as a length byte and its
// big-endian bytes (noTD for one unknown), the block's first, then the
// uncles' count and theirs.
func encodeTD(t *tdInfo) []byte {
	out := appendTD(nil, t.block)
	out = binary.AppendUvarint(out, uint64(len(t.uncles)))
	for _, u := range t.uncles {
		out = appendTD(out, u)
	}
	return out
}

// noTD is the length byte of an unknown total difficulty.
const noTD = 0xff

func appendTD(dst []byte, z *uint256.Int) []byte {
	if z == nil {
		return append(dst, noTD)
	}
	b := z.Bytes()
	return append(append(dst, byte(len(b))), b...)
}

func decodeTD(b []byte) (*tdInfo, error) {
	var t tdInfo
	var err error
	if t.block, b, err = readTD(b); err != nil {
		return nil, err
	}
	n, size := binary.Uvarint(b)
	if size <= 0 || n > uint64(len(b)) {
		return nil, errCorrupt
	}
	b = b[size:]
	t.uncles = make([]*uint256.Int, n)
	for i := range t.uncles {
		if t.uncles[i], b, err = readTD(b); err != nil {
			return nil, err
		}
	}
	if len(b) != 0 {
		return nil, errCorrupt
	}
	return &t, nil
}

func readTD(b []byte) (*uint256.Int, []byte, error) {
	switch {
	case len(b) == 0:
		return nil, nil, errCorrupt
	case b[0] == noTD:
		return nil, b[1:], nil
	case b[0] > 32 || len(b) < 1+int(b[0]):
		return nil, nil, errCorrupt
	}
	return new(uint256.Int).SetBytes(b[1 : 1+b[0]]), b[1+b[0]:], nil
}

// errCorrupt is wrapped by the error of a store's own record that does
// not decode; a block record's is record.ErrCorrupt.
var errCorrupt = errors.New("pebblestore: corrupt record")

// chainIDState is the chain id and what is known of it, as memstore keeps
// it: set with SetChainID or learnt from a stored transaction (known), and
// bound once a stored transaction is signed for it.
type chainIDState struct {
	id           uint64
	known, bound bool
}

func encodeChainID(c chainIDState) []byte {
	var flags byte
	if c.known {
		flags |= 1
	}
	if c.bound {
		flags |= 2
	}
	return append(encodeUint64(c.id), flags)
}

func decodeChainID(b []byte) (chainIDState, bool) {
	if len(b) != 9 {
		return chainIDState{}, false
	}
	id, _ := decodeUint64(b[:8])
	return chainIDState{id: id, known: b[8]&1 != 0, bound: b[8]&2 != 0}, true
}
