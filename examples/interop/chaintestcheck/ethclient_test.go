package chaintestcheck

import (
	"context"
	"math/big"
	"testing"

	"github.com/blockrpc/blockrpc/blockrpctest"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
)

// latestWithUncles is a service's function under test, written with
// go-ethereum's client: the latest block, whose uncles ethclient fetches
// with eth_getUncleByBlockHashAndIndex and checks against sha3Uncles.
func latestWithUncles(ctx context.Context, url string) (*types.Block, error) {
	client, err := ethclient.DialContext(ctx, url)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	return client.BlockByNumber(ctx, nil)
}

// TestEthclientAgainstFakeProvider tests that function against the
// builder's chain served by blockrpctest.
func TestEthclientAgainstFakeProvider(t *testing.T) {
	b := chaintest.New(chaintest.Config{Seed: 1, Merge: chaintest.Never, Shanghai: chaintest.Never, Cancun: chaintest.Never, Prague: chaintest.Never})
	b.AddBlocks(4, chaintest.Txs(4))
	want := b.AddBlock(func(g *chaintest.BlockGen) {
		g.AddUncle()
		g.AddUncle()
		for i, kind := range g.Kinds() {
			g.AddTx(chaintest.Tx{Kind: kind, From: i})
		}
	})
	srv := blockrpctest.NewServer(t, b.Store())

	block, err := latestWithUncles(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if block.Hash() != common.Hash(want.Hash) || block.NumberU64() != 5 || len(block.Uncles()) != 2 || len(block.Transactions()) != len(want.Transactions) {
		t.Fatalf("got block %d %s with %d uncles and %d transactions, want 5 %s with 2 and %d",
			block.NumberU64(), block.Hash(), len(block.Uncles()), len(block.Transactions()), want.Hash, len(want.Transactions))
	}
	for i, u := range block.Uncles() {
		if u.Hash() != common.Hash(want.Uncles[i]) {
			t.Errorf("uncle %d: %s, want %s", i, u.Hash(), want.Uncles[i])
		}
	}
	signer := types.LatestSignerForChainID(big.NewInt(chaintest.DefaultChainID))
	for i, tx := range block.Transactions() {
		if from, err := types.Sender(signer, tx); err != nil || from != common.Address(want.Transactions[i].From) {
			t.Errorf("tx %d: sender %s (%v), want %s", i, from, err, want.Transactions[i].From)
		}
	}
}
