// Package gethnode runs the pinned go-ethereum binary for the tests: to
// import chains into it, and to serve them on loopback as the reference
// that blockrpc's answers are compared with.
//
// The binary is built by `make interop` (or `make test`) and found through
// the BLOCKRPC_GETH environment variable; tests that need it skip without.
package gethnode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvBinary names the environment variable that holds the geth binary.
const EnvBinary = "BLOCKRPC_GETH"

// Binary returns the geth binary, or skips the test when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv(EnvBinary)
	if path == "" {
		t.Skipf("no go-ethereum binary: %s is not set (make interop builds geth and sets it)", EnvBinary)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s=%s: %v", EnvBinary, path, err)
	}
	return path
}

// Exec runs geth with args to completion, as for `geth init` or `geth
// import`, and fails the test with geth's output if it fails.
func Exec(t testing.TB, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, Binary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("geth %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// NoNetwork is a geth config for a node that only serves its own data: it
// neither listens for peers nor dials or discovers any.
const NoNetwork = `[Node.P2P]
MaxPeers = 0
NoDiscovery = true
DiscoveryV4 = false
DiscoveryV5 = false
NoDial = true
ListenAddr = ""
BootstrapNodes = []
BootstrapNodesV5 = []
`

// WriteNoNetworkConfig writes NoNetwork to dir and returns its path, for
// --config.
func WriteNoNetworkConfig(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "no-network.toml")
	if err := os.WriteFile(path, []byte(NoNetwork), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Node is a running geth serving JSON-RPC over HTTP on loopback.
type Node struct {
	URL    string // http://127.0.0.1:port
	cmd    *exec.Cmd
	log    string        // path of geth's output
	exited chan struct{} // closed once the process has ended
	err    error         // how it ended, once exited is closed
}

var endpoint = regexp.MustCompile(`HTTP server started\s+endpoint=(127\.0\.0\.1:\d+)`)

// Start starts geth with args and its HTTP server on a free loopback port,
// and waits until it answers. The node is stopped, by its pid, when the test
// ends; Stop stops it earlier.
func Start(t testing.TB, args ...string) *Node {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "geth.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args = append(args,
		"--http", "--http.addr", "127.0.0.1", "--http.port", "0", "--http.api", "eth,debug,net,web3",
		"--authrpc.addr", "127.0.0.1", "--authrpc.port", "0",
		"--ipcdisable", "--verbosity", "3",
	)
	cmd := exec.Command(Binary(t), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &Node{cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		n.err = cmd.Wait()
		logFile.Close()
		close(n.exited)
	}()
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("stopping geth: %v", err)
		}
	})

	deadline := time.Now().Add(2 * time.Minute)
	for n.URL == "" {
		select {
		case <-n.exited:
			t.Fatalf("geth exited before serving: %v\n%s", n.err, n.Log())
		case <-time.After(50 * time.Millisecond):
		}
		if m := endpoint.FindStringSubmatch(n.Log()); m != nil {
			n.URL = "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("geth did not start its HTTP server:\n%s", n.Log())
		}
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := n.Call(ctx, "eth_chainId")
		cancel()
		if err == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("geth does not answer at %s:\n%s", n.URL, n.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Log returns what geth has written so far.
func (n *Node) Log() string {
	data, _ := os.ReadFile(n.log)
	return string(data)
}

// Stop interrupts geth and waits for it to exit, killing it if it takes
// longer than half a minute. Stopping a stopped node does nothing.
func (n *Node) Stop() error {
	if n.Exited() {
		return nil
	}
	if err := n.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-n.exited:
		return nil
	case <-time.After(30 * time.Second):
		n.cmd.Process.Kill()
		<-n.exited
		return errors.New("geth ignored SIGINT and was killed")
	}
}

// Exited reports whether the geth process has ended.
func (n *Node) Exited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// Pid returns the process id of geth.
func (n *Node) Pid() int { return n.cmd.Process.Pid }

// Call sends one JSON-RPC request and returns its result exactly as geth
// wrote it, for byte-for-byte comparison.
func (n *Node) Call(ctx context.Context, method string, params ...any) (json.RawMessage, error) {
	if params == nil {
		params = []any{}
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	answer, err := n.Post(ctx, body)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Result json.RawMessage
		Error  *struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(answer, &resp); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", method, err, answer)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("%s: geth answered %d %s", method, resp.Error.Code, resp.Error.Message)
	}
	return resp.Result, nil
}

// Post sends a request body and returns geth's answer body.
func (n *Node) Post(ctx context.Context, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("geth answered HTTP %d: %s", resp.StatusCode, answer)
	}
	return answer, nil
}
