package upstream_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/holiman/uint256"
)

// powChain is a proof-of-work chain with uncles, whose total difficulty
// grows with every block: 20 blocks, an uncle in every fourth.
func powChain(t testing.TB) *memstore.Store {
	t.Helper()
	b := chaintest.New(chaintest.Config{Seed: 13, London: 5, Merge: chaintest.Never, Shanghai: chaintest.Never, Cancun: chaintest.Never, Prague: chaintest.Never})
	b.AddBlocks(20, func(i int, g *chaintest.BlockGen) {
		chaintest.Txs(2)(i, g)
		if g.Number() >= 4 && g.Number()%4 == 0 {
			g.AddUncle()
		}
	})
	return b.Store()
}

// tdRewrite applies f to the totalDifficulty member of every block and
// uncle object; f returns nil to drop it.
func tdRewrite(f func(number uint64, td json.RawMessage) json.RawMessage) rewriter {
	return func(method string, _ []json.RawMessage, result json.RawMessage) json.RawMessage {
		if !strings.HasPrefix(method, "eth_get") || string(result) == "null" {
			return result
		}
		var n hexutil.Uint64
		if err := json.Unmarshal(member(result, "number"), &n); err != nil {
			return result // the pending block: left alone
		}
		td := f(uint64(n), member(result, "totalDifficulty"))
		if td == nil {
			return dropMember(result, "totalDifficulty")
		}
		return setMember(result, "totalDifficulty", td)
	}
}

// withTD returns a copy of b with the total difficulty td.
func withTD(b *backend.Block, td *uint256.Int) *backend.Block {
	c := *b
	c.TotalDifficulty = td
	return &c
}

// TestTotalDifficultyGiven serves a proof-of-work chain whose endpoint
// gives consistent total difficulties: they are served, for blocks and
// uncles, as memstore computes them.
func TestTotalDifficultyGiven(t *testing.T) {
	t.Parallel()
	store := powChain(t)
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	ctx := context.Background()
	for n := range backend.BlockNumber(21) {
		want := storeBlock(t, store, n)
		got, err := up.BlockByNumber(ctx, n)
		if err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		if got.TotalDifficulty == nil || !got.TotalDifficulty.Eq(want.TotalDifficulty) {
			t.Fatalf("block %d: totalDifficulty %v, want %v", n, got.TotalDifficulty, want.TotalDifficulty)
		}
		for i, wu := range storeUncles(t, store, want) {
			gu, err := up.UncleByBlockHashAndIndex(ctx, want.Hash, uint64(i))
			if err != nil || gu.TotalDifficulty == nil || !gu.TotalDifficulty.Eq(wu.TotalDifficulty) {
				t.Fatalf("block %d uncle %d: %v; totalDifficulty %v, want %v", n, i, err, gu.TotalDifficulty, wu.TotalDifficulty)
			}
		}
	}
}

// TestTotalDifficultyInconsistent gives a total difficulty that is not
// the parent's plus the block's difficulty, for a block and for an uncle:
// the block is refused, and served from an honest secondary.
func TestTotalDifficultyInconsistent(t *testing.T) {
	t.Parallel()
	store := powChain(t)
	ctx := context.Background()
	const target = 12 // a block with an uncle
	want := storeBlock(t, store, target)
	if len(want.Uncles) == 0 {
		t.Fatal("the target block has no uncle")
	}
	for _, tc := range []struct {
		name    string
		rewrite rewriter
		field   string
	}{
		{"block", blockRewrite(want.Hash, func(b json.RawMessage) json.RawMessage {
			return setMember(b, "totalDifficulty", quoted(hexutil.EncodeU256(new(uint256.Int).AddUint64(want.TotalDifficulty, 1))))
		}), "totalDifficulty"},
		{"uncle", uncleRewrite(want.Hash, 0, func(u json.RawMessage) json.RawMessage {
			return setMember(u, "totalDifficulty", quoted("0x1"))
		}), "uncle 0: totalDifficulty"},
		{"parent", blockRewrite(want.ParentHash, func(b json.RawMessage) json.RawMessage {
			return setMember(b, "totalDifficulty", quoted("0x2"))
		}), "totalDifficulty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			liar := newFakeNode(t, store)
			up := openUp(t, upstream.Config{PollInterval: idle}, liar.URL)
			liar.SetRewrite(tc.rewrite)
			got, err := up.BlockByHash(ctx, want.Hash)
			checkRefused(t, "an inconsistent total difficulty", got, err)
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("the error %q does not name %q", err, tc.field)
			}

			honest := newFakeNode(t, store)
			up = openUp(t, upstream.Config{PollInterval: idle}, liar.URL, honest.URL)
			got, err = up.BlockByNumber(ctx, target)
			if err != nil || diffAnswer(got, want) != "" {
				t.Fatalf("with an honest secondary: %v %s", err, diffAnswer(got, want))
			}
			if st := up.Status(); st[0].Healthy || !strings.Contains(st[0].LastError, "totalDifficulty") {
				t.Errorf("the liar's status: %+v", st[0])
			}
		})
	}
}

