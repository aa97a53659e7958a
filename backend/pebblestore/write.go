package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/cockroachdb/pebble/v2"
	"github.com/holiman/uint256"
)

// AddBlock implements backend.Writer with memstore's semantics (see
// memstore.Store.AddBlock): the block is checked with backend.Seal, its
// total difficulty settled against its parent's, and it becomes canonical
// at its number, the chain reorganising around it. The block, its indexes
// and every canonical entry that changes are one atomic batch. A block
// already stored is only made canonical again, which writes nothing when
// it already is: importing the same dump twice changes nothing.
//
// A block numbered 0 other than the store's genesis is refused with
// ErrOtherChain.
func (s *Store) AddBlock(block *backend.Block, uncles ...*backend.Uncle) error {
	return s.add(block, uncles, true)
}

// AddSideBlock implements backend.Writer: it stores a block as AddBlock
// does, checks included, and leaves the canonical chain as it is.
func (s *Store) AddSideBlock(block *backend.Block, uncles ...*backend.Uncle) error {
	return s.add(block, uncles, false)
}

var errPendingInAdd = errors.New("a pending block is set with SetPending, not added")

// blockError names the block an error is about.
func blockError(b *backend.Block, err error) error {
	return fmt.Errorf("block %d (%s): %w", b.Number, b.Hash, err)
}

func (s *Store) add(block *backend.Block, uncles []*backend.Uncle, canonical bool) error {
	if block != nil && block.Pending {
		return errPendingInAdd
	}
	b, us, chainID, err := backend.SealCopies(block, uncles)
	if err != nil {
		return blockError(b, err)
	}
	return s.write(func(w *write) error {
		if err := w.st.agreeChainID(chainID); err != nil {
			return blockError(b, err)
		}
		if b.Number == 0 && w.st.hasGenesis && b.Hash != w.st.genesis {
			return blockError(b, fmt.Errorf("pebblestore: %w: %s holds the chain whose genesis is %s", ErrOtherChain, s.dir, w.st.genesis))
		}
		_, stored, err := w.numberOf(b.Hash)
		if err != nil {
			return err
		}
		// The record of a new block that becomes canonical is written
		// once, in its canonical entry; makeCanonical writes it.
		var rec []byte
		if stored {
			if err := w.readd(b); err != nil {
				return blockError(b, err)
			}
		} else {
			if rec, err = w.insert(b, us, !canonical); err != nil {
				return blockError(b, err)
			}
			w.bindChainID(chainID)
			if b.Number == 0 && !w.st.hasGenesis {
				w.st.genesis, w.st.hasGenesis = b.Hash, true
				w.set(keyGenesis, b.Hash[:])
			}
		}
		if canonical {
			return w.makeCanonical(b.Number, b.Hash, rec)
		}
		return nil
	})
}

// write is one Writer call: a batch that reads its own writes, and the
// writer's state as the batch leaves it.
type write struct {
	s     *Store
	batch *pebble.Batch
	st    state
	// chainIDChanged tells that st.chainID must be written.
	chainIDChanged bool
	// err is why the batch was not written whole: nothing of it is.
	err error
}

// maxBatchBytes bounds a write's batch below Pebble's limit of 4 GB, past
// which adding to a batch panics: a reorganisation that moves more than
// that (the records of 10^4 blocks of 150 KB, each written twice) is
// refused rather than written in parts. Where an int is 32 bits, no batch
// can come near it, and the bound is the largest int.
var maxBatchBytes = min(3<<30, math.MaxInt)

