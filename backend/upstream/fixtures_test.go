package upstream_test

import (
	"bytes"
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
	"github.com/holiman/uint256"
)

// The chains of the shared conformance fixtures (../shared/fixtures), each
// loaded into a memstore through its public API, for the differential
// test. A loader skips its test when the fixtures are not there.

// execAPIsStore loads the execution-apis chain: the genesis block as
// go-ethereum answered it (get-genesis.io), then the 54 blocks of
// chain.rlp with their uncles and recovered senders, and the fork choice
// of headfcu.json (head, safe and finalized all block 54).
func execAPIsStore(t testing.TB) *memstore.Store {
	t.Helper()
	dir := fixtures.Path(t, "execution-apis")
	store := memstore.New()
	genesis := ioAnswer(t, filepath.Join(dir, "eth_getBlockByNumber", "get-genesis.io"))
	var g backend.Block
	if err := json.Unmarshal(genesis, &g); err != nil {
		t.Fatalf("get-genesis.io: %v", err)
	}
	if err := store.AddBlock(&g); err != nil {
		t.Fatalf("genesis: %v", err)
	}
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
		if err := store.AddBlock(b, uncles...); err != nil {
			t.Fatalf("chain.rlp: %v", err)
		}
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
	}{{fcu.Params[0].Safe, store.SetSafe}, {fcu.Params[0].Finalized, store.SetFinalized}} {
		b, err := store.BlockByHash(ctx, tag.hash)
		if err != nil {
			t.Fatalf("headfcu.json names %s: %v", tag.hash, err)
		}
		if err := tag.set(b.Number); err != nil {
			t.Fatal(err)
		}
	}
	if head, err := store.BlockByNumber(ctx, backend.Latest); err != nil || head.Hash != fcu.Params[0].Head {
		t.Fatalf("the chain's head is not headfcu.json's %s (%v)", fcu.Params[0].Head, err)
	}
	return store
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

// ethTestChain is one blockchain test of ethereum/tests, loaded.
type ethTestChain struct {
	name  string // directory/test
	store *memstore.Store
}

// ethTestStores loads every test of the ethereum-tests fixtures: the
// genesis and every valid block, the canonical chain being the one that
// ends at lastblockhash and the other blocks side blocks. Chain id 1.
func ethTestStores(t testing.TB) []ethTestChain {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtures.Path(t, "ethereum-tests"), "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ethereum-tests fixtures: %v", err)
	}
	var out []ethTestChain
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
			name := filepath.Base(filepath.Dir(f)) + "/" + k
			store := memstore.New()
			if err := store.SetChainID(1); err != nil {
				t.Fatal(err)
			}
			add := func(what, hexRLP string, canonical bool) *backend.Block {
				raw, err := hexutil.Decode(hexRLP)
				if err != nil {
					t.Fatalf("%s %s: %v", name, what, err)
				}
				item, rest, err := rlptest.Decode(raw)
				if err != nil || len(rest) != 0 {
					t.Fatalf("%s %s: not one RLP value (%v)", name, what, err)
				}
				b, uncles := blockFromRLP(t, item)
				addTo := store.AddSideBlock
				if canonical {
					addTo = store.AddBlock
				}
				if err := addTo(b, uncles...); err != nil {
					t.Fatalf("%s %s: %v", name, what, err)
				}
				return b
			}
			add("genesisRLP", test.GenesisRLP, true)
			var last *backend.Block
			var lastRLP string
			for i, fb := range test.Blocks {
				if fb.ExpectException != "" {
					continue // an invalid block: no node has it
				}
				if b := add(fmt.Sprintf("blocks[%d]", i), fb.RLP, false); backend.HeaderHash(&b.Header) == test.LastBlockHash {
					last, lastRLP = b, fb.RLP
				}
			}
			if last == nil {
				t.Fatalf("%s: lastblockhash %s is none of its blocks", name, test.LastBlockHash)
			}
			// Adding a stored block again makes it and its ancestors the
			// canonical chain.
			add("the last block", lastRLP, true)
			out = append(out, ethTestChain{name: name, store: store})
		}
	}
	return out
}

