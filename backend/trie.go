package backend

import (
	"bytes"
	"slices"
)

// emptyRoot is the root of an empty trie: keccak256(rlp("")).
var emptyRoot = Hash{
	0x56, 0xe8, 0x1f, 0x17, 0x1b, 0xcc, 0x55, 0xa6, 0xff, 0x83, 0x45, 0xe6, 0x92, 0xc0, 0xf8, 0x6e,
	0x5b, 0x48, 0xe0, 0x1b, 0x99, 0x6c, 0xad, 0xc0, 0x01, 0x62, 0x2f, 0xb5, 0xe3, 0x63, 0xb4, 0x21,
}

// trieLeaf is one key of a trie, as nibbles, with its value.
type trieLeaf struct {
	key   []byte
	value []byte
}

// orderedTrieRoot returns the root of the Merkle Patricia trie that maps
// rlp(i) to values[i]: the transactionsRoot and withdrawalsRoot of a header.
// The whole trie is built in memory from the sorted keys, which is all a
// list of a few thousand entries needs.
func orderedTrieRoot(values [][]byte) Hash {
	if len(values) == 0 {
		return emptyRoot
	}
	leaves := make([]trieLeaf, len(values))
	for i, v := range values {
		var key rlpWriter
		key.uint64(uint64(i))
		leaves[i] = trieLeaf{key: toNibbles(key.buf), value: v}
	}
	slices.SortFunc(leaves, func(a, b trieLeaf) int { return bytes.Compare(a.key, b.key) })
	return keccak(trieNode(leaves, 0))
}

func toNibbles(b []byte) []byte {
	n := make([]byte, 2*len(b))
	for i, c := range b {
		n[2*i], n[2*i+1] = c>>4, c&0xf
	}
	return n
}

// trieNode returns the encoding of the node holding leaves, whose keys all
// agree on their first depth nibbles and are sorted.
func trieNode(leaves []trieLeaf, depth int) []byte {
	var w rlpWriter
	mark := w.list()
	if len(leaves) == 1 {
		w.bytes(hexPrefix(leaves[0].key[depth:], true))
		w.bytes(leaves[0].value)
		w.endList(mark)
		return w.buf
	}
	if p := sharedPrefix(leaves, depth); p > 0 {
		w.bytes(hexPrefix(leaves[0].key[depth:depth+p], false))
		w.reference(trieNode(leaves, depth+p))
		w.endList(mark)
		return w.buf
	}
	// A branch: sixteen children by the next nibble, then the value of the
	// key that ends here, if one does (sorting puts it first).
	var value []byte
	if len(leaves[0].key) == depth {
		value, leaves = leaves[0].value, leaves[1:]
	}
	for nibble := byte(0); nibble < 16; nibble++ {
		end := 0
		for end < len(leaves) && leaves[end].key[depth] == nibble {
			end++
		}
		if end == 0 {
			w.buf = append(w.buf, emptyString)
			continue
		}
		w.reference(trieNode(leaves[:end], depth+1))
		leaves = leaves[end:]
	}
	w.bytes(value)
	w.endList(mark)
	return w.buf
}

// sharedPrefix returns how many nibbles after depth all keys share.
func sharedPrefix(leaves []trieLeaf, depth int) int {
	first, last := leaves[0].key[depth:], leaves[len(leaves)-1].key[depth:]
	n := 0
	for n < len(first) && n < len(last) && first[n] == last[n] {
		n++
	}
	return n // sorted keys: what the first and last share, all share
}

// reference writes a child node: inline when its encoding is shorter than a
// hash, by hash otherwise.
func (w *rlpWriter) reference(node []byte) {
	if len(node) < 32 {
		w.buf = append(w.buf, node...)
		return
	}
	h := keccak(node)
	w.bytes(h[:])
}

// hexPrefix is the compact encoding of a key path: a flag nibble saying
// whether the path ends in a leaf and has odd length, then the nibbles packed.
func hexPrefix(nibbles []byte, leaf bool) []byte {
	flag := byte(0)
	if leaf {
		flag = 2
	}
	out := make([]byte, 0, len(nibbles)/2+1)
	if len(nibbles)%2 == 1 {
		out = append(out, (flag+1)<<4|nibbles[0])
		nibbles = nibbles[1:]
	} else {
		out = append(out, flag<<4)
	}
	for i := 0; i < len(nibbles); i += 2 {
		out = append(out, nibbles[i]<<4|nibbles[i+1])
	}
	return out
}
