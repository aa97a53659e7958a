package specs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/examples/interop/gethconv"
	"github.com/blockrpc/blockrpc/examples/interop/gethnode"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rlp"
)

// ethTest is one blockchain test of ethereum/tests, as the fixtures write
// it.
type ethTest struct {
	Network            string                 `json:"network"`
	GenesisBlockHeader map[string]string      `json:"genesisBlockHeader"`
	GenesisRLP         string                 `json:"genesisRLP"`
	Pre                map[string]*preAccount `json:"pre"`
	Blocks             []*ethTestBlock        `json:"blocks"`
	LastBlockHash      common.Hash            `json:"lastblockhash"`
}

type preAccount struct {
	Balance string            `json:"balance"`
	Nonce   string            `json:"nonce"`
	Code    string            `json:"code"`
	Storage map[string]string `json:"storage"`
}

type ethTestBlock struct {
	RLP             string                       `json:"rlp"`
	BlockHeader     map[string]string            `json:"blockHeader"`
	Transactions    []map[string]json.RawMessage `json:"transactions"`
	UncleHeaders    []map[string]string          `json:"uncleHeaders"`
	ExpectException string                       `json:"expectException"`
}

// namedTest is a test with the file and key it comes from.
type namedTest struct {
	name string // file/key
	*ethTest
}

// readEthTests reads every test of every fixture file, in file and key
// order.
func readEthTests(t testing.TB) []namedTest {
	t.Helper()
	dir := fixture(t, "ethereum-tests")
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tests in %s: %v", dir, err)
	}
	var tests []namedTest
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var byKey map[string]*ethTest
		if err := json.Unmarshal(data, &byKey); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			tests = append(tests, namedTest{name: filepath.Base(filepath.Dir(f)) + "/" + k, ethTest: byKey[k]})
		}
	}
	return tests
}

// chainBlock is a block of a test: decoded by go-ethereum, with what the
// fixture says about it.
type chainBlock struct {
	block  *types.Block
	rlp    []byte
	header map[string]string
	txs    []map[string]json.RawMessage
	uncles []map[string]string
}

func (b *chainBlock) label() string {
	return fmt.Sprintf("block %d (%s)", b.block.NumberU64(), b.block.Hash().Hex()[:10])
}

// ethChain is a test's chain: the genesis, the canonical chain that ends at
// lastblockhash, and the other blocks, which are side-chain blocks.
type ethChain struct {
	test      namedTest
	all       []*chainBlock // the genesis, then the blocks in fixture order
	canonical []*chainBlock // by number
	side      []*chainBlock // by number
	// td is the total difficulty of each block, summed here from the
	// fixture headers' difficulties.
	td map[common.Hash]*big.Int
}

// buildChain decodes a test's blocks with go-ethereum, checks their hashes
// against the fixture's headers and resolves the canonical chain.
func buildChain(t testing.TB, test namedTest) *ethChain {
	t.Helper()
	c := &ethChain{test: test, td: make(map[common.Hash]*big.Int)}
	genesis := decodeBlock(t, "genesisRLP", test.GenesisRLP)
	c.all = append(c.all, &chainBlock{block: genesis.block, rlp: genesis.rlp, header: test.GenesisBlockHeader})
	for i, fb := range test.Blocks {
		if fb.ExpectException != "" {
			continue // an invalid block: no client has it
		}
		b := decodeBlock(t, fmt.Sprintf("blocks[%d].rlp", i), fb.RLP)
		b.header, b.txs, b.uncles = fb.BlockHeader, fb.Transactions, fb.UncleHeaders
		c.all = append(c.all, b)
	}
	byHash := make(map[common.Hash]*chainBlock)
	for _, b := range c.all {
		if want := common.HexToHash(b.header["hash"]); b.block.Hash() != want {
			t.Fatalf("go-ethereum hashes block %d to %s, the fixture's header says %s", b.block.NumberU64(), b.block.Hash(), want)
		}
		byHash[b.block.Hash()] = b
	}

	// The canonical chain: from lastblockhash back to the genesis.
	onChain := make(map[common.Hash]bool)
	for h := test.LastBlockHash; ; {
		b, ok := byHash[h]
		if !ok {
			t.Fatalf("the canonical chain runs into %s, which is no block of the test", h)
		}
		c.canonical = append(c.canonical, b)
		onChain[h] = true
		if b.block.NumberU64() == 0 {
			break
		}
		h = b.block.ParentHash()
	}
	slices.Reverse(c.canonical)
	if c.canonical[0] != c.all[0] {
		t.Fatalf("the canonical chain does not start at the genesis")
	}
	for _, b := range c.all {
		if !onChain[b.block.Hash()] {
			c.side = append(c.side, b)
		}
	}
	slices.SortStableFunc(c.side, func(a, b *chainBlock) int { return a.block.Number().Cmp(b.block.Number()) })

	// Total difficulties, parents first.
	byNumber := slices.Clone(c.all)
	slices.SortStableFunc(byNumber, func(a, b *chainBlock) int { return a.block.Number().Cmp(b.block.Number()) })
	for _, b := range byNumber {
		difficulty := mustQuantity(t, b.header["difficulty"])
		parentTD := new(big.Int)
		if b.block.NumberU64() > 0 {
			var ok bool
			if parentTD, ok = c.td[b.block.ParentHash()]; !ok {
				t.Fatalf("%s: its parent %s is not in the test", b.label(), b.block.ParentHash())
			}
		}
		c.td[b.block.Hash()] = new(big.Int).Add(parentTD, difficulty)
	}
	return c
}

