package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/holiman/uint256"
)

// TestDemoChain checks that the built-in chain has what the demo promises:
// every fork's features, consistent total difficulty, and the tags set.
func TestDemoChain(t *testing.T) {
	store, err := loadChain(context.Background(), slog.New(slog.DiscardHandler), options{safe: -1, finalized: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	head, err := store.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if head.Number < 100 {
		t.Fatalf("the demo chain has %d blocks, want 100 or more", head.Number+1)
	}

	var (
		td                                   uint256.Int
		preLondonUncles, withdrawals         int
		london, blobs, setCodes, requestHash bool
		txTypes                              = map[uint8]int{}
	)
	for n := uint64(0); n <= head.Number; n++ {
		b, err := store.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		td.Add(&td, &b.Difficulty)
		if b.TotalDifficulty == nil || !b.TotalDifficulty.Eq(&td) {
			t.Errorf("block %d: totalDifficulty %v, want the cumulative difficulty %s", n, b.TotalDifficulty, td.Hex())
		}
		if b.BaseFeePerGas == nil {
			preLondonUncles += len(b.Uncles)
		} else {
			london = true
		}
		withdrawals += len(b.Withdrawals)
		requestHash = requestHash || b.RequestsHash != nil
		for _, tx := range b.Transactions {
			txTypes[tx.Type]++
			blobs = blobs || len(tx.BlobVersionedHashes) > 0
			setCodes = setCodes || len(tx.AuthorizationList) > 0
		}
		for i := range b.Uncles {
			if u, err := store.UncleByBlockHashAndIndex(ctx, b.Hash, uint64(i)); err != nil || u.Hash != b.Uncles[i] {
				t.Errorf("block %d: uncle %d not served: %v", n, i, err)
			}
		}
	}
	switch {
	case preLondonUncles == 0:
		t.Error("no uncles before London")
	case !london || withdrawals == 0 || !blobs || !setCodes || !requestHash:
		t.Errorf("missing a fork's features: london %v, withdrawals %d, blobs %v, set-code %v, requestsHash %v", london, withdrawals, blobs, setCodes, requestHash)
	}
	for typ := uint8(0); typ <= 4; typ++ {
		if txTypes[typ] == 0 {
			t.Errorf("no transaction of type %d", typ)
		}
	}

	pending, err := store.BlockByNumber(ctx, backend.Pending)
	if err != nil || !pending.Pending || pending.ParentHash != head.Hash {
		t.Errorf("pending block = %v, %v; want a pending child of the head", pending, err)
	}
	for tag, depth := range map[backend.BlockNumber]uint64{backend.Safe: demo.Head - demo.Safe, backend.Finalized: demo.Head - demo.Finalized} {
		b, err := store.BlockByNumber(ctx, tag)
		if err != nil || b.Number != head.Number-depth {
			t.Errorf("%v = %v, %v; want block %d", tag, b, err, head.Number-depth)
		}
	}
	if store.Len() <= int(head.Number)+1 {
		t.Errorf("no side-chain block: %d blocks stored for a head at %d", store.Len(), head.Number)
	}
}

// TestRunServesWhatItPrints runs the server as a newcomer would and replays
// the curl lines it prints.
func TestRunServesWhatItPrints(t *testing.T) {
	srv := start(t, "-addr", "127.0.0.1:0")
	lines := srv.curlLines(t)
	if len(lines) != 2 {
		t.Fatalf("printed %d curl lines, want 2 (a block and an uncle):\n%s", len(lines), srv.stdout())
	}

	block := replay(t, lines[0])
	var head struct {
		Number string
		Hash   string
		Uncles []string
	}
	if err := json.Unmarshal(block, &head); err != nil || head.Number != "0x6e" {
		t.Errorf("the latest block = %s (%v), want block 0x6e", block, err)
	}

	uncle := replay(t, lines[1])
	var u struct{ Hash, Number string }
	if err := json.Unmarshal(uncle, &u); err != nil || u.Hash == "" {
		t.Fatalf("the uncle answer = %s (%v), want an uncle object", uncle, err)
	}
	if !strings.Contains(lines[1], `"0x0"`) {
		t.Errorf("the uncle line does not ask for index 0: %s", lines[1])
	}

	srv.stop(t)
	key := regexp.MustCompile(`/v3/([0-9a-f]+)`).FindStringSubmatch(lines[0])[1]
	if logs := srv.stderr(); strings.Contains(logs, key) {
		t.Errorf("the logs contain the API key:\n%s", logs)
	} else if !strings.Contains(logs, "route=rpc key_id="+sha256Prefix(key)+" ") {
		t.Errorf("the access log does not show the route and the key's id:\n%s", logs)
	}
}

// TestRunWithFlags serves a dump with given keys and tags.
func TestRunWithFlags(t *testing.T) {
	dump := writeDump(t, 5)
	srv := start(t, "-addr", "127.0.0.1:0", "-chain", dump, "-keys", "alpha,beta", "-safe", "3", "-finalized", "2", "-chainid", "77")
	url := regexp.MustCompile(`http://\S+/v3/`).FindString(srv.stdout())
	if out := srv.stdout(); strings.Contains(out, "alpha") || strings.Contains(out, "beta") || !strings.Contains(out, "/v3/<API_KEY>") {
		t.Errorf("the keys given with -keys are printed, or no placeholder is:\n%s", out)
	}
	for _, tc := range []struct {
		key, tag string
		status   int
		number   string
	}{
		{"alpha", "latest", 200, "0x4"},
		{"beta", "safe", 200, "0x3"},
		{"beta", "finalized", 200, "0x2"},
		{"gamma", "latest", 401, ""},
	} {
		resp, err := http.Post(url+tc.key, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["`+tc.tag+`",false]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("key %s: status %d, want %d", tc.key, resp.StatusCode, tc.status)
			continue
		}
		if tc.number != "" && !bytes.Contains(body, []byte(`"number":"`+tc.number+`"`)) {
			t.Errorf("%s with key %s = %s, want block %s", tc.tag, tc.key, body, tc.number)
		}
	}
	resp, err := http.Post(url+"alpha", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(`"result":"0x4d"`)) {
		t.Errorf("eth_chainId with -chainid 77 = %s", body)
	}
	srv.stop(t)
}

// TestKeysFromTheEnvironment serves the keys of BLOCKRPC_KEYS, which keeps
// them out of the process list, and prints none of them.
func TestKeysFromTheEnvironment(t *testing.T) {
	t.Setenv("BLOCKRPC_KEYS", "from-env")
	srv := start(t, "-addr", "127.0.0.1:0", "-chain", writeDump(t, 2))
	if strings.Contains(srv.stdout(), "from-env") {
		t.Errorf("the key from the environment is printed:\n%s", srv.stdout())
	}
	url := regexp.MustCompile(`http://\S+/v3/`).FindString(srv.stdout())
	resp, err := http.Post(url+"from-env", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the key from BLOCKRPC_KEYS gets %d", resp.StatusCode)
	}
	srv.stop(t)
}

func TestRunRefusesBadFlags(t *testing.T) {
	dump := writeDump(t, 3)
	for _, args := range [][]string{
		{"-chain", dump, "-safe", "7"},
		{"-chain", dump, "-finalized", "9"},
		{"-chain", dump, "-safe", "-5"},
		{"-finalized", "-2"},
		{"-chain", filepath.Join(t.TempDir(), "missing.jsonl")},
		{"-chainid", "-3"},
		{"-keys", "a,,b"},
		{"-grace", "-1s"},
		{"-log-level", "loud"},
		{"-log-level", "info+2"},
		{"-log-sample", "0"},
		{"-read-timeout", "0s"},
		{"-write-timeout", "-1s"},
		{"-nosuchflag"},
		{"extra-argument"},
		{"-addr", "127.0.0.1:-1"},
		{"-rate", "-1"},
		{"-rate", "NaN"},
		{"-rate", "5", "-burst", "0"},
		{"-burst", "5"},
		{"-cache", "-1"},
		{"-admin", "127.0.0.1:-1"},
		{"-tls-cert", dump},
		{"-tls-key", dump},
		{"-tls-cert", dump, "-tls-key", dump},
	} {
		// A run that takes the flags serves until this ends, and then
		// succeeds.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var stderr bytes.Buffer
		if err := run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), io.Discard, &stderr); err == nil {
			t.Errorf("run %q succeeded, want an error", args)
		}
		cancel()
	}
}