// write runs f under the writer lock and commits what it wrote, unless it
// fails: then nothing of it is stored.
func (s *Store) write(f func(w *write) error) error {
	if s.gate.isShut() {
		return ErrClosed
	}
	if err := s.disk.refusal(); err != nil {
		return err
	}
	if !s.gate.enter() {
		return ErrClosed
	}
	defer s.gate.leave()
	if err := s.lockWriter(); err != nil {
		return err
	}
	w := &write{s: s, batch: s.db.NewIndexedBatch(), st: s.st}
	inDoubt := false
	defer func() {
		if !inDoubt {
			w.batch.Close()
			s.unlockWriter()
		}
	}()
	// Checked again under the lock: a flush may have failed while this
	// write waited for it.
	if err := s.disk.refusal(); err != nil {
		return err
	}
	if err := s.disk.stallRefusal(s.db, s.l0Stop); err != nil {
		return err
	}
	err := f(w)
	if w.err != nil {
		// What f did next went without the writes left out.
		return w.err
	}
	if err != nil {
		return err
	}
	if w.chainIDChanged {
		w.set(keyChainID, encodeChainID(w.st.chainID))
	}
	if w.batch.Empty() {
		return nil
	}
	inDoubt, err = s.commit(w)
	return err
}

// commit commits w's batch and takes its state once it is written. A
// commit waits in Pebble for room in its memory tables while a full one
// waits for its flush, and should that flush fail, until one succeeds,
// however long the disk stays full: a refusal checked before it came too
// early. Then it is left to end in the background, holding the writer's
// lock, and commit reports it in doubt: the write is stored once a flush
// succeeds, if not before (and writes are refused until then).
//
// Every commit is watched so, even one that a count of the flushes under
// way would clear: Pebble begins the flush of a full table on a goroutine
// of its own, which may not have run yet (and not told FlushBegin) when
// the next commits fill the following table
// (TestDiskFailsFlushAfterQuickCommit). The handover to a goroutine
// costs the import up to a fifth of its rate (BenchmarkImport/txs=8,
// four interleaved pairs: 0.79 to 1.04 of the rate with the quick path).
func (s *Store) commit(w *write) (inDoubt bool, err error) {
	if err := s.disk.refusal(); err != nil {
		return false, err // a flush failed while the batch was made
	}
	done := make(chan error, 1)
	go func() { done <- w.batch.Commit(s.writeOpts) }()
	select {
	case err := <-done:
		return false, s.committed(w, err)
	case <-s.disk.flushFailed():
	}
	select {
	case err := <-done:
		return false, s.committed(w, err)
	default:
	}
	ended := make(chan struct{})
	s.inDoubt = ended
	go func() {
		defer close(ended)
		s.committed(w, <-done)
		w.batch.Close()
		s.unlockWriter()
	}()
	refusal := s.disk.refusal()
	if refusal == nil {
		refusal = errors.New("pebblestore: a flush failed")
	}
	return true, fmt.Errorf("pebblestore: the write waits in Pebble for room that a flush would make, and the flush failed: it is stored once one succeeds, if not before, and may be given again then: %w", refusal)
}

// committed takes the state of w once its batch is committed without err.
func (s *Store) committed(w *write, err error) error {
	if err != nil {
		return fmt.Errorf("pebblestore: committing: %w", err)
	}
	s.st = w.st
	if w.st.hasGenesis && s.genesis.Load() == nil {
		g := w.st.genesis
		s.genesis.Store(&g)
	}
	return nil
}

// lockWriter takes the writer's lock, unless a flush fails or the store
// closes while it waits: the write that holds it may wait for good.
func (s *Store) lockWriter() error {
	for {
		select {
		case s.wlock <- struct{}{}:
			return nil
		case <-s.disk.flushFailed():
			if err := s.disk.refusal(); err != nil {
				return err
			}
		case <-s.closeCh:
			return ErrClosed
		}
	}
}

func (s *Store) unlockWriter() { <-s.wlock }

func (w *write) set(key, value []byte) {
	if !w.fits(len(key) + len(value)) {
		return
	}
	// An indexed batch fails only when it is closed or read-only.
	if err := w.batch.Set(key, value, nil); err != nil {
		panic(err)
	}
}

