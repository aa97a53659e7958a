// Package backendtest checks that a backend.Backend, or a store that is
// also a backend.Writer, behaves as blockrpc relies on, in the spirit of
// testing/fstest.TestFS. Every store of this project passes it, and so
// should yours:
//
//	func TestConformance(t *testing.T) {
//		backendtest.TestStore(t, func(t *testing.T) backendtest.Store {
//			return mystore.Open(t.TempDir())
//		})
//	}
//
// TestStore writes chains built with memstore/chaintest and the demo chain
// into fresh stores and checks every method and tag against the same
// chain in memstore, byte for byte: side blocks, uncles, pending, reorgs
// (deeper, shorter, back to an old branch, hundreds of blocks deep, a
// block replaced under its children), tags cleared with the blocks they
// mark, total difficulty summed by parent, blocks known only by
// transaction hashes, refused blocks, blocks and uncles given to the
// store left as they were, context cancellation, and readers running
// while a writer reorganises, adds blocks and sets tags, each
// reorganisation seen whole or not at all (run it with -race).
//
// TestBackend checks a Backend that cannot be written, such as one reading
// from a node, against a reference that serves the same chain.
//
// TestCopy writes a chain of your own choosing into a store and checks it
// the same way, block by block: real blocks, such as a dump of a few
// mainnet blocks millions apart, or the chains of this project's shared
// fixtures, which memstore and every store here are run over. TestBlocks
// checks such blocks alone, in a store opened again, say.
//
// A Backend that is a backend.Lender is checked lending as well: each lent
// block must be written as the block its BlockByNumber or BlockByHash
// returns, and fail alike.
package backendtest

import (
	"context"
	"errors"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
)

// Store is a chain that can be read and written: what TestStore checks.
type Store interface {
	backend.Backend
	backend.Writer
}

// TestBackend checks that got serves what want serves: every canonical
// block from want's earliest to its latest by number and by hash, in both
// forms, each of their uncles, the blocks named by extra hashes (side
// blocks, say), the tags and the chain id; and that both refuse the same
// requests with backend.ErrNotFound (a number past the head, an unknown
// hash, an uncle index past the last); and that every lookup of got fails
// with a canceled context (context.Canceled), ChainID, each tag and a
// Lender's lookups included, whether or not the block is stored.
func TestBackend(t *testing.T, got, want backend.Backend, extra ...backend.Hash) {
	t.Helper()
	ctx := context.Background()
	c := comparer{t: t, got: got, want: want}
	first, err := want.BlockByNumber(ctx, backend.Earliest)
	if err != nil {
		t.Fatalf("the reference has no earliest block: %v", err)
	}
	last, err := want.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		t.Fatalf("the reference has no latest block: %v", err)
	}
	for n := first.Number; n <= last.Number; n++ {
		b := c.byNumber(backend.BlockNumber(n))
		if b != nil {
			c.byHash(b.Hash)
		}
	}
	for _, h := range extra {
		c.byHash(h)
	}
	c.tagsAndEdges(last.Number)
	checkCanceled(t, got, first.Number, last.Hash)
	t.Logf("%d answers compared, blocks %d to %d", c.compared, first.Number, last.Number)
}

// checkCanceled checks that b's lookups of block number, of the block of
// hash and of its first uncle fail with a canceled context, as the
// Backend's contract asks: a Backend that ignores its context holds a
// request its client left.
func checkCanceled(t *testing.T, b backend.Backend, number uint64, hash backend.Hash) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	checks := map[string]error{}
	_, checks["ChainID"] = b.ChainID(ctx)
	_, checks["BlockByNumber"] = b.BlockByNumber(ctx, backend.BlockNumber(number))
	// The tags too, which a store may answer from a head or a tag it
	// keeps in memory, and a Lender's lookups, which the handler makes
	// rather than BlockByNumber and BlockByHash.
	for _, tag := range []backend.BlockNumber{backend.Latest, backend.Earliest, backend.Safe, backend.Finalized, backend.Pending} {
		_, checks["BlockByNumber("+tag.String()+")"] = b.BlockByNumber(ctx, tag)
	}
	_, checks["BlockByHash"] = b.BlockByHash(ctx, hash)
	_, checks["UncleByBlockHashAndIndex"] = b.UncleByBlockHashAndIndex(ctx, hash, 0)
	if l, ok := b.(backend.Lender); ok {
		called := func(*backend.Block, backend.TransactionDecoder) error {
			return errors.New("lent with a canceled context")
		}
		checks["LendBlockByNumber"] = l.LendBlockByNumber(ctx, backend.BlockNumber(number), called)
		checks["LendBlockByHash"] = l.LendBlockByHash(ctx, hash, called)
	}
	for method, err := range checks {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: %v, want context.Canceled", method, err)
		}
	}
}

// comparer compares the answers of two backends.
type comparer struct {
	t         *testing.T
	got, want backend.Backend
	compared  int
}

// tagsAndEdges compares the blocks of the tags, the block after want's
// latest (last), a block of an unknown hash, and the chain id.
func (c *comparer) tagsAndEdges(last uint64) {
	c.t.Helper()
	for _, tag := range []backend.BlockNumber{backend.Latest, backend.Earliest, backend.Safe, backend.Finalized, backend.Pending} {
		c.byNumber(tag)
	}
	c.byNumber(backend.BlockNumber(last + 1))
	c.byHash(backend.Hash{0xde, 0xad})
	// The pending block is not found by hash (backend.Backend).
	if p, err := c.want.BlockByNumber(context.Background(), backend.Pending); err == nil && p.Hash != (backend.Hash{}) {
		c.byHash(p.Hash)
	}
	c.chainID()
}

