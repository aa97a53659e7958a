// Package specs holds conformance suites that check blockrpc against data
// that no one on this project wrote: the Ethereum JSON-RPC specification's
// own tests (execution-apis), the ethereum/tests blockchain tests with
// uncles, and go-ethereum itself serving the same chains.
//
// The fixtures live outside the repository, in ../shared/fixtures beside
// the checkout (see its README); tests that need them skip without. Tests
// that need go-ethereum find its binary through BLOCKRPC_GETH and skip
// without.
package specs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/examples/interop/gethnode"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/ethereum/go-ethereum/common"
)

// fixture returns the path of a fixture folder, or skips the test when the
// shared fixtures are not there.
func fixture(t testing.TB, sub string) string {
	t.Helper()
	return fixtures.Path(t, sub)
}

// ---- JSON-RPC on both sides -----------------------------------------------

// request returns the body of a JSON-RPC call with id 1.
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

// number and index format JSON-RPC quantities.
func number(n uint64) string { return fmt.Sprintf("0x%x", n) }
func index(i int) string     { return fmt.Sprintf("0x%x", i) }

// server is blockrpc's handler over a memstore, on an httptest server.
type server struct {
	url string
}

// serve starts the handler over store, open to any key, for the test.
func serve(t testing.TB, store *memstore.Store) *server {
	t.Helper()
	h := blockrpc.NewHandler(blockrpc.NewService(store), blockrpc.WithKeys(blockrpc.AnyKey))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &server{url: srv.URL + "/v3/conformance"}
}

// post sends a request body and returns the answer body, which must come
// with status 200.
func (s *server) post(t testing.TB, body []byte) []byte {
	t.Helper()
	resp, err := http.Post(s.url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("blockrpc answered %s with HTTP %d: %s", body, resp.StatusCode, answer)
	}
	return answer
}

// call posts a call and returns the answer body.
func (s *server) call(t testing.TB, method string, params ...any) []byte {
	t.Helper()
	return s.post(t, request(method, params...))
}

// geth is a running go-ethereum node answering the same requests.
type geth struct {
	node *gethnode.Node
}

// startGeth serves the chain in datadir with go-ethereum, with no network
// but loopback HTTP.
func startGeth(t testing.TB, datadir string) *geth {
	t.Helper()
	config := gethnode.WriteNoNetworkConfig(t, t.TempDir())
	return &geth{node: gethnode.Start(t, "--datadir", datadir, "--config", config)}
}

// checkGethHead stops the test unless geth's genesis and head are the
// chain's: geth holds the whole chain.
func checkGethHead(t testing.TB, g *geth, genesis, head common.Hash) {
	t.Helper()
	for tag, want := range map[string]common.Hash{"0x0": genesis, "latest": head} {
		answer := g.post(t, request("eth_getBlockByNumber", tag, false))
		if got := stringMember(t, object(t, answer), "hash"); got != want.Hex() {
			t.Fatalf("go-ethereum's block %s is %s, the chain's is %s", tag, got, want)
		}
	}
}

// post sends a request body to geth and returns its answer body, as geth
// wrote it.
func (g *geth) post(t testing.TB, body []byte) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	answer, err := g.node.Post(ctx, body)
	if err != nil {
		t.Fatalf("geth: %s: %v", body, err)
	}
	return answer
}

// ---- answers ---------------------------------------------------------------

// envelope is a JSON-RPC answer; Result keeps the bytes as written.
type envelope struct {
	Result json.RawMessage  `json:"result"`
	Error  *json.RawMessage `json:"error"`
}

// result returns the result of an answer, failing on an error answer.
func result(t testing.TB, answer []byte) json.RawMessage {
	t.Helper()
	var e envelope
	if err := json.Unmarshal(answer, &e); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, answer)
	}
	if e.Error != nil {
		t.Fatalf("error answer: %s", answer)
	}
	return e.Result
}

// isNull reports whether an answer's result is null.
func isNull(t testing.TB, answer []byte) bool {
	t.Helper()
	return string(result(t, answer)) == "null"
}

// object decodes a result object into its members, or returns nil for
// null.
func object(t testing.TB, answer []byte) map[string]json.RawMessage {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(result(t, answer), &members); err != nil {
		t.Fatalf("result is not an object: %v: %s", err, answer)
	}
	return members
}

// stringMember returns a string member of an object ("" for null or a
// missing member).
func stringMember(t testing.TB, obj map[string]json.RawMessage, name string) string {
	t.Helper()
	raw, ok := obj[name]
	if !ok || string(raw) == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("member %q is not a string: %s", name, raw)
	}
	return s
}

// quantity parses a hex quantity as the fixtures and JSON-RPC write it:
// "0x020000" and "0x20000" are the same number, "0x" and "0x00" are zero.
func quantity(s string) (*big.Int, bool) {
	digits, ok := strings.CutPrefix(strings.ToLower(s), "0x")
	if !ok {
		return nil, false
	}
	if digits == "" {
		return new(big.Int), true
	}
	return new(big.Int).SetString(digits, 16)
}

// ---- what blockrpc adds to go-ethereum's answers ---------------------------

var (
	totalDifficultyMember = regexp.MustCompile(`"totalDifficulty":"(0x[0-9a-f]+)",`)
	blockTimestampMember  = regexp.MustCompile(`"blockTimestamp":"(0x[0-9a-f]+)",`)
)

