package backend_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/holiman/uint256"
)

// ---------------------------------------------------------------------------
// Fixtures

// glob is filepath.Glob for patterns that cannot be malformed.
func glob(tb testing.TB, pattern string) []string {
	tb.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// fullTxParam reports whether the second parameter of an eth_getBlockBy*
// request asks for transaction objects.
func fullTxParam(tb testing.TB, params []json.RawMessage) bool {
	tb.Helper()
	if len(params) != 2 {
		tb.Fatalf("request has %d params, want 2", len(params))
	}
	var full bool
	if err := json.Unmarshal(params[1], &full); err != nil {
		tb.Fatalf("second param %s: %v", params[1], err)
	}
	return full
}

// ioCase is an execution-apis test: one request line (">>") and the response
// go-ethereum gave (a "<<" line).
type ioCase struct {
	fullTx bool
	result json.RawMessage // exactly as recorded
}

func readIOCase(t *testing.T, path string) ioCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var c ioCase
	var haveRequest, haveResponse bool
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte(">> ")):
			var req struct{ Params []json.RawMessage }
			if err := json.Unmarshal(line[3:], &req); err != nil {
				t.Fatalf("request line: %v", err)
			}
			c.fullTx, haveRequest = fullTxParam(t, req.Params), true
		case bytes.HasPrefix(line, []byte("<< ")):
			var resp struct{ Result json.RawMessage }
			if err := json.Unmarshal(line[3:], &resp); err != nil {
				t.Fatalf("response line: %v", err)
			}
			c.result, haveResponse = resp.Result, true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !haveRequest || !haveResponse {
		t.Fatalf("%s: want a >> request line and a << response line", path)
	}
	return c
}

// mainnetCase is one entry of a mainnet fixture file.
type mainnetCase struct {
	Request struct {
		Params []json.RawMessage `json:"params"`
	} `json:"request"`
	Response struct {
		Result json.RawMessage `json:"result"`
	} `json:"response"`
}

func readMainnetCases(tb testing.TB, path string) []mainnetCase {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var cases []mainnetCase
	if err := json.Unmarshal(data, &cases); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return cases
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// checkDerived checks every value a block object states that its contents
// determine: the header hash, sha3Uncles of a block without uncles, the
// withdrawals root, and, when the transaction bodies are there, their hashes,
// the transactions root and the block size.
func checkDerived(t *testing.T, b *backend.Block) {
	t.Helper()
	if got := backend.HeaderHash(&b.Header); got != b.Hash {
		t.Errorf("HeaderHash = %v, want the block's hash %v", got, b.Hash)
	}
	if len(b.Uncles) == 0 {
		if got := backend.UnclesHash(nil); got != b.Sha3Uncles {
			t.Errorf("UnclesHash(nil) = %v, want the block's sha3Uncles %v", got, b.Sha3Uncles)
		}
	}
	if b.WithdrawalsRoot != nil {
		if got := backend.WithdrawalsRoot(b.Withdrawals); got != *b.WithdrawalsRoot {
			t.Errorf("WithdrawalsRoot of %d withdrawals = %v, want %v", len(b.Withdrawals), got, *b.WithdrawalsRoot)
		}
	}
	if !b.HasTransactionBodies() {
		return // hashes only: nothing more to derive
	}
	for i, tx := range b.Transactions {
		if got := backend.TransactionHash(tx); got != tx.Hash {
			t.Errorf("TransactionHash(transaction %d, type %d) = %v, want %v", i, tx.Type, got, tx.Hash)
		}
	}
	if got := backend.TransactionsRoot(b.Transactions); got != b.TransactionsRoot {
		t.Errorf("TransactionsRoot of %d transactions = %v, want %v", len(b.Transactions), got, b.TransactionsRoot)
	}
	if len(b.Uncles) > 0 {
		t.Logf("size not checked: the block object does not hold its %d uncle headers", len(b.Uncles))
		return
	}
	if got := backend.BlockSize(&b.Header, b.Transactions, nil, b.Withdrawals); got != b.Size {
		t.Errorf("BlockSize = %d, want the block's size %d", got, b.Size)
	}
}

// firstDifference describes where got and want first differ, with context.
func firstDifference(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(i-80, 0)
	return fmt.Sprintf("first difference at byte %d (lengths %d and %d):\n got: …%s…\nwant: …%s…",
		i, len(got), len(want), got[from:min(i+80, len(got))], want[from:min(i+80, len(want))])
}

const nullTotalDifficulty = `"totalDifficulty":null,`

// TestGethBlockObjects decodes each block go-ethereum served in the
// execution-apis tests and encodes it again: apart from the totalDifficulty
// member this project adds, the bytes must be go-ethereum's.
func TestGethBlockObjects(t *testing.T) {
	dir := fixtures.Path(t, "execution-apis")
	files := append(glob(t, filepath.Join(dir, "eth_getBlockByNumber", "*.io")),
		glob(t, filepath.Join(dir, "eth_getBlockByHash", "*.io"))...)
	if len(files) == 0 {
		t.Fatalf("no .io files under %s", dir)
	}
	blocks := 0
	for _, path := range files {
		name, _ := filepath.Rel(dir, path)
		t.Run(name, func(t *testing.T) {
			c := readIOCase(t, path)
			if isNull(c.result) {
				return // a "not found" case
			}
			blocks++
			var b backend.Block
			if err := json.Unmarshal(c.result, &b); err != nil {
				t.Fatalf("decoding the recorded result: %v", err)
			}
			out := b.AppendJSON(nil, c.fullTx)
			if n := bytes.Count(out, []byte(nullTotalDifficulty)); n != 1 {
				t.Errorf("output has %d %s members, want 1", n, nullTotalDifficulty)
			}
			out = bytes.Replace(out, []byte(nullTotalDifficulty), nil, 1)
			if !bytes.Equal(out, c.result) {
				t.Errorf("AppendJSON(nil, %t) differs from go-ethereum's result; %s", c.fullTx, firstDifference(out, c.result))
			}
			checkDerived(t, &b)
		})
	}
	if blocks < 5 {
		t.Errorf("only %d of the .io files hold a block; the fixtures look incomplete", blocks)
	}
}

// TestMainnetBlocks checks the derived values of mainnet blocks as a
// production client served them, and that encoding them gives the same JSON
// (compared as values: those files are not in go-ethereum's key order).
func TestMainnetBlocks(t *testing.T) {
	dir := fixtures.Path(t, "mainnet")
	files := glob(t, filepath.Join(dir, "*", "*.json"))
	if len(files) == 0 {
		t.Fatalf("no fixture files under %s", dir)
	}
	var withBodies, hashesOnly, emptyBlocks int
	for _, path := range files {
		name, _ := filepath.Rel(dir, path)
		for i, c := range readMainnetCases(t, path) {
			if isNull(c.Response.Result) {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				fullTx := fullTxParam(t, c.Request.Params)
				var b backend.Block
				if err := json.Unmarshal(c.Response.Result, &b); err != nil {
					t.Fatalf("decoding the recorded result: %v", err)
				}
				switch {
				case b.TxCount() == 0:
					emptyBlocks++
				case b.Transactions != nil:
					withBodies++
				default:
					hashesOnly++
				}
				checkDerived(t, &b)

				var want, got map[string]any
				if err := json.Unmarshal(c.Response.Result, &want); err != nil {
					t.Fatal(err)
				}
				out := b.AppendJSON(nil, fullTx)
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatalf("AppendJSON wrote invalid JSON: %v", err)
				}
				if td, ok := got["totalDifficulty"]; !ok || td != nil {
					t.Errorf(`"totalDifficulty" = %v (present %t), want null for a block decoded without it`, td, ok)
				}
				delete(got, "totalDifficulty")
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("AppendJSON(nil, %t) differs from the fixture (-fixture +encoded):\n%s", fullTx, diff)
				}
			})
		}
	}
	// test_02 and test_08 have transaction objects, test_01 and test_13
	// hashes, test_10 and test_12 the genesis block.
	if withBodies < 2 || hashesOnly < 2 || emptyBlocks < 2 {
		t.Errorf("checked %d blocks with transaction objects, %d with hashes, %d empty; want at least 2 of each",
			withBodies, hashesOnly, emptyBlocks)
	}
}