func (w *write) delete(key []byte) {
	if !w.fits(len(key)) {
		return
	}
	if err := w.batch.Delete(key, nil); err != nil {
		panic(err)
	}
}

// fits reports whether an entry of n bytes fits in the batch, and sets
// w.err when it does not.
func (w *write) fits(n int) bool {
	const entryOverhead = 16 // its kind and lengths
	if w.err == nil && w.batch.Len()+n+entryOverhead > maxBatchBytes {
		w.err = fmt.Errorf("pebblestore: the write is over the %d bytes one batch holds (a reorganisation too deep to be written at once)", maxBatchBytes)
	}
	return w.err == nil
}

// agreeChainID checks a block's chain id against the store's.
func (st *state) agreeChainID(id *uint256.Int) error {
	if id != nil && st.chainID.known && id.Uint64() != st.chainID.id {
		return &backend.MismatchError{Field: "chainId", Given: hexutil.EncodeU256(id), Computed: hexutil.EncodeUint64(st.chainID.id) + " (of the store)"}
	}
	return nil
}

// bindChainID makes a stored block's chain id the store's, for good.
func (w *write) bindChainID(id *uint256.Int) {
	if id == nil {
		return
	}
	c := chainIDState{id: id.Uint64(), known: true, bound: true}
	if c != w.st.chainID {
		w.st.chainID, w.chainIDChanged = c, true
	}
}

func (w *write) numberOf(hash backend.Hash) (uint64, bool, error) {
	v, found, err := get(w.batch, numberKey(hash))
	if !found {
		return 0, false, err
	}
	n, ok := decodeUint64(v)
	if !ok {
		return 0, false, errCorrupt
	}
	return n, true, nil
}

// canonical returns the hash of the canonical block at number.
func (w *write) canonical(number uint64) (backend.Hash, bool, error) {
	var h backend.Hash
	v, closer, err := w.batch.Get(canonicalKey(number))
	if errors.Is(err, pebble.ErrNotFound) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	defer closer.Close()
	h, _, err = splitCanonical(v)
	return h, err == nil, err
}

