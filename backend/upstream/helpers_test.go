package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// Helpers of the Backend's tests (the Follower's have their own).

// untilTimeout bounds every wait-until loop: far more than loopback needs,
// so that only a bug reaches it.
const untilTimeout = 10 * time.Second

// idle is a poll interval the tests never reach: the head tracker polls
// once, in Open, and no poll changes an endpoint's health behind a test's
// back.
const idle = time.Hour

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openUp opens a Backend on urls, in that order of preference, closed
// when the test ends. A nil cfg.Logger discards.
func openUp(t testing.TB, cfg upstream.Config, urls ...string) *upstream.Backend {
	t.Helper()
	cfg.Endpoints = urls
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	ctx, cancel := context.WithTimeout(context.Background(), untilTimeout)
	defer cancel()
	up, err := upstream.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { up.Close() })
	return up
}

// eventually waits until cond holds, failing the test after untilTimeout.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(untilTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", untilTimeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// storeBlock returns a block of a store, failing the test when it has none.
func storeBlock(t testing.TB, s backend.Backend, n backend.BlockNumber) *backend.Block {
	t.Helper()
	b, err := s.BlockByNumber(context.Background(), n)
	if err != nil {
		t.Fatalf("the store's block %v: %v", n, err)
	}
	return b
}

// storeUncles returns the uncles of a stored block, in order.
func storeUncles(t testing.TB, s backend.Backend, b *backend.Block) []*backend.Uncle {
	t.Helper()
	us := make([]*backend.Uncle, len(b.Uncles))
	for i := range us {
		u, err := s.UncleByBlockHashAndIndex(context.Background(), b.Hash, uint64(i))
		if err != nil {
			t.Fatalf("block %d uncle %d: %v", b.Number, i, err)
		}
		us[i] = u
	}
	return us
}

// diffAnswer returns "" when got and want answer alike in both forms
// (transaction objects and hashes), else what differs.
func diffAnswer(got, want *backend.Block) string {
	if got == nil || want == nil {
		if got == want {
			return ""
		}
		return fmt.Sprintf("got %v, want %v", got != nil, want != nil)
	}
	for _, fullTx := range []bool{true, false} {
		g, w := got.AppendJSON(nil, fullTx), want.AppendJSON(nil, fullTx)
		if !bytes.Equal(g, w) {
			return fmt.Sprintf("fullTx %v: %s", fullTx, firstDiff(g, w))
		}
	}
	return ""
}

// hashOf names a block in a message by its hash, and nil as none.
func hashOf(b *backend.Block) string {
	if b == nil {
		return "none"
	}
	return b.Hash.String()
}

// firstDiff shows where two answers part.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(i-80, 0)
	return fmt.Sprintf("at byte %d:\n got  ...%s\n want ...%s", i, clipped(got, from, i+80), clipped(want, from, i+80))
}

func clipped(b []byte, from, to int) string { return string(b[min(from, len(b)):min(to, len(b))]) }

// checkRefused checks an answer the Backend must refuse: no block, and an
// error that is neither "not found" (the client would get null) nor
// silent.
func checkRefused(t testing.TB, what string, got *backend.Block, err error) {
	t.Helper()
	switch {
	case got != nil:
		t.Fatalf("%s: served block %d (%s), want a refusal", what, got.Number, got.Hash)
	case err == nil:
		t.Fatalf("%s: neither a block nor an error", what)
	case errors.Is(err, backend.ErrNotFound):
		t.Fatalf("%s: answered not found (%v): a client would get null for a block that exists", what, err)
	}
}

// ---------------------------------------------------------------------------
// Rewriting JSON answers, members in their order.

// jsonMember is one member of a JSON object.
type jsonMember struct {
	key   string
	value json.RawMessage
}

// objectMembers splits a JSON object into its members, in order; nil for
// anything else.
func objectMembers(raw json.RawMessage) []jsonMember {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []jsonMember
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		out = append(out, jsonMember{key: tok.(string), value: v})
	}
	return out
}

