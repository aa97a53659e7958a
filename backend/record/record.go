// Package record is the compact binary encoding in which blockrpc's
// persistent stores keep blocks: a sealed block with its uncle headers,
// written once when the block is stored and never changed.
//
// A record holds the header, the derived values that are costly to compute
// again (the block, transaction and uncle hashes, the senders, the sizes),
// the total difficulties known when it is written, the uncle headers, the
// withdrawals and the transactions (or their hashes, for a block held
// without bodies). What a decoder computes cheaply from the rest is left
// out: a dynamic-fee transaction's gasPrice (the effective price, from the
// block's base fee) and a legacy transaction's chainId (from its v).
//
// The encoding is a plain binary one: a version byte, then the fields in a
// fixed order, fixed-size hashes and addresses as they are, integers as
// uvarints, 256-bit integers as a length byte and their big-endian bytes,
// a slice as its length plus one, so that nil and empty stay apart. It was
// measured against the alternatives (pebblestore's BenchmarkEncoding and
// TestEncodingSizes): the JSON the service answers with is over twice the
// size and an order of magnitude slower to decode; the consensus RLP with
// the hashes and senders beside it is no smaller, and would need a decoder
// of its own and a second pass to match the extras to the transactions.
// A record decodes in one pass with a few dozen allocations.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// Version is the first byte of every record this package writes; Decode
// refuses records of another version.
const Version = 1

// Header flags: which optional fields a header encoding holds.
const (
	flagBaseFee = 1 << iota
	flagWithdrawalsRoot
	flagBlobGasUsed
	flagExcessBlobGas
	flagBeaconRoot
	flagRequestsHash
	flagZeroBloom // logsBloom is all zero and left out
)

// Transaction flags.
const (
	txFlagTo = 1 << iota
)

// ErrCorrupt is wrapped by the error of every record that does not
// decode: truncated, altered, or not a record.
var ErrCorrupt = errors.New("corrupt block record")

// encoder appends to buf.
type encoder struct{ buf []byte }

func (e *encoder) byte(b byte)          { e.buf = append(e.buf, b) }
func (e *encoder) raw(b []byte)         { e.buf = append(e.buf, b...) }
func (e *encoder) uvarint(v uint64)     { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) hash(h *backend.Hash) { e.buf = append(e.buf, h[:]...) }

// count writes the length of a slice plus one, or 0 for a nil slice.
func (e *encoder) count(n int, isNil bool) {
	if isNil {
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(n) + 1)
}

func (e *encoder) bytes(b []byte) {
	e.count(len(b), b == nil)
	e.raw(b)
}

// u256 writes the length of z's big-endian form, then the form.
func (e *encoder) u256(z *uint256.Int) {
	n := (z.BitLen() + 7) / 8
	e.byte(byte(n))
	var full [32]byte
	z.WriteToArray32(&full)
	e.raw(full[32-n:])
}

// nilU256 is the length byte of an absent optional 256-bit integer.
const nilU256 = 33

func (e *encoder) optU256(z *uint256.Int) {
	if z == nil {
		e.byte(nilU256)
		return
	}
	e.u256(z)
}

// header writes h, its parent hash first.
func (e *encoder) header(h *backend.Header) {
	var flags uint64
	if h.BaseFeePerGas != nil {
		flags |= flagBaseFee
	}
	if h.WithdrawalsRoot != nil {
		flags |= flagWithdrawalsRoot
	}
	if h.BlobGasUsed != nil {
		flags |= flagBlobGasUsed
	}
	if h.ExcessBlobGas != nil {
		flags |= flagExcessBlobGas
	}
	if h.ParentBeaconBlockRoot != nil {
		flags |= flagBeaconRoot
	}
	if h.RequestsHash != nil {
		flags |= flagRequestsHash
	}
	if h.LogsBloom == (backend.Bloom{}) {
		flags |= flagZeroBloom
	}
	e.hash(&h.ParentHash)
	e.uvarint(flags)
	e.hash(&h.Sha3Uncles)
	e.raw(h.Miner[:])
	e.hash(&h.StateRoot)
	e.hash(&h.TransactionsRoot)
	e.hash(&h.ReceiptsRoot)
	if flags&flagZeroBloom == 0 {
		e.raw(h.LogsBloom[:])
	}
	e.u256(&h.Difficulty)
	e.uvarint(h.Number)
	e.uvarint(h.GasLimit)
	e.uvarint(h.GasUsed)
	e.uvarint(h.Timestamp)
	e.bytes(h.ExtraData)
	e.hash(&h.MixHash)
	e.raw(h.Nonce[:])
	if h.BaseFeePerGas != nil {
		e.u256(h.BaseFeePerGas)
	}
	if h.WithdrawalsRoot != nil {
		e.hash(h.WithdrawalsRoot)
	}
	if h.BlobGasUsed != nil {
		e.uvarint(*h.BlobGasUsed)
	}
	if h.ExcessBlobGas != nil {
		e.uvarint(*h.ExcessBlobGas)
	}
	if h.ParentBeaconBlockRoot != nil {
		e.hash(h.ParentBeaconBlockRoot)
	}
	if h.RequestsHash != nil {
		e.hash(h.RequestsHash)
	}
}

