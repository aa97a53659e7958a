package upstreamcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/blockrpctest"
	"github.com/blockrpc/blockrpc/examples/interop/demochain"
	"github.com/blockrpc/blockrpc/examples/interop/gethconv"
	"github.com/blockrpc/blockrpc/examples/interop/gethnode"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rlp"
)

// TestExecutionAPIsChain imports the execution-apis chain (54 blocks, 18
// uncles, the merge at 36) into geth, sets geth's fork choice as the
// fixture's headfcu.json does, and compares geth served through the
// upstream Backend, and copied by the Follower, with the chain's dump.
func TestExecutionAPIsChain(t *testing.T) {
	gethnode.Binary(t)
	dir := fixtures.Path(t, "execution-apis")
	genesisPath, chainPath := filepath.Join(dir, "genesis.json"), filepath.Join(dir, "chain.rlp")
	genesis, err := gethconv.ReadGenesis(genesisPath)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(chainPath)
	if err != nil {
		t.Fatal(err)
	}
	dump, err := gethconv.LoadExport(genesis, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	fcu := readForkChoice(t, filepath.Join(dir, "headfcu.json"))
	for _, tag := range []struct {
		hash backend.Hash
		set  func(uint64) error
	}{{fcu.Safe, dump.SetSafe}, {fcu.Finalized, dump.SetFinalized}} {
		b, err := dump.BlockByHash(context.Background(), tag.hash)
		if err != nil {
			t.Fatalf("headfcu.json's block %s: %v", tag.hash, err)
		}
		if err := tag.set(b.Number); err != nil {
			t.Fatal(err)
		}
	}

	g := startImported(t, nil, genesisPath, chainPath)
	g.forkChoice(t, fcu.Head, fcu.Safe, fcu.Finalized)
	checkAgainstDump(t, g, dump, nil)
}

// TestDemoChain imports the demo chain (111 blocks through every fork,
// uncles before the merge, and a side block at 60), as the dump that
// memstore/demo embeds has it, into geth; sets geth's safe and finalized
// blocks to the demo's; and compares geth served through the upstream
// Backend, and copied by the Follower, with blockrpc serving that dump.
func TestDemoChain(t *testing.T) {
	g, dump := startDemoChain(t)
	checkAgainstDump(t, g, dump, []backend.Hash{demo.SideHash})
}

// TestBatchLimit serves the demo chain through a geth that takes batches
// of 2 calls at most (--rpc.batch-request-limit), as providers cap them:
// the upstream Backend's polls (4 calls at first) and walks (32 headers)
// and the Follower's tags are sent in batches geth takes, and both serve
// what geth holds.
func TestBatchLimit(t *testing.T) {
	g, dump := startDemoChain(t, "--rpc.batch-request-limit", "2")
	answer := post(t, g.URL, []byte("["+string(request("eth_chainId"))+","+string(request("eth_blockNumber"))+","+string(request("eth_chainId"))+"]"))
	if !bytes.Contains(answer, []byte("batch too large")) {
		t.Fatalf("geth took a batch of 3 calls past its limit of 2: %s", answer)
	}
	checkAgainstDump(t, g, dump, []backend.Hash{demo.SideHash})
}

// startDemoChain starts geth, with extra arguments, on the demo chain
// with its side block and tags, and returns it with the dump.
func startDemoChain(t *testing.T, extra ...string) (*geth, *memstore.Store) {
	gethnode.Binary(t)
	dump, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	genesis := demochain.Genesis()
	first, err := dump.BlockByNumber(ctx, 0)
	if err != nil || first.Hash != backend.Hash(genesis.ToBlock().Hash()) {
		t.Fatalf("the embedded dump's genesis is not demochain.Genesis()'s: run make demo (%v)", err)
	}

	dir := t.TempDir()
	genesisPath, chainPath, sidePath := filepath.Join(dir, "genesis.json"), filepath.Join(dir, "chain.rlp"), filepath.Join(dir, "side.rlp")
	data, err := json.Marshal(genesis)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(genesisPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	lines, _ := demo.Dump()
	canonical, side := gethBlocks(t, lines)
	if len(canonical) != demo.Head+1 || len(side) != 1 || side[0].Hash() != common.Hash(demo.SideHash) {
		t.Fatalf("the dump holds %d canonical blocks and %d others, want %d and the side block", len(canonical), len(side), demo.Head+1)
	}
	writeRLP(t, chainPath, canonical[1:]...) // the genesis is geth init's
	// A file of its own: geth imports a file's blocks as one run.
	writeRLP(t, sidePath, side...)

	g := startImported(t, extra, genesisPath, chainPath, sidePath)
	var tags [3]backend.Hash
	for i, tag := range []backend.BlockNumber{backend.Latest, backend.Safe, backend.Finalized} {
		b, err := dump.BlockByNumber(ctx, tag)
		if err != nil {
			t.Fatal(err)
		}
		tags[i] = b.Hash
	}
	g.forkChoice(t, tags[0], tags[1], tags[2])
	return g, dump
}

// gethBlocks decodes a dump's lines into go-ethereum blocks, the canonical
// ones in order and the others apart, each checked to hash as the dump
// says: the line's block, its transactions and withdrawals as go-ethereum
// reads them from JSON, and its uncles.
func gethBlocks(t *testing.T, dump []byte) (canonical, others []*types.Block) {
	t.Helper()
	for i, line := range bytes.Split(bytes.TrimSpace(dump), []byte("\n")) {
		var l struct {
			Block     json.RawMessage
			Uncles    []*types.Header
			Canonical *bool
		}
		var body struct {
			Hash         common.Hash
			Transactions []*types.Transaction
			Withdrawals  []*types.Withdrawal
		}
		var header types.Header
		err := json.Unmarshal(line, &l)
		if err == nil {
			err = json.Unmarshal(l.Block, &body)
		}
		if err == nil {
			err = json.Unmarshal(l.Block, &header)
		}
		if err != nil {
			t.Fatalf("dump line %d: %v", i+1, err)
		}
		b := types.NewBlockWithHeader(&header).WithBody(types.Body{Transactions: body.Transactions, Uncles: l.Uncles, Withdrawals: body.Withdrawals})
		if b.Hash() != body.Hash {
			t.Fatalf("dump line %d: go-ethereum hashes the block to %s, the dump says %s", i+1, b.Hash(), body.Hash)
		}
		if l.Canonical != nil && !*l.Canonical {
			others = append(others, b)
		} else {
			canonical = append(canonical, b)
		}
	}
	return canonical, others
}

// checkAgainstDump serves geth through the upstream Backend and through a
// Follower's memstore, each behind blockrpc's handler, and compares every
// answer with blockrpc's from the dump: every canonical block by number
// and by hash with both forms of transactions, every uncle by block hash
// and by number (and the null one past the last), the uncle counts, the
// tags, blocks past the head and under an unknown hash, the block number
// and the chain id; sides are blocks off the canonical chain that geth
// holds too, asked for by hash through the upstream Backend only (the
// Follower copies the canonical chain).
//
// The Follower's answers must be the dump's byte for byte. The upstream
// Backend's too, but for totalDifficulty: geth 1.16.9 gives none, and
// these chains' total difficulty is not among those known to have frozen
// at the merge, so the upstream Backend cannot know it and serves null
// (backend/upstream's doc): the dump's value is nulled before comparing,
// and the upstream's must be null.
func checkAgainstDump(t *testing.T, g *geth, dump *memstore.Store, sides []backend.Hash) {
	ctx := context.Background()
	up := openUpstream(t, g.URL)
	store, follower := follow(t, g.URL, 100*time.Millisecond)
	took := waitFor(t, time.Minute, "the follower copies the chain and geth's tags", func() bool { return sameTags(store, dump) })
	waitFor(t, 10*time.Second, "the upstream Backend sees geth's tags", func() bool { return sameTags(up, dump) })
	if p := follower.Progress(); !p.Synced {
		t.Errorf("the follower holds geth's head but reports %+v", p)
	}

	c := &comparer{
		t:        t,
		dump:     blockrpctest.NewServer(t, dump).URL,
		upstream: blockrpctest.NewServer(t, up).URL,
		follower: blockrpctest.NewServer(t, store).URL,
	}
	head, err := dump.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		t.Fatal(err)
	}
	uncles := 0
	for n := uint64(0); n <= head.Number; n++ {
		b, err := dump.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatal(err)
		}
		number, hash := hexutil.EncodeUint64(n), b.Hash.String()
		// What the rules for totalDifficulty rest on: geth gives none.
		if answer := post(t, g.URL, request("eth_getBlockByNumber", number, false)); bytes.Contains(answer, []byte(`"totalDifficulty"`)) {
			t.Fatalf("geth gives a totalDifficulty for block %d: %s", n, answer)
		}
		for _, fullTx := range []bool{false, true} {
			c.same(true, "eth_getBlockByNumber", number, fullTx)
			c.same(true, "eth_getBlockByHash", hash, fullTx)
		}
		c.same(true, "eth_getUncleCountByBlockHash", hash)
		c.same(true, "eth_getUncleCountByBlockNumber", number)
		for i := range len(b.Uncles) + 1 { // the last is past the uncles: null
			c.same(true, "eth_getUncleByBlockHashAndIndex", hash, hexutil.EncodeUint64(uint64(i)))
			c.same(true, "eth_getUncleByBlockNumberAndIndex", number, hexutil.EncodeUint64(uint64(i)))
		}
		uncles += len(b.Uncles)
		c.blocks++
	}
	for _, h := range sides {
		for _, fullTx := range []bool{false, true} {
			c.same(false, "eth_getBlockByHash", h.String(), fullTx)
		}
		c.sides++
	}
	for _, tag := range []string{"latest", "earliest", "safe", "finalized"} {
		for _, fullTx := range []bool{false, true} {
			c.same(true, "eth_getBlockByNumber", tag, fullTx)
		}
	}
	past := hexutil.EncodeUint64(head.Number + 1)
	unknown := "0x00000000000000000000000000000000000000000000000000000000deadbeef"
	c.same(true, "eth_getBlockByNumber", past, false)
	c.same(true, "eth_getBlockByHash", unknown, true)
	c.same(true, "eth_getUncleByBlockHashAndIndex", unknown, "0x0")
	c.same(true, "eth_getUncleCountByBlockNumber", past)
	c.same(true, "eth_blockNumber")
	c.same(true, "eth_chainId")
	pending := c.checkPending(head.Hash)

	t.Logf("upstream Backend: %d blocks (%d canonical, %d off the chain, %d uncles), %d answers compared byte for byte with the dump's, %d of them with the dump's totalDifficulty nulled and null through upstream",
		c.blocks+c.sides, c.blocks, c.sides, uncles, c.answers[0], c.nulled)
	t.Logf("Follower: %d blocks (%d uncles) copied in %v, %d answers compared byte for byte with the dump's, totalDifficulty included",
		c.blocks, uncles, took.Round(time.Millisecond), c.answers[1])
	t.Logf("pending: %s", pending)
}

