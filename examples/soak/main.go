// Command soak drives blockrpc's handler, as examples/server sets it up
// (keys, a per-key limit, gzip, the answer cache), at a fixed rate for a
// while, with a realistic mix of requests (blocks by number and by hash,
// uncles, companions, batches, bad inputs, wrong keys, a key over its limit,
// clients that go away mid-answer) while a writer reorganises the chain
// under it. Every answer is checked against the store. It reports answers
// checked, wrong answers, unexpected errors, recovered panics, the p99
// latency and the resident memory over time:
//
//	go run ./examples/soak -duration 10m
//
// It exits 1 when an answer was wrong, an error unexpected, a handler
// panicked, or (for runs of a minute or more) the resident memory grew by
// more than 10% after the first fifth of the run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

func main() {
	cfg := config{report: 10 * time.Second}
	chain := flag.String("chain", "", "a JSONL dump `FILE` to serve (default: the demo chain)")
	flag.DurationVar(&cfg.duration, "duration", time.Minute, "how long to run")
	flag.IntVar(&cfg.rate, "rate", 300, "requests a `second`, all clients together")
	flag.IntVar(&cfg.clients, "clients", 16, "concurrent `clients`")
	flag.DurationVar(&cfg.reorgEvery, "reorg-every", time.Second, "how often the writer changes the chain")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the request mix")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, cfg, *chain, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// run loads the chain, soaks it, and prints the verdict.
func run(ctx context.Context, cfg config, chain string, out io.Writer) (bool, error) {
	store, err := loadChain(chain)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(out, "soak: %v at %d requests/s from %d clients, a chain change every %v, %d blocks\n",
		cfg.duration, cfg.rate, cfg.clients, cfg.reorgEvery, store.Len())
	res, err := soak(ctx, cfg, store, out)
	if err != nil {
		return false, err
	}
	growth := memoryGrowth(res.memory)
	fmt.Fprintf(out, "checked %d answers: %d wrong, %d unexpected errors, %d panics; %d reorganisations; p99 %v; resident memory grew %.1f%% after warm-up\n",
		res.checked, res.wrong, res.unexpected, res.panics, res.reorgs, res.p99.Round(10*time.Microsecond), growth*100)
	for _, f := range res.failures {
		fmt.Fprintln(out, "  ", f)
	}
	ok := res.wrong == 0 && res.unexpected == 0 && res.panics == 0 && res.checked > 0
	if cfg.duration >= time.Minute && growth > 0.10 {
		ok = false
	}
	return ok, nil
}

// memoryGrowth is how much the resident memory grew from the end of the
// first fifth of the run (the warm-up: caches filling, pools growing) to the
// end.
func memoryGrowth(samples []int64) float64 {
	if len(samples) < 5 {
		return 0
	}
	warm := samples[len(samples)/5]
	return float64(samples[len(samples)-1]-warm) / float64(warm)
}

func loadChain(path string) (*memstore.Store, error) {
	if path == "" {
		return demo.Store()
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return memstore.Load(f)
}