func (e *encoder) transaction(tx *backend.Transaction) {
	e.byte(tx.Type)
	var flags byte
	if tx.To != nil {
		flags |= txFlagTo
	}
	e.byte(flags)
	if tx.Type != backend.LegacyTxType {
		// A legacy transaction's chain id follows from its v.
		e.optU256(tx.ChainID)
	}
	e.uvarint(tx.Nonce)
	if tx.Type < backend.DynamicFeeTxType {
		e.optU256(tx.GasPrice)
	} else {
		// The gas price of a later type is the effective price, which
		// the block's base fee gives.
		e.optU256(tx.MaxPriorityFeePerGas)
		e.optU256(tx.MaxFeePerGas)
	}
	e.uvarint(tx.Gas)
	if tx.To != nil {
		e.raw(tx.To[:])
	}
	e.u256(&tx.Value)
	e.bytes(tx.Input)
	e.count(len(tx.AccessList), tx.AccessList == nil)
	for i := range tx.AccessList {
		t := &tx.AccessList[i]
		e.raw(t.Address[:])
		e.count(len(t.StorageKeys), t.StorageKeys == nil)
		for j := range t.StorageKeys {
			e.hash(&t.StorageKeys[j])
		}
	}
	e.optU256(tx.MaxFeePerBlobGas)
	e.count(len(tx.BlobVersionedHashes), tx.BlobVersionedHashes == nil)
	for i := range tx.BlobVersionedHashes {
		e.hash(&tx.BlobVersionedHashes[i])
	}
	e.count(len(tx.AuthorizationList), tx.AuthorizationList == nil)
	for i := range tx.AuthorizationList {
		a := &tx.AuthorizationList[i]
		e.u256(&a.ChainID)
		e.raw(a.Address[:])
		e.uvarint(a.Nonce)
		e.byte(a.YParity)
		e.u256(&a.R)
		e.u256(&a.S)
	}
	e.u256(&tx.V)
	e.u256(&tx.R)
	e.u256(&tx.S)
	e.hash(&tx.Hash)
	e.raw(tx.From[:])
}

// Append appends the record of a sealed block (backend.Seal) and its
// sealed uncles to dst. The total difficulties are the block's and the
// uncles' own, nil where unknown; the pending flag is not kept. A block
// given with both its Transactions and their TransactionHashes keeps both,
// 32 bytes a transaction more: Split then gives the hashes beside the
// encoded transactions, so that a store that lends the block serves it
// without transaction details without decoding them. Decode gives the
// transactions alone, as for a block given without the hashes.
func Append(dst []byte, b *backend.Block, uncles []*backend.Uncle) []byte {
	e := encoder{buf: dst}
	e.byte(Version)
	e.header(&b.Header)
	e.hash(&b.Hash)
	e.uvarint(b.Size)
	e.optU256(b.TotalDifficulty)
	e.count(len(uncles), false)
	for _, u := range uncles {
		e.header(&u.Header)
		e.hash(&u.Hash)
		e.uvarint(u.Size)
		e.optU256(u.TotalDifficulty)
	}
	e.count(len(b.Withdrawals), b.Withdrawals == nil)
	for i := range b.Withdrawals {
		w := &b.Withdrawals[i]
		e.uvarint(w.Index)
		e.uvarint(w.ValidatorIndex)
		e.raw(w.Address[:])
		e.uvarint(w.Amount)
	}
	e.count(len(b.TransactionHashes), b.TransactionHashes == nil)
	for i := range b.TransactionHashes {
		e.hash(&b.TransactionHashes[i])
	}
	return AppendTransactions(e.buf, b.Transactions)
}