// joinMembers writes members as a JSON object, in their order.
func joinMembers(ms []jsonMember) json.RawMessage {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(m.value)
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

// member returns the value of a member of an object, nil when absent.
func member(raw json.RawMessage, key string) json.RawMessage {
	for _, m := range objectMembers(raw) {
		if m.key == key {
			return m.value
		}
	}
	return nil
}

// setMember replaces a member's value where it is, or appends it.
func setMember(raw json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	ms := objectMembers(raw)
	for i := range ms {
		if ms[i].key == key {
			ms[i].value = value
			return joinMembers(ms)
		}
	}
	return joinMembers(append(ms, jsonMember{key, value}))
}

// dropMember removes a member.
func dropMember(raw json.RawMessage, key string) json.RawMessage {
	ms := objectMembers(raw)
	out := ms[:0]
	for _, m := range ms {
		if m.key != key {
			out = append(out, m)
		}
	}
	return joinMembers(out)
}

// quoted returns s as a JSON string.
func quoted(s string) json.RawMessage { return json.RawMessage(`"` + s + `"`) }

// rewriteTx applies f to transaction object i of a block object.
func rewriteTx(i int, f func(tx json.RawMessage) json.RawMessage) func(json.RawMessage) json.RawMessage {
	return func(block json.RawMessage) json.RawMessage {
		var txs []json.RawMessage
		if json.Unmarshal(member(block, "transactions"), &txs) != nil || len(txs) <= i || txs[i][0] != '{' {
			return block
		}
		txs[i] = f(txs[i])
		list, _ := json.Marshal(txs)
		return setMember(block, "transactions", list)
	}
}

// blockRewrite returns a fake node rewrite that applies f to the block
// with the given hash wherever a block object of it is answered
// (eth_getBlockByNumber and eth_getBlockByHash, either form).
func blockRewrite(hash backend.Hash, f func(json.RawMessage) json.RawMessage) func(string, []json.RawMessage, json.RawMessage) json.RawMessage {
	want := quoted(hash.String())
	return func(method string, _ []json.RawMessage, result json.RawMessage) json.RawMessage {
		if (method != "eth_getBlockByNumber" && method != "eth_getBlockByHash") || !bytes.Equal(member(result, "hash"), want) {
			return result
		}
		return f(result)
	}
}

// ---------------------------------------------------------------------------
// Seeing what reaches a node.

// requestBody reads the body of a request and puts it back for whoever
// reads it next.
func requestBody(r *http.Request) string {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return string(body)
}

// requestMethods reads the methods of a JSON-RPC request (single or
// batch) and puts the body back for whoever reads it next.
func requestMethods(r *http.Request) []string {
	body := []byte(requestBody(r))
	var calls []struct{ Method string }
	if json.Unmarshal(body, &calls) != nil {
		var one struct{ Method string }
		if json.Unmarshal(body, &one) != nil {
			return nil
		}
		calls = append(calls, one)
	}
	methods := make([]string, len(calls))
	for i, c := range calls {
		methods[i] = c.Method
	}
	return methods
}

// asksFor reports whether a request holds a call of method.
func asksFor(r *http.Request, method string) bool {
	for _, m := range requestMethods(r) {
		if m == method {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Logs.

// logSink is a slog.Handler that keeps every record, for tests that check
// what the operator is told.
type logSink struct {
	mu      sync.Mutex
	records []sinkRecord
}

type sinkRecord struct {
	level slog.Level
	text  string // the message and its attributes, key=value
}

func (l *logSink) Enabled(context.Context, slog.Level) bool { return true }

func (l *logSink) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, sinkRecord{level: r.Level, text: b.String()})
	l.mu.Unlock()
	return nil
}

func (l *logSink) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logSink) WithGroup(string) slog.Handler      { return l }

// matching returns the records at level or above that contain every one
// of words.
func (l *logSink) matching(level slog.Level, words ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, r := range l.records {
		if r.level < level {
			continue
		}
		for _, w := range words {
			if !strings.Contains(r.text, w) {
				continue next
			}
		}
		out = append(out, r.text)
	}
	return out
}

// all returns every record's text.
func (l *logSink) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.records {
		fmt.Fprintf(&b, "%v %s\n", r.level, r.text)
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// Chains.

// copyStore copies src whole into a store of its own: every block, on the
// canonical chain or not, its chain id, tags and pending block. Then head,
// when not nil, is made canonical with its ancestors, as a node that
// switched to its branch serves it.
func copyStore(t testing.TB, src *memstore.Store, head *backend.Block) *memstore.Store {
	t.Helper()
	dst := copyBlocks(t, src, head)
	ctx := context.Background()
	for _, tag := range []struct {
		n   backend.BlockNumber
		set func(uint64) error
	}{{backend.Safe, dst.SetSafe}, {backend.Finalized, dst.SetFinalized}} {
		if b, err := src.BlockByNumber(ctx, tag.n); err == nil {
			if err := tag.set(b.Number); err != nil {
				t.Fatal(err)
			}
		}
	}
	if p, err := src.BlockByNumber(ctx, backend.Pending); err == nil && head == nil {
		if err := dst.SetPending(p); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// copyBlocks is copyStore without the tags and the pending block.
func copyBlocks(t testing.TB, src *memstore.Store, head *backend.Block) *memstore.Store {
	t.Helper()
	var dump bytes.Buffer
	if err := src.Save(&dump); err != nil {
		t.Fatal(err)
	}
	dst, err := memstore.Load(&dump)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if id, err := src.ChainID(ctx); err == nil {
		if err := dst.SetChainID(id); err != nil {
			t.Fatal(err)
		}
	}
	if head != nil {
		if err := dst.AddBlock(head, storeUncles(t, src, head)...); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// prefixStore copies the canonical chain of src up to block n: a node
// that lags behind.
func prefixStore(t testing.TB, src *memstore.Store, n uint64) *memstore.Store {
	t.Helper()
	ctx := context.Background()
	dst := memstore.New()
	if id, err := src.ChainID(ctx); err == nil {
		if err := dst.SetChainID(id); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n + 1 {
		b := storeBlock(t, src, backend.BlockNumber(i))
		if err := dst.AddBlock(b, storeUncles(t, src, b)...); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// demoStore returns a new memstore holding the demo chain.
func demoStore(t testing.TB) *memstore.Store {
	t.Helper()
	store, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	return store
}
