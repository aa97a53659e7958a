// Package memstore is an in-memory chain that implements backend.Backend:
// the embedded default of blockrpc, and a fake chain for unit tests.
//
// Blocks go in through AddBlock (or Load, from a JSONL dump). Every value
// that a block's contents determine is computed when it is absent and
// checked when it is given; a block that fails is refused whole. Blocks are
// kept by hash, canonical or not, and the canonical chain by number.
//
// A Store is safe for concurrent use by readers and writers. What it
// returns is shared and must not be modified.
//
// A block's transactions are kept encoded (backend/record), in about the
// size of their RLP rather than twice it as Go values: BlockByNumber and
// BlockByHash decode them, and a Store is a backend.Lender, so that
// blockrpc's handler writes them straight from the encoding.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
)

// A Store is read as a backend.Backend, lends its blocks as a
// backend.Lender, and is written as a backend.Writer.
var (
	_ backend.Backend = (*Store)(nil)
	_ backend.Lender  = (*Store)(nil)
	_ backend.Writer  = (*Store)(nil)
)

// Store is an in-memory chain. The zero value is not usable; call New.
type Store struct {
	mu     sync.RWMutex
	blocks map[backend.Hash]*entry
	// children indexes what each hash is the parent of: blocks and uncles
	// whose total difficulty follows from it.
	children  map[backend.Hash][]child
	canonical map[uint64]backend.Hash
	// lowest and highest bound the canonical numbers; meaningful only
	// while canonical is not empty.
	lowest, highest uint64
	safe, finalized tag
	pending         *backend.Block
	// The chain id, set with SetChainID or learnt from the first stored
	// transaction signed for a chain; once transactions are bound to it,
	// every later one must agree and it cannot be changed.
	chainID      uint64
	chainIDKnown bool
	chainIDBound bool

	// arena holds the encodings of the stored transactions. What reads
	// them keeps the store alive until done (runtime.KeepAlive): the
	// arena's memory goes with the store.
	arena arena
}

// entry is a stored block. A block with bodies is kept as a lent one is
// (backend.Lender): TransactionHashes in place of Transactions, whose
// encoding txs holds.
type entry struct {
	block  *backend.Block
	txs    record.Transactions // nil for a block held by its transaction hashes
	uncles []*backend.Uncle
}

// newEntry keeps a sealed block. The caller holds the write lock.
func (s *Store) newEntry(b *backend.Block, uncles []*backend.Uncle) *entry {
	e := &entry{block: b, uncles: uncles}
	if b.Transactions != nil {
		// Encoded into a buffer that grows, then copied to the arena:
		// the chain is held for good, and would be its slack too.
		scratch := encodings.Get().(*[]byte)
		*scratch = record.AppendTransactions((*scratch)[:0], b.Transactions)
		e.txs = s.arena.copy(*scratch)
		encodings.Put(scratch)
		light := *b
		light.Transactions = nil
		light.TransactionHashes = backend.TransactionHashes(b.Transactions)
		e.block = &light
	}
	return e
}

// decoded returns the block with its transactions decoded.
func (e *entry) decoded() (*backend.Block, error) {
	if e.txs == nil {
		return e.block, nil
	}
	txs, err := e.txs.Decode(e.block.BaseFeePerGas)
	if err != nil {
		// The store wrote the encoding itself: this is a bug, not bad data.
		return nil, fmt.Errorf("memstore: block %s: %w", e.block.Hash, err)
	}
	b := *e.block
	b.Transactions, b.TransactionHashes = txs, nil
	return &b, nil
}

// lend calls f with the block as a backend.Lender lends it.
func (e *entry) lend(f func(*backend.Block, backend.TransactionDecoder) error) error {
	if e.txs == nil {
		return f(e.block, nil)
	}
	r := readers.Get().(*record.TransactionReader)
	defer readers.Put(r)
	r.Reset(e.txs, e.block.BaseFeePerGas)
	return f(e.block, r)
}

// encodings are the buffers that newEntry encodes transactions into.
var encodings = sync.Pool{New: func() any { return new([]byte) }}

