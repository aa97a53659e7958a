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

func appendOptionalU256Member(dst []byte, key string, z *uint256.Int) []byte {
	if z == nil {
		dst = append(dst, key...)
		return append(dst, `null,`...)
	}
	return appendU256Member(dst, key, z)
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

// closeArray ends an array member whose n elements were each followed by a
// comma: the last comma becomes ']', and the member gets its own comma.
func closeArray(dst []byte, n int) []byte {
	if n == 0 {
		return append(dst, ']', ',')
	}
	dst[len(dst)-1] = ']'
	return append(dst, ',')
}
