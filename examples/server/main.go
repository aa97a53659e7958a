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
//	-chain FILE       serve a JSONL dump instead of the demo chain (with
//	                  -store, import it into the store)
//	-keys k1,k2       the accepted API keys (default: BLOCKRPC_KEYS, else one
//	                  generated key; the environment keeps keys out of ps)
//	-safe N           the block the "safe" tag selects
//	-finalized N      the block the "finalized" tag selects
//	-chainid N        the chain id, for a dump whose transactions do not tell it
//	-grace DURATION   how long requests in flight may take to finish once
//	                  SIGINT or SIGTERM arrives (default 10s)
//	-log-level L      debug, info, warn or error (default info); request
//	                  lines are at info, so warn silences them
//	-log-sample N     log one request line in N (default 1); server errors
//	                  (5xx, but for the 503s of a chain still loading) and
//	                  panics are always logged
//	-read-timeout D   how long a client may take to send a request, body
//	                  included (default 30s); a body cut short by it is
//	                  answered 408
//	-write-timeout D  how long a request may take, from the end of its
//	                  headers to the last byte of its answer (default 60s);
//	                  an answer not out by then is cut
//	-rate N           calls a second allowed to each key, on average (default
//	                  0: no limit); past it, requests get 429, Retry-After
//	                  and JSON-RPC error -32005
//	-burst M          calls a key may make at once (default: -rate, rounded up)
//	-cache BYTES      the size of the answer cache (default 128 MiB; 0 turns
//	                  it off)
//	-admin HOST:PORT  serve /metrics (Prometheus), /healthz and /readyz on a
//	                  second, plain-HTTP listener (default: none; with
//	                  -keystore, 127.0.0.1:8546), and with -keystore the
//	                  dashboard of API keys; on loopback, only for a Host
//	                  that is localhost or a loopback address
//	-keystore S       keep API keys as data, made, limited and revoked on
//	                  the dashboard while the server runs: memory, file:PATH
//	                  (one server), or a postgres:// URL (any number of
//	                  servers); instead of -keys
//	-admin-token T    the token that signs in to the dashboard (default:
//	                  BLOCKRPC_ADMIN_TOKEN; without either, a loopback -admin
//	                  gets one generated and printed, and any other is
//	                  refused)
//	-key-refresh D    how often the key store is read again: how long a key
//	                  made, limited or revoked elsewhere takes to apply here
//	                  (default 5s)
//	-key-stale D      how long the keys last read are served while the key
//	                  store cannot be read, before requests get 503
//	                  (default 5m)
//	-tls-cert FILE    serve HTTPS (and HTTP/2) on -addr with this certificate
//	-tls-key FILE     and this key; both or neither
//	-upstream URLS    serve a live chain through these JSON-RPC endpoints
//	                  (comma-separated, the first preferred, the next ones
//	                  its failover), verifying every block before serving it
//	-follow URL       copy the chain of this JSON-RPC endpoint into the store,
//	                  from its genesis, keep it current, and serve it,
//	                  answering while it copies
//	-poll DURATION    how often -upstream or -follow asks the endpoints for
//	                  their head (default 2s), or -read-only the store for
//	                  its head row (default 500ms)
//	-store S          where the chain is kept: memory (the default), pebble:DIR
//	                  (a Pebble store on local disk, made when missing), or a
//	                  postgres:// or postgresql:// URL (a PostgreSQL store,
//	                  its tables made by the server that writes it)
//	-store-cache BYTES
//	                  the size of the store's cache of blocks: Pebble's block
//	                  cache (default 512 MiB; a few GiB for a mainnet-sized
//	                  chain), or the blocks a PostgreSQL store keeps in the
//	                  process (default 256 MiB; -1 turns it off)
//	-store-compress   write a Pebble store's blocks compressed (MinLZ):
//	                  about 0.8 of the disk they take uncompressed, the
//	                  default, for slower reads of blocks not in the cache
//	-read-only        with a PostgreSQL -store: serve the store that another
//	                  server writes, reading only
//
// -chain, -upstream and -follow each name the chain to serve: one at most
// (none serves the demo chain). -safe, -finalized and -chainid apply to a
// dump or the demo chain; with -upstream or -follow the endpoint tells
// them, and they are refused.
//
// With -store pebble:DIR or a postgres:// URL the chain is kept in a
// persistent store. -chain imports the dump into it: blocks the store holds
// already, on its chain or off it, are skipped, so the same dump twice
// changes nothing, nor does an old dump into a store that moved on; a dump
// of another chain, or one that would leave a gap above the store's latest
// block, is refused. A long import logs a line every 5 seconds: the
// blocks imported (written, or found stored already), blocks and MB of the
// dump read a second, the share of the dump read and the time left.
// -follow copies the endpoint into the store, and resumes after the
// store's latest block when it holds some.
// With neither, a store that holds a chain is served as it is, and an
// empty one gets the demo chain imported; the log says which. -safe,
// -finalized and -chainid are written into the store. -store does not
// apply to -upstream, whose backend keeps its own cache.
//
// One server at a time writes a store: Pebble's directory is open in one
// process only, and a PostgreSQL store's writer holds a lease in it (a
// second writer is refused). Any number of servers started with
// -read-only serve a PostgreSQL store beside its writer, each polling the
// store's head row; they take no -chain, -follow, -safe, -finalized or
// -chainid. The URL's search_path parameter, when it names one schema,
// is the schema of the store's tables (the writer makes it). The server
// names a PostgreSQL store by its scheme, host and database, and masks
// the URL's password in the errors it reports; PGPASSWORD or a .pgpass
// file keeps the password out of the process list too.
//
// The listeners are bound and served before the chain is loaded or
// imported: a port in use stops the server at once. Until the chain is
// ready, /healthz answers ok, /readyz 503, and -addr 503 with Retry-After
// and a JSON-RPC error saying the chain loads, logged (loading=true) and
// counted in the metrics as any request.
//
// For a dump, safe and finalized default to its head (into a store whose
// head it leaves as it was, the store's tags stay), and the log says what
// the dump misses: blocks absent from the canonical chain, lines repeating
// a block, lines out of order. On SIGINT or SIGTERM the server stops
// accepting, lets the requests in flight finish within the grace, cuts the
// rest, logs how many it cut and exits with status 0; a signal during the
// load of a dump ends the load and the run (what an import wrote into a
// persistent store stays). The admin listener shuts down with the same
// grace. Then the follower of -follow stops, or the backend of -upstream
// closes, and last the store of -store closes. A second signal ends the
// process at once, with status 1.
//
// With -upstream the server reads through package backend/upstream: blocks
// are verified (hashes, roots, sizes, senders, the chain id) and cached by
// hash; an endpoint that fails, lags or serves a block that does not
// verify is skipped for a while and the next one is asked. totalDifficulty
// is the endpoint's when it is consistent, the frozen value of a chain
// whose total difficulty stopped at the merge, and null otherwise.
//
// With -follow a Follower of that package copies the chain into the store,
// verifying every block, and then follows the endpoint's head, its
// reorganisations, safe, finalized and pending blocks; totalDifficulty is
// summed from the genesis. The server answers from the start, with what
// has been copied so far, and the follower logs its progress (height, the
// endpoint's head, the lag and blocks a second) every 10 seconds while it
// copies, and when it catches up; with -admin, /metrics gives the same
// (blockrpc_follower_*), which /readyz does not: a follower that cannot go
// on leaves the server serving, and ready, what it holds. A failure the follower cannot mend (the
// endpoint serves another chain) stops the server, which then exits with
// status 1. The logs name an endpoint by its scheme and host only: a
// provider's URL often holds its API key.
//
// The rate limit is this process's: behind a load balancer, each server
// process counts on its own. With -keystore, a key's own limit, set on the
// dashboard, replaces -rate and -burst for that key; keys without one get
// -rate, or no limit without it.
//
// The dashboard, at / of the admin listener, signs in with the admin token
// and shows every key with its usage (requests, error answers, answer
// bytes, last use, and requests by minute over the last day); it makes
// keys (each shown once, never again: the store keeps its SHA-256), renames
// them, changes their limits and revokes them. Scripts use its JSON API
// with the token as a bearer token: POST and GET /api/keys, and GET, PATCH
// and DELETE /api/keys/{id}. Every change is logged with the key's id, what
// changed and who changed it (the token, or a session's id), never a key.
// Usage is counted in memory and written to the store every 10 seconds,
// and when a server stops.
//
// The access log logs a request as the handler saw it, and names no API
// key: a route shape ("rpc", or "other" for a path not ending in
// /v3/<key>), for an accepted key its id (the first 4 bytes of the key's
// SHA-256 in hex), the JSON-RPC method of a single call ("other" for a
// method the server does not serve) or "batch of N", the status, the bytes
// written and, for an answer the client did not get whole, cut=true:
//
//	level=INFO msg=request method=POST route=rpc key_id=770e6076 rpc=eth_blockNumber status=200 bytes=41 duration=212µs remote=127.0.0.1:50312
//	level=INFO msg=request method=POST route=rpc key_id=770e6076 rpc="batch of 3" status=200 bytes=128 duration=350µs remote=127.0.0.1:50314
//	level=INFO msg=request method=POST route=rpc key_id=770e6076 rpc="batch of 1000" status=200 bytes=2621440 cut=true duration=501ms remote=127.0.0.1:50316
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/blockrpc/blockrpc"
	blockrpcprom "github.com/blockrpc/blockrpc/adapters/prometheus"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pebblestore"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/keystore"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, func() { exitOnSignal(stop) })
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// The usage asked for, printed: as the flag package's own
		// ExitOnError, not a failure.
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

