// Package goclient checks that go-ethereum's own client, ethclient, reads
// blockrpc's answers unchanged: the blocks it rebuilds from them are the
// blocks go-ethereum made.
package goclient

import (
	"context"
	"errors"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/examples/interop/demochain"
	"github.com/blockrpc/blockrpc/examples/interop/gethconv"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/memstore"
	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rlp"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethereum/go-ethereum/trie"
)

const key = "ethclient-test-key"

// chain is a chain as go-ethereum made it, and a memstore holding it.
type chain struct {
	name     string
	chainID  *big.Int
	blocks   []*types.Block // canonical, from the genesis
	side     []*types.Block // reachable by hash only
	store    *memstore.Store
	withTags bool // safe and finalized are set
}

func demoChain(t *testing.T) *chain {
	t.Helper()
	c, err := demochain.Generate()
	if err != nil {
		t.Fatal(err)
	}
	store, _, err := c.Store()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SetSafe(demochain.Head - 2); err != nil {
		t.Fatal(err)
	}
	if err := store.SetFinalized(demochain.Head - 4); err != nil {
		t.Fatal(err)
	}
	return &chain{
		name:     "demo",
		chainID:  c.Config.ChainID,
		blocks:   append([]*types.Block{c.Genesis}, c.Blocks...),
		side:     []*types.Block{c.Side},
		store:    store,
		withTags: true,
	}
}