// withRecord calls f with the record of the stored block number/hash,
// valid during the call, and reports whether the block is stored. It
// reads the batch as a read call reads the database (view.recordOf), so
// that where a block's record is kept is decided in one place.
func (w *write) withRecord(number uint64, hash backend.Hash, f func(rec []byte) error) (found bool, err error) {
	it, err := w.batch.NewIter(nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	rec, found, err := (&view{it: it}).recordOf(number, hash)
	if !found {
		return false, err
	}
	return true, f(rec)
}

// parentOf returns the parent hash of a stored block, from its record's
// header, once the record is found to be the block's own: a reorganisation
// that took a misplaced record's parent would make canonical blocks that
// are not the block's ancestors.
func (w *write) parentOf(number uint64, hash backend.Hash) (backend.Hash, error) {
	var parent backend.Hash
	found, err := w.withRecord(number, hash, func(rec []byte) error {
		r, err := decodeBlock(rec, decodeUncles)
		if err == nil {
			err = blockRef{number: number, hash: hash}.holds(r.block)
		}
		if err == nil {
			parent = r.block.ParentHash
		}
		return err
	})
	if err == nil && !found {
		err = errCorrupt
	}
	if err != nil {
		return parent, fmt.Errorf("block %d (%s): %w", number, hash, err)
	}
	return parent, nil
}

// stored reads a stored block's header and uncles with their total
// difficulties, or nil when the block is not stored.
func (w *write) stored(hash backend.Hash) (*entry, uint64, error) {
	number, found, err := w.numberOf(hash)
	if !found {
		return nil, 0, err
	}
	var r *entry
	found, err = w.withRecord(number, hash, func(rec []byte) (err error) {
		r, err = decodeBlock(rec, decodeUncles)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if !found {
		return nil, 0, fmt.Errorf("block %d (%s): %w", number, hash, errCorrupt)
	}
	if err := (blockRef{number: number, hash: hash}).holds(r.block); err != nil {
		return nil, 0, err
	}
	if !r.complete() {
		v, found, err := get(w.batch, tdKey(number, hash))
		if err != nil {
			return nil, 0, err
		}
		if found {
			t, err := decodeTD(v)
			if err != nil || len(t.uncles) != len(r.uncles) {
				return nil, 0, errCorrupt
			}
			r.setTD(t)
		}
	}
	return r, number, nil
}

// tdOf returns the total difficulty of a stored block, or nil.
func (w *write) tdOf(hash backend.Hash) (*uint256.Int, error) {
	r, _, err := w.stored(hash)
	if r == nil {
		return nil, err
	}
	return r.block.TotalDifficulty, nil
}

// insert writes a block that is not stored yet, as memstore.Store.add
// does: its total difficulty and its uncles' are settled against their
// parents', and those it gives to stored descendants are written. It
// returns the block's record, which it writes only when asked to: a block
// that becomes canonical has it written in its canonical entry.
func (w *write) insert(b *backend.Block, uncles []*backend.Uncle, writeRecord bool) ([]byte, error) {
	parentTD, err := w.tdOf(b.ParentHash)
	if err != nil {
		return nil, err
	}
	if b.Number == 0 && b.ParentHash == (backend.Hash{}) {
		parentTD = new(uint256.Int) // the genesis: its own difficulty is the total
	}
	if err := backend.SettleTotalDifficulty("totalDifficulty", &b.TotalDifficulty, parentTD, &b.Difficulty); err != nil {
		return nil, err
	}
	// The parents whose total difficulty is unknown: learning it will
	// update this block's or uncle's, which the child index finds.
	// Children of a parent whose total is known have theirs settled
	// from it now, and need no entry.
	if parentTD == nil {
		w.set(childKey(b.ParentHash, b.Hash, childBlock), nil)
	}
	for i, u := range uncles {
		td, err := w.tdOf(u.ParentHash)
		if err != nil {
			return nil, err
		}
		if err := backend.SettleTotalDifficulty(fmt.Sprintf("uncle %d: totalDifficulty", i), &u.TotalDifficulty, td, &u.Difficulty); err != nil {
			return nil, err
		}
		if td == nil {
			w.set(childKey(u.ParentHash, b.Hash, uint32(i)), nil)
		}
	}
	var updates []backend.Descendant
	if b.TotalDifficulty != nil {
		if updates, err = backend.DescendantTotalDifficulties(b.Hash, b.TotalDifficulty, w.storedChildren); err != nil {
			return nil, err
		}
	}
	// The record takes about the block's RLP and the hashes beside its
	// transactions. A block without its transactions' bodies gives a size
	// nothing checks, no hint for an allocation.
	sizeHint := uint64(96*len(b.Transactions) + 512)
	if b.HasTransactionBodies() {
		sizeHint += b.Size
	}
	rec := record.Append(make([]byte, 0, sizeHint), lendable(b), uncles)
	if writeRecord {
		w.set(recordKey(b.Number, b.Hash), rec)
	}
	w.set(numberKey(b.Hash), encodeUint64(b.Number))
	return rec, w.applyTDs(updates)
}

// lendable returns b with the hashes of its transactions beside them,
// for its record to hold both (record.Append): a block lent to be served
// without transaction details then gives its hashes without its
// transactions being decoded, which took about 40% of the time of such an
// answer (13,002 against 22,131 answers a second through the example
// server, blocks of 180 transactions). The hashes are 32 bytes a
// transaction, 5% of a block of 8 transactions of mainnet's shape; with
// Options.Compress, compression finds most of them again in their
// transactions: at 10^6 such blocks (TestScale), the tables took 0.910
// of the RLP against 0.888 (with 8 KB blocks).
func lendable(b *backend.Block) *backend.Block {
	if len(b.Transactions) == 0 || b.TransactionHashes != nil {
		return b
	}
	c := *b
	c.TransactionHashes = backend.TransactionHashes(b.Transactions)
	return &c
}

// readd checks what a block added again gives against the stored block. A
// total difficulty given for a stored block without one becomes known: the
// block and its stored descendants take it, as if it were new.
func (w *write) readd(b *backend.Block) error {
	given := b.TotalDifficulty
	if given == nil {
		return nil
	}
	stored, err := w.tdOf(b.Hash)
	switch {
	case err != nil:
		return err
	case stored != nil:
		if !given.Eq(stored) {
			return &backend.MismatchError{Field: "totalDifficulty", Given: hexutil.EncodeU256(given), Computed: hexutil.EncodeU256(stored) + " (stored)"}
		}
		return nil
	}
	updates, err := backend.DescendantTotalDifficulties(b.Hash, given, w.storedChildren)
	if err != nil {
		return err
	}
	updates = append(updates, backend.Descendant{Hash: b.Hash, Uncle: -1, TD: given})
	return w.applyTDs(updates)
}

// child is a block (uncle childBlock) or an uncle of the block hash.
type child struct {
	hash  backend.Hash
	uncle uint32
}

// storedChildren is the store's side of
// backend.DescendantTotalDifficulties: the child entries of parent, with
// each child's difficulty and total read from its record.
func (w *write) storedChildren(parent backend.Hash) ([]backend.Descendant, error) {
	children, err := w.children(parent)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Descendant, len(children))
	for i, c := range children {
		r, _, err := w.stored(c.hash)
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, fmt.Errorf("the child %s of %s: %w", c.hash, parent, errCorrupt)
		}
		d := backend.Descendant{Hash: c.hash, Uncle: -1, Difficulty: r.block.Difficulty, TD: r.block.TotalDifficulty}
		if c.uncle != childBlock {
			if uint64(c.uncle) >= uint64(len(r.uncles)) {
				return nil, errCorrupt
			}
			u := r.uncles[c.uncle]
			d.Uncle, d.Difficulty, d.TD = int(c.uncle), u.Difficulty, u.TotalDifficulty
		}
		out[i] = d
	}
	return out, nil
}

// children lists the child entries of parent.
func (w *write) children(parent backend.Hash) ([]child, error) {
	prefix := childPrefix(parent)
	it, err := w.batch.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	var out []child
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[len(prefix):]
		if len(k) != 32+4 {
			it.Close()
			return nil, errCorrupt
		}
		var c child
		copy(c.hash[:], k)
		c.uncle = uint32(k[32])<<24 | uint32(k[33])<<16 | uint32(k[34])<<8 | uint32(k[35])
		out = append(out, c)
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	return out, nil
}

// applyTDs writes the total difficulties
// backend.DescendantTotalDifficulties worked out, beside the records,
// which stay as they were written.
func (w *write) applyTDs(updates []backend.Descendant) error {
	byBlock := make(map[backend.Hash][]backend.Descendant)
	for _, d := range updates {
		byBlock[d.Hash] = append(byBlock[d.Hash], d)
	}
	for hash, ds := range byBlock {
		r, number, err := w.stored(hash)
		if err != nil {
			return err
		}
		if r == nil {
			return fmt.Errorf("block %s: %w", hash, errCorrupt)
		}
		t := r.td()
		for _, d := range ds {
			if d.Uncle < 0 {
				t.block = d.TD
			} else {
				t.uncles[d.Uncle] = d.TD
			}
		}
		w.set(tdKey(number, hash), encodeTD(t))
	}
	return nil
}

// makeCanonical makes hash the canonical block at number, reorganising the
// chain around it as memstore does: the known ancestors become canonical
// down to the first that already is, and above the block the chain
// continues only through its children. rec is the record of a block just
// inserted without it, nil for a stored block.
func (w *write) makeCanonical(number uint64, hash backend.Hash, rec []byte) error {
	old, had, err := w.canonical(number)
	if err != nil {
		return err
	}
	replaced := had && old != hash
	if !had || replaced {
		if err := w.setCanonical(number, hash, rec, had); err != nil {
			return err
		}
	}
	parent, err := w.parentOf(number, hash)
	if err != nil {
		return err
	}
	for n := number; n > 0; n-- {
		pn, stored, err := w.numberOf(parent)
		if err != nil {
			return err
		}
		if !stored || pn != n-1 {
			break
		}
		cur, had, err := w.canonical(n - 1)
		if err != nil {
			return err
		}
		if had && cur == parent {
			break
		}
		if had {
			replaced = true
		}
		if err := w.setCanonical(n-1, parent, nil, had); err != nil {
			return err
		}
		next, err := w.parentOf(n-1, parent)
		if err != nil {
			return err
		}
		parent = next
	}
	if !replaced {
		if had || number >= w.st.highest {
			return nil
		}
		// A gap filled: the block above, when there is one, stays
		// canonical only as its child (the blocks above it are already).
		above, ok, err := w.canonical(number + 1)
		if err != nil || !ok {
			return err
		}
		p, err := w.parentOf(number+1, above)
		if err != nil || p == hash {
			return err
		}
		return w.dropCanonicalFrom(number + 1)
	}
	// (n < highest keeps n+1 from wrapping past the largest number.)
	for n := number; n < w.st.highest; n++ {
		h, ok, err := w.canonical(n + 1)
		if err != nil {
			return err
		}
		if ok {
			below, _, err := w.canonical(n)
			if err != nil {
				return err
			}
			p, err := w.parentOf(n+1, h)
			if err != nil {
				return err
			}
			if p == below {
				continue
			}
		}
		return w.dropCanonicalFrom(n + 1)
	}
	return nil
}

// setCanonical makes hash the canonical block at number: its record (rec,
// or else the one stored under its number and hash) moves into the
// canonical entry, and the record of the block it replaces, when the
// number had one (replacing), moves out.
func (w *write) setCanonical(number uint64, hash backend.Hash, rec []byte, replacing bool) error {
	if replacing {
		old, found, err := get(w.batch, canonicalKey(number))
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("canonical block %d: %w", number, errCorrupt)
		}
		if err := w.uncanonical(number, old); err != nil {
			return err
		}
	}
	if rec == nil {
		key := recordKey(number, hash)
		stored, found, err := get(w.batch, key)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("block %d (%s): %w", number, hash, errCorrupt)
		}
		rec = stored
		w.delete(key)
	}
	if !w.st.hasCanonical {
		w.st.lowest, w.st.highest, w.st.hasCanonical = number, number, true
	}
	w.st.lowest, w.st.highest = min(w.st.lowest, number), max(w.st.highest, number)
	w.set(canonicalKey(number), canonicalValue(hash, rec))
	return nil
}

