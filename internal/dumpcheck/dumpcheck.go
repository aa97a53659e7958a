// Package dumpcheck tells whether the canonical blocks of a dump can be
// taken into a store that holds a chain as blocks of that chain: what the
// example server's Pebble import and pgstore's ImportDump refuse, with
// their stores' ErrOtherChain, before anything of another chain of the
// same chain id is written.
package dumpcheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/blockrpc/blockrpc/backend"
)

// A Checker checks the canonical blocks of one dump, in its order.
//
// A block that follows the last one the Checker was told of is of the
// chain the dump has shown to be the store's, and may replace the store's
// blocks above their common ancestor (a dump that reorganises). Any other
// (the dump's first, or one after a hole in the dump) must be next to the
// store's chain: the store's own block at its number, the child of the
// store's block below it, the parent of the store's block above it, or a
// block that replaces the store's first one from the same parent. One
// next to none is refused, for nothing tells it from another chain's: a
// dump that starts below the store's first block, with a gap between.
// Into a store that held no chain when the dump began, anything goes.
type Checker struct {
	// OtherChain is the store's error for another chain's block, which
	// the errors of refused blocks wrap; the store's own failures are
	// returned as they are.
	OtherChain error

	started bool
	empty   bool
	last    struct {
		set    bool
		number uint64
		hash   backend.Hash
	}
}

// Check returns nil when b may be written into store, and otherwise why
// not.
func (c *Checker) Check(ctx context.Context, store backend.Backend, b *backend.Block) error {
	if !c.started {
		_, err := store.BlockByNumber(ctx, backend.Latest)
		if err != nil && !errors.Is(err, backend.ErrNotFound) {
			return err
		}
		c.started, c.empty = true, err != nil
	}
	if c.Follows(b) {
		return nil
	}
	canonical := func(n uint64) (*backend.Block, error) {
		blk, err := store.BlockByNumber(ctx, backend.BlockNumber(n))
		if errors.Is(err, backend.ErrNotFound) {
			return nil, nil
		}
		return blk, err
	}
	if b.Number > 0 {
		below, err := canonical(b.Number - 1)
		switch {
		case err != nil:
			return err
		case below != nil && below.Hash == b.ParentHash:
			return nil
		case below != nil:
			return fmt.Errorf("%w: its block %d (%s) is not the child of the store's block %d (%s)", c.OtherChain, b.Number, b.Hash, below.Number, below.Hash)
		}
	}
	ours, err := canonical(b.Number)
	switch {
	case err != nil:
		return err
	case ours != nil && (ours.Hash == b.Hash || b.Number > 0 && ours.ParentHash == b.ParentHash):
		return nil
	case ours != nil:
		return fmt.Errorf("%w: its block %d is %s, the store's is %s", c.OtherChain, b.Number, b.Hash, ours.Hash)
	}
	above, err := canonical(b.Number + 1)
	switch {
	case err != nil:
		return err
	case above != nil && above.ParentHash == b.Hash:
		return nil
	case above != nil:
		return fmt.Errorf("%w: its block %d (%s) is not the parent of the store's block %d (%s)", c.OtherChain, b.Number, b.Hash, above.Number, above.Hash)
	}
	first, latest := "?", "?"
	if blk, err := store.BlockByNumber(ctx, backend.Earliest); err == nil {
		first = fmt.Sprint(blk.Number)
	}
	if blk, err := store.BlockByNumber(ctx, backend.Latest); err == nil {
		latest = fmt.Sprint(blk.Number)
	}
	return fmt.Errorf("%w: its block %d (%s) is next to no block of the store's chain (%s to %s), which could not tell it for its own", c.OtherChain, b.Number, b.Hash, first, latest)
}

// Follows reports whether b follows the last block the Checker was told
// of, and so needs no look at the store.
func (c *Checker) Follows(b *backend.Block) bool {
	return c.started && (c.empty || c.last.set && b.Number == c.last.number+1 && b.ParentHash == c.last.hash)
}

// Took tells the Checker that b, a canonical block it passed, is taken.
func (c *Checker) Took(b *backend.Block) {
	c.last.set, c.last.number, c.last.hash = true, b.Number, b.Hash
}
