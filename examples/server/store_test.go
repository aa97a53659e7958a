package main

// -store: the chain in a Pebble store on local disk or in PostgreSQL (a
// server the tests start on loopback, through pgstore's pgtest), imported
// from a dump, followed from a node, or served as the store holds it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pebblestore"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/blockrpctest"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/jackc/pgx/v5"
)

// TestMain starts the PostgreSQL server of the -store postgres:// tests
// (or uses the one BLOCKRPC_PG_URL names), and stops it at the end.
// Without PostgreSQL's programs those tests skip, unless
// BLOCKRPC_PG_REQUIRED is set.
func TestMain(m *testing.M) {
	os.Exit(pgtest.Main(m))
}

// TestStoreFlags checks what -store and -read-only accept, and that every
// refusal says what is wrong without showing a password.
func TestStoreFlags(t *testing.T) {
	const secret = "s3cr3t-db-password"
	for _, tc := range []struct {
		args           []string
		kind           storeKind
		name, schema   string
		readOnly       bool
		dir            string
		maskedInErrors bool
	}{
		{args: nil, kind: storeMemory, name: "memory"},
		{args: []string{"-store", "memory", "-chain", "chain.jsonl"}, kind: storeMemory, name: "memory"},
		{args: []string{"-store", "pebble:data/chain", "-chain", "chain.jsonl"}, kind: storePebble, name: "pebble:data/chain", dir: "data/chain"},
		{args: []string{"-store", "pebble:db", "-follow", "http://127.0.0.1:8545"}, kind: storePebble, name: "pebble:db", dir: "db"},
		{args: []string{"-store", "postgres://blockrpc:" + secret + "@db.example:5433/chain?sslmode=require"}, kind: storePostgres, name: "postgres://db.example:5433/chain"},
		{args: []string{"-store", "postgresql://db.example/chain?search_path=mainnet&password=" + secret, "-read-only", "-poll", "100ms"},
			kind: storePostgres, name: "postgresql://db.example/chain", schema: "mainnet", readOnly: true},
	} {
		o, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if o.store.kind != tc.kind || o.store.name != tc.name || o.store.schema != tc.schema || o.store.dir != tc.dir || o.readOnly != tc.readOnly {
			t.Errorf("%q: store %+v, read-only %v; want kind %d, name %q, schema %q, dir %q, read-only %v", tc.args, o.store, o.readOnly, tc.kind, tc.name, tc.schema, tc.dir, tc.readOnly)
		}
		if strings.Contains(o.store.name, secret) || strings.Contains(fmt.Sprint(o.store.attrs()), secret) {
			t.Errorf("%q: the store's name shows the password: %q", tc.args, o.store.name)
		}
		if o.store.kind == storePostgres {
			masked := o.store.redact(fmt.Errorf("cannot connect to %s as %s", o.store.url, secret))
			if strings.Contains(masked.Error(), secret) || !strings.Contains(masked.Error(), o.store.name) {
				t.Errorf("%q: an error is masked as %q", tc.args, masked)
			}
		}
	}

	for _, args := range [][]string{
		{"-store", "pebble:db", "-store-cache", "4294967296"},
		{"-store", "postgres://db.example/chain", "-store-cache", "-1"},
		{"-store", "postgres://db.example/chain", "-read-only", "-store-cache", "4294967296"},
	} {
		o, err := parseFlags(args, io.Discard)
		if want, _ := strconv.ParseInt(args[len(args)-1], 10, 64); err != nil || o.storeCache != want {
			t.Errorf("%q: -store-cache %d (%v), want %d", args, o.storeCache, err, want)
		}
	}

	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"-store", "pebble:db"}, false},
		{[]string{"-store", "pebble:db", "-store-compress"}, true},
	} {
		o, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got := pebbleOptions(o, slog.Default()).Compress; got != tc.want {
			t.Errorf("%q: the Pebble store opened with Compress %v, want %v", tc.args, got, tc.want)
		}
	}

	pg := "postgres://blockrpc:" + secret + "@db.example/chain"
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"-store", "pebble:"}, "want pebble:DIR"},
		{[]string{"-store", "disk"}, "want memory, pebble:DIR, or a postgres://"},
		{[]string{"-store", "mysql://root:" + secret + "@db.example/chain"}, "want memory, pebble:DIR, or a postgres://"},
		{[]string{"-store", "postgres://blockrpc:" + secret + "@db.example:port/chain"}, "the postgres:// URL is"},
		{[]string{"-store", "postgresql://blockrpc:" + secret + "@[::1/chain"}, "the postgresql:// URL is"},
		{[]string{"-keystore", "postgres://blockrpc:" + secret + "@db.example:port/chain"}, "-keystore: the postgres:// URL is"},
		{[]string{"-store", pg, "-upstream", "http://a.example"}, "-store does not apply to -upstream"},
		{[]string{"-store", "pebble:db", "-upstream", "http://a.example"}, "-store does not apply to -upstream"},
		{[]string{"-read-only"}, "-read-only needs a PostgreSQL store"},
		{[]string{"-read-only", "-store", "pebble:db"}, "-read-only needs a PostgreSQL store"},
		{[]string{"-read-only", "-store", pg, "-chain", "chain.jsonl"}, "-chain and -follow write"},
		{[]string{"-read-only", "-store", pg, "-follow", "http://a.example"}, "-chain and -follow write"},
		{[]string{"-read-only", "-store", pg, "-safe", "3"}, "-safe is written into the store"},
		{[]string{"-read-only", "-store", pg, "-chainid", "5"}, "-chainid is written into the store"},
		{[]string{"-store", pg, "-poll", "1s"}, "-poll needs -upstream, -follow or -read-only"},
		{[]string{"-store-cache", "1048576"}, "-store-cache applies to a pebble: or postgres:// -store"},
		{[]string{"-store", "pebble:db", "-store-cache", "-1"}, "a Pebble store needs a cache"},
		{[]string{"-store-compress"}, "-store-compress applies to a pebble: -store"},
		{[]string{"-store", "postgres://db.example/chain", "-store-compress"}, "-store-compress applies to a pebble: -store"},
		{[]string{"-store", pg, "-follow", "http://a.example", "-safe", "3"}, "-safe applies to a dump"},
		// -read-only taken for a flag with a value: the flag package
		// quotes what it did not take.
		{[]string{"-read-only", pg}, "unexpected arguments"},
		{[]string{"-read-only=" + pg}, "invalid boolean value"},
		{[]string{"-store", pg, "-read-only", "host=db.example user=blockrpc password=" + secret}, "unexpected arguments"},
	} {
		var out bytes.Buffer
		_, err := parseFlags(tc.args, &out)
		switch {
		case err == nil:
			t.Errorf("%q: accepted, want an error", tc.args)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("%q: %v, want an error saying %q", tc.args, err, tc.want)
		case strings.Contains(err.Error(), secret):
			t.Errorf("%q: the error shows the password: %v", tc.args, err)
		case strings.Contains(out.String(), secret):
			t.Errorf("%q: the flags' usage shows the password: %s", tc.args, out.String())
		}
	}
}