func decodeBlock(t testing.TB, what, hexRLP string) *chainBlock {
	t.Helper()
	data, err := hexutil.Decode(hexRLP)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	b := new(types.Block)
	if err := rlp.DecodeBytes(data, b); err != nil {
		t.Fatalf("%s: go-ethereum cannot decode it: %v", what, err)
	}
	return &chainBlock{block: b, rlp: data}
}

func mustQuantity(t testing.TB, s string) *big.Int {
	t.Helper()
	v, ok := quantity(s)
	if !ok {
		t.Fatalf("%q is not a hex quantity", s)
	}
	return v
}

// load puts the chain into a memstore through its public API: the
// canonical blocks with AddBlock, the side blocks with AddSideBlock,
// parents first.
func (c *ethChain) load(t testing.TB) *memstore.Store {
	t.Helper()
	store := memstore.New()
	if err := store.SetChainID(1); err != nil {
		t.Fatal(err)
	}
	signer := types.LatestSignerForChainID(big.NewInt(1))
	for _, run := range []struct {
		blocks []*chainBlock
		add    func(*backend.Block, ...*backend.Uncle) error
	}{
		{c.canonical, store.AddBlock},
		{c.side, store.AddSideBlock},
	} {
		for _, b := range run.blocks {
			block, uncles, err := gethconv.Block(signer, b.block)
			if err != nil {
				t.Fatal(err)
			}
			if err := run.add(block, uncles...); err != nil {
				t.Fatalf("memstore refused %s: %v", b.label(), err)
			}
		}
	}
	return store
}

// ---- comparing answers with the fixtures ------------------------------------

// headerNames maps the fixtures' header field names to JSON-RPC's.
var headerNames = map[string]string{
	"bloom":            "logsBloom",
	"coinbase":         "miner",
	"receiptTrie":      "receiptsRoot",
	"transactionsTrie": "transactionsRoot",
	"uncleHash":        "sha3Uncles",
}

// The members compared as numbers: the fixtures write leading zeros
// ("0x020000"), JSON-RPC does not. The others (hashes, addresses, bytes, a
// header's 8-byte nonce) are compared as hex text.
var (
	headerQuantities = map[string]bool{
		"baseFeePerGas": true, "blobGasUsed": true, "difficulty": true, "excessBlobGas": true,
		"gasLimit": true, "gasUsed": true, "number": true, "timestamp": true,
	}
	txQuantities = map[string]bool{
		"blockNumber": true, "chainId": true, "gas": true, "gasPrice": true, "maxFeePerBlobGas": true,
		"maxFeePerGas": true, "maxPriorityFeePerGas": true, "nonce": true, "r": true, "s": true,
		"transactionIndex": true, "type": true, "v": true, "value": true, "yParity": true,
	}
)

// notHeaderMembers are the members of a block object that no header field
// gives.
var notHeaderMembers = map[string]bool{"size": true, "totalDifficulty": true, "transactions": true, "uncles": true, "withdrawals": true}

// sameValue compares a fixture value with an answer's: quantities as
// numbers, everything else as hex text, regardless of case.
func sameValue(isQuantity bool, want, got string) bool {
	if isQuantity {
		w, okW := quantity(want)
		g, okG := quantity(got)
		return okW && okG && w.Cmp(g) == 0
	}
	return strings.EqualFold(want, got)
}