// uncanonical moves the record of the canonical entry val at number under
// the block's number and hash, where a block that is not canonical keeps
// it; the caller replaces or deletes the entry.
func (w *write) uncanonical(number uint64, val []byte) error {
	hash, rec, err := splitCanonical(val)
	if err != nil {
		return err
	}
	w.set(recordKey(number, hash), rec)
	return w.untag(number)
}

// untag deletes the safe and finalized tags that select number, whose
// block leaves the chain: kept, a tag would select the block that takes
// its number, which nobody marked.
func (w *write) untag(number uint64) error {
	for _, key := range [][]byte{keySafe, keyFinalized} {
		v, found, err := get(w.batch, key)
		if err != nil {
			return err
		}
		if n, ok := decodeUint64(v); found && ok && n == number {
			w.delete(key)
		}
	}
	return nil
}

// dropCanonicalFrom removes the canonical entries at number and above.
func (w *write) dropCanonicalFrom(number uint64) error {
	it, err := w.batch.NewIter(&pebble.IterOptions{LowerBound: canonicalKey(number), UpperBound: []byte{prefixCanonical + 1}})
	if err != nil {
		return err
	}
	type moved struct{ key, val []byte }
	var dropped []moved
	for ok := it.First(); ok; ok = it.Next() {
		dropped = append(dropped, moved{bytes.Clone(it.Key()), bytes.Clone(it.Value())})
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, e := range dropped {
		n, ok := decodeUint64(e.key[1:])
		if !ok {
			return errCorrupt
		}
		if err := w.uncanonical(n, e.val); err != nil {
			return err
		}
		w.delete(e.key)
	}
	// The highest left is the last entry below number.
	it, err = w.batch.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCanonical}, UpperBound: canonicalKey(number)})
	if err != nil {
		return err
	}
	defer it.Close()
	if !it.Last() {
		w.st.hasCanonical, w.st.lowest, w.st.highest = false, 0, 0
		return it.Error()
	}
	n, ok := decodeUint64(it.Key()[1:])
	if !ok {
		return errCorrupt
	}
	w.st.highest = n
	return nil
}

