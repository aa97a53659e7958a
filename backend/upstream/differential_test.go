package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/internal/fixturechains"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/holiman/uint256"
)

// mainnetFrozenTD is mainnet's total difficulty since the merge: that of
// its last proof-of-work block, 15,537,393.
var mainnetFrozenTD = uint256.MustFromDecimal("58750003716598352816469")

// richConfig is a chain through every fork in a few blocks: Berlin with
// uncles, London, the merge, Shanghai with withdrawals, Cancun, Prague.
var richConfig = chaintest.Config{Seed: 3, London: 6, Merge: 14, Shanghai: 16, Cancun: 18, Prague: 20}

// richChain builds 24 blocks of richConfig, four transactions a block of
// every kind the fork allows, an uncle in every third proof-of-work block,
// a withdrawal in every Shanghai block, a side branch of two blocks from
// block 21, a pending block, safe at 22 and finalized at 18.
func richChain(t testing.TB) *chaintest.Builder {
	t.Helper()
	b := chaintest.New(richConfig)
	gen := func(g *chaintest.BlockGen) {
		chaintest.Txs(4)(0, g)
		if n := g.Number(); n >= 2 && n%3 == 0 && n < richConfig.Merge {
			g.AddUncle()
		}
		if g.Number() >= richConfig.Shanghai {
			g.AddWithdrawal(g.Number(), chaintest.Key(9).Address(), 1000+g.Number())
		}
	}
	for range 24 {
		b.AddBlock(gen)
	}
	side := b.Fork(21)
	side.AddBlock(gen)
	side.AddBlock(gen)
	b.SetPending(func(g *chaintest.BlockGen) { chaintest.Txs(3)(0, g) })
	if err := b.Store().SetSafe(22); err != nil {
		t.Fatal(err)
	}
	if err := b.Store().SetFinalized(18); err != nil {
		t.Fatal(err)
	}
	return b
}

// diffCounts is what a differential comparison compared.
type diffCounts struct {
	blocks    int // distinct blocks asked for (canonical or side)
	uncles    int // answers of uncles among answers
	answers   int // answers compared byte for byte (each form of a block counts once)
	notFound  int // requests both answered as not found
	refused   int // requests the Backend rightly refused: blocks without transaction bodies
	tags      int // tags compared
	sideBlock int // side blocks among blocks
}

func (c *diffCounts) add(o diffCounts) {
	c.blocks += o.blocks
	c.uncles += o.uncles
	c.answers += o.answers
	c.notFound += o.notFound
	c.refused += o.refused
	c.tags += o.tags
	c.sideBlock += o.sideBlock
}

// savedBlock is a block of a store as its dump lists it.
type savedBlock struct {
	hash      backend.Hash
	canonical bool
}

