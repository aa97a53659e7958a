package synth_test

import (
	"context"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/blockrpc/blockrpc/memstore"
)

// TestChain checks that memstore takes a generated chain, every derived
// value checked, and that the same seed gives the same chain.
func TestChain(t *testing.T) {
	s := memstore.New()
	g, again := synth.New(synth.Config{Seed: 1, TxsPerBlock: 40}), synth.New(synth.Config{Seed: 1, TxsPerBlock: 40})
	start := time.Now()
	var rlp, txs int
	kinds := map[uint8]int{}
	const n = 300
	for range n {
		b := g.Next()
		if err := s.AddBlock(b); err != nil {
			t.Fatal(err)
		}
		if b2 := again.Next(); b2.Hash != b.Hash {
			t.Fatalf("block %d: %s, then %s from the same seed", b.Number, b.Hash, b2.Hash)
		}
		rlp += int(b.Size)
		txs += len(b.Transactions)
		for _, tx := range b.Transactions {
			kinds[tx.Type]++
		}
	}
	head, err := s.BlockByNumber(context.Background(), backend.Latest)
	if err != nil || head.Number != n-1 {
		t.Fatalf("latest: %v, %v", head, err)
	}
	if id, err := s.ChainID(context.Background()); err != nil || id != 1 {
		t.Errorf("chain id %d, %v; want 1", id, err)
	}
	for typ := range uint8(5) {
		if kinds[typ] == 0 {
			t.Errorf("no transaction of type %d", typ)
		}
	}
	t.Logf("%d blocks (twice) in %v: %d transactions %v, %.0f bytes of RLP a block, %.0f a transaction", n, time.Since(start), txs, kinds, float64(rlp)/n, float64(rlp)/float64(txs))
}

func BenchmarkNext(b *testing.B) {
	g := synth.New(synth.Config{Seed: 1})
	var size uint64
	for b.Loop() {
		size += g.Next().Size
	}
	b.ReportMetric(float64(size)/float64(b.N), "rlp-bytes/block")
}