// readers are the transaction readers of lent blocks: each is lent with
// its block, and back once the borrower is done.
var readers = sync.Pool{New: func() any { return new(record.TransactionReader) }}

// child is a block (uncle < 0) or an uncle of the block hash.
type child struct {
	hash  backend.Hash
	uncle int
}

// tag is a number that may be unset.
type tag struct {
	number uint64
	set    bool
}

// New returns an empty store.
func New() *Store {
	s := &Store{
		blocks:    make(map[backend.Hash]*entry),
		children:  make(map[backend.Hash][]child),
		canonical: make(map[uint64]backend.Hash),
	}
	s.arena = newArena(s)
	return s
}

// ChainID implements backend.Backend: the id set with SetChainID, or else
// the one the stored transactions are signed for (EIP-155 legacy and typed
// transactions carry it).
func (s *Store) ChainID(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.chainIDKnown {
		return 0, backend.ErrNotFound
	}
	return s.chainID, nil
}

// SetChainID sets the chain id, for a chain whose transactions do not tell
// it. It fails when stored transactions are signed for another chain.
func (s *Store) SetChainID(id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chainIDBound && s.chainID != id {
		return &backend.MismatchError{Field: "chainId", Given: hexutil.EncodeUint64(id), Computed: hexutil.EncodeUint64(s.chainID) + " (of the stored transactions)"}
	}
	s.chainID, s.chainIDKnown = id, true
	return nil
}

// BlockByNumber implements backend.Backend.
func (s *Store) BlockByNumber(ctx context.Context, number backend.BlockNumber) (*backend.Block, error) {
	e, err := s.byNumber(ctx, number)
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(s)
	return e.decoded()
}

// BlockByHash implements backend.Backend.
func (s *Store) BlockByHash(ctx context.Context, hash backend.Hash) (*backend.Block, error) {
	e, err := s.byHash(ctx, hash)
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(s)
	return e.decoded()
}

// LendBlockByNumber implements backend.Lender.
func (s *Store) LendBlockByNumber(ctx context.Context, number backend.BlockNumber, f func(*backend.Block, backend.TransactionDecoder) error) error {
	e, err := s.byNumber(ctx, number)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(s)
	return e.lend(f)
}

// LendBlockByHash implements backend.Lender.
func (s *Store) LendBlockByHash(ctx context.Context, hash backend.Hash, f func(*backend.Block, backend.TransactionDecoder) error) error {
	e, err := s.byHash(ctx, hash)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(s)
	return e.lend(f)
}

