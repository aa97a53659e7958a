// Package jsclients runs the JavaScript clients people call a node
// provider with, ethers v6 and viem v2 (examples/interop/js, pinned by its
// package-lock.json), against examples/server, and checks what they parse
// against go-ethereum's own view of the same blocks.
//
// Each chain gets a server of its own on loopback: the built-in demo chain,
// and the execution-apis fixture chain served from a dump. The test writes
// the expectations (hashes, numbers, transactions and their senders,
// uncles, the side block, the tags and the pending block) to a JSON file
// and runs `node --test` in examples/interop/js with BLOCKRPC_URL and
// BLOCKRPC_EXPECTATIONS set.
//
// It skips when node is not on PATH or the node packages are not installed
// (`make interop` installs them with npm ci).
package jsclients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/examples/interop/demochain"
	"github.com/blockrpc/blockrpc/examples/interop/gethconv"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rlp"
)

const (
	// apiKey is the key the servers accept (-keys).
	apiKey = "jsclients-interop-key"
	// jsDir holds package.json, package-lock.json and the node tests.
	jsDir = "../js"

	// The demo server's tags, given with -safe and -finalized.
	demoSafe      = demochain.Head - 10
	demoFinalized = demochain.Head - 20
)

// expectations is what the node tests check the clients against: the
// chain as go-ethereum sees it.
type expectations struct {
	Name      string `json:"name"`
	ChainID   string `json:"chainId"` // decimal: it may exceed 2^53
	Latest    uint64 `json:"latest"`
	Earliest  uint64 `json:"earliest"`
	Safe      uint64 `json:"safe"`
	Finalized uint64 `json:"finalized"`
	// Blocks are the canonical blocks, from Earliest to Latest.
	Blocks []block `json:"blocks"`
	// Side is a block off the canonical chain, reachable by hash; nil if
	// the chain has none.
	Side *block `json:"side"`
	// Pending is the block the server serves as "pending", with the number
	// and parent it will have once sealed and no hash; nil if it serves none.
	Pending *block `json:"pending"`
}

type block struct {
	Number       uint64        `json:"number"`
	Hash         string        `json:"hash,omitempty"`
	ParentHash   string        `json:"parentHash"`
	Transactions []transaction `json:"transactions"`
	Uncles       []uncle       `json:"uncles"`
}

type transaction struct {
	Hash string `json:"hash"`
	From string `json:"from"` // EIP-55 checksummed, as go-ethereum writes it
	Type uint8  `json:"type"`
}

type uncle struct {
	Hash   string `json:"hash"`
	Number uint64 `json:"number"`
}

func TestClients(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the JavaScript client tests need Node 20 or later")
	}
	if _, err := os.Stat(filepath.Join(jsDir, "node_modules")); err != nil {
		t.Skip("examples/interop/js/node_modules is missing: `make interop` installs the pinned packages (npm ci)")
	}
	version, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	t.Logf("node %s", bytes.TrimSpace(version))
	server := buildServer(t)

	t.Run("demo", func(t *testing.T) {
		t.Parallel()
		want := demoExpectations(t)
		s := startServer(t, server, "-safe", strconv.Itoa(demoSafe), "-finalized", strconv.Itoa(demoFinalized))
		runNode(t, node, s.url, want)
		s.stop(t)
	})
	t.Run("execution-apis", func(t *testing.T) {
		t.Parallel()
		want, dump := fixtureChain(t, fixtures.Path(t, "execution-apis"))
		// safe and finalized default to the head for a dump, as the
		// fixture's headfcu.json has them.
		s := startServer(t, server, "-chain", dump)
		runNode(t, node, s.url, want)
		s.stop(t)
	})
}

// buildServer builds examples/server, in its own module beside this one:
// what `go run ./examples/server` runs.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "server")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("building examples/server: %v\n%s", err, out)
	}
	return bin
}

func demoExpectations(t *testing.T) *expectations {
	t.Helper()
	chain, err := demochain.Generate()
	if err != nil {
		t.Fatal(err)
	}
	signer := types.LatestSignerForChainID(chain.Config.ChainID)
	want := &expectations{
		Name:      "demo",
		ChainID:   chain.Config.ChainID.String(),
		Latest:    demochain.Head,
		Safe:      demoSafe,
		Finalized: demoFinalized,
	}
	for _, b := range append([]*types.Block{chain.Genesis}, chain.Blocks...) {
		want.Blocks = append(want.Blocks, convert(t, signer, b))
	}
	side := convert(t, signer, chain.Side)
	want.Side = &side
	pending := convert(t, signer, chain.Pending)
	pending.Hash = "" // the server answers null until it is sealed
	want.Pending = &pending
	return want
}

// fixtureChain decodes the execution-apis chain with go-ethereum for the
// expectations, and writes it as a dump for the server.
func fixtureChain(t *testing.T, fixtureDir string) (*expectations, string) {
	t.Helper()
	genesis, err := gethconv.ReadGenesis(filepath.Join(fixtureDir, "genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	export, err := os.ReadFile(filepath.Join(fixtureDir, "chain.rlp"))
	if err != nil {
		t.Fatal(err)
	}

	store, err := gethconv.LoadExport(genesis, bytes.NewReader(export))
	if err != nil {
		t.Fatalf("loading chain.rlp: %v", err)
	}
	dump := filepath.Join(t.TempDir(), "execution-apis.jsonl")
	f, err := os.Create(dump)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	if err := store.Save(w); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}

	signer := types.LatestSignerForChainID(genesis.Config.ChainID)
	want := &expectations{Name: "execution-apis", ChainID: genesis.Config.ChainID.String()}
	want.Blocks = append(want.Blocks, convert(t, signer, genesis.ToBlock()))
	stream := rlp.NewStream(bytes.NewReader(export), 0)
	for {
		var b types.Block
		if err := stream.Decode(&b); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding chain.rlp: %v", err)
		}
		if b.NumberU64() == 0 {
			continue // the genesis, when the export has it
		}
		if n := want.Blocks[len(want.Blocks)-1].Number + 1; b.NumberU64() != n {
			t.Fatalf("chain.rlp: block %d where %d was expected", b.NumberU64(), n)
		}
		want.Blocks = append(want.Blocks, convert(t, signer, &b))
	}
	head := want.Blocks[len(want.Blocks)-1].Number
	want.Latest, want.Safe, want.Finalized = head, head, head
	return want, dump
}