// checkHeader compares an answered block or uncle object with a fixture
// header: every field the header has, and no header member it lacks.
func checkHeader(t testing.TB, label string, header map[string]string, obj map[string]json.RawMessage) {
	t.Helper()
	covered := make(map[string]bool)
	for field, want := range header {
		member := field
		if name, ok := headerNames[field]; ok {
			member = name
		}
		covered[member] = true
		got := stringMember(t, obj, member)
		if _, ok := obj[member]; !ok {
			t.Errorf("%s: no %q member (the fixture's %s is %s)", label, member, field, want)
			continue
		}
		if !sameValue(headerQuantities[member], want, got) {
			t.Errorf("%s: %s = %s, the fixture's %s is %s", label, member, got, field, want)
		}
	}
	for member, v := range obj {
		if !covered[member] && !notHeaderMembers[member] {
			t.Errorf("%s: member %q = %s is no field of the fixture's header", label, member, v)
		}
	}
}

// txMembers maps the fixtures' transaction fields to JSON-RPC's.
var txMembers = map[string]string{
	"data": "input", "gasLimit": "gas", "sender": "from",
	"gasPrice": "gasPrice", "nonce": "nonce", "r": "r", "s": "s", "v": "v", "to": "to", "value": "value",
	"chainId": "chainId", "maxFeePerGas": "maxFeePerGas", "maxPriorityFeePerGas": "maxPriorityFeePerGas",
	"type": "type", "hash": "hash",
}

// checkTransaction compares an answered transaction object with the
// fixture's transaction and go-ethereum's decoding of the block.
func checkTransaction(t testing.TB, label string, b *chainBlock, i int, obj map[string]json.RawMessage) {
	t.Helper()
	tx := b.block.Transactions()[i]
	for member, want := range map[string]string{
		"hash":             tx.Hash().Hex(),
		"blockHash":        b.block.Hash().Hex(),
		"blockNumber":      number(b.block.NumberU64()),
		"transactionIndex": index(i),
	} {
		if got := stringMember(t, obj, member); !sameValue(txQuantities[member], want, got) {
			t.Errorf("%s: %s = %s, want %s", label, member, got, want)
		}
	}
	for field, raw := range b.txs[i] {
		member, ok := txMembers[field]
		if !ok {
			if field == "accessList" {
				checkSameJSON(t, label+": accessList", raw, obj["accessList"])
				continue
			}
			t.Errorf("%s: the fixture's transaction field %q is not compared", label, field)
			continue
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("%s: the fixture's %s: %v", label, field, err)
		}
		got := stringMember(t, obj, member)
		if member == "to" && want == "" { // a contract creation: "to" is null
			if string(obj["to"]) != "null" {
				t.Errorf("%s: to = %s, want null (a contract creation)", label, obj["to"])
			}
			continue
		}
		if !sameValue(txQuantities[member], want, got) {
			t.Errorf("%s: %s = %s, the fixture's %s is %s", label, member, got, field, want)
		}
	}
}

// checkSameJSON compares two JSON values as values, not as text.
func checkSameJSON(t testing.TB, label string, want, got json.RawMessage) {
	t.Helper()
	var w, g any
	if json.Unmarshal(want, &w) != nil || json.Unmarshal(got, &g) != nil || !reflect.DeepEqual(w, g) {
		t.Errorf("%s: %s, the fixture's is %s", label, got, want)
	}
}

// fixtureChecker answers a test's requests through the handler and checks
// them against the fixture.
type fixtureChecker struct {
	c   *ethChain
	rpc *server
	// counts
	answers, uncles int
}

