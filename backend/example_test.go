package backend_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/blockrpc/blockrpc/backend"
)

// headerStore is a Backend over someone's own storage: here a map of
// headers, for a chain whose blocks carry no transactions.
type headerStore struct {
	mu      sync.RWMutex
	byHash  map[backend.Hash]*backend.Block
	byNum   map[uint64]*backend.Block
	highest uint64
}

// add stores a header, computing what the JSON-RPC answer needs of it.
func (s *headerStore) add(h backend.Header) *backend.Block {
	b := &backend.Block{
		Header: h,
		Hash:   backend.HeaderHash(&h),
		Size:   backend.BlockSize(&h, nil, nil, nil),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byHash[b.Hash], s.byNum[h.Number] = b, b
	s.highest = max(s.highest, h.Number)
	return b
}

func (s *headerStore) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
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
func (s *headerStore) ChainID(ctx context.Context) (uint64, error) { return 1, nil }

func (s *headerStore) BlockByHash(ctx context.Context, hash backend.Hash) (*backend.Block, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if b := s.byHash[hash]; b != nil {
		return b, nil
	}
	return nil, backend.ErrNotFound
}

func (s *headerStore) UncleByBlockHashAndIndex(ctx context.Context, hash backend.Hash, index uint64) (*backend.Uncle, error) {
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