// specChain is the execution-apis test chain: Frontier rules to Prague,
// with 18 uncles.
func specChain(t *testing.T) *chain {
	t.Helper()
	dir := fixtures.Path(t, "execution-apis")
	genesis, err := gethconv.ReadGenesis(filepath.Join(dir, "genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "chain.rlp"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := gethconv.LoadExport(genesis, strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	blocks := []*types.Block{genesis.ToBlock()}
	stream := rlp.NewStream(strings.NewReader(string(data)), 0)
	for {
		var b types.Block
		if err := stream.Decode(&b); err != nil {
			break
		}
		blocks = append(blocks, &b)
	}
	return &chain{name: "execution-apis", chainID: genesis.Config.ChainID, blocks: blocks, store: store}
}

// dial serves c's store and returns an ethclient for it.
func dial(t *testing.T, c *chain, apiKey string) *ethclient.Client {
	t.Helper()
	h := blockrpc.NewHandler(blockrpc.NewService(c.store), blockrpc.WithKeys(blockrpc.NewKeySet(key)))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client, err := ethclient.Dial(srv.URL + "/v3/" + apiKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// TestBlocksRebuildExactly reads every block with ethclient.BlockByNumber,
// which asks eth_getBlockByNumber(n, true) and then, for a block with
// uncles, a batch of eth_getUncleByBlockHashAndIndex. The block it rebuilds
// must be go-ethereum's: its hash is computed from the header ethclient
// decoded, so every header field must be right.
func TestBlocksRebuildExactly(t *testing.T) {
	for _, c := range []*chain{demoChain(t), specChain(t)} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			client := dial(t, c, key)
			signer := types.LatestSignerForChainID(c.chainID)
			var txs, uncles int
			for _, want := range c.blocks {
				got, err := client.BlockByNumber(ctx, want.Number())
				if err != nil {
					t.Fatalf("block %d: %v", want.NumberU64(), err)
				}
				compareBlocks(t, client, signer, got, want)
				txs += len(want.Transactions())
				uncles += len(want.Uncles())
			}
			for _, want := range c.side {
				got, err := client.BlockByHash(ctx, want.Hash())
				if err != nil {
					t.Fatalf("side block %s: %v", want.Hash(), err)
				}
				compareBlocks(t, client, signer, got, want)
			}
			t.Logf("%s: %d blocks and %d side blocks rebuilt by ethclient, %d transactions, %d uncles", c.name, len(c.blocks), len(c.side), txs, uncles)
		})
	}
}

func compareBlocks(t *testing.T, client *ethclient.Client, signer types.Signer, got, want *types.Block) {
	t.Helper()
	n := want.NumberU64()
	if got.Hash() != want.Hash() {
		t.Fatalf("block %d: ethclient rebuilt hash %s, want %s\n got header %+v\nwant header %+v", n, got.Hash(), want.Hash(), got.Header(), want.Header())
	}
	if len(got.Transactions()) != len(want.Transactions()) {
		t.Fatalf("block %d: %d transactions, want %d", n, len(got.Transactions()), len(want.Transactions()))
	}
	for i, wtx := range want.Transactions() {
		gtx := got.Transactions()[i]
		if gtx.Hash() != wtx.Hash() || gtx.Type() != wtx.Type() {
			t.Errorf("block %d tx %d: hash %s type %d, want %s type %d", n, i, gtx.Hash(), gtx.Type(), wtx.Hash(), wtx.Type())
			continue
		}
		wantFrom, err := types.Sender(signer, wtx)
		if err != nil {
			t.Fatal(err)
		}
		// The sender the server named (ethclient caches it with the block;
		// read it first, as recovering replaces that cache)...
		if from, err := client.TransactionSender(context.Background(), gtx, got.Hash(), uint(i)); err != nil || from != wantFrom {
			t.Errorf("block %d tx %d: served sender %s (%v), want %s", n, i, from, err, wantFrom)
		}
		// ...is the one the served signature recovers to.
		if from, err := types.Sender(signer, gtx); err != nil || from != wantFrom {
			t.Errorf("block %d tx %d: sender recovered from the served signature %s (%v), want %s", n, i, from, err, wantFrom)
		}
	}
	if len(got.Uncles()) != len(want.Uncles()) {
		t.Fatalf("block %d: %d uncles, want %d", n, len(got.Uncles()), len(want.Uncles()))
	}
	for i, u := range want.Uncles() {
		if got.Uncles()[i].Hash() != u.Hash() {
			t.Errorf("block %d uncle %d: %s, want %s", n, i, got.Uncles()[i].Hash(), u.Hash())
		}
	}
	if types.DeriveSha(got.Withdrawals(), trie.NewStackTrie(nil)) != types.DeriveSha(want.Withdrawals(), trie.NewStackTrie(nil)) || len(got.Withdrawals()) != len(want.Withdrawals()) {
		t.Errorf("block %d: withdrawals differ", n)
	}
}

// TestHeadersByTag reads the tagged blocks through HeaderByNumber.
func TestHeadersByTag(t *testing.T) {
	c := demoChain(t)
	client := dial(t, c, key)
	ctx := context.Background()
	head := c.blocks[len(c.blocks)-1]
	for _, tc := range []struct {
		tag  rpc.BlockNumber
		want *types.Block
	}{
		{rpc.LatestBlockNumber, head},
		{rpc.EarliestBlockNumber, c.blocks[0]},
		{rpc.SafeBlockNumber, c.blocks[demochain.Head-2]},
		{rpc.FinalizedBlockNumber, c.blocks[demochain.Head-4]},
	} {
		h, err := client.HeaderByNumber(ctx, big.NewInt(tc.tag.Int64()))
		if err != nil || h.Hash() != tc.want.Hash() {
			t.Errorf("HeaderByNumber(%s) = %v, %v; want block %d", tc.tag, h, err, tc.want.NumberU64())
		}
	}
	if h, err := client.HeaderByNumber(ctx, nil); err != nil || h.Hash() != head.Hash() {
		t.Errorf("HeaderByNumber(nil) = %v, %v; want the head", h, err)
	}
	if n, err := client.BlockNumber(ctx); err != nil || n != head.NumberU64() {
		t.Errorf("BlockNumber = %d, %v; want %d", n, err, head.NumberU64())
	}
	if id, err := client.ChainID(ctx); err != nil || id.Cmp(c.chainID) != 0 {
		t.Errorf("ChainID = %v, %v; want %v", id, err, c.chainID)
	}
	if _, err := client.HeaderByNumber(ctx, big.NewInt(int64(demochain.Head+50))); !errors.Is(err, ethereum.NotFound) {
		t.Errorf("HeaderByNumber past the head: %v, want not found", err)
	}

	// This service's specification nulls the pending block's number and
	// logsBloom, which go-ethereum's Header requires: ethclient refuses it.
	// go-ethereum itself nulls the hash, nonce and miner instead.
	_, err := client.HeaderByNumber(ctx, big.NewInt(rpc.PendingBlockNumber.Int64()))
	if err == nil || !strings.Contains(err.Error(), "missing required field") {
		t.Errorf("HeaderByNumber(pending) = %v; want ethclient's missing-field error for the seed's null number and logsBloom", err)
	}
}

// TestBadKeysAreHTTP401 checks that a refused key reaches ethclient as the
// HTTP status, with the JSON-RPC error the body carries.
func TestBadKeysAreHTTP401(t *testing.T) {
	c := demoChain(t)
	for _, bad := range []string{"wrong-key", ""} {
		client := dial(t, c, bad)
		_, err := client.BlockNumber(context.Background())
		var httpErr rpc.HTTPError
		if !errors.As(err, &httpErr) || httpErr.StatusCode != 401 {
			t.Errorf("key %q: error %v, want HTTP 401", bad, err)
			continue
		}
		if !strings.Contains(string(httpErr.Body), `"code":-32600`) {
			t.Errorf("key %q: 401 body %s, want a JSON-RPC error", bad, httpErr.Body)
		}
	}
}
