package chaintest

import (
	"context"
	"fmt"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// TxKind is a kind of transaction the builder makes: the transaction types,
// with legacy split by replay protection.
type TxKind int

// The kinds of transaction, in the order the forks brought them.
const (
	Legacy            TxKind = iota // type 0, signed with EIP-155 replay protection
	LegacyUnprotected               // type 0, signed without a chain id (v 27 or 28)
	AccessList                      // type 1, EIP-2930
	DynamicFee                      // type 2, EIP-1559, from London
	Blob                            // type 3, EIP-4844, from Cancun
	SetCode                         // type 4, EIP-7702, from Prague
)

var kindNames = [...]string{"legacy", "legacy without EIP-155", "access-list", "dynamic-fee", "blob", "set-code"}

// String returns the kind's name.
func (k TxKind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("TxKind(%d)", int(k))
	}
	return kindNames[k]
}

// Type returns the transaction type of the kind.
func (k TxKind) Type() uint8 {
	if k <= LegacyUnprotected {
		return backend.LegacyTxType
	}
	return uint8(k - 1)
}

// Tx describes a transaction for BlockGen.AddTx. The zero value is an
// EIP-155 legacy transfer of nothing from Key(0) to Key(1).
type Tx struct {
	Kind TxKind
	// From is the index of the sending key, Key(From). Its nonce is
	// tracked by the builder, per branch.
	From int
	// To is the recipient; nil means Key(From+1)'s account. For a set-code
	// transaction the default is the authority, Key(From+1), whose code
	// the transaction sets.
	To *backend.Address
	// Create makes a contract creation (no recipient), which legacy,
	// access-list and dynamic-fee transactions can be.
	Create bool
	Value  uint64 // in wei
	Data   []byte
	// Blobs is the number of blobs of a blob transaction; 0 means 1.
	Blobs int
}

// BlockGen builds one block: the callback of Builder.AddBlock adds
// transactions, uncles and withdrawals to it.
type BlockGen struct {
	c           *chain
	header      backend.Header
	parent      *backend.Block
	txs         []*backend.Transaction
	uncles      []*backend.Uncle
	withdrawals []backend.Withdrawal
	blobs       uint64
	state       *state
}

func (b *Builder) newBlockGen(parent *backend.Block) *BlockGen {
	g := &BlockGen{c: b.c, parent: parent}
	if parent == nil {
		g.header = b.c.header(nil, 0)
		g.state = &state{nonces: make(map[int]uint64)}
		return g
	}
	g.header = b.c.header(&parent.Header, parent.Number+1)
	g.state = b.c.states[parent.Hash].copy()
	if g.header.WithdrawalsRoot != nil {
		g.withdrawals = []backend.Withdrawal{}
	}
	return g
}

// Number returns the number of the block being built.
func (g *BlockGen) Number() uint64 { return g.header.Number }

// Timestamp returns the block's timestamp.
func (g *BlockGen) Timestamp() uint64 { return g.header.Timestamp }

// BaseFee returns the block's base fee, nil before London.
func (g *BlockGen) BaseFee() *uint256.Int {
	if g.header.BaseFeePerGas == nil {
		return nil
	}
	return new(uint256.Int).Set(g.header.BaseFeePerGas)
}

// SetExtraData sets the header's extraData (32 bytes at most, as
// consensus allows).
func (g *BlockGen) SetExtraData(data []byte) {
	if len(data) > 32 {
		panic(fmt.Sprintf("chaintest: extraData of %d bytes, more than 32", len(data)))
	}
	g.header.ExtraData = append([]byte{}, data...)
}

// Kinds returns the kinds of transaction the block's fork allows.
func (g *BlockGen) Kinds() []TxKind {
	kinds := []TxKind{Legacy, LegacyUnprotected, AccessList}
	n, cfg := g.header.Number, &g.c.cfg
	if active(cfg.London, n) {
		kinds = append(kinds, DynamicFee)
	}
	if active(cfg.Cancun, n) {
		kinds = append(kinds, Blob)
	}
	if active(cfg.Prague, n) {
		kinds = append(kinds, SetCode)
	}
	return kinds
}

func (g *BlockGen) allows(k TxKind) bool {
	for _, allowed := range g.Kinds() {
		if allowed == k {
			return true
		}
	}
	return false
}

func (g *BlockGen) blobSchedule() blobSchedule { return g.c.blobSchedule(g.header.Number) }