// checkBlock checks a block answer, with or without transaction objects,
// against the fixture: header, hash, size, totalDifficulty, transactions
// and uncle hashes.
func (f *fixtureChecker) checkBlock(t testing.TB, label string, answer []byte, b *chainBlock, fullTx bool) {
	t.Helper()
	f.answers++
	obj := object(t, answer)
	if obj == nil {
		t.Errorf("%s: null answer", label)
		return
	}
	checkHeader(t, label, b.header, obj)
	if got, want := stringMember(t, obj, "size"), number(uint64(len(b.rlp))); got != want {
		t.Errorf("%s: size %s, the fixture's RLP is %s bytes", label, got, want)
	}
	f.checkTotalDifficulty(t, label, obj, f.c.td[b.block.Hash()])

	var txs []json.RawMessage
	if err := json.Unmarshal(obj["transactions"], &txs); err != nil {
		t.Fatalf("%s: transactions: %v", label, err)
	}
	if len(txs) != len(b.txs) || len(txs) != len(b.block.Transactions()) {
		t.Errorf("%s: %d transactions, the fixture has %d", label, len(txs), len(b.txs))
		return
	}
	for i, raw := range txs {
		txLabel := fmt.Sprintf("%s transaction %d", label, i)
		if !fullTx {
			var hash string
			if err := json.Unmarshal(raw, &hash); err != nil || hash != b.block.Transactions()[i].Hash().Hex() {
				t.Errorf("%s: %s, want the hash %s", txLabel, raw, b.block.Transactions()[i].Hash())
			}
			continue
		}
		var tx map[string]json.RawMessage
		if err := json.Unmarshal(raw, &tx); err != nil {
			t.Fatalf("%s: %v", txLabel, err)
		}
		checkTransaction(t, txLabel, b, i, tx)
	}

	var uncles []string
	if err := json.Unmarshal(obj["uncles"], &uncles); err != nil {
		t.Fatalf("%s: uncles: %v", label, err)
	}
	var want []string
	for _, u := range b.uncles {
		want = append(want, u["hash"])
	}
	if !slices.EqualFunc(uncles, want, strings.EqualFold) {
		t.Errorf("%s: uncles %v, the fixture's uncle headers are %v", label, uncles, want)
	}
}

// checkUncles checks every uncle of a block, the uncle count and the null
// past the last uncle.
func (f *fixtureChecker) checkUncles(t testing.TB, b *chainBlock) {
	t.Helper()
	hash := b.block.Hash().Hex()
	count := f.rpc.call(t, "eth_getUncleCountByBlockHash", hash)
	if got, want := string(result(t, count)), fmt.Sprintf("%q", index(len(b.uncles))); got != want {
		t.Errorf("%s: uncle count %s, the fixture has %s", b.label(), got, want)
	}
	f.answers++
	for i, header := range b.uncles {
		label := fmt.Sprintf("%s uncle %d", b.label(), i)
		answer := f.rpc.call(t, "eth_getUncleByBlockHashAndIndex", hash, index(i))
		f.answers++
		f.uncles++
		obj := object(t, answer)
		if obj == nil {
			t.Errorf("%s: null answer", label)
			continue
		}
		checkHeader(t, label, header, obj)
		if _, ok := obj["transactions"]; ok {
			t.Errorf("%s: an uncle object has transactions", label)
		}
		if got := string(obj["uncles"]); got != "[]" {
			t.Errorf("%s: uncles %s, want []", label, got)
		}
		u := b.block.Uncles()[i]
		size, err := rlp.EncodeToBytes(types.NewBlockWithHeader(u))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := stringMember(t, obj, "size"), number(uint64(len(size))); got != want {
			t.Errorf("%s: size %s, want %s (a block of the header alone)", label, got, want)
		}
		var wantTD *big.Int
		if parentTD, ok := f.c.td[common.HexToHash(header["parentHash"])]; ok {
			wantTD = new(big.Int).Add(parentTD, mustQuantity(t, header["difficulty"]))
		}
		f.checkTotalDifficulty(t, label, obj, wantTD)
	}
	past := f.rpc.call(t, "eth_getUncleByBlockHashAndIndex", hash, index(len(b.uncles)))
	f.answers++
	if !isNull(t, past) {
		t.Errorf("%s: the uncle past the last answered %s, want null", b.label(), past)
	}
}

func (f *fixtureChecker) checkTotalDifficulty(t testing.TB, label string, obj map[string]json.RawMessage, want *big.Int) {
	t.Helper()
	got := stringMember(t, obj, "totalDifficulty")
	if want == nil {
		t.Errorf("%s: totalDifficulty %s, but the test does not tell it", label, got)
		return
	}
	if td, ok := quantity(got); !ok || td.Cmp(want) != 0 {
		t.Errorf("%s: totalDifficulty %s, want 0x%x (%d)", label, got, want, want)
	}
}

