package specs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/examples/interop/gethconv"
	"github.com/blockrpc/blockrpc/examples/interop/gethnode"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rlp"
)

// The execution-apis chain: 54 blocks after the genesis, the merge at 36.
const (
	execHead       = 54
	execMergeBlock = 36
	execUncles     = 18
)

// execChain is the execution-apis chain decoded with go-ethereum, loaded
// into a memstore through the public API and served by the handler.
type execChain struct {
	dir     string
	genesis *core.Genesis
	blocks  []*types.Block // by number, the genesis first
	// td is the total difficulty of each block, summed here from the
	// blocks' difficulties, independently of memstore.
	td    map[common.Hash]*big.Int
	store *memstore.Store
	rpc   *server
}

func loadExecChain(t testing.TB) *execChain {
	t.Helper()
	dir := fixture(t, "execution-apis")
	genesis, err := gethconv.ReadGenesis(filepath.Join(dir, "genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := &execChain{dir: dir, genesis: genesis, blocks: []*types.Block{genesis.ToBlock()}}
	for _, b := range decodeBlocks(t, filepath.Join(dir, "chain.rlp")) {
		if b.NumberU64() == 0 {
			if b.Hash() != c.blocks[0].Hash() {
				t.Fatalf("chain.rlp's genesis %s is not genesis.json's %s", b.Hash(), c.blocks[0].Hash())
			}
			continue
		}
		parent := c.blocks[len(c.blocks)-1]
		if b.NumberU64() != parent.NumberU64()+1 || b.ParentHash() != parent.Hash() {
			t.Fatalf("chain.rlp: block %d (%s) does not follow block %d (%s)", b.NumberU64(), b.Hash(), parent.NumberU64(), parent.Hash())
		}
		c.blocks = append(c.blocks, b)
	}
	if len(c.blocks) != execHead+1 {
		t.Fatalf("chain.rlp holds blocks up to %d, want %d", len(c.blocks)-1, execHead)
	}

	c.td = make(map[common.Hash]*big.Int)
	sum := new(big.Int)
	for _, b := range c.blocks {
		sum = new(big.Int).Add(sum, b.Difficulty())
		c.td[b.Hash()] = sum
	}

	c.store = memstore.New()
	if err := c.store.SetChainID(genesis.Config.ChainID.Uint64()); err != nil {
		t.Fatal(err)
	}
	signer := types.LatestSignerForChainID(genesis.Config.ChainID)
	for _, b := range c.blocks {
		block, uncles, err := gethconv.Block(signer, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.store.AddBlock(block, uncles...); err != nil {
			t.Fatalf("memstore refused block %d: %v", b.NumberU64(), err)
		}
	}
	c.setForkChoice(t)
	c.rpc = serve(t, c.store)
	return c
}

// decodeBlocks reads concatenated RLP blocks, as `geth export` writes them.
func decodeBlocks(t testing.TB, path string) []*types.Block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stream := rlp.NewStream(bufio.NewReader(f), 0)
	var blocks []*types.Block
	for {
		b := new(types.Block)
		err := stream.Decode(b)
		if errors.Is(err, io.EOF) {
			return blocks
		}
		if err != nil {
			t.Fatalf("%s: block %d: %v", path, len(blocks), err)
		}
		blocks = append(blocks, b)
	}
}

// setForkChoice marks safe and finalized as headfcu.json does, and checks
// that its head is the chain's.
func (c *execChain) setForkChoice(t testing.TB) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.dir, "headfcu.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fcu struct {
		Params []*struct {
			Head      common.Hash `json:"headBlockHash"`
			Safe      common.Hash `json:"safeBlockHash"`
			Finalized common.Hash `json:"finalizedBlockHash"`
		} `json:"params"`
	}
	if err := json.Unmarshal(data, &fcu); err != nil || len(fcu.Params) == 0 || fcu.Params[0] == nil {
		t.Fatalf("headfcu.json: no fork choice state: %v", err)
	}
	state := fcu.Params[0]
	numbers := make(map[common.Hash]uint64, len(c.blocks))
	for _, b := range c.blocks {
		numbers[b.Hash()] = b.NumberU64()
	}
	for _, tag := range []struct {
		name string
		hash common.Hash
		set  func(uint64) error
	}{
		{"head", state.Head, func(n uint64) error {
			if n != execHead {
				return fmt.Errorf("the head is block %d, the chain's head is %d", n, execHead)
			}
			return nil
		}},
		{"safe", state.Safe, c.store.SetSafe},
		{"finalized", state.Finalized, c.store.SetFinalized},
	} {
		n, ok := numbers[tag.hash]
		if !ok {
			t.Fatalf("headfcu.json: the %s block %s is not in the chain", tag.name, tag.hash)
		}
		if err := tag.set(n); err != nil {
			t.Fatalf("headfcu.json: %s: %v", tag.name, err)
		}
	}
}

// exchange is one request of a .io file and the answer recorded for it.
type exchange struct {
	file     string
	request  []byte
	response []byte
}

