package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/blockrpc/blockrpc/internal/answertest"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// Blocks of the demo chain that the tampering tests change. The tracker
// follows the chain by hash above the finalized block (94), and blocks at
// or below it are read by number: both ways are tried.
const (
	tamperWindowBlock = 104 // above the finalized block: blob and set-code transactions, withdrawals
	tamperFinalBlock  = 45  // below it: London, two uncles, legacy and dynamic-fee transactions
	tamperBerlinBlock = 15  // below it: Berlin, two uncles, legacy and access-list transactions
)

// rewriter is what a fake node's SetRewrite takes.
type rewriter = func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage

// uncleRewrite returns a rewrite that applies f to uncle i of the block
// with the given hash as eth_getUncleByBlockHashAndIndex answers it.
func uncleRewrite(block backend.Hash, i int, f func(json.RawMessage) json.RawMessage) rewriter {
	want := quoted(block.String())
	index := quoted(hexutil.EncodeUint64(uint64(i)))
	return func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method != "eth_getUncleByBlockHashAndIndex" || len(params) != 2 || !bytes.Equal(params[0], want) || !bytes.Equal(params[1], index) {
			return result
		}
		return f(result)
	}
}

// reencoded decodes a block object, lets change alter it, and renders it
// again in the same form: a block that an endpoint forged with care, its
// hashes recomputed where change says so.
func reencoded(change func(b *backend.Block)) func(json.RawMessage) json.RawMessage {
	return func(raw json.RawMessage) json.RawMessage {
		var b backend.Block
		if err := json.Unmarshal(raw, &b); err != nil {
			panic(err)
		}
		change(&b)
		return b.AppendJSON(nil, len(b.Transactions) > 0)
	}
}

// plusOne returns a quantity member's value plus one.
func plusOne(raw json.RawMessage) json.RawMessage {
	var v hexutil.Uint64
	if err := json.Unmarshal(raw, &v); err != nil {
		panic(err)
	}
	return quoted(hexutil.EncodeUint64(uint64(v) + 1))
}

// tamperCase is one field an endpoint changes.
type tamperCase struct {
	name    string
	number  uint64 // the demo block changed
	rewrite func(target *backend.Block) rewriter
	field   string // what the Backend's error names
}