// TestEthereumTests loads every test of the ethereum/tests fixtures into a
// memstore (canonical chain and side blocks) and checks every answer
// against the fixture: each canonical block by number and by hash, each
// side block by hash, with and without transaction objects (header fields,
// hash, size, totalDifficulty, transaction hashes and senders, uncle
// hashes); each uncle against the fixture's uncle header with its
// totalDifficulty; uncle counts; and nulls past the uncles and for an
// unknown hash.
func TestEthereumTests(t *testing.T) {
	tests := readEthTests(t)
	var blocks, answers, uncles int
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			c := buildChain(t, test)
			f := &fixtureChecker{c: c, rpc: serve(t, c.load(t))}
			for _, b := range c.canonical {
				for _, fullTx := range []bool{false, true} {
					label := fmt.Sprintf("%s (canonical, fullTx %v)", b.label(), fullTx)
					byNumber := f.rpc.call(t, "eth_getBlockByNumber", number(b.block.NumberU64()), fullTx)
					f.checkBlock(t, label+" by number", byNumber, b, fullTx)
					byHash := f.rpc.call(t, "eth_getBlockByHash", b.block.Hash().Hex(), fullTx)
					f.checkBlock(t, label+" by hash", byHash, b, fullTx)
				}
				f.checkUncles(t, b)
			}
			for _, b := range c.side {
				for _, fullTx := range []bool{false, true} {
					label := fmt.Sprintf("%s (side chain, fullTx %v) by hash", b.label(), fullTx)
					f.checkBlock(t, label, f.rpc.call(t, "eth_getBlockByHash", b.block.Hash().Hex(), fullTx), b, fullTx)
				}
				f.checkUncles(t, b)
				// Its number answers the canonical block, not it.
				answer := f.rpc.call(t, "eth_getBlockByNumber", number(b.block.NumberU64()), false)
				f.answers++
				if got, want := stringMember(t, object(t, answer), "hash"), c.canonical[b.block.NumberU64()].block.Hash().Hex(); got != want {
					t.Errorf("%s: its number answers %s, want the canonical %s", b.label(), got, want)
				}
			}
			latest := f.rpc.call(t, "eth_getBlockByNumber", "latest", false)
			f.answers++
			if got := stringMember(t, object(t, latest), "hash"); got != test.LastBlockHash.Hex() {
				t.Errorf("latest is %s, the fixture's lastblockhash %s", got, test.LastBlockHash)
			}
			unknown := common.HexToHash("0x00000000000000000000000000000000000000000000000000000000deadbeef").Hex()
			for _, body := range [][]byte{
				request("eth_getBlockByHash", unknown, true),
				request("eth_getUncleByBlockHashAndIndex", unknown, index(0)),
				request("eth_getUncleCountByBlockHash", unknown),
			} {
				f.answers++
				if answer := f.rpc.post(t, body); !isNull(t, answer) {
					t.Errorf("unknown hash: %s answered %s, want null", body, answer)
				}
			}
			t.Logf("%s: %d blocks (%d canonical with the genesis, %d side), %d answers checked against the fixture, %d uncles", test.name, len(c.all), len(c.canonical), len(c.side), f.answers, f.uncles)
			blocks += len(c.all)
			answers += f.answers
			uncles += f.uncles
		})
	}
	t.Logf("ethereum-tests fixtures: %d tests, %d blocks (with the genesis), %d answers checked against the fixtures, %d uncles", len(tests), blocks, answers, uncles)
}

// ---- go-ethereum as the reference ---------------------------------------------

// forkOrder lists the forks in the order they came, each with what it sets
// in a go-ethereum chain config: a test's network is every fork up to it.
var forkOrder = []struct {
	network string
	set     func(c *params.ChainConfig, zero *big.Int)
}{
	{"Frontier", func(c *params.ChainConfig, zero *big.Int) {}},
	{"Homestead", func(c *params.ChainConfig, zero *big.Int) { c.HomesteadBlock = zero }},
	{"EIP150", func(c *params.ChainConfig, zero *big.Int) { c.EIP150Block = zero }},
	{"EIP158", func(c *params.ChainConfig, zero *big.Int) { c.EIP155Block, c.EIP158Block = zero, zero }},
	{"Byzantium", func(c *params.ChainConfig, zero *big.Int) { c.ByzantiumBlock = zero }},
	{"Constantinople", func(c *params.ChainConfig, zero *big.Int) { c.ConstantinopleBlock = zero }},
	{"ConstantinopleFix", func(c *params.ChainConfig, zero *big.Int) { c.PetersburgBlock = zero }},
	{"Istanbul", func(c *params.ChainConfig, zero *big.Int) { c.IstanbulBlock = zero }},
	{"MuirGlacier", func(c *params.ChainConfig, zero *big.Int) { c.MuirGlacierBlock = zero }},
	{"Berlin", func(c *params.ChainConfig, zero *big.Int) { c.BerlinBlock = zero }},
	{"London", func(c *params.ChainConfig, zero *big.Int) { c.LondonBlock = zero }},
	{"ArrowGlacier", func(c *params.ChainConfig, zero *big.Int) { c.ArrowGlacierBlock = zero }},
	{"GrayGlacier", func(c *params.ChainConfig, zero *big.Int) { c.GrayGlacierBlock = zero }},
}

