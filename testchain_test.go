package blockrpc_test

// The chains the tests serve, and the backends that misbehave.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/holiman/uint256"
)

// ---- A small chain to serve ------------------------------------------------

var (
	txSender    = backend.Address{0xa1, 0x01}
	txRecipient = backend.Address{0xb2, 0x02}
	blockMiner  = backend.Address{0xc3, 0x03}
)

// testChain is a canonical chain of blocks 0 to 3 in a memstore: block 1
// holds a legacy and a dynamic-fee transaction, block 3 has one uncle, and
// a pending block 4 with one transaction sits on top. Safe and finalized
// are not set.
type testChain struct {
	store   *memstore.Store
	blocks  []*backend.Block // the canonical blocks as stored, by number
	uncle   *backend.Uncle   // uncle 0 of blocks[3], as stored
	pending *backend.Block   // as given to SetPending
}

func testHeader(number uint64) backend.Header {
	return backend.Header{
		Number:     number,
		Difficulty: *uint256.NewInt(131_072 + number),
		GasLimit:   30_000_000,
		GasUsed:    21_000,
		Timestamp:  1_700_000_000 + 12*number,
		Miner:      blockMiner,
		ExtraData:  []byte("blockrpc handler tests"),
	}
}

func legacyTx(nonce uint64) *backend.Transaction {
	to := txRecipient
	return &backend.Transaction{
		Type:     backend.LegacyTxType,
		Nonce:    nonce,
		GasPrice: uint256.NewInt(20_000_000_000),
		Gas:      21_000,
		To:       &to,
		Value:    *uint256.NewInt(1_000_000_000_000_000_000),
		V:        *uint256.NewInt(27),
		R:        *uint256.NewInt(1),
		S:        *uint256.NewInt(2),
		From:     txSender,
	}
}

func dynamicFeeTx(nonce uint64) *backend.Transaction {
	to := txRecipient
	return &backend.Transaction{
		Type:                 backend.DynamicFeeTxType,
		ChainID:              uint256.NewInt(1),
		Nonce:                nonce,
		MaxPriorityFeePerGas: uint256.NewInt(1_000_000_000),
		MaxFeePerGas:         uint256.NewInt(50_000_000_000),
		Gas:                  50_000,
		To:                   &to,
		Input:                []byte{0xde, 0xad, 0xbe, 0xef},
		V:                    *uint256.NewInt(1),
		R:                    *uint256.NewInt(3),
		S:                    *uint256.NewInt(4),
		From:                 txSender,
	}
}

func newTestChain(t testing.TB) *testChain {
	t.Helper()
	c := &testChain{store: memstore.New()}
	c.add(t, &backend.Block{Header: testHeader(0)})

	b1 := &backend.Block{Header: testHeader(1), Transactions: []*backend.Transaction{legacyTx(0), dynamicFeeTx(1)}}
	b1.BaseFeePerGas = uint256.NewInt(7_000_000_000)
	c.add(t, b1)

	c.add(t, &backend.Block{Header: testHeader(2)})

	uncle := testHeader(2)
	uncle.ParentHash = c.blocks[1].Hash
	uncle.Timestamp++
	uncle.ExtraData = []byte("an uncle")
	c.add(t, &backend.Block{Header: testHeader(3)}, &backend.Uncle{Header: uncle})
	u, err := c.store.UncleByBlockHashAndIndex(context.Background(), c.blocks[3].Hash, 0)
	if err != nil {
		t.Fatalf("reading back the uncle: %v", err)
	}
	c.uncle = u

	c.pending = &backend.Block{Header: testHeader(4), Transactions: []*backend.Transaction{legacyTx(2)}}
	c.pending.ParentHash = c.blocks[3].Hash
	if err := c.store.SetPending(c.pending); err != nil {
		t.Fatalf("setting the pending block: %v", err)
	}
	return c
}

// add adds b on top of the chain and records it as the store has it.
func (c *testChain) add(t testing.TB, b *backend.Block, uncles ...*backend.Uncle) {
	t.Helper()
	if n := len(c.blocks); n > 0 {
		b.ParentHash = c.blocks[n-1].Hash
	}
	if err := c.store.AddBlock(b, uncles...); err != nil {
		t.Fatalf("adding block %d: %v", b.Number, err)
	}
	stored, err := c.store.BlockByNumber(context.Background(), backend.BlockNumber(b.Number))
	if err != nil {
		t.Fatalf("reading back block %d: %v", b.Number, err)
	}
	c.blocks = append(c.blocks, stored)
}

// compete adds a block that competes with block number of the chain (the
// same parent, other extra data) and so reorganises the store onto it;
// c.blocks still holds the chain as it was.
func (c *testChain) compete(t testing.TB, number uint64, extra string) {
	t.Helper()
	fork := &backend.Block{Header: testHeader(number)}
	fork.ParentHash = c.blocks[number-1].Hash
	fork.ExtraData = []byte(extra)
	if err := c.store.AddBlock(fork); err != nil {
		t.Fatal(err)
	}
}

// ---- Backends that misbehave ------------------------------------------------

// secretPath is a server-side detail that a backend error names and that
// must never reach a client.
const secretPath = "/var/lib/secret.db"