func tamperCases() []tamperCase {
	block := func(f func(json.RawMessage) json.RawMessage) func(*backend.Block) rewriter {
		return func(target *backend.Block) rewriter { return blockRewrite(target.Hash, f) }
	}
	tx := func(i int, key string, value func(json.RawMessage) json.RawMessage) func(*backend.Block) rewriter {
		return block(rewriteTx(i, func(tx json.RawMessage) json.RawMessage { return setMember(tx, key, value(member(tx, key))) }))
	}
	uncle := func(i int, f func(json.RawMessage) json.RawMessage) func(*backend.Block) rewriter {
		return func(target *backend.Block) rewriter { return uncleRewrite(target.Hash, i, f) }
	}
	constant := func(s string) func(json.RawMessage) json.RawMessage {
		return func(json.RawMessage) json.RawMessage { return json.RawMessage(s) }
	}
	stranger := chaintest.Key(42).Address().String()
	return []tamperCase{
		{"header gasUsed", tamperWindowBlock, block(func(b json.RawMessage) json.RawMessage {
			return setMember(b, "gasUsed", plusOne(member(b, "gasUsed")))
		}), "hash"},
		{"header stateRoot", tamperFinalBlock, block(func(b json.RawMessage) json.RawMessage {
			return setMember(b, "stateRoot", quoted("0x"+strings.Repeat("ab", 32)))
		}), "hash"},
		{"header size", tamperWindowBlock, block(func(b json.RawMessage) json.RawMessage {
			return setMember(b, "size", plusOne(member(b, "size")))
		}), "size"},
		{"header and hash forged together", tamperWindowBlock, block(reencoded(func(b *backend.Block) {
			b.StateRoot[0] ^= 0xff // the same size
			b.Hash = backend.HeaderHash(&b.Header)
		})), "hash"},
		{"transaction value", tamperWindowBlock, tx(0, "value", plusOne), "transaction 0"},
		{"transaction input", tamperFinalBlock, tx(1, "input", constant(`"0xdeadbeef"`)), "transaction 1"},
		{"transaction nonce", tamperBerlinBlock, tx(0, "nonce", plusOne), "transaction 0"},
		{"transaction value and hash forged together", tamperWindowBlock, block(reencoded(func(b *backend.Block) {
			if len(b.Transactions) > 1 { // not the form with hashes only
				tx := b.Transactions[1]
				tx.Value.AddUint64(&tx.Value, 1)
				tx.Hash = backend.TransactionHash(tx)
			}
		})), "transactionsRoot"},
		{"transaction dropped", tamperFinalBlock, block(reencoded(func(b *backend.Block) {
			if len(b.Transactions) > 0 {
				b.Transactions = b.Transactions[:len(b.Transactions)-1]
			}
		})), "transactionsRoot"},
		{"transaction blockHash", tamperWindowBlock, tx(2, "blockHash", constant(`"0x`+strings.Repeat("12", 32)+`"`)), "blockHash"},
		{"sender of a blob transaction", tamperWindowBlock, tx(1, "from", constant(`"`+stranger+`"`)), "from"},
		{"sender of a legacy transaction", tamperBerlinBlock, tx(0, "from", constant(`"`+stranger+`"`)), "from"},
		{"withdrawal amount", tamperWindowBlock, block(reencoded(func(b *backend.Block) {
			b.Withdrawals[0].Amount++
		})), "withdrawalsRoot"},
		{"uncle field", tamperFinalBlock, uncle(1, func(u json.RawMessage) json.RawMessage {
			return setMember(u, "gasLimit", plusOne(member(u, "gasLimit")))
		}), "uncle 1"},
		{"uncle and its hash forged together", tamperBerlinBlock, uncle(0, func(raw json.RawMessage) json.RawMessage {
			var u backend.Uncle
			if err := json.Unmarshal(raw, &u); err != nil {
				panic(err)
			}
			u.StateRoot[0] ^= 0xff // the same size
			u.Hash = backend.HeaderHash(&u.Header)
			return u.AppendJSON(nil)
		}), "uncles[0]"},
		{"uncle hash list", tamperFinalBlock, block(func(b json.RawMessage) json.RawMessage {
			return setMember(b, "uncles", json.RawMessage(`["0x`+strings.Repeat("34", 32)+`","0x`+strings.Repeat("56", 32)+`"]`))
		}), "uncles[0]"},
		{"uncle hash list emptied", tamperBerlinBlock, block(func(b json.RawMessage) json.RawMessage {
			return setMember(b, "uncles", json.RawMessage(`[]`))
		}), "sha3Uncles"},
		{"uncle missing", tamperBerlinBlock, uncle(1, constant(`null`)), "uncle 1"},
	}
}

// TestTamperedRefused serves the demo chain from an endpoint that changes
// one field of one block: of the header, of a transaction, a sender, a
// withdrawal, an uncle or the list of uncles. The Backend must refuse the
// block by number and by hash (an error, never the block, never "not
// found"), log the endpoint and the field, answer the client -32000
// without a word of it, and cache nothing of it: once the endpoint serves
// the block as it is, the block is served as it is.
func TestTamperedRefused(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	ctx := context.Background()
	for _, tc := range tamperCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := storeBlock(t, store, backend.BlockNumber(tc.number))
			node := newFakeNode(t, store)
			logs := &logSink{}
			up := openUp(t, upstream.Config{PollInterval: idle, Logger: slog.New(logs)}, node.URL)
			node.SetRewrite(tc.rewrite(target))

			got, err := up.BlockByNumber(ctx, backend.BlockNumber(tc.number))
			checkRefused(t, "by number", got, err)
			var ve *upstream.VerifyError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("by number: the error %q is not a VerifyError naming %q", err, tc.field)
			}
			got, err = up.BlockByHash(ctx, target.Hash)
			checkRefused(t, "by hash", got, err)
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("by hash: the error %q does not name %q", err, tc.field)
			}
			if len(target.Uncles) > 0 {
				u, err := up.UncleByBlockHashAndIndex(ctx, target.Hash, 0)
				if u != nil || err == nil || errors.Is(err, backend.ErrNotFound) {
					t.Errorf("an uncle of the tampered block: %v, %v", u != nil, err)
				}
			}
			host := strings.TrimPrefix(upEndpointName(node.URL), "http://")
			if recs := logs.matching(slog.LevelError, host, tc.field); len(recs) == 0 {
				t.Errorf("no error logged naming the endpoint %s and %q; the logs:\n%s", host, tc.field, logs.all())
			}
			checkClientAnswer(t, up, tc.number)

			node.SetRewrite(nil)
			for _, how := range []string{"by number", "by hash"} {
				got, err := up.BlockByNumber(ctx, backend.BlockNumber(tc.number))
				if how == "by hash" {
					got, err = up.BlockByHash(ctx, target.Hash)
				}
				if err != nil {
					t.Fatalf("%s, once the endpoint is honest: %v", how, err)
				}
				if d := diffAnswer(got, target); d != "" {
					t.Fatalf("%s, once the endpoint is honest: %s", how, d)
				}
			}
			for i, want := range storeUncles(t, store, target) {
				u, err := up.UncleByBlockHashAndIndex(ctx, target.Hash, uint64(i))
				if err != nil || !bytes.Equal(u.AppendJSON(nil), want.AppendJSON(nil)) {
					t.Fatalf("uncle %d, once the endpoint is honest: %v", i, err)
				}
			}
		})
	}
}

