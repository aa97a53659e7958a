package chaintest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/holiman/uint256"
)

// allForks is a schedule that passes through every fork in a few blocks.
var allForks = chaintest.Config{Seed: 1, ChainID: 1337, London: 2, Merge: 10, Shanghai: 12, Cancun: 14, Prague: 16}

// everything fills a block with one transaction of every kind its fork
// allows, a contract creation, an uncle before the merge and a withdrawal
// after Shanghai.
func everything(i int, g *chaintest.BlockGen) {
	for j, kind := range g.Kinds() {
		g.AddTx(chaintest.Tx{Kind: kind, From: j, Value: uint64(i + 1), Data: []byte{0, byte(j)}})
	}
	g.AddTx(chaintest.Tx{Kind: chaintest.Legacy, From: 7, Create: true, Data: []byte{0x60, 0x00, 0x60, 0x00, 0xf3}})
	if g.Number() >= 2 && g.Number() < allForks.Merge {
		g.AddUncle()
	}
	if g.Number() >= allForks.Shanghai {
		g.AddWithdrawal(uint64(i), chaintest.Key(9).Address(), 1_000_000)
	}
}

func block(t testing.TB, s *memstore.Store, n backend.BlockNumber) *backend.Block {
	t.Helper()
	b, err := s.BlockByNumber(context.Background(), n)
	if err != nil {
		t.Fatalf("block %v: %v", n, err)
	}
	return b
}