// Transactions are a block's transactions as a record holds them, at its
// end, or on their own (AppendTransactions): for a store that keeps a
// block's header as Go values and its bodies encoded.
type Transactions []byte

// AppendTransactions appends the encoding of a block's transactions, nil
// for a block held by its transaction hashes.
func AppendTransactions(dst []byte, txs []*backend.Transaction) []byte {
	e := encoder{buf: dst}
	e.count(len(txs), txs == nil)
	for _, tx := range txs {
		e.transaction(tx)
	}
	return e.buf
}

// decoder reads what encoder wrote. The first error sticks: later reads
// return zero values, and err tells.
//
// A block's many small values are carved out of a few large allocations
// (the arena): a block of 150 transactions decodes in a dozen allocations
// rather than a thousand, which is most of the decoding time otherwise.
// The values share their memory, which nobody changes (backend.Backend).
type decoder struct {
	buf []byte
	err error

	arena    []byte
	u256s    []uint256.Int
	addrs    []backend.Address
	tuples   []backend.AccessTuple
	keys     []backend.Hash
	hashes   []backend.Hash // the headers' optional hashes
	uint64s  []uint64       // the headers' optional integers
	prealloc bool
	// borrow makes byte slices refer to the record instead of copying.
	borrow bool

	// A Splitter's withdrawals and transaction hashes of the record
	// before, whose memory body and transactionHashes take again when it
	// has the room.
	withdrawals []backend.Withdrawal
	txHashes    []backend.Hash
}

// reserve sizes the arena for a record of n bytes holding about txs
// transactions.
func (d *decoder) reserve(n, txs int) {
	d.arena = make([]byte, 0, n)
	d.u256s = make([]uint256.Int, 0, 4*txs+8)
	d.addrs = make([]backend.Address, 0, txs+4)
	d.prealloc = true
}

func (d *decoder) newU256() *uint256.Int        { return take(&d.u256s, 16) }
func (d *decoder) newAddress() *backend.Address { return take(&d.addrs, 16) }

// take returns an element, not zeroed, from the end of *pool, which grows
// by a new allocation of at least n when full: the values taken before
// keep their memory.
func take[T any](pool *[]T, n int) *T {
	if len(*pool) == cap(*pool) {
		*pool = make([]T, 0, max(n, cap(*pool)))
	}
	*pool = (*pool)[:len(*pool)+1]
	return &(*pool)[len(*pool)-1]
}

// carve returns n zeroed elements from the end of *pool, which grows by a
// new allocation when full: the values carved before keep their memory.
func carve[T any](pool *[]T, n int) []T {
	if n == 0 {
		return []T{} // empty, not nil: the two encode apart
	}
	if cap(*pool)-len(*pool) < n {
		*pool = make([]T, 0, max(16, n, cap(*pool)))
	}
	start := len(*pool)
	*pool = (*pool)[:start+n]
	s := (*pool)[start : start+n : start+n]
	clear(s)
	return s
}

// reuse returns n elements, not zeroed, of *buf, which it makes anew when
// it has not the room. None is an empty slice, not nil: the two encode
// apart.
func reuse[T any](buf *[]T, n int) []T {
	if n == 0 {
		return []T{}
	}
	if cap(*buf) < n {
		*buf = make([]T, n)
	}
	*buf = (*buf)[:n]
	return *buf
}

// copyBytes returns a copy of b from the arena, with no room to append
// into the next value.
func (d *decoder) copyBytes(b []byte) []byte {
	if d.borrow {
		return b
	}
	if !d.prealloc || cap(d.arena)-len(d.arena) < len(b) {
		return append(make([]byte, 0, len(b)), b...)
	}
	start := len(d.arena)
	d.arena = append(d.arena, b...)
	return d.arena[start:len(d.arena):len(d.arena)]
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = ErrCorrupt
	}
	d.buf = nil
}

