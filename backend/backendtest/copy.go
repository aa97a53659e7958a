package backendtest

import (
	"context"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
)

// TestCopy writes the blocks of ref that hashes name into s through
// backend.Writer, in that order, which must put a parent before its
// children: ref's chain id first, then each block with its uncles, as
// canonical where it is ref's block at its number and as a side block
// otherwise, then ref's safe, finalized and pending blocks. It then checks
// with TestBlocks that s serves what ref serves.
//
// The blocks need not be a chain from ref's earliest block: real blocks
// far apart, known by their transaction hashes only or whole, are written
// and compared one by one, as a chain is. But hashes should name every
// block ref holds, since ref's tags (earliest, latest, safe, finalized)
// are compared too, and a block that was not written is not served.
func TestCopy(t *testing.T, s Store, ref backend.Backend, hashes ...backend.Hash) {
	t.Helper()
	ctx := context.Background()
	if id, err := ref.ChainID(ctx); err == nil {
		if err := s.SetChainID(id); err != nil {
			t.Fatalf("setting the chain id %d: %v", id, err)
		}
	}
	for _, h := range hashes {
		b, canonical := refBlock(t, ref, h)
		writeBlock(t, s, ref, b, canonical)
	}
	copyTags(t, s, ref)
	TestBlocks(t, s, ref, hashes...)
}

// TestBlocks checks that got serves what want serves for the blocks that
// hashes name, byte for byte, as TestBackend does for a whole chain: each
// block by hash and, where it is want's canonical block, by number, with
// its uncles; the tags; the chain id; and that both refuse a number past
// want's latest block and an unknown hash with backend.ErrNotFound. It
// asks for no other number, so that a few blocks millions apart cost a
// few reads.
func TestBlocks(t *testing.T, got, want backend.Backend, hashes ...backend.Hash) {
	t.Helper()
	ctx := context.Background()
	if len(hashes) == 0 {
		t.Fatal("TestBlocks: no blocks named")
	}
	latest, err := want.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		t.Fatalf("the reference has no latest block: %v", err)
	}
	c := comparer{t: t, got: got, want: want}
	canonical := 0
	for _, h := range hashes {
		if b, ok := refBlock(t, want, h); ok {
			c.byNumber(backend.BlockNumber(b.Number))
			canonical++
		}
		c.byHash(h)
	}
	c.tagsAndEdges(latest.Number)
	t.Logf("%d answers compared, %d blocks (%d canonical)", c.compared, len(hashes), canonical)
}

// refBlock returns the reference's block of hash h, and whether it is the
// reference's canonical block at its number.
func refBlock(t *testing.T, ref backend.Backend, h backend.Hash) (*backend.Block, bool) {
	t.Helper()
	ctx := context.Background()
	b, err := ref.BlockByHash(ctx, h)
	if err != nil {
		t.Fatalf("the reference's block %s: %v", h, err)
	}
	at, err := ref.BlockByNumber(ctx, backend.BlockNumber(b.Number))
	return b, err == nil && at.Hash == h
}