// TestImportProgressLine checks the progress line of a long import: the
// blocks, the rates since the previous line, the share of the dump read
// and the time left at the rate so far.
func TestImportProgressLine(t *testing.T) {
	var buf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	p := newImportProgress(log, storeSpec{kind: storePebble, name: "pebble:db"}, "chain.jsonl", 100e6)
	t0 := time.Now()
	p.start, p.lastAt = t0, t0
	p.read.Store(25e6)
	p.blocks.Store(1000)
	p.report(t0.Add(5 * time.Second))
	p.read.Store(50e6)
	p.blocks.Store(1500)
	p.report(t0.Add(10 * time.Second))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for i, want := range []string{
		`msg="store: importing" blocks=1000 blocks_per_s=200 mb_per_s=5 done=25.0% eta=15s chain=chain.jsonl store=pebble:db`,
		`msg="store: importing" blocks=1500 blocks_per_s=100 mb_per_s=5 done=50.0% eta=10s chain=chain.jsonl store=pebble:db`,
	} {
		if i >= len(lines) || !strings.HasSuffix(lines[i], want) {
			t.Errorf("progress line %d:\n got %s\nwant …%s", i, buf.String(), want)
		}
	}

	// Logged on its own while the import runs, and no more once stopped.
	buf = syncbuf.Buffer{}
	p = newImportProgress(log, storeSpec{kind: storePebble, name: "pebble:db"}, "chain.jsonl", 0)
	stop := p.every(5 * time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	stop()
	logged := buf.String()
	time.Sleep(20 * time.Millisecond)
	if !strings.Contains(logged, `msg="store: importing"`) || buf.String() != logged {
		t.Errorf("the progress lines logged every 5 ms:\n%s\nthen:\n%s", logged, buf.String())
	}
}

// TestLoadProgressLine loads a dump into memory, the default store, with
// progress lines every millisecond: they say what an import into a
// persistent store says, where a load in memory used to log nothing
// until it ended.
func TestLoadProgressLine(t *testing.T) {
	defer func(d time.Duration) { importProgressInterval = d }(importProgressInterval)
	importProgressInterval = time.Millisecond
	o, err := parseFlags([]string{"-chain", writeDump(t, 2000)}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var buf syncbuf.Buffer
	if _, err := loadChain(context.Background(), slog.New(slog.NewTextHandler(&buf, nil)), o); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`msg="store: importing" blocks=[1-9][0-9]* blocks_per_s=[0-9]+ mb_per_s=[0-9.]+ done=[0-9.]+% eta=\S+ chain=\S+ store=memory`)
	if !line.MatchString(buf.String()) {
		t.Errorf("no progress line while the dump loaded:\n%s", buf.String())
	}
}

// demoDump writes the demo chain's dump (no pending block, no tags) and
// returns its path.
func demoDump(t *testing.T) string {
	t.Helper()
	chain, _ := demo.Dump()
	path := filepath.Join(t.TempDir(), "demo.jsonl")
	if err := os.WriteFile(path, chain, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// otherChainDump writes the dump of another chain of the demo chain's id.
func otherChainDump(t *testing.T) string {
	t.Helper()
	other := chaintest.New(chaintest.Config{Seed: 99, ChainID: demo.ChainID})
	other.AddBlocks(3, chaintest.Txs(1))
	return saveDump(t, other.Store())
}

// otherChainPart writes the dump of blocks from to to of another chain of
// the demo chain's id: one without its genesis.
func otherChainPart(t *testing.T, from, to int) string { return chainPart(t, 99, from, to) }

// chainPart writes the dump of blocks from to to of the chain of the demo
// chain's id that seed makes, without the blocks numbered in holes.
func chainPart(t *testing.T, seed uint64, from, to int, holes ...int) string {
	t.Helper()
	c := chaintest.New(chaintest.Config{Seed: seed, ChainID: demo.ChainID})
	c.AddBlocks(to, chaintest.Txs(1))
	whole, err := os.ReadFile(saveDump(t, c.Store()))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(whole, []byte("\n"))
	var part []byte
	for n := from; n <= to; n++ {
		if !slices.Contains(holes, n) {
			part = append(part, lines[n]...)
		}
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("chain-%d-%d-%d.jsonl", seed, from, to))
	if err := os.WriteFile(path, part, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rpcURL returns the endpoint a run printed, with key k.
func rpcURL(srv *server) string {
	return regexp.MustCompile(`http://\S+/v3/`).FindString(srv.stdout()) + "k"
}

// compareSome compares a few blocks, an uncle, the side block and every
// tag of the demo chain as ours and the reference serve them.
func compareSome(t *testing.T, ours, reference string) {
	t.Helper()
	var calls []string
	for _, n := range []uint64{0, demo.FirstUncleBlock, demo.SideNumber, demo.FirstBlobBlock, demo.Head} {
		calls = append(calls, fmt.Sprintf(`"eth_getBlockByNumber","params":["0x%x",true]`, n))
	}
	for _, tag := range []string{"latest", "earliest", "safe", "finalized", "pending"} {
		calls = append(calls, `"eth_getBlockByNumber","params":["`+tag+`",false]`)
	}
	calls = append(calls,
		fmt.Sprintf(`"eth_getUncleByBlockNumberAndIndex","params":["0x%x","0x0"]`, demo.FirstUncleBlock),
		`"eth_getBlockByHash","params":["`+demo.SideHash.String()+`",true]`,
		`"eth_blockNumber","params":[]`, `"eth_chainId","params":[]`)
	for _, c := range calls {
		body := `{"jsonrpc":"2.0","id":1,"method":` + c + `}`
		_, want := postStatus(t, reference, body)
		_, got := postStatus(t, ours, body)
		if !bytes.Equal(got, want) || bytes.Contains(want, []byte(`"error"`)) {
			t.Errorf("%s:\n reference %.300s\n ours      %.300s", c, want, got)
		}
	}
}

// runFails runs the server with args, which must fail before it serves,
// and returns its log and the error.
func runFails(t *testing.T, args ...string) (log string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr syncbuf.Buffer
	err = run(ctx, append([]string{"-addr", "127.0.0.1:0", "-keys", "k"}, args...), io.Discard, &stderr)
	if err == nil {
		t.Fatalf("run %q served, want an error:\n%s", args, stderr.String())
	}
	return stderr.String(), err
}

// TestStorePebble imports a dump into a Pebble store and serves what the
// memory store serves; started again on the store it serves the chain
// without importing, the same dump imported again changes nothing, a dump
// of another chain is refused.
func TestStorePebble(t *testing.T) {
	dump := demoDump(t)
	dir := filepath.Join(t.TempDir(), "db")
	reference := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-chain", dump)
	ref := rpcURL(reference)

	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir, "-chain", dump)
	compareSome(t, rpcURL(srv), ref)
	// One process at a time opens a Pebble store.
	if _, err := runFails(t, "-store", "pebble:"+dir); !strings.Contains(err.Error(), "-store pebble:"+dir+": ") {
		t.Errorf("a second server on the store: %v, want an error naming the store", err)
	}
	srv.stop(t)
	logs := srv.stderr()
	for _, want := range []string{
		`msg="store: importing" chain=` + dump + ` store=pebble:` + dir + ` bytes=`,
		`msg="store: dump imported" blocks=112 `,
		`msg=serving addr=`, `store=pebble:` + dir + ` head=110`,
		`msg="store: closed" store=pebble:` + dir,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %s:\n%s", want, logs)
		}
	}
	if strings.Index(logs, `msg="store: closed"`) < strings.Index(logs, "msg=stopped") {
		t.Errorf("the store was closed before the listeners stopped:\n%s", logs)
	}

	// Again, without -chain: served as it is, from a smaller cache.
	srv = start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir, "-store-cache", "8388608")
	compareSome(t, rpcURL(srv), ref)
	srv.stop(t)
	if logs := srv.stderr(); !strings.Contains(logs, `msg="store: serving the chain it holds, without importing anything" store=pebble:`+dir+` head=110`) || strings.Contains(logs, "store: importing") {
		t.Errorf("the log does not say that the store is served as it is:\n%s", logs)
	}

	// The same dump again: found stored, nothing changes.
	srv = start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir, "-chain", dump)
	compareSome(t, rpcURL(srv), ref)
	srv.stop(t)

	// Another chain's dump: refused, naming the store.
	other := otherChainDump(t)
	logs, err := runFails(t, "-store", "pebble:"+dir, "-chain", other)
	if !errors.Is(err, pebblestore.ErrOtherChain) || !strings.Contains(err.Error(), other+" is a dump of another chain than the store pebble:"+dir+" holds") {
		t.Errorf("another chain's dump: %v, want ErrOtherChain naming the dump and the store", err)
	}
	if !strings.Contains(logs, `msg="store: closed"`) {
		t.Errorf("the store is not closed after the refusal:\n%s", logs)
	}
	// Nor a part of it without its genesis: at numbers the store holds,
	// or above its latest block, which would leave a gap.
	for _, part := range []string{otherChainPart(t, 2, 6), otherChainPart(t, demo.Head+3, demo.Head+5)} {
		if _, err := runFails(t, "-store", "pebble:"+dir, "-chain", part); !errors.Is(err, pebblestore.ErrOtherChain) {
			t.Errorf("%s: %v, want ErrOtherChain", part, err)
		}
	}
	srv = start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir)
	compareSome(t, rpcURL(srv), ref)
	srv.stop(t)
	reference.stop(t)
}

