package chaintestcheck

import (
	"context"
	"math/big"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rlp"
	"github.com/ethereum/go-ethereum/trie"
	"github.com/holiman/uint256"
)

// gethHeader rebuilds a header with go-ethereum's type, field by field.
func gethHeader(h *backend.Header) *types.Header {
	out := &types.Header{
		ParentHash:  common.Hash(h.ParentHash),
		UncleHash:   common.Hash(h.Sha3Uncles),
		Coinbase:    common.Address(h.Miner),
		Root:        common.Hash(h.StateRoot),
		TxHash:      common.Hash(h.TransactionsRoot),
		ReceiptHash: common.Hash(h.ReceiptsRoot),
		Bloom:       types.Bloom(h.LogsBloom),
		Difficulty:  h.Difficulty.ToBig(),
		Number:      new(big.Int).SetUint64(h.Number),
		GasLimit:    h.GasLimit,
		GasUsed:     h.GasUsed,
		Time:        h.Timestamp,
		Extra:       h.ExtraData,
		MixDigest:   common.Hash(h.MixHash),
		Nonce:       types.BlockNonce(h.Nonce),
	}
	if h.BaseFeePerGas != nil {
		out.BaseFee = h.BaseFeePerGas.ToBig()
	}
	if h.WithdrawalsRoot != nil {
		r := common.Hash(*h.WithdrawalsRoot)
		out.WithdrawalsHash = &r
	}
	out.BlobGasUsed, out.ExcessBlobGas = h.BlobGasUsed, h.ExcessBlobGas
	if h.ParentBeaconBlockRoot != nil {
		r := common.Hash(*h.ParentBeaconBlockRoot)
		out.ParentBeaconRoot = &r
	}
	if h.RequestsHash != nil {
		r := common.Hash(*h.RequestsHash)
		out.RequestsHash = &r
	}
	return out
}

// gethTx rebuilds a transaction with go-ethereum's types from its fields,
// not from our encoding, so that an encoding mistake cannot hide.
func gethTx(tx *backend.Transaction) *types.Transaction {
	var to *common.Address
	if tx.To != nil {
		a := common.Address(*tx.To)
		to = &a
	}
	big := func(z *uint256.Int) *big.Int { return z.ToBig() }
	var list types.AccessList
	for _, t := range tx.AccessList {
		tuple := types.AccessTuple{Address: common.Address(t.Address), StorageKeys: []common.Hash{}}
		for _, k := range t.StorageKeys {
			tuple.StorageKeys = append(tuple.StorageKeys, common.Hash(k))
		}
		list = append(list, tuple)
	}
	v, r, s := tx.V, tx.R, tx.S
	switch tx.Type {
	case backend.LegacyTxType:
		return types.NewTx(&types.LegacyTx{Nonce: tx.Nonce, GasPrice: big(tx.GasPrice), Gas: tx.Gas, To: to, Value: big(&tx.Value), Data: tx.Input, V: big(&v), R: big(&r), S: big(&s)})
	case backend.AccessListTxType:
		return types.NewTx(&types.AccessListTx{ChainID: big(tx.ChainID), Nonce: tx.Nonce, GasPrice: big(tx.GasPrice), Gas: tx.Gas, To: to, Value: big(&tx.Value), Data: tx.Input, AccessList: list, V: big(&v), R: big(&r), S: big(&s)})
	case backend.DynamicFeeTxType:
		return types.NewTx(&types.DynamicFeeTx{ChainID: big(tx.ChainID), Nonce: tx.Nonce, GasTipCap: big(tx.MaxPriorityFeePerGas), GasFeeCap: big(tx.MaxFeePerGas), Gas: tx.Gas, To: to, Value: big(&tx.Value), Data: tx.Input, AccessList: list, V: big(&v), R: big(&r), S: big(&s)})
	case backend.BlobTxType:
		hashes := make([]common.Hash, len(tx.BlobVersionedHashes))
		for i, h := range tx.BlobVersionedHashes {
			hashes[i] = common.Hash(h)
		}
		return types.NewTx(&types.BlobTx{ChainID: tx.ChainID, Nonce: tx.Nonce, GasTipCap: tx.MaxPriorityFeePerGas, GasFeeCap: tx.MaxFeePerGas, Gas: tx.Gas, To: *to, Value: &tx.Value, Data: tx.Input, AccessList: list,
			BlobFeeCap: tx.MaxFeePerBlobGas, BlobHashes: hashes, V: &v, R: &r, S: &s})
	case backend.SetCodeTxType:
		auths := make([]types.SetCodeAuthorization, len(tx.AuthorizationList))
		for i, a := range tx.AuthorizationList {
			auths[i] = types.SetCodeAuthorization{ChainID: a.ChainID, Address: common.Address(a.Address), Nonce: a.Nonce, V: a.YParity, R: a.R, S: a.S}
		}
		return types.NewTx(&types.SetCodeTx{ChainID: tx.ChainID, Nonce: tx.Nonce, GasTipCap: tx.MaxPriorityFeePerGas, GasFeeCap: tx.MaxFeePerGas, Gas: tx.Gas, To: *to, Value: &tx.Value, Data: tx.Input, AccessList: list,
			AuthList: auths, V: &v, R: &r, S: &s})
	}
	panic("unknown type")
}