// The intrinsic gas of a transaction's parts, which is all the gas the
// builder's transactions use: nothing is executed.
const (
	txGas                  = 21000
	createGas              = 32000
	zeroByteGas            = 4
	nonZeroByteGas         = 16
	accessListAddressGas   = 2400
	accessListStorageGas   = 1900
	perAuthorizationGas    = 25000
	maxPriorityFeePerGas   = 1_000_000_000 // the tip every fee-market transaction offers
	preLondonGasPrice      = 2_000_000_000
	delegationTargetPrefix = 0xde // the first byte of the code address authorizations name
)

// AddTx adds a transaction signed by Key(t.From) with its next nonce, and
// returns it as it will be stored. Its fees are what the block's base fee
// calls for, with a tip of 1 gwei. It panics when the block's fork does
// not allow the kind, when the block has no room for its gas or blobs, or
// when the kind cannot create a contract.
func (g *BlockGen) AddTx(t Tx) *backend.Transaction {
	if !g.allows(t.Kind) {
		panic(fmt.Sprintf("chaintest: block %d's fork does not allow %s transactions", g.header.Number, t.Kind))
	}
	key := Key(t.From)
	tx := &backend.Transaction{
		Type:  t.Kind.Type(),
		Nonce: g.state.nonces[t.From],
		Value: *uint256.NewInt(t.Value),
		Input: append([]byte{}, t.Data...),
	}
	if t.Kind != LegacyUnprotected {
		tx.ChainID = uint256.NewInt(g.c.cfg.ChainID)
	}
	authority := Key(t.From + 1)
	switch {
	case t.Create && t.Kind >= Blob:
		panic(fmt.Sprintf("chaintest: a %s transaction cannot create a contract", t.Kind))
	case t.Create:
	case t.To != nil:
		to := *t.To
		tx.To = &to
	default:
		to := authority.Address()
		tx.To = &to
	}
	g.setFees(tx)
	if t.Kind == AccessList {
		// The other typed kinds leave their list empty, as most wallets do.
		tx.AccessList = []backend.AccessTuple{{Address: g.c.randomAddress(), StorageKeys: []backend.Hash{g.c.randomHash()}}}
	}
	if t.Kind == Blob {
		g.addBlobs(tx, t.Blobs)
	}
	if t.Kind == SetCode {
		// The authority is never the sender, whose nonce the transaction
		// bumps before its authorizations are applied: its nonce is simply
		// its next one.
		nonce := g.state.nonces[t.From+1]
		target := g.c.randomAddress()
		target[0] = delegationTargetPrefix
		tx.AuthorizationList = []backend.SetCodeAuthorization{authority.SignAuthorization(backend.SetCodeAuthorization{
			ChainID: *uint256.NewInt(g.c.cfg.ChainID), Address: target, Nonce: nonce,
		})}
	}
	tx.Gas = intrinsicGas(tx)
	if g.header.GasUsed+tx.Gas > g.header.GasLimit {
		panic(fmt.Sprintf("chaintest: block %d is full: %d gas used of %d, and the transaction needs %d", g.header.Number, g.header.GasUsed, g.header.GasLimit, tx.Gas))
	}
	key.SignTx(tx)
	g.header.GasUsed += tx.Gas
	g.state.nonces[t.From]++
	if t.Kind == SetCode {
		// Applying an authorization bumps the authority's nonce.
		g.state.nonces[t.From+1]++
	}
	g.txs = append(g.txs, tx)
	return tx.Copy()
}

// setFees sets the fee fields of tx from the block's base fee.
func (g *BlockGen) setFees(tx *backend.Transaction) {
	baseFee := g.header.BaseFeePerGas
	tip := uint256.NewInt(maxPriorityFeePerGas)
	if tx.Type <= backend.AccessListTxType {
		if baseFee == nil {
			tx.GasPrice = uint256.NewInt(preLondonGasPrice)
		} else {
			tx.GasPrice = new(uint256.Int).Add(baseFee, tip)
		}
		return
	}
	// A fee cap of twice the base fee plus the tip survives six full
	// blocks of base fee rises, as wallets reckon it.
	maxFee := new(uint256.Int).Lsh(baseFee, 1)
	tx.MaxFeePerGas = maxFee.Add(maxFee, tip)
	tx.MaxPriorityFeePerGas = tip
}

