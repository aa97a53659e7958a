package backend

import (
	"errors"
	"fmt"
	"math"

	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/holiman/uint256"
)

// MismatchError reports a value that the contents of a block determine and
// that was given with a different value.
type MismatchError struct {
	Field           string // the JSON key, e.g. "size" or "transactionsRoot"
	Given, Computed string // both in their hex form
}

// Error names the field and both values.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s: given %s, computed %s", e.Field, e.Given, e.Computed)
}

// missing returns the error for a field that is needed and can be neither
// given implicitly nor computed, saying why it is needed.
func missing(field, why string) error {
	return &FieldError{Field: field, Err: fmt.Errorf("%w: %s", ErrMissingField, why)}
}

// What a Writer is given as nil, where a block, an uncle or a transaction
// belongs.
var (
	errNoBlock = errors.New("nil given for the block")
	errNil     = errors.New("nil")
)

// invalid returns the error for a field whose value the store cannot take.
func invalid(field string, err error) error {
	return &FieldError{Field: field, Err: err}
}

// SealCopies returns sealed copies of a block and its uncles, to be
// stored, and the chain id the block's transactions are signed for (nil
// when none tells): what a Writer's AddBlock checks. The callers' values
// are not changed. On an error the block's copy is returned too, to name
// the block.
func SealCopies(block *Block, uncles []*Uncle) (*Block, []*Uncle, *uint256.Int, error) {
	if block == nil {
		return &Block{}, nil, nil, errNoBlock
	}
	b, us := block.Copy(), make([]*Uncle, len(uncles))
	for i, u := range uncles {
		us[i] = u.Copy()
	}
	if err := Seal(b, us); err != nil {
		return b, nil, nil, err
	}
	id, err := b.SignedChainID()
	return b, us, id, err
}

// SealPending returns a sealed copy of a block to be served as pending,
// and the chain id its transactions are signed for (nil when none tells):
// what a Writer's SetPending checks. The copy is sealed as Seal seals a
// block, not pending, and then marked pending, whose hash and number are
// only hidden when it is served. On an error the copy is returned too, to
// name the block.
func SealPending(block *Block) (*Block, *uint256.Int, error) {
	if block == nil {
		return &Block{}, nil, errNoBlock
	}
	b := block.Copy()
	b.Pending = false
	if err := Seal(b, nil); err != nil {
		return b, nil, err
	}
	b.Pending = true
	id, err := b.SignedChainID()
	return b, id, err
}

// Seal fills in the values that the contents of b and its uncles determine
// where they are absent (zero), and checks those that are given: the
// hashes of the block, its transactions and uncles, the transactions,
// uncles and withdrawals roots, the sizes and each dynamic-fee
// transaction's gasPrice. Every transaction is checked with Validate. It
// writes to b and uncles, so a caller that must keep what it was given
// seals copies. A value given wrong is a *MismatchError, a missing or
// invalid one a *FieldError.
//
// The sender of a transaction is not recovered here, which is costly: it
// must be given (from). VerifySenders checks it against the signature.
func Seal(b *Block, uncles []*Uncle) error {
	if b.Number > math.MaxInt64 {
		// The wire reads block numbers as int64: such a block could never
		// be asked for by number.
		return invalid("number", fmt.Errorf("%d is above the int64 range of block numbers", b.Number))
	}
	uncleHeaders := make([]*Header, len(uncles))
	for i, u := range uncles {
		if u == nil {
			return &FieldError{Object: fmt.Sprintf("uncle %d", i), Err: errNil}
		}
		if err := sealUncle(u); err != nil {
			return fmt.Errorf("uncle %d: %w", i, err)
		}
		uncleHeaders[i] = &u.Header
	}
	if err := matchUncles(b, uncles); err != nil {
		return err
	}
	if err := fillHash("sha3Uncles", &b.Sha3Uncles, UnclesHash(uncleHeaders)); err != nil {
		return err
	}
	if err := sealTransactions(b); err != nil {
		return err
	}
	if err := sealWithdrawals(b); err != nil {
		return err
	}
	if err := fillHash("hash", &b.Hash, HeaderHash(&b.Header)); err != nil {
		return err
	}
	if !b.HasTransactionBodies() {
		// The size counts the transactions' encodings, which only the
		// bodies give: a block known by transaction hashes must carry it.
		if b.Size == 0 {
			return missing("size", "a block without transaction bodies must give its size")
		}
		return nil
	}
	return fillUint64("size", &b.Size, BlockSize(&b.Header, b.Transactions, uncleHeaders, b.Withdrawals))
}

