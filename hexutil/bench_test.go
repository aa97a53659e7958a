package hexutil

import (
	"encoding/hex"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/holiman/uint256"
)

// BenchmarkAppendBytes encodes data of the sizes a block holds (an
// address, a hash, a bloom, a transaction's input); beside it, in the same
// run, the pairs table alone (what AppendBytes did before) and
// encoding/hex.
func BenchmarkAppendBytes(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{20, 32, 256, 16 << 10} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		buf := make([]byte, 0, 2+2*len(data))
		b.Run(fmt.Sprintf("%d/hexutil", size), func(b *testing.B) {
			b.SetBytes(int64(2 * len(data)))
			for b.Loop() {
				buf = AppendBytes(buf[:0], data)
			}
		})
		b.Run(fmt.Sprintf("%d/pairs-table", size), func(b *testing.B) {
			b.SetBytes(int64(2 * len(data)))
			for b.Loop() {
				buf = append(buf[:0], '0', 'x')
				buf = buf[:2+2*len(data)]
				encodeTable(buf[2:], data)
			}
		})
		b.Run(fmt.Sprintf("%d/encoding-hex", size), func(b *testing.B) {
			b.SetBytes(int64(2 * len(data)))
			for b.Loop() {
				buf = append(buf[:0], '0', 'x')
				buf = hex.AppendEncode(buf, data)
			}
		})
	}
}

// BenchmarkAppendU256 encodes a 128-bit quantity (a value) and a 256-bit
// one (a signature's r); beside it, in the same run, a word at a time from
// the pairs table (what AppendU256 did before).
func BenchmarkAppendU256(b *testing.B) {
	for _, z := range []*uint256.Int{
		uint256.MustFromHex("0x1f2e3d4c5b6a79881f2e3d4c5b6a7988"),
		uint256.MustFromHex("0x9c1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a79"),
	} {
		buf := make([]byte, 0, 66)
		b.Run(fmt.Sprintf("%d/hexutil", z.BitLen()), func(b *testing.B) {
			for b.Loop() {
				buf = AppendU256(buf[:0], z)
			}
		})
		b.Run(fmt.Sprintf("%d/word-a-step", z.BitLen()), func(b *testing.B) {
			for b.Loop() {
				top := 3
				for top > 0 && z[top] == 0 {
					top--
				}
				buf = AppendUint64(buf[:0], z[top])
				for w := top - 1; w >= 0; w-- {
					var digits [16]byte
					encodeWord(&digits, z[w])
					buf = append(buf, digits[:]...)
				}
			}
		})
	}
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
