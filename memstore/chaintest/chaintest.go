// Package chaintest builds chains for tests: a few lines give a
// *memstore.Store holding a valid-looking chain with transactions of every
// type, really signed, uncles, the forks at chosen heights, side blocks,
// reorganisations and a pending block.
//
//	b := chaintest.New(chaintest.Config{Seed: 1, London: 2, Merge: 10, Shanghai: 12, Cancun: 14, Prague: 16})
//	b.AddBlocks(20, chaintest.Txs(5))
//	store := b.Store()
//
// What a block's contents determine is computed as go-ethereum computes
// it: block, uncle and transaction hashes, the transactions and withdrawals
// roots, sha3Uncles, sizes, the senders (recovered from real secp256k1
// signatures by deterministic keys), the base fee of EIP-1559 and the
// excess blob gas of EIP-4844. The chain is not executed: the state and
// receipts roots are made up from the seed, transactions use exactly their
// intrinsic gas, and balances are not tracked. A client that checks hashes,
// signatures and roots accepts these blocks; one that re-executes them
// does not.
//
// The same Config and the same calls build the same chain, byte for byte.
//
// Mistakes in the use of a builder (a blob transaction before Cancun, an
// uncle after the merge, a block over its gas limit) panic, as they do in
// go-ethereum's core.GenerateChain: they are bugs of the test, not
// conditions to handle.
package chaintest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/holiman/uint256"
)

// Never is a fork height the chain does not reach.
const Never uint64 = math.MaxUint64

// Config sets what a builder's chain is. The zero value is a chain with
// every fork active from the genesis: Prague rules, proof of stake.
type Config struct {
	// Seed selects the made-up values (roots, mix hashes, recipients);
	// chains of the same seed and calls are identical.
	Seed uint64
	// ChainID is the id the transactions are signed for; 0 means 1337.
	ChainID uint64

	// The first block of each fork, or Never. A fork needs the ones before
	// it, so the heights must not decrease in this order. Before London
	// the chain follows Berlin's rules, proof of work with uncles.
	London   uint64 // EIP-1559: base fee, dynamic-fee transactions
	Merge    uint64 // proof of stake: difficulty 0, no uncles
	Shanghai uint64 // EIP-4895: withdrawals
	Cancun   uint64 // EIP-4844: blob transactions, blob gas, beacon root
	Prague   uint64 // EIP-7702 set-code transactions, EIP-7685 requests hash

	// GenesisTime is the genesis timestamp; 0 means 1,700,000,000.
	GenesisTime uint64
	// BlockTime is the seconds between blocks; 0 means 12.
	BlockTime uint64
	// GasLimit is every block's gas limit; 0 means 30,000,000.
	GasLimit uint64
}

// The defaults of Config's zero fields.
const (
	DefaultChainID     = 1337
	DefaultGenesisTime = 1_700_000_000
	DefaultBlockTime   = 12
	DefaultGasLimit    = 30_000_000
)

// difficulty is every proof-of-work block's: ethash's minimum. A fixed
// value keeps total difficulties easy to check by hand.
const difficulty = 0x20000

// emptyRequestsHash is the requests hash of a block without requests:
// sha256 of nothing (EIP-7685).
var emptyRequestsHash = backend.Hash(sha256.Sum256(nil))

// emptyRoot is the root of an empty trie, the receipts root of a block
// without transactions.
var emptyRoot = backend.TransactionsRoot(nil)

func (c *Config) withDefaults() {
	if c.ChainID == 0 {
		c.ChainID = DefaultChainID
	}
	if c.GenesisTime == 0 {
		c.GenesisTime = DefaultGenesisTime
	}
	if c.BlockTime == 0 {
		c.BlockTime = DefaultBlockTime
	}
	if c.GasLimit == 0 {
		c.GasLimit = DefaultGasLimit
	}
	forks := []struct {
		name   string
		height uint64
	}{{"London", c.London}, {"Merge", c.Merge}, {"Shanghai", c.Shanghai}, {"Cancun", c.Cancun}, {"Prague", c.Prague}}
	for i := 1; i < len(forks); i++ {
		if forks[i].height < forks[i-1].height {
			panic(fmt.Sprintf("chaintest: %s at block %d comes before %s at block %d", forks[i].name, forks[i].height, forks[i-1].name, forks[i-1].height))
		}
	}
}

// chain is what the branches of one chain share.
type chain struct {
	cfg   Config
	store *memstore.Store
	rng   *rand.Rand
	// states holds what the next block after each block needs to know:
	// the senders' nonces and the next withdrawal index.
	states    map[backend.Hash]*state
	canonical *Builder
}

// state is the account state a block leaves behind, as far as the builder
// tracks it.
type state struct {
	nonces          map[int]uint64 // by key index
	withdrawalIndex uint64
}

