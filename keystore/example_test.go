package keystore_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/keystore"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// A handler whose keys are a store's: made and revoked while it serves.
func ExampleOpen() {
	ctx := context.Background()
	store := keystore.NewMemory() // or keystore.OpenFile, or pgkeys.Open
	secret, key, _ := keystore.NewKey("example", 0, 0, time.Now())
	store.Create(ctx, key)

	keys, err := keystore.Open(ctx, store, keystore.Options{})
	if err != nil {
		panic(err)
	}
	defer keys.Close()
	chain, _ := demo.Store()
	srv := httptest.NewServer(blockrpc.NewHandler(blockrpc.NewService(chain),
		blockrpc.WithKeys(keys),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: math.Inf(1)}),
		blockrpc.WithObserver(keys.Observer())))

	call := func() int {
		resp, err := http.Post(srv.URL+"/v3/"+secret, "application/json",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`))
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	fmt.Println(call())

	store.Revoke(ctx, key.ID, time.Now())
	keys.Refresh(ctx) // or wait for Options.Refresh
	fmt.Println(call())

	srv.Close() // waits for the requests, each counted once answered
	keys.Flush(ctx)
	used, _ := store.Key(ctx, key.ID)
	fmt.Println(used.Used.Requests, "request counted")
	// Output:
	// 200
	// 401
	// 1 request counted
}
