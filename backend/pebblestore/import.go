package pebblestore

import (
	"context"
	"io"
	"log/slog"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/dumpcheck"
	"github.com/blockrpc/blockrpc/memstore"
)

// ImportOptions are ImportDump's; the zero value works.
type ImportOptions struct {
	// Logger, when set, is told what the dump misses (memstore.Loader's
	// summary: holes, repeated lines, lines out of order), as pgstore's
	// ImportOptions.Logger is.
	Logger *slog.Logger
	// Progress, when set, is called after each block taken with the
	// number of blocks taken so far: written, or found stored already.
	Progress func(blocks int)
}

// ImportDump reads a dump (memstore's JSON Lines format) into the store,
// every block checked as memstore.Load checks it. A block that cannot be
// of the store's chain (another chain of the same chain id, whichever
// block its dump starts at) is refused with ErrOtherChain before it is
// written. Into a store that held a chain, the blocks it holds are
// skipped: the same dump imported again, or an older one, leaves a store
// that has moved on as it is, where writing them again would take its
// chain back to the dump's. A line that fails its checks ends the import
// with a *memstore.LineError naming it; the blocks before it stay
// written. ImportDump sets no tag: safe and finalized are the caller's
// (SetSafe, SetFinalized), as a dump does not say them.
func (s *Store) ImportDump(ctx context.Context, r io.Reader, opts *ImportOptions) error {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	w := &dumpWriter{ctx: ctx, s: s, progress: o.Progress, check: dumpcheck.Checker{OtherChain: ErrOtherChain}}
	return (&memstore.Loader{Logger: o.Logger}).LoadInto(r, w)
}

// dumpWriter is the Writer ImportDump loads a dump into: the store, each
// block checked to be of its chain (dumpcheck.Checker) and skipped when
// the store holds it.
type dumpWriter struct {
	ctx      context.Context
	s        *Store
	check    dumpcheck.Checker
	taken    int
	progress func(int)
}

func (w *dumpWriter) AddBlock(b *backend.Block, uncles ...*backend.Uncle) error {
	return w.add(b, uncles, true)
}

func (w *dumpWriter) AddSideBlock(b *backend.Block, uncles ...*backend.Uncle) error {
	return w.add(b, uncles, false)
}

// add takes b, canonical or not: skipped when the store holds it, else
// checked to be of the store's chain and written. The Checker is told of
// each canonical block taken, the progress of every block.
func (w *dumpWriter) add(b *backend.Block, uncles []*backend.Uncle, canonical bool) error {
	held, err := w.skips(b)
	switch {
	case err != nil:
		return err
	case !held && canonical:
		err = w.check.Check(w.ctx, w.s, b)
		if err == nil {
			err = w.s.AddBlock(b, uncles...)
		}
	case !held:
		err = w.check.CheckSide(w.ctx, w.s, b)
		if err == nil {
			err = w.s.AddSideBlock(b, uncles...)
		}
	}
	if err != nil {
		return err
	}
	if canonical {
		w.check.Took(b)
	}
	w.took()
	return nil
}

func (w *dumpWriter) SetPending(b *backend.Block) error { return w.s.SetPending(b) }
func (w *dumpWriter) SetSafe(n uint64) error            { return w.s.SetSafe(n) }
func (w *dumpWriter) SetFinalized(n uint64) error       { return w.s.SetFinalized(n) }
func (w *dumpWriter) SetChainID(id uint64) error        { return w.s.SetChainID(id) }

// skips reports whether the store holds b, and held a chain before the
// dump; it fails once ctx is done. Into a store that held none the dump
// is taken whole, as memstore.Load takes it, without a lookup a block (5%
// of an import's time, three interleaved runs of 5,000 blocks).
func (w *dumpWriter) skips(b *backend.Block) (bool, error) {
	if err := w.ctx.Err(); err != nil {
		return false, err
	}
	if empty, err := w.check.StoreWasEmpty(w.ctx, w.s); empty || err != nil {
		return false, err
	}
	return dumpcheck.Holds(w.ctx, w.s, b.Hash)
}

func (w *dumpWriter) took() {
	w.taken++
	if w.progress != nil {
		w.progress(w.taken)
	}
}