// preMergeTTD is a terminal total difficulty no test chain reaches: the
// chains stay under proof-of-work rules.
var preMergeTTD = new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil)

// chainConfig is the go-ethereum config of a test's network: chain id 1,
// every fork up to the network at block 0, ethash.
func chainConfig(network string) (*params.ChainConfig, error) {
	c := &params.ChainConfig{
		ChainID:                 big.NewInt(1),
		TerminalTotalDifficulty: preMergeTTD,
		Ethash:                  new(params.EthashConfig),
	}
	for _, fork := range forkOrder {
		fork.set(c, big.NewInt(0))
		if fork.network == network {
			return c, nil
		}
	}
	return nil, fmt.Errorf("network %q is not one of the pre-merge forks this test knows", network)
}

// gethGenesis is the genesis specification of a test, for `geth init`:
// the genesis header's fields and the pre-state. The block it makes must
// be the test's genesis.
func gethGenesis(t testing.TB, test namedTest) *core.Genesis {
	t.Helper()
	config, err := chainConfig(test.Network)
	if err != nil {
		t.Fatal(err)
	}
	h := test.GenesisBlockHeader
	g := &core.Genesis{
		Config:     config,
		Nonce:      mustQuantity(t, h["nonce"]).Uint64(),
		Timestamp:  mustQuantity(t, h["timestamp"]).Uint64(),
		ExtraData:  hexutil.MustDecode(h["extraData"]),
		GasLimit:   mustQuantity(t, h["gasLimit"]).Uint64(),
		Difficulty: mustQuantity(t, h["difficulty"]),
		Mixhash:    common.HexToHash(h["mixHash"]),
		Coinbase:   common.HexToAddress(h["coinbase"]),
		Number:     mustQuantity(t, h["number"]).Uint64(),
		GasUsed:    mustQuantity(t, h["gasUsed"]).Uint64(),
		ParentHash: common.HexToHash(h["parentHash"]),
		Alloc:      make(types.GenesisAlloc),
	}
	if fee, ok := h["baseFeePerGas"]; ok {
		g.BaseFee = mustQuantity(t, fee)
	}
	for addr, a := range test.Pre {
		account := types.Account{
			Balance: mustQuantity(t, a.Balance),
			Nonce:   mustQuantity(t, a.Nonce).Uint64(),
			Code:    hexutil.MustDecode(a.Code),
			Storage: make(map[common.Hash]common.Hash),
		}
		for k, v := range a.Storage {
			account.Storage[common.BigToHash(mustQuantity(t, k))] = common.BigToHash(mustQuantity(t, v))
		}
		g.Alloc[common.HexToAddress(addr)] = account
	}
	if got, want := g.ToBlock().Hash(), common.HexToHash(h["hash"]); got != want {
		t.Fatalf("the genesis built for geth init hashes to %s, the test's genesis is %s: the config or the pre-state is wrong", got, want)
	}
	return g
}

// segments splits the blocks after the genesis, in fixture order, into
// runs where each block is the child of the one before: go-ethereum imports
// a file as one run, and refuses a run that is not contiguous.
func (c *ethChain) segments() [][]*chainBlock {
	var out [][]*chainBlock
	for _, b := range c.all[1:] {
		if n := len(out); n > 0 {
			run := out[n-1]
			if b.block.ParentHash() == run[len(run)-1].block.Hash() {
				out[n-1] = append(run, b)
				continue
			}
		}
		out = append(out, []*chainBlock{b})
	}
	return out
}

