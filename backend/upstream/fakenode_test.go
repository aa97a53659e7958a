package upstream_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// fakeNode is a scripted JSON-RPC endpoint on a loopback port, standing
// for a node or a provider in the tests of the upstream package. Each call
// it receives, alone or in a batch, is answered by blockrpc's own handler
// over the node's current store, so that its answers are go-ethereum's
// shapes; a test swaps the store to script a reorganisation, rewrites
// results to tamper with them or to imitate other clients, and injects
// HTTP faults.
type fakeNode struct {
	// URL is the endpoint to give a client: http://127.0.0.1:port/rpc.
	URL string

	srv     *httptest.Server
	chain   atomic.Pointer[fakeChain]
	rewrite atomic.Pointer[rewriteFunc]
	fault   atomic.Pointer[faultFunc]

	mu    sync.Mutex
	calls map[string]int64
	// conns counts the connections open to the node.
	conns atomic.Int64
}

// fakeChain is a store and the handler that answers over it, swapped
// together so that a request never sees one store through the handler of
// another.
type fakeChain struct {
	store   *memstore.Store
	handler http.Handler
}

type (
	rewriteFunc func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage
	faultFunc   func(w http.ResponseWriter, r *http.Request) bool
)

// fakeKeyPath is where the node sends each call inside itself: the handler
// wants a path ending in /v3/<key>, and accepts any key here.
const fakeKeyPath = "/v3/fake-node"

// newFakeNode starts a node serving store, closed when the test ends.
func newFakeNode(t testing.TB, store *memstore.Store) *fakeNode {
	t.Helper()
	n := &fakeNode{calls: make(map[string]int64)}
	n.SetStore(store)
	n.srv = httptest.NewUnstartedServer(http.HandlerFunc(n.serve))
	n.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			n.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			n.conns.Add(-1)
		}
	}
	n.srv.Start()
	t.Cleanup(n.srv.Close)
	n.URL = n.srv.URL + "/rpc"
	return n
}

// SetStore makes s the chain the node serves, at once for every later
// call: how a test scripts a reorganisation.
func (n *fakeNode) SetStore(s *memstore.Store) {
	h := blockrpc.NewHandler(blockrpc.NewService(s),
		blockrpc.WithKeys(blockrpc.AnyKey),
		// The handler's own logs would only repeat what the test checks.
		blockrpc.WithLogger(slog.New(slog.DiscardHandler)))
	n.chain.Store(&fakeChain{store: s, handler: h})
}

// Store returns the chain the node serves now.
func (n *fakeNode) Store() *memstore.Store { return n.chain.Load().store }

// SetRewrite sets a function through which each successful call's result
// passes before it is sent (nil: none). It is given the method, the
// call's parameters and the result, and returns the result to send.
func (n *fakeNode) SetRewrite(f func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage) {
	if f == nil {
		n.rewrite.Store(nil)
		return
	}
	rf := rewriteFunc(f)
	n.rewrite.Store(&rf)
}

// SetFault sets a function that sees each HTTP request first (nil: none).
// When it returns true it has answered the request itself, and the node
// does nothing more: a 500, a 429, a truncated body, a delay.
func (n *fakeNode) SetFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	if f == nil {
		n.fault.Store(nil)
		return
	}
	ff := faultFunc(f)
	n.fault.Store(&ff)
}

// Calls returns how many calls of method the node has answered: those of
// requests a fault took over are not counted.
func (n *fakeNode) Calls(method string) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[method]
}

// fakeCall is one call of a request, as the node reads it.
type fakeCall struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      json.RawMessage   `json:"id"`
	Method  string            `json:"method"`
	Params  []json.RawMessage `json:"params"`
}

// fakeAnswer is what the handler answered one call, and what the node
// sends back for it under the caller's id.
type fakeAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