// readExchanges reads the `>>` request and `<<` answer lines of the .io
// files in the given method folders.
func readExchanges(t testing.TB, dir string, methods ...string) []exchange {
	t.Helper()
	var out []exchange
	for _, method := range methods {
		files, err := filepath.Glob(filepath.Join(dir, method, "*.io"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no .io files in %s: %v", filepath.Join(dir, method), err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(method, filepath.Base(f))
			var pending []byte
			found := 0
			for line := range strings.Lines(string(data)) {
				line = strings.TrimRight(line, "\r\n")
				switch {
				case strings.HasPrefix(line, ">> "):
					pending = []byte(strings.TrimPrefix(line, ">> "))
				case strings.HasPrefix(line, "<< "):
					if pending == nil {
						t.Fatalf("%s: an answer without a request", name)
					}
					out = append(out, exchange{file: name, request: pending, response: []byte(strings.TrimPrefix(line, "<< "))})
					pending = nil
					found++
				}
			}
			if found == 0 || pending != nil {
				t.Fatalf("%s: %d exchanges, and a request without an answer: %v", name, found, pending != nil)
			}
		}
	}
	return out
}

// TestExecutionAPIsFixtures answers every eth_getBlockByNumber and
// eth_getBlockByHash request of the specification's tests through the
// handler: each answer must be the recorded one byte for byte, once the
// totalDifficulty this service adds is removed, and that totalDifficulty
// must be the sum of the difficulties from the genesis through the block.
func TestExecutionAPIsFixtures(t *testing.T) {
	c := loadExecChain(t)
	exchanges := readExchanges(t, c.dir, "eth_getBlockByNumber", "eth_getBlockByHash")
	compared, tds := 0, 0
	for _, x := range exchanges {
		answer := c.rpc.post(t, x.request)
		stripped, td := cutTotalDifficulty(t, answer)
		want := append(bytes.Clone(x.response), '\n')
		compared++
		if d := firstDifference(want, stripped); d != "" {
			t.Errorf("%s: the answer differs from the recorded one (want: the fixture, got: blockrpc without its totalDifficulty)\nrequest: %s\n%s", x.file, x.request, d)
		}
		if td == nil {
			continue
		}
		hash := common.HexToHash(stringMember(t, object(t, answer), "hash"))
		wantTD, ok := c.td[hash]
		if !ok {
			t.Errorf("%s: answered block %s is not in the chain", x.file, hash)
			continue
		}
		tds++
		if td.Cmp(wantTD) != 0 {
			t.Errorf("%s: totalDifficulty %d, want %d (the sum of the difficulties through block %s)", x.file, td, wantTD, hash)
		}
	}
	t.Logf("execution-apis fixtures: %d .io answers compared byte for byte with the recorded ones, %d totalDifficulty values checked", compared, tds)
}

// TestExecutionAPIsTotalDifficulty checks the totalDifficulty of every
// block, of the tags and of every uncle against sums made here: the sum of
// the difficulties through the block, constant after the merge, equal to
// the terminal total difficulty at the head; an uncle's is its parent's
// plus its own.
func TestExecutionAPIsTotalDifficulty(t *testing.T) {
	c := loadExecChain(t)
	ttd := c.genesis.Config.TerminalTotalDifficulty
	if ttd == nil {
		t.Fatal("genesis.json has no terminalTotalDifficulty")
	}
	// The chain itself: proof of work up to the merge block, none after.
	for _, b := range c.blocks[1:] {
		if pow := b.Difficulty().Sign() != 0; pow != (b.NumberU64() < execMergeBlock) {
			t.Errorf("block %d has difficulty %d: the merge is not at block %d", b.NumberU64(), b.Difficulty(), execMergeBlock)
		}
	}
	if head := c.td[c.blocks[execHead].Hash()]; head.Cmp(ttd) != 0 {
		t.Errorf("the sum of the difficulties at the head is %d, the terminal total difficulty %d", head, ttd)
	}

	blocks, uncles := 0, 0
	for _, b := range c.blocks {
		_, td := cutTotalDifficulty(t, c.rpc.call(t, "eth_getBlockByNumber", number(b.NumberU64()), false))
		blocks++
		if want := c.td[b.Hash()]; td == nil || td.Cmp(want) != 0 {
			t.Errorf("block %d: totalDifficulty %v, want %d", b.NumberU64(), td, want)
		}
		if b.NumberU64() >= execMergeBlock && td != nil && td.Cmp(ttd) != 0 {
			t.Errorf("block %d (after the merge): totalDifficulty %d, want the terminal %d", b.NumberU64(), td, ttd)
		}
		for i, u := range b.Uncles() {
			answer := c.rpc.call(t, "eth_getUncleByBlockHashAndIndex", b.Hash().Hex(), index(i))
			_, td := cutTotalDifficulty(t, answer)
			uncles++
			parentTD, ok := c.td[u.ParentHash]
			if !ok {
				t.Errorf("block %d uncle %d: its parent %s is not in the chain", b.NumberU64(), i, u.ParentHash)
				continue
			}
			want := new(big.Int).Add(parentTD, u.Difficulty)
			if td == nil || td.Cmp(want) != 0 {
				t.Errorf("block %d uncle %d: totalDifficulty %v, want %d (its parent's %d plus its own %d)", b.NumberU64(), i, td, want, parentTD, u.Difficulty)
			}
		}
	}
	for _, tag := range []string{"latest", "safe", "finalized"} {
		_, td := cutTotalDifficulty(t, c.rpc.call(t, "eth_getBlockByNumber", tag, false))
		if td == nil || td.Cmp(ttd) != 0 {
			t.Errorf("%s: totalDifficulty %v, want the terminal %d", tag, td, ttd)
		}
	}
	if uncles != execUncles {
		t.Errorf("the chain has %d uncles, the fixtures README says %d", uncles, execUncles)
	}
	t.Logf("execution-apis totalDifficulty: %d blocks, %d uncles, 3 tags checked (terminal total difficulty %d)", blocks, uncles, ttd)
}

// TestExecutionAPIsAgainstGeth imports the same chain into go-ethereum and
// compares its answers with blockrpc's, byte for byte once blockrpc's
// totalDifficulty and its transactions' blockTimestamp (which
// go-ethereum 1.16.9 does not write) are removed: every block by number
// and by hash, with and without transaction objects; every uncle by block
// hash and by block number; the uncle counts; and the null answers past
// the uncles and for an unknown hash.
func TestExecutionAPIsAgainstGeth(t *testing.T) {
	gethnode.Binary(t)
	c := loadExecChain(t)
	datadir := t.TempDir()
	gethnode.Exec(t, "init", "--datadir", datadir, filepath.Join(c.dir, "genesis.json"))
	// Not --nocompaction: with it, geth import exits 0 even when it
	// refuses a block.
	gethnode.Exec(t, "import", "--datadir", datadir, filepath.Join(c.dir, "chain.rlp"))
	g := startGeth(t, datadir)
	checkGethHead(t, g, c.blocks[0].Hash(), c.blocks[execHead].Hash())
	cmp := &comparer{ours: c.rpc, geth: g}

	uncles := 0
	for _, b := range c.blocks {
		n, hash := number(b.NumberU64()), b.Hash().Hex()
		label := fmt.Sprintf("block %d", b.NumberU64())
		for _, fullTx := range []bool{false, true} {
			kind := blockAnswer
			if fullTx {
				kind = fullTxAnswer
			}
			cmp.compare(t, label+" by number", kind, request("eth_getBlockByNumber", n, fullTx))
			cmp.compare(t, label+" by hash", kind, request("eth_getBlockByHash", hash, fullTx))
		}
		cmp.compare(t, label+" uncle count by hash", plainAnswer, request("eth_getUncleCountByBlockHash", hash))
		cmp.compare(t, label+" uncle count by number", plainAnswer, request("eth_getUncleCountByBlockNumber", n))
		for i := range b.Uncles() {
			ulabel := fmt.Sprintf("%s uncle %d", label, i)
			byHash, _ := cmp.compare(t, ulabel+" by block hash", uncleAnswer, request("eth_getUncleByBlockHashAndIndex", hash, index(i)))
			byNumber, _ := cmp.compare(t, ulabel+" by block number", uncleAnswer, request("eth_getUncleByBlockNumberAndIndex", n, index(i)))
			if !bytes.Equal(byHash, byNumber) {
				t.Errorf("%s: blockrpc answers differently by block hash and by number:\n%s", ulabel, firstDifference(byHash, byNumber))
			}
			uncles++
		}
		past := index(len(b.Uncles()))
		cmp.compare(t, label+" uncle past the last by hash", plainAnswer, request("eth_getUncleByBlockHashAndIndex", hash, past))
		cmp.compare(t, label+" uncle past the last by number", plainAnswer, request("eth_getUncleByBlockNumberAndIndex", n, past))
	}
	for _, tag := range []string{"latest", "earliest"} {
		cmp.compare(t, tag, blockAnswer, request("eth_getBlockByNumber", tag, false))
		cmp.compare(t, tag, fullTxAnswer, request("eth_getBlockByNumber", tag, true))
	}
	compareUnknown(t, cmp, common.HexToHash("0x00000000000000000000000000000000000000000000000000000000deadbeef"))
	if uncles != execUncles {
		t.Errorf("compared %d uncles, the chain has %d", uncles, execUncles)
	}
	t.Logf("execution-apis against go-ethereum: %d blocks, %d answers compared byte for byte, %d uncles (each by block hash and by block number)", len(c.blocks), cmp.compared, uncles)
}

// compareUnknown asks both for a block, an uncle and an uncle count under a
// hash that is no block's: each answer is null.
func compareUnknown(t testing.TB, cmp *comparer, hash common.Hash) {
	t.Helper()
	h := hash.Hex()
	for _, body := range [][]byte{
		request("eth_getBlockByHash", h, false),
		request("eth_getBlockByHash", h, true),
		request("eth_getUncleByBlockHashAndIndex", h, index(0)),
		request("eth_getUncleCountByBlockHash", h),
	} {
		ours, _ := cmp.compare(t, "unknown hash", plainAnswer, body)
		if !isNull(t, ours) {
			t.Errorf("unknown hash: %s answered %s, want null", body, ours)
		}
	}
}
