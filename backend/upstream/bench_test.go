package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/internal/fixturechains"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
)

// BenchmarkCacheHit reads blocks the Backend has cached, beside memstore
// reading the same blocks in the same run: the goal is an upstream hit
// within 10% of memstore. "final" is a block at or below the finalized
// one, cached by number; "window" a block above it, read through the
// tracker's view and the cache by hash.
func BenchmarkCacheHit(b *testing.B) {
	store, err := demo.Store()
	if err != nil {
		b.Fatal(err)
	}
	node := newFakeNode(b, store)
	up := openUp(b, upstream.Config{PollInterval: idle}, node.URL)
	ctx := context.Background()
	const final, window = 50, 104
	hash := storeBlock(b, store, final).Hash
	for _, n := range []backend.BlockNumber{final, window, backend.Latest} {
		if _, err := up.BlockByNumber(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	calls := blockCalls(node)
	type reader interface {
		BlockByNumber(context.Context, backend.BlockNumber) (*backend.Block, error)
		BlockByHash(context.Context, backend.Hash) (*backend.Block, error)
	}
	for _, bc := range []struct {
		name string
		read func(r reader) (*backend.Block, error)
	}{
		{"number-final", func(r reader) (*backend.Block, error) { return r.BlockByNumber(ctx, final) }},
		{"number-window", func(r reader) (*backend.Block, error) { return r.BlockByNumber(ctx, window) }},
		{"hash", func(r reader) (*backend.Block, error) { return r.BlockByHash(ctx, hash) }},
		{"latest", func(r reader) (*backend.Block, error) { return r.BlockByNumber(ctx, backend.Latest) }},
	} {
		for _, be := range []struct {
			name string
			r    reader
		}{{"memstore", store}, {"upstream", up}} {
			b.Run(bc.name+"/"+be.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := bc.read(be.r); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(bc.name+"/"+be.name+"-parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := bc.read(be.r); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
	if c := blockCalls(node); c != calls {
		b.Fatalf("%d block requests reached the node: not all hits", c-calls)
	}
}

// staticNode answers the requests the Backend makes from answers rendered
// beforehand, so that a benchmark of a miss measures the Backend (the
// request, decoding, verification) and little of the node.
type staticNode struct {
	answers map[string][]byte // by method and parameters
	URL     string
}

func newStaticNode(b *testing.B, store *memstore.Store, head *backend.Block) *staticNode {
	b.Helper()
	n := &staticNode{answers: make(map[string][]byte)}
	for _, sb := range storedBlocks(b, store) {
		blk, err := store.BlockByHash(context.Background(), sb.hash)
		if err != nil {
			b.Fatal(err)
		}
		for _, full := range []bool{true, false} {
			answer := blk.AppendJSON(nil, full)
			n.answers[staticKey("eth_getBlockByHash", `"`+blk.Hash.String()+`"`, full)] = answer
			n.answers[staticKey("eth_getBlockByNumber", fmt.Sprintf(`"%#x"`, blk.Number), full)] = answer
			if blk.Hash == head.Hash {
				n.answers[staticKey("eth_getBlockByNumber", `"latest"`, full)] = answer
			}
		}
	}
	for _, tag := range []string{`"safe"`, `"finalized"`} {
		n.answers[staticKey("eth_getBlockByNumber", tag, false)] = []byte("null")
	}
	id, err := store.ChainID(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	n.answers["eth_chainId"] = fmt.Appendf(nil, `"%#x"`, id)
	srv := httptest.NewServer(n)
	b.Cleanup(srv.Close)
	n.URL = srv.URL
	return n
}

func staticKey(method, arg string, full bool) string {
	return fmt.Sprintf("%s %s %v", method, arg, full)
}

type staticCall struct {
	ID     json.RawMessage
	Method string
	Params []json.RawMessage
}

func (n *staticNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		return
	}
	var calls []staticCall
	batch := bytes.HasPrefix(bytes.TrimSpace(body.Bytes()), []byte("["))
	if batch {
		if err := json.Unmarshal(body.Bytes(), &calls); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	} else {
		calls = make([]staticCall, 1)
		if err := json.Unmarshal(body.Bytes(), &calls[0]); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	var out []byte
	if batch {
		out = append(out, '[')
	}
	for i, c := range calls {
		key := c.Method
		if len(c.Params) == 2 {
			key = staticKey(c.Method, string(c.Params[0]), string(c.Params[1]) == "true")
		}
		result, ok := n.answers[key]
		if !ok {
			result = []byte("null")
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"jsonrpc":"2.0","id":`...)
		out = append(out, c.ID...)
		out = append(out, `,"result":`...)
		out = append(out, result...)
		out = append(out, '}')
	}
	if batch {
		out = append(out, ']')
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// BenchmarkMiss measures a block the Backend has not cached (the cache is
// off): the request, the answer read and decoded, every hash, root, size
// and sender checked, and the parent's total difficulty asked for where
// the block gives one. Reported per block (ns/op) and per transaction
// (ns/tx), beside the decoding and verification alone, without a network
// ("verify"), through the public functions the Backend calls.
func BenchmarkMiss(b *testing.B) {
	// A chain of 200 transactions a block, of every type.
	b.Run("chaintest-200tx", func(b *testing.B) {
		c := chaintest.New(chaintest.Config{Seed: 41})
		c.AddBlocks(4, chaintest.Txs(200))
		s := c.Store()
		benchMiss(b, s, storeBlock(b, s, backend.Latest), storeBlock(b, s, 3))
	})
	// The mainnet block of 94 transactions; the node's head is the
	// genesis, since the fixture blocks are not a chain.
	b.Run("mainnet-18000000-94tx", func(b *testing.B) {
		s := fixturechains.Mainnet(b).Store
		benchMiss(b, s, storeBlock(b, s, backend.Earliest), storeBlock(b, s, 18_000_000))
	})
}

// benchMiss reads block from a node serving store whose latest block is
// head.
func benchMiss(b *testing.B, store *memstore.Store, head, block *backend.Block) {
	txs := len(block.Transactions)
	perTx := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(txs), "ns/tx")
	}
	b.Run("backend", func(b *testing.B) {
		node := newStaticNode(b, store, head)
		up := openUp(b, upstream.Config{PollInterval: idle, CacheBytes: -1}, node.URL)
		ctx := context.Background()
		b.ReportAllocs()
		b.SetBytes(int64(len(block.AppendJSON(nil, true))))
		for b.Loop() {
			got, err := up.BlockByHash(ctx, block.Hash)
			if err != nil {
				b.Fatal(err)
			}
			if len(got.Transactions) != txs {
				b.Fatal("a wrong block")
			}
		}
		perTx(b)
	})
	b.Run("verify", func(b *testing.B) {
		raw := block.AppendJSON(nil, true)
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var blk backend.Block
			if err := json.Unmarshal(raw, &blk); err != nil {
				b.Fatal(err)
			}
			if err := backend.Seal(&blk, nil); err != nil {
				b.Fatal(err)
			}
			if err := backend.VerifySenders(&blk); err != nil {
				b.Fatal(err)
			}
		}
		perTx(b)
	})
}