// SetPending implements backend.Writer: it sets the block served for the
// "pending" tag, or clears it when block is nil. The block is checked as
// memstore checks it, and kept in the store.
func (s *Store) SetPending(block *backend.Block) error {
	if block == nil {
		return s.write(func(w *write) error {
			if _, found, err := get(w.batch, keyPending); err != nil || !found {
				return err
			}
			w.delete(keyPending)
			return nil
		})
	}
	b, chainID, err := backend.SealPending(block)
	if err != nil {
		return blockError(b, fmt.Errorf("pending: %w", err))
	}
	return s.write(func(w *write) error {
		if err := w.st.agreeChainID(chainID); err != nil {
			return blockError(b, fmt.Errorf("pending: %w", err))
		}
		parentTD, err := w.tdOf(b.ParentHash)
		if err != nil {
			return err
		}
		if err := backend.SettleTotalDifficulty("totalDifficulty", &b.TotalDifficulty, parentTD, &b.Difficulty); err != nil {
			return blockError(b, fmt.Errorf("pending: %w", err))
		}
		w.set(keyPending, record.Append(nil, lendable(b), nil))
		return nil
	})
}

// SetSafe implements backend.Writer: the canonical block at number becomes
// the one the "safe" tag selects, until a reorganisation takes it out of
// the canonical chain. There must be one.
func (s *Store) SetSafe(number uint64) error {
	return s.setTag(keySafe, "safe", number)
}

