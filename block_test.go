package blockrpc_test

// Block results: by number and tag, pending, safe and finalized, by hash,
// and the order of a block's members.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/google/go-cmp/cmp"
)

// checkBlockObject checks what every block answer has: a hash, or null for
// the pending block, and a totalDifficulty member.
func checkBlockObject(t testing.TB, block map[string]any) {
	t.Helper()
	if _, ok := block["totalDifficulty"]; !ok {
		t.Errorf("block %v has no totalDifficulty member", block["number"])
	}
	for _, member := range []string{"hash", "parentHash", "number", "transactions", "uncles", "difficulty", "size"} {
		if _, ok := block[member]; !ok {
			t.Errorf("block %v has no %s member", block["number"], member)
		}
	}
}

// TestTypedAPIAndWireAgree checks that the typed API and the wire agree:
// what Service.GetBlockByNumber returns marshals to exactly what the handler
// sends for the same number or tag, with and without full transactions, so
// that the pending and fullTx view rules cannot differ between the two. It
// covers the pending block and the numbers and tags that select nothing
// (nil, answered null), and checks the wire's blocks against the chain.
func TestTypedAPIAndWireAgree(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	svc := blockrpc.NewService(c.store)
	const (
		none    = -1 // answered null
		pending = -2 // the pending block, whose view TestGetBlockByNumberPending checks
	)
	for _, tc := range []struct {
		param string
		want  int // the canonical block answered, or none or pending
	}{
		{"0x0", 0},
		{"0x1", 1},
		{"0x2", 2},
		{"0x3", 3},
		{"0x4", none}, // the pending block is not canonical
		{"0xA", none},
		{"0x7fffffffffffffff", none},
		{"latest", 3},
		{"earliest", 0},
		{"pending", pending},
		{"safe", none},
		{"finalized", none},
	} {
		for _, fullTx := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fullTx=%v", tc.param, fullTx), func(t *testing.T) {
				a := call(t, srv, rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`[%q,%v]`, tc.param, fullTx)))

				// The handler sends what the typed Service returns.
				number, err := backend.ParseBlockNumber(tc.param)
				if err != nil {
					t.Fatal(err)
				}
				typed, err := svc.GetBlockByNumber(context.Background(), number, fullTx)
				if err != nil {
					t.Fatalf("Service.GetBlockByNumber: %v", err)
				}
				if (typed == nil) != (tc.want == none) {
					t.Errorf("Service.GetBlockByNumber = %v, want nil exactly when there is no such block", typed)
				}
				typedJSON, err := json.Marshal(typed)
				if err != nil {
					t.Fatal(err)
				}
				if a.Error != nil {
					t.Fatalf("answer is error %d %q", a.Error.Code, a.Error.Message)
				}
				if diff := cmp.Diff(decode(t, typedJSON), decode(t, a.Result)); diff != "" {
					t.Errorf("answer differs from Service.GetBlockByNumber (-typed +answer):\n%s", diff)
				}

				switch tc.want {
				case none:
					checkNullResult(t, a)
				case pending:
					checkBlockObject(t, resultObject(t, a))
				default:
					checkChainBlock(t, resultObject(t, a), c.blocks[tc.want], fullTx)
				}
			})
		}
	}
}

// checkChainBlock checks a block answer against the block of the chain it
// is: number, hash, total difficulty and transactions.
func checkChainBlock(t *testing.T, block map[string]any, want *backend.Block, fullTx bool) {
	t.Helper()
	checkBlockObject(t, block)
	checkBlockNumber(t, block, fmt.Sprintf("0x%x", want.Number))
	if block["hash"] != want.Hash.String() {
		t.Errorf("hash %v, want %s", block["hash"], want.Hash)
	}
	if block["totalDifficulty"] != hexU256(want.TotalDifficulty) {
		t.Errorf("totalDifficulty %v, want %s", block["totalDifficulty"], hexU256(want.TotalDifficulty))
	}
	txs, _ := block["transactions"].([]any)
	if len(txs) != len(want.Transactions) {
		t.Fatalf("%d transactions, want %d", len(txs), len(want.Transactions))
	}
	for i, tx := range txs {
		wantHash := want.Transactions[i].Hash.String()
		if !fullTx {
			if tx != wantHash {
				t.Errorf("transactions[%d] = %v, want the hash %s", i, tx, wantHash)
			}
			continue
		}
		obj, ok := tx.(map[string]any)
		if !ok || obj["hash"] != wantHash || obj["blockHash"] != want.Hash.String() || obj["transactionIndex"] != fmt.Sprintf("0x%x", i) {
			t.Errorf("transactions[%d] = %v, want the object of %s at index %d of block %s", i, tx, wantHash, i, want.Hash)
		}
	}
}