var errDisk = errors.New(secretPath + ": disk I/O error")

// failingBackend fails every lookup.
type failingBackend struct{}

func (failingBackend) ChainID(context.Context) (uint64, error) { return 0, errDisk }

func (failingBackend) BlockByNumber(context.Context, backend.BlockNumber) (*backend.Block, error) {
	return nil, errDisk
}

func (failingBackend) BlockByHash(context.Context, backend.Hash) (*backend.Block, error) {
	return nil, errDisk
}

func (failingBackend) UncleByBlockHashAndIndex(context.Context, backend.Hash, uint64) (*backend.Uncle, error) {
	return nil, errDisk
}

// panicBlock is the block number for which panickingBackend panics.
const panicBlock = 13

// panickingBackend serves a store, but panics when asked for block 13 by
// number, and for any uncle.
// panickingBackend and countingBackend embed the Backend interface, not the
// store: a wrapper that embedded the store would pass its LendBlockBy*
// methods on, and blockrpc would borrow past the methods it changes.
type panickingBackend struct{ backend.Backend }

func (b panickingBackend) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	if n == panicBlock {
		panic("index out of range in the block cache")
	}
	return b.Backend.BlockByNumber(ctx, n)
}

func (panickingBackend) UncleByBlockHashAndIndex(context.Context, backend.Hash, uint64) (*backend.Uncle, error) {
	panic(errors.New("uncle cache corrupted"))
}

// blockingBackend answers nothing until the request's context is done.
type blockingBackend struct{}

func (blockingBackend) ChainID(ctx context.Context) (uint64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (blockingBackend) BlockByNumber(ctx context.Context, _ backend.BlockNumber) (*backend.Block, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (blockingBackend) BlockByHash(ctx context.Context, _ backend.Hash) (*backend.Block, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (blockingBackend) UncleByBlockHashAndIndex(ctx context.Context, _ backend.Hash, _ uint64) (*backend.Uncle, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// countingBackend counts block lookups, and takes delay over each or
// until the request's deadline.
type countingBackend struct {
	backend.Backend
	calls *atomic.Int32
	delay time.Duration
}

func (b *countingBackend) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	b.calls.Add(1)
	select {
	case <-time.After(b.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.Backend.BlockByNumber(ctx, n)
}

// ---- Real chains ----------------------------------------------------------------

// demoChain loads the demo chain (memstore/demo), with its pending block,
// and returns the hash of every block in it, canonical or not, in the
// dump's order.
func demoChain(t testing.TB) (*memstore.Store, []backend.Hash) {
	t.Helper()
	store, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	dump, _ := demo.Dump()
	all, whole := dumpHashes(t, dump)
	if len(whole) != len(all) {
		t.Fatalf("the demo chain holds the transactions of %d of its %d blocks, want all", len(whole), len(all))
	}
	return store, all
}

// dumpHashes returns the hash of every block of a dump, in its order, once,
// and apart the hashes of those whose transactions it holds whole (or that
// have none), which can be answered with full transactions.
func dumpHashes(t testing.TB, dump []byte) (all, whole []backend.Hash) {
	t.Helper()
	seen := make(map[backend.Hash]bool)
	wholeSeen := make(map[backend.Hash]bool)
	lines := bufio.NewScanner(bytes.NewReader(dump))
	lines.Buffer(nil, len(dump)+1)
	for n := 1; lines.Scan(); n++ {
		var line struct {
			Block struct {
				Hash         backend.Hash
				Transactions []json.RawMessage
			} `json:"block"`
		}
		if err := json.Unmarshal(lines.Bytes(), &line); err != nil {
			t.Fatalf("dump line %d: %v", n, err)
		}
		hash := line.Block.Hash
		if !seen[hash] {
			seen[hash] = true
			all = append(all, hash)
		}
		txs := line.Block.Transactions
		if !wholeSeen[hash] && (len(txs) == 0 || txs[0][0] == '{') {
			wholeSeen[hash] = true
			whole = append(whole, hash)
		}
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	return all, whole
}

// mainnetCase is one case of the mainnet fixtures: a request and the answer
// a production client gave.
type mainnetCase struct {
	file     string
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response"`
}

func mainnetCases(t testing.TB) []mainnetCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtures.Path(t, "mainnet"), "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no mainnet fixtures: %v", err)
	}
	var cases []mainnetCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fc []mainnetCase
		if err := json.Unmarshal(data, &fc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i := range fc {
			fc[i].file = filepath.Join(filepath.Base(filepath.Dir(f)), filepath.Base(f))
		}
		cases = append(cases, fc...)
	}
	return cases
}

// mainnetDump turns the block objects of the fixture answers into a dump:
// the blocks go in through the loader like any user's data.
func mainnetDump(t testing.TB, cases []mainnetCase) []byte {
	t.Helper()
	var dump bytes.Buffer
	for _, c := range cases {
		var resp struct{ Result json.RawMessage }
		if err := json.Unmarshal(c.Response, &resp); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if string(resp.Result) == "null" {
			continue
		}
		dump.WriteString(`{"block":`)
		if err := json.Compact(&dump, resp.Result); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		dump.WriteString("}\n")
	}
	return dump.Bytes()
}
