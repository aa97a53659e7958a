package blockrpc_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
)

// exampleChain returns a store holding a genesis block and its child, whose
// one uncle is a sibling of the child.
func exampleChain() *memstore.Store {
	store := memstore.New()
	genesis := &backend.Block{Header: backend.Header{GasLimit: 30_000_000, ExtraData: []byte("genesis")}}
	genesis.Difficulty.SetUint64(0x20000)
	if err := store.AddBlock(genesis); err != nil {
		log.Fatal(err)
	}
	parent, _ := store.BlockByNumber(context.Background(), 0)

	uncle := &backend.Uncle{Header: backend.Header{Number: 1, ParentHash: parent.Hash, GasLimit: 30_000_000, Timestamp: 13}}
	uncle.Difficulty.SetUint64(0x20000)
	block := &backend.Block{Header: backend.Header{Number: 1, ParentHash: parent.Hash, GasLimit: 30_000_000, Timestamp: 14}}
	block.Difficulty.SetUint64(0x20040)
	if err := store.AddBlock(block, uncle); err != nil {
		log.Fatal(err)
	}
	return store
}

// Mounting the handler in an existing mux, under a prefix. The handler
// serves any path ending in /v3/<API_KEY>.
func ExampleNewHandler() {
	service := blockrpc.NewService(exampleChain())
	handler := blockrpc.NewHandler(service, blockrpc.WithKeys(blockrpc.NewKeySet("my-key")))

	mux := http.NewServeMux()
	mux.Handle("/eth/", http.StripPrefix("/eth", handler))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/eth/v3/my-key", "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",false]}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status)
	fmt.Println(string(body[:strings.Index(string(body), `,"result"`)]))
	// Output:
	// 200 OK
	// {"jsonrpc":"2.0","id":1
}

// Go 1.22 ServeMux patterns work too: the key is the last path segment.
func ExampleNewHandler_pattern() {
	handler := blockrpc.NewHandler(blockrpc.NewService(exampleChain()), blockrpc.WithKeys(blockrpc.AnyKey))
	mux := http.NewServeMux()
	mux.Handle("POST /rpc/v3/{key}", handler)

	req := httptest.NewRequest("POST", "/rpc/v3/anything", strings.NewReader(`{"jsonrpc":"2.0","id":"a","method":"eth_getBlockByNumber","params":["0x7",false]}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	fmt.Print(rec.Body.String())
	// Output:
	// {"jsonrpc":"2.0","id":"a","result":null}
}

// The typed API: the same answers as the JSON-RPC methods, as Go values.
func ExampleService_GetBlockByNumber() {
	service := blockrpc.NewService(exampleChain())
	block, err := service.GetBlockByNumber(context.Background(), backend.Latest, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("number:", block.Number)
	fmt.Println("uncles:", len(block.Uncles))
	fmt.Println("total difficulty:", block.TotalDifficulty.Hex())

	missing, err := service.GetBlockByNumber(context.Background(), 99, false)
	fmt.Println("block 99:", missing, err)
	// Output:
	// number: 1
	// uncles: 1
	// total difficulty: 0x40040
	// block 99: <nil> <nil>
}

func ExampleService_GetUncleByBlockHashAndIndex() {
	ctx := context.Background()
	service := blockrpc.NewService(exampleChain())
	block, _ := service.GetBlockByNumber(ctx, 1, false)

	uncle, err := service.GetUncleByBlockHashAndIndex(ctx, block.Hash, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("uncle of block", uncle.Number, "is", uncle.Hash == block.Uncles[0])
	fmt.Println("its size:", uncle.Size, "its total difficulty:", uncle.TotalDifficulty.Hex())

	none, _ := service.GetUncleByBlockHashAndIndex(ctx, block.Hash, 1)
	fmt.Println("a second uncle:", none)
	// Output:
	// uncle of block 1 is true
	// its size: 508 its total difficulty: 0x40000
	// a second uncle: <nil>
}

// Keys can be revoked while the handler runs.
func ExampleKeySet() {
	keys := blockrpc.NewKeySet("alice", "bob")
	handler := blockrpc.NewHandler(blockrpc.NewService(exampleChain()), blockrpc.WithKeys(keys))

	status := func(key string) int {
		req := httptest.NewRequest("POST", "/v3/"+key, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}`))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println("bob:", status("bob"))
	keys.Revoke("bob")
	fmt.Println("bob, revoked:", status("bob"))
	fmt.Println("mallory:", status("mallory"))
	// Output:
	// bob: 200
	// bob, revoked: 401
	// mallory: 401
}

// Per-key rate limits: a key of its own limit, and past it a 429 with
// Retry-After and the code hosted providers answer with.
func ExampleWithLimiter() {
	keys := blockrpc.NewKeySet()
	keys.AddWithLimit("free-tier", blockrpc.Limit{Rate: 1, Burst: 2}) // 1 call a second, 2 at once
	handler := blockrpc.NewHandler(blockrpc.NewService(exampleChain()),
		blockrpc.WithKeys(keys),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: 100, Burst: 100}),
	)
	for range 3 {
		req := httptest.NewRequest("POST", "/v3/free-tier", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	// Output:
	// 200 {"jsonrpc":"2.0","id":1,"result":"0x1"}
	// 200 {"jsonrpc":"2.0","id":1,"result":"0x1"}
	// 429 {"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"request rate exceeded"}}
}

// An observer that counts answers by method and outcome, as a metrics
// adapter does; it is never given a key.
func ExampleObserver() {
	var mu sync.Mutex
	counts := map[string]int{}
	observer := &blockrpc.Observer{Call: func(_ context.Context, c blockrpc.CallInfo) {
		mu.Lock()
		defer mu.Unlock()
		counts[fmt.Sprintf("%s %d", c.Method, c.Code)]++
	}}
	handler := blockrpc.NewHandler(blockrpc.NewService(exampleChain()),
		blockrpc.WithKeys(blockrpc.AnyKey), blockrpc.WithObserver(observer))
	req := httptest.NewRequest("POST", "/v3/k", strings.NewReader(`[
		{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]},
		{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["0x01",false]},
		{"jsonrpc":"2.0","id":3,"method":"eth_sendRawTransaction","params":["0x00"]}]`))
	req.Header.Set("Content-Type", "application/json")
	handler.ServeHTTP(httptest.NewRecorder(), req)
	fmt.Println(counts)
	// Output:
	// map[ -32601:1 eth_getBlockByNumber -32602:1 eth_getBlockByNumber 0:1]
}
