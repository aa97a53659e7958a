// Package synth generates synthetic chains of mainnet's shape, fast: for
// measuring stores at 10^5 and 10^6 blocks, which memstore/chaintest,
// signing every transaction, takes minutes to build.
//
// The blocks are those of today's mainnet (Prague rules, proof of stake,
// 16 withdrawals a block) with a mix of transactions after mainnet's:
// transfers, token calls, swaps and larger contract calls with ABI-encoded
// calldata (32-byte words, mostly zero padding), a few access lists,
// contract creations, blob and set-code transactions, legacy ones among
// them. Every value a block's contents determine is computed
// (backend.Seal), so stores check these blocks as any others; but the
// signatures are random numbers and the senders are drawn from a pool:
// a client that recovers senders from signatures (backend.VerifySenders)
// refuses them. Stores do not recover senders.
//
// The same Config gives the same chain, block for block.
package synth

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// Config sets the chain. The zero value is a chain of DefaultTxsPerBlock
// transactions a block on average, with chain id 1.
type Config struct {
	Seed    uint64
	ChainID uint64 // 0 means 1
	// TxsPerBlock is the mean number of transactions a block; each block
	// has between half and one and a half times as many. 0 means
	// DefaultTxsPerBlock; a negative value gives empty blocks.
	TxsPerBlock int
}

// DefaultTxsPerBlock is mainnet's order of magnitude.
const DefaultTxsPerBlock = 150

// Generator produces a chain block by block, from the genesis.
type Generator struct {
	cfg     Config
	rng     *rand.Rand
	chainID *uint256.Int
	parent  *backend.Block
	senders []backend.Address
	nonces  []uint64
	// contracts are the popular recipients: token contracts, routers.
	contracts  []backend.Address
	withdrawal uint64
}

// Pool sizes: mainnet's busiest contracts take most calls, senders are
// many.
const (
	numSenders   = 4096
	numContracts = 256
	gasLimit     = 36_000_000
	genesisTime  = 1_700_000_000
)

// New returns a generator whose first block is the genesis.
func New(cfg Config) *Generator {
	if cfg.ChainID == 0 {
		cfg.ChainID = 1
	}
	if cfg.TxsPerBlock == 0 {
		cfg.TxsPerBlock = DefaultTxsPerBlock
	}
	g := &Generator{
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x73796e7468)),
		chainID: uint256.NewInt(cfg.ChainID),
	}
	g.senders = make([]backend.Address, numSenders)
	g.nonces = make([]uint64, numSenders)
	for i := range g.senders {
		g.senders[i] = g.address()
	}
	g.contracts = make([]backend.Address, numContracts)
	for i := range g.contracts {
		g.contracts[i] = g.address()
	}
	return g
}

// Head returns the last block generated, nil before the first.
func (g *Generator) Head() *backend.Block { return g.parent }

// Next returns the next block, sealed: hashes, roots and size filled in.
// Its total difficulty is left for the store to settle.
func (g *Generator) Next() *backend.Block {
	b := g.block(g.parent)
	g.parent = b
	return b
}

// NextAfter returns a block on top of parent, a block this generator
// made, for a side chain: Next still continues from Head.
func (g *Generator) NextAfter(parent *backend.Block) *backend.Block {
	return g.block(parent)
}

func (g *Generator) block(parent *backend.Block) *backend.Block {
	b := &backend.Block{Header: g.header(parent)}
	if b.Number > 0 && g.cfg.TxsPerBlock > 0 {
		mean := g.cfg.TxsPerBlock
		n := mean/2 + g.rng.IntN(mean+1)
		b.Transactions = make([]*backend.Transaction, 0, n)
		for range n {
			tx := g.transaction(b.BaseFeePerGas)
			if b.GasUsed+tx.Gas > b.GasLimit {
				break
			}
			b.GasUsed += tx.Gas
			if tx.Type == backend.BlobTxType {
				*b.BlobGasUsed += uint64(len(tx.BlobVersionedHashes)) << 17
			}
			b.Transactions = append(b.Transactions, tx)
		}
	}
	if b.Number > 0 {
		b.Withdrawals = make([]backend.Withdrawal, 16)
		for i := range b.Withdrawals {
			b.Withdrawals[i] = backend.Withdrawal{
				Index:          g.withdrawal,
				ValidatorIndex: g.rng.Uint64N(1_000_000),
				Address:        g.senders[g.rng.IntN(numSenders)],
				Amount:         17_000_000 + g.rng.Uint64N(2_000_000),
			}
			g.withdrawal++
		}
	}
	if b.Number > 0 {
		g.bloom(&b.LogsBloom, len(b.Transactions))
	}
	if err := backend.Seal(b, nil); err != nil {
		panic(fmt.Sprintf("synth: block %d: %v", b.Number, err))
	}
	return b
}

