package main

// -upstream and -follow: the server in front of a live endpoint, here a
// blockrpctest server on loopback serving the demo chain.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/blockrpctest"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// TestSourceFlags checks what -upstream, -follow and -poll accept, and that
// they name the chain to serve alone.
func TestSourceFlags(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		upstream []string
		follow   string
		poll     time.Duration
	}{
		{args: []string{"-upstream", "http://127.0.0.1:8545"}, upstream: []string{"http://127.0.0.1:8545"}},
		{args: []string{"-upstream", " http://a.example/v3/k , https://b.example:8443 ", "-poll", "250ms", "-keys", "k1"},
			upstream: []string{"http://a.example/v3/k", "https://b.example:8443"}, poll: 250 * time.Millisecond},
		{args: []string{"-follow", "https://node.example/rpc", "-cache", "0", "-rate", "5"}, follow: "https://node.example/rpc"},
		{args: []string{"-follow", "http://127.0.0.1:8545", "-poll", "1s"}, follow: "http://127.0.0.1:8545", poll: time.Second},
		{args: []string{"-follow", " http://127.0.0.1:8545 "}, follow: "http://127.0.0.1:8545"},
	} {
		o, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if fmt.Sprint(o.upstream) != fmt.Sprint(tc.upstream) || o.follow != tc.follow || o.poll != tc.poll {
			t.Errorf("%q: upstream %q, follow %q, poll %v; want %q, %q, %v", tc.args, o.upstream, o.follow, o.poll, tc.upstream, tc.follow, tc.poll)
		}
	}

	const secret = "s3cr3t-provider-key"
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"-upstream", ""}, "URL 1 of 1 is empty"},
		{[]string{"-upstream", "http://a.example,,http://b.example"}, "URL 2 of 3 is empty"},
		{[]string{"-upstream", "http://a.example/v3/" + secret + ",ftp://b.example"}, "URL 2 of 2 is not an http or https URL"},
		{[]string{"-upstream", "127.0.0.1:8545/v3/" + secret}, "URL 1 of 1 is not an http or https URL"},
		{[]string{"-follow", ""}, "-follow: URL 1 of 1 is empty"},
		{[]string{"-follow", "http://a.example/v3/" + secret + ",http://b.example"}, "-follow: want one http or https URL, got 2"},
		{[]string{"-follow", "ws://a.example/" + secret}, "-follow: URL 1 of 1 is not an http or https URL"},
		{[]string{"-chain", "chain.jsonl", "-upstream", "http://a.example"}, "give one of them"},
		{[]string{"-chain", "chain.jsonl", "-follow", "http://a.example"}, "give one of them"},
		{[]string{"-upstream", "http://a.example", "-follow", "http://b.example"}, "give one of them"},
		{[]string{"-poll", "1s"}, "-poll needs -upstream, -follow or -read-only"},
		{[]string{"-chain", "chain.jsonl", "-poll", "1s"}, "-poll needs -upstream, -follow or -read-only"},
		{[]string{"-upstream", "http://a.example", "-poll", "-1s"}, "must not be negative"},
		{[]string{"-upstream", "http://a.example", "-safe", "3"}, "-safe applies to a dump"},
		{[]string{"-follow", "http://a.example", "-finalized", "3"}, "-finalized applies to a dump"},
		{[]string{"-upstream", "http://a.example", "-chainid", "5"}, "-chainid applies to a dump"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		switch {
		case err == nil:
			t.Errorf("%q: accepted, want an error", tc.args)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("%q: %v, want an error saying %q", tc.args, err, tc.want)
		case strings.Contains(err.Error(), secret):
			t.Errorf("%q: the error shows the URL's key: %v", tc.args, err)
		}
	}
}

// TestRunUpstream serves the demo chain through -upstream, the first
// endpoint dead and the second a blockrpctest server, and checks every
// answer against the endpoint's: block by block, uncle by uncle, tag by
// tag, byte for byte. The endpoint gives totalDifficulty, consistent with
// the chain, so the upstream backend serves it too.
func TestRunUpstream(t *testing.T) {
	store, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	node := blockrpctest.NewServer(t, store)
	dead := deadURL(t) + "/v3/" + node.Key
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-upstream", dead+","+node.URL, "-poll", "100ms")
	ours := regexp.MustCompile(`http://\S+/v3/`).FindString(srv.stdout()) + "k"
	if n := len(srv.curlLines(t)); n != 1 {
		t.Errorf("printed %d curl lines, want 1 (the latest block: the uncle line would walk the chain through the endpoints):\n%s", n, srv.stdout())
	}

	answers := compareWithEndpoint(t, ours, node.URL, demo.Head, true)
	srv.stop(t)
	t.Logf("%d blocks, %d answers compared byte for byte through -upstream", demo.Head+1, answers)

	logs := srv.stderr()
	name := strings.TrimSuffix(strings.TrimSuffix(node.URL, node.Key), "/v3/")
	if !strings.Contains(logs, "msg=serving") || !strings.Contains(logs, "upstream="+strings.TrimSuffix(dead, "/v3/"+node.Key)+","+name) {
		t.Errorf("the log does not name the endpoints when it starts serving:\n%s", logs)
	}
	if strings.Contains(logs, node.Key) {
		t.Errorf("the log shows the endpoint's key:\n%s", logs)
	}
	requests := node.Stats().Requests
	time.Sleep(500 * time.Millisecond)
	if after := node.Stats().Requests; after != requests {
		t.Errorf("the endpoint got %d requests after the server stopped: the head tracker still polls", after-requests)
	}
}