func (s *state) copy() *state {
	c := &state{nonces: make(map[int]uint64, len(s.nonces)), withdrawalIndex: s.withdrawalIndex}
	for k, v := range s.nonces {
		c.nonces[k] = v
	}
	return c
}

// Builder builds one branch of a chain. New returns the builder of the
// canonical branch; Fork starts another, whose blocks are side blocks
// until Reorg makes it canonical. A Builder is not safe for concurrent
// use; the store it fills is.
type Builder struct {
	c    *chain
	head *backend.Block
}

// New returns a builder whose chain holds the genesis block, block 0.
func New(cfg Config) *Builder {
	cfg.withDefaults()
	c := &chain{
		cfg:    cfg,
		store:  memstore.New(),
		rng:    rand.New(rand.NewPCG(cfg.Seed, 0x6368616974657374)), // "chaitest": any fixed second word
		states: make(map[backend.Hash]*state),
	}
	if err := c.store.SetChainID(cfg.ChainID); err != nil {
		panic(err) // an empty store takes any id
	}
	b := &Builder{c: c}
	c.canonical = b
	g := b.newBlockGen(nil)
	b.commit(g)
	return b
}

// Store returns the store the chain is built in. Blocks added later go
// into the same store.
func (b *Builder) Store() *memstore.Store { return b.c.store }

// Config returns the builder's configuration, with defaults filled in.
func (b *Builder) Config() Config { return b.c.cfg }

// Head returns the last block of this branch, as the store serves it.
func (b *Builder) Head() *backend.Block { return b.head }

// Canonical reports whether this branch is the store's canonical chain.
func (b *Builder) Canonical() bool { return b.c.canonical == b }

// Nonce returns the nonce the next transaction of Key(key) takes on this
// branch.
func (b *Builder) Nonce(key int) uint64 { return b.c.states[b.head.Hash].nonces[key] }

// AddBlock adds a block on top of the branch's head, filled by gen (which
// may be nil for an empty block), and returns it as the store serves it.
// On the canonical branch it clears the pending block, which was built on
// the old head.
func (b *Builder) AddBlock(gen func(*BlockGen)) *backend.Block {
	g := b.newBlockGen(b.head)
	if gen != nil {
		gen(g)
	}
	return b.commit(g)
}

// AddBlocks adds n blocks, calling gen (which may be nil) with the index of
// each, from 0, and returns them.
func (b *Builder) AddBlocks(n int, gen func(i int, g *BlockGen)) []*backend.Block {
	blocks := make([]*backend.Block, n)
	for i := range n {
		blocks[i] = b.AddBlock(func(g *BlockGen) {
			if gen != nil {
				gen(i, g)
			}
		})
	}
	return blocks
}

// Txs returns a block generator for AddBlocks that adds n transactions to
// each block: every kind the block's fork allows in turn, from keys 0 to 7
// in turn, and no more blobs than the fork's target, so that the blob fee
// stays at its minimum.
func Txs(n int) func(int, *BlockGen) {
	return func(_ int, g *BlockGen) {
		kinds := g.Kinds()
		for i := range n {
			kind := kinds[i%len(kinds)]
			if kind == Blob && g.blobs >= g.blobSchedule().target {
				kind = DynamicFee
			}
			g.AddTx(Tx{Kind: kind, From: i % 8})
		}
	}
}

// SetPending builds a block on top of the branch's head, filled by gen,
// and sets it as the store's pending block. It is not part of the chain:
// the next AddBlock on the branch starts from the same head.
func (b *Builder) SetPending(gen func(*BlockGen)) *backend.Block {
	g := b.newBlockGen(b.head)
	if gen != nil {
		gen(g)
	}
	block, _ := g.seal()
	if err := b.c.store.SetPending(block); err != nil {
		panic(fmt.Sprintf("chaintest: the store refused the pending block: %v", err))
	}
	pending, err := b.c.store.BlockByNumber(context.Background(), backend.Pending)
	if err != nil {
		panic(err)
	}
	return pending
}

// Fork returns a builder for a new branch that starts after this branch's
// block at the given number: its blocks are side blocks, reachable by hash
// only, until Reorg. Nonces and withdrawal indexes continue from that
// block's.
func (b *Builder) Fork(at uint64) *Builder {
	return &Builder{c: b.c, head: b.Block(at)}
}

// Block returns the block of this branch at the given number. It panics
// when the branch has none.
func (b *Builder) Block(number uint64) *backend.Block {
	block := b.head
	for block.Number > number {
		parent, err := b.c.store.BlockByHash(context.Background(), block.ParentHash)
		if err != nil {
			panic(fmt.Sprintf("chaintest: block %d's parent: %v", block.Number, err))
		}
		block = parent
	}
	if block.Number != number {
		panic(fmt.Sprintf("chaintest: the branch has no block %d (its head is %d)", number, b.head.Number))
	}
	return block
}