// writeDump writes a dump of a chain of n blocks and returns its path.
func writeDump(t *testing.T, n int) string {
	t.Helper()
	store := memstore.New()
	parent := backend.Hash{}
	for i := range n {
		b := &backend.Block{Header: backend.Header{Number: uint64(i), ParentHash: parent, GasLimit: 30_000_000, Timestamp: uint64(i) * 12}}
		b.Difficulty.SetUint64(1)
		if err := store.AddBlock(b); err != nil {
			t.Fatal(err)
		}
		added, _ := store.BlockByNumber(context.Background(), backend.BlockNumber(i))
		parent = added.Hash
	}
	return saveDump(t, store)
}

// saveDump saves store as a dump in the test's temporary folder and returns
// its path.
func saveDump(t *testing.T, store *memstore.Store) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chain.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := store.Save(f); err != nil {
		t.Fatal(err)
	}
	return path
}

// latestBatch is a batch of n calls for the latest block with its
// transactions.
func latestBatch(n int) string {
	var batch strings.Builder
	batch.WriteByte('[')
	for i := range n {
		if i > 0 {
			batch.WriteByte(',')
		}
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["latest",true]}`, i)
	}
	batch.WriteByte(']')
	return batch.String()
}

// slowReaderDialer dials with a small receive buffer, so that a client that
// does not read makes the server's writes block soon.
func slowReaderDialer() *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
}

// server is a run of the program in the test's process.
type server struct {
	cancel  context.CancelFunc
	done    chan error
	out     *syncbuf.Buffer
	err     *syncbuf.Buffer
	printed chan struct{}
}

func start(t *testing.T, args ...string) *server {
	t.Helper()
	return startWith(t, nil, args...)
}

// startWith starts a run that serves its chain through wrap.
func startWith(t *testing.T, wrap func(backend.Backend) backend.Backend, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &server{cancel: cancel, done: make(chan error, 1), out: new(syncbuf.Buffer), err: new(syncbuf.Buffer), printed: make(chan struct{})}
	go func() {
		s.done <- runWith(ctx, args, pw, s.err, wrap)
		pw.Close()
	}()
	go func() {
		// The usage ends with an empty line after the last curl line.
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		seenCurl, signalled := false, false
		for sc.Scan() {
			s.out.WriteString(sc.Text() + "\n")
			seenCurl = seenCurl || strings.HasPrefix(sc.Text(), "curl ")
			if seenCurl && sc.Text() == "" && !signalled {
				close(s.printed)
				signalled = true
			}
		}
	}()
	select {
	case <-s.printed:
	case err := <-s.done:
		t.Fatalf("run ended before serving: %v\n%s", err, s.err.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no usage printed:\n%s", s.out.String())
	}
	t.Cleanup(func() { s.cancel() })
	return s
}

func (s *server) stdout() string { return s.out.String() }
func (s *server) stderr() string { return s.err.String() }

func (s *server) curlLines(t *testing.T) []string {
	var lines []string
	for _, l := range strings.Split(s.stdout(), "\n") {
		if strings.HasPrefix(l, "curl ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// stop ends the run as SIGINT would and checks it ends cleanly.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("run ended with %v, want a clean shutdown", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop")
	}
}

// replay sends what a printed curl line sends and returns the result.
func replay(t *testing.T, line string) json.RawMessage {
	t.Helper()
	m := regexp.MustCompile(`--data '([^']*)' (\S+)$`).FindStringSubmatch(line)
	if m == nil || !strings.Contains(line, "-H 'Content-Type: application/json'") {
		t.Fatalf("not a usable curl line: %s", line)
	}
	resp, err := http.Post(m[2], "application/json", strings.NewReader(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Result json.RawMessage
		Error  any
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.Error != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: status %d, error %v %v", line, resp.StatusCode, answer.Error, err)
	}
	return answer.Result
}