// mainnetStore loads the blocks that the mainnet fixtures answer (sparse:
// the genesis, 4,306,300, 16,000,000, 18,000,000 and 19,665,755), as the
// root package's tests do: through the dump loader. Some are known by
// their transaction hashes only.
func mainnetStore(t testing.TB) *memstore.Store {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtures.Path(t, "mainnet"), "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no mainnet fixtures: %v", err)
	}
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
		for _, c := range cases {
			if len(c.Response.Result) == 0 || string(c.Response.Result) == "null" {
				continue
			}
			dump.WriteString(`{"block":`)
			if err := json.Compact(&dump, c.Response.Result); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			dump.WriteString("}\n")
		}
	}
	store, err := memstore.Load(&dump)
	if err != nil {
		t.Fatalf("mainnet fixtures: %v", err)
	}
	return store
}

// ---------------------------------------------------------------------------
// Blocks from RLP: the execution-apis chain and the ethereum-tests blocks
// come as RLP, which the library only writes; internal/rlptest reads it.

// rlpU256 reads an RLP string as a 256-bit integer.
func rlpU256(v rlptest.Item) *uint256.Int { return new(uint256.Int).SetBytes(v.Bytes) }

// rlpAddress reads an RLP string as an address: nil for the empty string, a
// contract creation's "to".
func rlpAddress(v rlptest.Item) *backend.Address {
	if len(v.Bytes) == 0 {
		return nil
	}
	a := backend.Address(v.Bytes)
	return &a
}

// blockFromRLP reads a block ([header, transactions, uncles,
// withdrawals?]) with each transaction's sender recovered: what
// memstore.AddBlock takes. The derived values are left for it to compute.
func blockFromRLP(t testing.TB, v rlptest.Item) (*backend.Block, []*backend.Uncle) {
	t.Helper()
	if !v.IsList || len(v.List) < 3 {
		t.Fatal("a block is a list of at least 3 items")
	}
	b := &backend.Block{Header: headerFromRLP(v.List[0]), Transactions: []*backend.Transaction{}}
	for i, item := range v.List[1].List {
		tx := txFromRLP(t, item)
		from, err := backend.Sender(tx)
		if err != nil {
			t.Fatalf("block %d transaction %d: %v", b.Number, i, err)
		}
		tx.From = from
		b.Transactions = append(b.Transactions, tx)
	}
	var uncles []*backend.Uncle
	for _, item := range v.List[2].List {
		uncles = append(uncles, &backend.Uncle{Header: headerFromRLP(item)})
	}
	if len(v.List) > 3 {
		b.Withdrawals = []backend.Withdrawal{}
		for _, item := range v.List[3].List {
			f := item.List
			b.Withdrawals = append(b.Withdrawals, backend.Withdrawal{Index: f[0].Uint64(), ValidatorIndex: f[1].Uint64(), Address: *rlpAddress(f[2]), Amount: f[3].Uint64()})
		}
	}
	return b, uncles
}

