// Command server serves a chain over the blockrpc JSON-RPC API.
//
// With no flags it serves a built-in demo chain at 127.0.0.1:8545 and prints
// ready-to-paste curl lines with a freshly generated API key (keys given
// with -keys or BLOCKRPC_KEYS are never printed):
//
//	go run ./examples/server
//
// Flags:
//
//	-addr HOST:PORT   where to listen (default 127.0.0.1:8545)
//	-chain FILE       serve a JSONL dump instead of the demo chain
//	-keys k1,k2       the accepted API keys (default: BLOCKRPC_KEYS, else one
//	                  generated key; the environment keeps keys out of ps)
//	-safe N           the block the "safe" tag selects
//	-finalized N      the block the "finalized" tag selects
//	-chainid N        the chain id, for a dump whose transactions do not tell it
//
// For a dump, safe and finalized default to its head. The server stops
// gracefully on SIGINT and SIGTERM.
package main

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
)

// The demo chain: blocks under Berlin rules with uncles, London, the merge,
// Shanghai withdrawals, Cancun blob transactions and Prague set-code
// transactions, generated with go-ethereum (see
// examples/interop/cmd/demochain), and the block pending on top of it.
//
//go:embed demo/chain.jsonl demo/pending.jsonl
var demo embed.FS

// How far behind the head the demo's safe and finalized blocks are.
const (
	demoSafeDepth      = 8
	demoFinalizedDepth = 16
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

type options struct {
	addr, chain, keys string
	safe, finalized   int64
	chainID           uint64
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8545", "`HOST:PORT` to listen on")
	fs.StringVar(&o.chain, "chain", "", "JSONL dump `FILE` to serve instead of the demo chain")
	fs.StringVar(&o.keys, "keys", os.Getenv("BLOCKRPC_KEYS"), "comma-separated API `keys` to accept (default: $BLOCKRPC_KEYS, else one generated key)")
	fs.Int64Var(&o.safe, "safe", -1, "block `N` for the \"safe\" tag (default: head for a dump)")
	fs.Int64Var(&o.finalized, "finalized", -1, "block `N` for the \"finalized\" tag (default: head for a dump)")
	fs.Uint64Var(&o.chainID, "chainid", 0, "chain id `N` for eth_chainId (default: the one the transactions are signed for)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return o, nil
}

// run serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	store, err := loadChain(o)
	if err != nil {
		return err
	}
	keys, generated := strings.Split(o.keys, ","), false
	if o.keys == "" {
		keys, generated = []string{newKey()}, true
	}
	for _, k := range keys {
		if k == "" {
			return errors.New("-keys: empty key")
		}
	}

	handler := blockrpc.NewHandler(blockrpc.NewService(store),
		blockrpc.WithKeys(blockrpc.NewKeySet(keys...)),
		blockrpc.WithLogger(log),
		blockrpc.WithGzip(),
	)
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           accessLog(log, handler),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	url := "http://" + ln.Addr().String() + "/v3/"
	shown := "<API_KEY>" // a key the operator chose stays off the screen and out of logs
	if generated {
		shown = keys[0]
	}
	printUsage(ctx, stdout, store, url, shown, generated)
	log.Info("serving", "addr", ln.Addr().String(), "blocks", store.Len())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loadChain returns the chain to serve with its tags set.
func loadChain(o options) (*memstore.Store, error) {
	var store *memstore.Store
	safe, finalized := o.safe, o.finalized
	if o.chain != "" {
		f, err := os.Open(o.chain)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if store, err = memstore.Load(f); err != nil {
			return nil, fmt.Errorf("%s: %w", o.chain, err)
		}
		head, err := store.BlockByNumber(context.Background(), backend.Latest)
		if err != nil {
			return nil, fmt.Errorf("%s: no blocks", o.chain)
		}
		safe, finalized = orDefault(safe, int64(head.Number)), orDefault(finalized, int64(head.Number))
	} else {
		var err error
		if store, err = loadDemo(); err != nil {
			return nil, fmt.Errorf("the demo chain: %w", err)
		}
		head, _ := store.BlockByNumber(context.Background(), backend.Latest)
		safe = orDefault(safe, int64(head.Number)-demoSafeDepth)
		finalized = orDefault(finalized, int64(head.Number)-demoFinalizedDepth)
	}
	if err := store.SetSafe(uint64(safe)); err != nil {
		return nil, fmt.Errorf("-safe: %w", err)
	}
	if err := store.SetFinalized(uint64(finalized)); err != nil {
		return nil, fmt.Errorf("-finalized: %w", err)
	}
	if o.chainID != 0 {
		if err := store.SetChainID(o.chainID); err != nil {
			return nil, fmt.Errorf("-chainid: %w", err)
		}
	}
	return store, nil
}

func orDefault(v, def int64) int64 {
	if v >= 0 {
		return v
	}
	return max(def, 0)
}

func loadDemo() (*memstore.Store, error) {
	chain, err := demo.Open("demo/chain.jsonl")
	if err != nil {
		return nil, err
	}
	defer chain.Close()
	store, err := memstore.Load(chain)
	if err != nil {
		return nil, err
	}
	line, err := demo.ReadFile("demo/pending.jsonl")
	if err != nil {
		return nil, err
	}
	var pending struct{ Block *backend.Block }
	if err := json.Unmarshal(line, &pending); err != nil {
		return nil, fmt.Errorf("pending block: %w", err)
	}
	return store, store.SetPending(pending.Block)
}

func newKey() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails on supported platforms
	return hex.EncodeToString(b)
}

// printUsage prints the endpoint and curl lines that query the latest block
// and the newest uncle of the chain.
func printUsage(ctx context.Context, w io.Writer, store *memstore.Store, url, key string, generated bool) {
	if generated {
		fmt.Fprintf(w, "API key (generated for this run): %s\n", key)
	}
	fmt.Fprintf(w, "JSON-RPC endpoint: %s%s\n\n", url, key)
	fmt.Fprintf(w, "The latest block:\n%s\n", curlLine(url+key, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}`))
	if b, ok := newestWithUncles(ctx, store); ok {
		fmt.Fprintf(w, "\nThe uncle of block %d:\n%s\n", b.Number,
			curlLine(url+key, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"eth_getUncleByBlockHashAndIndex","params":["%s","0x0"]}`, b.Hash)))
	}
	fmt.Fprintln(w)
}