// comparer asks the same of blockrpc serving the dump, the upstream
// Backend and the Follower's store.
type comparer struct {
	t                        *testing.T
	dump, upstream, follower string
	answers                  [2]int // by the upstream Backend, by the Follower
	nulled, blocks, sides    int
}

var totalDifficulty = regexp.MustCompile(`"totalDifficulty":("0x[0-9a-f]+"|null)`)

// same compares one request's answers; withFollower is false for a request
// the Follower's store cannot answer as the dump does (a side block).
func (c *comparer) same(withFollower bool, method string, params ...any) {
	c.t.Helper()
	body := request(method, params...)
	want := post(c.t, c.dump, body)
	result(c.t, want)

	got := post(c.t, c.upstream, body)
	nulled := totalDifficulty.ReplaceAll(want, []byte(`"totalDifficulty":null`))
	if !bytes.Equal(got, nulled) {
		c.t.Errorf("upstream: %s differs from the dump's answer (totalDifficulty nulled) %s", body, firstDifference(nulled, got))
	}
	if obj := result(c.t, got); isObject(obj) {
		if !bytes.Contains(obj, []byte(`"totalDifficulty":null`)) {
			c.t.Errorf("upstream: %s: totalDifficulty is not null: %s", body, clip(obj))
		}
		c.nulled++
	}
	c.answers[0]++

	if withFollower {
		got := post(c.t, c.follower, body)
		if !bytes.Equal(got, want) {
			c.t.Errorf("follower: %s differs from the dump's answer %s", body, firstDifference(want, got))
		}
		c.answers[1]++
	}
}