// TestTamperedFailsOver gives the Backend a tampering primary and an
// honest secondary: the honest block is served, the primary is reported
// unhealthy, the secondary healthy.
func TestTamperedFailsOver(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	ctx := context.Background()
	for _, tc := range tamperCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := storeBlock(t, store, backend.BlockNumber(tc.number))
			liar, honest := newFakeNode(t, store), newFakeNode(t, store)
			// Two Backends, so that the block is fetched by number with
			// one and by hash with the other, rather than found cached.
			byNumber := openUp(t, upstream.Config{PollInterval: idle}, liar.URL, honest.URL)
			byHash := openUp(t, upstream.Config{PollInterval: idle}, liar.URL, honest.URL)
			liar.SetRewrite(tc.rewrite(target))
			got, err := byNumber.BlockByNumber(ctx, backend.BlockNumber(tc.number))
			if err != nil {
				t.Fatalf("by number: %v", err)
			}
			checkLiarReported(t, byNumber, tc.field)
			if d := diffAnswer(got, target); d != "" {
				t.Fatalf("by number: not the honest block: %s", d)
			}
			got, err = byHash.BlockByHash(ctx, target.Hash)
			if err != nil {
				t.Fatalf("by hash: %v", err)
			}
			checkLiarReported(t, byHash, tc.field)
			if d := diffAnswer(got, target); d != "" {
				t.Fatalf("by hash: not the honest block: %s", d)
			}
			for i, want := range storeUncles(t, store, target) {
				u, err := byNumber.UncleByBlockHashAndIndex(ctx, target.Hash, uint64(i))
				if err != nil || !bytes.Equal(u.AppendJSON(nil), want.AppendJSON(nil)) {
					t.Fatalf("uncle %d: %v", i, err)
				}
			}
		})
	}
}

// checkLiarReported checks that the first endpoint is reported unhealthy
// for what it did, and the second healthy.
func checkLiarReported(t *testing.T, up *upstream.Backend, field string) {
	t.Helper()
	st := up.Status()
	if st[0].Healthy || !strings.Contains(st[0].LastError, field) {
		t.Errorf("the tampering endpoint's status: %+v; want unhealthy, its last error naming %q", st[0], field)
	}
	if !st[1].Healthy || st[1].LastError != "" {
		t.Errorf("the honest endpoint's status: %+v", st[1])
	}
}

// checkClientAnswer asks for block n through blockrpc's handler over the
// Backend: the client must get -32000 and no result, and nothing of the
// block or of why it was refused.
func checkClientAnswer(t *testing.T, up *upstream.Backend, n uint64) {
	t.Helper()
	h := blockrpc.NewHandler(blockrpc.NewService(up), blockrpc.WithKeys(blockrpc.AnyKey), blockrpc.WithLogger(discardLogger()))
	answertest.BlockByNumber(t, h, n, true).CheckBackendFailure(t, "the client's answer")
}

// upEndpointName is an endpoint as the Backend names it: scheme and host.
func upEndpointName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return u.Scheme + "://" + u.Host
}

