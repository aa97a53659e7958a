// Package dumpcheck tells whether the blocks of a dump can be taken into a
// store that holds a chain as blocks of that chain: what the
// example server's Pebble import and pgstore's ImportDump refuse, with
// their stores' ErrOtherChain, before anything of another chain of the
// same chain id is written.
package dumpcheck

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/blockrpc/blockrpc/backend"
)

// A Checker checks the blocks of one dump, in its order.
//
// A block the store holds is of its chain. One that follows the last
// canonical one the Checker was told of, or whose parent the store holds
// (a block of its chain, or of the dump, written before it), is of the
// chain the dump has shown to be the store's, and may replace the store's blocks above their common ancestor
// (a dump that reorganises). Any other canonical block (the dump's first,
// or one after a hole in the dump) must be next to the store's chain: the
// store's own block at its number, the parent of the store's block above
// it, or a block that replaces the store's first one from the same
// parent. One next to none is
// refused, for nothing tells it from another chain's: a dump that starts
// below the store's first block, with a gap between. A side block must
// be the child of a block the store holds. Into a store that held no
// chain when the dump began, anything goes.
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

// Check returns nil when b may be written into store as canonical, and
// otherwise why not.
func (c *Checker) Check(ctx context.Context, store backend.Backend, b *backend.Block) error {
	if err := c.start(ctx, store); err != nil {
		return err
	}
	if b.Number > math.MaxInt64 {
		// Its neighbours' numbers would be read as tags.
		return errNumber(b)
	}
	if c.Follows(b) {
		return nil
	}
	if held, err := Holds(ctx, store, b.Hash); held || err != nil {
		return err // a block of the store's chain, whatever its neighbours
	}
	if held, err := holdsParent(ctx, store, b); held || err != nil {
		return err
	}
	canonical := func(n uint64) (*backend.Block, error) {
		blk, err := store.BlockByNumber(ctx, backend.BlockNumber(n))
		if errors.Is(err, backend.ErrNotFound) {
			return nil, nil
		}
		return blk, err
	}
	if b.Number > 0 {
		// A child of the store's block below passed above, its parent
		// held: any other block at this number is another chain's.
		below, err := canonical(b.Number - 1)
		switch {
		case err != nil:
			return err
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
	var above *backend.Block
	if b.Number < math.MaxInt64 {
		above, err = canonical(b.Number + 1)
	}
	switch {
	case err != nil:
		return err
	case above != nil && above.ParentHash == b.Hash:
		return nil
	case above != nil:
		return fmt.Errorf("%w: its block %d (%s) is not the parent of the store's block %d (%s)", c.OtherChain, b.Number, b.Hash, above.Number, above.Hash)
	}
	first, latest := "?", "?"
	earliest, err := store.BlockByNumber(ctx, backend.Earliest)
	if err == nil {
		first = fmt.Sprint(earliest.Number)
	}
	if blk, err := store.BlockByNumber(ctx, backend.Latest); err == nil {
		latest = fmt.Sprint(blk.Number)
	}
	if earliest != nil && b.Number < earliest.Number {
		// Even a dump of the store's own chain that reaches its first
		// block further on: that is known only once it does, and the
		// blocks before would be written by then.
		return fmt.Errorf("%w: its block %d (%s) is below the store's first block, %d, and not its parent, which could not tell it for the store's chain: a store takes older blocks than its first only from a dump that starts at that block's parent; import the whole range into a new store", c.OtherChain, b.Number, b.Hash, earliest.Number)
	}
	return fmt.Errorf("%w: its block %d (%s) is next to no block of the store's chain (%s to %s), which could not tell it for its own", c.OtherChain, b.Number, b.Hash, first, latest)
}

// CheckSide returns nil when b may be written into store as a side block,
// and otherwise why not.
func (c *Checker) CheckSide(ctx context.Context, store backend.Backend, b *backend.Block) error {
	if err := c.start(ctx, store); err != nil || c.empty {
		return err
	}
	if held, err := Holds(ctx, store, b.Hash); held || err != nil {
		return err
	}
	held, err := holdsParent(ctx, store, b)
	switch {
	case err != nil:
		return err
	case !held:
		return fmt.Errorf("%w: its side block %d (%s) is not the child of a block the store holds", c.OtherChain, b.Number, b.Hash)
	}
	return nil
}

// errNumber is the error of a block whose number no block can have: the
// API reads block numbers as int64, as Seal says when it refuses one.
func errNumber(b *backend.Block) error {
	return fmt.Errorf("block %d (%s): its number is above the int64 range of block numbers", b.Number, b.Hash)
}

// start learns, at the dump's first block, whether the store held a
// chain.
func (c *Checker) start(ctx context.Context, store backend.Backend) error {
	if c.started {
		return nil
	}
	_, err := store.BlockByNumber(ctx, backend.Latest)
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		return err
	}
	c.started, c.empty = true, err != nil
	return nil
}

// holdsParent reports whether store holds b's parent: a block of its
// chain, canonical or not, or of the dump, written before b.
func holdsParent(ctx context.Context, store backend.Backend, b *backend.Block) (bool, error) {
	if b.Number == 0 {
		return false, nil
	}
	return Holds(ctx, store, b.ParentHash)
}

// Holds reports whether store holds the block with the given hash,
// canonical or not.
func Holds(ctx context.Context, store backend.Backend, hash backend.Hash) (bool, error) {
	_, err := store.BlockByHash(ctx, hash)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// StoreWasEmpty reports whether store held no chain when the dump's first
// block came (the first call asks it): every block of such a dump is
// taken as memstore.Load takes it, where one the store held before is
// skipped.
func (c *Checker) StoreWasEmpty(ctx context.Context, store backend.Backend) (bool, error) {
	if err := c.start(ctx, store); err != nil {
		return false, err
	}
	return c.empty, nil
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