func (d *decoder) next(n int) []byte {
	if n > len(d.buf) || n < 0 {
		d.fail()
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) byte() byte {
	if b := d.next(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) uvarint() uint64 {
	if len(d.buf) > 0 && d.buf[0] < 0x80 {
		// Most varints of a record (counts, types, small nonces) are
		// one byte: inlined, this path decodes a block's transactions
		// faster than binary.Uvarint's loop (BenchmarkDecodeNext).
		v := uint64(d.buf[0])
		d.buf = d.buf[1:]
		return v
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// count reads what encoder.count wrote: the length, and whether the slice
// is nil. A length past what is left of the record is corrupt: each
// element takes at least min bytes.
func (d *decoder) count(min int) (n int, isNil bool) {
	v := d.uvarint()
	if v == 0 {
		return 0, true
	}
	if v-1 > uint64(len(d.buf)/max(min, 1)) {
		d.fail()
		return 0, false
	}
	return int(v - 1), false
}

func (d *decoder) into(dst []byte) { copy(dst, d.next(len(dst))) }

func (d *decoder) hash() (h backend.Hash) {
	d.into(h[:])
	return h
}

func (d *decoder) hashPtr() *backend.Hash {
	h := take(&d.hashes, 4)
	*h = d.hash()
	return h
}

func (d *decoder) address() (a backend.Address) {
	d.into(a[:])
	return a
}

// bytes returns a copy: the record's memory belongs to the database.
func (d *decoder) bytes() []byte {
	n, isNil := d.count(1)
	if isNil {
		return nil
	}
	return d.copyBytes(d.next(n))
}

func (d *decoder) u256(z *uint256.Int) {
	n := int(d.byte())
	if n > 32 {
		d.fail()
		return
	}
	z.SetBytes(d.next(n))
}

func (d *decoder) optU256() *uint256.Int {
	if len(d.buf) > 0 && d.buf[0] == nilU256 {
		d.buf = d.buf[1:]
		return nil
	}
	z := d.newU256()
	d.u256(z)
	return z
}

func (d *decoder) uint64Ptr() *uint64 {
	v := take(&d.uint64s, 4)
	*v = d.uvarint()
	return v
}

func (d *decoder) header(h *backend.Header) {
	h.ParentHash = d.hash()
	flags := d.uvarint()
	h.Sha3Uncles = d.hash()
	h.Miner = d.address()
	h.StateRoot = d.hash()
	h.TransactionsRoot = d.hash()
	h.ReceiptsRoot = d.hash()
	if flags&flagZeroBloom == 0 {
		d.into(h.LogsBloom[:])
	}
	d.u256(&h.Difficulty)
	h.Number = d.uvarint()
	h.GasLimit = d.uvarint()
	h.GasUsed = d.uvarint()
	h.Timestamp = d.uvarint()
	h.ExtraData = d.bytes()
	h.MixHash = d.hash()
	d.into(h.Nonce[:])
	if flags&flagBaseFee != 0 {
		h.BaseFeePerGas = d.newU256()
		d.u256(h.BaseFeePerGas)
	}
	if flags&flagWithdrawalsRoot != 0 {
		h.WithdrawalsRoot = d.hashPtr()
	}
	if flags&flagBlobGasUsed != 0 {
		h.BlobGasUsed = d.uint64Ptr()
	}
	if flags&flagExcessBlobGas != 0 {
		h.ExcessBlobGas = d.uint64Ptr()
	}
	if flags&flagBeaconRoot != 0 {
		h.ParentBeaconBlockRoot = d.hashPtr()
	}
	if flags&flagRequestsHash != 0 {
		h.RequestsHash = d.hashPtr()
	}
}

// Smallest encodings, to bound counts read from a record.
const (
	minTxBytes         = 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 32 + 20
	minUncleBytes      = 32 + 1 + 32 + 20 + 32*3 + 1 + 4 + 1 + 32 + 8 + 32 + 1 + 1
	minWithdrawalBytes = 3 + 20
)

func (d *decoder) transaction(tx *backend.Transaction, baseFee *uint256.Int) {
	tx.Type = d.byte()
	flags := d.byte()
	if tx.Type != backend.LegacyTxType {
		tx.ChainID = d.optU256()
	}
	tx.Nonce = d.uvarint()
	if tx.Type < backend.DynamicFeeTxType {
		tx.GasPrice = d.optU256()
	} else {
		tx.MaxPriorityFeePerGas = d.optU256()
		tx.MaxFeePerGas = d.optU256()
	}
	tx.Gas = d.uvarint()
	if flags&txFlagTo != 0 {
		tx.To = d.newAddress()
		*tx.To = d.address()
	}
	d.u256(&tx.Value)
	tx.Input = d.bytes()
	if n, isNil := d.count(21); !isNil {
		tx.AccessList = carve(&d.tuples, n)
		for i := range tx.AccessList {
			t := &tx.AccessList[i]
			t.Address = d.address()
			if k, isNil := d.count(32); !isNil {
				t.StorageKeys = carve(&d.keys, k)
				for j := range t.StorageKeys {
					t.StorageKeys[j] = d.hash()
				}
			}
		}
	}
	tx.MaxFeePerBlobGas = d.optU256()
	if n, isNil := d.count(32); !isNil {
		tx.BlobVersionedHashes = make([]backend.Hash, n)
		for i := range tx.BlobVersionedHashes {
			tx.BlobVersionedHashes[i] = d.hash()
		}
	}
	if n, isNil := d.count(25); !isNil {
		tx.AuthorizationList = make([]backend.SetCodeAuthorization, n)
		for i := range tx.AuthorizationList {
			a := &tx.AuthorizationList[i]
			d.u256(&a.ChainID)
			a.Address = d.address()
			a.Nonce = d.uvarint()
			a.YParity = d.byte()
			d.u256(&a.R)
			d.u256(&a.S)
		}
	}
	d.u256(&tx.V)
	d.u256(&tx.R)
	d.u256(&tx.S)
	tx.Hash = d.hash()
	tx.From = d.address()
	if d.err != nil {
		return
	}
	if !wellFormed(tx, flags) {
		d.fail()
		return
	}
	switch {
	case tx.Type == backend.LegacyTxType:
		if legacyProtected(&tx.V) {
			tx.ChainID = legacyChainID(d.newU256(), &tx.V)
		}
	case tx.Type >= backend.DynamicFeeTxType:
		if price, ok := tx.EffectiveGasPrice(baseFee); ok {
			tx.GasPrice = d.newU256()
			*tx.GasPrice = price
		}
	}
}

// wellFormed reports whether a decoded transaction is one the encoder can
// have written, as far as the record tells: no flag but To's, a type the
// backend knows with the fields it must have, and a v that backend.Seal
// takes. Records carry no checksum: a byte changed on the disk that still
// decodes is caught where it makes a transaction no store could hold. (A
// field a type does not have is let be: Seal does not refuse one given.)
func wellFormed(tx *backend.Transaction, flags byte) bool {
	if flags&^txFlagTo != 0 || tx.Validate() != nil {
		return false
	}
	if tx.Type == backend.LegacyTxType && legacyProtected(&tx.V) {
		return !tx.V.Lt(uint256.NewInt(35)) // 27 and 28 are not protected
	}
	return true
}

// legacyProtected reports whether a legacy v carries a chain id
// (EIP-155), as backend.Seal sees it: 27 and 28 do not.
func legacyProtected(v *uint256.Int) bool {
	return !v.IsUint64() || (v.Uint64() != 27 && v.Uint64() != 28)
}

// legacyChainID sets id to the chain id of a protected legacy v.
func legacyChainID(id, v *uint256.Int) *uint256.Int {
	id.Sub(v, uint256.NewInt(35))
	return id.Rsh(id, 1)
}

// Decode decodes a whole record: the block, with its transactions (or
// their hashes) and withdrawals, and its uncles. The values share memory
// among them, as a backend.Backend's may: nobody changes them.
func Decode(rec []byte) (*backend.Block, []*backend.Uncle, error) {
	return decode(rec, true)
}

// DecodeHeader decodes the front of a record: the block's header, hash,
// size, total difficulty and list of uncles, and the uncles, but not its
// body, for what needs no more (an uncle, a chain's links).
func DecodeHeader(rec []byte) (*backend.Block, []*backend.Uncle, error) {
	return decode(rec, false)
}

// Split decodes a record but for its transactions, which it leaves
// encoded in txs: for a store that lends the block (backend.Lender), whose
// transactions are decoded one at a time as they are written
// (Transactions.Reader). The block is Decode's without Transactions when
// it has transactions, txs holding them, and with their TransactionHashes
// when the record holds them too (Append); for a block held by its
// transaction hashes, txs is nil and the block has them.
// txs is the end of rec and refers to it (so a store may take the same end
// of another read of the record); the block refers to none of rec. A
// transaction that does not decode is found when txs is read.
func Split(rec []byte) (b *backend.Block, txs Transactions, err error) {
	return new(Splitter).Split(rec)
}

// A Splitter splits records as Split does, into memory it keeps for the
// next record: the block it returns, and what the block refers to, are
// valid until its next Split. It is for a store that splits a record at
// every read to lend its block, which the borrower is done with before
// the store lends another: a block of the latest fork then costs no
// allocation, where Split makes the block, its withdrawals and its extra
// data anew. The zero value is ready to use.
type Splitter struct {
	// The block and its header's optional values in one value, for a
	// block of the latest fork, rather than one each.
	block   backend.Block
	u256s   [2]uint256.Int // the base fee and the total difficulty
	hashes  [3]backend.Hash
	uint64s [2]uint64

	// The extra data: 32 bytes at most by the consensus rules of
	// Ethereum's mainnet; a longer one (a Clique chain's, which holds
	// signatures) is allocated.
	extra       [32]byte
	withdrawals []backend.Withdrawal
	txHashes    []backend.Hash
}

// Split is the package's Split, into s's memory.
func (s *Splitter) Split(rec []byte) (b *backend.Block, txs Transactions, err error) {
	s.block = backend.Block{}
	d := decoder{
		buf:         rec,
		u256s:       s.u256s[:0],
		hashes:      s.hashes[:0],
		uint64s:     s.uint64s[:0],
		arena:       s.extra[:0],
		prealloc:    true,
		withdrawals: s.withdrawals,
		txHashes:    s.txHashes,
	}
	if b, _, err = d.front(&s.block); err != nil {
		return nil, nil, err
	}
	hashes, hasHashes := d.body(b)
	if hasHashes {
		d.transactionHashes(b, hashes)
	}
	s.withdrawals, s.txHashes = d.withdrawals, d.txHashes
	txs = d.buf
	n, isNil := d.count(minTxBytes)
	d.sameCount(hashes, hasHashes, n, isNil)
	if isNil && d.err == nil {
		if len(d.buf) != 0 {
			d.fail()
		}
		txs = nil
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	return b, txs, nil
}

func decode(rec []byte, whole bool) (*backend.Block, []*backend.Uncle, error) {
	d := decoder{buf: rec}
	if whole {
		d.reserve(len(rec), len(rec)/512)
	}
	b, uncles, err := d.front(new(backend.Block))
	if !whole || err != nil {
		return b, uncles, err
	}
	// A decoded block has its transactions or their hashes: hashes kept
	// beside the transactions are for a lent block (Split).
	hashes, hasHashes := d.body(b)
	b.Transactions = d.transactions(b.BaseFeePerGas)
	d.sameCount(hashes, hasHashes, len(b.Transactions), b.Transactions == nil)
	switch {
	case b.Transactions == nil && hasHashes:
		d.transactionHashes(b, hashes)
	case hasHashes && d.err == nil:
		// The hashes a lent block is served with must be its
		// transactions': a changed byte in either is found here.
		for i, tx := range b.Transactions {
			if string(hashes[32*i:32*i+32]) != string(tx.Hash[:]) {
				d.fail()
				break
			}
		}
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail()
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	return b, uncles, nil
}

// front decodes the front of a record into b: the version, the block's
// header, hash, size, total difficulty and uncles.
func (d *decoder) front(b *backend.Block) (*backend.Block, []*backend.Uncle, error) {
	if v := d.byte(); v != Version {
		return nil, nil, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, v, Version)
	}
	d.header(&b.Header)
	b.Hash = d.hash()
	b.Size = d.uvarint()
	b.TotalDifficulty = d.optU256()
	n, _ := d.count(minUncleBytes)
	uncles := make([]*backend.Uncle, n)
	b.Uncles = make([]backend.Hash, n)
	for i := range uncles {
		u := new(backend.Uncle)
		d.header(&u.Header)
		u.Hash = d.hash()
		u.Size = d.uvarint()
		u.TotalDifficulty = d.optU256()
		uncles[i] = u
		b.Uncles[i] = u.Hash
	}
	return b, uncles, d.err
}

// body decodes what follows the front up to the transactions: the
// withdrawals. It skips the transaction hashes, and returns their bytes,
// which refer to the record, for the caller that keeps them
// (transactionHashes).
func (d *decoder) body(b *backend.Block) (hashes []byte, hasHashes bool) {
	if n, isNil := d.count(minWithdrawalBytes); !isNil {
		b.Withdrawals = reuse(&d.withdrawals, n)
		for i := range b.Withdrawals {
			w := &b.Withdrawals[i]
			w.Index = d.uvarint()
			w.ValidatorIndex = d.uvarint()
			w.Address = d.address()
			w.Amount = d.uvarint()
		}
	}
	n, isNil := d.count(32)
	return d.next(32 * n), !isNil
}

// sameCount fails a record that holds both transaction hashes and
// transactions, of different counts: Append writes both only for a sealed
// block, whose hashes are its transactions'. A hash-only answer of a lent
// block is written from the hashes, without reading the transactions.
func (d *decoder) sameCount(hashes []byte, hasHashes bool, txs int, txsNil bool) {
	if hasHashes && !txsNil && len(hashes)/32 != txs {
		d.fail()
	}
}

// transactionHashes sets b's TransactionHashes from the hashes body
// returned.
func (d *decoder) transactionHashes(b *backend.Block, hashes []byte) {
	b.TransactionHashes = reuse(&d.txHashes, len(hashes)/32)
	for i := range b.TransactionHashes {
		copy(b.TransactionHashes[i][:], hashes[32*i:])
	}
}

// transactions decodes the transactions at the end of a record.
func (d *decoder) transactions(baseFee *uint256.Int) []*backend.Transaction {
	n, isNil := d.count(minTxBytes)
	if isNil {
		return nil
	}
	ptrs := make([]*backend.Transaction, n)
	txs := make([]backend.Transaction, n)
	for i := range ptrs {
		ptrs[i] = &txs[i]
		d.transaction(&txs[i], baseFee)
	}
	return ptrs
}

// Decode decodes the transactions of a block whose base fee is baseFee
// (the effective gas prices follow from it). They share memory, as
// a record's decoded values do.
func (t Transactions) Decode(baseFee *uint256.Int) ([]*backend.Transaction, error) {
	d := decoder{buf: t}
	d.reserve(len(t), len(t)/512)
	txs := d.transactions(baseFee)
	if d.err == nil && len(d.buf) != 0 {
		d.fail()
	}
	return txs, d.err
}

// Reader returns a backend.TransactionDecoder of the transactions, for a
// block lent by a backend.Lender: each transaction is decoded into the
// memory of the one before, and its byte slices (the input) refer to t.
func (t Transactions) Reader(baseFee *uint256.Int) *TransactionReader {
	r := new(TransactionReader)
	r.Reset(t, baseFee)
	return r
}

// Reset makes r read t, as t.Reader(baseFee) would, keeping the memory it
// has, for a store that keeps its readers in a pool.
func (r *TransactionReader) Reset(t Transactions, baseFee *uint256.Int) {
	r.d = decoder{buf: t, borrow: true, prealloc: true, tuples: r.d.tuples[:0], keys: r.d.keys[:0]}
	r.baseFee = baseFee
	r.left, _ = r.d.count(minTxBytes)
}

// A TransactionReader decodes transactions one at a time (Reader).
type TransactionReader struct {
	d       decoder
	left    int
	baseFee *uint256.Int
	// The memory the transaction in hand refers to: its optional 256-bit
	// integers (at most five: the chain id, three prices and the blob
	// fee cap) and its recipient.
	u256s [5]uint256.Int
	to    [1]backend.Address
}

// DecodeNext implements backend.TransactionDecoder.
func (r *TransactionReader) DecodeNext(tx *backend.Transaction) (bool, error) {
	d := &r.d
	if r.left == 0 || d.err != nil {
		if d.err == nil && len(d.buf) != 0 {
			d.fail()
		}
		return false, d.err
	}
	r.left--
	d.u256s, d.addrs = r.u256s[:0], r.to[:0]
	d.tuples, d.keys = d.tuples[:0], d.keys[:0]
	*tx = backend.Transaction{}
	d.transaction(tx, r.baseFee)
	return d.err == nil, d.err
}