// TestStorePebbleDumpNextToChain imports dumps into stores that hold
// part of a chain: a dump of another chain of the same chain id is
// refused, and changes nothing, whether its first block lies below the
// store's first block or fills a hole in the store's chain; a dump of the
// store's own chain that fills the hole is taken.
func TestStorePebbleDumpNextToChain(t *testing.T) {
	const ours, theirs = 97, 98
	served := func(dir string, body string) string {
		t.Helper()
		srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir)
		defer srv.stop(t)
		_, got := postStatus(t, rpcURL(srv), body)
		return string(bytes.TrimSpace(got))
	}
	const block3 = `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x3",false]}`
	const latest = `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`
	importInto := func(dir, dump string) {
		t.Helper()
		start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir, "-chain", dump).stop(t)
	}

	// Blocks 2 to 6, without the genesis: another chain's whole dump.
	dir := filepath.Join(t.TempDir(), "part")
	importInto(dir, chainPart(t, ours, 2, 6))
	before := served(dir, block3)
	_, err := runFails(t, "-store", "pebble:"+dir, "-chain", chainPart(t, theirs, 0, 8))
	if !errors.Is(err, pebblestore.ErrOtherChain) || !strings.Contains(err.Error(), "below the store's first block, 2, and not its parent") {
		t.Errorf("another chain's dump from below the store's first block: %v, want ErrOtherChain", err)
	}
	if after := served(dir, block3); after != before {
		t.Errorf("block 3 after another chain's dump was refused:\n %s\nwas\n %s", after, before)
	}

	// Blocks 0 to 6 but 2 and 3: another chain's, then its own.
	dir = filepath.Join(t.TempDir(), "holed")
	importInto(dir, chainPart(t, ours, 0, 6, 2, 3))
	_, err = runFails(t, "-store", "pebble:"+dir, "-chain", chainPart(t, theirs, 2, 3))
	if !errors.Is(err, pebblestore.ErrOtherChain) || !strings.Contains(err.Error(), "is not the child of the store's block 1") {
		t.Errorf("another chain's blocks in the store's hole: %v, want ErrOtherChain", err)
	}
	if got := served(dir, latest); got != `{"jsonrpc":"2.0","id":1,"result":"0x6"}` {
		t.Errorf("eth_blockNumber after another chain's blocks were refused: %s, want 0x6", got)
	}
	importInto(dir, chainPart(t, ours, 2, 3))
	if got := served(dir, latest); got != `{"jsonrpc":"2.0","id":1,"result":"0x6"}` {
		t.Errorf("eth_blockNumber once its own blocks filled the hole: %s, want 0x6", got)
	}
	if got := served(dir, block3); !strings.Contains(got, `"number":"0x3"`) {
		t.Errorf("block 3 once its own blocks filled the hole: %s", got)
	}
}

