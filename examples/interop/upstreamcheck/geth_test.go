package upstreamcheck

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/examples/interop/gethnode"
	"github.com/blockrpc/blockrpc/memstore"
)

// geth is a go-ethereum node serving a chain imported into it, with its
// engine API (authenticated by a secret of the test's) to set the blocks
// its safe and finalized tags select, as a consensus client would.
type geth struct {
	*gethnode.Node
	authURL string
	secret  [32]byte
}

var authEndpoint = regexp.MustCompile(`HTTP server started\s+endpoint=(127\.0\.0\.1:\d+)\s+auth=true`)

// startImported initialises a datadir with the genesis, imports the RLP
// files into it (each a run of consecutive blocks, as `geth export` writes
// them), and starts geth on it, with the extra arguments, without any
// network. The node is stopped when the test ends.
func startImported(t *testing.T, extra []string, genesisPath string, rlpPaths ...string) *geth {
	t.Helper()
	gethnode.Binary(t)
	dir := t.TempDir()
	datadir := filepath.Join(dir, "data")
	gethnode.Exec(t, "init", "--datadir", datadir, genesisPath)
	// Not --nocompaction: with it, geth import exits 0 even when it
	// refuses a block.
	gethnode.Exec(t, append([]string{"import", "--datadir", datadir}, rlpPaths...)...)

	g := &geth{}
	if _, err := rand.Read(g.secret[:]); err != nil {
		t.Fatal(err)
	}
	secretPath := filepath.Join(dir, "jwt.hex")
	if err := os.WriteFile(secretPath, []byte(hex.EncodeToString(g.secret[:])), 0o600); err != nil {
		t.Fatal(err)
	}
	g.Node = gethnode.Start(t, append([]string{"--datadir", datadir, "--config", gethnode.WriteNoNetworkConfig(t, dir), "--authrpc.jwtsecret", secretPath}, extra...)...)
	m := authEndpoint.FindStringSubmatch(g.Log())
	if m == nil {
		t.Fatalf("geth did not say where its engine API listens:\n%s", g.Log())
	}
	g.authURL = "http://" + m[1]
	return g
}

// forkChoice sets geth's head, safe and finalized blocks through the
// engine API (engine_forkchoiceUpdatedV3), as a consensus client does,
// authenticated by a token signed with the node's secret (HS256, with the
// time it is issued, as the engine API's authentication specifies).
func (g *geth) forkChoice(t *testing.T, head, safe, finalized backend.Hash) {
	t.Helper()
	state := map[string]backend.Hash{"headBlockHash": head, "safeBlockHash": safe, "finalizedBlockHash": finalized}
	req, err := http.NewRequest(http.MethodPost, g.authURL, bytes.NewReader(request("engine_forkchoiceUpdatedV3", state, nil)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+jwt(g.secret, time.Now()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("engine_forkchoiceUpdatedV3: HTTP %d %s %v", resp.StatusCode, answer, err)
	}
	var status struct {
		PayloadStatus struct {
			Status          string
			ValidationError *string
		}
	}
	if err := json.Unmarshal(result(t, answer), &status); err != nil || status.PayloadStatus.Status != "VALID" {
		t.Fatalf("engine_forkchoiceUpdatedV3: %s (%v)", answer, err)
	}
}

// jwt is a token for the engine API: HS256 over the time it is issued.
func jwt(secret [32]byte, now time.Time) string {
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(fmt.Sprintf(`{"iat":%d}`, now.Unix())))
	mac := hmac.New(sha256.New, secret[:])
	mac.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(mac.Sum(nil))
}

// follow runs a Follower copying the chain at endpoint into a new memstore
// until the test ends, and fails the test if it stops on an error.
func follow(t *testing.T, endpoint string, poll time.Duration) (*memstore.Store, *upstream.Follower) {
	t.Helper()
	store := memstore.New()
	f, err := upstream.NewFollower(store, upstream.FollowConfig{Endpoint: endpoint, PollInterval: poll, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the follower stopped on: %v", err)
		}
	})
	return store, f
}

// openUpstream opens an upstream Backend on the endpoints, closed when the
// test ends.
func openUpstream(t *testing.T, endpoints ...string) *upstream.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := upstream.Open(ctx, upstream.Config{Endpoints: endpoints, PollInterval: 100 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	return up
}

// waitFor polls cond until it holds, and fails the test with what when it
// does not within limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// sameTags reports whether b's latest, safe and finalized blocks are want's.
func sameTags(b, want backend.Backend) bool {
	ctx := context.Background()
	for _, tag := range []backend.BlockNumber{backend.Latest, backend.Safe, backend.Finalized} {
		x, errX := b.BlockByNumber(ctx, tag)
		y, errY := want.BlockByNumber(ctx, tag)
		if errX != nil || errY != nil || x.Hash != y.Hash {
			return false
		}
	}
	return true
}

// post sends a request body and returns the answer body as written.
func post(t *testing.T, url string, body []byte) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
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
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", body, resp.StatusCode, answer)
	}
	return answer
}

// request is a JSON-RPC request body.
func request(method string, params ...any) []byte {
	if params == nil {
		params = []any{}
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return body
}

// result returns the result of an answer, failing the test on an error.
func result(t *testing.T, answer []byte) json.RawMessage {
	t.Helper()
	var a struct {
		Result json.RawMessage
		Error  json.RawMessage
	}
	if err := json.Unmarshal(answer, &a); err != nil || a.Error != nil {
		t.Fatalf("answer %s: %v", answer, err)
	}
	return a.Result
}

func isObject(result []byte) bool { return bytes.HasPrefix(bytes.TrimSpace(result), []byte("{")) }

func firstDifference(a, b []byte) string {
	i := 0
	for i < min(len(a), len(b)) && a[i] == b[i] {
		i++
	}
	from := max(0, i-80)
	return fmt.Sprintf("at byte %d:\n  want …%s\n  got  …%s", i, clip(a[from:]), clip(b[from:]))
}

func clip(b []byte) string {
	if len(b) > 240 {
		return string(b[:240]) + "…"
	}
	return string(b)
}

// testLogger sends what the upstream package logs to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(&testWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	mu sync.Mutex
	t  *testing.T
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