func headerFromRLP(v rlptest.Item) backend.Header {
	f := v.List
	h := backend.Header{
		ParentHash: backend.Hash(f[0].Bytes), Sha3Uncles: backend.Hash(f[1].Bytes), Miner: *rlpAddress(f[2]),
		StateRoot: backend.Hash(f[3].Bytes), TransactionsRoot: backend.Hash(f[4].Bytes), ReceiptsRoot: backend.Hash(f[5].Bytes),
		LogsBloom: backend.Bloom(f[6].Bytes), Difficulty: *rlpU256(f[7]), Number: f[8].Uint64(),
		GasLimit: f[9].Uint64(), GasUsed: f[10].Uint64(), Timestamp: f[11].Uint64(),
		ExtraData: f[12].Bytes, MixHash: backend.Hash(f[13].Bytes), Nonce: backend.Nonce(f[14].Bytes),
	}
	opt := f[15:]
	if len(opt) > 0 {
		h.BaseFeePerGas = rlpU256(opt[0])
	}
	if len(opt) > 1 {
		r := backend.Hash(opt[1].Bytes)
		h.WithdrawalsRoot = &r
	}
	if len(opt) > 2 {
		n := opt[2].Uint64()
		h.BlobGasUsed = &n
	}
	if len(opt) > 3 {
		n := opt[3].Uint64()
		h.ExcessBlobGas = &n
	}
	if len(opt) > 4 {
		r := backend.Hash(opt[4].Bytes)
		h.ParentBeaconBlockRoot = &r
	}
	if len(opt) > 5 {
		r := backend.Hash(opt[5].Bytes)
		h.RequestsHash = &r
	}
	return h
}

func txFromRLP(t testing.TB, v rlptest.Item) *backend.Transaction {
	t.Helper()
	if v.IsList { // legacy
		f := v.List
		return &backend.Transaction{
			Type: backend.LegacyTxType, Nonce: f[0].Uint64(), GasPrice: rlpU256(f[1]), Gas: f[2].Uint64(),
			To: rlpAddress(f[3]), Value: *rlpU256(f[4]), Input: f[5].Bytes, V: *rlpU256(f[6]), R: *rlpU256(f[7]), S: *rlpU256(f[8]),
		}
	}
	if len(v.Bytes) == 0 {
		t.Fatal("an empty typed transaction")
	}
	body, _, err := rlptest.Decode(v.Bytes[1:])
	if err != nil {
		t.Fatal(err)
	}
	f := body.List
	tx := &backend.Transaction{Type: v.Bytes[0], ChainID: rlpU256(f[0]), Nonce: f[1].Uint64()}
	var rest []rlptest.Item
	if tx.Type == backend.AccessListTxType {
		tx.GasPrice = rlpU256(f[2])
		rest = f[3:]
	} else {
		tx.MaxPriorityFeePerGas, tx.MaxFeePerGas = rlpU256(f[2]), rlpU256(f[3])
		rest = f[4:]
	}
	tx.Gas, tx.To, tx.Value, tx.Input = rest[0].Uint64(), rlpAddress(rest[1]), *rlpU256(rest[2]), rest[3].Bytes
	for _, e := range rest[4].List {
		tuple := backend.AccessTuple{Address: *rlpAddress(e.List[0]), StorageKeys: []backend.Hash{}}
		for _, k := range e.List[1].List {
			tuple.StorageKeys = append(tuple.StorageKeys, backend.Hash(k.Bytes))
		}
		tx.AccessList = append(tx.AccessList, tuple)
	}
	if tx.AccessList == nil {
		tx.AccessList = []backend.AccessTuple{}
	}
	rest = rest[5:]
	switch tx.Type {
	case backend.BlobTxType:
		tx.MaxFeePerBlobGas = rlpU256(rest[0])
		for _, h := range rest[1].List {
			tx.BlobVersionedHashes = append(tx.BlobVersionedHashes, backend.Hash(h.Bytes))
		}
		rest = rest[2:]
	case backend.SetCodeTxType:
		for _, a := range rest[0].List {
			tx.AuthorizationList = append(tx.AuthorizationList, backend.SetCodeAuthorization{
				ChainID: *rlpU256(a.List[0]), Address: *rlpAddress(a.List[1]), Nonce: a.List[2].Uint64(),
				YParity: uint8(a.List[3].Uint64()), R: *rlpU256(a.List[4]), S: *rlpU256(a.List[5]),
			})
		}
		rest = rest[1:]
	}
	tx.V, tx.R, tx.S = *rlpU256(rest[0]), *rlpU256(rest[1]), *rlpU256(rest[2])
	return tx
}