// TestStorePebbleDemo starts on an empty Pebble store without -chain: the
// demo chain is imported, pending block and tags included, as the memory
// store serves it; the next start serves it without importing.
func TestStorePebbleDemo(t *testing.T) {
	reference := start(t, "-addr", "127.0.0.1:0", "-keys", "k")
	dir := filepath.Join(t.TempDir(), "db")
	for i := range 2 {
		srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir)
		if n := len(srv.curlLines(t)); n != 2 {
			t.Errorf("start %d: %d curl lines, want the latest block's and an uncle's", i, n)
		}
		compareSome(t, rpcURL(srv), rpcURL(reference))
		srv.stop(t)
		imported := strings.Contains(srv.stderr(), `msg="store: empty, and no -chain nor -follow: importing the demo chain`)
		if imported != (i == 0) {
			t.Errorf("start %d: the demo chain imported: %v:\n%s", i, imported, srv.stderr())
		}
	}
	reference.stop(t)
}

// recorder is a Backend that records the block numbers asked of it.
type recorder struct {
	backend.Backend
	mu      sync.Mutex
	numbers []uint64
}

func (r *recorder) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	if u, ok := n.Uint64(); ok {
		r.mu.Lock()
		r.numbers = append(r.numbers, u)
		r.mu.Unlock()
	}
	return r.Backend.BlockByNumber(ctx, n)
}