// ---------------------------------------------------------------------------
// Synthetic values

func ptr[T any](v T) *T { return &v }

func u256(v uint64) *uint256.Int { return uint256.NewInt(v) }

// big256 is a value wider than 64 bits, so that all four words matter.
func big256(hex string) uint256.Int { return *uint256.MustFromHex(hex) }

func hashOf(seed byte) (h backend.Hash) {
	for i := range h {
		h[i] = seed + byte(i)*7
	}
	return h
}

func addressOf(seed byte) (a backend.Address) {
	for i := range a {
		a[i] = seed ^ byte(i)*13
	}
	return a
}

func bloomOf(seed byte) (b backend.Bloom) {
	for i := 0; i < len(b); i += 5 {
		b[i] = seed + byte(i)
	}
	return b
}

// The indexes of syntheticTransactions' result.
const (
	txLegacy          = iota // EIP-155 legacy transaction
	txLegacyNoChainID        // pre-EIP-155 legacy transaction
	txCreate                 // legacy contract creation (To nil)
	txAccessList             // type 1
	txDynamicFee             // type 2
	txBlob                   // type 3
	txSetCode                // type 4
)

// syntheticBaseFee is the base fee of the synthetic London and later blocks;
// the fee-market transactions below have the effective gas price it gives.
const syntheticBaseFee = 7

var (
	sigR = big256("0x9242685bf161793cc25603c231bc2f568eb630ea16aa137d2664ac8038825608")
	sigS = big256("0x4f8ae3bd7535248d0bd448298cc2e2071e56992d0774dc340c368ae950852ada")
)

// syntheticTransactions returns one transaction of each kind, their fee
// fields set as a block with syntheticBaseFee serves them.
func syntheticTransactions() []*backend.Transaction {
	return []*backend.Transaction{
		txLegacy: {
			Type: backend.LegacyTxType, ChainID: u256(1), Nonce: 9,
			GasPrice: u256(20_000_000_000), Gas: 21_000, To: ptr(addressOf(0x35)),
			Value: big256("0x3635c9adc5dea00000"), // 1000 ether, above 64 bits
			V:     *u256(37), R: sigR, S: sigS,
			Hash: hashOf(0xa0), From: addressOf(0xa1),
		},
		txLegacyNoChainID: {
			Type: backend.LegacyTxType, Nonce: 0x100,
			GasPrice: u256(50_000_000_000), Gas: 90_000, To: ptr(addressOf(0x36)),
			Value: *u256(1), Input: []byte{0xa9, 0x05, 0x9c, 0xbb},
			V: *u256(28), R: sigR, S: sigS,
			Hash: hashOf(0xa2), From: addressOf(0xa3),
		},
		txCreate: {
			Type: backend.LegacyTxType, ChainID: u256(1),
			GasPrice: u256(1), Gas: 1_000_000, To: nil,
			Input: []byte{0x60, 0x80, 0x60, 0x40, 0x52, 0x34, 0x80, 0x15},
			V:     *u256(38), R: sigR, S: sigS,
			Hash: hashOf(0xa4), From: addressOf(0xa5),
		},
		txAccessList: {
			Type: backend.AccessListTxType, ChainID: u256(1), Nonce: 3,
			GasPrice: u256(30_000_000_000), Gas: 60_000, To: ptr(addressOf(0x37)),
			AccessList: []backend.AccessTuple{
				{Address: addressOf(0x40), StorageKeys: []backend.Hash{hashOf(0x41), hashOf(0x42)}},
				{Address: addressOf(0x43)},
			},
			V: *u256(1), R: sigR, S: sigS,
			Hash: hashOf(0xa6), From: addressOf(0xa7),
		},
		txDynamicFee: {
			Type: backend.DynamicFeeTxType, ChainID: u256(1), Nonce: 4,
			GasPrice:             u256(syntheticBaseFee + 2), // the effective price
			MaxPriorityFeePerGas: u256(2), MaxFeePerGas: u256(100),
			Gas: 21_000, To: ptr(addressOf(0x38)), Value: *u256(5),
			V: *u256(0), R: sigR, S: sigS,
			Hash: hashOf(0xa8), From: addressOf(0xa9),
		},
		txBlob: {
			Type: backend.BlobTxType, ChainID: u256(1), Nonce: 5,
			GasPrice:             u256(syntheticBaseFee + 3),
			MaxPriorityFeePerGas: u256(3), MaxFeePerGas: u256(200),
			Gas: 100_000, To: ptr(addressOf(0x39)),
			AccessList:          []backend.AccessTuple{{Address: addressOf(0x44), StorageKeys: []backend.Hash{hashOf(0x45)}}},
			MaxFeePerBlobGas:    u256(1 << 40),
			BlobVersionedHashes: []backend.Hash{hashOf(0x01), hashOf(0x02)},
			V:                   *u256(1), R: sigR, S: sigS,
			Hash: hashOf(0xaa), From: addressOf(0xab),
		},
		txSetCode: {
			Type: backend.SetCodeTxType, ChainID: u256(1), Nonce: 6,
			GasPrice:             u256(50), // capped by maxFeePerGas
			MaxPriorityFeePerGas: u256(1000), MaxFeePerGas: u256(50),
			Gas: 80_000, To: ptr(addressOf(0x3a)),
			AuthorizationList: []backend.SetCodeAuthorization{
				{ChainID: *u256(1), Address: addressOf(0x50), Nonce: 7, YParity: 1, R: sigR, S: sigS},
				{ChainID: *u256(0), Address: addressOf(0x51), Nonce: 0, YParity: 0, R: sigS, S: sigR},
			},
			V: *u256(0), R: sigR, S: sigS,
			Hash: hashOf(0xac), From: addressOf(0xad),
		},
	}
}