// byNumber returns the stored block a number or tag selects: a copy of
// its entry, whose block and uncles are replaced, never changed, once
// readers may hold them.
func (s *Store) byNumber(ctx context.Context, number backend.BlockNumber) (entry, error) {
	if err := ctx.Err(); err != nil {
		return entry{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n uint64
	switch number {
	case backend.Pending:
		if s.pending == nil {
			return entry{}, backend.ErrNotFound
		}
		return entry{block: s.pending}, nil
	case backend.Latest, backend.Earliest:
		if len(s.canonical) == 0 {
			return entry{}, backend.ErrNotFound
		}
		n = s.highest
		if number == backend.Earliest {
			n = s.lowest
		}
	case backend.Safe, backend.Finalized:
		t := s.safe
		if number == backend.Finalized {
			t = s.finalized
		}
		if !t.set {
			return entry{}, backend.ErrNotFound
		}
		n = t.number
	default:
		v, ok := number.Uint64()
		if !ok {
			return entry{}, fmt.Errorf("memstore: invalid block number %v", number)
		}
		n = v
	}
	h, ok := s.canonical[n]
	if !ok {
		return entry{}, backend.ErrNotFound
	}
	return *s.blocks[h], nil
}

func (s *Store) byHash(ctx context.Context, hash backend.Hash) (entry, error) {
	if err := ctx.Err(); err != nil {
		return entry{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.blocks[hash]
	if !ok {
		return entry{}, backend.ErrNotFound
	}
	return *e, nil
}

// UncleByBlockHashAndIndex implements backend.Backend.
func (s *Store) UncleByBlockHashAndIndex(ctx context.Context, hash backend.Hash, index uint64) (*backend.Uncle, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.blocks[hash]
	if !ok || index >= uint64(len(e.uncles)) {
		return nil, backend.ErrNotFound
	}
	return e.uncles[index], nil
}

// AddBlock adds a block with the headers of its uncles, in order. The store
// keeps copies; what the caller passes is not changed.
//
// Values the contents determine (hash, size, sha3Uncles, transactionsRoot,
// withdrawalsRoot, transaction hashes, the effective gas price and legacy
// chain id of transactions, uncle hashes and sizes) are computed when zero
// and checked otherwise. The total difficulty is the parent's plus the
// block's difficulty when the parent's is known, and a given value must
// agree with it. Each transaction must give its sender and pass
// backend.Transaction.Validate. A field that is missing or invalid is
// reported as a *backend.FieldError, and a derived value given wrong as a
// *backend.MismatchError. On any error nothing is stored.
//
// The block becomes canonical at its number. If another block was canonical
// there, the chain reorganises: the blocks above stay canonical only as
// long as each is the child of the one below, and the new block's known
// ancestors become canonical too. A block that fills a gap keeps the block
// above canonical only if it is its child. Blocks that leave the canonical
// chain stay reachable by hash. Adding a block that is already stored only
// makes it canonical again.
func (s *Store) AddBlock(block *backend.Block, uncles ...*backend.Uncle) error {
	return s.add(block, uncles, true)
}

// AddSideBlock adds a block as AddBlock does, checks included, but leaves the
// canonical chain as it is: the block is reachable by hash only, as a block
// of a side chain is.
func (s *Store) AddSideBlock(block *backend.Block, uncles ...*backend.Uncle) error {
	return s.add(block, uncles, false)
}

func (s *Store) add(block *backend.Block, uncles []*backend.Uncle, canonical bool) error {
	if block != nil && block.Pending {
		return errPendingInAdd
	}
	b, us, chainID, err := backend.SealCopies(block, uncles)
	if err != nil {
		return blockError(b, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.agreeChainID(chainID); err != nil {
		return blockError(b, err)
	}
	if e, ok := s.blocks[b.Hash]; ok {
		if err := s.readd(e, b.TotalDifficulty); err != nil {
			return blockError(b, err)
		}
		if canonical {
			s.makeCanonical(b.Number, b.Hash)
		}
		return nil
	}
	updates, err := s.totalDifficulties(b, us)
	if err != nil {
		return blockError(b, err)
	}
	s.blocks[b.Hash] = s.newEntry(b, us)
	s.children[b.ParentHash] = append(s.children[b.ParentHash], child{hash: b.Hash, uncle: -1})
	for i, u := range us {
		s.children[u.ParentHash] = append(s.children[u.ParentHash], child{hash: b.Hash, uncle: i})
	}
	s.applyTotalDifficulties(updates)
	s.bindChainID(chainID)
	if canonical {
		s.makeCanonical(b.Number, b.Hash)
	}
	return nil
}

// agreeChainID checks a block's chain id against the store's.
func (s *Store) agreeChainID(id *uint256.Int) error {
	if id != nil && s.chainIDKnown && id.Uint64() != s.chainID {
		return &backend.MismatchError{Field: "chainId", Given: hexutil.EncodeU256(id), Computed: hexutil.EncodeUint64(s.chainID) + " (of the store)"}
	}
	return nil
}

// bindChainID makes a stored block's chain id the store's, for good.
func (s *Store) bindChainID(id *uint256.Int) {
	if id != nil {
		s.chainID, s.chainIDKnown, s.chainIDBound = id.Uint64(), true, true
	}
}

// errPendingInAdd is returned for a block marked pending given to AddBlock.
var errPendingInAdd = errors.New("a pending block is set with SetPending, not added")

// blockError names the block an error is about.
func blockError(b *backend.Block, err error) error {
	return fmt.Errorf("block %d (%s): %w", b.Number, b.Hash, err)
}

// totalDifficulties settles the total difficulty of the new block and its
// uncles against their parents, then works out the values this gives to
// stored descendants that had none. It checks everything before anything
// is changed: a given value that disagrees is an error.
func (s *Store) totalDifficulties(b *backend.Block, uncles []*backend.Uncle) ([]backend.Descendant, error) {
	parentTD := s.tdOf(b.ParentHash)
	if b.Number == 0 && b.ParentHash == (backend.Hash{}) {
		parentTD = new(uint256.Int) // the genesis: its own difficulty is the total
	}
	if err := backend.SettleTotalDifficulty("totalDifficulty", &b.TotalDifficulty, parentTD, &b.Difficulty); err != nil {
		return nil, err
	}
	for i, u := range uncles {
		if err := backend.SettleTotalDifficulty(fmt.Sprintf("uncle %d: totalDifficulty", i), &u.TotalDifficulty, s.tdOf(u.ParentHash), &u.Difficulty); err != nil {
			return nil, err
		}
	}
	if b.TotalDifficulty == nil {
		return nil, nil
	}
	return backend.DescendantTotalDifficulties(b.Hash, b.TotalDifficulty, s.storedChildren)
}

// readd checks what a block added again gives against the stored block. A
// total difficulty given for a stored block without one becomes known: the
// block and its stored descendants take it, as if it were new.
func (s *Store) readd(e *entry, given *uint256.Int) error {
	stored := e.block.TotalDifficulty
	switch {
	case given == nil:
		return nil
	case stored != nil:
		if !given.Eq(stored) {
			return &backend.MismatchError{Field: "totalDifficulty", Given: hexutil.EncodeU256(given), Computed: hexutil.EncodeU256(stored) + " (stored)"}
		}
		return nil
	}
	updates, err := backend.DescendantTotalDifficulties(e.block.Hash, given, s.storedChildren)
	if err != nil {
		return err
	}
	updates = append(updates, backend.Descendant{Hash: e.block.Hash, Uncle: -1, TD: given})
	s.applyTotalDifficulties(updates)
	return nil
}

// storedChildren is the store's side of
// backend.DescendantTotalDifficulties: the children map, with each child's
// difficulty and total read from its entry. It cannot fail.
func (s *Store) storedChildren(parent backend.Hash) ([]backend.Descendant, error) {
	cs := s.children[parent]
	out := make([]backend.Descendant, len(cs))
	for i, c := range cs {
		e := s.blocks[c.hash]
		header, td := &e.block.Header, e.block.TotalDifficulty
		if c.uncle >= 0 {
			header, td = &e.uncles[c.uncle].Header, e.uncles[c.uncle].TotalDifficulty
		}
		out[i] = backend.Descendant{Hash: c.hash, Uncle: c.uncle, Difficulty: header.Difficulty, TD: td}
	}
	return out, nil
}

// tdOf returns the total difficulty of a stored block, or nil.
func (s *Store) tdOf(hash backend.Hash) *uint256.Int {
	if e, ok := s.blocks[hash]; ok {
		return e.block.TotalDifficulty
	}
	return nil
}

// applyTotalDifficulties stores the values totalDifficulties worked out.
// Blocks and uncles already handed to readers are never changed: each gets
// a new copy with its total difficulty set.
func (s *Store) applyTotalDifficulties(updates []backend.Descendant) {
	for _, d := range updates {
		e := s.blocks[d.Hash]
		if d.Uncle >= 0 {
			u := *e.uncles[d.Uncle]
			u.TotalDifficulty = d.TD
			uncles := append([]*backend.Uncle(nil), e.uncles...)
			uncles[d.Uncle] = &u
			e.uncles = uncles
			continue
		}
		b := *e.block
		b.TotalDifficulty = d.TD
		e.block = &b
	}
}

// makeCanonical makes hash the canonical block at number, reorganising the
// chain around it as AddBlock describes.
func (s *Store) makeCanonical(number uint64, hash backend.Hash) {
	old, had := s.canonical[number]
	replaced := had && old != hash
	s.setCanonical(number, hash)

	// The known ancestors become canonical, down to the first that already
	// is or is not stored.
	parent := s.blocks[hash].block.ParentHash
	for n := number; n > 0; n-- {
		e, ok := s.blocks[parent]
		if !ok || e.block.Number != n-1 || s.canonical[n-1] == parent {
			break
		}
		if _, had := s.canonical[n-1]; had {
			replaced = true
		}
		s.setCanonical(n-1, parent)
		parent = e.block.ParentHash
	}
	if !replaced {
		// A gap filled: the block above, when there is one, stays
		// canonical only as its child (the blocks above it are already).
		if !had && number < s.highest {
			if h, ok := s.canonical[number+1]; ok && s.blocks[h].block.ParentHash != hash {
				s.dropCanonicalFrom(number + 1)
			}
		}
		return
	}
	// Above the new block, the chain continues only through its children.
	// (n < highest keeps n+1 from wrapping past the largest number.)
	for n := number; n < s.highest; n++ {
		h, ok := s.canonical[n+1]
		if ok && s.blocks[h].block.ParentHash == s.canonical[n] {
			continue
		}
		s.dropCanonicalFrom(n + 1)
		break
	}
}

func (s *Store) setCanonical(number uint64, hash backend.Hash) {
	if len(s.canonical) == 0 {
		s.lowest, s.highest = number, number
	}
	s.lowest, s.highest = min(s.lowest, number), max(s.highest, number)
	if old, had := s.canonical[number]; had && old != hash {
		s.untag(number, number)
	}
	s.canonical[number] = hash
}

// untag clears the safe and finalized tags that select a number from lo to
// hi, whose canonical block leaves the chain: kept, the tag would select
// the block that replaces it, which nobody marked.
func (s *Store) untag(lo, hi uint64) {
	for _, t := range []*tag{&s.safe, &s.finalized} {
		if t.set && t.number >= lo && t.number <= hi {
			*t = tag{}
		}
	}
}

// dropCanonicalFrom removes the canonical entries at number and above.
func (s *Store) dropCanonicalFrom(number uint64) {
	s.untag(number, math.MaxUint64)
	for n := range s.canonical {
		if n >= number {
			delete(s.canonical, n)
		}
	}
	s.highest = s.lowest
	for n := range s.canonical {
		s.highest = max(s.highest, n)
	}
}

// SetPending sets the block served for the "pending" tag, or clears it when
// block is nil. Give it as it will be sealed, with its number, nonce and
// logsBloom: its derived values are computed and checked as AddBlock does,
// and only hidden when it is served.
func (s *Store) SetPending(block *backend.Block) error {
	if block == nil {
		s.mu.Lock()
		s.pending = nil
		s.mu.Unlock()
		return nil
	}
	b, chainID, err := backend.SealPending(block)
	if err != nil {
		return blockError(b, fmt.Errorf("pending: %w", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.agreeChainID(chainID); err != nil {
		return blockError(b, fmt.Errorf("pending: %w", err))
	}
	if err := backend.SettleTotalDifficulty("totalDifficulty", &b.TotalDifficulty, s.tdOf(b.ParentHash), &b.Difficulty); err != nil {
		return blockError(b, fmt.Errorf("pending: %w", err))
	}
	s.pending = b
	return nil
}

// SetSafe makes the canonical block at number the one the "safe" tag
// selects. There must be one. A reorganisation that takes it out of the
// canonical chain clears the tag.
func (s *Store) SetSafe(number uint64) error {
	return s.setTag(&s.safe, "safe", number)
}

// SetFinalized makes the canonical block at number the one the "finalized"
// tag selects. There must be one. A reorganisation that takes it out of
// the canonical chain clears the tag.
func (s *Store) SetFinalized(number uint64) error {
	return s.setTag(&s.finalized, "finalized", number)
}

func (s *Store) setTag(t *tag, name string, number uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.canonical[number]; !ok {
		return fmt.Errorf("memstore: cannot mark block %d %s: no canonical block has that number", number, name)
	}
	*t = tag{number: number, set: true}
	return nil
}

// Len returns the number of blocks stored, canonical or not.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.blocks)
}
