// Package demochain generates the demo chain that memstore/demo embeds:
// a real chain, executed by go-ethereum, that goes through the forks a
// block API must handle.
//
//	blocks  1-39   Berlin, proof of work: legacy (with and without EIP-155),
//	               access-list transactions, contract creations, uncles
//	blocks 40-69   London: dynamic-fee transactions, base fee, uncles
//	blocks 70-79   after the merge (difficulty 0)
//	blocks 80-89   Shanghai: withdrawals
//	blocks 90-99   Cancun: blob transactions, parent beacon roots
//	blocks 100-110 Prague: set-code transactions, requests hash
//	block  111     the pending block
//
// One side-chain block at height 60 stays reachable by hash. Generation is
// deterministic: the same code writes the same bytes.
package demochain

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"fmt"
	"io"
	"math/big"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/examples/interop/gethconv"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/consensus/beacon"
	"github.com/ethereum/go-ethereum/consensus/ethash"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/crypto/kzg4844"
	"github.com/ethereum/go-ethereum/params"
	"github.com/holiman/uint256"
)

// Fork points of the demo chain.
const (
	LondonBlock   = 40
	MergeBlock    = 70
	ShanghaiTime  = 800 // block 80: blocks are 10 seconds apart
	CancunTime    = 900
	PragueTime    = 1000
	Head          = 110 // the last canonical block
	SideNumber    = 60  // the height of the side-chain block
	blockInterval = 10
)

// ChainID is the demo chain's id.
const ChainID = 1337

// Chain is the generated chain.
type Chain struct {
	Config  *params.ChainConfig
	Genesis *types.Block
	Blocks  []*types.Block // canonical blocks 1 to Head
	Side    *types.Block   // a side-chain block at SideNumber
	Pending *types.Block   // block Head+1
}

// Config returns the demo chain's configuration.
func Config() *params.ChainConfig {
	zero := big.NewInt(0)
	shanghai, cancun, prague := uint64(ShanghaiTime), uint64(CancunTime), uint64(PragueTime)
	return &params.ChainConfig{
		ChainID:             big.NewInt(ChainID),
		HomesteadBlock:      zero,
		EIP150Block:         zero,
		EIP155Block:         zero,
		EIP158Block:         zero,
		ByzantiumBlock:      zero,
		ConstantinopleBlock: zero,
		PetersburgBlock:     zero,
		IstanbulBlock:       zero,
		MuirGlacierBlock:    zero,
		BerlinBlock:         zero,
		LondonBlock:         big.NewInt(LondonBlock),
		ArrowGlacierBlock:   big.NewInt(LondonBlock),
		GrayGlacierBlock:    big.NewInt(LondonBlock),
		MergeNetsplitBlock:  big.NewInt(MergeBlock),
		// The total difficulty of block MergeBlock-1; pinned by a test.
		TerminalTotalDifficulty: big.NewInt(9_202_752),
		ShanghaiTime:            &shanghai,
		CancunTime:              &cancun,
		PragueTime:              &prague,
		Ethash:                  new(params.EthashConfig),
		BlobScheduleConfig: &params.BlobScheduleConfig{
			Cancun: params.DefaultCancunBlobConfig,
			Prague: params.DefaultPragueBlobConfig,
		},
	}
}

// Keys are the funded accounts that sign the demo transactions; they are
// derived from fixed phrases, so anyone can re-sign with them.
var Keys = func() []*ecdsa.PrivateKey {
	keys := make([]*ecdsa.PrivateKey, 4)
	for i := range keys {
		k, err := crypto.ToECDSA(crypto.Keccak256([]byte(fmt.Sprintf("blockrpc demo key %d", i))))
		if err != nil {
			panic(err)
		}
		keys[i] = k
	}
	return keys
}()

func addr(i int) common.Address { return crypto.PubkeyToAddress(Keys[i].PublicKey) }

