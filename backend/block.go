package backend

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
)

// Block is a block as the service answers for it: the header, the values
// derived from it, and the body.
//
// A Backend may return the same *Block to many callers at once; nobody
// modifies a Block after handing it over.
type Block struct {
	Header
	Hash Hash   // keccak256 of the header's RLP encoding
	Size uint64 // length of the block's RLP encoding
	// TotalDifficulty is the sum of the difficulty of every block from the
	// genesis to this one, or nil when it cannot be known (a block held
	// without its ancestry).
	TotalDifficulty *uint256.Int

	// Transactions holds the transactions with their bodies. A block known
	// only by its transaction hashes (a pruned or header-only store) has
	// TransactionHashes instead, and can only be served without details.
	Transactions      []*Transaction
	TransactionHashes []Hash

	Uncles      []Hash       // hashes of the uncle (ommer) headers
	Withdrawals []Withdrawal // nil before Shanghai

	// Pending marks the block being built on top of the head. It is served
	// with a null hash, nonce, logsBloom and number, and its transactions
	// with a null blockHash and blockNumber.
	Pending bool
}

// HasTransactionBodies reports whether the block's transactions can be
// served in full, which a block known only by transaction hashes cannot.
func (b *Block) HasTransactionBodies() bool {
	return b.Transactions != nil || len(b.TransactionHashes) == 0
}

// TxCount returns the number of transactions in the block.
func (b *Block) TxCount() int {
	if b.Transactions != nil {
		return len(b.Transactions)
	}
	return len(b.TransactionHashes)
}

// TransactionHashes returns the hash of each transaction: what a block
// known only by its transaction hashes holds in their place. For no
// transactions it returns an empty slice, not nil.
func TransactionHashes(txs []*Transaction) []Hash {
	hashes := make([]Hash, len(txs))
	for i, tx := range txs {
		hashes[i] = tx.Hash
	}
	return hashes
}

// BlockSize returns the length of a block's RLP encoding: the header, the
// transactions, the uncle headers and, from Shanghai on (when the header has
// a withdrawals root), the withdrawals. This is the block's "size".
func BlockSize(h *Header, txs []*Transaction, uncles []*Header, withdrawals []Withdrawal) uint64 {
	return blockSize(h, txs, uncles, withdrawals, h.WithdrawalsRoot != nil)
}

func blockSize(h *Header, txs []*Transaction, uncles []*Header, withdrawals []Withdrawal, withWithdrawals bool) uint64 {
	var w rlpWriter
	mark := w.list()
	h.appendRLP(&w)
	list := w.list()
	for _, tx := range txs {
		if tx.Type == LegacyTxType {
			tx.appendEncoding(&w)
			continue
		}
		// A typed transaction sits in the block as a byte string.
		var enc rlpWriter
		tx.appendEncoding(&enc)
		w.bytes(enc.buf)
	}
	w.endList(list)
	list = w.list()
	for _, u := range uncles {
		u.appendRLP(&w)
	}
	w.endList(list)
	if withWithdrawals {
		list = w.list()
		for i := range withdrawals {
			withdrawals[i].appendRLP(&w)
		}
		w.endList(list)
	}
	w.endList(mark)
	return uint64(len(w.buf))
}

// Copy returns a deep copy of b, nil for nil.
func (b *Block) Copy() *Block {
	if b == nil {
		return nil
	}
	c := *b
	c.Header = b.Header.Copy()
	c.TotalDifficulty = copyPtr(b.TotalDifficulty)
	if b.Transactions != nil {
		c.Transactions = make([]*Transaction, len(b.Transactions))
		for i, tx := range b.Transactions {
			c.Transactions[i] = tx.Copy()
		}
	}
	c.TransactionHashes = slices.Clone(b.TransactionHashes)
	c.Uncles = slices.Clone(b.Uncles)
	c.Withdrawals = slices.Clone(b.Withdrawals)
	return &c
}

// AppendJSON appends the block object that eth_getBlockByNumber answers:
// with transaction objects when fullTx is set and the bodies are known, and
// transaction hashes otherwise.
func (b *Block) AppendJSON(dst []byte, fullTx bool) []byte {
	dst, _ = b.AppendLentJSON(dst, fullTx, nil)
	return dst
}

// AppendLentJSON appends the block object of a block that a Lender lent,
// with its transactions decoded from txs one at a time: what AppendJSON
// writes for the block with its Transactions filled in. A nil txs is a
// block that holds its transactions itself, and AppendJSON's answer. The
// error is txs's, or a *MismatchError for a transaction whose hash is not
// the one the block's TransactionHashes give for it; dst then holds part
// of an object.
func (b *Block) AppendLentJSON(dst []byte, fullTx bool, txs TransactionDecoder) ([]byte, error) {
	if b.Transactions != nil {
		txs = nil
	}
	p := objectParts{
		hash:    b.Hash,
		size:    b.Size,
		td:      b.TotalDifficulty,
		pending: b.Pending,
		block:   b,
		fullTx:  fullTx && (b.Transactions != nil || txs != nil),
		txs:     txs,
	}
	dst = b.Header.appendObject(dst, &p)
	return dst, p.err
}