// exitOnSignal ends the process at the next SIGINT or SIGTERM, once the
// first has begun the shutdown: an operator who sends a second will not
// wait out the grace, or a store's close. The stores are crash-safe.
func exitOnSignal(stop context.CancelFunc) {
	stop()
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-again
		// Whatever a log or a stderr that no one reads holds up, the
		// process ends.
		time.AfterFunc(2*time.Second, func() { os.Exit(1) })
		// The log's lines buffered so far come first, and then why it
		// ends.
		flushOpenLogs(time.Second)
		fmt.Fprintf(os.Stderr, "server: a second signal (%v): stopping at once, cutting what is in flight\n", sig)
		os.Exit(1)
	}()
}

type options struct {
	addr, chain     string
	keys            []string // nil for a generated key
	safe, finalized int64
	chainID         uint64
	grace           time.Duration
	logLevel        slog.Level
	logSample       uint64
	readTimeout     time.Duration
	writeTimeout    time.Duration
	rate            float64 // calls a second per key; 0: no limit
	burst           int
	cache           int64
	admin           string        // "" for no admin listener
	tlsCert, tlsKey string        // both "" for plain HTTP
	upstream        []string      // -upstream's endpoints, in order of preference
	follow          string        // -follow's endpoint
	poll            time.Duration // 0: the upstream package's default
	store           storeSpec     // -store: memory, or a persistent store
	storeCache      int64         // -store-cache: 0 for the store's default
	storeCompress   bool          // -store-compress: a Pebble store's new files compressed
	readOnly        bool          // -read-only: serve a PostgreSQL store another server writes
	keystore        keystoreSpec  // -keystore: keys kept as data, managed on the dashboard
	adminToken      string        // the dashboard's; "" for one generated on a loopback listener
	keyRefresh      time.Duration // how often the key store is read again
	keyStale        time.Duration // how long known keys are served while it cannot be
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var (
		o                      options
		keys, level, upstreams string
		store, keyStore        string
		adminTokenValue        string
		sample                 int
	)
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	// The flag package quotes a value it refuses, which may be a
	// postgres:// URL given where it does not belong (-read-only URL).
	fs.SetOutput(secretMasker{stderr})
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8545", "`HOST:PORT` to listen on")
	fs.StringVar(&o.chain, "chain", "", "JSONL dump `FILE` to serve instead of the demo chain (with -store, imported into the store)")
	fs.StringVar(&keys, "keys", "", "comma-separated API `keys` to accept (default: $BLOCKRPC_KEYS, else one generated key)")
	fs.Int64Var(&o.safe, "safe", -1, "block `N` for the \"safe\" tag; -1 leaves it to the chain: a dump's head, the demo chain's or the store's own")
	fs.Int64Var(&o.finalized, "finalized", -1, "block `N` for the \"finalized\" tag; -1 leaves it to the chain: a dump's head, the demo chain's or the store's own")
	fs.Uint64Var(&o.chainID, "chainid", 0, "chain id `N` for eth_chainId (default: the one the transactions are signed for)")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "how long requests in flight may take to finish on SIGINT or SIGTERM before they are cut")
	fs.StringVar(&level, "log-level", "info", "the least `level` logged: debug, info, warn or error (request lines are at info)")
	fs.IntVar(&sample, "log-sample", 1, "log one request line in `N`; server errors (5xx, but for the 503s of a chain still loading) and panics are always logged")
	fs.DurationVar(&o.readTimeout, "read-timeout", 30*time.Second, "how long a client may take to send a request, body included; a body cut short by it is answered 408")
	fs.DurationVar(&o.writeTimeout, "write-timeout", 60*time.Second, "how long a request may take, from the end of its headers to the last byte of its answer; an answer not out by then is cut")
	fs.Float64Var(&o.rate, "rate", 0, "calls a second allowed to each API key, on average (`N`); 0: no limit")
	fs.IntVar(&o.burst, "burst", 0, "calls an API key may make at once (`M`; default: -rate, rounded up)")
	fs.Int64Var(&o.cache, "cache", blockrpc.DefaultAnswerCache, "the size of the answer cache in `BYTES`; 0 turns it off")
	fs.StringVar(&o.admin, "admin", "", "`HOST:PORT` to serve /metrics, /healthz and /readyz on, over plain HTTP (default: none; with -keystore, 127.0.0.1:8546, where the dashboard of keys is served too)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "certificate `FILE` (PEM, chain included) to serve HTTPS with; needs -tls-key")
	fs.StringVar(&o.tlsKey, "tls-key", "", "private key `FILE` (PEM) of -tls-cert")
	fs.StringVar(&upstreams, "upstream", "", "serve the chain of these JSON-RPC endpoints (comma-separated `URLs`, the first preferred, the next ones its failover), verifying every block")
	fs.StringVar(&o.follow, "follow", "", "copy the chain of the JSON-RPC endpoint at `URL` into the store from its genesis (or after the store's latest block, when it holds some), keep it current, and serve it, answering while it copies")
	fs.DurationVar(&o.poll, "poll", 0, "how often -upstream or -follow asks the endpoints for their head (default 2s), or -read-only the store for its head row (default 500ms)")
	fs.StringVar(&store, "store", "memory", "the `STORE` that keeps the chain: memory (this process), pebble:DIR (a Pebble store on local disk), or a postgres:// URL (a PostgreSQL store, one writer and any number of -read-only servers)")
	fs.Int64Var(&o.storeCache, "store-cache", 0, fmt.Sprintf("the size in `BYTES` of the -store's cache of blocks: Pebble's block cache (default %d MiB; a few GiB for mainnet), or the blocks a postgres:// store keeps in this process (default %d MiB; -1 turns it off)", pebblestore.DefaultCacheBytes>>20, pgstore.DefaultCacheBytes>>20))
	fs.BoolVar(&o.storeCompress, "store-compress", false, "write a pebble: -store's blocks compressed: about 0.8 of the disk, for slower reads of blocks not in its cache")
	fs.BoolVar(&o.readOnly, "read-only", false, "with a postgres:// -store: serve the store that another server writes, reading only")
	fs.StringVar(&keyStore, "keystore", "", "keep API keys in `STORE`, managed on the dashboard of -admin: memory, file:PATH, or a postgres:// URL (default: none, -keys)")
	fs.DurationVar(&o.keyRefresh, "key-refresh", keystore.DefaultRefresh, "how often the servers read the -keystore again: how long a revocation or a new limit takes to apply everywhere")
	fs.DurationVar(&o.keyStale, "key-stale", keystore.DefaultStale, "how long the keys last read are served while the -keystore cannot be read; past it, requests get 503")
	fs.StringVar(&adminTokenValue, "admin-token", "", "the `TOKEN` that signs in to the dashboard (default: $BLOCKRPC_ADMIN_TOKEN, else one generated for a loopback -admin)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errors.New(maskSecrets(err.Error()))
	}
	if fs.NArg() > 0 {
		return o, errors.New(maskSecrets(fmt.Sprintf("unexpected arguments: %q", fs.Args())))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// An empty value is what -chain "$DUMP" gives with DUMP unset: taken
	// for the flag left out, it would serve the demo chain (and import it
	// into -store), or ignore $BLOCKRPC_KEYS for a generated key.
	for _, name := range []string{"addr", "chain", "keys", "store", "keystore", "admin", "admin-token", "tls-cert", "tls-key"} {
		if set[name] && strings.TrimSpace(fs.Lookup(name).Value.String()) == "" {
			return o, fmt.Errorf("-%s is empty: give it a value, or leave it out", name)
		}
	}
	keysFromFlag, burstSet := set["keys"], set["burst"]
	var err error
	if o.store, err = parseStore(store); err != nil {
		return o, err
	}
	if set["upstream"] {
		if o.upstream, err = parseEndpoints("-upstream", upstreams); err != nil {
			return o, err
		}
	}
	if set["follow"] {
		urls, err := parseEndpoints("-follow", o.follow)
		switch {
		case err != nil:
			return o, err
		case len(urls) != 1:
			return o, fmt.Errorf("-follow: want one http or https URL, got %d", len(urls))
		}
		o.follow = urls[0] // trimmed, as each of -upstream's
	}
	if err := o.checkSource(set); err != nil {
		return o, err
	}
	if err := o.checkKeystore(set, keyStore, adminTokenValue); err != nil {
		return o, err
	}
	switch {
	case o.keystore.kind != "":
		// The keys are the store's.
	case keysFromFlag:
		o.keys, err = parseKeys("-keys", keys)
	default:
		o.keys, err = parseKeys("BLOCKRPC_KEYS", os.Getenv("BLOCKRPC_KEYS"))
	}
	if err != nil {
		return o, err
	}
	if o.grace < 0 {
		return o, fmt.Errorf("-grace %v: must not be negative", o.grace)
	}
	for name, n := range map[string]int64{"safe": o.safe, "finalized": o.finalized} {
		if n < -1 {
			return o, fmt.Errorf("-%s %d: want a block number, or -1 for the chain's own", name, n)
		}
	}
	if err := o.logLevel.UnmarshalText([]byte(level)); err != nil || !knownLevel(level) {
		return o, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	// Without them, any slow client holds a connection and its memory.
	if o.readTimeout <= 0 {
		return o, fmt.Errorf("-read-timeout %v: must be positive", o.readTimeout)
	}
	if o.writeTimeout <= 0 {
		return o, fmt.Errorf("-write-timeout %v: must be positive", o.writeTimeout)
	}
	if sample < 1 {
		return o, fmt.Errorf("-log-sample %d: must be 1 or more", sample)
	}
	o.logSample = uint64(sample)
	if err := o.checkLimits(burstSet); err != nil {
		return o, err
	}
	if o.cache < 0 {
		return o, fmt.Errorf("-cache %d: must not be negative (0 turns the cache off)", o.cache)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return o, errors.New("-tls-cert and -tls-key go together: give both to serve HTTPS, or neither")
	}
	return o, nil
}

// checkKeystore checks -keystore and -admin-token, and gives -admin its
// default when there is a key store to manage.
func (o *options) checkKeystore(set map[string]bool, keyStore, token string) error {
	var err error
	if o.keystore, err = parseKeystore(keyStore); err != nil {
		return err
	}
	if o.keyRefresh <= 0 {
		return fmt.Errorf("-key-refresh %v: must be positive", o.keyRefresh)
	}
	if o.keyStale <= o.keyRefresh {
		return fmt.Errorf("-key-stale %v: must be longer than -key-refresh %v, or every refresh would be late", o.keyStale, o.keyRefresh)
	}
	if o.keystore.kind == "" {
		if set["admin-token"] {
			return errors.New("-admin-token needs -keystore: the token signs in to the dashboard of keys")
		}
		return nil
	}
	switch {
	case set["keys"]:
		return errors.New("-keys and -keystore: give one; with -keystore, keys are made on the dashboard")
	case os.Getenv("BLOCKRPC_KEYS") != "":
		return errors.New("BLOCKRPC_KEYS and -keystore: give one; with -keystore, keys are made on the dashboard")
	}
	if o.admin == "" {
		o.admin = defaultAdminAddr
	}
	o.adminToken, err = adminToken(token, set["admin-token"], o.admin)
	return err
}

// checkLimits checks -rate and -burst, and gives -burst its default.
func (o *options) checkLimits(burstSet bool) error {
	switch {
	case math.IsNaN(o.rate) || math.IsInf(o.rate, 0) || o.rate < 0:
		return fmt.Errorf("-rate %v: want a number of calls a second, 0 for no limit", o.rate)
	case o.rate == 0 && burstSet:
		return errors.New("-burst needs -rate: without a rate nothing is limited")
	case o.rate == 0:
		return nil
	case burstSet && o.burst < 1:
		// A burst of 0 would refuse every call of every key.
		return fmt.Errorf("-burst %d: must be 1 or more", o.burst)
	case !burstSet:
		// A second's worth at once, and at least one call, or a rate
		// below 1 would never let a call through.
		o.burst = int(max(1, min(math.Ceil(o.rate), math.MaxInt32)))
	}
	return nil
}

// knownLevel keeps to the four names the flag documents: slog also takes
// offsets such as "info+2", which would only puzzle a reader of the command.
func knownLevel(s string) bool {
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
		return true
	}
	return false
}

// parseKeys splits a comma-separated list of keys, trimming the spaces a
// list written by hand has around its commas. A key that is empty or has
// whitespace or a control character inside could never be sent as the last
// path segment, and neither could one with a slash: each is refused by its
// position, since an error message may end up where the key must not.
func parseKeys(source, list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	parts := strings.Split(list, ",")
	keys := make([]string, 0, len(parts))
	for i, k := range parts {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
			return nil, fmt.Errorf("%s: key %d of %d is empty", source, i+1, len(parts))
		case strings.IndexFunc(k, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			return nil, fmt.Errorf("%s: key %d of %d has whitespace or a control character inside", source, i+1, len(parts))
		case !utf8.ValidString(k):
			return nil, fmt.Errorf("%s: key %d of %d is not valid UTF-8", source, i+1, len(parts))
		case strings.Contains(k, "/"):
			return nil, fmt.Errorf("%s: key %d of %d has a slash, which no request path can carry in a key", source, i+1, len(parts))
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// run serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runWith(ctx, args, stdout, stderr, nil)
}

// runWith is run serving the chain through wrap, when not nil: how the
// tests put a failing backend behind the server.
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, wrap func(backend.Backend) backend.Backend) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logOut, flushLog := bufferLog(stderr)
	defer flushLog()
	log := slog.New(flushOnError{slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: o.logLevel}), logOut})

	// A certificate that does not load is found now, not at the first
	// client's handshake.
	var tlsConfig *tls.Config
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return fmt.Errorf("-tls-cert, -tls-key: %w", err)
		}
		// Go's cipher suites and curves are the sane ones already; older
		// protocol versions are what must be kept out.
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}

	ls, err := listen(o)
	if err != nil {
		return err
	}
	var dash *dashboard
	if o.keystore.kind != "" {
		closeKeys, err := openKeys(ctx, log, o, &dash)
		if err != nil {
			ls.close()
			if ctx.Err() != nil {
				log.Warn("stopped: interrupted while the key store was opened", "keystore", o.keystore.name)
				return nil
			}
			return err
		}
		// After the listeners: the last usage counted is flushed.
		defer closeKeys()
	}
	var metrics *blockrpcprom.Metrics
	var registry *prometheus.Registry
	if o.admin != "" {
		// A registry of its own: the Go runtime's and the process's
		// metrics beside the handler's, and the follower's once it is
		// made.
		registry = prometheus.NewRegistry()
		registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		if metrics, err = blockrpcprom.New(registry); err != nil {
			ls.close()
			return err
		}
	}
	// The access log, the count of requests in flight and the metrics
	// take in the answers given while the chain loads.
	access := newAccessLog(log, o.logSample, &ls.front)
	ls.front.observe = observeLoading
	if metrics != nil {
		counted := metrics.Observer().Request
		ls.front.observe = func(ctx context.Context, r blockrpc.RequestInfo) {
			observeLoading(ctx, r)
			counted(ctx, r)
		}
	}
	ls.serve(log, o, tlsConfig, access, metrics, dash)
	if ls.admin != nil {
		fmt.Fprintf(stdout, "Metrics and health: http://%[1]s/metrics http://%[1]s/healthz http://%[1]s/readyz\n", ls.admin.Addr())
		if dash != nil {
			printDashboard(stdout, ls.admin.Addr().String(), dash.generatedToken)
		}
	}

	src, err := openSource(ctx, log, o)
	if errors.Is(err, errInterrupted) {
		ls.stop()
		switch {
		case len(o.upstream) > 0:
			log.Warn("stopped: interrupted while the endpoints were asked for the chain")
		case o.store.kind != storeMemory:
			log.Warn("stopped: interrupted while the store was opened or the chain loaded into it; the blocks written stay, and importing the same dump again skips them",
				append([]any{"chain", o.chain}, o.store.attrs()...)...)
		default:
			log.Warn("stopped: the chain load was interrupted before it ended", "chain", o.chain)
		}
		return nil
	}
	if err != nil {
		ls.stop()
		return err
	}
	// Once the listeners are shut down: what they serve stops last.
	defer src.close()
	if registry != nil && src.follower != nil {
		registry.MustRegister(followerMetrics{src.follower})
	}
	var validator blockrpc.KeyValidator
	keys, generated := o.keys, false
	if dash != nil {
		validator = dash.keys
	} else {
		if keys == nil {
			keys, generated = []string{randomHex(16)}, true
		}
		validator = blockrpc.NewKeySet(keys...)
	}
	served := src.backend
	if wrap != nil {
		served = wrap(served)
	}
	svc := blockrpc.NewService(served)

	opts := []blockrpc.Option{
		blockrpc.WithKeys(validator),
		blockrpc.WithLogger(log),
		blockrpc.WithGzip(),
		blockrpc.WithObserver(accessObserver),
		blockrpc.WithAnswerCache(o.cache),
	}
	// Each observer is told in turn: the access log, the metrics, the
	// keys' usage.
	if metrics != nil {
		opts = append(opts, blockrpc.WithObserver(metrics.Observer()))
	}
	if dash != nil {
		opts = append(opts, blockrpc.WithObserver(dash.keys.Observer()))
	}
	switch {
	case o.rate > 0:
		opts = append(opts, blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: o.rate, Burst: o.burst}))
	case dash != nil:
		// Keys of the store may have limits of their own; the others
		// are not limited.
		opts = append(opts, blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: math.Inf(1)}))
	}
	ls.open(blockrpc.NewHandler(svc, opts...), svc)

	url := "http://" + ls.rpc.Addr().String() + "/v3/"
	if tlsConfig != nil {
		url = "https://" + printedHost(ls.rpc.Addr(), tlsConfig.Certificates[0]) + "/v3/"
	}
	shown := "<API_KEY>" // a key the operator chose stays off the screen and out of logs
	if generated {
		shown = keys[0]
	}
	printUsage(ctx, stdout, src, url, shown, generated)
	attrs := append([]any{"addr", ls.rpc.Addr().String()}, src.attrs(o)...)
	attrs = append(attrs, "tls", tlsConfig != nil)
	if ls.admin != nil {
		attrs = append(attrs, "admin", ls.admin.Addr().String())
	}
	log.Info("serving", attrs...)
	switch {
	case src.follower != nil && src.resumeAt != nil:
		log.Info("following: the store holds blocks already: the copy resumes after its latest, and is served as it comes",
			append([]any{"endpoint", endpointName(o.follow), "height", *src.resumeAt}, o.store.attrs()...)...)
	case src.follower != nil && src.persistent:
		log.Info("following: the chain is copied from the genesis up, and served as it comes", append([]any{"endpoint", endpointName(o.follow)}, o.store.attrs()...)...)
	case src.follower != nil:
		log.Info("following: the chain is copied from the genesis up, and served as it comes", "endpoint", endpointName(o.follow))
	}
	src.startFollowing()

	var failed error
	select {
	case err := <-ls.errc:
		for _, s := range ls.servers {
			s.Close()
		}
		return err
	case <-ctx.Done():
	case failed = <-src.failed:
		// Serving on would serve a chain that no longer follows its
		// network: stop, and let whatever runs the server restart it.
		log.Error("the follower stopped: shutting down", "err", failed)
		failed = fmt.Errorf("-follow: %w", failed)
	}
	log.Info("shutting down", "in_flight", access.inFlight.Load(), "grace", o.grace)
	cut, err := shutdown(ls.servers, access, o.grace)
	if err != nil {
		return err
	}
	for range ls.servers {
		if err := <-ls.errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	if cut > 0 {
		log.Warn("stopped: cut the requests still in flight when the grace ended", "cut", cut, "grace", o.grace)
	} else {
		log.Info("stopped", "cut", 0)
	}
	return failed
}