// Genesis returns the demo chain's genesis specification.
func Genesis() *core.Genesis {
	alloc := types.GenesisAlloc{
		// The system contracts of Cancun and Prague, as go-ethereum's
		// developer genesis has them.
		params.BeaconRootsAddress:        {Nonce: 1, Code: params.BeaconRootsCode, Balance: common.Big0},
		params.HistoryStorageAddress:     {Nonce: 1, Code: params.HistoryStorageCode, Balance: common.Big0},
		params.WithdrawalQueueAddress:    {Nonce: 1, Code: params.WithdrawalQueueCode, Balance: common.Big0},
		params.ConsolidationQueueAddress: {Nonce: 1, Code: params.ConsolidationQueueCode, Balance: common.Big0},
	}
	for i := range Keys {
		alloc[addr(i)] = types.Account{Balance: new(big.Int).Mul(big.NewInt(1_000_000), big.NewInt(params.Ether))}
	}
	return &core.Genesis{
		Config:     Config(),
		ExtraData:  []byte("blockrpc demo chain"),
		GasLimit:   30_000_000,
		Difficulty: big.NewInt(0x20000),
		Alloc:      alloc,
	}
}

// Generate builds the chain.
func Generate() (chain *Chain, err error) {
	defer func() {
		// go-ethereum's chain maker panics on invalid blocks.
		if p := recover(); p != nil {
			err = fmt.Errorf("generating the demo chain: %v", p)
		}
	}()
	genesis := Genesis()
	engine := beacon.New(ethash.NewFaker())
	g := &generator{config: genesis.Config}

	db, early, _ := core.GenerateChainWithGenesis(genesis, engine, SideNumber-1, g.block)
	parent := early[len(early)-1]
	side, _ := core.GenerateChain(genesis.Config, parent, engine, db, 1, g.sideBlock)
	late, _ := core.GenerateChain(genesis.Config, parent, engine, db, Head+1-len(early), g.block)

	blocks := append(early, late...)
	return &Chain{
		Config:  genesis.Config,
		Genesis: genesis.ToBlock(),
		Blocks:  blocks[:Head],
		Side:    side[0],
		Pending: blocks[Head],
	}, nil
}

type generator struct {
	config *params.ChainConfig
}

var (
	gwei     = big.NewInt(params.GWei)
	miners   = []common.Address{common.HexToAddress("0x00000000000000000000000000000000000c0ffe"), common.HexToAddress("0x000000000000000000000000000000000000beef"), common.HexToAddress("0x0000000000000000000000000000000000000bad")}
	receiver = common.HexToAddress("0x000000000000000000000000000000000000dead")
	// initCode deploys a contract whose code returns 42.
	initCode = common.FromHex("0x600a600c600039600a6000f3602a60005260206000f3")
)

// block fills in canonical block number n.
func (g *generator) block(i int, b *core.BlockGen) {
	n := b.Number().Uint64()
	b.SetCoinbase(miners[n%uint64(len(miners))])
	if g.config.IsCancun(b.Number(), b.Timestamp()) {
		// Applied through the beacon roots contract, as an importing
		// node would.
		b.SetParentBeaconRoot(crypto.Keccak256Hash([]byte("beacon root"), b.Number().Bytes()))
	}
	sender := int(n % uint64(len(Keys)))
	switch {
	case n < LondonBlock:
		g.berlinTransactions(b, sender, n)
	default:
		g.londonTransactions(b, sender, n)
	}
	if g.config.IsShanghai(b.Number(), b.Timestamp()) {
		for v := range 2 {
			b.AddWithdrawal(&types.Withdrawal{Validator: n*2 + uint64(v), Address: addr(v), Amount: 1_000_000 + n})
		}
	}
	if g.config.IsCancun(b.Number(), b.Timestamp()) && n%2 == 0 {
		g.addBlobTransaction(b, (sender+1)%len(Keys), n)
	}
	if g.config.IsPrague(b.Number(), b.Timestamp()) {
		g.addSetCodeTransaction(b, (sender+2)%len(Keys), (sender+3)%len(Keys))
	}
	// Uncles, while there is proof of work: one every fifth block, two
	// every fifteenth. Each is a sibling of the block's parent, so its own
	// parent is in the chain. i >= 2 keeps that parent among the blocks
	// this generation run knows.
	if n < MergeBlock && n%5 == 0 && i >= 2 {
		g.addUncle(b, i, 0)
		if n%15 == 0 {
			g.addUncle(b, i, 1)
		}
	}
}