// pragueHeader has every fork field.
func pragueHeader() backend.Header {
	return backend.Header{
		ParentHash: hashOf(1), Sha3Uncles: hashOf(2), Miner: addressOf(3),
		StateRoot: hashOf(4), TransactionsRoot: hashOf(5), ReceiptsRoot: hashOf(6),
		LogsBloom: bloomOf(7), Number: 0x1234, GasLimit: 30_000_000, GasUsed: 1_234_567,
		Timestamp: 1_700_000_000, ExtraData: []byte("synthetic"), MixHash: hashOf(8),
		BaseFeePerGas:         u256(syntheticBaseFee),
		WithdrawalsRoot:       ptr(hashOf(9)),
		BlobGasUsed:           ptr(uint64(0x40000)),
		ExcessBlobGas:         ptr(uint64(0)),
		ParentBeaconBlockRoot: ptr(hashOf(10)),
		RequestsHash:          ptr(hashOf(11)),
	}
}

// frontierHeader has no fork field and a proof-of-work difficulty and nonce.
func frontierHeader() backend.Header {
	return backend.Header{
		ParentHash: hashOf(21), Sha3Uncles: hashOf(22), Miner: addressOf(23),
		StateRoot: hashOf(24), TransactionsRoot: hashOf(25), ReceiptsRoot: hashOf(26),
		LogsBloom: bloomOf(27), Difficulty: big256("0xc70d815d562d3cfa955"),
		Number: 4_306_300, GasLimit: 6_700_000, GasUsed: 6_600_000, Timestamp: 1_506_000_000,
		ExtraData: []byte{}, MixHash: hashOf(28), Nonce: backend.Nonce{1, 2, 3, 4, 5, 6, 7, 8},
	}
}

// pragueBlock is a mined block with every fork field, one transaction of
// each type, uncles, withdrawals and a total difficulty.
func pragueBlock() *backend.Block {
	return &backend.Block{
		Header:          pragueHeader(),
		Hash:            hashOf(0x77),
		Size:            0x1f00,
		TotalDifficulty: ptr(big256("0xc70d815d562d3cfa955")),
		Transactions:    syntheticTransactions(),
		Uncles:          []backend.Hash{hashOf(0x60), hashOf(0x61)},
		Withdrawals: []backend.Withdrawal{
			{Index: 1, ValidatorIndex: 2, Address: addressOf(0x70), Amount: 3},
			{Index: 0xffffffff, ValidatorIndex: 0, Address: addressOf(0x71), Amount: 32_000_000_000},
		},
	}
}

// syntheticBlocks are the blocks the round-trip and fuzz tests start from.
// Fields that the wire form leaves null (those of the pending block) are
// zero, so that each survives a round trip unchanged.
func syntheticBlocks() map[string]*backend.Block {
	txs := syntheticTransactions()

	frontier := &backend.Block{
		Header: frontierHeader(), Hash: hashOf(0x78), Size: 0x220,
		Transactions: []*backend.Transaction{txs[txLegacyNoChainID], txs[txCreate]},
		Uncles:       []backend.Hash{hashOf(0x62)},
	}

	hashesOnly := &backend.Block{
		Header: pragueHeader(), Hash: hashOf(0x79), Size: 0x300,
		TotalDifficulty:   u256(0),
		TransactionHashes: []backend.Hash{hashOf(0x80), hashOf(0x81), hashOf(0x82)},
	}

	empty := &backend.Block{Header: frontierHeader(), Hash: hashOf(0x7a), Size: 0x21c, TotalDifficulty: u256(0x400000000)}

	shanghai := &backend.Block{Header: pragueHeader(), Hash: hashOf(0x7b), Size: 0x280}
	shanghai.BlobGasUsed, shanghai.ExcessBlobGas, shanghai.ParentBeaconBlockRoot, shanghai.RequestsHash = nil, nil, nil, nil

	pending := &backend.Block{Header: pragueHeader(), Size: 0x900, Transactions: syntheticTransactions(), Pending: true}
	pending.Number, pending.Nonce, pending.LogsBloom = 0, backend.Nonce{}, backend.Bloom{}

	return map[string]*backend.Block{
		"prague":      pragueBlock(),
		"frontier":    frontier,
		"hashes only": hashesOnly,
		"empty":       empty,
		"shanghai":    shanghai,
		"pending":     pending,
	}
}

func syntheticUncles() map[string]*backend.Uncle {
	withRoot := pragueHeader()
	return map[string]*backend.Uncle{
		"with total difficulty":    {Header: frontierHeader(), Hash: hashOf(0x90), Size: 0x21f, TotalDifficulty: ptr(big256("0x1000000000000000000000001"))},
		"without total difficulty": {Header: frontierHeader(), Hash: hashOf(0x91), Size: 0x21f},
		"with withdrawalsRoot":     {Header: withRoot, Hash: hashOf(0x92), Size: 0x2a0},
	}
}

// equateEmpty lets a nil slice equal an empty one: the wire form of both is
// [] (or, for a transaction input, "0x").
var equateEmpty = cmpopts.EquateEmpty()

// decodeObject returns the JSON object data holds, for looking at members.
func decodeObject(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("invalid JSON object: %v\n%s", err, data)
	}
	return m
}

// objectKeys returns the keys of the JSON object data, in their order.
func objectKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object (%v): %s", err, data)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// transactionObjects returns the raw transaction objects of a block object.
func transactionObjects(t *testing.T, block []byte) []json.RawMessage {
	t.Helper()
	var b struct{ Transactions []json.RawMessage }
	if err := json.Unmarshal(block, &b); err != nil {
		t.Fatal(err)
	}
	return b.Transactions
}

// ---------------------------------------------------------------------------
// Round trips and the encoded form