func (g *Generator) header(parent *backend.Block) backend.Header {
	var number uint64
	var parentHash backend.Hash
	if parent != nil {
		number, parentHash = parent.Number+1, parent.Hash
	}
	zero := uint64(0)
	excess := uint64(0)
	h := backend.Header{
		ParentHash:            parentHash,
		Miner:                 g.contracts[g.rng.IntN(8)], // a few builders build most blocks
		StateRoot:             g.hash(),
		ReceiptsRoot:          g.hash(),
		Number:                number,
		GasLimit:              gasLimit,
		Timestamp:             genesisTime + 12*number,
		ExtraData:             []byte("synth builder"),
		MixHash:               g.hash(),
		BaseFeePerGas:         uint256.NewInt(2_000_000_000 + g.rng.Uint64N(8_000_000_000)),
		WithdrawalsRoot:       &backend.Hash{},
		BlobGasUsed:           &zero,
		ExcessBlobGas:         &excess,
		ParentBeaconBlockRoot: ptr(g.hash()),
		RequestsHash:          ptr(g.hash()),
	}
	if number == 0 {
		h.Difficulty.SetUint64(17_179_869_184) // mainnet's genesis difficulty
		h.ExtraData = []byte("synth genesis")
	}
	return h
}

func ptr[T any](v T) *T { return &v }

func (g *Generator) hash() (h backend.Hash) {
	for i := 0; i < 32; i += 8 {
		binary.LittleEndian.PutUint64(h[i:], g.rng.Uint64())
	}
	return h
}

func (g *Generator) address() (a backend.Address) {
	h := g.hash()
	copy(a[:], h[:])
	return a
}

// bloom sets about as many bits as the logs of n transactions would.
func (g *Generator) bloom(b *backend.Bloom, n int) {
	for range n * 6 {
		bit := g.rng.IntN(2048)
		b[bit/8] |= 1 << (bit % 8)
	}
}

// The kinds of transaction, with mainnet's shares in percent, roughly.
type kind int

const (
	transfer  kind = iota // ether to an account: no calldata
	tokenCall             // transfer or approve of a token: 68 bytes
	swap                  // a router call: a few hundred bytes
	bigCall               // a larger contract call: a few kilobytes
	create                // a contract creation
	blob                  // a blob transaction
	setCode               // a set-code transaction
)

var kindShares = []struct {
	kind  kind
	share int
}{{transfer, 35}, {tokenCall, 32}, {swap, 22}, {bigCall, 8}, {create, 1}, {blob, 1}, {setCode, 1}}

func (g *Generator) kind() kind {
	r := g.rng.IntN(100)
	for _, k := range kindShares {
		if r < k.share {
			return k.kind
		}
		r -= k.share
	}
	return transfer
}