// addBlobs gives a blob transaction n blobs (at least 1): made-up versioned
// hashes, with the version byte 0x01 of KZG commitments, and a blob fee cap
// of twice the block's blob base fee.
func (g *BlockGen) addBlobs(tx *backend.Transaction, n int) {
	n = max(n, 1)
	s := g.blobSchedule()
	if g.blobs+uint64(n) > s.max {
		panic(fmt.Sprintf("chaintest: block %d has room for %d more blobs, not %d", g.header.Number, s.max-g.blobs, n))
	}
	for range n {
		h := g.c.randomHash()
		h[0] = 0x01
		tx.BlobVersionedHashes = append(tx.BlobVersionedHashes, h)
	}
	fee := blobBaseFee(*g.header.ExcessBlobGas, s)
	tx.MaxFeePerBlobGas = new(uint256.Int).Lsh(fee, 1)
	g.blobs += uint64(n)
	*g.header.BlobGasUsed = g.blobs * blobGasPerBlob
}

func intrinsicGas(tx *backend.Transaction) uint64 {
	gas := uint64(txGas)
	if tx.To == nil {
		gas += createGas
	}
	for _, b := range tx.Input {
		if b == 0 {
			gas += zeroByteGas
		} else {
			gas += nonZeroByteGas
		}
	}
	for _, t := range tx.AccessList {
		gas += accessListAddressGas + uint64(len(t.StorageKeys))*accessListStorageGas
	}
	return gas + uint64(len(tx.AuthorizationList))*perAuthorizationGas
}

// AddUncle adds an uncle: a sibling of the block's parent, mined on the
// same grandparent by another miner. It returns the uncle's hash. It
// panics after the merge, on a block without a grandparent, and past the
// two uncles a block may have.
func (g *BlockGen) AddUncle() backend.Hash {
	n := g.header.Number
	switch {
	case active(g.c.cfg.Merge, n):
		panic(fmt.Sprintf("chaintest: block %d is after the merge, which ended uncles", n))
	case n < 2:
		panic(fmt.Sprintf("chaintest: block %d has no grandparent to mine an uncle on", n))
	case len(g.uncles) == 2:
		panic(fmt.Sprintf("chaintest: block %d already has two uncles, the most a block may have", n))
	}
	grandparent, err := g.c.store.BlockByHash(context.Background(), g.parent.ParentHash)
	if err != nil {
		panic(err)
	}
	h := g.c.header(&grandparent.Header, n-1)
	// A second or later uncle must differ from the first and from the
	// parent; the timestamp keeps it apart even for the same miner.
	h.Timestamp += uint64(len(g.uncles)) + 1
	h.Sha3Uncles = backend.UnclesHash(nil)
	h.TransactionsRoot = emptyRoot
	if h.WithdrawalsRoot != nil {
		panic("chaintest: uncle after Shanghai") // excluded by the merge check
	}
	u := &backend.Uncle{Header: h, Hash: backend.HeaderHash(&h)}
	g.uncles = append(g.uncles, u)
	return u.Hash
}

// AddWithdrawal adds a withdrawal of gwei to the address from the given
// validator, with the chain's next withdrawal index, and returns it. It
// panics before Shanghai.
func (g *BlockGen) AddWithdrawal(validator uint64, to backend.Address, gwei uint64) backend.Withdrawal {
	if g.header.WithdrawalsRoot == nil {
		panic(fmt.Sprintf("chaintest: block %d is before Shanghai, which brought withdrawals", g.header.Number))
	}
	w := backend.Withdrawal{Index: g.state.withdrawalIndex, ValidatorIndex: validator, Address: to, Amount: gwei}
	g.state.withdrawalIndex++
	g.withdrawals = append(g.withdrawals, w)
	return w
}

// seal fills in the header's roots and returns the block with its hash,
// and its uncles.
func (g *BlockGen) seal() (*backend.Block, []*backend.Uncle) {
	h := g.header
	headers := make([]*backend.Header, len(g.uncles))
	uncleHashes := make([]backend.Hash, len(g.uncles))
	for i, u := range g.uncles {
		headers[i], uncleHashes[i] = &u.Header, u.Hash
	}
	h.Sha3Uncles = backend.UnclesHash(headers)
	h.TransactionsRoot = backend.TransactionsRoot(g.txs)
	if len(g.txs) > 0 {
		// Receipts are not made: a made-up root stands for theirs.
		h.ReceiptsRoot = g.c.randomHash()
	}
	if h.WithdrawalsRoot != nil {
		root := backend.WithdrawalsRoot(g.withdrawals)
		h.WithdrawalsRoot = &root
	}
	return &backend.Block{
		Header:       h,
		Hash:         backend.HeaderHash(&h),
		Transactions: g.txs,
		Uncles:       uncleHashes,
		Withdrawals:  g.withdrawals,
	}, g.uncles
}