// TestTamperedNeverCached checks, with two endpoints, that what a
// tampering endpoint gave is not what later answers are made of: the
// honest block is cached, and a second tampering endpoint afterwards
// changes nothing.
func TestTamperedNeverCached(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	ctx := context.Background()
	target := storeBlock(t, store, tamperWindowBlock)
	a, b := newFakeNode(t, store), newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, a.URL, b.URL)
	// A sender is the last thing checked, after every hash and root.
	var sender tamperCase
	for _, tc := range tamperCases() {
		if tc.name == "sender of a blob transaction" {
			sender = tc
		}
	}
	a.SetRewrite(sender.rewrite(target))
	b.SetRewrite(sender.rewrite(target))
	got, err := up.BlockByHash(ctx, target.Hash)
	checkRefused(t, "both endpoints tampering", got, err)
	got, err = up.BlockByNumber(ctx, tamperWindowBlock)
	checkRefused(t, "both endpoints tampering, by number", got, err)

	b.SetRewrite(nil)
	for range 3 {
		got, err := up.BlockByNumber(ctx, tamperWindowBlock)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffAnswer(got, target); d != "" {
			t.Fatal(d)
		}
	}
	// Now only the secondary tampers: the cached honest block is served.
	a.SetRewrite(nil)
	b.SetRewrite(sender.rewrite(target))
	got, err = up.BlockByHash(ctx, target.Hash)
	if err != nil || diffAnswer(got, target) != "" {
		t.Fatalf("the cached block: %v", err)
	}
}

// TestPendingTampered changes a transaction or a root of the pending
// block: it is refused, not served and not "not found"; served as it is once the
// endpoint is honest.
func TestPendingTampered(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	want := storeBlock(t, store, backend.Pending)
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(json.RawMessage) json.RawMessage
	}{
		{"transaction value", rewriteTx(0, func(tx json.RawMessage) json.RawMessage { return setMember(tx, "value", plusOne(member(tx, "value"))) })},
		{"sender", rewriteTx(0, func(tx json.RawMessage) json.RawMessage {
			return setMember(tx, "from", quoted(chaintest.Key(42).Address().String()))
		})},
		// Not a header field the hash alone commits to (gasUsed, the
		// state root): the pending block has no hash yet, so those cannot
		// be checked; its roots can.
		{"transactionsRoot", func(b json.RawMessage) json.RawMessage {
			return setMember(b, "transactionsRoot", quoted("0x"+strings.Repeat("ab", 32)))
		}},
	} {
		node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
			if method == "eth_getBlockByNumber" && string(params[0]) == `"pending"` {
				return tc.change(result)
			}
			return result
		})
		got, err := up.BlockByNumber(ctx, backend.Pending)
		checkRefused(t, "the pending block with its "+tc.name+" changed", got, err)
	}
	node.SetRewrite(nil)
	got, err := up.BlockByNumber(ctx, backend.Pending)
	if err != nil || diffAnswer(got, want) != "" {
		t.Fatalf("the pending block, once honest: %v %s", err, diffAnswer(got, want))
	}
}

// TestTooManyUncles has an endpoint list 10,000 uncles for a block, whose
// hash holds (the list is not in the header): the block is refused
// before any uncle is asked for, in what would be a batch of 10,000 calls.
func TestTooManyUncles(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	target := storeBlock(t, store, backend.BlockNumber(tamperFinalBlock))
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	hashes := make([]string, 10000)
	for i := range hashes {
		hashes[i] = fmt.Sprintf(`"0x%064x"`, i)
	}
	node.SetRewrite(blockRewrite(target.Hash, func(b json.RawMessage) json.RawMessage {
		return setMember(b, "uncles", json.RawMessage("["+strings.Join(hashes, ",")+"]"))
	}))
	got, err := up.BlockByNumber(context.Background(), backend.BlockNumber(target.Number))
	checkRefused(t, "by number", got, err)
	if !strings.Contains(err.Error(), "10000 listed") {
		t.Errorf("the error %q does not say how many uncles were listed", err)
	}
	if n := node.Calls("eth_getUncleByBlockHashAndIndex"); n != 0 {
		t.Errorf("%d uncles asked for", n)
	}
}