// shutdown stops every server accepting and lets the requests in flight
// finish within grace, then closes every connection: a client reading
// slowly on purpose must not hold the process past what the operator
// allowed. It returns how many JSON-RPC requests were still in flight when
// their connections were closed.
func shutdown(servers []*http.Server, access *accessLog, grace time.Duration) (cut int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	done := make(chan error, len(servers))
	for _, s := range servers {
		go func() { done <- s.Shutdown(ctx) }()
	}
	timedOut := false
	for range servers {
		switch e := <-done; {
		case errors.Is(e, context.DeadlineExceeded):
			timedOut = true
		case e != nil && err == nil:
			err = e
		}
	}
	if err != nil || !timedOut {
		return 0, err
	}
	cut = access.inFlight.Load()
	for _, s := range servers {
		if e := s.Close(); e != nil && err == nil {
			err = e
		}
	}
	return cut, err
}

// errInterrupted ends a load that the run's context cut short.
var errInterrupted = errors.New("the chain load was interrupted")

// loadChainUntil loads the chain, returning errInterrupted as soon as ctx is
// done. Reading a dump stops at its next read, but a read may block for
// long (a dump on a pipe or a slow mount), so the run does not wait for it.
func loadChainUntil(ctx context.Context, log *slog.Logger, o options) (*memstore.Store, error) {
	if o.chain != "" {
		log.Info("loading", "chain", o.chain)
	}
	type loaded struct {
		store *memstore.Store
		err   error
	}
	done := make(chan loaded, 1)
	go func() {
		store, err := loadChain(ctx, log, o)
		done <- loaded{store, err}
	}()
	select {
	case l := <-done:
		if l.err != nil && ctx.Err() != nil {
			return nil, errInterrupted
		}
		// Decoding a dump makes about as much garbage as the chain it
		// leaves; giving it back now keeps the process's resident
		// memory near what the chain holds, rather than twice that.
		debug.FreeOSMemory()
		return l.store, l.err
	case <-ctx.Done():
		return nil, errInterrupted
	}
}

