package main

import (
	"bytes"
	"context"
	"testing"
	"time"
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