// TestRunFollow follows a blockrpctest server serving the demo chain with
// a latency that makes the copy take a second or two, answers while it
// copies, and then serves the whole chain exactly as the endpoint does,
// totalDifficulty and tags included.
func TestRunFollow(t *testing.T) {
	store, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	node := blockrpctest.NewServer(t, store, blockrpctest.WithLatency(100*time.Millisecond))
	// The same chain without the latency, for the answers to compare with.
	reference := blockrpctest.NewServer(t, store)
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-follow", node.URL, "-poll", "50ms", "-admin", "127.0.0.1:0")
	ours := regexp.MustCompile(`http://\S+/v3/`).FindString(srv.stdout()) + "k"

	// The server answers from the start, with what it holds yet: at
	// first, nothing.
	status, answer := postStatus(t, ours, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`)
	if status != http.StatusOK || !bytes.Contains(answer, []byte(`"error"`)) {
		t.Errorf("eth_blockNumber as the follower starts: status %d, %s; want the error of a chain without blocks", status, answer)
	}
	// Caught up: the head, and safe and finalized, which the follower
	// sets once it holds the endpoint's head.
	deadline := time.Now().Add(30 * time.Second)
	for {
		caught := true
		for _, tag := range []string{"latest", "safe", "finalized"} {
			req := `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["` + tag + `",false]}`
			_, got := postStatus(t, ours, req)
			_, want := postStatus(t, reference.URL, req)
			caught = caught && bytes.Equal(got, want)
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower did not catch up within 30 s:\n%s", srv.stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	answers := compareWithEndpoint(t, ours, reference.URL, demo.Head, false)
	// The follower's progress, which /readyz does not tell, in /metrics.
	status, metrics := get(t, srv.adminURL(t)+"/metrics")
	for _, want := range []string{
		fmt.Sprintf("blockrpc_follower_height %d\n", demo.Head),
		fmt.Sprintf("blockrpc_follower_endpoint_head %d\n", demo.Head),
		"blockrpc_follower_synced 1\n",
		"blockrpc_follower_blocks_per_second ",
	} {
		if status != http.StatusOK || !strings.Contains(metrics, want) {
			t.Errorf("/metrics (status %d) has no %s", status, want)
		}
	}
	srv.stop(t)
	t.Logf("%d blocks, %d answers compared byte for byte through -follow", demo.Head+1, answers)

	logs := srv.stderr()
	name := strings.TrimSuffix(strings.TrimSuffix(node.URL, node.Key), "/v3/")
	for _, want := range []string{"follow=" + name, `msg="following: `, `msg="upstream: caught up with the endpoint"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, node.Key) {
		t.Errorf("the log shows the endpoint's key:\n%s", logs)
	}
	requests := node.Stats().Requests
	time.Sleep(300 * time.Millisecond)
	if after := node.Stats().Requests; after != requests {
		t.Errorf("the endpoint got %d requests after the server stopped: the follower still runs", after-requests)
	}
}

