package chaintest_test

import (
	"context"
	"fmt"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// A chain through every fork, a side branch that takes over, and a
// pending block.
func Example() {
	b := chaintest.New(chaintest.Config{Seed: 1, London: 2, Merge: 10, Shanghai: 12, Cancun: 14, Prague: 16})
	b.AddBlocks(20, func(i int, g *chaintest.BlockGen) {
		for j, kind := range g.Kinds() { // one of each kind the fork allows
			g.AddTx(chaintest.Tx{Kind: kind, From: j})
		}
		if g.Number() >= 2 && g.Number() < 10 {
			g.AddUncle()
		}
	})
	side := b.Fork(18)
	side.AddBlocks(4, chaintest.Txs(3))
	side.Reorg()
	side.SetPending(func(g *chaintest.BlockGen) { g.AddTx(chaintest.Tx{Kind: chaintest.Blob}) })

	s := b.Store()
	latest, _ := s.BlockByNumber(context.Background(), backend.Latest)
	tx := latest.Transactions[0]
	from, _ := backend.Sender(tx)
	fmt.Println("latest:", latest.Number, "transactions:", len(latest.Transactions))
	fmt.Println("sender recovered:", from == tx.From, from == chaintest.Key(0).Address())
	old, _ := s.BlockByHash(context.Background(), b.Head().Hash)
	fmt.Println("the old head, by hash:", old.Number)
	// Output:
	// latest: 22 transactions: 3
	// sender recovered: true true
	// the old head, by hash: 20
}
