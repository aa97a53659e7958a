package blockrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/handlerbench"
	"github.com/blockrpc/blockrpc/memstore"
)

// largestMainnetBlock loads the largest block of the mainnet fixtures
// (18,000,000: 94 transactions, a 650 KB answer) into a store.
func largestMainnetBlock(t testing.TB) (*memstore.Store, *backend.Block) {
	t.Helper()
	store, err := memstore.Load(bytes.NewReader(mainnetDump(t, mainnetCases(t))))
	if err != nil {
		t.Fatal(err)
	}
	block, err := store.BlockByNumber(context.Background(), 18_000_000)
	if err != nil {
		t.Fatal(err)
	}
	return store, block
}

// BenchmarkHandler measures whole answers through ServeHTTP: reading the
// request, the backend lookup, encoding (or the answer cache), and writing.
// MB/s counts the JSON of the answer. "cold" renders every answer, as the
// handler does with the cache off or for a block not yet in it.
func BenchmarkHandler(b *testing.B) {
	store, _ := largestMainnetBlock(b)
	handlers := map[string]http.Handler{
		"cold":   newHandler(store, blockrpc.WithAnswerCache(0)),
		"cached": newHandler(store),
	}
	for _, cache := range []string{"cold", "cached"} {
		h := handlers[cache]
		for _, bc := range []struct {
			name, body string
		}{
			{"full", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x112A880",true]}`},
			{"hashes", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x112A880",false]}`},
		} {
			b.Run(bc.name+"/"+cache, func(b *testing.B) {
				c, body := handlerbench.New("/v3/"+testKey), []byte(bc.body)
				status, n := c.Call(h, body)
				if status != http.StatusOK || n < 1000 {
					b.Fatalf("status %d, %d bytes", status, n)
				}
				b.SetBytes(int64(n))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					c.Call(h, body)
				}
			})
		}
	}
}

// BenchmarkEncode measures the block encoder alone, and beside it the
// reference: the same block as a map marshalled by encoding/json, which is
// how go-ethereum builds its answers.
func BenchmarkEncode(b *testing.B) {
	_, block := largestMainnetBlock(b)
	for _, fullTx := range []bool{true, false} {
		name := map[bool]string{true: "full", false: "hashes"}[fullTx]
		b.Run(name+"/blockrpc", func(b *testing.B) {
			buf := block.AppendJSON(nil, fullTx)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = block.AppendJSON(buf[:0], fullTx)
			}
		})
		b.Run(name+"/encoding-json-map", func(b *testing.B) {
			var fields map[string]any
			if err := json.Unmarshal(block.AppendJSON(nil, fullTx), &fields); err != nil {
				b.Fatal(err)
			}
			out, _ := json.Marshal(fields)
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(fields); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
