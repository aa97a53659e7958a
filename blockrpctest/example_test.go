package blockrpctest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/blockrpc/blockrpc/blockrpctest"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// rpc calls a JSON-RPC method at url and decodes its result into result.
func rpc(ctx context.Context, url, method string, result any, params ...any) error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var answer struct {
		Result json.RawMessage
		Error  *struct {
			Code    int
			Message string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return fmt.Errorf("%s: HTTP %d: %w", method, resp.StatusCode, err)
	}
	if answer.Error != nil {
		return fmt.Errorf("%s: %d %s", method, answer.Error.Code, answer.Error.Message)
	}
	return json.Unmarshal(answer.Result, result)
}

// header is what the service reads of a block or an uncle.
type header struct {
	Number string
	Hash   string
	Miner  string
	Uncles []string
}

// latestWithUncles is a service's function under test: it reads the latest
// block and the headers of its uncles.
func latestWithUncles(ctx context.Context, url string) (header, []header, error) {
	var block header
	if err := rpc(ctx, url, "eth_getBlockByNumber", &block, "latest", false); err != nil {
		return header{}, nil, err
	}
	uncles := make([]header, len(block.Uncles))
	for i := range uncles {
		if err := rpc(ctx, url, "eth_getUncleByBlockHashAndIndex", &uncles[i], block.Hash, "0x"+strconv.FormatInt(int64(i), 16)); err != nil {
			return header{}, nil, err
		}
	}
	return block, uncles, nil
}

// A service's function tested against a chain whose latest block has two
// uncles, served over HTTP.
func Example() {
	// A proof-of-work chain (London from the genesis, no merge) of five
	// blocks with transactions, the last with two uncles.
	b := chaintest.New(chaintest.Config{Seed: 1, Merge: chaintest.Never, Shanghai: chaintest.Never, Cancun: chaintest.Never, Prague: chaintest.Never})
	b.AddBlocks(4, chaintest.Txs(3))
	b.AddBlock(func(g *chaintest.BlockGen) {
		g.AddUncle()
		g.AddUncle()
	})

	srv := blockrpctest.StartServer(b.Store()) // in a test: blockrpctest.NewServer(t, b.Store())
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	block, uncles, err := latestWithUncles(ctx, srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("latest block:", block.Number, "uncles:", len(uncles))
	for i, u := range uncles {
		fmt.Println("uncle", i, "number", u.Number, "hash matches:", u.Hash == block.Uncles[i])
	}
	// Output:
	// latest block: 0x5 uncles: 2
	// uncle 0 number 0x4 hash matches: true
	// uncle 1 number 0x4 hash matches: true
}

// A retry loop meeting a provider that rate-limits half the requests: the
// seed decides which, the same in every run.
func Example_faults() {
	b := chaintest.New(chaintest.Config{Seed: 1})
	b.AddBlocks(2, nil)
	srv := blockrpctest.StartServer(b.Store(), blockrpctest.WithRateLimited(0.5, time.Second), blockrpctest.WithSeed(5))
	defer srv.Close()

	var number string
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		if err = rpc(context.Background(), srv.URL, "eth_blockNumber", &number); err == nil {
			fmt.Println("attempt", attempt, "block number", number)
			break
		}
		fmt.Println("attempt", attempt, "failed:", err)
	}
	fmt.Printf("%+v\n", srv.Stats())
	// Output:
	// attempt 1 failed: eth_blockNumber: -32005 request rate exceeded
	// attempt 2 failed: eth_blockNumber: -32005 request rate exceeded
	// attempt 3 block number 0x2
	// {Requests:3 Delayed:0 ServerErrors:0 RateLimited:2 Dropped:0}
}