// TestThreeUnclesRefused has an endpoint forge block 45 with a third
// uncle, every hash, root and size recomputed so that the block holds
// together: a block may have two uncles, and one with three is refused
// before its uncles are asked for.
func TestThreeUnclesRefused(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	target := storeBlock(t, store, backend.BlockNumber(tamperFinalBlock))
	var uncles []*backend.Uncle
	for _, u := range storeUncles(t, store, target) {
		c := *u
		uncles = append(uncles, &c)
	}
	if len(uncles) != 2 {
		t.Fatalf("block %d has %d uncles, want 2", target.Number, len(uncles))
	}
	third := *uncles[0]
	third.Timestamp += 100
	third.Hash, third.Size = backend.Hash{}, 0
	uncles = append(uncles, &third)
	third.Hash = backend.HeaderHash(&third.Header)
	forged := target.Copy()
	forged.Uncles = append(forged.Uncles, third.Hash)
	forged.Sha3Uncles, forged.Hash, forged.Size = backend.Hash{}, backend.Hash{}, 0
	if err := backend.Seal(forged, uncles); err != nil {
		t.Fatalf("forging: %v", err)
	}
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	targetHash, forgedHash := quoted(target.Hash.String()), quoted(forged.Hash.String())
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		switch {
		case (method == "eth_getBlockByNumber" || method == "eth_getBlockByHash") && bytes.Equal(member(result, "hash"), targetHash):
			return forged.AppendJSON(nil, len(params) > 1 && string(params[1]) == "true")
		case method == "eth_getUncleByBlockHashAndIndex" && len(params) == 2 && bytes.Equal(params[0], forgedHash):
			var i hexutil.Uint64
			if json.Unmarshal(params[1], &i) == nil && int(i) < len(uncles) {
				return uncles[i].AppendJSON(nil)
			}
		}
		return result
	})
	got, err := up.BlockByNumber(context.Background(), backend.BlockNumber(target.Number))
	checkRefused(t, "a block with three uncles", got, err)
	if !strings.Contains(err.Error(), "3 listed") {
		t.Errorf("the error %q does not say how many uncles were listed", err)
	}
}

// TestBlockWithoutHashRefused has an endpoint leave out a block's hash,
// and its transactions' blockHash: the block is refused, by number and by
// hash, not sealed with a hash of the Backend's making.
func TestBlockWithoutHashRefused(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	ctx := context.Background()
	for _, n := range []uint64{tamperWindowBlock} {
		target := storeBlock(t, store, backend.BlockNumber(n))
		node := newFakeNode(t, store)
		up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
		// Matched by number: blockRewrite's hash is what is dropped.
		num := quoted(hexutil.EncodeUint64(n))
		node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
			if (method == "eth_getBlockByNumber" || method == "eth_getBlockByHash") && bytes.Equal(member(result, "number"), num) {
				return withoutHashes(result)
			}
			return result
		})
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(n))
		checkRefused(t, "by number, without its hash", got, err)
		var ve *upstream.VerifyError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), "hash") {
			t.Errorf("block %d by number: the error %q is not a VerifyError naming the hash", n, err)
		}
		got, err = up.BlockByHash(ctx, target.Hash)
		checkRefused(t, "by hash, without its hash", got, err)
	}
}

// TestTransactionHashesWhereObjectsAskedRefused has an endpoint answer a
// block with its transaction hashes where their objects were asked for:
// neither the transactions nor their root can be checked, and a client
// that asks for the objects would get hashes. It is refused.
func TestTransactionHashesWhereObjectsAskedRefused(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	ctx := context.Background()
	for _, n := range []uint64{tamperWindowBlock, tamperFinalBlock} {
		target := storeBlock(t, store, backend.BlockNumber(n))
		if target.TxCount() == 0 {
			t.Fatalf("block %d has no transactions", n)
		}
		node := newFakeNode(t, store)
		up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
		node.SetRewrite(blockRewrite(target.Hash, func(raw json.RawMessage) json.RawMessage {
			var b backend.Block
			if err := json.Unmarshal(raw, &b); err != nil {
				panic(err)
			}
			return b.AppendJSON(nil, false)
		}))
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(n))
		checkRefused(t, "by number, with transaction hashes", got, err)
		got, err = up.BlockByHash(ctx, target.Hash)
		checkRefused(t, "by hash, with transaction hashes", got, err)
		var ve *upstream.VerifyError
		if !errors.As(err, &ve) {
			t.Errorf("block %d: the error %q is not a VerifyError", n, err)
		}
	}
}

// TestPendingWithoutNonce has an endpoint answer the pending block's
// nonce null, as go-ethereum does: the block served has the zero nonce of
// a proof-of-stake block, the one the endpoint's own pending block has.
func TestPendingWithoutNonce(t *testing.T) {
	t.Parallel()
	store := demoStore(t)
	want := storeBlock(t, store, backend.Pending)
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
		if method == "eth_getBlockByNumber" && len(params) > 0 && string(params[0]) == `"pending"` {
			return setMember(result, "nonce", json.RawMessage("null"))
		}
		return result
	})
	got, err := up.BlockByNumber(context.Background(), backend.Pending)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffAnswer(got, want); d != "" {
		t.Fatalf("the pending block without its nonce: %s", d)
	}
	if got.Nonce != (backend.Nonce{}) {
		t.Errorf("the pending block's nonce is %v, want zero", got.Nonce)
	}
}