// byNumber compares a block by number or tag, and returns want's, or nil.
func (c *comparer) byNumber(n backend.BlockNumber) *backend.Block {
	c.t.Helper()
	ctx := context.Background()
	w, werr := c.want.BlockByNumber(ctx, n)
	g, gerr := c.got.BlockByNumber(ctx, n)
	if l, ok := c.got.(backend.Lender); ok {
		c.lent("lent block "+n.String(), w, werr, func(f lendFunc) error { return l.LendBlockByNumber(ctx, n, f) })
	}
	if !c.sameError("block "+n.String(), gerr, werr) || werr != nil {
		return nil
	}
	c.sameBlock("block "+n.String(), g, w)
	return w
}

type lendFunc = func(*backend.Block, backend.TransactionDecoder) error

// lent compares a block that got lends with want's, in both forms, lent
// once for each: a lent decoder reads the transactions once, and a block
// lent without its TransactionHashes has them read through it.
func (c *comparer) lent(what string, want *backend.Block, werr error, lend func(lendFunc) error) {
	c.t.Helper()
	for _, fullTx := range []bool{false, true} {
		called := false
		gerr := lend(func(b *backend.Block, txs backend.TransactionDecoder) error {
			called = true
			if werr != nil {
				return nil
			}
			if b.Transactions != nil && txs != nil {
				c.t.Errorf("%s holds its transactions and lends a decoder of them too", what)
			}
			if fullTx && !want.HasTransactionBodies() {
				if txs != nil {
					c.t.Errorf("%s lends transaction bodies the reference does not have", what)
				}
				return nil
			}
			g, err := b.AppendLentJSON(nil, fullTx, txs)
			if w := want.AppendJSON(nil, fullTx); err != nil || string(g) != string(w) {
				c.t.Errorf("%s (fullTx %v) differs (%v):\n got  %s\n want %s", what, fullTx, err, g, w)
			}
			return nil
		})
		switch {
		case werr == nil && !called:
			c.t.Errorf("%s: %v, want the block lent", what, gerr)
		case werr != nil && called:
			c.t.Errorf("%s: lent, want %v", what, werr)
		case werr != nil:
			c.sameError(what, gerr, werr)
			return
		}
	}
}

func (c *comparer) byHash(h backend.Hash) {
	c.t.Helper()
	ctx := context.Background()
	w, werr := c.want.BlockByHash(ctx, h)
	g, gerr := c.got.BlockByHash(ctx, h)
	if l, ok := c.got.(backend.Lender); ok {
		c.lent("lent block "+h.String(), w, werr, func(f lendFunc) error { return l.LendBlockByHash(ctx, h, f) })
	}
	if !c.sameError("block "+h.String(), gerr, werr) || werr != nil {
		return
	}
	c.sameBlock("block "+h.String(), g, w)
	for i := range uint64(len(w.Uncles)) + 1 {
		wu, werr := c.want.UncleByBlockHashAndIndex(ctx, h, i)
		gu, gerr := c.got.UncleByBlockHashAndIndex(ctx, h, i)
		what := "uncle " + h.String() + " " + backend.BlockNumber(i).String()
		if !c.sameError(what, gerr, werr) || werr != nil {
			continue
		}
		c.compared++
		if gj, wj := gu.AppendJSON(nil), wu.AppendJSON(nil); string(gj) != string(wj) {
			c.t.Errorf("%s differs:\n got  %s\n want %s", what, gj, wj)
		}
	}
}

func (c *comparer) chainID() {
	c.t.Helper()
	ctx := context.Background()
	w, werr := c.want.ChainID(ctx)
	g, gerr := c.got.ChainID(ctx)
	if c.sameError("chain id", gerr, werr) && werr == nil && g != w {
		c.t.Errorf("chain id: got %d, want %d", g, w)
	}
}

// sameError reports whether both answers succeeded, and reports an error
// unless both failed alike. A reference's ErrNotFound must be the other's.
func (c *comparer) sameError(what string, got, want error) bool {
	c.t.Helper()
	c.compared++
	switch {
	case want == nil && got == nil:
		return true
	case want == nil:
		c.t.Errorf("%s: %v, want the block", what, got)
	case errors.Is(want, backend.ErrNotFound) && !errors.Is(got, backend.ErrNotFound):
		c.t.Errorf("%s: %v, want ErrNotFound", what, got)
	}
	return false
}

// sameBlock compares two blocks as the service would serve them, with
// transaction objects and with hashes.
func (c *comparer) sameBlock(what string, got, want *backend.Block) {
	c.t.Helper()
	for _, full := range []bool{true, false} {
		if !want.HasTransactionBodies() && full {
			if got.HasTransactionBodies() {
				c.t.Errorf("%s has transaction bodies the reference does not have", what)
			}
			continue
		}
		if g, w := got.AppendJSON(nil, full), want.AppendJSON(nil, full); string(g) != string(w) {
			c.t.Errorf("%s (fullTx %v) differs:\n got  %s\n want %s", what, full, g, w)
		}
	}
	if got.Pending != want.Pending {
		c.t.Errorf("%s: Pending %v, want %v", what, got.Pending, want.Pending)
	}
}