// storedBlocks lists every block of a store, canonical chain first.
func storedBlocks(t testing.TB, s *memstore.Store) []savedBlock {
	t.Helper()
	var dump bytes.Buffer
	if err := s.Save(&dump); err != nil {
		t.Fatal(err)
	}
	var out []savedBlock
	for _, line := range bytes.Split(bytes.TrimSpace(dump.Bytes()), []byte("\n")) {
		var l struct {
			Block struct {
				Hash backend.Hash `json:"hash"`
			} `json:"block"`
			Canonical *bool `json:"canonical"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, savedBlock{hash: l.Block.Hash, canonical: l.Canonical == nil || *l.Canonical})
	}
	return out
}

// TestDifferential serves every chain the tests have (the demo chain, a
// chaintest chain through every fork, and the shared fixtures: the
// execution-apis chain, every ethereum-tests chain, the mainnet blocks)
// from a fake node, and checks that the upstream Backend over it answers
// exactly what memstore answers from the same chain: every block by
// number and by hash in both forms, every uncle, the tags, the chain id,
// and the same not-found answers; once with the cache and once without
// it, so that every answer is fetched and verified at least once. The
// only difference is the rule of the frozen total difficulty: a
// post-merge mainnet block, which memstore holds without its ancestry,
// has mainnet's final value rather than null. The mainnet blocks known by
// their transaction hashes only cannot be verified, and must be refused.
func TestDifferential(t *testing.T) {
	t.Parallel()
	type chain struct {
		name  string
		load  func(t *testing.T) *memstore.Store
		extra func(t *testing.T, s *memstore.Store) []backend.Hash
		// sparse: the blocks are not a chain (the mainnet fixtures), whose
		// head the tracker could not follow: the node names its genesis as
		// its latest block, and the other blocks are above its head.
		sparse bool
	}
	chains := []chain{
		{name: "demo", load: func(t *testing.T) *memstore.Store {
			s, err := demo.Store()
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{name: "chaintest", load: func(t *testing.T) *memstore.Store { return richChain(t).Store() }},
		{name: "execution-apis", load: func(t *testing.T) *memstore.Store { return fixturechains.ExecutionAPIs(t).Store }},
		{name: "mainnet", load: func(t *testing.T) *memstore.Store { return fixturechains.Mainnet(t).Store }, sparse: true},
	}
	var (
		mu      sync.Mutex
		total   diffCounts
		bySrc   = map[string]*diffCounts{}
		chained int
	)
	// The totals, once every chain is compared (the subtests run in
	// parallel, after this function returns).
	t.Cleanup(func() {
		for _, src := range []string{"demo", "chaintest", "execution-apis", "ethereum-tests", "mainnet"} {
			if c := bySrc[src]; c != nil {
				t.Logf("%s: %d blocks (%d side), %d tags; %d answers identical (%d of uncles), %d not found alike, %d refused",
					src, c.blocks, c.sideBlock, c.tags, c.answers, c.uncles, c.notFound, c.refused)
			}
		}
		t.Logf("in all, %d chains: %d blocks (%d side), %d tags; %d answers identical (%d of uncles), %d not found alike, %d refused",
			chained, total.blocks, total.sideBlock, total.tags, total.answers, total.uncles, total.notFound, total.refused)
	})
	run := func(t *testing.T, src, name string, load func(t *testing.T) *memstore.Store, sparse bool) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store := load(t)
			// With the cache, every block is fetched once, by number, and
			// answered from the cache by hash; without it, every answer by
			// hash and every uncle is fetched and verified again.
			for _, mode := range []struct {
				name     string
				cache    int64
				byNumber bool
			}{{"cache", 0, true}, {"no cache", -1, false}} {
				if sparse && !mode.byNumber {
					continue // two large blocks, verified again for little: the other chains cover it
				}
				t.Run(mode.name, func(t *testing.T) {
					c := compareChain(t, store, upstream.Config{CacheBytes: mode.cache, PollInterval: idle}, sparse, mode.byNumber)
					t.Logf("%d blocks (%d side), %d uncles, %d tags: %d answers identical, %d not found alike, %d refused (no transaction bodies to verify)",
						c.blocks, c.sideBlock, c.uncles, c.tags, c.answers, c.notFound, c.refused)
					if !mode.byNumber {
						c.blocks, c.sideBlock, c.tags = 0, 0, 0 // counted once, with the cache
					}
					mu.Lock()
					defer mu.Unlock()
					total.add(c)
					if bySrc[src] == nil {
						bySrc[src] = &diffCounts{}
					}
					bySrc[src].add(c)
					if mode.byNumber {
						chained++
					}
				})
			}
		})
	}
	for _, c := range chains {
		run(t, c.name, c.name, c.load, c.sparse)
	}
	t.Run("ethereum-tests", func(t *testing.T) {
		for _, c := range fixturechains.EthereumTests(t) {
			run(t, "ethereum-tests", strings.TrimPrefix(c.Name, "ethereum-tests/"), func(*testing.T) *memstore.Store { return c.Store }, false)
		}
	})
}

// expected is what the Backend must answer for a block memstore answers:
// the same, but for the frozen total difficulty of a post-merge mainnet
// block.
func expected(chainID uint64, b *backend.Block) *backend.Block {
	if b == nil || chainID != 1 || b.Number == 0 || !b.Difficulty.IsZero() {
		return b
	}
	c := *b
	c.TotalDifficulty = mainnetFrozenTD
	return &c
}

// compareChain serves store from a fake node and compares a Backend over
// it with the store.
func compareChain(t *testing.T, store *memstore.Store, cfg upstream.Config, sparse, byNumber bool) diffCounts {
	ctx := context.Background()
	node := newFakeNode(t, store)
	var genesis *backend.Block
	if sparse {
		genesis = storeBlock(t, store, backend.Earliest)
		node.SetRewrite(func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
			if method == "eth_getBlockByNumber" && len(params) == 2 && string(params[0]) == `"latest"` {
				return genesis.AppendJSON(nil, string(params[1]) == "true")
			}
			return result
		})
	}
	up := openUp(t, cfg, node.URL)
	chainID, err := store.ChainID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := up.ChainID(ctx); err != nil || got != chainID {
		t.Fatalf("ChainID = %d, %v; want %d", got, err, chainID)
	}

	var c diffCounts
	// same compares one answer; it returns false when the test cannot go
	// on with this block.
	same := func(what string, got, want *backend.Block, err, werr error) {
		t.Helper()
		switch {
		case werr != nil && errors.Is(werr, backend.ErrNotFound):
			if !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("%s: memstore has none, the Backend answers %v, %v", what, got != nil, err)
			}
			c.notFound++
		case werr != nil:
			t.Fatalf("%s: memstore: %v", what, werr)
		case !want.HasTransactionBodies():
			checkRefused(t, what, got, err)
			c.refused++
		case err != nil:
			t.Errorf("%s: %v", what, err)
		default:
			if d := diffAnswer(got, expected(chainID, want)); d != "" {
				t.Errorf("%s differs: %s", what, d)
			}
			c.answers += 2
		}
	}
	for _, sb := range storedBlocks(t, store) {
		want, err := store.BlockByHash(ctx, sb.hash)
		if err != nil {
			t.Fatal(err)
		}
		c.blocks++
		if !sb.canonical {
			c.sideBlock++
		}
		what := func(how string) string { return how + " of block " + want.Hash.String() }
		if sb.canonical && byNumber {
			got, err := up.BlockByNumber(ctx, backend.BlockNumber(want.Number))
			same(what("by number"), got, want, err, nil)
		}
		got, err := up.BlockByHash(ctx, sb.hash)
		same(what("by hash"), got, want, err, nil)
		for i := range uint64(len(want.Uncles)) + 1 {
			wu, werr := store.UncleByBlockHashAndIndex(ctx, sb.hash, i)
			gu, err := up.UncleByBlockHashAndIndex(ctx, sb.hash, i)
			switch {
			case !want.HasTransactionBodies():
				if gu != nil || err == nil || errors.Is(err, backend.ErrNotFound) {
					t.Errorf("%s: uncle %d of a block that cannot be verified: %v, %v", what("uncles"), i, gu != nil, err)
				}
				c.refused++
			case errors.Is(werr, backend.ErrNotFound):
				if !errors.Is(err, backend.ErrNotFound) {
					t.Errorf("%s: uncle %d past the last: %v", what("uncles"), i, err)
				}
				c.notFound++
			case werr != nil:
				t.Fatal(werr)
			case err != nil:
				t.Errorf("%s: uncle %d: %v", what("uncles"), i, err)
			default:
				if g, w := gu.AppendJSON(nil), wu.AppendJSON(nil); !bytes.Equal(g, w) {
					t.Errorf("%s: uncle %d differs: %s", what("uncles"), i, firstDiff(g, w))
				}
				c.uncles++
				c.answers++
			}
		}
	}

	for _, tag := range []backend.BlockNumber{backend.Latest, backend.Earliest, backend.Safe, backend.Finalized, backend.Pending} {
		want, werr := store.BlockByNumber(ctx, tag)
		if sparse && tag == backend.Latest {
			want, werr = genesis, nil // as the node names it
		}
		got, err := up.BlockByNumber(ctx, tag)
		same("tag "+tag.String(), got, want, err, werr)
		c.tags++
	}

	// What neither has.
	head := storeBlock(t, store, backend.Latest)
	for _, n := range []uint64{head.Number + 1, head.Number + 1000} {
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(n))
		same("block past the head", got, nil, err, backend.ErrNotFound)
	}
	if sparse {
		got, err := up.BlockByNumber(ctx, backend.BlockNumber(genesis.Number+5))
		same("a block between the fixture's", got, nil, err, backend.ErrNotFound)
	}
	unknown := backend.Hash{0xde, 0xad}
	got, err := up.BlockByHash(ctx, unknown)
	same("unknown hash", got, nil, err, backend.ErrNotFound)
	if u, err := up.UncleByBlockHashAndIndex(ctx, unknown, 0); u != nil || !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("uncle of an unknown block: %v, %v", u != nil, err)
	}
	c.notFound++
	for _, s := range up.Status() {
		if !s.Healthy && c.refused == 0 {
			t.Errorf("endpoint %s is not healthy after the comparison: %+v", s.Endpoint, s)
		}
	}
	return c
}