// TestRunLogsDumpHoles serves a dump that misses a block and says so.
func TestRunLogsDumpHoles(t *testing.T) {
	full, err := os.ReadFile(writeDump(t, 6))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(full), "\n")
	holed := filepath.Join(t.TempDir(), "holed.jsonl")
	if err := os.WriteFile(holed, []byte(strings.Join(append(lines[:2:2], lines[4:]...), "")), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-chain", holed)
	srv.stop(t)
	if logs := srv.stderr(); !strings.Contains(logs, `level=WARN msg="memstore: the dump misses blocks of the canonical chain" missing=2 ranges=2-3`) {
		t.Errorf("the log does not say what the dump misses:\n%s", logs)
	}
}

// TestRunRefusesEmptyFlags gives flags the empty value an unset shell
// variable gives (-chain "$DUMP"): each is refused, naming the flag,
// where taken for the flag left out it would serve the demo chain, or
// pass over $BLOCKRPC_KEYS for a generated key. (-upstream and -follow
// have their own errors, in TestSourceFlags.)
func TestRunRefusesEmptyFlags(t *testing.T) {
	t.Setenv("BLOCKRPC_KEYS", "from-env")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{"addr", "chain", "keys", "store", "keystore", "admin", "admin-token", "tls-cert", "tls-key"} {
		for _, value := range []string{"", " "} {
			err := run(ctx, []string{"-" + name, value}, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "-"+name+" is empty") {
				t.Errorf("-%s %q: %v, want it refused as empty", name, value, err)
			}
		}
	}
}