// checkPending looks at the pending block both serve. geth's is not the
// dump's (the dump's pending block was never imported): geth builds its
// own on its head. Either serves it as the specification has a pending
// block (no hash, no number) on geth's head, or none.
func (c *comparer) checkPending(head backend.Hash) string {
	c.t.Helper()
	var seen []string
	for i, url := range []string{c.upstream, c.follower} {
		name := []string{"upstream", "follower"}[i]
		obj := result(c.t, post(c.t, url, request("eth_getBlockByNumber", "pending", false)))
		if !isObject(obj) {
			seen = append(seen, name+" none")
			continue
		}
		var p struct {
			Hash, Number *string
			ParentHash   backend.Hash
		}
		if err := json.Unmarshal(obj, &p); err != nil {
			c.t.Fatal(err)
		}
		if p.Hash != nil || p.Number != nil || p.ParentHash != head {
			c.t.Errorf("%s: the pending block is not a pending child of the head %s: %s", name, head, clip(obj))
		}
		seen = append(seen, name+" a child of the head")
	}
	return fmt.Sprint(seen)
}

// forkChoice is the state of a forkchoiceUpdated request.
type forkChoice struct {
	Head      backend.Hash `json:"headBlockHash"`
	Safe      backend.Hash `json:"safeBlockHash"`
	Finalized backend.Hash `json:"finalizedBlockHash"`
}

// readForkChoice reads the fork choice state of the execution-apis
// fixture's headfcu.json, an engine_forkchoiceUpdatedV3 request.
func readForkChoice(t *testing.T, path string) forkChoice {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fcu struct {
		Params []json.RawMessage `json:"params"`
	}
	var state forkChoice
	if err := json.Unmarshal(data, &fcu); err != nil || len(fcu.Params) == 0 {
		t.Fatalf("%s: no fork choice state: %v", path, err)
	}
	if err := json.Unmarshal(fcu.Params[0], &state); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return state
}

// writeRLP writes blocks as concatenated RLP, as `geth export` does.
func writeRLP(t *testing.T, path string, blocks ...*types.Block) {
	t.Helper()
	var buf bytes.Buffer
	for _, b := range blocks {
		if err := rlp.Encode(&buf, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
