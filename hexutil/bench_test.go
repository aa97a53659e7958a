package hexutil

import (
	"encoding/hex"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/holiman/uint256"
)

// BenchmarkAppendBytes encodes transaction-input-sized data; beside it, in
// the same run, a byte a step (what AppendBytes did before) and
// encoding/hex.
func BenchmarkAppendBytes(b *testing.B) {
	data := make([]byte, 16<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	buf := make([]byte, 0, 2+2*len(data))
	b.Run("hexutil", func(b *testing.B) {
		b.SetBytes(int64(2 * len(data)))
		for b.Loop() {
			buf = AppendBytes(buf[:0], data)
		}
	})
	b.Run("byte-a-step", func(b *testing.B) {
		var pairs [512]byte
		for i := range 256 {
			pairs[2*i], pairs[2*i+1] = digits[i>>4], digits[i&0xf]
		}
		b.SetBytes(int64(2 * len(data)))
		for b.Loop() {
			buf = append(buf[:0], '0', 'x')
			buf = buf[:2+2*len(data)]
			out := buf[2:]
			for i, c := range data {
				copy(out[2*i:2*i+2], pairs[2*int(c):2*int(c)+2])
			}
		}
	})
	b.Run("encoding-hex", func(b *testing.B) {
		b.SetBytes(int64(2 * len(data)))
		for b.Loop() {
			buf = append(buf[:0], '0', 'x')
			buf = hex.AppendEncode(buf, data)
		}
	})
}

// BenchmarkAppendU256 encodes a 128-bit quantity; beside it, in the same
// run, a digit a step (what AppendU256 did before).
func BenchmarkAppendU256(b *testing.B) {
	z := uint256.MustFromHex("0x1f2e3d4c5b6a79881f2e3d4c5b6a7988")
	buf := make([]byte, 0, 66)
	b.Run("hexutil", func(b *testing.B) {
		for b.Loop() {
			buf = AppendU256(buf[:0], z)
		}
	})
	b.Run("digit-a-step", func(b *testing.B) {
		word := func(dst []byte, v uint64, all bool) []byte {
			n := 16
			if !all {
				n = (bits.Len64(v) + 3) / 4
			}
			start := len(dst)
			dst = dst[:start+n]
			for i := start + n - 1; i >= start; i-- {
				dst[i] = digits[v&0xf]
				v >>= 4
			}
			return dst
		}
		for b.Loop() {
			buf = append(buf[:0], '0', 'x')
			buf = word(buf, z[1], false)
			buf = word(buf, z[0], true)
		}
	})
}

// BenchmarkAppendUint64 encodes the quantities of a transaction object
// (type, index, nonce, gas, number, time); beside it, in the same run,
// every value from all sixteen digits (what AppendUint64 did before).
func BenchmarkAppendUint64(b *testing.B) {
	values := []uint64{2, 0x9c, 0x1a3, 0x5208, 0x112a880, 0x6553f10c}
	buf := make([]byte, 0, 18*len(values))
	b.Run("hexutil", func(b *testing.B) {
		for b.Loop() {
			buf = buf[:0]
			for _, v := range values {
				buf = AppendUint64(buf, v)
			}
		}
	})
	b.Run("sixteen-digits", func(b *testing.B) {
		for b.Loop() {
			buf = buf[:0]
			for _, v := range values {
				var digits [16]byte
				encodeWord(&digits, v)
				buf = append(buf, '0', 'x')
				buf = append(buf, digits[16-(bits.Len64(v)+3)/4:]...)
			}
		}
	})
}

func BenchmarkDecodeUint64(b *testing.B) {
	in := "0x112A880"
	for b.Loop() {
		if _, err := DecodeUint64(in); err != nil {
			b.Fatal(err)
		}
	}
}