// importIntoGeth runs geth init and geth import for a test and returns the
// data directory.
func importIntoGeth(t testing.TB, c *ethChain) string {
	t.Helper()
	dir := t.TempDir()
	spec, err := json.Marshal(gethGenesis(t, c.test))
	if err != nil {
		t.Fatal(err)
	}
	genesisPath := filepath.Join(dir, "genesis.json")
	if err := os.WriteFile(genesisPath, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	datadir := filepath.Join(dir, "geth")
	gethnode.Exec(t, "init", "--datadir", datadir, genesisPath)

	// Not --nocompaction: with it, geth import exits 0 even when it
	// refuses a block.
	args := []string{"import", "--datadir", datadir}
	for i, run := range c.segments() {
		var data bytes.Buffer
		for _, b := range run {
			data.Write(b.rlp)
		}
		path := filepath.Join(dir, fmt.Sprintf("blocks-%d.rlp", i))
		if err := os.WriteFile(path, data.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, path)
	}
	gethnode.Exec(t, args...)
	return datadir
}

// TestEthereumTestsAgainstGeth imports every test's chain into go-ethereum
// (geth init with the test's genesis, geth import of its blocks) and
// compares its answers with blockrpc's byte for byte, except blockrpc's
// totalDifficulty and its transactions' blockTimestamp: every canonical
// block by number, every block by hash, with and without transaction
// objects; every uncle by block hash (and by block number on the canonical
// chain); the uncle counts; and the nulls past the uncles and for an
// unknown hash.
func TestEthereumTestsAgainstGeth(t *testing.T) {
	gethnode.Binary(t)
	tests := readEthTests(t)
	var blocks, answers, uncles int
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			c := buildChain(t, test)
			datadir := importIntoGeth(t, c)
			g := startGeth(t, datadir)
			cmp := &comparer{ours: serve(t, c.load(t)), geth: g}

			// go-ethereum holds the test's chain: the genesis it computed
			// from the genesis specification, and the head.
			checkGethHead(t, g, c.all[0].block.Hash(), test.LastBlockHash)

			onChain := make(map[*chainBlock]bool)
			for _, b := range c.canonical {
				onChain[b] = true
			}
			testUncles := 0
			for _, b := range c.all {
				n, hash := number(b.block.NumberU64()), b.block.Hash().Hex()
				label := b.label()
				for _, fullTx := range []bool{false, true} {
					kind := blockAnswer
					if fullTx {
						kind = fullTxAnswer
					}
					if onChain[b] {
						cmp.compare(t, label+" by number", kind, request("eth_getBlockByNumber", n, fullTx))
					}
					cmp.compare(t, label+" by hash", kind, request("eth_getBlockByHash", hash, fullTx))
				}
				cmp.compare(t, label+" uncle count by hash", plainAnswer, request("eth_getUncleCountByBlockHash", hash))
				if onChain[b] {
					cmp.compare(t, label+" uncle count by number", plainAnswer, request("eth_getUncleCountByBlockNumber", n))
				}
				for i := range b.block.Uncles() {
					ulabel := fmt.Sprintf("%s uncle %d", label, i)
					cmp.compare(t, ulabel+" by block hash", uncleAnswer, request("eth_getUncleByBlockHashAndIndex", hash, index(i)))
					if onChain[b] {
						cmp.compare(t, ulabel+" by block number", uncleAnswer, request("eth_getUncleByBlockNumberAndIndex", n, index(i)))
					}
					testUncles++
				}
				past := index(len(b.block.Uncles()))
				cmp.compare(t, label+" uncle past the last by hash", plainAnswer, request("eth_getUncleByBlockHashAndIndex", hash, past))
				if onChain[b] {
					cmp.compare(t, label+" uncle past the last by number", plainAnswer, request("eth_getUncleByBlockNumberAndIndex", n, past))
				}
			}
			cmp.compare(t, "latest", blockAnswer, request("eth_getBlockByNumber", "latest", false))
			compareUnknown(t, cmp, common.HexToHash("0x00000000000000000000000000000000000000000000000000000000deadbeef"))
			if err := g.node.Stop(); err != nil {
				t.Errorf("stopping geth: %v", err)
			}
			t.Logf("%s (%s): %d blocks, %d answers compared byte for byte with go-ethereum, %d uncles", test.name, test.Network, len(c.all), cmp.compared, testUncles)
			blocks += len(c.all)
			answers += cmp.compared
			uncles += testUncles
		})
	}
	t.Logf("ethereum-tests against go-ethereum: %d tests, %d blocks (with the genesis), %d answers compared byte for byte, %d uncles", len(tests), blocks, answers, uncles)
}
