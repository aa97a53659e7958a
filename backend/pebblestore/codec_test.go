package pebblestore

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/blockrpc/blockrpc/internal/blocksample"
	"github.com/blockrpc/blockrpc/internal/fixturechains"
	"github.com/klauspost/compress/zstd"
)

// TestCorruptTotalDifficulty gives the store's own total difficulty
// record corrupt bytes.
func TestCorruptTotalDifficulty(t *testing.T) {
	if _, err := decodeTD([]byte{40}); err == nil {
		t.Error("a corrupt total difficulty record decoded")
	}
}

// encodings are the candidate record formats that TestEncodingSizes and
// BenchmarkEncoding compare.
func jsonRecord(s blocksample.Sample) []byte {
	line := append([]byte(`{"block":`), s.Block.AppendJSON(nil, true)...)
	line = append(line, `,"uncles":[`...)
	for i, u := range s.Uncles {
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
func rlpPlusExtras(s blocksample.Sample) int {
	return int(s.Block.Size) + 32 + (32+20)*len(s.Block.Transactions) + 32*len(s.Uncles) + 1 + 32
}

// TestEncodingSizes logs the size of the candidate records, raw and
// compressed with zstd as Pebble compresses its blocks, over mainnet-shaped
// blocks, the demo chain and the fixtures' mainnet blocks.
func TestEncodingSizes(t *testing.T) {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	for _, set := range []struct {
		name string
		s    []blocksample.Sample
	}{{"synth (mainnet-shaped, 150 txs)", blocksample.Synth(30, 150)}, {"synth (8 txs)", blocksample.Synth(200, 8)}, {"demo", blocksample.Demo(t)}, {"mainnet (fixtures, with bodies)", mainnetBodies(t)}} {
		var rlp, extras, compact, compactZ, js, jsZ int
		for _, s := range set.s {
			rlp += int(s.Block.Size)
			extras += rlpPlusExtras(s)
			c := record.Append(nil, s.Block, s.Uncles)
			compact += len(c)
			compactZ += len(enc.EncodeAll(c, nil))
			j := jsonRecord(s)
			js += len(j)
			jsZ += len(enc.EncodeAll(j, nil))
		}
		r := func(n int) string { return fmt.Sprintf("%.3f", float64(n)/float64(rlp)) }
		t.Logf("%s, %d blocks, %.2f MB of RLP: per byte of block RLP: RLP+extras %s, compact %s (zstd %s), JSON %s (zstd %s)", set.name, len(set.s), float64(rlp)/1e6, r(extras), r(compact), r(compactZ), r(js), r(jsZ))
		if compact > extras {
			t.Errorf("%s: the compact record (%d bytes) is larger than RLP with extras (%d)", set.name, compact, extras)
		}
	}
}

// mainnetBodies returns the mainnet blocks of the fixtures that come with
// their transactions' bodies: the size of a record of a block known by its
// transaction hashes alone says nothing of its RLP's, which Size gives.
func mainnetBodies(t *testing.T) []blocksample.Sample {
	c := fixturechains.Mainnet(t)
	var out []blocksample.Sample
	for _, h := range c.Hashes { // a sparse chain: no walk by number
		b, err := c.Store.BlockByHash(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		if b.HasTransactionBodies() {
			out = append(out, blocksample.Of(t, c.Store, b))
		}
	}
	return out
}

// BenchmarkEncoding measures encoding and decoding a mainnet-shaped block
// (150 transactions) as the compact record and as JSON.
func BenchmarkEncoding(b *testing.B) {
	s := blocksample.Synth(2, 150)[1]
	rec := record.Append(nil, s.Block, nil)
	js := jsonRecord(s)
	b.Run("compact/encode", func(b *testing.B) {
		b.SetBytes(int64(len(rec)))
		buf := make([]byte, 0, len(rec))
		for b.Loop() {
			buf = record.Append(buf[:0], s.Block, nil)
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
	b.Logf("record sizes: compact %d bytes, JSON %d, RLP %d, RLP+extras %d", len(rec), len(js), s.Block.Size, rlpPlusExtras(s))
}