func sealUncle(u *Uncle) error {
	if err := fillHash("hash", &u.Hash, HeaderHash(&u.Header)); err != nil {
		return err
	}
	return fillUint64("size", &u.Size, UncleSize(&u.Header))
}

// matchUncles checks the block's list of uncle hashes against the uncle
// headers given with it, or fills it in from them.
func matchUncles(b *Block, uncles []*Uncle) error {
	if len(b.Uncles) == 0 {
		b.Uncles = make([]Hash, len(uncles))
		for i, u := range uncles {
			b.Uncles[i] = u.Hash
		}
		return nil
	}
	for i, h := range b.Uncles {
		if i >= len(uncles) {
			return missing(fmt.Sprintf("uncles[%d]", i), "no header given for uncle "+h.String())
		}
		if uncles[i].Hash != h {
			return &MismatchError{Field: fmt.Sprintf("uncles[%d]", i), Given: h.String(), Computed: uncles[i].Hash.String()}
		}
	}
	if len(uncles) > len(b.Uncles) {
		return invalid("uncles", fmt.Errorf("%d headers given for %d uncles listed", len(uncles), len(b.Uncles)))
	}
	return nil
}

func sealTransactions(b *Block) error {
	if !b.HasTransactionBodies() {
		if b.TransactionsRoot == (Hash{}) {
			return missing("transactionsRoot", "a block without transaction bodies must give it")
		}
		return nil
	}
	for i, tx := range b.Transactions {
		if tx == nil {
			return &FieldError{Object: fmt.Sprintf("transaction %d", i), Err: errNil}
		}
		if err := sealTransaction(tx, b.BaseFeePerGas); err != nil {
			return fmt.Errorf("transaction %d: %w", i, err)
		}
	}
	// Hashes given beside full bodies must be theirs; the bodies then
	// serve both forms.
	if len(b.TransactionHashes) > 0 {
		if len(b.TransactionHashes) != len(b.Transactions) {
			return invalid("transactions", fmt.Errorf("%d hashes given for %d transactions", len(b.TransactionHashes), len(b.Transactions)))
		}
		for i, h := range b.TransactionHashes {
			if h != b.Transactions[i].Hash {
				return &MismatchError{Field: fmt.Sprintf("transactions[%d]", i), Given: h.String(), Computed: b.Transactions[i].Hash.String()}
			}
		}
		b.TransactionHashes = nil
	}
	return fillHash("transactionsRoot", &b.TransactionsRoot, TransactionsRoot(b.Transactions))
}

// sealTransaction checks a transaction as backend validates any, and fills
// in or checks what its contents determine. The sender is the exception: it
// is not recovered from the signature here, so it must be given.
func sealTransaction(tx *Transaction, baseFee *uint256.Int) error {
	if tx.From == (Address{}) {
		return missing("from", "the sender is not recovered here and must be given")
	}
	if err := tx.Validate(); err != nil {
		return err
	}
	if tx.Type == LegacyTxType {
		if err := fillLegacyChainID(tx); err != nil {
			return err
		}
	}
	if tx.Type >= DynamicFeeTxType {
		if baseFee == nil {
			return invalid("type", fmt.Errorf("a type %d transaction needs a block with baseFeePerGas", tx.Type))
		}
		price, _ := tx.EffectiveGasPrice(baseFee)
		if err := fillU256("gasPrice", &tx.GasPrice, &price); err != nil {
			return err
		}
	}
	return fillHash("hash", &tx.Hash, TransactionHash(tx))
}