func (g *generator) addUncle(b *core.BlockGen, i, u int) {
	grandparent := b.PrevBlock(i - 2)
	b.AddUncle(&types.Header{
		ParentHash:  grandparent.Hash(),
		UncleHash:   types.EmptyUncleHash,
		Coinbase:    miners[(u+1)%len(miners)],
		Root:        grandparent.Root(),
		TxHash:      types.EmptyTxsHash,
		ReceiptHash: types.EmptyReceiptsHash,
		Number:      new(big.Int).Add(grandparent.Number(), common.Big1),
		Extra:       []byte(fmt.Sprintf("uncle %d", u)),
	})
}

// sideBlock makes the side-chain block: another miner's block at the same
// height, with a transaction of its own.
func (g *generator) sideBlock(_ int, b *core.BlockGen) {
	b.SetCoinbase(common.HexToAddress("0x0000000000000000000000000000000000051de5"))
	b.SetExtra([]byte("side chain"))
	g.londonTransactions(b, 3, SideNumber)
}

func (g *generator) sign(b *core.BlockGen, key int, inner types.TxData) *types.Transaction {
	tx, err := types.SignNewTx(Keys[key], types.LatestSigner(g.config), inner)
	if err != nil {
		panic(err)
	}
	b.AddTx(tx)
	return tx
}

func (g *generator) berlinTransactions(b *core.BlockGen, sender int, n uint64) {
	from := addr(sender)
	g.sign(b, sender, &types.LegacyTx{Nonce: b.TxNonce(from), GasPrice: gwei, Gas: 21_000, To: &receiver, Value: big.NewInt(int64(n))})
	if n%3 == 0 {
		// Without EIP-155 replay protection, as early wallets signed.
		tx, err := types.SignTx(types.NewTx(&types.LegacyTx{Nonce: b.TxNonce(from), GasPrice: gwei, Gas: 21_000, To: &receiver, Value: big.NewInt(1)}), types.HomesteadSigner{}, Keys[sender])
		if err != nil {
			panic(err)
		}
		b.AddTx(tx)
	}
	if n%4 == 1 {
		g.sign(b, sender, &types.LegacyTx{Nonce: b.TxNonce(from), GasPrice: gwei, Gas: 100_000, Data: initCode})
	}
	g.sign(b, (sender+1)%len(Keys), &types.AccessListTx{
		ChainID:  g.config.ChainID,
		Nonce:    b.TxNonce(addr((sender + 1) % len(Keys))),
		GasPrice: gwei,
		Gas:      30_000,
		To:       &receiver,
		Value:    big.NewInt(2),
		AccessList: types.AccessList{{
			Address:     receiver,
			StorageKeys: []common.Hash{common.BigToHash(big.NewInt(int64(n))), common.BigToHash(big.NewInt(1))},
		}},
	})
}

func (g *generator) londonTransactions(b *core.BlockGen, sender int, n uint64) {
	from := addr(sender)
	g.sign(b, sender, &types.DynamicFeeTx{
		ChainID:   g.config.ChainID,
		Nonce:     b.TxNonce(from),
		GasTipCap: big.NewInt(int64(n) * params.GWei / 10),
		GasFeeCap: new(big.Int).Mul(big.NewInt(30), gwei),
		Gas:       21_000,
		To:        &receiver,
		Value:     big.NewInt(int64(n)),
	})
	if n%2 == 1 {
		g.sign(b, sender, &types.LegacyTx{Nonce: b.TxNonce(from), GasPrice: new(big.Int).Mul(big.NewInt(20), gwei), Gas: 21_000, To: &receiver, Value: big.NewInt(3)})
	}
	if n%3 == 0 {
		other := (sender + 1) % len(Keys)
		g.sign(b, other, &types.DynamicFeeTx{
			ChainID:    g.config.ChainID,
			Nonce:      b.TxNonce(addr(other)),
			GasTipCap:  gwei,
			GasFeeCap:  new(big.Int).Mul(big.NewInt(25), gwei),
			Gas:        120_000,
			Data:       initCode,
			AccessList: types.AccessList{{Address: receiver, StorageKeys: []common.Hash{{}}}},
		})
	}
}

