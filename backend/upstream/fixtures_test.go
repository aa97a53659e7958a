package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/blockrpc/blockrpc/internal/fixtures"
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
		var item rlpValue
		if item, rest, err = splitRLP(rest); err != nil {
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
				item, rest, err := splitRLP(raw)
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
// RLP, as far as reading blocks takes it: the execution-apis chain and the
// ethereum-tests blocks come as RLP, and the root module has no decoder.

// rlpValue is a decoded RLP value: a string or a list.
type rlpValue struct {
	str    []byte
	list   []rlpValue
	isList bool
}

// splitRLP splits the first RLP value off b.
func splitRLP(b []byte) (rlpValue, []byte, error) {
	if len(b) == 0 {
		return rlpValue{}, nil, errors.New("unexpected end of input")
	}
	prefix := b[0]
	var header, size int
	switch {
	case prefix < 0x80:
		return rlpValue{str: b[:1]}, b[1:], nil
	case prefix < 0xb8:
		header, size = 1, int(prefix-0x80)
	case prefix < 0xc0:
		header, size = 1+int(prefix-0xb7), rlpSize(b[1:], int(prefix-0xb7))
	case prefix < 0xf8:
		header, size = 1, int(prefix-0xc0)
	default:
		header, size = 1+int(prefix-0xf7), rlpSize(b[1:], int(prefix-0xf7))
	}
	if size < 0 || header+size > len(b) {
		return rlpValue{}, nil, errors.New("value longer than its input")
	}
	v := rlpValue{isList: prefix >= 0xc0}
	payload := b[header : header+size]
	if !v.isList {
		v.str = payload
		return v, b[header+size:], nil
	}
	for len(payload) > 0 {
		var item rlpValue
		var err error
		if item, payload, err = splitRLP(payload); err != nil {
			return rlpValue{}, nil, err
		}
		v.list = append(v.list, item)
	}
	return v, b[header+size:], nil
}

func rlpSize(b []byte, n int) int {
	if n > len(b) || n > 4 {
		return -1
	}
	size := 0
	for _, c := range b[:n] {
		size = size<<8 | int(c)
	}
	return size
}

func (v rlpValue) u64() uint64 {
	var n uint64
	for _, c := range v.str {
		n = n<<8 | uint64(c)
	}
	return n
}

func (v rlpValue) u256() *uint256.Int { return new(uint256.Int).SetBytes(v.str) }
func (v rlpValue) hash() backend.Hash { return backend.Hash(v.str) }

func (v rlpValue) address() *backend.Address {
	if len(v.str) == 0 {
		return nil
	}
	a := backend.Address(v.str)
	return &a
}

// blockFromRLP reads a block ([header, transactions, uncles,
// withdrawals?]) with each transaction's sender recovered: what
// memstore.AddBlock takes. The derived values are left for it to compute.
func blockFromRLP(t testing.TB, v rlpValue) (*backend.Block, []*backend.Uncle) {
	t.Helper()
	if !v.isList || len(v.list) < 3 {
		t.Fatal("a block is a list of at least 3 items")
	}
	b := &backend.Block{Header: headerFromRLP(v.list[0]), Transactions: []*backend.Transaction{}}
	for i, item := range v.list[1].list {
		tx := txFromRLP(t, item)
		from, err := backend.Sender(tx)
		if err != nil {
			t.Fatalf("block %d transaction %d: %v", b.Number, i, err)
		}
		tx.From = from
		b.Transactions = append(b.Transactions, tx)
	}
	var uncles []*backend.Uncle
	for _, item := range v.list[2].list {
		uncles = append(uncles, &backend.Uncle{Header: headerFromRLP(item)})
	}
	if len(v.list) > 3 {
		b.Withdrawals = []backend.Withdrawal{}
		for _, item := range v.list[3].list {
			f := item.list
			b.Withdrawals = append(b.Withdrawals, backend.Withdrawal{Index: f[0].u64(), ValidatorIndex: f[1].u64(), Address: *f[2].address(), Amount: f[3].u64()})
		}
	}
	return b, uncles
}

func headerFromRLP(v rlpValue) backend.Header {
	f := v.list
	h := backend.Header{
		ParentHash: f[0].hash(), Sha3Uncles: f[1].hash(), Miner: *f[2].address(),
		StateRoot: f[3].hash(), TransactionsRoot: f[4].hash(), ReceiptsRoot: f[5].hash(),
		LogsBloom: backend.Bloom(f[6].str), Difficulty: *f[7].u256(), Number: f[8].u64(),
		GasLimit: f[9].u64(), GasUsed: f[10].u64(), Timestamp: f[11].u64(),
		ExtraData: f[12].str, MixHash: f[13].hash(), Nonce: backend.Nonce(f[14].str),
	}
	opt := f[15:]
	if len(opt) > 0 {
		h.BaseFeePerGas = opt[0].u256()
	}
	if len(opt) > 1 {
		r := opt[1].hash()
		h.WithdrawalsRoot = &r
	}
	if len(opt) > 2 {
		n := opt[2].u64()
		h.BlobGasUsed = &n
	}
	if len(opt) > 3 {
		n := opt[3].u64()
		h.ExcessBlobGas = &n
	}
	if len(opt) > 4 {
		r := opt[4].hash()
		h.ParentBeaconBlockRoot = &r
	}
	if len(opt) > 5 {
		r := opt[5].hash()
		h.RequestsHash = &r
	}
	return h
}

func txFromRLP(t testing.TB, v rlpValue) *backend.Transaction {
	t.Helper()
	if v.isList { // legacy
		f := v.list
		return &backend.Transaction{
			Type: backend.LegacyTxType, Nonce: f[0].u64(), GasPrice: f[1].u256(), Gas: f[2].u64(),
			To: f[3].address(), Value: *f[4].u256(), Input: f[5].str, V: *f[6].u256(), R: *f[7].u256(), S: *f[8].u256(),
		}
	}
	if len(v.str) == 0 {
		t.Fatal("an empty typed transaction")
	}
	body, _, err := splitRLP(v.str[1:])
	if err != nil {
		t.Fatal(err)
	}
	f := body.list
	tx := &backend.Transaction{Type: v.str[0], ChainID: f[0].u256(), Nonce: f[1].u64()}
	var rest []rlpValue
	if tx.Type == backend.AccessListTxType {
		tx.GasPrice = f[2].u256()
		rest = f[3:]
	} else {
		tx.MaxPriorityFeePerGas, tx.MaxFeePerGas = f[2].u256(), f[3].u256()
		rest = f[4:]
	}
	tx.Gas, tx.To, tx.Value, tx.Input = rest[0].u64(), rest[1].address(), *rest[2].u256(), rest[3].str
	for _, e := range rest[4].list {
		tuple := backend.AccessTuple{Address: *e.list[0].address(), StorageKeys: []backend.Hash{}}
		for _, k := range e.list[1].list {
			tuple.StorageKeys = append(tuple.StorageKeys, k.hash())
		}
		tx.AccessList = append(tx.AccessList, tuple)
	}
	if tx.AccessList == nil {
		tx.AccessList = []backend.AccessTuple{}
	}
	rest = rest[5:]
	switch tx.Type {
	case backend.BlobTxType:
		tx.MaxFeePerBlobGas = rest[0].u256()
		for _, h := range rest[1].list {
			tx.BlobVersionedHashes = append(tx.BlobVersionedHashes, h.hash())
		}
		rest = rest[2:]
	case backend.SetCodeTxType:
		for _, a := range rest[0].list {
			tx.AuthorizationList = append(tx.AuthorizationList, backend.SetCodeAuthorization{
				ChainID: *a.list[0].u256(), Address: *a.list[1].address(), Nonce: a.list[2].u64(),
				YParity: uint8(a.list[3].u64()), R: *a.list[4].u256(), S: *a.list[5].u256(),
			})
		}
		rest = rest[1:]
	}
	tx.V, tx.R, tx.S = *rest[0].u256(), *rest[1].u256(), *rest[2].u256()
	return tx
}