// unsigned returns tx's data without its signature, for go-ethereum to sign.
func unsigned(tx *types.Transaction) types.TxData {
	switch tx.Type() {
	case types.LegacyTxType:
		return &types.LegacyTx{Nonce: tx.Nonce(), GasPrice: tx.GasPrice(), Gas: tx.Gas(), To: tx.To(), Value: tx.Value(), Data: tx.Data()}
	case types.AccessListTxType:
		return &types.AccessListTx{ChainID: tx.ChainId(), Nonce: tx.Nonce(), GasPrice: tx.GasPrice(), Gas: tx.Gas(), To: tx.To(), Value: tx.Value(), Data: tx.Data(), AccessList: tx.AccessList()}
	case types.DynamicFeeTxType:
		return &types.DynamicFeeTx{ChainID: tx.ChainId(), Nonce: tx.Nonce(), GasTipCap: tx.GasTipCap(), GasFeeCap: tx.GasFeeCap(), Gas: tx.Gas(), To: tx.To(), Value: tx.Value(), Data: tx.Data(), AccessList: tx.AccessList()}
	case types.BlobTxType:
		return &types.BlobTx{ChainID: uint256.MustFromBig(tx.ChainId()), Nonce: tx.Nonce(), GasTipCap: uint256.MustFromBig(tx.GasTipCap()), GasFeeCap: uint256.MustFromBig(tx.GasFeeCap()), Gas: tx.Gas(), To: *tx.To(),
			Value: uint256.MustFromBig(tx.Value()), Data: tx.Data(), AccessList: tx.AccessList(), BlobFeeCap: uint256.MustFromBig(tx.BlobGasFeeCap()), BlobHashes: tx.BlobHashes()}
	case types.SetCodeTxType:
		return &types.SetCodeTx{ChainID: uint256.MustFromBig(tx.ChainId()), Nonce: tx.Nonce(), GasTipCap: uint256.MustFromBig(tx.GasTipCap()), GasFeeCap: uint256.MustFromBig(tx.GasFeeCap()), Gas: tx.Gas(), To: *tx.To(),
			Value: uint256.MustFromBig(tx.Value()), Data: tx.Data(), AccessList: tx.AccessList(), AuthList: tx.SetCodeAuthorizations()}
	}
	panic("unknown type")
}

// counts tallies what the check compared.
type counts struct {
	blocks, sideBlocks, pending, uncles, txs, resigned, authorities, withdrawals int
	types                                                                        [5]int
}

// keyIndex maps the builder's first keys' addresses to their index, to find
// the key go-ethereum signs with.
func keyIndex(n int) map[backend.Address]int {
	m := make(map[backend.Address]int, n)
	for i := range n {
		m[chaintest.Key(i).Address()] = i
	}
	return m
}

