package backend_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/holiman/uint256"
)

// headerStore is a Backend over someone's own storage: here a map of
// headers, for a chain whose blocks carry no transactions.
type headerStore struct {
	mu      sync.RWMutex
	byHash  map[backend.Hash]*backend.Block
	byNum   map[uint64]*backend.Block
	highest uint64
}

// add stores a header, its parent first, computing what the JSON-RPC
// answer needs of it: the total difficulty is the parent's and its own.
func (s *headerStore) add(h backend.Header) *backend.Block {
	b := &backend.Block{
		Header:          h,
		Hash:            backend.HeaderHash(&h),
		Size:            backend.BlockSize(&h, nil, nil, nil),
		TotalDifficulty: new(uint256.Int).Set(&h.Difficulty),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if parent := s.byHash[h.ParentHash]; parent != nil && h.Number > 0 {
		b.TotalDifficulty.Add(b.TotalDifficulty, parent.TotalDifficulty)
	}
	s.byHash[b.Hash], s.byNum[h.Number] = b, b
	s.highest = max(s.highest, h.Number)
	return b
}

// Each lookup honours its context, as the Backend contract asks: storage
// that can block on I/O takes ctx on to it as well.
func (s *headerStore) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	number, ok := n.Uint64()
	switch n {
	case backend.Latest:
		number, ok = s.highest, true
	case backend.Earliest:
		number, ok = 0, true
	}
	if b := s.byNum[number]; ok && b != nil {
		return b, nil
	}
	return nil, backend.ErrNotFound // also for safe, finalized and pending
}

// ChainID tells the chain's id, which a store of headers holds as a setting.
func (s *headerStore) ChainID(ctx context.Context) (uint64, error) { return 1, ctx.Err() }

func (s *headerStore) BlockByHash(ctx context.Context, hash backend.Hash) (*backend.Block, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if b := s.byHash[hash]; b != nil {
		return b, nil
	}
	return nil, backend.ErrNotFound
}

func (s *headerStore) UncleByBlockHashAndIndex(ctx context.Context, hash backend.Hash, index uint64) (*backend.Uncle, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, backend.ErrNotFound // this chain has no uncles
}

// A Backend is the chain id and three lookups; ErrNotFound tells "no such
// block" apart from a failure of the storage.
func Example_implementingBackend() {
	store := &headerStore{byHash: map[backend.Hash]*backend.Block{}, byNum: map[uint64]*backend.Block{}}
	store.add(backend.Header{Number: 0, GasLimit: 30_000_000, Sha3Uncles: backend.UnclesHash(nil), TransactionsRoot: backend.TransactionsRoot(nil)})
	var b backend.Backend = store

	latest, _ := b.BlockByNumber(context.Background(), backend.Latest)
	fmt.Println(string(latest.AppendJSON(nil, false))[:60])
	_, err := b.BlockByNumber(context.Background(), backend.Safe)
	fmt.Println(err)
	// Output:
	// {"difficulty":"0x0","extraData":"0x","gasLimit":"0x1c9c380",
	// not found
}

// A store that keeps blocks without their transactions' bodies (pruned,
// or header-only) holds their hashes in their place; such a block is
// served only without transaction details.
func ExampleTransactionHashes() {
	b := &backend.Block{Transactions: []*backend.Transaction{{Hash: backend.Hash{0xaa}}, {Hash: backend.Hash{0xbb}}}}
	b.TransactionHashes, b.Transactions = backend.TransactionHashes(b.Transactions), nil
	fmt.Println(b.TxCount(), b.HasTransactionBodies())
	fmt.Println(b.TransactionHashes[1])
	// Output:
	// 2 false
	// 0xbb00000000000000000000000000000000000000000000000000000000000000
}

// TestExampleBackendConforms runs the conformance suite on the example's
// Backend, against memstore serving the same chain: what the example
// shows is a Backend that passes it.
func TestExampleBackendConforms(t *testing.T) {
	store := &headerStore{byHash: map[backend.Hash]*backend.Block{}, byNum: map[uint64]*backend.Block{}}
	want := memstore.New()
	parent := backend.Hash{}
	for n := range uint64(4) {
		b := store.add(backend.Header{Number: n, ParentHash: parent, GasLimit: 30_000_000, Timestamp: 12 * n, Difficulty: *uint256.NewInt(1000 + n),
			Sha3Uncles: backend.UnclesHash(nil), TransactionsRoot: backend.TransactionsRoot(nil)})
		if err := want.AddBlock(b); err != nil {
			t.Fatal(err)
		}
		parent = b.Hash
	}
	if err := want.SetChainID(1); err != nil {
		t.Fatal(err)
	}
	backendtest.TestBackend(t, store, want)
}