// transaction returns a transaction of a random kind, with its hash left
// for Seal.
func (g *Generator) transaction(baseFee *uint256.Int) *backend.Transaction {
	k := g.kind()
	from := g.rng.IntN(numSenders)
	tx := &backend.Transaction{Nonce: g.nonces[from], From: g.senders[from]}
	g.nonces[from]++
	switch r := g.rng.IntN(100); {
	case k >= blob:
		tx.Type = backend.BlobTxType
		if k == setCode {
			tx.Type = backend.SetCodeTxType
		}
	case r < 10:
		tx.Type = backend.LegacyTxType
	case r < 12:
		tx.Type = backend.AccessListTxType
	default:
		tx.Type = backend.DynamicFeeTxType
	}
	to := g.contracts[g.zipf()]
	tx.To = &to
	switch k {
	case transfer:
		to := g.senders[g.rng.IntN(numSenders)]
		tx.To = &to
		tx.Value.SetUint64(g.rng.Uint64N(1 << 60))
	case tokenCall:
		tx.Input = g.calldata(2, 0)
	case swap:
		tx.Input = g.calldata(4+g.rng.IntN(12), 0)
		if g.rng.IntN(3) == 0 {
			tx.Value.SetUint64(g.rng.Uint64N(1 << 58))
		}
	case bigCall:
		tx.Input = g.calldata(8+g.rng.IntN(24), 512+g.rng.IntN(3072))
	case create:
		tx.To = nil
		tx.Input = g.bytes(2048 + g.rng.IntN(12*1024))
	case blob:
		n := 1 + g.rng.IntN(6)
		for range n {
			h := g.hash()
			h[0] = 0x01 // the KZG version byte
			tx.BlobVersionedHashes = append(tx.BlobVersionedHashes, h)
		}
		tx.MaxFeePerBlobGas = uint256.NewInt(1_000_000_000)
		tx.Input = g.calldata(2, 0)
	case setCode:
		tx.AuthorizationList = []backend.SetCodeAuthorization{{
			ChainID: *g.chainID, Address: g.contracts[g.zipf()], Nonce: g.rng.Uint64N(100), YParity: uint8(g.rng.IntN(2)),
		}}
		a := &tx.AuthorizationList[0]
		g.u256(&a.R)
		g.u256(&a.S)
	}
	if tx.Type == backend.AccessListTxType || (tx.Type == backend.DynamicFeeTxType && g.rng.IntN(20) == 0) {
		tx.AccessList = []backend.AccessTuple{}
		for range 1 + g.rng.IntN(3) {
			t := backend.AccessTuple{Address: g.contracts[g.zipf()], StorageKeys: []backend.Hash{}}
			for range g.rng.IntN(5) {
				t.StorageKeys = append(t.StorageKeys, g.hash())
			}
			tx.AccessList = append(tx.AccessList, t)
		}
	}
	tx.Gas = gasOf(tx)
	tip := uint256.NewInt(g.rng.Uint64N(2_000_000_000))
	if tx.Type < backend.DynamicFeeTxType {
		tx.GasPrice = new(uint256.Int).Add(baseFee, tip)
	} else {
		tx.MaxPriorityFeePerGas = tip
		tx.MaxFeePerGas = new(uint256.Int).Add(new(uint256.Int).Lsh(baseFee, 1), tip)
	}
	if tx.Type != backend.LegacyTxType {
		tx.ChainID = new(uint256.Int).Set(g.chainID)
		tx.V.SetUint64(g.rng.Uint64N(2))
	} else {
		tx.V.SetUint64(g.cfg.ChainID*2 + 35 + g.rng.Uint64N(2))
	}
	g.u256(&tx.R)
	g.u256(&tx.S)
	return tx
}

// zipf picks a popular contract: the first few take most calls.
func (g *Generator) zipf() int {
	return min(int(g.rng.ExpFloat64()*16), numContracts-1)
}

// u256 sets z to a random value below the secp256k1 order, as a
// signature's r and s are.
func (g *Generator) u256(z *uint256.Int) {
	z.SetAllOne()
	z.Rsh(z, 1)
	var r uint256.Int
	for i := range 4 {
		r[i] = g.rng.Uint64()
	}
	z.And(z, &r)
}

// calldata returns a 4-byte selector and ABI words: addresses and amounts
// padded to 32 bytes, and then extra bytes of packed data.
func (g *Generator) calldata(words, extra int) []byte {
	data := make([]byte, 4, 4+32*words+extra)
	binary.BigEndian.PutUint32(data, uint32(g.zipf())*0x9e3779b1)
	for range words {
		var w [32]byte
		switch g.rng.IntN(4) {
		case 0, 1: // an address
			a := g.contracts[g.zipf()]
			if g.rng.IntN(2) == 0 {
				a = g.senders[g.rng.IntN(numSenders)]
			}
			copy(w[12:], a[:])
		case 2: // an amount
			binary.BigEndian.PutUint64(w[24:], g.rng.Uint64())
			binary.BigEndian.PutUint32(w[20:], g.rng.Uint32()>>8)
		default: // an offset, a length or a flag
			w[31] = byte(g.rng.IntN(256))
		}
		data = append(data, w[:]...)
	}
	return append(data, g.bytes(extra)...)
}

// bytes returns n bytes of code or packed data: random, with runs of zeros.
func (g *Generator) bytes(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := g.rng.Uint64()
		if v&3 == 0 {
			continue // eight zero bytes
		}
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], v)
		copy(b[i:], w[:])
	}
	return b
}

// gasOf is the intrinsic gas of a transaction, and some for its work.
func gasOf(tx *backend.Transaction) uint64 {
	gas := uint64(21_000)
	if tx.To == nil {
		gas += 32_000
	}
	for _, c := range tx.Input {
		if c == 0 {
			gas += 4
		} else {
			gas += 16
		}
	}
	for _, t := range tx.AccessList {
		gas += 2400 + 1900*uint64(len(t.StorageKeys))
	}
	gas += 25_000 * uint64(len(tx.AuthorizationList))
	if len(tx.Input) > 0 {
		gas += 30_000 // execution
	}
	return gas
}