func (r *recorder) reset() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.numbers
	r.numbers = nil
	return n
}

// waitForHead waits until srv serves block head as its latest.
func waitForHead(t *testing.T, srv *server, head uint64) {
	t.Helper()
	want := []byte(fmt.Sprintf(`"result":"0x%x"`, head))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, got := postStatus(t, rpcURL(srv), `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`); bytes.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not reach block %d:\n%s", head, srv.stderr())
		}
	}
}

// TestStorePebbleImportKeepsTags gives a store that holds the demo chain,
// with its tags, a dump of its first 51 blocks, every one of them stored
// already: the import leaves the store's head as it was, and its tags
// too, where it used to move both to the store's head.
func TestStorePebbleImportKeepsTags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir)
	before := tagNumber(t, rpcURL(srv), "finalized")
	srv.stop(t)
	if before != demo.Finalized {
		t.Fatalf("demo store: finalized %d, want %d", before, demo.Finalized)
	}

	chain, _ := demo.Dump()
	lines := bytes.SplitAfter(chain, []byte("\n"))
	prefix := filepath.Join(t.TempDir(), "prefix.jsonl")
	if err := os.WriteFile(prefix, bytes.Join(lines[:51], nil), 0o600); err != nil {
		t.Fatal(err)
	}
	srv = start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir, "-chain", prefix)
	safe, fin, head := tagNumber(t, rpcURL(srv), "safe"), tagNumber(t, rpcURL(srv), "finalized"), tagNumber(t, rpcURL(srv), "latest")
	srv.stop(t)
	if head != demo.Head {
		t.Fatalf("head %d, want %d: the prefix changed the chain", head, demo.Head)
	}
	if fin != demo.Finalized || safe != demo.Safe {
		t.Errorf("after importing a dump of blocks 0-50, all held already: safe %d finalized %d, want them left at %d and %d",
			safe, fin, demo.Safe, demo.Finalized)
	}
}