func convert(t *testing.T, signer types.Signer, b *types.Block) block {
	t.Helper()
	out := block{
		Number:       b.NumberU64(),
		Hash:         b.Hash().Hex(),
		ParentHash:   b.ParentHash().Hex(),
		Transactions: []transaction{},
		Uncles:       []uncle{},
	}
	for i, tx := range b.Transactions() {
		from, err := types.Sender(signer, tx)
		if err != nil {
			t.Fatalf("block %d, transaction %d: %v", b.NumberU64(), i, err)
		}
		out.Transactions = append(out.Transactions, transaction{Hash: tx.Hash().Hex(), From: from.Hex(), Type: tx.Type()})
	}
	for _, u := range b.Uncles() {
		out.Uncles = append(out.Uncles, uncle{Hash: u.Hash().Hex(), Number: u.Number.Uint64()})
	}
	return out
}

// runNode runs the node tests against url and fails with node's output if
// they fail.
func runNode(t *testing.T, node, url string, want *expectations) {
	t.Helper()
	data, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "expectations.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap")
	cmd.Dir = jsDir
	cmd.Env = append(os.Environ(), "BLOCKRPC_URL="+url, "BLOCKRPC_EXPECTATIONS="+path)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test against the %s chain: %v\n%s", want.Name, err, out)
	}

	// The summary and the tests' "checked" diagnostics, from the TAP output.
	summary := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if m := tapCount.FindStringSubmatch(line); m != nil {
			summary[m[1]], _ = strconv.Atoi(m[2])
		} else if rest, ok := strings.CutPrefix(line, "# checked: "); ok {
			t.Log(rest)
		}
	}
	if summary["tests"] == 0 || summary["fail"] != 0 || summary["pass"] == 0 {
		t.Fatalf("node --test ran %d tests, %d passed, %d failed:\n%s", summary["tests"], summary["pass"], summary["fail"], out)
	}
	txs, uncles := 0, 0
	for _, b := range want.Blocks {
		txs += len(b.Transactions)
		uncles += len(b.Uncles)
	}
	t.Logf("%s chain: %d blocks, %d transactions, %d uncles; node: %d tests, %d passed, %d skipped, in %v",
		want.Name, len(want.Blocks), txs, uncles, summary["tests"], summary["pass"], summary["skipped"], time.Since(start).Round(time.Millisecond))
}

var tapCount = regexp.MustCompile(`^# (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)$`)

// server is a running examples/server.
type server struct {
	url  string
	cmd  *exec.Cmd
	out  string // the path of its stdout
	log  string // the path of its stderr
	done chan error

	stopped bool
}

var endpoint = regexp.MustCompile(`JSON-RPC endpoint: (http://127\.0\.0\.1:\d+/v3/)<API_KEY>`)

// startServer starts the server on a free loopback port with apiKey and
// args, and reads the endpoint it prints. The server is stopped, by its
// pid, when the test ends; stop stops it earlier and checks its exit.
func startServer(t *testing.T, bin string, args ...string) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{out: filepath.Join(dir, "stdout"), log: filepath.Join(dir, "stderr"), done: make(chan error, 1)}
	stdout, err := os.Create(s.out)
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-keys", apiKey}, args...)...)
	s.cmd.Stdout, s.cmd.Stderr = stdout, stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.done <- s.cmd.Wait()
		stdout.Close()
		stderr.Close()
	}()
	t.Cleanup(func() { s.stop(t) })

	// The listener is open before the endpoint is printed.
	deadline := time.After(time.Minute)
	for s.url == "" {
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("the server exited before serving: %v\n%s", err, s.output())
		case <-deadline:
			t.Fatalf("the server printed no endpoint:\n%s", s.output())
		case <-time.After(20 * time.Millisecond):
		}
		data, _ := os.ReadFile(s.out)
		if m := endpoint.FindSubmatch(data); m != nil {
			s.url = string(m[1]) + apiKey // the server does not print a key it was given
		}
	}
	if strings.Contains(s.output(), apiKey) {
		t.Fatalf("the server printed the key given with -keys:\n%s", s.output())
	}
	return s
}

func (s *server) output() string {
	out, _ := os.ReadFile(s.out)
	log, _ := os.ReadFile(s.log)
	return fmt.Sprintf("stdout:\n%s\nstderr:\n%s", out, log)
}

// stop interrupts the server, by its pid, and checks that it exits cleanly
// within half a minute; it kills it otherwise. Stopping a stopped server
// does nothing.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if s.stopped {
		return
	}
	s.stopped = true
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("interrupting the server: %v", err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("the server did not exit cleanly after SIGINT: %v\n%s", err, s.output())
		}
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		t.Errorf("the server ignored SIGINT for 30s and was killed\n%s", s.output())
	}
	if err := syscall.Kill(s.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after the server stopped: %v", s.cmd.Process.Pid, err)
	}
}