// SetFinalized implements backend.Writer: the canonical block at number
// becomes the one the "finalized" tag selects, until a reorganisation
// takes it out of the canonical chain. There must be one.
func (s *Store) SetFinalized(number uint64) error {
	return s.setTag(keyFinalized, "finalized", number)
}

func (s *Store) setTag(key []byte, name string, number uint64) error {
	return s.write(func(w *write) error {
		if _, ok, err := w.canonical(number); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("pebblestore: cannot mark block %d %s: no canonical block has that number", number, name)
		}
		v := encodeUint64(number)
		if old, found, err := get(w.batch, key); err != nil || (found && bytes.Equal(old, v)) {
			return err
		}
		w.set(key, v)
		return nil
	})
}

// SetChainID implements backend.Writer: it sets the chain id, for a chain
// whose transactions do not tell it. It fails when stored transactions are
// signed for another chain.
func (s *Store) SetChainID(id uint64) error {
	return s.write(func(w *write) error {
		c := w.st.chainID
		if c.bound && c.id != id {
			return &backend.MismatchError{Field: "chainId", Given: hexutil.EncodeUint64(id), Computed: hexutil.EncodeUint64(c.id) + " (of the stored transactions)"}
		}
		c.id, c.known = id, true
		if c != w.st.chainID {
			w.st.chainID, w.chainIDChanged = c, true
		}
		return nil
	})
}