func tagNumber(t *testing.T, url, tag string) uint64 {
	t.Helper()
	_, body := postStatus(t, url, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["`+tag+`",false]}`)
	var r struct {
		Result *struct {
			Number string `json:"number"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Result == nil {
		t.Fatalf("%s: %s", tag, body)
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(r.Result.Number, "0x"), 16, 64)
	if err != nil {
		t.Fatalf("%s: %s", tag, body)
	}
	return n
}

// TestStorePebbleFollowResumes follows a node into a Pebble store, stops,
// lets the node's chain grow, and starts again: the follower resumes
// after the store's latest block, without asking for the blocks it holds.
func TestStorePebbleFollowResumes(t *testing.T) {
	b := chaintest.New(chaintest.Config{Seed: 3})
	b.AddBlocks(20, chaintest.Txs(1))
	rec := &recorder{Backend: b.Store()}
	node := blockrpctest.NewServer(t, rec)
	dir := filepath.Join(t.TempDir(), "db")

	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir, "-follow", node.URL, "-poll", "20ms")
	waitForHead(t, srv, 20)
	srv.stop(t)
	if logs := srv.stderr(); !strings.Contains(logs, `msg="following: the chain is copied from the genesis up`) {
		t.Errorf("the first start does not say it copies from the genesis:\n%s", logs)
	}

	b.AddBlocks(10, chaintest.Txs(1))
	rec.reset()
	srv = start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir, "-follow", node.URL, "-poll", "20ms")
	waitForHead(t, srv, 30)
	asked := rec.reset()
	answers := compareWithEndpoint(t, rpcURL(srv), node.URL, 30, false)
	srv.stop(t)
	t.Logf("%d answers compared with the node's after the restart", answers)
	if logs := srv.stderr(); !strings.Contains(logs, `msg="following: the store holds blocks already: the copy resumes after its latest, and is served as it comes"`) ||
		!strings.Contains(logs, "height=20 store=pebble:"+dir) {
		t.Errorf("the restart does not say it resumes after block 20:\n%s", logs)
	}
	// What the node was asked for by number after the restart: block 0,
	// to check that it serves the store's chain, and nothing else below
	// the store's latest.
	for _, n := range asked {
		if n > 0 && n < 20 {
			t.Errorf("the follower asked the node for block %d, which the store held before the restart", n)
			break
		}
	}
}

// TestStorePostgres imports a dump into PostgreSQL through one server and
// serves it through another, -read-only, as the memory store serves it; a
// second writer is refused, the same dump again writes nothing, another
// chain's dump is refused. The URL has a password, which no log or error
// shows (the test server trusts loopback, so it is never asked for).
func TestStorePostgres(t *testing.T) {
	_, base := pgtest.Shared(t)
	const secret = "s3cr3t-db-password"
	schema := pgtest.Schema(t)
	dbURL := strings.Replace(base, "postgres://postgres@", "postgres://postgres:"+secret+"@", 1) + "&search_path=" + schema
	if !strings.Contains(dbURL, secret) {
		t.Fatalf("no password put in %s", base)
	}
	m := regexp.MustCompile(`^postgres://[^@]*@([^/]+)/([^?]+)`).FindStringSubmatch(base)
	name := "postgres://" + m[1] + "/" + m[2]
	var logs []string
	defer func() {
		for _, l := range logs {
			if strings.Contains(l, secret) {
				t.Errorf("a log shows the password:\n%s", l)
			}
		}
	}()

	// A reader before any writer: told to start the writer.
	log, err := runFails(t, "-store", dbURL, "-read-only")
	logs = append(logs, log, err.Error())
	if !errors.Is(err, pgstore.ErrNoSchema) || !strings.Contains(err.Error(), "-store "+name+" -read-only: the store has no tables yet") {
		t.Errorf("a reader on an empty database: %v", err)
	}

	dump := demoDump(t)
	reference := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-chain", dump)
	ref := rpcURL(reference)
	writer := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", dbURL, "-chain", dump)
	compareSome(t, rpcURL(writer), ref)

	// Without a cache of blocks: every answer read from the database.
	reader := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", dbURL, "-read-only", "-poll", "50ms", "-store-cache", "-1")
	compareSome(t, rpcURL(reader), ref)

	log, err = runFails(t, "-store", dbURL)
	logs = append(logs, log, err.Error())
	if !errors.Is(err, pgstore.ErrWriterBusy) || !strings.Contains(err.Error(), "another server writes this store") ||
		!strings.Contains(err.Error(), "-read-only") || !strings.Contains(err.Error(), "once its lease has run out") || !strings.Contains(err.Error(), "unless renewed") {
		t.Errorf("a second writer: %v, want ErrWriterBusy pointing to -read-only, and to the lease's end for a writer killed", err)
	}

	reader.stop(t)
	writer.stop(t)
	logs = append(logs, reader.stderr(), writer.stderr())
	for _, want := range []string{`msg="store: dump imported" blocks=112 `, "store=" + name + " schema=" + schema, `msg="store: closed" store=` + name} {
		if !strings.Contains(writer.stderr(), want) {
			t.Errorf("the writer's log does not say %s:\n%s", want, writer.stderr())
		}
	}
	if !strings.Contains(reader.stderr(), `msg="store: read-only: serving what its writer keeps current`) || !strings.Contains(reader.stderr(), "read_only=true head=110") {
		t.Errorf("the reader's log does not say it reads only:\n%s", reader.stderr())
	}

	// The same dump again: nothing written, not even a tag.
	before := pgHeadVersion(t, base, schema)
	writer = start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", dbURL, "-chain", dump)
	compareSome(t, rpcURL(writer), ref)
	writer.stop(t)
	logs = append(logs, writer.stderr())
	if after := pgHeadVersion(t, base, schema); after != before {
		t.Errorf("importing the same dump again wrote %d times", after-before)
	}

	other := otherChainDump(t)
	log, err = runFails(t, "-store", dbURL, "-chain", other)
	logs = append(logs, log, err.Error())
	if !errors.Is(err, pgstore.ErrOtherChain) || !strings.Contains(err.Error(), other+" is a dump of another chain than the store "+name+" holds") {
		t.Errorf("another chain's dump: %v, want ErrOtherChain naming the dump and the store", err)
	}
	reference.stop(t)
}