func TestGetBlockByNumberTagsFollowTheChain(t *testing.T) {
	// A chain held from block 100 on, without its ancestry.
	c := &testChain{store: memstore.New()}
	for n := uint64(100); n <= 102; n++ {
		c.add(t, &backend.Block{Header: testHeader(n)})
	}
	if err := c.store.SetSafe(101); err != nil {
		t.Fatal(err)
	}
	if err := c.store.SetFinalized(100); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, c.store)
	for _, tc := range []struct{ tag, want string }{
		{"earliest", "0x64"},
		{"latest", "0x66"},
		{"safe", "0x65"},
		{"finalized", "0x64"},
		{"0x65", "0x65"},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			block := resultObject(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["`+tc.tag+`",false]`)))
			checkBlockObject(t, block)
			checkBlockNumber(t, block, tc.want)
			// Without the ancestry the total difficulty is unknown, and
			// the member is there all the same.
			if td, ok := block["totalDifficulty"]; !ok || td != nil {
				t.Errorf("totalDifficulty %v (present %v), want null", td, ok)
			}
		})
	}
	checkNullResult(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["0x63",false]`)))
	checkNullResult(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["pending",false]`)))

	// An empty chain has no block for any tag.
	empty := newServer(t, memstore.New())
	for _, tag := range []string{"earliest", "latest", "pending", "safe", "finalized", "0x0"} {
		checkNullResult(t, call(t, empty, rpcRequest("eth_getBlockByNumber", `["`+tag+`",true]`)))
	}
}

func TestGetBlockByNumberPending(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	for _, fullTx := range []bool{false, true} {
		t.Run(fmt.Sprintf("fullTx=%v", fullTx), func(t *testing.T) {
			block := resultObject(t, call(t, srv, rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`["pending",%v]`, fullTx))))
			checkBlockObject(t, block)
			for _, member := range []string{"hash", "nonce", "logsBloom", "number"} {
				if v, ok := block[member]; !ok || v != nil {
					t.Errorf("%s = %v (present %v), want null", member, v, ok)
				}
			}
			if block["parentHash"] != c.blocks[3].Hash.String() {
				t.Errorf("parentHash %v, want %s", block["parentHash"], c.blocks[3].Hash)
			}
			wantTime := fmt.Sprintf("0x%x", c.pending.Timestamp)
			if block["timestamp"] != wantTime {
				t.Errorf("timestamp %v, want %s", block["timestamp"], wantTime)
			}
			txs, _ := block["transactions"].([]any)
			if len(txs) != 1 {
				t.Fatalf("transactions %v, want one", block["transactions"])
			}
			if !fullTx {
				if s, ok := txs[0].(string); !ok || len(s) != 66 {
					t.Errorf("transactions[0] = %v, want a hash", txs[0])
				}
				return
			}
			tx, ok := txs[0].(map[string]any)
			if !ok {
				t.Fatalf("transactions[0] = %v, want an object", txs[0])
			}
			for _, member := range []string{"blockHash", "blockNumber"} {
				if v, ok := tx[member]; !ok || v != nil {
					t.Errorf("transaction %s = %v (present %v), want null", member, v, ok)
				}
			}
			if tx["blockTimestamp"] != wantTime {
				t.Errorf("transaction blockTimestamp %v, want %s", tx["blockTimestamp"], wantTime)
			}
			if tx["transactionIndex"] != "0x0" {
				t.Errorf("transaction transactionIndex %v, want 0x0", tx["transactionIndex"])
			}
		})
	}
	t.Run("cleared", func(t *testing.T) {
		if err := c.store.SetPending(nil); err != nil {
			t.Fatal(err)
		}
		checkNullResult(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["pending",true]`)))
	})
}

func TestGetBlockByNumberSafeAndFinalized(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	get := func(tag string) answer {
		return call(t, srv, rpcRequest("eth_getBlockByNumber", `["`+tag+`",false]`))
	}
	checkNullResult(t, get("safe"))
	checkNullResult(t, get("finalized"))
	if err := c.store.SetSafe(2); err != nil {
		t.Fatal(err)
	}
	if err := c.store.SetFinalized(1); err != nil {
		t.Fatal(err)
	}
	checkBlockNumber(t, resultObject(t, get("safe")), "0x2")
	checkBlockNumber(t, resultObject(t, get("finalized")), "0x1")
}