// MarshalJSON implements json.Marshaler: transaction objects when the block
// holds them, hashes when it holds only hashes. Its receiver is a value so
// that a Block marshals alike by value, by pointer and as a struct field.
func (b Block) MarshalJSON() ([]byte, error) {
	return b.AppendJSON(nil, true), nil
}

// lentMismatch checks lent transaction i (tx, or the end of them when
// more is false) against hashes, the TransactionHashes of its block, and
// returns a *MismatchError where they disagree: served without details,
// the block names other transactions than these, a damaged record. Nil
// hashes check nothing.
func lentMismatch(hashes []Hash, i int, tx *Transaction, more bool) error {
	switch {
	case hashes == nil:
		return nil
	case !more && i != len(hashes):
		return &MismatchError{Field: "transactions", Given: fmt.Sprintf("%d transactions", i), Computed: fmt.Sprintf("%d (the block's transactionHashes)", len(hashes))}
	case more && i >= len(hashes):
		return &MismatchError{Field: fmt.Sprintf("transactions[%d].hash", i), Given: tx.Hash.String(), Computed: fmt.Sprintf("none (the block has %d transactions)", len(hashes))}
	case more && tx.Hash != hashes[i]:
		return &MismatchError{Field: fmt.Sprintf("transactions[%d].hash", i), Given: tx.Hash.String(), Computed: hashes[i].String() + " (the block's transactionHashes)"}
	}
	return nil
}

// CheckedTransactions returns txs, the transactions of lent block b, made
// to fail as Block.AppendLentJSON does when b also has TransactionHashes:
// a transaction whose hash is not the one they give for it, or more or
// fewer transactions, is a *MismatchError. It is for a caller that
// decodes a lent block's transactions itself.
func CheckedTransactions(b *Block, txs TransactionDecoder) TransactionDecoder {
	if b.TransactionHashes == nil || txs == nil {
		return txs
	}
	return &checkedTransactions{hashes: b.TransactionHashes, txs: txs}
}

type checkedTransactions struct {
	hashes []Hash
	txs    TransactionDecoder
	next   int
}

func (c *checkedTransactions) DecodeNext(tx *Transaction) (bool, error) {
	more, err := c.txs.DecodeNext(tx)
	if err == nil {
		err = lentMismatch(c.hashes, c.next, tx, more)
	}
	if err != nil {
		return false, err
	}
	c.next++
	return more, nil
}

func (b *Block) appendTransactions(dst []byte, p *objectParts) []byte {
	dst = append(dst, `"transactions":[`...)
	pos := txPosition{
		blockHash:      b.Hash,
		blockNumber:    b.Number,
		blockTimestamp: b.Timestamp,
		pending:        p.pending,
		baseFee:        b.BaseFeePerGas,
	}
	switch {
	case p.txs != nil && (p.fullTx || b.TransactionHashes == nil):
		var tx Transaction
		for {
			more, err := p.txs.DecodeNext(&tx)
			if err == nil {
				err = lentMismatch(b.TransactionHashes, int(pos.index), &tx, more)
			}
			if err != nil || !more {
				p.err = err
				break
			}
			if p.fullTx {
				dst = tx.appendObject(dst, &pos)
			} else {
				dst = appendHashString(dst, &tx.Hash)
			}
			dst = append(dst, ',')
			pos.index++
		}
		return closeArray(dst, int(pos.index))
	case p.fullTx:
		for i, tx := range b.Transactions {
			pos.index = uint64(i)
			dst = append(tx.appendObject(dst, &pos), ',')
		}
	case b.Transactions != nil:
		for _, tx := range b.Transactions {
			dst = append(appendHashString(dst, &tx.Hash), ',')
		}
	default:
		for i := range b.TransactionHashes {
			dst = append(appendHashString(dst, &b.TransactionHashes[i]), ',')
		}
	}
	return closeArray(dst, b.TxCount())
}

func (b *Block) appendUncles(dst []byte) []byte {
	dst = append(dst, `"uncles":[`...)
	for i := range b.Uncles {
		dst = append(appendHashString(dst, &b.Uncles[i]), ',')
	}
	return closeArray(dst, len(b.Uncles))
}

func (b *Block) appendWithdrawals(dst []byte) []byte {
	dst = append(dst, `"withdrawals":[`...)
	for i := range b.Withdrawals {
		dst = append(b.Withdrawals[i].appendObject(dst), ',')
	}
	return closeArray(dst, len(b.Withdrawals))
}

// blockJSON is a block object as decoded, before it is checked.
type blockJSON struct {
	headerJSON
	Transactions []json.RawMessage `json:"transactions"`
	Uncles       []Hash            `json:"uncles"`
	Withdrawals  []Withdrawal      `json:"withdrawals"`
}

// errWithdrawalsWithoutRoot is for a block object listing withdrawals
// without the withdrawalsRoot of a Shanghai header to commit to them.
var errWithdrawalsWithoutRoot = errors.New("given without withdrawalsRoot")

