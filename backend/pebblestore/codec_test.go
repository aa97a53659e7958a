package pebblestore

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/klauspost/compress/zstd"
)

// sample is a block with its uncles as a store serves them.
type sample struct {
	block  *backend.Block
	uncles []*backend.Uncle
}

// samples returns the blocks of src's canonical chain, and of extra hashes.
func samples(t testing.TB, src backend.Backend, extra ...backend.Hash) []sample {
	t.Helper()
	ctx := context.Background()
	latest, err := src.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		t.Fatal(err)
	}
	var out []sample
	add := func(b *backend.Block) { out = append(out, sampleOf(t, src, b)) }
	for n := uint64(0); n <= latest.Number; n++ {
		b, err := src.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatal(err)
		}
		add(b)
	}
	for _, h := range extra {
		b, err := src.BlockByHash(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		add(b)
	}
	return out
}

// sampleOf returns b with its uncles, as src serves them.
func sampleOf(t testing.TB, src backend.Backend, b *backend.Block) sample {
	t.Helper()
	s := sample{block: b}
	for i := range b.Uncles {
		u, err := src.UncleByBlockHashAndIndex(context.Background(), b.Hash, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		s.uncles = append(s.uncles, u)
	}
	return s
}

func demoChain(t testing.TB) []sample {
	s, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	out := samples(t, s, demo.SideHash)
	p, err := s.BlockByNumber(context.Background(), backend.Pending)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, sample{block: p})
}

func synthChain(n, txs int) []sample {
	g := synth.New(synth.Config{Seed: 9, TxsPerBlock: txs})
	out := make([]sample, n)
	for i := range out {
		out[i] = sample{block: g.Next()}
	}
	return out
}

// TestCorruptTotalDifficulty gives the store's own total difficulty
// record corrupt bytes.
func TestCorruptTotalDifficulty(t *testing.T) {
	if _, err := decodeTD([]byte{40}); err == nil {
		t.Error("a corrupt total difficulty record decoded")
	}
}

// encodings are the candidate record formats that TestEncodingSizes and
// BenchmarkEncoding compare.
func jsonRecord(s sample) []byte {
	line := append([]byte(`{"block":`), s.block.AppendJSON(nil, true)...)
	line = append(line, `,"uncles":[`...)
	for i, u := range s.uncles {
		if i > 0 {
			line = append(line, ',')
		}
		line = u.AppendJSON(line)
	}
	return append(line, "]}"...)
}

// rlpPlusExtras is the size of a record made of the block's RLP and what
// it does not hold but the store must serve: the block hash, each
// transaction's hash and sender, each uncle's hash and the total
// difficulty.
func rlpPlusExtras(s sample) int {
	return int(s.block.Size) + 32 + (32+20)*len(s.block.Transactions) + 32*len(s.uncles) + 1 + 32
}

// TestEncodingSizes logs the size of the candidate records, raw and
// compressed with zstd as Pebble compresses its blocks, over mainnet-shaped
// blocks and the demo chain.
func TestEncodingSizes(t *testing.T) {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	for _, set := range []struct {
		name string
		s    []sample
	}{{"synth (mainnet-shaped, 150 txs)", synthChain(30, 150)}, {"synth (8 txs)", synthChain(200, 8)}, {"demo", demoChain(t)}} {
		var rlp, extras, compact, compactZ, js, jsZ int
		for _, s := range set.s {
			rlp += int(s.block.Size)
			extras += rlpPlusExtras(s)
			c := record.Append(nil, s.block, s.uncles)
			compact += len(c)
			compactZ += len(enc.EncodeAll(c, nil))
			j := jsonRecord(s)
			js += len(j)
			jsZ += len(enc.EncodeAll(j, nil))
		}
		r := func(n int) string { return fmt.Sprintf("%.3f", float64(n)/float64(rlp)) }
		t.Logf("%s: per byte of block RLP: RLP+extras %s, compact %s (zstd %s), JSON %s (zstd %s)", set.name, r(extras), r(compact), r(compactZ), r(js), r(jsZ))
		if compact > extras {
			t.Errorf("%s: the compact record (%d bytes) is larger than RLP with extras (%d)", set.name, compact, extras)
		}
	}
}

// BenchmarkEncoding measures encoding and decoding a mainnet-shaped block
// (150 transactions) as the compact record and as JSON.
func BenchmarkEncoding(b *testing.B) {
	s := synthChain(2, 150)[1]
	rec := record.Append(nil, s.block, nil)
	js := jsonRecord(s)
	b.Run("compact/encode", func(b *testing.B) {
		b.SetBytes(int64(len(rec)))
		buf := make([]byte, 0, len(rec))
		for b.Loop() {
			buf = record.Append(buf[:0], s.block, nil)
		}
	})
	b.Run("compact/decode", func(b *testing.B) {
		b.SetBytes(int64(len(rec)))
		for b.Loop() {
			if _, _, err := record.Decode(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json/encode", func(b *testing.B) {
		b.SetBytes(int64(len(js)))
		for b.Loop() {
			jsonRecord(s)
		}
	})
	b.Run("json/decode", func(b *testing.B) {
		b.SetBytes(int64(len(js)))
		for b.Loop() {
			var d struct {
				Block  *backend.Block
				Uncles []*backend.Uncle
			}
			if err := json.Unmarshal(js, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Logf("record sizes: compact %d bytes, JSON %d, RLP %d, RLP+extras %d", len(rec), len(js), s.block.Size, rlpPlusExtras(s))
}