// Reorg makes this branch the canonical chain: the store reorganises to
// its head and the head's ancestors, and the previous canonical branch's
// later blocks become side blocks. Blocks added to the other branch
// afterwards are side blocks.
func (b *Builder) Reorg() {
	if b.Canonical() {
		return
	}
	ctx := context.Background()
	uncles := make([]*backend.Uncle, len(b.head.Uncles))
	for i := range uncles {
		u, err := b.c.store.UncleByBlockHashAndIndex(ctx, b.head.Hash, uint64(i))
		if err != nil {
			panic(err)
		}
		uncles[i] = u
	}
	// Adding a stored block again makes it and its ancestors canonical.
	if err := b.c.store.AddBlock(b.head, uncles...); err != nil {
		panic(fmt.Sprintf("chaintest: reorganising to block %d: %v", b.head.Number, err))
	}
	b.c.canonical = b
	b.clearPending()
}

func (b *Builder) clearPending() {
	if err := b.c.store.SetPending(nil); err != nil {
		panic(err)
	}
}

// commit seals the block g built, stores it and moves the head to it.
func (b *Builder) commit(g *BlockGen) *backend.Block {
	block, uncles := g.seal()
	add := b.c.store.AddSideBlock
	if b.Canonical() {
		add = b.c.store.AddBlock
	}
	if err := add(block, uncles...); err != nil {
		panic(fmt.Sprintf("chaintest: the store refused block %d: %v", block.Number, err))
	}
	stored, err := b.c.store.BlockByHash(context.Background(), block.Hash)
	if err != nil {
		panic(err)
	}
	b.c.states[stored.Hash] = g.state
	b.head = stored
	if b.Canonical() && block.Number > 0 {
		b.clearPending()
	}
	return stored
}

// active reports whether a fork that starts at height is active at number.
func active(height, number uint64) bool { return height != Never && number >= height }

// randomHash and randomAddress draw made-up values from the chain's seed.
func (c *chain) randomHash() (h backend.Hash) {
	for i := 0; i < len(h); i += 8 {
		v := c.rng.Uint64()
		for j := range 8 {
			h[i+j] = byte(v >> (8 * j))
		}
	}
	return h
}

func (c *chain) randomAddress() (a backend.Address) {
	h := c.randomHash()
	copy(a[:], h[:])
	return a
}

// header returns the header of a block at number on top of parent (nil for
// the genesis), with the fork fields the number calls for. The contents
// (transactions, uncles, withdrawals, gas and blob gas used) are filled in
// by BlockGen.
func (c *chain) header(parent *backend.Header, number uint64) backend.Header {
	cfg := &c.cfg
	h := backend.Header{
		Number:       number,
		GasLimit:     cfg.GasLimit,
		Timestamp:    cfg.GenesisTime + number*cfg.BlockTime,
		Miner:        c.randomAddress(),
		StateRoot:    c.randomHash(),
		MixHash:      c.randomHash(),
		ReceiptsRoot: emptyRoot,
		ExtraData:    []byte{},
	}
	if parent != nil {
		h.ParentHash = backend.HeaderHash(parent)
	}
	if !active(cfg.Merge, number) {
		h.Difficulty.SetUint64(difficulty)
		nonce := c.rng.Uint64()
		for i := range h.Nonce {
			h.Nonce[i] = byte(nonce >> (8 * i))
		}
	}
	if active(cfg.London, number) {
		if parent == nil {
			h.BaseFeePerGas = uint256.NewInt(initialBaseFee)
		} else {
			h.BaseFeePerGas = nextBaseFee(parent)
		}
	}
	if active(cfg.Shanghai, number) {
		h.WithdrawalsRoot = &backend.Hash{} // filled in when sealed
	}
	if active(cfg.Cancun, number) {
		var excess uint64
		if parent != nil {
			excess = nextExcessBlobGas(parent, c.blobSchedule(number))
		}
		used := uint64(0)
		h.BlobGasUsed, h.ExcessBlobGas = &used, &excess
		root := c.randomHash()
		h.ParentBeaconBlockRoot = &root
	}
	if active(cfg.Prague, number) {
		r := emptyRequestsHash
		h.RequestsHash = &r
	}
	return h
}

// blobSchedule returns the blob schedule of the fork active at number.
func (c *chain) blobSchedule(number uint64) blobSchedule {
	if active(c.cfg.Prague, number) {
		return blobSchedule{pragueTargetBlobs, pragueMaxBlobs, pragueUpdateFraction}
	}
	return blobSchedule{cancunTargetBlobs, cancunMaxBlobs, cancunUpdateFraction}
}