// UnmarshalJSON reads a block object as eth_getBlockByNumber answers it,
// with transaction objects or hashes. Absent hash, size and roots are left
// zero; a totalDifficulty of null is nil. The values a block repeats (its
// position, in each transaction object) must agree with it; checking the
// derived values against the contents is left to the caller, with the
// functions of this package.
func (b *Block) UnmarshalJSON(input []byte) error {
	var d blockJSON
	if err := json.Unmarshal(input, &d); err != nil {
		return err
	}
	if err := d.check(); err != nil {
		return err
	}
	out := d.block()
	if err := out.decodeTransactions(d.Transactions, d.Hash != nil); err != nil {
		return err
	}
	*b = out
	return nil
}

// check reports the first required member that is absent or wrong, but
// for the transactions, which are checked as they are decoded.
func (d *blockJSON) check() error {
	if err := d.headerJSON.check("block"); err != nil {
		return err
	}
	switch {
	case d.Transactions == nil:
		return &FieldError{Object: "block", Field: "transactions", Err: ErrMissingField}
	case d.Withdrawals != nil && d.WithdrawalsRoot == nil:
		return &FieldError{Object: "block", Field: "withdrawals", Err: errWithdrawalsWithoutRoot}
	}
	return nil
}

// block returns the block of an object that check has passed, without its
// transactions. The pending block's hash is not kept: it is served null.
func (d *blockJSON) block() Block {
	b := Block{Header: d.header(), Pending: d.pending(), Uncles: d.Uncles, Withdrawals: d.Withdrawals}
	hash, size, td := d.derived()
	if !b.Pending {
		b.Hash = hash
	}
	b.Size, b.TotalDifficulty = size, td
	return b
}

// decodeTransactions reads the transactions member: all hashes or all
// objects. Each object's block members, where given, must be the block's.
func (b *Block) decodeTransactions(raw []json.RawMessage, hashGiven bool) error {
	if len(raw) == 0 {
		return nil
	}
	if raw[0][0] == '"' {
		b.TransactionHashes = make([]Hash, len(raw))
		for i, r := range raw {
			if err := b.TransactionHashes[i].UnmarshalJSON(r); err != nil {
				return &FieldError{Object: "block", Field: fmt.Sprintf("transactions[%d]", i), Err: err}
			}
		}
		return nil
	}
	b.Transactions = make([]*Transaction, len(raw))
	for i, r := range raw {
		object := fmt.Sprintf("transaction %d", i)
		tx, pos, err := decodeTransaction(r, object)
		if err != nil {
			return err
		}
		if err := b.checkPosition(pos, uint64(i), hashGiven, object); err != nil {
			return err
		}
		b.Transactions[i] = tx
	}
	return nil
}

// checkPosition compares the block members of a transaction object with the
// block. A block without a hash member takes the hash its transactions give,
// so that the caller checks it against the header like any given hash.
func (b *Block) checkPosition(pos *positionJSON, index uint64, hashGiven bool, object string) error {
	mismatch := func(field, got, want string) error {
		return &FieldError{Object: object, Field: field, Err: fmt.Errorf("%s, but the block's is %s", got, want)}
	}
	if pos.BlockHash != nil && !b.Pending {
		if !hashGiven && b.Hash == (Hash{}) {
			b.Hash = *pos.BlockHash
		}
		if *pos.BlockHash != b.Hash {
			return mismatch("blockHash", pos.BlockHash.String(), b.Hash.String())
		}
	}
	if pos.BlockNumber != nil && !b.Pending && uint64(*pos.BlockNumber) != b.Number {
		return mismatch("blockNumber", pos.BlockNumber.String(), hexutil.EncodeUint64(b.Number))
	}
	if pos.BlockTimestamp != nil && uint64(*pos.BlockTimestamp) != b.Timestamp {
		return mismatch("blockTimestamp", pos.BlockTimestamp.String(), hexutil.EncodeUint64(b.Timestamp))
	}
	if pos.TransactionIndex != nil && uint64(*pos.TransactionIndex) != index {
		return mismatch("transactionIndex", pos.TransactionIndex.String(), hexutil.EncodeUint64(index))
	}
	return nil
}

// SignedChainID returns the chain id that b's transactions are signed for,
// or nil when none says (no transactions, or only legacy ones without
// replay protection). They must all agree, and it must fit in 64 bits.
// Legacy transactions say it through ChainID, which Seal fills in from v;
// one of chain id 0 (v of 35 or 36) says none, as go-ethereum, which
// serves it without a chainId, takes it.
func (b *Block) SignedChainID() (*uint256.Int, error) {
	var id *uint256.Int
	for i, tx := range b.Transactions {
		switch {
		case tx.ChainID == nil, legacyChainZero(tx):
		case id == nil:
			id = tx.ChainID
		case !id.Eq(tx.ChainID):
			return nil, fmt.Errorf("transaction %d: %w", i, &MismatchError{Field: "chainId", Given: hexutil.EncodeU256(tx.ChainID), Computed: hexutil.EncodeU256(id) + " (of an earlier transaction)"})
		}
	}
	if id != nil && !id.IsUint64() {
		return nil, fmt.Errorf("chainId %s does not fit in 64 bits", hexutil.EncodeU256(id))
	}
	return id, nil
}