func (n *fakeNode) serve(w http.ResponseWriter, r *http.Request) {
	if f := n.fault.Load(); f != nil && (*f)(w, r) {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	chain := n.chain.Load() // one chain for the whole request
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	var out any
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var calls []fakeCall
		if err := json.Unmarshal(trimmed, &calls); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answers := make([]fakeAnswer, len(calls))
		for i, c := range calls {
			answers[i] = n.answer(r, chain, c)
		}
		out = answers
	} else {
		var c fakeCall
		if err := json.Unmarshal(trimmed, &c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out = n.answer(r, chain, c)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// answer has the handler answer one call, alone, and passes its result
// through the rewrite.
func (n *fakeNode) answer(r *http.Request, chain *fakeChain, c fakeCall) fakeAnswer {
	n.mu.Lock()
	n.calls[c.Method]++
	n.mu.Unlock()
	params := c.Params
	if params == nil {
		params = []json.RawMessage{}
	}
	single, _ := json.Marshal(fakeCall{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: c.Method, Params: params})
	req := httptest.NewRequestWithContext(r.Context(), http.MethodPost, fakeKeyPath, bytes.NewReader(single))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	chain.handler.ServeHTTP(rec, req)
	var a fakeAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		msg, _ := json.Marshal(strings.TrimSpace(rec.Body.String()))
		a.Error = json.RawMessage(`{"code":-32603,"message":` + string(msg) + `}`)
	}
	a.JSONRPC, a.ID = "2.0", c.ID
	if a.Error == nil {
		if a.Result == nil {
			// A null result may read back as nil, and must go out as
			// null: an answer without result or error is malformed.
			a.Result = json.RawMessage("null")
		}
		if f := n.rewrite.Load(); f != nil {
			a.Result = (*f)(c.Method, params, a.Result)
		}
	}
	return a
}

// postJSON posts body to the node and returns the answer's status and body.
func postJSON(t testing.TB, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// TestFakeNode checks the fake node itself: single calls and batches
// answered as blockrpc answers them under the caller's ids, the counts,
// the rewrite, the fault and the store swap.
func TestFakeNode(t *testing.T) {
	b := chaintest.New(chaintest.Config{Seed: 2})
	b.AddBlocks(3, chaintest.Txs(1))
	node := newFakeNode(t, b.Store())

	_, got := postJSON(t, node.URL, `{"jsonrpc":"2.0","id":7,"method":"eth_blockNumber","params":[]}`)
	if want := `{"jsonrpc":"2.0","id":7,"result":"0x3"}`; strings.TrimSpace(string(got)) != want {
		t.Errorf("single call: %s, want %s", got, want)
	}
	_, got = postJSON(t, node.URL, `[{"jsonrpc":"2.0","id":"a","method":"eth_chainId"},`+
		`{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["0x9",false]},`+
		`{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByHash","params":["`+b.Block(2).Hash.String()+`",true]}]`)
	var answers []struct {
		ID     json.RawMessage
		Result json.RawMessage
		Error  json.RawMessage
	}
	if err := json.Unmarshal(got, &answers); err != nil || len(answers) != 3 {
		t.Fatalf("batch: %s (%v)", got, err)
	}
	if string(answers[0].ID) != `"a"` || string(answers[0].Result) != `"0x539"` {
		t.Errorf("eth_chainId: id %s result %s, want \"a\" and 0x539", answers[0].ID, answers[0].Result)
	}
	if string(answers[1].Result) != "null" || answers[1].Error != nil {
		t.Errorf("a block past the head: result %s error %s, want null", answers[1].Result, answers[1].Error)
	}
	if string(answers[2].Result) != blockJSON(b.Block(2)) {
		t.Errorf("block 2 by hash:\n got %s\nwant %s", answers[2].Result, blockJSON(b.Block(2)))
	}
	for method, want := range map[string]int64{"eth_blockNumber": 1, "eth_chainId": 1, "eth_getBlockByNumber": 1, "eth_getBlockByHash": 1, "eth_getUncleByBlockHashAndIndex": 0} {
		if got := node.Calls(method); got != want {
			t.Errorf("Calls(%s) = %d, want %d", method, got, want)
		}
	}

	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_blockNumber" && len(params) == 0 {
			return json.RawMessage(`"0x64"`)
		}
		return result
	})
	if _, got := postJSON(t, node.URL, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`); !strings.Contains(string(got), `"0x64"`) {
		t.Errorf("rewritten: %s, want 0x64", got)
	}
	node.SetRewrite(nil)

	node.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	if status, _ := postJSON(t, node.URL, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`); status != http.StatusServiceUnavailable {
		t.Errorf("with a fault: status %d, want 503", status)
	}
	if got := node.Calls("eth_blockNumber"); got != 2 {
		t.Errorf("a request the fault answered was counted: %d calls, want 2", got)
	}
	node.SetFault(nil)

	other := chaintest.New(chaintest.Config{Seed: 3})
	node.SetStore(other.Store())
	if _, got := postJSON(t, node.URL, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`); !strings.Contains(string(got), `"0x0"`) {
		t.Errorf("after SetStore: %s, want the new store's head 0x0", got)
	}
}
