package pebblestore

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// reorgChain stores a chain of 9 blocks and, beside it, a branch from
// block 4 that is longer, and returns the builders of both.
func reorgChain(t *testing.T, s *Store) (main, fork *chaintest.Builder) {
	t.Helper()
	main = chaintest.New(chaintest.Config{Seed: 3, London: 2, Merge: 4, Shanghai: 5, Cancun: 6, Prague: 7})
	main.AddBlocks(8, chaintest.Txs(3))
	fork = main.Fork(4)
	fork.AddBlocks(6, chaintest.Txs(2))
	for n := range main.Head().Number + 1 {
		if err := s.AddBlock(main.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	for n := uint64(5); n <= fork.Head().Number; n++ {
		if err := s.AddSideBlock(fork.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	return main, fork
}

// TestLendDuringReorg commits a reorganisation that replaces a lent
// block, and flushes and compacts the database, while the block is lent:
// it is still written whole as the block that was canonical when it was
// asked for, from the view it was found in, and the next lookup finds the
// new one.
func TestLendDuringReorg(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, nil)
	main, fork := reorgChain(t, s)
	for i, number := range []backend.BlockNumber{6, backend.Latest} {
		// The branches take turns: main is canonical first.
		was, next := main, fork
		if i%2 == 1 {
			was, next = fork, main
		}
		want := blockAt(t, was, number)
		err := s.LendBlockByNumber(ctx, number, func(b *backend.Block, txs backend.TransactionDecoder) error {
			done := make(chan error)
			go func() {
				err := s.AddBlock(next.Head())
				if err == nil {
					err = s.db.Flush()
				}
				if err == nil {
					err = s.db.Compact(ctx, []byte{0}, []byte{0xff}, false)
				}
				done <- err
			}()
			if err := <-done; err != nil {
				return err
			}
			got, err := b.AppendLentJSON(nil, true, txs)
			if w := want.AppendJSON(nil, true); err != nil || string(got) != string(w) {
				t.Errorf("block %v lent across a reorganisation (%v):\n got  %s\n want %s", number, err, got, w)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		now := blockAt(t, next, number)
		err = s.LendBlockByNumber(ctx, number, func(b *backend.Block, _ backend.TransactionDecoder) error {
			if b.Hash != now.Hash {
				t.Errorf("block %v after the reorganisation: %s, want %s", number, b.Hash, now.Hash)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// blockAt returns the block of a branch that number selects.
func blockAt(t *testing.T, br *chaintest.Builder, number backend.BlockNumber) *backend.Block {
	t.Helper()
	if number == backend.Latest {
		return br.Head()
	}
	n, _ := number.Uint64()
	return br.Block(n)
}

// TestLendWhileReorganising lends blocks from two readers while a writer
// makes one branch canonical, then the other: each block lent by number is
// one of the two branches' blocks at that number, written whole; past the
// shorter branch's head there may be none.
func TestLendWhileReorganising(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, nil)
	main, fork := reorgChain(t, s)
	want := map[backend.Hash]string{}
	for _, br := range []*chaintest.Builder{main, fork} {
		for n := range br.Head().Number + 1 {
			b, err := main.Store().BlockByHash(ctx, br.Block(n).Hash)
			if err != nil {
				t.Fatal(err)
			}
			want[b.Hash] = string(b.AppendJSON(nil, true))
		}
	}
	stop := make(chan struct{})
	reorgs := make(chan int)
	go func() {
		i := 0
		defer func() { reorgs <- i }()
		for ; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			head := main.Head()
			if i%2 == 0 {
				head = fork.Head()
			}
			if err := s.AddBlock(head); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var lent sync.WaitGroup
	for r := range 2 {
		lent.Add(1)
		go func() {
			defer lent.Done()
			for i := range 300 {
				number := backend.BlockNumber(3 + (i+r)%8)
				if i%9 == 0 {
					number = backend.Latest
				}
				err := s.LendBlockByNumber(ctx, number, func(b *backend.Block, txs backend.TransactionDecoder) error {
					got, err := b.AppendLentJSON(nil, true, txs)
					n, numbered := number.Uint64()
					switch {
					case err != nil:
						return err
					case numbered && b.Number != n:
						t.Errorf("block %d lent as %d", n, b.Number)
					case string(got) != want[b.Hash]:
						t.Errorf("block %v (%s) lent during reorganisations:\n got  %s\n want %s", number, b.Hash, got, want[b.Hash])
					}
					return nil
				})
				if err != nil && !(errors.Is(err, backend.ErrNotFound) && number > backend.BlockNumber(main.Head().Number)) {
					t.Error(err)
					return
				}
			}
		}()
	}
	lent.Wait()
	close(stop)
	t.Logf("600 lookups during %d reorganisations", <-reorgs)
}

// TestLendTransactionHashes finds every lent block that has transactions
// lent with their hashes beside them, canonical, on a side branch or
// pending, as the handler needs to answer without transaction details
// without decoding the transactions.
func TestLendTransactionHashes(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, nil)
	main, fork := reorgChain(t, s)
	pending := main.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(2)(0, g) })
	if err := s.SetPending(pending); err != nil {
		t.Fatal(err)
	}
	check := func(want *backend.Block) func(*backend.Block, backend.TransactionDecoder) error {
		return func(b *backend.Block, txs backend.TransactionDecoder) error {
			if len(want.Transactions) == 0 {
				return nil
			}
			if txs == nil || len(b.TransactionHashes) != len(want.Transactions) {
				t.Errorf("block %d lent with %d transaction hashes, decoder %v; it has %d transactions", want.Number, len(b.TransactionHashes), txs != nil, len(want.Transactions))
				return nil
			}
			for i, tx := range want.Transactions {
				if b.TransactionHashes[i] != tx.Hash {
					t.Errorf("block %d, transaction %d lent with hash %s, want %s", want.Number, i, b.TransactionHashes[i], tx.Hash)
				}
			}
			return nil
		}
	}
	var blocks []*backend.Block
	for n := range main.Head().Number + 1 {
		blocks = append(blocks, main.Block(n))
	}
	for n := uint64(5); n <= fork.Head().Number; n++ {
		blocks = append(blocks, fork.Block(n))
	}
	withTxs := 0
	for _, b := range blocks {
		if len(b.Transactions) > 0 {
			withTxs++
		}
		if err := s.LendBlockByHash(ctx, b.Hash, check(b)); err != nil {
			t.Fatalf("block %d (%s): %v", b.Number, b.Hash, err)
		}
	}
	if err := s.LendBlockByNumber(ctx, backend.Pending, check(pending)); err != nil {
		t.Fatal(err)
	}
	if withTxs == 0 || len(pending.Transactions) == 0 {
		t.Fatalf("%d blocks with transactions, %d pending transactions: nothing was checked", withTxs, len(pending.Transactions))
	}
}