// countingBackend counts the blocks read by number.
type countingBackend struct {
	backend.Backend
	n int
}

func (c *countingBackend) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	c.n++
	return c.Backend.BlockByNumber(ctx, n)
}

// TestUsageUncleSearchBounded prints the usage for a chain in memory with
// no uncles, as a post-merge chain has none: the search for a block with
// one reads the top of the chain only, where it used to read every block
// before the generated key was printed; and none once ctx has ended.
func TestUsageUncleSearchBounded(t *testing.T) {
	o, err := parseFlags([]string{"-chain", writeDump(t, memoryUncleSearchDepth+500)}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	src, err := openSource(context.Background(), slog.New(slog.DiscardHandler), o)
	if err != nil {
		t.Fatal(err)
	}
	cb := &countingBackend{Backend: src.store}
	src.store = cb
	printUsage(context.Background(), io.Discard, src, "http://127.0.0.1/v3/", "k", true)
	if cb.n > memoryUncleSearchDepth+3 {
		t.Errorf("printing the usage read %d blocks, want %d at most", cb.n, memoryUncleSearchDepth+3)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cb.n = 0
	printUsage(ctx, io.Discard, src, "http://127.0.0.1/v3/", "k", true)
	if cb.n > 2 {
		t.Errorf("printing the usage once ctx ended read %d blocks", cb.n)
	}
}

// TestFlagsEdges checks the values at the edges of what the flags take:
// a write timeout of 0 would let any answer take for ever, a rate of +Inf
// is no rate, while a grace of 0 (cut at once) is the operator's choice.
func TestFlagsEdges(t *testing.T) {
	for _, args := range [][]string{
		{"-write-timeout", "0s"},
		{"-read-timeout", "-1s"},
		{"-rate", "+Inf"},
		{"-rate", "-Inf"},
		{"-rate", "0.5", "-burst", "-1"},
		{"-log-sample", "-1"},
		{"-safe", "-2"},
		{"-keys", "a/b"},
		{"-keys", "a b"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%q: accepted, want an error", args)
		}
	}
	for _, tc := range []struct {
		args  []string
		check func(options) bool
	}{
		{[]string{"-grace", "0s"}, func(o options) bool { return o.grace == 0 }},
		{[]string{"-write-timeout", "1ns"}, func(o options) bool { return o.writeTimeout == 1 }},
		{[]string{"-rate", "0.25"}, func(o options) bool { return o.rate == 0.25 && o.burst == 1 }},
		{[]string{"-rate", "2.5"}, func(o options) bool { return o.burst == 3 }},
		{[]string{"-cache", "0"}, func(o options) bool { return o.cache == 0 }},
		{[]string{"-safe", "-1", "-finalized", "0"}, func(o options) bool { return o.safe == -1 && o.finalized == 0 }},
	} {
		o, err := parseFlags(tc.args, io.Discard)
		if err != nil || !tc.check(o) {
			t.Errorf("%q: %+v (%v)", tc.args, o, err)
		}
	}
}

// TestKeystoreFlags checks what -keystore does to the other flags: the
// admin listener it needs, on loopback by default; the admin token of
// BLOCKRPC_ADMIN_TOKEN, at least minAdminToken long; and keys given
// besides it, from the environment too, refused rather than ignored.
func TestKeystoreFlags(t *testing.T) {
	o, err := parseFlags([]string{"-keystore", "memory"}, io.Discard)
	if err != nil || o.admin != defaultAdminAddr || o.adminToken != "" {
		t.Errorf("-keystore alone: admin %q, token %q (%v); want the admin listener at %s and a token generated", o.admin, o.adminToken, err, defaultAdminAddr)
	}
	o, err = parseFlags([]string{"-keystore", "memory", "-admin", "127.0.0.1:9000", "-admin-token", strings.Repeat("t", minAdminToken)}, io.Discard)
	if err != nil || o.admin != "127.0.0.1:9000" || o.adminToken != strings.Repeat("t", minAdminToken) {
		t.Errorf("a token of %d characters: admin %q, token %q (%v)", minAdminToken, o.admin, o.adminToken, err)
	}
	if _, err := parseFlags([]string{"-keystore", "memory", "-admin-token", strings.Repeat("t", minAdminToken-1)}, io.Discard); err == nil {
		t.Errorf("a token of %d characters accepted", minAdminToken-1)
	}
	if _, err := parseFlags([]string{"-keystore", "memory", "-key-refresh", "5s", "-key-stale", "5s"}, io.Discard); err == nil {
		t.Error("-key-stale as long as -key-refresh accepted")
	}

	t.Setenv("BLOCKRPC_ADMIN_TOKEN", testAdminToken)
	o, err = parseFlags([]string{"-keystore", "memory", "-admin", "0.0.0.0:9000"}, io.Discard)
	if err != nil || o.adminToken != testAdminToken {
		t.Errorf("BLOCKRPC_ADMIN_TOKEN: token %q (%v), want the environment's", o.adminToken, err)
	}
	t.Setenv("BLOCKRPC_ADMIN_TOKEN", "short")
	if _, err := parseFlags([]string{"-keystore", "memory"}, io.Discard); err == nil || !strings.Contains(err.Error(), "BLOCKRPC_ADMIN_TOKEN") {
		t.Errorf("a short BLOCKRPC_ADMIN_TOKEN: %v, want it refused by name", err)
	}
	t.Setenv("BLOCKRPC_ADMIN_TOKEN", "")
	t.Setenv("BLOCKRPC_KEYS", "from-env")
	if _, err := parseFlags([]string{"-keystore", "memory"}, io.Discard); err == nil || !strings.Contains(err.Error(), "BLOCKRPC_KEYS") {
		t.Errorf("BLOCKRPC_KEYS with -keystore: %v, want it refused", err)
	}
}
