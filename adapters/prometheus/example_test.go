package blockrpcprom_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/blockrpc/blockrpc"
	blockrpcprom "github.com/blockrpc/blockrpc/adapters/prometheus"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Serving a handler's metrics at /metrics, beside the JSON-RPC endpoint.
// In production the metrics usually get a listener of their own, out of the
// clients' reach.
func Example() {
	reg := prometheus.NewRegistry()
	metrics, err := blockrpcprom.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	handler := blockrpc.NewHandler(blockrpc.NewService(memstore.New()),
		blockrpc.WithKeys(blockrpc.NewKeySet("my-key")),
		blockrpc.WithObserver(metrics.Observer()),
	)
	mux := http.NewServeMux()
	mux.Handle("POST /v3/{key}", handler)
	mux.Handle("GET /metrics", metrics.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v3/my-key", "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}`))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()

	// A request is counted when its handler returns, which may be just
	// after the client has its answer.
	n, err := testutil.GatherAndCount(reg, "blockrpc_calls_total", "blockrpc_http_requests_total")
	for deadline := time.Now().Add(5 * time.Second); n < 2 && err == nil && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		n, err = testutil.GatherAndCount(reg, "blockrpc_calls_total", "blockrpc_http_requests_total")
	}
	fmt.Println(n, err)
	// Output:
	// 2 <nil>
}