// TestStorePostgresFollowLeaseLost follows a node into PostgreSQL until
// another writer takes the store over, as one does when the server has
// stalled past its lease: the server stops asking the node for blocks it
// could no longer write, and serves what the other writer writes.
func TestStorePostgresFollowLeaseLost(t *testing.T) {
	_, base := pgtest.Shared(t)
	schema := pgtest.Schema(t)
	dbURL := base + "&search_path=" + schema
	b := chaintest.New(chaintest.Config{Seed: 4})
	b.AddBlocks(10, chaintest.Txs(1))
	rec := &recorder{Backend: b.Store()}
	node := blockrpctest.NewServer(t, rec)
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", dbURL, "-follow", node.URL, "-poll", "20ms")
	waitForHead(t, srv, 10)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := pgtest.Connect(t, base)
	// The server's lease expires, as when it stalls, and another writer
	// takes it over (refused, and trying again, should the server renew
	// it in between).
	var other *pgstore.Writer
	var err error
	for attempt := 1; other == nil; attempt++ {
		if _, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "writer_lease"}.Sanitize()+` SET expires_at = clock_timestamp() - INTERVAL '1 second'`); err != nil {
			t.Fatal(err)
		}
		other, err = pgstore.OpenWriter(ctx, dbURL, nil)
		if err != nil && (!errors.Is(err, pgstore.ErrWriterBusy) || attempt == 3) {
			t.Fatalf("a writer once the server's lease expired: %v", err)
		}
	}
	defer other.Close()
	// The node moves on, and the server's write of its new block is
	// refused.
	b.AddBlocks(1, chaintest.Txs(1))
	const said = `msg="store: another server took over writing it: following stopped, serving what that one writes"`
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(srv.stderr(), said); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server does not say it stopped following:\n%s", srv.stderr())
		}
	}
	time.Sleep(100 * time.Millisecond) // a request under way when it stopped
	rec.reset()
	time.Sleep(500 * time.Millisecond) // 25 polls of the node
	if asked := rec.reset(); len(asked) != 0 {
		t.Errorf("the server asked the node for blocks %v after it stopped following", asked)
	}

	next, err := b.Store().BlockByNumber(ctx, 11)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.AddBlock(next); err != nil {
		t.Fatal(err)
	}
	waitForHead(t, srv, 11)
	srv.stop(t)
}