func TestBlockRoundTrip(t *testing.T) {
	for name, b := range syntheticBlocks() {
		t.Run(name, func(t *testing.T) {
			data, err := json.Marshal(b) // also checks that the output is valid JSON
			if err != nil {
				t.Fatal(err)
			}
			if appended := b.AppendJSON([]byte("prefix"), true); !bytes.Equal(appended, append([]byte("prefix"), data...)) {
				t.Errorf("AppendJSON(prefix, true) is not prefix followed by MarshalJSON's output")
			}
			var got backend.Block
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("decoding %s: %v", data, err)
			}
			if diff := cmp.Diff(b, &got, equateEmpty); diff != "" {
				t.Errorf("decode(encode(block)) differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBlockWithoutTransactionDetails checks that fullTx=false writes the
// transaction hashes of a block that holds the bodies.
func TestBlockWithoutTransactionDetails(t *testing.T) {
	b := pragueBlock()
	var got backend.Block
	if err := json.Unmarshal(b.AppendJSON(nil, false), &got); err != nil {
		t.Fatal(err)
	}
	var want []backend.Hash
	for _, tx := range b.Transactions {
		want = append(want, tx.Hash)
	}
	if got.Transactions != nil || !cmp.Equal(got.TransactionHashes, want) {
		t.Errorf("decoded %d transaction objects and hashes %v; want only the hashes %v", len(got.Transactions), got.TransactionHashes, want)
	}
	got.TransactionHashes, got.Transactions = nil, b.Transactions
	if diff := cmp.Diff(b, &got, equateEmpty); diff != "" {
		t.Errorf("the rest of the block differs (-want +got):\n%s", diff)
	}
}

// txList lends transactions one at a time, as a Lender's decoder does.
type txList []*backend.Transaction

func (l *txList) DecodeNext(tx *backend.Transaction) (bool, error) {
	if len(*l) == 0 {
		return false, nil
	}
	*tx, *l = *(*l)[0], (*l)[1:]
	return true, nil
}

// TestLentTransactionHashes lends a block with its transaction hashes and
// a decoder of its transactions, as a store whose records keep both does:
// written with details, a transaction whose hash is not the one the block
// names for it, or transactions fewer or more than the hashes, are an
// error, not an answer whose hashes differ as the details are asked for.
func TestLentTransactionHashes(t *testing.T) {
	b := pragueBlock()
	hashes := backend.TransactionHashes(b.Transactions)
	lend := func(hashes []backend.Hash, txs []*backend.Transaction) ([]byte, error) {
		lent := *b
		lent.Transactions, lent.TransactionHashes = nil, hashes
		l := txList(txs)
		return lent.AppendLentJSON(nil, true, &l)
	}
	if got, err := lend(hashes, b.Transactions); err != nil || !bytes.Equal(got, b.AppendJSON(nil, true)) {
		t.Fatalf("lent with its hashes: %v\n got  %.200s\n want %.200s", err, got, b.AppendJSON(nil, true))
	}
	other := slices.Clone(hashes)
	other[1][0] ^= 1
	var mismatch *backend.MismatchError
	for what, c := range map[string]struct {
		hashes []backend.Hash
		txs    []*backend.Transaction
	}{
		"a hash changed":        {other, b.Transactions},
		"a transaction missing": {hashes, b.Transactions[:len(b.Transactions)-1]},
		"a transaction more":    {hashes[:len(hashes)-1], b.Transactions},
	} {
		if _, err := lend(c.hashes, c.txs); !errors.As(err, &mismatch) {
			t.Errorf("%s: %v, want a *MismatchError", what, err)
		}
	}
}

func TestUncleRoundTrip(t *testing.T) {
	for name, u := range syntheticUncles() {
		t.Run(name, func(t *testing.T) {
			data, err := json.Marshal(u)
			if err != nil {
				t.Fatal(err)
			}
			m := decodeObject(t, data)
			if _, ok := m["transactions"]; ok {
				t.Errorf(`uncle object has a "transactions" member: %s`, data)
			}
			if _, ok := m["withdrawals"]; ok {
				t.Errorf(`uncle object has a "withdrawals" member: %s`, data)
			}
			if uncles, ok := m["uncles"].([]any); !ok || len(uncles) != 0 {
				t.Errorf(`"uncles" = %v, want []`, m["uncles"])
			}
			var got backend.Uncle
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("decoding %s: %v", data, err)
			}
			if diff := cmp.Diff(u, &got, equateEmpty); diff != "" {
				t.Errorf("decode(encode(uncle)) differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTransactionRoundTrip encodes transactions outside any block. Such an
// object has no effective price, so for fee-market types its gasPrice is
// maxFeePerGas, which is what decoding gives back.
func TestTransactionRoundTrip(t *testing.T) {
	for i, tx := range syntheticTransactions() {
		t.Run(fmt.Sprintf("%d/type%d", i, tx.Type), func(t *testing.T) {
			data, err := json.Marshal(tx)
			if err != nil {
				t.Fatal(err)
			}
			var got backend.Transaction
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("decoding %s: %v", data, err)
			}
			want := tx.Copy()
			if tx.Type >= backend.DynamicFeeTxType {
				want.GasPrice = tx.MaxFeePerGas
			}
			if diff := cmp.Diff(want, &got, equateEmpty); diff != "" {
				t.Errorf("decode(encode(tx)) differs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithdrawalRoundTrip(t *testing.T) {
	for _, wd := range pragueBlock().Withdrawals {
		data, err := json.Marshal(wd)
		if err != nil {
			t.Fatal(err)
		}
		var got backend.Withdrawal
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("decoding %s: %v", data, err)
		}
		if got != wd {
			t.Errorf("decode(%s) = %+v, want %+v", data, got, wd)
		}
		if keys := objectKeys(t, data); !cmp.Equal(keys, []string{"index", "validatorIndex", "address", "amount"}) {
			t.Errorf("withdrawal members %v, want index, validatorIndex, address, amount", keys)
		}
	}
}

// TestBlockMembers checks the members of a block object: in go-ethereum's
// order, which is sorted by name because it marshals blocks as maps, and
// those that each fork's blocks have.
func TestBlockMembers(t *testing.T) {
	for name, tc := range map[string]struct {
		block *backend.Block
		want  []string // in any order
	}{
		"prague": {pragueBlock(), []string{
			"baseFeePerGas", "blobGasUsed", "difficulty", "excessBlobGas", "extraData",
			"gasLimit", "gasUsed", "hash", "logsBloom", "miner", "mixHash", "nonce",
			"number", "parentBeaconBlockRoot", "parentHash", "receiptsRoot",
			"requestsHash", "sha3Uncles", "size", "stateRoot", "timestamp",
			"totalDifficulty", "transactions", "transactionsRoot", "uncles",
			"withdrawals", "withdrawalsRoot",
		}},
		"frontier": {syntheticBlocks()["frontier"], []string{
			"difficulty", "extraData", "gasLimit", "gasUsed", "hash", "logsBloom",
			"miner", "mixHash", "nonce", "number", "parentHash", "receiptsRoot",
			"sha3Uncles", "size", "stateRoot", "timestamp", "totalDifficulty",
			"transactions", "transactionsRoot", "uncles",
		}},
	} {
		keys := objectKeys(t, tc.block.AppendJSON(nil, true))
		if !slices.IsSorted(keys) {
			t.Errorf("%s block members are not in sorted order: %v", name, keys)
		}
		if diff := cmp.Diff(tc.want, keys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("%s block members (-want +got):\n%s", name, diff)
		}
	}
}

// TestTransactionMemberOrder checks the members of each transaction type
// against go-ethereum's RPCTransaction, whose field order its output keeps.
func TestTransactionMemberOrder(t *testing.T) {
	want := map[int]string{
		txLegacy:          "blockHash blockNumber blockTimestamp from gas gasPrice hash input nonce to transactionIndex value type chainId v r s",
		txLegacyNoChainID: "blockHash blockNumber blockTimestamp from gas gasPrice hash input nonce to transactionIndex value type v r s",
		txCreate:          "blockHash blockNumber blockTimestamp from gas gasPrice hash input nonce to transactionIndex value type chainId v r s",
		txAccessList:      "blockHash blockNumber blockTimestamp from gas gasPrice hash input nonce to transactionIndex value type accessList chainId v r s yParity",
		txDynamicFee:      "blockHash blockNumber blockTimestamp from gas gasPrice maxFeePerGas maxPriorityFeePerGas hash input nonce to transactionIndex value type accessList chainId v r s yParity",
		txBlob:            "blockHash blockNumber blockTimestamp from gas gasPrice maxFeePerGas maxPriorityFeePerGas maxFeePerBlobGas hash input nonce to transactionIndex value type accessList chainId blobVersionedHashes v r s yParity",
		txSetCode:         "blockHash blockNumber blockTimestamp from gas gasPrice maxFeePerGas maxPriorityFeePerGas hash input nonce to transactionIndex value type accessList chainId authorizationList v r s yParity",
	}
	objects := transactionObjects(t, pragueBlock().AppendJSON(nil, true))
	if len(objects) != len(want) {
		t.Fatalf("block wrote %d transaction objects, want %d", len(objects), len(want))
	}
	for i, obj := range objects {
		if diff := cmp.Diff(strings.Fields(want[i]), objectKeys(t, obj)); diff != "" {
			t.Errorf("transaction %d members (-want +got):\n%s", i, diff)
		}
	}
	var auth struct {
		AuthorizationList []json.RawMessage `json:"authorizationList"`
	}
	if err := json.Unmarshal(objects[txSetCode], &auth); err != nil || len(auth.AuthorizationList) == 0 {
		t.Fatalf("authorizationList: %v", err)
	}
	if keys := objectKeys(t, auth.AuthorizationList[0]); !cmp.Equal(keys, strings.Fields("chainId address nonce yParity r s")) {
		t.Errorf("authorization members %v, want chainId address nonce yParity r s", keys)
	}
}

// TestTransactionPositionMembers checks the members that place a transaction
// in its block, in a mined block, in the pending block and outside a block.
func TestTransactionPositionMembers(t *testing.T) {
	mined := pragueBlock()
	for i, obj := range transactionObjects(t, mined.AppendJSON(nil, true)) {
		m := decodeObject(t, obj)
		want := map[string]any{
			"blockHash":        mined.Hash.String(),
			"blockNumber":      "0x1234",
			"blockTimestamp":   "0x6553f100",
			"transactionIndex": fmt.Sprintf("0x%x", i),
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("mined transaction %d: %q = %v, want %v", i, k, m[k], v)
			}
		}
	}

	pending := syntheticBlocks()["pending"]
	block := decodeObject(t, pending.AppendJSON(nil, true))
	for _, k := range []string{"hash", "nonce", "logsBloom", "number"} {
		if v, ok := block[k]; !ok || v != nil {
			t.Errorf("pending block: %q = %v (present %t), want null", k, v, ok)
		}
	}
	for i, obj := range transactionObjects(t, pending.AppendJSON(nil, true)) {
		m := decodeObject(t, obj)
		want := map[string]any{
			"blockHash":        nil,
			"blockNumber":      nil,
			"blockTimestamp":   "0x6553f100",
			"transactionIndex": fmt.Sprintf("0x%x", i),
		}
		for k, v := range want {
			if got, ok := m[k]; !ok || got != v {
				t.Errorf("pending transaction %d: %q = %v (present %t), want %v", i, k, got, ok, v)
			}
		}
	}

	for i, tx := range syntheticTransactions() {
		data, err := tx.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		m := decodeObject(t, data)
		for _, k := range []string{"blockHash", "blockNumber", "blockTimestamp", "transactionIndex"} {
			if v, ok := m[k]; !ok || v != nil {
				t.Errorf("transaction %d outside a block: %q = %v (present %t), want null", i, k, v, ok)
			}
		}
		wantPrice := tx.GasPrice
		if tx.Type >= backend.DynamicFeeTxType {
			wantPrice = tx.MaxFeePerGas
		}
		if m["gasPrice"] != wantPrice.Hex() {
			t.Errorf("transaction %d (type %d) outside a block: gasPrice = %v, want %s", i, tx.Type, m["gasPrice"], wantPrice.Hex())
		}
	}
}

func TestTotalDifficultyMember(t *testing.T) {
	for _, tc := range []struct {
		td   *uint256.Int
		want any
	}{
		{nil, nil},
		{u256(0), "0x0"},
		{ptr(big256("0xc70d815d562d3cfa955")), "0xc70d815d562d3cfa955"},
	} {
		b := pragueBlock()
		b.TotalDifficulty = tc.td
		if got, ok := decodeObject(t, b.AppendJSON(nil, true))["totalDifficulty"]; !ok || got != tc.want {
			t.Errorf("TotalDifficulty %v: member = %v (present %t), want %v", tc.td, got, ok, tc.want)
		}
		u := backend.Uncle{Header: frontierHeader(), TotalDifficulty: tc.td}
		if got, ok := decodeObject(t, u.AppendJSON(nil))["totalDifficulty"]; !ok || got != tc.want {
			t.Errorf("uncle TotalDifficulty %v: member = %v (present %t), want %v", tc.td, got, ok, tc.want)
		}
	}
}

// TestEffectiveGasPrice checks that a mined fee-market transaction without
// a stated gas price is served with min(maxFeePerGas, baseFee+tip).
func TestEffectiveGasPrice(t *testing.T) {
	for _, tc := range []struct {
		baseFee, tip, feeCap uint64
		want                 string
	}{
		{baseFee: 7, tip: 2, feeCap: 100, want: "0x9"},
		{baseFee: 99, tip: 2, feeCap: 100, want: "0x64"},  // capped
		{baseFee: 98, tip: 2, feeCap: 100, want: "0x64"},  // exactly the cap
		{baseFee: 10, tip: 0, feeCap: 10, want: "0xa"},    // no tip
		{baseFee: 1, tip: 100, feeCap: 100, want: "0x64"}, // tip alone reaches the cap
	} {
		tx := syntheticTransactions()[txDynamicFee]
		tx.GasPrice = nil
		tx.MaxPriorityFeePerGas, tx.MaxFeePerGas = u256(tc.tip), u256(tc.feeCap)
		b := &backend.Block{Header: pragueHeader(), Hash: hashOf(0x55), Transactions: []*backend.Transaction{tx}}
		b.BaseFeePerGas = u256(tc.baseFee)

		objects := transactionObjects(t, b.AppendJSON(nil, true))
		if got := decodeObject(t, objects[0])["gasPrice"]; got != tc.want {
			t.Errorf("baseFee %d, tip %d, cap %d: gasPrice = %v, want %s", tc.baseFee, tc.tip, tc.feeCap, got, tc.want)
		}
		price, ok := tx.EffectiveGasPrice(u256(tc.baseFee))
		if !ok || price.Hex() != tc.want {
			t.Errorf("EffectiveGasPrice(%d) = %s, %t; want %s", tc.baseFee, price.Hex(), ok, tc.want)
		}
		// The fee cap stays the price outside a block.
		standalone := decodeObject(t, must(tx.MarshalJSON()))
		if got, want := standalone["gasPrice"], u256(tc.feeCap).Hex(); got != want {
			t.Errorf("outside a block: gasPrice = %v, want maxFeePerGas %s", got, want)
		}
	}
	// A stated price is served as it is.
	tx := syntheticTransactions()[txDynamicFee]
	tx.GasPrice = u256(12345)
	b := &backend.Block{Header: pragueHeader(), Hash: hashOf(0x55), Transactions: []*backend.Transaction{tx}}
	if got := decodeObject(t, transactionObjects(t, b.AppendJSON(nil, true))[0])["gasPrice"]; got != "0x3039" {
		t.Errorf("stated gasPrice 12345: served %v, want 0x3039", got)
	}
	if _, ok := syntheticTransactions()[txLegacy].EffectiveGasPrice(u256(7)); ok {
		t.Errorf("EffectiveGasPrice of a legacy transaction reports ok")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// ---------------------------------------------------------------------------
// Decoding errors

// editedBlockJSON returns the JSON of pragueBlock after edit has changed its
// generic form; txs are the block's transaction objects.
func editedBlockJSON(t *testing.T, edit func(block map[string]any, txs []map[string]any)) []byte {
	t.Helper()
	block := decodeObject(t, pragueBlock().AppendJSON(nil, true))
	var txs []map[string]any
	for _, tx := range block["transactions"].([]any) {
		txs = append(txs, tx.(map[string]any))
	}
	edit(block, txs)
	data, err := json.Marshal(block)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestBlockDecodingFieldErrors(t *testing.T) {
	type edit = func(block map[string]any, txs []map[string]any)
	deleteBlock := func(key string) edit {
		return func(block map[string]any, _ []map[string]any) { delete(block, key) }
	}
	deleteTx := func(i int, key string) edit {
		return func(_ map[string]any, txs []map[string]any) { delete(txs[i], key) }
	}
	setTx := func(i int, key string, v any) edit {
		return func(_ map[string]any, txs []map[string]any) { txs[i][key] = v }
	}
	tests := []struct {
		name          string
		edit          edit
		object, field string
		missing       bool   // the error is ErrMissingField
		message       string // in the error's message
	}{
		{name: "no parentHash", edit: deleteBlock("parentHash"), object: "block", field: "parentHash", missing: true},
		{name: "no miner", edit: deleteBlock("miner"), object: "block", field: "miner", missing: true},
		{name: "no stateRoot", edit: deleteBlock("stateRoot"), object: "block", field: "stateRoot", missing: true},
		{name: "no receiptsRoot", edit: deleteBlock("receiptsRoot"), object: "block", field: "receiptsRoot", missing: true},
		{name: "no logsBloom", edit: deleteBlock("logsBloom"), object: "block", field: "logsBloom", missing: true},
		{name: "no difficulty", edit: deleteBlock("difficulty"), object: "block", field: "difficulty", missing: true},
		{name: "no gasLimit", edit: deleteBlock("gasLimit"), object: "block", field: "gasLimit", missing: true},
		{name: "no gasUsed", edit: deleteBlock("gasUsed"), object: "block", field: "gasUsed", missing: true},
		{name: "no timestamp", edit: deleteBlock("timestamp"), object: "block", field: "timestamp", missing: true},
		{name: "no extraData", edit: deleteBlock("extraData"), object: "block", field: "extraData", missing: true},
		{name: "no mixHash", edit: deleteBlock("mixHash"), object: "block", field: "mixHash", missing: true},
		{name: "no nonce", edit: deleteBlock("nonce"), object: "block", field: "nonce", missing: true},
		{name: "no transactions", edit: deleteBlock("transactions"), object: "block", field: "transactions", missing: true},

		{name: "tx without from", edit: deleteTx(0, "from"), object: "transaction 0", field: "from", missing: true},
		{name: "tx without gas", edit: deleteTx(1, "gas"), object: "transaction 1", field: "gas", missing: true},
		{name: "tx without input", edit: deleteTx(0, "input"), object: "transaction 0", field: "input", missing: true},
		{name: "tx without nonce", edit: deleteTx(0, "nonce"), object: "transaction 0", field: "nonce", missing: true},
		{name: "tx without value", edit: deleteTx(0, "value"), object: "transaction 0", field: "value", missing: true},
		{name: "tx without r", edit: deleteTx(0, "r"), object: "transaction 0", field: "r", missing: true},
		{name: "tx without s", edit: deleteTx(0, "s"), object: "transaction 0", field: "s", missing: true},
		{name: "legacy tx without v", edit: deleteTx(txLegacy, "v"), object: "transaction 0", field: "v", missing: true},
		{name: "legacy tx without gasPrice", edit: deleteTx(txCreate, "gasPrice"), object: "transaction 2", field: "gasPrice", missing: true},
		{name: "type-1 tx without chainId", edit: deleteTx(txAccessList, "chainId"), object: "transaction 3", field: "chainId", missing: true},
		{name: "type-1 tx without accessList", edit: deleteTx(txAccessList, "accessList"), object: "transaction 3", field: "accessList", missing: true},
		{name: "type-2 tx without maxFeePerGas", edit: deleteTx(txDynamicFee, "maxFeePerGas"), object: "transaction 4", field: "maxFeePerGas", missing: true},
		{name: "type-2 tx without maxPriorityFeePerGas", edit: deleteTx(txDynamicFee, "maxPriorityFeePerGas"), object: "transaction 4", field: "maxPriorityFeePerGas", missing: true},
		{name: "blob tx without to", edit: setTx(txBlob, "to", nil), object: "transaction 5", field: "to", missing: true},
		{name: "blob tx without maxFeePerBlobGas", edit: deleteTx(txBlob, "maxFeePerBlobGas"), object: "transaction 5", field: "maxFeePerBlobGas", missing: true},
		{name: "blob tx without blobVersionedHashes", edit: deleteTx(txBlob, "blobVersionedHashes"), object: "transaction 5", field: "blobVersionedHashes", missing: true},
		{name: "set-code tx without authorizationList", edit: deleteTx(txSetCode, "authorizationList"), object: "transaction 6", field: "authorizationList", missing: true},
		{name: "set-code tx without to", edit: deleteTx(txSetCode, "to"), object: "transaction 6", field: "to", missing: true},

		{name: "tx in another block", edit: setTx(1, "blockHash", hashOf(0x99).String()), object: "transaction 1", field: "blockHash", message: "but the block's is " + hashOf(0x77).String()},
		{name: "tx at another height", edit: setTx(2, "blockNumber", "0x1235"), object: "transaction 2", field: "blockNumber", message: "0x1235, but the block's is 0x1234"},
		{name: "tx at another time", edit: setTx(2, "blockTimestamp", "0x1"), object: "transaction 2", field: "blockTimestamp"},
		{name: "tx at another index", edit: setTx(3, "transactionIndex", "0x4"), object: "transaction 3", field: "transactionIndex", message: "0x4, but the block's is 0x3"},
		{name: "yParity disagrees with v", edit: setTx(txDynamicFee, "yParity", "0x1"), object: "transaction 4", field: "yParity"},
		{name: "transaction type 5", edit: setTx(txSetCode, "type", "0x5"), object: "transaction 6", field: "type", message: "unsupported transaction type 0x5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := editedBlockJSON(t, tc.edit)
			var b backend.Block
			err := json.Unmarshal(data, &b)
			var fe *backend.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T), want a *backend.FieldError", err, err)
			}
			if fe.Object != tc.object || fe.Field != tc.field {
				t.Errorf("error names %q, %q; want %q, %q (error: %v)", fe.Object, fe.Field, tc.object, tc.field, err)
			}
			if got := errors.Is(err, backend.ErrMissingField); got != tc.missing {
				t.Errorf("errors.Is(%v, ErrMissingField) = %t, want %t", err, got, tc.missing)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q does not mention %q", err, tc.message)
			}
		})
	}
}

// TestBlockDecodingHexErrors checks that a malformed value's error names the
// member, which encoding/json adds as "Go struct field ... .<key>".
func TestBlockDecodingHexErrors(t *testing.T) {
	tests := []struct {
		key, value string
		inTx       bool
		reason     string // hexutil's message, in the error
	}{
		{key: "difficulty", value: "0xzz", reason: "invalid hex string"},
		{key: "number", value: "0x01", reason: "hex number with leading zero digits"},
		{key: "gasLimit", value: "1000", reason: "hex string without 0x prefix"},
		{key: "baseFeePerGas", value: "0x" + strings.Repeat("f", 65), reason: "hex number > 256 bits"},
		{key: "extraData", value: "0xabc", reason: "hex string of odd length"},
		{key: "stateRoot", value: "0x" + strings.Repeat("g", 64), reason: "invalid hex string"},
		{key: "size", value: "0x10000000000000000", reason: "hex number > 64 bits"},
		{key: "gas", value: "0x", inTx: true, reason: `hex string "0x"`},
		{key: "value", value: "0x0g", inTx: true, reason: "hex number with leading zero digits"},
		{key: "input", value: "00", inTx: true, reason: "hex string without 0x prefix"},
	}
	for _, tc := range tests {
		data := editedBlockJSON(t, func(block map[string]any, txs []map[string]any) {
			if tc.inTx {
				txs[0][tc.key] = tc.value
			} else {
				block[tc.key] = tc.value
			}
		})
		var b backend.Block
		err := json.Unmarshal(data, &b)
		if err == nil {
			t.Errorf("%q: %q decoded without error", tc.key, tc.value)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "Go struct field ") || !strings.Contains(msg, "."+tc.key+" ") {
			t.Errorf("%q: %q: error %q does not name the field", tc.key, tc.value, err)
		}
		if !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%q: %q: error %q does not give the reason %q", tc.key, tc.value, err, tc.reason)
		}
	}
}

func TestDecodingOtherObjects(t *testing.T) {
	var u backend.Uncle
	uncle := decodeObject(t, syntheticUncles()["with total difficulty"].AppendJSON(nil))
	uncle["number"] = nil
	err := u.UnmarshalJSON(must(json.Marshal(uncle)))
	var fe *backend.FieldError
	if !errors.As(err, &fe) || fe.Object != "uncle" || fe.Field != "number" || !errors.Is(err, backend.ErrMissingField) {
		t.Errorf("uncle without number: error %v, want a missing-field error for uncle number", err)
	}

	tx := decodeObject(t, must(syntheticTransactions()[txDynamicFee].MarshalJSON()))
	delete(tx, "from")
	err = new(backend.Transaction).UnmarshalJSON(must(json.Marshal(tx)))
	if !errors.As(err, &fe) || fe.Object != "transaction" || fe.Field != "from" || !errors.Is(err, backend.ErrMissingField) {
		t.Errorf("transaction without from: error %v, want a missing-field error for transaction from", err)
	}

	for _, input := range []string{`null`, `"0x1"`, `[]`, ``} {
		if err := new(backend.Transaction).UnmarshalJSON([]byte(input)); err == nil {
			t.Errorf("Transaction.UnmarshalJSON(%q) succeeded", input)
		}
	}

	for _, tc := range []struct{ input, field string }{
		{`{"validatorIndex":"0x1","address":"0x0000000000000000000000000000000000000000","amount":"0x1"}`, "index"},
		{`{"index":"0x1","address":"0x0000000000000000000000000000000000000000","amount":"0x1"}`, "validatorIndex"},
		{`{"index":"0x1","validatorIndex":"0x1","amount":"0x1"}`, "address"},
		{`{"index":"0x1","validatorIndex":"0x1","address":"0x0000000000000000000000000000000000000000"}`, "amount"},
	} {
		var wd backend.Withdrawal
		err := json.Unmarshal([]byte(tc.input), &wd)
		if !errors.As(err, &fe) || fe.Object != "withdrawal" || fe.Field != tc.field {
			t.Errorf("withdrawal %s: error %v, want a FieldError for %q", tc.input, err, tc.field)
		}
	}
}

// ---------------------------------------------------------------------------
// Copy

// mutate changes every value reachable from v in place: it writes through
// pointers and into slice elements instead of replacing them, so that any
// memory v shares with another value changes there too.
func mutate(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			mutate(v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			mutate(v.Index(i))
		}
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.String:
		v.SetString(v.String() + "!")
	default:
		panic("mutate: unhandled kind " + v.Kind().String())
	}
}

// requirePopulated fails the test where a value reachable from v is a nil
// pointer or an empty slice: the Copy tests must reach every field.
func requirePopulated(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			t.Fatalf("%s is nil; set it so that Copy is checked for it", path)
		}
		requirePopulated(t, path, v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			requirePopulated(t, path+"."+v.Type().Field(i).Name, v.Field(i))
		}
	case reflect.Slice:
		if v.Len() == 0 {
			t.Fatalf("%s is empty; give it an element so that Copy is checked for it", path)
		}
		fallthrough
	case reflect.Array:
		for i := range v.Len() {
			requirePopulated(t, fmt.Sprintf("%s[%d]", path, i), v.Index(i))
		}
	}
}

// everyFieldTransaction sets every field, whether or not its type has it.
func everyFieldTransaction(seed byte) *backend.Transaction {
	tx := syntheticTransactions()[txBlob]
	tx.Input = []byte{seed, 2, 3}
	tx.AccessList[0].StorageKeys = append(tx.AccessList[0].StorageKeys, hashOf(seed))
	tx.AuthorizationList = syntheticTransactions()[txSetCode].AuthorizationList
	tx.Hash = hashOf(seed)
	return tx
}

func everyFieldBlock() *backend.Block {
	b := pragueBlock()
	b.Transactions = []*backend.Transaction{everyFieldTransaction(1), everyFieldTransaction(2)}
	b.TransactionHashes = []backend.Hash{hashOf(0x10), hashOf(0x11)}
	b.ExtraData = []byte{1, 2, 3}
	return b
}

func everyFieldUncle() *backend.Uncle {
	b := everyFieldBlock()
	return &backend.Uncle{Header: b.Header, Hash: b.Hash, Size: b.Size, TotalDifficulty: b.TotalDifficulty}
}

// TestCopy changes every field of a copy and checks that the original stays
// as it was.
func TestCopy(t *testing.T) {
	tests := []struct {
		name  string
		fresh func() any      // a new value, the same on every call
		copy  func(v any) any // its Copy
	}{
		{"Block", func() any { return everyFieldBlock() }, func(v any) any { return v.(*backend.Block).Copy() }},
		{"Uncle", func() any { return everyFieldUncle() }, func(v any) any { return v.(*backend.Uncle).Copy() }},
		{"Transaction", func() any { return everyFieldTransaction(7) }, func(v any) any { return v.(*backend.Transaction).Copy() }},
		{"Header", func() any { h := pragueHeader(); return &h }, func(v any) any { c := v.(*backend.Header).Copy(); return &c }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			original := tc.fresh()
			requirePopulated(t, tc.name, reflect.ValueOf(original))
			c := tc.copy(original)
			if diff := cmp.Diff(original, c); diff != "" {
				t.Fatalf("Copy differs from the original (-original +copy):\n%s", diff)
			}
			mutate(reflect.ValueOf(c))
			if diff := cmp.Diff(tc.fresh(), original); diff != "" {
				t.Errorf("changing the copy changed the original (-before +after):\n%s", diff)
			}
		})
	}
}

// TestReencodingDecodedBlocks takes block objects that are valid but not as
// this package writes them, and checks what FuzzBlockJSON checks: a block
// that decodes encodes to an object that decodes to the same block.
func TestReencodingDecodedBlocks(t *testing.T) {
	tests := []struct {
		name string
		edit func(block map[string]any, txs []map[string]any)
	}{
		{"no hash member", func(block map[string]any, _ []map[string]any) {
			delete(block, "hash") // the transactions' blockHash is taken
		}},
		{"no uncles member", func(block map[string]any, _ []map[string]any) { delete(block, "uncles") }},
		{"fee-market transaction without gasPrice", func(_ map[string]any, txs []map[string]any) {
			delete(txs[txDynamicFee], "gasPrice")
		}},
		{"typed transaction with yParity and no v", func(_ map[string]any, txs []map[string]any) {
			delete(txs[txAccessList], "v")
		}},
		{"transactions without block members", func(_ map[string]any, txs []map[string]any) {
			for _, tx := range txs {
				for _, k := range []string{"blockHash", "blockNumber", "blockTimestamp", "transactionIndex"} {
					delete(tx, k)
				}
			}
		}},
		{"pending block", func(block map[string]any, txs []map[string]any) {
			for _, k := range []string{"hash", "nonce", "logsBloom", "number"} {
				block[k] = nil
			}
			for _, tx := range txs {
				tx["blockHash"], tx["blockNumber"] = nil, nil
			}
		}},
		// The remaining cases decode, but their encoding did not decode to
		// the same block when this test was written.
		{"blob transaction with an empty blobVersionedHashes", func(_ map[string]any, txs []map[string]any) {
			txs[txBlob]["blobVersionedHashes"] = []any{}
		}},
		{"set-code transaction with an empty authorizationList", func(_ map[string]any, txs []map[string]any) {
			txs[txSetCode]["authorizationList"] = []any{}
		}},
		{"typed transaction with a v above 64 bits", func(_ map[string]any, txs []map[string]any) {
			txs[txDynamicFee]["v"] = "0x10000000000000001"
			delete(txs[txDynamicFee], "yParity")
		}},
		{"withdrawals without withdrawalsRoot", func(block map[string]any, _ []map[string]any) {
			delete(block, "withdrawalsRoot")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := editedBlockJSON(t, tc.edit)
			var b backend.Block
			if err := b.UnmarshalJSON(data); err != nil {
				return // rejecting the object is as good as keeping it whole
			}
			enc := b.AppendJSON(nil, true)
			var again backend.Block
			if err := again.UnmarshalJSON(enc); err != nil {
				t.Fatalf("the object decodes, but its encoding does not: %v", err)
			}
			if diff := cmp.Diff(lossless(&b, &again), &again, equateEmpty); diff != "" {
				t.Errorf("the object decodes, but encoding and decoding it again changes it (-decoded +re-decoded):\n%s", diff)
			}
		})
	}
}
