package backend

import (
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
)

// The member writers append `"key":value,` to a JSON object under
// construction; key includes its quotes and colon, so that it is one
// constant copy. The object writer replaces the final comma with '}'.

func appendBytesMember(dst []byte, key string, b []byte) []byte {
	dst = append(dst, key...)
	dst = append(dst, '"')
	dst = hexutil.AppendBytes(dst, b)
	return append(dst, '"', ',')
}

func appendUint64Member(dst []byte, key string, v uint64) []byte {
	dst = append(dst, key...)
	dst = append(dst, '"')
	dst = hexutil.AppendUint64(dst, v)
	return append(dst, '"', ',')
}

func appendU256Member(dst []byte, key string, z *uint256.Int) []byte {
	dst = append(dst, key...)
	dst = append(dst, '"')
	dst = hexutil.AppendU256(dst, z)
	return append(dst, '"', ',')
}

// appendHashString appends h as a JSON string.
func appendHashString(dst []byte, h *Hash) []byte {
	dst = append(dst, '"')
	dst = hexutil.AppendBytes(dst, h[:])
	return append(dst, '"')
}

// closeObject replaces the trailing comma of an object's last member with
// the closing brace.
func closeObject(dst []byte) []byte {
	dst[len(dst)-1] = '}'
	return dst
}