// TestEveryKindAndFork builds a chain through every fork and checks what
// each fork puts in a header, and that every sender is recoverable.
func TestEveryKindAndFork(t *testing.T) {
	b := chaintest.New(allForks)
	b.AddBlocks(20, everything)
	s := b.Store()

	kinds := make(map[uint8]int)
	var unprotected, uncles, withdrawals int
	for n := range uint64(21) {
		blk := block(t, s, backend.BlockNumber(n))
		if blk.Hash != backend.HeaderHash(&blk.Header) {
			t.Errorf("block %d: hash %s is not its header's", n, blk.Hash)
		}
		checkFork(t, blk)
		for i, tx := range blk.Transactions {
			from, err := backend.Sender(tx)
			if err != nil || from != tx.From {
				t.Errorf("block %d tx %d: Sender = %s, %v; from is %s", n, i, from, err, tx.From)
			}
			kinds[tx.Type]++
			if tx.Type == backend.LegacyTxType && tx.ChainID == nil {
				unprotected++
			}
			for j := range tx.AuthorizationList {
				if a, err := backend.Authority(&tx.AuthorizationList[j]); err != nil || a == tx.From {
					t.Errorf("block %d tx %d: authority %s, %v", n, i, a, err)
				}
			}
		}
		for i := range blk.Uncles {
			u, err := s.UncleByBlockHashAndIndex(context.Background(), blk.Hash, uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			if u.Number != n-1 || u.Hash == block(t, s, backend.BlockNumber(n-1)).Hash {
				t.Errorf("block %d: uncle %d is block %d %s, want a sibling of the parent", n, i, u.Number, u.Hash)
			}
			uncles++
		}
		withdrawals += len(blk.Withdrawals)
	}
	t.Logf("transactions by type %v, %d unprotected; %d uncles, %d withdrawals", kinds, unprotected, uncles, withdrawals)
	for typ := range uint8(5) {
		if kinds[typ] == 0 {
			t.Errorf("no type %d transaction", typ)
		}
	}
	if unprotected == 0 || uncles != 8 || withdrawals != 9 {
		t.Errorf("%d unprotected legacy transactions, %d uncles, %d withdrawals; want some, 8 and 9", unprotected, uncles, withdrawals)
	}
	if id, err := s.ChainID(context.Background()); err != nil || id != 1337 {
		t.Errorf("ChainID = %d, %v; want 1337", id, err)
	}
}

// checkFork checks the header fields of the fork a block is in.
func checkFork(t *testing.T, b *backend.Block) {
	t.Helper()
	n := b.Number
	is := func(height uint64) bool { return n >= height }
	if got := b.BaseFeePerGas != nil; got != is(allForks.London) {
		t.Errorf("block %d: base fee present %t", n, got)
	}
	if got := b.Difficulty.IsZero(); got != is(allForks.Merge) {
		t.Errorf("block %d: difficulty %s", n, &b.Difficulty)
	}
	if got := b.WithdrawalsRoot != nil; got != is(allForks.Shanghai) {
		t.Errorf("block %d: withdrawalsRoot present %t", n, got)
	}
	if got := b.BlobGasUsed != nil && b.ExcessBlobGas != nil && b.ParentBeaconBlockRoot != nil; got != is(allForks.Cancun) {
		t.Errorf("block %d: Cancun fields present %t", n, got)
	}
	if got := b.RequestsHash != nil; got != is(allForks.Prague) {
		t.Errorf("block %d: requestsHash present %t", n, got)
	}
	if b.BlobGasUsed != nil {
		var blobs uint64
		for _, tx := range b.Transactions {
			blobs += uint64(len(tx.BlobVersionedHashes))
		}
		if *b.BlobGasUsed != blobs<<17 {
			t.Errorf("block %d: blobGasUsed %d for %d blobs", n, *b.BlobGasUsed, blobs)
		}
	}
	var gas uint64
	for _, tx := range b.Transactions {
		gas += tx.Gas
		if b.BaseFeePerGas != nil && tx.GasPrice.Lt(b.BaseFeePerGas) {
			t.Errorf("block %d: tx %s pays %s, under the base fee %s", n, tx.Hash, tx.GasPrice, b.BaseFeePerGas)
		}
	}
	if gas != b.GasUsed {
		t.Errorf("block %d: gasUsed %d, the transactions' gas adds up to %d", n, b.GasUsed, gas)
	}
}

func TestBaseFeeFollowsGasUsed(t *testing.T) {
	b := chaintest.New(chaintest.Config{Prague: chaintest.Never, GasLimit: 210_000})
	// The empty genesis, at London's initial fee, lowers block 1's by an
	// eighth. Block 1 uses its whole gas limit, twice the target: block
	// 2's rises by an eighth. Block 2 is empty: block 3's falls by one.
	b.AddBlock(func(g *chaintest.BlockGen) {
		for i := range 10 {
			g.AddTx(chaintest.Tx{Kind: chaintest.DynamicFee, From: i})
		}
	})
	b.AddBlocks(2, nil)
	fees := []string{"1000000000", "875000000", "984375000", "861328125"}
	for n, want := range fees {
		if got := block(t, b.Store(), backend.BlockNumber(n)).BaseFeePerGas.Dec(); got != want {
			t.Errorf("block %d: base fee %s, want %s", n, got, want)
		}
	}
}

func TestExcessBlobGas(t *testing.T) {
	b := chaintest.New(chaintest.Config{Prague: chaintest.Never})
	// Six blobs, three over Cancun's target, raise the next block's excess
	// by three blobs' gas; the next block's three blobs keep it there.
	b.AddBlock(func(g *chaintest.BlockGen) { g.AddTx(chaintest.Tx{Kind: chaintest.Blob, Blobs: 6}) })
	b.AddBlock(func(g *chaintest.BlockGen) { g.AddTx(chaintest.Tx{Kind: chaintest.Blob, Blobs: 3}) })
	b.AddBlock(nil)
	for n, want := range []uint64{0, 0, 3 << 17, 3 << 17} {
		if got := *block(t, b.Store(), backend.BlockNumber(n)).ExcessBlobGas; got != want {
			t.Errorf("block %d: excess blob gas %d, want %d", n, got, want)
		}
	}
}

// TestDeterministic builds the same chain twice, and once with another
// seed: the dumps must be equal, and differ.
func TestDeterministic(t *testing.T) {
	dump := func(seed uint64) []byte {
		cfg := allForks
		cfg.Seed = seed
		b := chaintest.New(cfg)
		b.AddBlocks(20, everything)
		side := b.Fork(15)
		side.AddBlocks(2, chaintest.Txs(3))
		var buf bytes.Buffer
		if err := b.Store().Save(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	first := dump(1)
	if !bytes.Equal(first, dump(1)) {
		t.Error("two chains of seed 1 differ")
	}
	if bytes.Equal(first, dump(2)) {
		t.Error("the chains of seeds 1 and 2 are equal")
	}
	// The dump loads back into the same chain.
	loaded, err := memstore.Load(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := loaded.Save(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again.Bytes()) {
		t.Error("the dump does not load back into the same chain")
	}
}

func TestForkAndReorg(t *testing.T) {
	ctx := context.Background()
	b := chaintest.New(chaintest.Config{Seed: 3, Merge: chaintest.Never, Shanghai: chaintest.Never, Cancun: chaintest.Never, Prague: chaintest.Never})
	main := b.AddBlocks(10, chaintest.Txs(2))
	s := b.Store()
	side := b.Fork(5)
	if side.Canonical() || !b.Canonical() {
		t.Fatal("a new fork is canonical, or the main branch is not")
	}
	forked := side.AddBlocks(7, chaintest.Txs(2))
	if forked[0].ParentHash != main[4].Hash || forked[0].Number != 6 {
		t.Fatalf("the fork's first block is %d on %s, want 6 on block 5 %s", forked[0].Number, forked[0].ParentHash, main[4].Hash)
	}
	// The side branch's first sender continues from block 5's nonces: two
	// transactions a block from keys 0 and 1, one each, over blocks 1-5.
	if got := forked[0].Transactions[0].Nonce; got != 5 {
		t.Errorf("the fork's first transaction has nonce %d, want 5", got)
	}
	if head := block(t, s, backend.Latest); head.Hash != main[9].Hash {
		t.Errorf("before the reorg, latest is %d %s, want the main head", head.Number, head.Hash)
	}
	for _, f := range forked {
		if got, err := s.BlockByHash(ctx, f.Hash); err != nil || got.Hash != f.Hash {
			t.Errorf("side block %d not reachable by hash: %v", f.Number, err)
		}
	}

	side.Reorg()
	if !side.Canonical() || b.Canonical() {
		t.Fatal("after Reorg the fork is not canonical, or the main branch still is")
	}
	if head := block(t, s, backend.Latest); head.Hash != forked[6].Hash || head.Number != 12 {
		t.Errorf("after the reorg, latest is %d %s, want the fork's head 12 %s", head.Number, head.Hash, forked[6].Hash)
	}
	if got := block(t, s, 8); got.Hash != forked[2].Hash {
		t.Errorf("block 8 is %s, want the fork's %s", got.Hash, forked[2].Hash)
	}
	if got, err := s.BlockByHash(ctx, main[9].Hash); err != nil || got.Hash != main[9].Hash {
		t.Errorf("the old head is not reachable by hash: %v", err)
	}
	// The old branch goes on as a side branch, and can come back.
	old := b.AddBlock(nil)
	if got := block(t, s, backend.Latest); got.Hash == old.Hash {
		t.Error("a block added to the old branch became canonical")
	}
	b.Reorg()
	if got := block(t, s, backend.Latest); got.Hash != old.Hash {
		t.Errorf("after reorganising back, latest is %s, want %s", got.Hash, old.Hash)
	}
}

func TestPending(t *testing.T) {
	b := chaintest.New(chaintest.Config{})
	b.AddBlocks(3, nil)
	p := b.SetPending(func(g *chaintest.BlockGen) {
		g.AddTx(chaintest.Tx{Kind: chaintest.SetCode})
		g.AddTx(chaintest.Tx{Kind: chaintest.Blob})
	})
	got := block(t, b.Store(), backend.Pending)
	if !got.Pending || got.Number != 4 || len(got.Transactions) != 2 || got.Hash != p.Hash {
		t.Fatalf("pending block: pending %t, number %d, %d transactions", got.Pending, got.Number, len(got.Transactions))
	}
	if head := block(t, b.Store(), backend.Latest); head.Number != 3 {
		t.Errorf("latest is %d with a pending block, want 3", head.Number)
	}
	// The pending block took no nonce: the next block starts at 0 again.
	next := b.AddBlock(func(g *chaintest.BlockGen) { g.AddTx(chaintest.Tx{}) })
	if next.Transactions[0].Nonce != 0 {
		t.Errorf("the block after the pending one starts at nonce %d, want 0", next.Transactions[0].Nonce)
	}
	if _, err := b.Store().BlockByNumber(context.Background(), backend.Pending); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("after a new head, the pending block is still served (%v)", err)
	}
}

func TestSafeAndFinalized(t *testing.T) {
	b := chaintest.New(chaintest.Config{})
	b.AddBlocks(20, nil)
	s := b.Store()
	if err := s.SetSafe(12); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFinalized(4); err != nil {
		t.Fatal(err)
	}
	if got := block(t, s, backend.Safe).Number; got != 12 {
		t.Errorf("safe is %d, want 12", got)
	}
	if got := block(t, s, backend.Finalized).Number; got != 4 {
		t.Errorf("finalized is %d, want 4", got)
	}
}

// TestMisusePanics checks that each mistake panics with a message that
// names it.
func TestMisusePanics(t *testing.T) {
	preMerge := chaintest.Config{Merge: chaintest.Never, Shanghai: chaintest.Never, Cancun: chaintest.Never, Prague: chaintest.Never}
	tests := []struct {
		name string
		want string
		f    func()
	}{
		{"forks out of order", "comes before", func() { chaintest.New(chaintest.Config{London: 5, Merge: 3}) }},
		{"blob before Cancun", "does not allow blob", func() {
			chaintest.New(preMerge).AddBlock(func(g *chaintest.BlockGen) { g.AddTx(chaintest.Tx{Kind: chaintest.Blob}) })
		}},
		{"uncle after the merge", "after the merge", func() {
			b := chaintest.New(chaintest.Config{})
			b.AddBlocks(2, nil)
			b.AddBlock(func(g *chaintest.BlockGen) { g.AddUncle() })
		}},
		{"uncle without a grandparent", "no grandparent", func() {
			chaintest.New(preMerge).AddBlock(func(g *chaintest.BlockGen) { g.AddUncle() })
		}},
		{"three uncles", "two uncles", func() {
			b := chaintest.New(preMerge)
			b.AddBlocks(2, nil)
			b.AddBlock(func(g *chaintest.BlockGen) { g.AddUncle(); g.AddUncle(); g.AddUncle() })
		}},
		{"withdrawal before Shanghai", "before Shanghai", func() {
			chaintest.New(preMerge).AddBlock(func(g *chaintest.BlockGen) { g.AddWithdrawal(0, backend.Address{}, 1) })
		}},
		{"too many blobs", "room for", func() {
			chaintest.New(chaintest.Config{}).AddBlock(func(g *chaintest.BlockGen) { g.AddTx(chaintest.Tx{Kind: chaintest.Blob, Blobs: 10}) })
		}},
		{"block full", "is full", func() {
			chaintest.New(chaintest.Config{GasLimit: 30_000}).AddBlock(func(g *chaintest.BlockGen) { g.AddTx(chaintest.Tx{}); g.AddTx(chaintest.Tx{}) })
		}},
		{"blob creation", "cannot create", func() {
			chaintest.New(chaintest.Config{}).AddBlock(func(g *chaintest.BlockGen) { g.AddTx(chaintest.Tx{Kind: chaintest.Blob, Create: true}) })
		}},
		{"no such block", "has no block", func() { chaintest.New(chaintest.Config{}).Fork(3) }},
		{"extraData over 32 bytes", "more than 32", func() {
			chaintest.New(chaintest.Config{}).AddBlock(func(g *chaintest.BlockGen) { g.SetExtraData(make([]byte, 33)) })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tt.want) {
					t.Errorf("panic %v, want one that says %q", r, tt.want)
				}
			}()
			tt.f()
		})
	}
}

func TestKeys(t *testing.T) {
	if chaintest.Key(0).Address() == chaintest.Key(1).Address() {
		t.Error("keys 0 and 1 have the same address")
	}
	if chaintest.Key(3) != chaintest.Key(3) {
		t.Error("Key(3) is made anew")
	}
	again := chaintest.NewPrivateKey(chaintest.Key(3).Bytes())
	if again.Address() != chaintest.Key(3).Address() {
		t.Error("a key made from Key(3).Bytes() has another address")
	}
	// Pinned: tests of other services may name these accounts.
	if got, want := chaintest.Key(0).Address().String(), key0Address; got != want {
		t.Errorf("Key(0).Address() = %s, want %s", got, want)
	}
}

const key0Address = "0x77d66bea8790c8f1bad2e0f9ce540b1dbaa4f7ed"

// BenchmarkBuild1000x100 measures a chain of 1,000 blocks of 100
// transactions each, every kind the forks allow, stored in a memstore.
func BenchmarkBuild1000x100(b *testing.B) {
	for b.Loop() {
		c := chaintest.New(chaintest.Config{Seed: 1})
		c.AddBlocks(1000, chaintest.Txs(100))
	}
}

// TestDefaults checks the documented defaults of a zero Config: chain id
// 1337, a genesis at 1,700,000,000 and a block every 12 seconds.
func TestDefaults(t *testing.T) {
	b := chaintest.New(chaintest.Config{})
	if cfg := b.Config(); cfg.ChainID != 1337 || cfg.GenesisTime != 1_700_000_000 || cfg.BlockTime != 12 || cfg.GasLimit != 30_000_000 {
		t.Errorf("Config() = %+v, want chain id 1337, genesis time 1700000000, block time 12, gas limit 30000000", cfg)
	}
	one := b.AddBlock(func(g *chaintest.BlockGen) { g.AddTx(chaintest.Tx{}) })
	if g := block(t, b.Store(), 0); g.Timestamp != 1_700_000_000 || one.Timestamp != 1_700_000_012 {
		t.Errorf("timestamps %d and %d, want 1700000000 and 1700000012", g.Timestamp, one.Timestamp)
	}
	if id, err := b.Store().ChainID(context.Background()); err != nil || id != 1337 || one.Transactions[0].ChainID == nil || one.Transactions[0].ChainID.Uint64() != 1337 {
		t.Errorf("ChainID = %d, %v, transaction chain id %v; want 1337", id, err, one.Transactions[0].ChainID)
	}
}

// TestTransactionFields checks the fields AddTx documents: replay
// protection by kind, fees from the base fee with a 1 gwei tip, one blob
// by default with a blob fee cap of twice the blob base fee, and nonces,
// the authority's included.
func TestTransactionFields(t *testing.T) {
	b := chaintest.New(chaintest.Config{})
	var legacy, unprotected, dynamic, blob, setCode *backend.Transaction
	var baseFee *uint256.Int
	b.AddBlock(func(g *chaintest.BlockGen) {
		baseFee = g.BaseFee()
		legacy = g.AddTx(chaintest.Tx{Kind: chaintest.Legacy})
		unprotected = g.AddTx(chaintest.Tx{Kind: chaintest.LegacyUnprotected})
		dynamic = g.AddTx(chaintest.Tx{Kind: chaintest.DynamicFee, From: 2})
		blob = g.AddTx(chaintest.Tx{Kind: chaintest.Blob, From: 3})
		setCode = g.AddTx(chaintest.Tx{Kind: chaintest.SetCode}) // key 0's third, key 1's authorization
	})
	if legacy.ChainID == nil || legacy.ChainID.Uint64() != 1337 || (legacy.V.Uint64() != 2*1337+35 && legacy.V.Uint64() != 2*1337+36) {
		t.Errorf("legacy: chain id %v, v %s; want EIP-155 for 1337", legacy.ChainID, &legacy.V)
	}
	if unprotected.ChainID != nil || (unprotected.V.Uint64() != 27 && unprotected.V.Uint64() != 28) {
		t.Errorf("legacy without EIP-155: chain id %v, v %s; want none, 27 or 28", unprotected.ChainID, &unprotected.V)
	}
	tip := uint256.NewInt(1_000_000_000)
	wantMax := new(uint256.Int).Add(new(uint256.Int).Lsh(baseFee, 1), tip)
	if !dynamic.MaxFeePerGas.Eq(wantMax) || !dynamic.MaxPriorityFeePerGas.Eq(tip) {
		t.Errorf("dynamic fee: max fee %s, tip %s; want twice the base fee %s plus 1 gwei, 1 gwei", dynamic.MaxFeePerGas, dynamic.MaxPriorityFeePerGas, baseFee)
	}
	if len(blob.BlobVersionedHashes) != 1 || blob.BlobVersionedHashes[0][0] != 0x01 || blob.MaxFeePerBlobGas.Uint64() != 2 {
		t.Errorf("blob: %d versioned hashes, max fee per blob gas %s; want 1 of version 1, and 2 (twice the minimum)", len(blob.BlobVersionedHashes), blob.MaxFeePerBlobGas)
	}
	if setCode.Nonce != 2 || len(setCode.AuthorizationList) != 1 || setCode.AuthorizationList[0].Nonce != 0 {
		t.Errorf("set code: nonce %d, authorizations %+v; want nonce 2 and key 1's nonce 0", setCode.Nonce, setCode.AuthorizationList)
	}
	if got := [4]uint64{b.Nonce(0), b.Nonce(1), b.Nonce(2), b.Nonce(3)}; got != [4]uint64{3, 1, 1, 1} {
		t.Errorf("Nonce(0..3) = %v, want [3 1 1 1]: the authority's nonce is bumped too", got)
	}
}

// TestTxsStaysAtTheBlobTarget fills blocks with many transactions: no
// more blobs than the fork's target, so the excess blob gas stays 0.
func TestTxsStaysAtTheBlobTarget(t *testing.T) {
	b := chaintest.New(chaintest.Config{})
	blocks := b.AddBlocks(2, chaintest.Txs(60))
	for _, blk := range blocks {
		if *blk.BlobGasUsed != 6<<17 || *blk.ExcessBlobGas != 0 {
			t.Errorf("block %d: blob gas used %d, excess %d; want Prague's target, 6 blobs, and no excess", blk.Number, *blk.BlobGasUsed, *blk.ExcessBlobGas)
		}
	}
}

// TestWithdrawalsAndEmptyReceipts checks that withdrawal indexes go on
// from block to block, and that an empty block has the empty trie's
// receipts root.
func TestWithdrawalsAndEmptyReceipts(t *testing.T) {
	b := chaintest.New(chaintest.Config{})
	var got []uint64
	gen := func(g *chaintest.BlockGen) {
		for range 2 {
			got = append(got, g.AddWithdrawal(1, chaintest.Key(9).Address(), 1).Index)
		}
	}
	b.AddBlock(gen)
	empty := b.AddBlock(gen) // withdrawals, no transactions
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Errorf("withdrawal indexes %v, want [0 1 2 3]", got)
	}
	if empty.ReceiptsRoot != empty.TransactionsRoot {
		t.Errorf("a block without transactions has receipts root %s, want the empty root %s", empty.ReceiptsRoot, empty.TransactionsRoot)
	}
}