func TestGetBlockByHash(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	byHash := func(hash backend.Hash, fullTx bool) answer {
		return call(t, srv, rpcRequest("eth_getBlockByHash", fmt.Sprintf(`[%q,%v]`, hash, fullTx)))
	}
	for n, b := range c.blocks {
		for _, fullTx := range []bool{false, true} {
			t.Run(fmt.Sprintf("block %d/fullTx=%v", n, fullTx), func(t *testing.T) {
				got := byHash(b.Hash, fullTx)
				block := resultObject(t, got)
				checkBlockObject(t, block)
				want := call(t, srv, rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`["0x%x",%v]`, n, fullTx)))
				if diff := cmp.Diff(decode(t, want.Result), decode(t, got.Result)); diff != "" {
					t.Errorf("block by hash differs from block by number (-number +hash):\n%s", diff)
				}
			})
		}
	}
	t.Run("unknown hash", func(t *testing.T) {
		checkNullResult(t, byHash(backend.Hash{0x12, 0x34}, false))
		checkNullResult(t, byHash(c.uncle.Hash, true)) // an uncle is no block
	})
	t.Run("block off the canonical chain", func(t *testing.T) {
		old := c.blocks[3]
		c.compete(t, 3, "a competing block 3")
		latest := resultObject(t, call(t, srv, rpcRequest("eth_getBlockByNumber", `["latest",false]`)))
		if latest["hash"] == old.Hash.String() {
			t.Fatalf("the fork did not become canonical")
		}
		block := resultObject(t, byHash(old.Hash, false))
		if block["hash"] != old.Hash.String() {
			t.Errorf("hash %v, want %s", block["hash"], old.Hash)
		}
	})
	t.Run("params", func(t *testing.T) {
		checkError(t, call(t, srv, rpcRequest("eth_getBlockByHash", `["0x12",false]`)), -32602, "invalid argument 0: hex string has length 2, want 64 for common.Hash")
		checkError(t, call(t, srv, rpcRequest("eth_getBlockByHash", fmt.Sprintf(`[%q]`, c.blocks[0].Hash))), -32602, "missing value for required argument 1")
		checkError(t, call(t, srv, rpcRequest("eth_getBlockByHash", fmt.Sprintf(`[%q,null]`, c.blocks[0].Hash))), -32602, "invalid argument 1: json: cannot unmarshal null into Go value of type bool")
	})
}

// TestBlockMemberOrder checks the order of the members of every block and
// uncle object answered. go-ethereum builds them as maps, which
// encoding/json writes in sorted key order: the keys must be strictly
// increasing, whatever members a block's fork gives it. It goes over every
// block of real chains by hash, canonical or not, with and without full
// transactions, their pending block, and every uncle. Transaction objects
// keep the field order of go-ethereum's struct instead, checked by the
// backend's tests.
func TestBlockMemberOrder(t *testing.T) {
	for _, chain := range []struct {
		name string
		// load returns the chain, the hash of each of its blocks, and of
		// each whose transactions it holds whole.
		load func(t *testing.T) (b backend.Backend, all, whole []backend.Hash)
		// complete chains have a pending block and uncles to check.
		complete bool
	}{
		{"test chain", func(t *testing.T) (backend.Backend, []backend.Hash, []backend.Hash) {
			c := newTestChain(t)
			var hashes []backend.Hash
			for _, b := range c.blocks {
				hashes = append(hashes, b.Hash)
			}
			return c.store, hashes, hashes
		}, true},
		{"demo chain", func(t *testing.T) (backend.Backend, []backend.Hash, []backend.Hash) {
			store, hashes := demoChain(t)
			return store, hashes, hashes
		}, true},
		{"mainnet fixtures", func(t *testing.T) (backend.Backend, []backend.Hash, []backend.Hash) {
			// Some fixtures answered without full transactions: those
			// blocks are served with hashes only.
			dump := mainnetDump(t, mainnetCases(t))
			store, err := memstore.Load(bytes.NewReader(dump))
			if err != nil {
				t.Fatalf("loading the mainnet blocks: %v", err)
			}
			all, whole := dumpHashes(t, dump)
			return store, all, whole
		}, false},
	} {
		t.Run(chain.name, func(t *testing.T) {
			b, all, whole := chain.load(t)
			if len(whole) == 0 {
				t.Fatalf("none of the %d blocks can be answered with full transactions", len(all))
			}
			srv := newServer(t, b)
			uncles := 0
			for _, fullTx := range []bool{false, true} {
				hashes := all
				if fullTx {
					hashes = whole
				}
				for _, hash := range hashes {
					a := call(t, srv, rpcRequest("eth_getBlockByHash", fmt.Sprintf(`[%q,%v]`, hash, fullTx)))
					block := resultObject(t, a)
					checkSortedMembers(t, fmt.Sprintf("block %s (fullTx=%v)", hash, fullTx), a.Result)
					if fullTx {
						continue
					}
					list, _ := block["uncles"].([]any)
					for i := range list {
						u := call(t, srv, rpcRequest("eth_getUncleByBlockHashAndIndex", fmt.Sprintf(`[%q,"0x%x"]`, hash, i)))
						resultObject(t, u)
						checkSortedMembers(t, fmt.Sprintf("uncle %d of block %s", i, hash), u.Result)
						uncles++
					}
				}
				// A complete chain must have a pending block; the others
				// may.
				a := call(t, srv, rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`["pending",%v]`, fullTx)))
				if chain.complete || string(a.Result) != "null" {
					resultObject(t, a)
					checkSortedMembers(t, fmt.Sprintf("the pending block (fullTx=%v)", fullTx), a.Result)
				}
			}
			if chain.complete && uncles == 0 {
				t.Errorf("no uncle checked among %d blocks", len(all))
			}
		})
	}
}