// fillLegacyChainID derives the chain id of a legacy transaction from its v
// (EIP-155: v = chainId*2 + 35 or 36); one without replay protection (v of
// 27 or 28) has none.
func fillLegacyChainID(tx *Transaction) error {
	var derived *uint256.Int
	switch {
	case tx.V.Eq(uint256.NewInt(27)) || tx.V.Eq(uint256.NewInt(28)):
	case tx.V.Lt(uint256.NewInt(35)):
		return invalid("v", fmt.Errorf("%s is not a legacy signature value", hexutil.EncodeU256(&tx.V)))
	default:
		derived = new(uint256.Int).Sub(&tx.V, uint256.NewInt(35))
		derived.Rsh(derived, 1)
	}
	switch {
	case tx.ChainID == nil:
		tx.ChainID = derived
	case derived == nil && tx.ChainID.IsZero():
		// The chain id go-ethereum derives for v 27 or 28 (ChainId()
		// is 0), which some nodes write out: none.
		tx.ChainID = nil
	case derived == nil:
		return &MismatchError{Field: "chainId", Given: hexutil.EncodeU256(tx.ChainID), Computed: "none (v is " + hexutil.EncodeU256(&tx.V) + ")"}
	case !tx.ChainID.Eq(derived):
		return &MismatchError{Field: "chainId", Given: hexutil.EncodeU256(tx.ChainID), Computed: hexutil.EncodeU256(derived)}
	}
	return nil
}

func sealWithdrawals(b *Block) error {
	if b.WithdrawalsRoot == nil && b.Withdrawals == nil {
		return nil // before Shanghai
	}
	if b.Withdrawals == nil {
		b.Withdrawals = []Withdrawal{}
	}
	root := WithdrawalsRoot(b.Withdrawals)
	if b.WithdrawalsRoot == nil {
		b.WithdrawalsRoot = &root
		return nil
	}
	return fillHash("withdrawalsRoot", b.WithdrawalsRoot, root)
}

func fillHash(field string, given *Hash, computed Hash) error {
	if *given == (Hash{}) {
		*given = computed
		return nil
	}
	if *given != computed {
		return &MismatchError{Field: field, Given: given.String(), Computed: computed.String()}
	}
	return nil
}

func fillUint64(field string, given *uint64, computed uint64) error {
	if *given == 0 {
		*given = computed
		return nil
	}
	if *given != computed {
		return &MismatchError{Field: field, Given: hexutil.EncodeUint64(*given), Computed: hexutil.EncodeUint64(computed)}
	}
	return nil
}

func fillU256(field string, given **uint256.Int, computed *uint256.Int) error {
	if *given == nil {
		*given = new(uint256.Int).Set(computed)
		return nil
	}
	if !(*given).Eq(computed) {
		return &MismatchError{Field: field, Given: hexutil.EncodeU256(*given), Computed: hexutil.EncodeU256(computed)}
	}
	return nil
}

// SettleTotalDifficulty sets *td to parentTD+difficulty when it is nil, and
// checks it against that sum when it is given: a block's total difficulty
// is its parent's plus its own difficulty. Without the parent's (nil) there
// is nothing to settle. A sum past 2^256-1, which a quantity cannot
// carry, is an error. The field names the value in the error.
func SettleTotalDifficulty(field string, td **uint256.Int, parentTD, difficulty *uint256.Int) error {
	if parentTD == nil {
		return nil
	}
	computed, err := addTotalDifficulty(parentTD, difficulty)
	if err != nil {
		return &FieldError{Field: field, Err: err}
	}
	return fillU256(field, td, computed)
}

// addTotalDifficulty returns parentTD+difficulty, or an error when the sum
// does not fit in 256 bits: wrapped round, it would be served as a small
// total.
func addTotalDifficulty(parentTD, difficulty *uint256.Int) (*uint256.Int, error) {
	sum, overflow := new(uint256.Int).AddOverflow(parentTD, difficulty)
	if overflow {
		return nil, fmt.Errorf("the parent's total difficulty %s plus the difficulty %s is past 2^256-1", hexutil.EncodeU256(parentTD), hexutil.EncodeU256(difficulty))
	}
	return sum, nil
}