// TestStorePostgresReaderMigrated runs a -read-only server while its
// store's tables are migrated to a newer version than its build reads (the
// version row moved as a newer writer's migration moves it): it stops
// answering from tables it may misread, and its /readyz says why.
func TestStorePostgresReaderMigrated(t *testing.T) {
	_, base := pgtest.Shared(t)
	schema := pgtest.Schema(t)
	dbURL := base + "&search_path=" + schema
	writer := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", dbURL, "-chain", demoDump(t))
	writer.stop(t)
	reader := start(t, "-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-keys", "k", "-cache", "0", "-store", dbURL, "-read-only", "-poll", "20ms")
	admin, rpc := reader.adminURL(t), rpcURL(reader)
	if code, body := get(t, admin+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the migration: %d %s", code, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := pgtest.Connect(t, base)
	if _, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "blockrpc_pgstore_version"}.Sanitize()+` SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	var code int
	var body string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, body = get(t, admin+"/readyz"); code != http.StatusOK || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "migrated") {
		t.Errorf("/readyz once migrated: %d %s, want 503 saying the tables were migrated", code, body)
	}
	resp, answer := call(t, http.DefaultClient, rpc+"k", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x5",false]}`)
	if strings.Contains(answer, `"result"`) || !strings.Contains(answer, `"error"`) {
		t.Errorf("block 5 once migrated: %d %s, want an error", resp.StatusCode, answer)
	}
	reader.stop(t)
	if n := strings.Count(reader.stderr(), "level=ERROR msg=\"pgstore: every read fails from now on\""); n != 1 {
		t.Errorf("the reader logs the migration %d times, want once:\n%s", n, reader.stderr())
	}
}

// pgHeadVersion reads the version of the store's head row, which every
// write moves.
func pgHeadVersion(t *testing.T, url, schema string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v int64
	if err := pgtest.Connect(t, url).QueryRow(ctx, `SELECT version FROM `+pgx.Identifier{schema, "head"}.Sanitize()).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStorePebbleDemoCutShort starts on a store that holds the demo
// chain's first 41 blocks, as an import cut short by SIGINT leaves it:
// the rest is imported, with the demo's tags and pending block, where
// the store was served as it was, for good, there being no dump to give
// again.
func TestStorePebbleDemoCutShort(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	chain, _ := demo.Dump()
	lines := bytes.SplitAfter(chain, []byte("\n"))
	s, err := pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := importInto(t, s, dir, writeLines(t, string(bytes.Join(lines[:41], nil)))); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reference := start(t, "-addr", "127.0.0.1:0", "-keys", "k")
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir)
	compareSome(t, rpcURL(srv), rpcURL(reference))
	srv.stop(t)
	reference.stop(t)
	if !strings.Contains(srv.stderr(), "an import cut short: importing the rest") {
		t.Errorf("the log does not say the demo chain's import is taken up again:\n%s", srv.stderr())
	}
}

// TestStorePebbleDumpAboveDemoDropsPending imports, into a store that
// holds the demo chain and its pending block, a dump of three blocks on
// the demo's head: the pending block, built on a block no longer the
// latest, is no longer served.
func TestStorePebbleDumpAboveDemoDropsPending(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir)
	srv.stop(t)
	c := newHandChain(t)
	parent := demo.HeadHash
	var dump []string
	for n := uint64(demo.Head + 1); n <= demo.Head+3; n++ {
		b := c.block(n, parent, "above")
		dump, parent = append(dump, dumpLine(b, true)), b.Hash
	}
	srv = start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:"+dir, "-chain", writeLines(t, dump...))
	defer srv.stop(t)
	if head := tagNumber(t, rpcURL(srv), "latest"); head != demo.Head+3 {
		t.Fatalf("latest %d after the dump, want %d:\n%s", head, demo.Head+3, srv.stderr())
	}
	_, body := postStatus(t, rpcURL(srv), `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["pending",false]}`)
	if !bytes.Contains(body, []byte(`"result":null`)) {
		t.Errorf("pending after a dump moved the head past the demo's: %.300s, want null", body)
	}
}

// TestStoreFlagsEdges checks the -store values at the edges: a directory
// of blanks is none, and a search_path of more than one schema (or one
// quoted) names no schema of the store's own, which the writer would
// otherwise make under that odd name.
func TestStoreFlagsEdges(t *testing.T) {
	if _, err := parseFlags([]string{"-store", "pebble: "}, io.Discard); err == nil || !strings.Contains(err.Error(), "want pebble:DIR") {
		t.Errorf("-store \"pebble: \": %v, want it refused", err)
	}
	for _, sp := range []string{"mainnet,public", `"mainnet"`, "main net", "o'net"} {
		o, err := parseFlags([]string{"-store", "postgres://db.example/chain?search_path=" + url.QueryEscape(sp)}, io.Discard)
		if err != nil || o.store.schema != "" {
			t.Errorf("search_path %q: schema %q (%v), want none", sp, o.store.schema, err)
		}
	}
	o, err := parseFlags([]string{"-store", "postgres://db.example/chain?search_path=mainnet"}, io.Discard)
	if err != nil || o.store.schema != "mainnet" {
		t.Errorf("search_path mainnet: schema %q (%v)", o.store.schema, err)
	}
}