// checkBlock rebuilds b with go-ethereum and compares everything it
// derives.
func checkBlock(t *testing.T, s *memstore.Store, b *backend.Block, chainID uint64, keys map[backend.Address]int, c *counts) {
	t.Helper()
	ctx := context.Background()
	signer := types.LatestSignerForChainID(new(big.Int).SetUint64(chainID))
	header := gethHeader(&b.Header)

	txs := make(types.Transactions, len(b.Transactions))
	for i, tx := range b.Transactions {
		gtx := gethTx(tx)
		txs[i] = gtx
		if gtx.Hash() != common.Hash(tx.Hash) {
			t.Errorf("block %d tx %d (type %d): go-ethereum's hash %s, ours %s", b.Number, i, tx.Type, gtx.Hash(), tx.Hash)
		}
		from, err := types.Sender(signer, gtx)
		if err != nil || from != common.Address(tx.From) {
			t.Errorf("block %d tx %d (type %d): go-ethereum's sender %s (%v), ours %s", b.Number, i, tx.Type, from, err, tx.From)
		}
		// go-ethereum signing the same fields with the same key makes the
		// same transaction: both sign deterministically (RFC 6979).
		idx, ok := keys[tx.From]
		if !ok {
			t.Fatalf("block %d tx %d: sender %s is none of the first keys", b.Number, i, tx.From)
		}
		key, err := crypto.ToECDSA(chaintest.Key(idx).Bytes())
		if err != nil {
			t.Fatal(err)
		}
		txSigner := signer
		if !gtx.Protected() {
			txSigner = types.HomesteadSigner{}
		}
		resigned, err := types.SignNewTx(key, txSigner, unsigned(gtx))
		if err != nil || resigned.Hash() != gtx.Hash() {
			t.Errorf("block %d tx %d (type %d): go-ethereum signs it as %s (%v), ours is %s", b.Number, i, tx.Type, resigned.Hash(), err, gtx.Hash())
		} else {
			c.resigned++
		}
		for j, a := range gtx.SetCodeAuthorizations() {
			got, err := a.Authority()
			want, werr := backend.Authority(&tx.AuthorizationList[j])
			if err != nil || werr != nil || got != common.Address(want) {
				t.Errorf("block %d tx %d authorization %d: go-ethereum's authority %s (%v), ours %s (%v)", b.Number, i, j, got, err, want, werr)
			}
			c.authorities++
		}
		c.types[tx.Type]++
		c.txs++
	}

	uncles := make([]*types.Header, len(b.Uncles))
	for i := range uncles {
		u, err := s.UncleByBlockHashAndIndex(ctx, b.Hash, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		uncles[i] = gethHeader(&u.Header)
		if got := uncles[i].Hash(); got != common.Hash(u.Hash) || got != common.Hash(b.Uncles[i]) {
			t.Errorf("block %d uncle %d: go-ethereum's hash %s, ours %s", b.Number, i, got, u.Hash)
		}
		if got := types.NewBlockWithHeader(uncles[i]).Size(); got != u.Size {
			t.Errorf("block %d uncle %d: go-ethereum's size %d, ours %d", b.Number, i, got, u.Size)
		}
		c.uncles++
	}
	var withdrawals types.Withdrawals
	if b.WithdrawalsRoot != nil {
		withdrawals = make(types.Withdrawals, len(b.Withdrawals))
		for i, w := range b.Withdrawals {
			withdrawals[i] = &types.Withdrawal{Index: w.Index, Validator: w.ValidatorIndex, Address: common.Address(w.Address), Amount: w.Amount}
		}
		c.withdrawals += len(withdrawals)
		if got := types.DeriveSha(withdrawals, trie.NewStackTrie(nil)); got != common.Hash(*b.WithdrawalsRoot) {
			t.Errorf("block %d: go-ethereum's withdrawals root %s, ours %s", b.Number, got, *b.WithdrawalsRoot)
		}
	}
	if got := types.DeriveSha(txs, trie.NewStackTrie(nil)); got != common.Hash(b.TransactionsRoot) {
		t.Errorf("block %d: go-ethereum's transactions root %s, ours %s", b.Number, got, b.TransactionsRoot)
	}
	if got := types.CalcUncleHash(uncles); got != common.Hash(b.Sha3Uncles) {
		t.Errorf("block %d: go-ethereum's uncle hash %s, ours %s", b.Number, got, b.Sha3Uncles)
	}

	block := types.NewBlockWithHeader(header).WithBody(types.Body{Transactions: txs, Uncles: uncles, Withdrawals: withdrawals})
	if block.Hash() != common.Hash(b.Hash) && !b.Pending {
		t.Errorf("block %d: go-ethereum's hash %s, ours %s", b.Number, block.Hash(), b.Hash)
	}
	if block.Size() != b.Size {
		t.Errorf("block %d: go-ethereum's size %d, ours %d", b.Number, block.Size(), b.Size)
	}
	// The block's RLP, decoded by go-ethereum, is the same block again.
	enc, err := rlp.EncodeToBytes(block)
	if err != nil {
		t.Fatal(err)
	}
	var decoded types.Block
	if err := rlp.DecodeBytes(enc, &decoded); err != nil || decoded.Hash() != block.Hash() || uint64(len(enc)) != b.Size {
		t.Errorf("block %d: decoded again: %v, size %d", b.Number, err, len(enc))
	}
	if b.Pending && block.Hash() != common.Hash(backend.HeaderHash(&b.Header)) {
		t.Errorf("pending block: go-ethereum's hash %s, ours %s", block.Hash(), backend.HeaderHash(&b.Header))
	}
}

// build makes a chain through every fork with every kind of transaction,
// uncles, withdrawals, a side branch, a reorg and a pending block, and
// returns its store and the side blocks.
func build(seed uint64) (*chaintest.Builder, []*backend.Block) {
	cfg := chaintest.Config{Seed: seed, ChainID: 1337, London: 3, Merge: 12, Shanghai: 14, Cancun: 17, Prague: 20}
	b := chaintest.New(cfg)
	everything := func(i int, g *chaintest.BlockGen) {
		for j, kind := range g.Kinds() {
			g.AddTx(chaintest.Tx{Kind: kind, From: j, Value: uint64(i), Data: []byte{byte(i), 0, 1}, Blobs: 1 + j%2})
		}
		g.AddTx(chaintest.Tx{Kind: chaintest.AccessList, From: 8, Create: true, Data: []byte{0x60, 0x00}})
		if n := g.Number(); n >= 2 && n < cfg.Merge {
			g.AddUncle()
			if n%3 == 0 {
				g.AddUncle()
			}
		}
		if g.Number() >= cfg.Shanghai {
			for k := range i % 3 {
				g.AddWithdrawal(uint64(k), chaintest.Key(k).Address(), uint64(1000*(k+1)))
			}
		}
	}
	b.AddBlocks(24, everything)
	// A side branch before the merge, with uncles, and one after Prague
	// that takes over.
	early := b.Fork(6)
	side := early.AddBlocks(3, everything)
	late := b.Fork(21)
	side = append(side, late.AddBlocks(5, everything)...)
	late.Reorg()
	side = append(side, b.AddBlocks(2, everything)...) // the old branch goes on, aside
	late.SetPending(func(g *chaintest.BlockGen) { everything(0, g) })
	return late, side
}

// TestBlocksAsGoEthereumBuildsThem rebuilds every block of the builder's
// chains with go-ethereum's types and compares.
func TestBlocksAsGoEthereumBuildsThem(t *testing.T) {
	ctx := context.Background()
	keys := keyIndex(16)
	var c counts
	for _, seed := range []uint64{1, 2, 3} {
		b, side := build(seed)
		s := b.Store()
		head, _ := s.BlockByNumber(ctx, backend.Latest)
		for n := uint64(0); n <= head.Number; n++ {
			blk, err := s.BlockByNumber(ctx, backend.BlockNumber(n))
			if err != nil {
				t.Fatal(err)
			}
			checkBlock(t, s, blk, 1337, keys, &c)
			c.blocks++
		}
		for _, blk := range side {
			checkBlock(t, s, blk, 1337, keys, &c)
			c.sideBlocks++
		}
		pending, err := s.BlockByNumber(ctx, backend.Pending)
		if err != nil {
			t.Fatal(err)
		}
		checkBlock(t, s, pending, 1337, keys, &c)
		c.pending++
	}
	t.Logf("compared %d canonical blocks, %d side blocks, %d pending, %d uncles, %d transactions (by type %v, %d re-signed by go-ethereum), %d authorities, %d withdrawals",
		c.blocks, c.sideBlocks, c.pending, c.uncles, c.txs, c.types, c.resigned, c.authorities, c.withdrawals)
	for typ, n := range c.types {
		if n == 0 {
			t.Errorf("no type %d transaction compared", typ)
		}
	}
	if c.uncles == 0 || c.withdrawals == 0 || c.sideBlocks == 0 {
		t.Error("no uncles, withdrawals or side blocks compared")
	}
}