// addBlobTransaction adds a blob transaction carrying one or two blobs with
// real KZG commitments. The block holds it without the sidecar, as blocks do.
func (g *generator) addBlobTransaction(b *core.BlockGen, sender int, n uint64) {
	count := 1 + int(n%3/2)
	var hashes []common.Hash
	for j := range count {
		var blob kzg4844.Blob
		seed := crypto.Keccak256([]byte("blob"), big.NewInt(int64(n)).Bytes(), []byte{byte(j)})
		for k := 0; k < len(blob); k += 32 {
			copy(blob[k+1:k+32], seed) // the top byte stays 0: a valid field element
		}
		commitment, err := kzg4844.BlobToCommitment(&blob)
		if err != nil {
			panic(err)
		}
		hashes = append(hashes, kzg4844.CalcBlobHashV1(sha256.New(), &commitment))
	}
	from := addr(sender)
	tx, err := types.SignNewTx(Keys[sender], types.LatestSigner(g.config), &types.BlobTx{
		ChainID:    uint256.MustFromBig(g.config.ChainID),
		Nonce:      b.TxNonce(from),
		GasTipCap:  uint256.NewInt(params.GWei),
		GasFeeCap:  uint256.NewInt(30 * params.GWei),
		Gas:        21_000,
		To:         receiver,
		Value:      uint256.NewInt(n),
		BlobFeeCap: uint256.NewInt(10 * params.GWei),
		BlobHashes: hashes,
	})
	if err != nil {
		panic(err)
	}
	b.AddTx(tx)
}

// addSetCodeTransaction has sender delegate authority's code to the
// contract at receiver, with authority's signed authorization.
func (g *generator) addSetCodeTransaction(b *core.BlockGen, sender, authority int) {
	auth, err := types.SignSetCode(Keys[authority], types.SetCodeAuthorization{
		ChainID: *uint256.MustFromBig(g.config.ChainID),
		Address: receiver,
		Nonce:   b.TxNonce(addr(authority)),
	})
	if err != nil {
		panic(err)
	}
	target := addr(authority)
	g.sign(b, sender, &types.SetCodeTx{
		ChainID:   uint256.MustFromBig(g.config.ChainID),
		Nonce:     b.TxNonce(addr(sender)),
		GasTipCap: uint256.NewInt(params.GWei),
		GasFeeCap: uint256.NewInt(30 * params.GWei),
		Gas:       100_000,
		To:        target,
		AuthList:  []types.SetCodeAuthorization{auth},
	})
}

// Store loads the chain into a memstore, which checks every hash and size
// go-ethereum computed, and returns it with the pending block.
func (c *Chain) Store() (*memstore.Store, *backend.Block, error) {
	store := memstore.New()
	signer := types.LatestSignerForChainID(c.Config.ChainID)
	for _, b := range append([]*types.Block{c.Genesis, c.Side}, c.Blocks...) {
		block, uncles, err := gethconv.Block(signer, b)
		if err != nil {
			return nil, nil, err
		}
		add := store.AddBlock
		if b == c.Side {
			add = store.AddSideBlock
		}
		if err := add(block, uncles...); err != nil {
			return nil, nil, err
		}
	}
	pending, _, err := gethconv.Block(signer, c.Pending)
	if err != nil {
		return nil, nil, err
	}
	if err := store.SetPending(pending); err != nil {
		return nil, nil, err
	}
	pending, err = store.BlockByNumber(context.Background(), backend.Pending)
	if err != nil {
		return nil, nil, err
	}
	return store, pending, nil
}

// WriteDump writes the chain as a JSONL dump, and the pending block as a
// one-line dump of its own (a dump has no place for a pending block).
func (c *Chain) WriteDump(chain, pending io.Writer) error {
	store, p, err := c.Store()
	if err != nil {
		return err
	}
	if err := store.Save(chain); err != nil {
		return err
	}
	sealed := *p
	sealed.Pending = false // written as the block it will be once sealed
	var line bytes.Buffer
	line.WriteString(`{"block":`)
	line.Write(sealed.AppendJSON(nil, true))
	line.WriteString("}\n")
	_, err = pending.Write(line.Bytes())
	return err
}