// loadChain returns the chain to serve with its tags set; reading a dump
// stops with ctx's error once ctx is done. What a dump misses is logged: a
// hole in it loads, but leaves the blocks above it without a total
// difficulty, which the operator should know of.
func loadChain(ctx context.Context, log *slog.Logger, o options) (*memstore.Store, error) {
	var store *memstore.Store
	safe, finalized := o.safe, o.finalized
	if o.chain != "" {
		f, err := os.Open(o.chain)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		// A long load logs its progress as an import into a store does,
		// a dump's line for a block (the reader's lines, a buffer ahead
		// of the blocks taken).
		p := newImportProgress(log, o.store, o.chain, fileSize(f))
		stop := p.every(importProgressInterval)
		loader := memstore.Loader{Logger: log}
		store, err = loader.Load(countingReader{r: ctxReader{ctx, f}, n: &p.read, lines: &p.blocks})
		stop()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.chain, err)
		}
		head, err := store.BlockByNumber(context.Background(), backend.Latest)
		if err != nil {
			return nil, fmt.Errorf("%s: no blocks", o.chain)
		}
		safe, finalized = orDefault(safe, int64(head.Number)), orDefault(finalized, int64(head.Number))
	} else {
		// The demo chain (memstore/demo): blocks under Berlin rules with
		// uncles, London, the merge, Shanghai withdrawals, Cancun blob
		// transactions and Prague set-code transactions, generated with
		// go-ethereum, and the block pending on top of it.
		var err error
		if store, err = demo.Store(); err != nil {
			return nil, err
		}
		safe, finalized = orDefault(safe, demo.Safe), orDefault(finalized, demo.Finalized)
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

// ctxReader ends a read with ctx's error once ctx is done, which is how
// the loader, taking only a reader, learns that it should stop.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func orDefault(v, def int64) int64 {
	if v >= 0 {
		return v
	}
	return max(def, 0)
}