// TestTotalDifficultyAbsent serves a chain whose endpoint gives no total
// difficulty, as current nodes do, and one that gives it for blocks but
// not for their parents: null, since it cannot be known, and the answers
// otherwise memstore's.
func TestTotalDifficultyAbsent(t *testing.T) {
	t.Parallel()
	store := powChain(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		rewrite rewriter
	}{
		{"none given", tdRewrite(func(uint64, json.RawMessage) json.RawMessage { return nil })},
		// Only the blocks asked for, with their transactions, have one:
		// the parents, asked for by hash without, have none to check
		// against. (The blocks are read from the head down, so that no
		// parent is in the cache with a total difficulty yet.)
		{"not the parent's", func(method string, params []json.RawMessage, result json.RawMessage) json.RawMessage {
			if len(params) == 2 && string(params[1]) == "false" && string(result) != "null" {
				return dropMember(result, "totalDifficulty")
			}
			return result
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newFakeNode(t, store)
			node.SetRewrite(tc.rewrite)
			up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
			for n := backend.BlockNumber(20); n >= 0; n-- {
				want := storeBlock(t, store, n)
				got, err := up.BlockByNumber(ctx, n)
				if err != nil {
					t.Fatalf("block %d: %v", n, err)
				}
				wantTD := (*uint256.Int)(nil)
				if n == 0 && tc.name != "none given" {
					wantTD = want.TotalDifficulty // the genesis has no parent to check against
				}
				if d := diffAnswer(got, withTD(want, wantTD)); d != "" {
					t.Fatalf("block %d: %s", n, d)
				}
				for i, wu := range storeUncles(t, store, want) {
					gu, err := up.UncleByBlockHashAndIndex(ctx, want.Hash, uint64(i))
					if err != nil {
						t.Fatal(err)
					}
					u := *wu
					u.TotalDifficulty = nil
					if g, w := gu.AppendJSON(nil), u.AppendJSON(nil); string(g) != string(w) {
						t.Fatalf("block %d uncle %d: %s", n, i, firstDiff(g, w))
					}
				}
			}
		})
	}
}