func curlLine(url, body string) string {
	return fmt.Sprintf("curl -s -H 'Content-Type: application/json' --data '%s' %s", body, url)
}

// newestWithUncles finds the highest canonical block that has uncles.
func newestWithUncles(ctx context.Context, store *memstore.Store) (*backend.Block, bool) {
	head, err := store.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		return nil, false
	}
	low, _ := store.BlockByNumber(ctx, backend.Earliest)
	for n := int64(head.Number); n >= int64(low.Number); n-- {
		b, err := store.BlockByNumber(ctx, backend.BlockNumber(n))
		if err == nil && len(b.Uncles) > 0 {
			return b, true
		}
	}
	return nil, false
}

// accessLog logs each request with the API key cut out of the path.
func accessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		log.Info("request", "method", r.Method, "path", redactKey(r.URL.Path), "status", rec.status,
			"bytes", rec.bytes, "duration", time.Since(start).Round(time.Microsecond), "remote", r.RemoteAddr)
	})
}

// redactKey replaces what follows /v3/ in a path, the API key, with "***".
func redactKey(path string) string {
	if i := strings.Index(path, "/v3/"); i >= 0 && len(path) > i+4 {
		return path[:i+4] + "***"
	}
	return path
}

type statusRecorder struct {
	http.ResponseWriter
	status, bytes int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	n, err := r.ResponseWriter.Write(p)
	r.bytes += n
	return n, err
}
