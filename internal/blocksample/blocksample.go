// Package blocksample gives the tests of block encodings the blocks they
// round-trip, as a store serves them: a block with its uncles, from a
// Backend's chain, the demo chain, or the synthetic generator. The record
// package and the stores that keep records test over the same samples.
package blocksample

import (
	"context"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// A Sample is a block with its uncles as a store serves them.
type Sample struct {
	Block  *backend.Block
	Uncles []*backend.Uncle
}

// FromChain returns the blocks of src's canonical chain, then the blocks
// with the extra hashes.
func FromChain(t testing.TB, src backend.Backend, extra ...backend.Hash) []Sample {
	t.Helper()
	ctx := context.Background()
	latest, err := src.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		t.Fatal(err)
	}
	var out []Sample
	for n := uint64(0); n <= latest.Number; n++ {
		b, err := src.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Of(t, src, b))
	}
	for _, h := range extra {
		b, err := src.BlockByHash(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Of(t, src, b))
	}
	return out
}

// Of returns b with its uncles, as src serves them.
func Of(t testing.TB, src backend.Backend, b *backend.Block) Sample {
	t.Helper()
	s := Sample{Block: b}
	for i := range b.Uncles {
		u, err := src.UncleByBlockHashAndIndex(context.Background(), b.Hash, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		s.Uncles = append(s.Uncles, u)
	}
	return s
}

// Demo returns the demo chain: its canonical blocks, its side block and
// its pending block.
func Demo(t testing.TB) []Sample {
	t.Helper()
	s, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	out := FromChain(t, s, demo.SideHash)
	p, err := s.BlockByNumber(context.Background(), backend.Pending)
	if err != nil {
		t.Fatal(err)
	}
	return append(out, Sample{Block: p})
}

// Synth returns n blocks of mainnet's shape with about txs transactions
// each, the same for every call.
func Synth(n, txs int) []Sample {
	g := synth.New(synth.Config{Seed: 9, TxsPerBlock: txs})
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{Block: g.Next()}
	}
	return out
}
