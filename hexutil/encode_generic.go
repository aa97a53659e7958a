//go:build !amd64 || purego

package hexutil

// encodePairs writes the hex digits of b into out, which holds 2*len(b)
// bytes.
func encodePairs(out, b []byte) { encodeTable(out, b) }