// cutTotalDifficulty removes the one `"totalDifficulty":"0x…",` member of a
// block or uncle answer and returns its value. A null result has none; a
// block or uncle must have exactly one, with a value.
func cutTotalDifficulty(t testing.TB, answer []byte) (rest []byte, td *big.Int) {
	t.Helper()
	if isNull(t, answer) {
		if bytes.Contains(answer, []byte(`"totalDifficulty"`)) {
			t.Fatalf("null answer with a totalDifficulty: %s", answer)
		}
		return answer, nil
	}
	matches := totalDifficultyMember.FindAllSubmatchIndex(answer, -1)
	if len(matches) != 1 {
		t.Fatalf("want one \"totalDifficulty\":\"0x…\" member, found %d (a null one is not allowed here): %s", len(matches), clip(answer, 0, 400))
	}
	m := matches[0]
	td, _ = quantity(string(answer[m[2]:m[3]]))
	rest = slices.Concat(answer[:m[0]], answer[m[1]:])
	return rest, td
}

// cutBlockTimestamps removes the `"blockTimestamp":"0x…",` members of the
// transaction objects of a block answer: there must be one per transaction
// and each must be the block's timestamp.
func cutBlockTimestamps(t testing.TB, answer []byte, transactions int, timestamp string) []byte {
	t.Helper()
	matches := blockTimestampMember.FindAllSubmatchIndex(answer, -1)
	if len(matches) != transactions {
		t.Fatalf("want %d blockTimestamp members (one per transaction), found %d", transactions, len(matches))
	}
	var rest []byte
	last := 0
	for _, m := range matches {
		if got := string(answer[m[2]:m[3]]); got != timestamp {
			t.Errorf("transaction blockTimestamp %s, the block's timestamp is %s", got, timestamp)
		}
		rest = append(rest, answer[last:m[0]]...)
		last = m[1]
	}
	return append(rest, answer[last:]...)
}

// ---- byte comparison -------------------------------------------------------

// firstDifference describes where got differs from want, with context on
// both sides, or returns "" when they are equal.
func firstDifference(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	at := 0
	for at < len(want) && at < len(got) && want[at] == got[at] {
		at++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at byte %d (want %d bytes, got %d):\n", at, len(want), len(got))
	fmt.Fprintf(&b, "  want: %s\n", clip(want, at-80, at+80))
	fmt.Fprintf(&b, "  got:  %s", clip(got, at-80, at+80))
	if members := differingMembers(want, got); members != "" {
		fmt.Fprintf(&b, "\n  %s", members)
	}
	return b.String()
}

// clip returns data[from:to] within bounds, marking what was cut.
func clip(data []byte, from, to int) string {
	from, to = max(from, 0), min(to, len(data))
	if from > to {
		from = to
	}
	s := string(data[from:to]) // JSON answers are printable ASCII
	if from > 0 {
		s = "…" + s
	}
	if to < len(data) {
		s += "…"
	}
	return s
}

// differingMembers names the members of the two answers' result objects
// that differ, are missing or are extra, when both results are objects.
func differingMembers(want, got []byte) string {
	var w, g struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if json.Unmarshal(want, &w) != nil || json.Unmarshal(got, &g) != nil || w.Result == nil || g.Result == nil {
		return ""
	}
	var diffs []string
	for name, wv := range w.Result {
		gv, ok := g.Result[name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("missing %q (want %s)", name, short(wv)))
		case !bytes.Equal(wv, gv):
			diffs = append(diffs, fmt.Sprintf("%q: want %s, got %s", name, short(wv), short(gv)))
		}
	}
	for name, gv := range g.Result {
		if _, ok := w.Result[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("extra %q: %s", name, short(gv)))
		}
	}
	slices.Sort(diffs)
	if len(diffs) == 0 {
		return "same members and values: the difference is in order or layout"
	}
	return "members: " + strings.Join(diffs, "; ")
}

func short(v []byte) string {
	if len(v) > 120 {
		return string(v[:120]) + "…"
	}
	return string(v)
}

// ---- comparing with go-ethereum ---------------------------------------------

// answerKind says what blockrpc adds to go-ethereum's answer to a call.
type answerKind int

const (
	plainAnswer  answerKind = iota // nothing: counts, nulls
	blockAnswer                    // a block with transaction hashes: totalDifficulty
	fullTxAnswer                   // a block with transaction objects: totalDifficulty, and blockTimestamp in each transaction
	uncleAnswer                    // totalDifficulty
)

// comparer sends the same requests to blockrpc and go-ethereum and
// compares the answer bodies byte for byte, once blockrpc's additions are
// removed.
type comparer struct {
	ours *server
	geth *geth
	// compared counts the answers compared.
	compared int
}

// compare sends body to both and compares the answers. It returns
// blockrpc's answer as sent, and the total difficulty it carried (nil
// when there was none).
func (c *comparer) compare(t testing.TB, label string, kind answerKind, body []byte) (ours []byte, td *big.Int) {
	t.Helper()
	ours = c.ours.post(t, body)
	theirs := c.geth.post(t, body)
	c.compared++
	stripped := ours
	if kind != plainAnswer {
		stripped, td = cutTotalDifficulty(t, ours)
		if td == nil {
			t.Errorf("%s: blockrpc answered null (geth: %s)", label, clip(theirs, 0, 200))
		}
	}
	if kind == fullTxAnswer && td != nil {
		obj := object(t, ours)
		var txs []json.RawMessage
		if err := json.Unmarshal(obj["transactions"], &txs); err != nil {
			t.Fatalf("%s: transactions: %v", label, err)
		}
		stripped = cutBlockTimestamps(t, stripped, len(txs), stringMember(t, obj, "timestamp"))
	}
	if d := firstDifference(theirs, stripped); d != "" {
		t.Errorf("%s: blockrpc's answer differs from go-ethereum's (want: geth, got: blockrpc without its totalDifficulty/blockTimestamp members)\nrequest: %s\n%s", label, body, d)
	}
	return ours, td
}
