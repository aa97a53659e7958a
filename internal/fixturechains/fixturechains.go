// Package fixturechains loads the chains of the shared conformance
// fixtures (../shared/fixtures, found by internal/fixtures) into memstore,
// through its public API, for the tests that compare a backend or a store
// with memstore over real chains. A loader skips its test when the
// fixtures are not there.
package fixturechains

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/internal/rlptest"
	"github.com/blockrpc/blockrpc/memstore"
)

// A Chain is one chain of the fixtures, in memstore.
type Chain struct {
	// Name is the fixture's: "execution-apis", "mainnet", or
	// "ethereum-tests/" and the test's directory and name.
	Name  string
	Store *memstore.Store
	// Hashes are those of every block stored, side blocks included, once
	// each, a parent before its children: in the order they were written,
	// or for the mainnet blocks, which are not a chain, by number.
	Hashes []backend.Hash
}

// All returns every chain of the fixtures: the execution-apis chain, the
// ethereum-tests chains and the mainnet blocks.
func All(t testing.TB) []Chain {
	t.Helper()
	return slices.Concat([]Chain{ExecutionAPIs(t)}, EthereumTests(t), []Chain{Mainnet(t)})
}

// ExecutionAPIs loads the execution-apis chain: the genesis block as
// go-ethereum answered it (get-genesis.io), then the 54 blocks of
// chain.rlp with their uncles and recovered senders, and the fork choice
// of headfcu.json (head, safe and finalized all block 54).
func ExecutionAPIs(t testing.TB) Chain {
	t.Helper()
	dir := fixtures.Path(t, "execution-apis")
	c := Chain{Name: "execution-apis", Store: memstore.New()}
	genesis := ioAnswer(t, filepath.Join(dir, "eth_getBlockByNumber", "get-genesis.io"))
	var g backend.Block
	if err := json.Unmarshal(genesis, &g); err != nil {
		t.Fatalf("get-genesis.io: %v", err)
	}
	if err := c.Store.AddBlock(&g); err != nil {
		t.Fatalf("genesis: %v", err)
	}
	c.Hashes = append(c.Hashes, g.Hash)
	data, err := os.ReadFile(filepath.Join(dir, "chain.rlp"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rest := data; len(rest) > 0; n++ {
		var item rlptest.Item
		if item, rest, err = rlptest.Decode(rest); err != nil {
			t.Fatalf("chain.rlp block %d: %v", n, err)
		}
		b, uncles := blockFromRLP(t, item)
		if err := c.Store.AddBlock(b, uncles...); err != nil {
			t.Fatalf("chain.rlp: %v", err)
		}
		c.Hashes = append(c.Hashes, backend.HeaderHash(&b.Header))
	}
	if n != 54 {
		t.Fatalf("chain.rlp holds %d blocks, want 54", n)
	}
	var fcu struct {
		Params []struct {
			Head      backend.Hash `json:"headBlockHash"`
			Safe      backend.Hash `json:"safeBlockHash"`
			Finalized backend.Hash `json:"finalizedBlockHash"`
		} `json:"params"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "headfcu.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &fcu); err != nil || len(fcu.Params) == 0 {
		t.Fatalf("headfcu.json: %v", err)
	}
	ctx := context.Background()
	for _, tag := range []struct {
		hash backend.Hash
		set  func(uint64) error
	}{{fcu.Params[0].Safe, c.Store.SetSafe}, {fcu.Params[0].Finalized, c.Store.SetFinalized}} {
		b, err := c.Store.BlockByHash(ctx, tag.hash)
		if err != nil {
			t.Fatalf("headfcu.json names %s: %v", tag.hash, err)
		}
		if err := tag.set(b.Number); err != nil {
			t.Fatal(err)
		}
	}
	if head, err := c.Store.BlockByNumber(ctx, backend.Latest); err != nil || head.Hash != fcu.Params[0].Head {
		t.Fatalf("the chain's head is not headfcu.json's %s (%v)", fcu.Params[0].Head, err)
	}
	return c
}

// ioAnswer returns the result of the one exchange of an execution-apis .io
// file.
func ioAnswer(t testing.TB, path string) json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "<< "); ok {
			var resp struct{ Result json.RawMessage }
			if err := json.Unmarshal([]byte(rest), &resp); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return resp.Result
		}
	}
	t.Fatalf("%s: no answer", path)
	return nil
}

// EthereumTests loads every test of the ethereum-tests fixtures: the
// genesis and every valid block, the canonical chain being the one that
// ends at lastblockhash and the other blocks side blocks. Chain id 1.
func EthereumTests(t testing.TB) []Chain {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtures.Path(t, "ethereum-tests"), "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ethereum-tests fixtures: %v", err)
	}
	var out []Chain
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tests map[string]struct {
			GenesisRLP string `json:"genesisRLP"`
			Blocks     []struct {
				RLP             string `json:"rlp"`
				ExpectException string `json:"expectException"`
			} `json:"blocks"`
			LastBlockHash backend.Hash `json:"lastblockhash"`
		}
		if err := json.Unmarshal(data, &tests); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		keys := make([]string, 0, len(tests))
		for k := range tests {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			test := tests[k]
			c := Chain{Name: "ethereum-tests/" + filepath.Base(filepath.Dir(f)) + "/" + k, Store: memstore.New()}
			if err := c.Store.SetChainID(1); err != nil {
				t.Fatal(err)
			}
			add := func(what, hexRLP string, canonical bool) *backend.Block {
				raw, err := hexutil.Decode(hexRLP)
				if err != nil {
					t.Fatalf("%s %s: %v", c.Name, what, err)
				}
				item, rest, err := rlptest.Decode(raw)
				if err != nil || len(rest) != 0 {
					t.Fatalf("%s %s: not one RLP value (%v)", c.Name, what, err)
				}
				b, uncles := blockFromRLP(t, item)
				addTo := c.Store.AddSideBlock
				if canonical {
					addTo = c.Store.AddBlock
				}
				if err := addTo(b, uncles...); err != nil {
					t.Fatalf("%s %s: %v", c.Name, what, err)
				}
				if h := backend.HeaderHash(&b.Header); !slices.Contains(c.Hashes, h) {
					c.Hashes = append(c.Hashes, h)
				}
				return b
			}
			add("genesisRLP", test.GenesisRLP, true)
			var lastRLP string
			for i, fb := range test.Blocks {
				if fb.ExpectException != "" {
					continue // an invalid block: no node has it
				}
				if b := add(fmt.Sprintf("blocks[%d]", i), fb.RLP, false); backend.HeaderHash(&b.Header) == test.LastBlockHash {
					lastRLP = fb.RLP
				}
			}
			if lastRLP == "" {
				t.Fatalf("%s: lastblockhash %s is none of its blocks", c.Name, test.LastBlockHash)
			}
			// Adding a stored block again makes it and its ancestors the
			// canonical chain.
			add("the last block", lastRLP, true)
			out = append(out, c)
		}
	}
	return out
}

// Mainnet loads the blocks that the mainnet fixtures answer (sparse: the
// genesis, 4,306,300, 16,000,000, 18,000,000 and 19,665,755), as the root
// package's tests do: through the dump loader. Some are known by their
// transaction hashes only.
func Mainnet(t testing.TB) Chain {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtures.Path(t, "mainnet"), "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no mainnet fixtures: %v", err)
	}
	c := Chain{Name: "mainnet"}
	var dump bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cases []struct {
			Response struct{ Result json.RawMessage } `json:"response"`
		}
		if err := json.Unmarshal(data, &cases); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, r := range cases {
			if len(r.Response.Result) == 0 || string(r.Response.Result) == "null" {
				continue
			}
			var named struct{ Hash backend.Hash }
			if err := json.Unmarshal(r.Response.Result, &named); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if !slices.Contains(c.Hashes, named.Hash) {
				c.Hashes = append(c.Hashes, named.Hash)
			}
			dump.WriteString(`{"block":`)
			if err := json.Compact(&dump, r.Response.Result); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			dump.WriteString("}\n")
		}
	}
	if c.Store, err = memstore.Load(&dump); err != nil {
		t.Fatalf("mainnet fixtures: %v", err)
	}
	// In the order of their numbers, as a store is written: the blocks are
	// far apart, but a store may still want a parent first.
	number := make(map[backend.Hash]uint64, len(c.Hashes))
	for _, h := range c.Hashes {
		b, err := c.Store.BlockByHash(context.Background(), h)
		if err != nil {
			t.Fatalf("mainnet fixtures: block %s not stored: %v", h, err)
		}
		number[h] = b.Number
	}
	slices.SortStableFunc(c.Hashes, func(a, b backend.Hash) int { return cmp.Compare(number[a], number[b]) })
	return c
}