// TestBaseFeeRisesByOneAtLeast fills a block one gas over its target at a
// base fee so low that an eighth of the excess rounds to 0: the next base
// fee still rises, by 1, as EIP-1559 says.
func TestBaseFeeRisesByOneAtLeast(t *testing.T) {
	b := chaintest.New(chaintest.Config{GasLimit: 42_006}) // a target of 21,003
	b.AddBlocks(70, nil)                                   // each lowers the base fee by an eighth
	over := b.AddBlock(func(g *chaintest.BlockGen) {
		g.AddTx(chaintest.Tx{Data: []byte{0}}) // 21,004 gas
	})
	if over.GasUsed != 21_004 || over.BaseFeePerGas.Uint64() >= 8*21_003 {
		t.Fatalf("block %d: gas used %d at base fee %s; the test wants one over the target at a fee under %d", over.Number, over.GasUsed, over.BaseFeePerGas, 8*21_003)
	}
	next := b.AddBlock(nil)
	if want := over.BaseFeePerGas.Uint64() + 1; next.BaseFeePerGas.Uint64() != want {
		t.Errorf("base fee after a block one gas over its target: %s, want %d", next.BaseFeePerGas, want)
	}
}

// TestPendingAcrossBranches checks when the pending block goes: a block
// added to a side branch and a Reorg to the branch already canonical
// leave it, a reorganisation to another branch clears it.
func TestPendingAcrossBranches(t *testing.T) {
	b := chaintest.New(chaintest.Config{})
	b.AddBlocks(3, nil)
	side := b.Fork(1)
	p := b.SetPending(nil)
	wantPending := func(when string, want bool) {
		t.Helper()
		got, err := b.Store().BlockByNumber(context.Background(), backend.Pending)
		switch {
		case want && (err != nil || got.Hash != p.Hash):
			t.Errorf("%s: pending = %v, %v; want the pending block", when, got, err)
		case !want && !errors.Is(err, backend.ErrNotFound):
			t.Errorf("%s: pending = %v, %v; want none", when, got, err)
		}
	}
	side.AddBlock(nil)
	wantPending("after a block on a side branch", true)
	b.Reorg()
	wantPending("after Reorg of the canonical branch", true)
	side.Reorg()
	wantPending("after a reorganisation to the side branch", false)
}