// printUsage prints the endpoint and curl lines that query the latest block
// and, for a chain in memory whole, the newest uncle. The one blank line
// after the endpoint's and at the end frame the curl lines, so that a
// reader of the output knows where they end.
func printUsage(ctx context.Context, w io.Writer, src *source, url, key string, generated bool) {
	if generated {
		fmt.Fprintf(w, "API key (generated for this run): %s\n", key)
	}
	fmt.Fprintf(w, "JSON-RPC endpoint: %s%s\n\n", url, key)
	fmt.Fprintf(w, "The latest block:\n%s\n", curlLine(url+key, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}`))
	if b, ok := newestWithUncles(ctx, src); ok {
		fmt.Fprintf(w, "The uncle of block %d:\n%s\n", b.Number,
			curlLine(url+key, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"eth_getUncleByBlockHashAndIndex","params":["%s","0x0"]}`, b.Hash)))
	}
	fmt.Fprintln(w)
}

func curlLine(url, body string) string {
	return fmt.Sprintf("curl -s -H 'Content-Type: application/json' --data '%s' %s", body, url)
}

// newestWithUncles finds the highest canonical block that has uncles, in a
// chain the server holds, at most src.uncleDepth blocks below its head.
func newestWithUncles(ctx context.Context, src *source) (*backend.Block, bool) {
	if src.uncleDepth == 0 {
		return nil, false
	}
	store := src.store
	head, err := store.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		return nil, false
	}
	low, err := store.BlockByNumber(ctx, backend.Earliest)
	if err != nil {
		return nil, false
	}
	bottom := low.Number
	if head.Number-bottom > src.uncleDepth {
		bottom = head.Number - src.uncleDepth
	}
	for n := int64(head.Number); n >= int64(bottom) && ctx.Err() == nil; n-- {
		b, err := store.BlockByNumber(ctx, backend.BlockNumber(n))
		if err == nil && len(b.Uncles) > 0 {
			return b, true
		}
	}
	return nil, false
}

// printedHost is the host of the URL printed for a TLS listener: the
// certificate's name, which a client checks it against, where it names
// the server by a DNS name and not by the listener's address (a
// certificate a public CA signed); the address otherwise.
func printedHost(addr net.Addr, cert tls.Certificate) string {
	host, port, err := net.SplitHostPort(addr.String())
	leaf, perr := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || perr != nil || len(leaf.DNSNames) == 0 || strings.Contains(leaf.DNSNames[0], "*") {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && leaf.VerifyHostname(host) == nil {
		return addr.String()
	}
	return net.JoinHostPort(leaf.DNSNames[0], port)
}