// TestTotalDifficultyFrozen serves blocks of chain id 1 with difficulty 0:
// after the merge, mainnet's total difficulty is frozen at its final
// value, whatever the endpoint gives or not; a value other than it is
// refused. Blocks before the merge keep the usual rules. (The mainnet
// fixture blocks, post-merge blocks of chain 1, are served with the frozen
// value in TestDifferential, byte for byte.)
func TestTotalDifficultyFrozen(t *testing.T) {
	t.Parallel()
	b := chaintest.New(chaintest.Config{Seed: 17, ChainID: 1, London: 2, Merge: 6, Shanghai: 8, Cancun: 8, Prague: 8})
	b.AddBlocks(12, chaintest.Txs(2))
	store := b.Store()
	frozen := quoted(hexutil.EncodeU256(mainnetFrozenTD))
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		rewrite rewriter
		// what a post-merge block gets: nil for a refusal
		served bool
	}{
		{"none given", tdRewrite(func(uint64, json.RawMessage) json.RawMessage { return nil }), true},
		{"the frozen value given", tdRewrite(func(n uint64, td json.RawMessage) json.RawMessage {
			if n >= 6 {
				return frozen
			}
			return td
		}), true},
		// memstore adds up this chain's own difficulties: not mainnet's.
		{"another value given", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newFakeNode(t, store)
			node.SetRewrite(tc.rewrite)
			up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
			for n := range backend.BlockNumber(13) {
				want := storeBlock(t, store, n)
				got, err := up.BlockByNumber(ctx, n)
				switch {
				case n >= 6 && !tc.served:
					checkRefused(t, "a post-merge block with another total difficulty", got, err)
					if !strings.Contains(err.Error(), "totalDifficulty") {
						t.Errorf("block %d: the error %q does not name totalDifficulty", n, err)
					}
				case err != nil:
					t.Fatalf("block %d: %v", n, err)
				case n >= 6:
					if d := diffAnswer(got, withTD(want, mainnetFrozenTD)); d != "" {
						t.Fatalf("block %d: %s", n, d)
					}
				case tc.name == "none given":
					if d := diffAnswer(got, withTD(want, nil)); d != "" {
						t.Fatalf("block %d before the merge: %s", n, d)
					}
				default:
					if d := diffAnswer(got, want); d != "" {
						t.Fatalf("block %d before the merge: %s", n, d)
					}
				}
			}
		})
	}
}

// TestGenesisTotalDifficultyChecked has an endpoint give the genesis
// block a total difficulty other than its difficulty: it has no parent to
// add to, and the block is refused all the same.
func TestGenesisTotalDifficultyChecked(t *testing.T) {
	t.Parallel()
	store := powChain(t)
	genesis := storeBlock(t, store, 0)
	if genesis.TotalDifficulty == nil {
		t.Fatal("the genesis block has no total difficulty")
	}
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	node.SetRewrite(blockRewrite(genesis.Hash, func(b json.RawMessage) json.RawMessage {
		return setMember(b, "totalDifficulty", quoted(hexutil.EncodeU256(new(uint256.Int).AddUint64(genesis.TotalDifficulty, 1))))
	}))
	got, err := up.BlockByNumber(context.Background(), 0)
	checkRefused(t, "the genesis block with another total difficulty", got, err)
	if !strings.Contains(err.Error(), "totalDifficulty") {
		t.Errorf("the error %q does not name totalDifficulty", err)
	}
}

// TestCachedParentWithoutTotalDifficulty caches a parent as an endpoint
// gave it, without its total difficulty; once the endpoint gives total
// difficulties, its child's is checked against the parent's asked again,
// and served, as if the cache held nothing.
func TestCachedParentWithoutTotalDifficulty(t *testing.T) {
	t.Parallel()
	store := powChain(t)
	ctx := context.Background()
	const target = 12
	want := storeBlock(t, store, target)
	parent := storeBlock(t, store, target-1)
	if want.TotalDifficulty == nil {
		t.Fatal("the target block has no total difficulty")
	}
	node := newFakeNode(t, store)
	up := openUp(t, upstream.Config{PollInterval: idle}, node.URL)
	node.SetRewrite(tdRewrite(func(uint64, json.RawMessage) json.RawMessage { return nil }))
	if got, err := up.BlockByHash(ctx, parent.Hash); err != nil || got.TotalDifficulty != nil {
		t.Fatalf("the parent without its total difficulty: %v, %v", hashOf(got), err)
	}
	node.SetRewrite(nil)
	got, err := up.BlockByHash(ctx, want.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if got.TotalDifficulty == nil || !got.TotalDifficulty.Eq(want.TotalDifficulty) {
		t.Fatalf("block %d: totalDifficulty %v, want %v", target, got.TotalDifficulty, want.TotalDifficulty)
	}
}