// TestRunFollowDeadEndpoint follows an endpoint that does not answer: the
// server serves (nothing yet), the follower retries, the log says so
// without the key in the endpoint's path, and the server stops cleanly.
func TestRunFollowDeadEndpoint(t *testing.T) {
	const secret = "s3cr3t-provider-key"
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-follow", deadURL(t)+"/v3/"+secret, "-poll", "20ms")
	ours := regexp.MustCompile(`http://\S+/v3/`).FindString(srv.stdout()) + "k"
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.stderr(), "connection refused") {
		if time.Now().After(deadline) {
			t.Fatalf("the follower's failed requests are not logged:\n%s", srv.stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status, _ := postStatus(t, ours, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}`); status != http.StatusOK {
		t.Errorf("the latest block, with nothing copied: status %d", status)
	}
	srv.stop(t)
	if logs := srv.stderr(); strings.Contains(logs, secret) {
		t.Errorf("the log shows the endpoint's key:\n%s", logs)
	}
}

// TestRunFollowStopsOnAnotherChain has the followed endpoint switch to
// another chain, of the same chain id but another genesis: the follower
// cannot mend that, and the server shuts down and ends with an error, for
// whatever runs it to restart it or call someone.
func TestRunFollowStopsOnAnotherChain(t *testing.T) {
	a := chaintest.New(chaintest.Config{Seed: 1})
	a.AddBlocks(3, nil)
	b := chaintest.New(chaintest.Config{Seed: 2})
	b.AddBlocks(6, nil)
	var served switchable
	served.Store(a.Store())
	node := blockrpctest.NewServer(t, &served)
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-follow", node.URL, "-poll", "20ms")
	ours := regexp.MustCompile(`http://\S+/v3/`).FindString(srv.stdout()) + "k"
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, answer := postStatus(t, ours, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`); bytes.Contains(answer, []byte(`"result":"0x3"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower did not copy the first chain:\n%s", srv.stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}

	served.Store(b.Store())
	select {
	case err := <-srv.done:
		if err == nil || !strings.Contains(err.Error(), "-follow: ") || !strings.Contains(err.Error(), "genesis") {
			t.Errorf("the run ended with %v, want the follower's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the server still runs after the endpoint switched chains:\n%s", srv.stderr())
	}
	if logs := srv.stderr(); !strings.Contains(logs, `level=ERROR msg="the follower stopped: shutting down"`) || !strings.Contains(logs, "msg=stopped") {
		t.Errorf("the log does not say why the server stopped:\n%s", logs)
	}
}

// switchable is a Backend whose chain a test replaces while it serves.
type switchable struct{ atomic.Pointer[memstore.Store] }

func (s *switchable) ChainID(ctx context.Context) (uint64, error) { return s.Load().ChainID(ctx) }
func (s *switchable) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	return s.Load().BlockByNumber(ctx, n)
}
func (s *switchable) BlockByHash(ctx context.Context, h backend.Hash) (*backend.Block, error) {
	return s.Load().BlockByHash(ctx, h)
}
func (s *switchable) UncleByBlockHashAndIndex(ctx context.Context, h backend.Hash, i uint64) (*backend.Uncle, error) {
	return s.Load().UncleByBlockHashAndIndex(ctx, h, i)
}

// compareWithEndpoint asks ours and the endpoint for every block up to head
// (by number and by hash, both forms), its uncles and uncle counts, the
// tags, the chain id and the pending block, and fails the test on any
// difference. It returns how many answers it compared.
func compareWithEndpoint(t *testing.T, ours, endpoint string, head uint64, withSide bool) int {
	t.Helper()
	compared := 0
	same := func(method string, params ...any) json.RawMessage {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		_, want := postStatus(t, endpoint, string(body))
		_, got := postStatus(t, ours, string(body))
		if !bytes.Equal(got, want) {
			t.Errorf("%s%v:\n endpoint %.300s\n ours     %.300s", method, params, want, got)
		}
		compared++
		var r struct{ Result json.RawMessage }
		json.Unmarshal(want, &r)
		return r.Result
	}
	for n := uint64(0); n <= head; n++ {
		number := fmt.Sprintf("0x%x", n)
		var b struct {
			Hash   string
			Uncles []string
		}
		json.Unmarshal(same("eth_getBlockByNumber", number, false), &b)
		same("eth_getBlockByNumber", number, true)
		same("eth_getBlockByHash", b.Hash, false)
		same("eth_getBlockByHash", b.Hash, true)
		same("eth_getUncleCountByBlockHash", b.Hash)
		for i := range len(b.Uncles) + 1 { // and one past the last
			same("eth_getUncleByBlockHashAndIndex", b.Hash, fmt.Sprintf("0x%x", i))
			same("eth_getUncleByBlockNumberAndIndex", number, fmt.Sprintf("0x%x", i))
		}
	}
	for _, tag := range []string{"latest", "earliest", "safe", "finalized", "pending"} {
		same("eth_getBlockByNumber", tag, true)
	}
	if withSide {
		same("eth_getBlockByHash", demo.SideHash.String(), true)
	}
	same("eth_getBlockByNumber", fmt.Sprintf("0x%x", head+10), false)
	same("eth_blockNumber")
	same("eth_chainId")
	return compared
}

// postStatus posts a JSON-RPC request and returns the status and body.
func postStatus(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, answer
}

// deadURL returns the URL of a port of 127.0.0.1 that refuses connections
// while the test runs: a socket bound to it that does not listen. A port
// let go instead could be the next one given to a listener of the test,
// the server's own (-addr 127.0.0.1:0), which would then answer.
func deadURL(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
