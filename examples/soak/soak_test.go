package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// TestSoak is the short soak: 30 seconds of the mix while the chain is
// reorganised, with every answer checked. The long one is run by hand
// (go run ./examples/soak -duration 10m).
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes 30 seconds")
	}
	var out bytes.Buffer
	cfg := config{duration: 30 * time.Second, rate: 200, clients: 8, reorgEvery: 500 * time.Millisecond, report: 10 * time.Second, seed: 1}
	ok, err := run(context.Background(), cfg, "", &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("the soak found wrong answers, unexpected errors or panics")
	}
}

// TestCheckedCountsAnswers has every call of the companions' mix fail
// without an answer: each is a failure, and none is counted among the
// answers checked, which the report gives as the soak's coverage.
func TestCheckedCountsAnswers(t *testing.T) {
	store, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	d := &driver{svc: blockrpc.NewService(store), store: store, url: down.URL + "/v3/", client: down.Client()}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 30 {
		d.companion(context.Background(), rng)
	}
	if d.unexpected.Load() == 0 {
		t.Fatal("no failure recorded for calls answered 503")
	}
	if n := d.checked.Load(); n != 0 {
		t.Errorf("%d answers counted as checked, of %d calls that got none", n, d.unexpected.Load())
	}
}
