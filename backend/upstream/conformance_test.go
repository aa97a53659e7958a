package upstream_test

import (
	"context"
	"testing"

	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/blockrpctest"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// TestConformanceDemo runs the conformance suite's comparison on the
// upstream Backend over a provider serving the demo chain.
func TestConformanceDemo(t *testing.T) {
	store := demoStore(t)
	srv := blockrpctest.NewServer(t, store)
	up, err := upstream.Open(context.Background(), upstream.Config{Endpoints: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	backendtest.TestBackend(t, up, store, demo.SideHash)
}