// checkSortedMembers checks that the member names of the JSON object obj are
// strictly increasing.
func checkSortedMembers(t *testing.T, what string, obj json.RawMessage) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: %.100s is not an object (%v)", what, obj, err)
	}
	var prev string
	for i := 0; dec.More(); i++ {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: reading member %d: %v", what, i, err)
		}
		name := tok.(string)
		if i > 0 && name <= prev {
			t.Errorf("%s: member %q follows %q: the members are not in strictly sorted order", what, name, prev)
		}
		prev = name
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			t.Fatalf("%s: reading the value of %q: %v", what, name, err)
		}
	}
}

// unmarkedPending serves the latest block for the pending tag, without
// marking it Pending.
type unmarkedPending struct{ backend.Backend }

func (b unmarkedPending) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	if n == backend.Pending {
		n = backend.Latest
	}
	return b.Backend.BlockByNumber(ctx, n)
}

// TestPendingTagDecides checks that the block the pending tag selects is
// shown as pending, even from a backend that did not mark it: with its
// hash and number null, on the wire and in the typed API, and not served
// from the cache as the canonical block it also is.
func TestPendingTagDecides(t *testing.T) {
	c := newTestChain(t)
	b := unmarkedPending{c.store}
	srv := newServer(t, b)
	for _, fullTx := range []bool{false, true} {
		for range 2 { // the second would be a hit
			block := resultObject(t, call(t, srv, rpcRequest("eth_getBlockByNumber", fmt.Sprintf(`["pending",%v]`, fullTx))))
			for _, member := range []string{"hash", "nonce", "logsBloom", "number"} {
				if v, ok := block[member]; !ok || v != nil {
					t.Errorf("fullTx=%v: %s = %v (present %v), want null", fullTx, member, v, ok)
				}
			}
		}
	}
	checkBlockNumber(t, resultObject(t, call(t, srv, latestBlock)), "0x3")
	got, err := blockrpc.NewService(b).GetBlockByNumber(context.Background(), backend.Pending, false)
	if err != nil || got == nil || !got.Pending || got.Number != 0 || got.Hash != (backend.Hash{}) {
		t.Errorf("GetBlockByNumber(Pending) = %+v, %v; want a block marked pending, without hash or number", got, err)
	}
}

// noBlockNoError is a backend that finds no block and says no error: it
// should say ErrNotFound, and is taken to have.
type noBlockNoError struct{ backend.Backend }

func (noBlockNoError) BlockByNumber(context.Context, backend.BlockNumber) (*backend.Block, error) {
	return nil, nil
}

func (noBlockNoError) BlockByHash(context.Context, backend.Hash) (*backend.Block, error) {
	return nil, nil
}

// TestBackendNilBlockIsNone checks that a block lookup answered with
// neither a block nor an error is answered as no block.
func TestBackendNilBlockIsNone(t *testing.T) {
	srv := newServer(t, noBlockNoError{newTestChain(t).store})
	for _, req := range []string{
		rpcRequest("eth_getBlockByNumber", `["0x1",true]`),
		rpcRequest("eth_getBlockByNumber", `["pending",false]`),
		rpcRequest("eth_getBlockByHash", `["0x`+strings.Repeat("ab", 32)+`",false]`),
		rpcRequest("eth_getUncleCountByBlockNumber", `["0x1"]`),
		rpcRequest("eth_getUncleByBlockNumberAndIndex", `["0x1","0x0"]`),
	} {
		checkNullResult(t, call(t, srv, req))
	}
	checkError(t, call(t, srv, rpcRequest("eth_blockNumber", `[]`)), -32000, "the chain has no blocks")
}
