package backend

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/holiman/uint256"
)

// ErrInvalidSignature is the error of Sender and Authority for a signature
// from which no public key can be recovered, or whose values a chain would
// refuse.
var ErrInvalidSignature = errors.New("invalid signature")

// secp256k1N is the order of the secp256k1 group; halfN is N/2, the
// largest s that EIP-2 allows, so that each signature has one form only.
var (
	secp256k1N = uint256.MustFromHex("0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141")
	halfN      = new(uint256.Int).Rsh(secp256k1N, 1)
)

// SigningHash returns the hash a transaction's sender signs: keccak256 of
// the transaction without its signature, as its type defines it. For a
// legacy transaction that is the RLP list (nonce, gasPrice, gas, to,
// value, input), extended with (chainId, 0, 0) under EIP-155 replay
// protection, which tx.ChainID selects (nil: none). Typed transactions
// prefix their type byte to the list of their fields up to the signature
// (EIP-2930, EIP-1559, EIP-4844, EIP-7702).
func SigningHash(tx *Transaction) Hash {
	return signingHash(tx, tx.ChainID)
}

func signingHash(tx *Transaction, chainID *uint256.Int) Hash {
	var w rlpWriter
	if tx.Type != LegacyTxType {
		w.buf = append(w.buf, tx.Type)
	}
	// The fields are the encoding's (appendSigned); a test recovers the
	// senders of real transactions of every type, which a field out of
	// place would not.
	mark := w.list()
	tx.appendSigned(&w, chainID)
	if tx.Type == LegacyTxType && chainID != nil {
		w.u256(chainID)
		w.uint64(0)
		w.uint64(0)
	}
	w.endList(mark)
	return keccak(w.buf)
}

// Sender recovers the address that signed tx from its signature (v, r, s),
// which is what a transaction's "from" must be. It ignores tx.From and
// tx.Hash.
//
// A legacy transaction's chain id is the one its v encodes (EIP-155: v =
// chainId*2 + 35 or 36; 27 or 28 without replay protection); a tx.ChainID
// that disagrees is an error. A typed transaction's v is its y-parity, and
// its s must be in the lower half of the group's order (EIP-2), as must a
// legacy transaction's with replay protection, which came after EIP-2. A
// legacy transaction without it may have s in the upper half, as blocks
// before Homestead allowed: Sender cannot tell which rules the block was
// mined under.
func Sender(tx *Transaction) (Address, error) {
	chainID, recovery, err := signatureParams(tx)
	if err != nil {
		return Address{}, err
	}
	if (tx.Type != LegacyTxType || chainID != nil) && tx.S.Gt(halfN) {
		return Address{}, fmt.Errorf("%w: s is in the upper half of the group's order", ErrInvalidSignature)
	}
	return recoverAddress(signingHash(tx, chainID), recovery, &tx.R, &tx.S)
}

// VerifySenders recovers the sender of each of b's transactions from its
// signature and checks it against the from given, which is filled in
// where it is absent (zero). A sender that differs is a *MismatchError.
// Recovery is the costly part of checking a block (Seal leaves it here),
// so a block of many transactions is recovered on every core.
func VerifySenders(b *Block) error {
	txs := b.Transactions
	workers := min(runtime.GOMAXPROCS(0), len(txs)/parallelSenders)
	if workers <= 1 {
		return verifySenders(txs, 0)
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(txs)/workers, (w+1)*len(txs)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = verifySenders(txs[lo:hi], lo)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first transaction's at fault, as one core would
		}
	}
	return nil
}

// parallelSenders is how many transactions a core is given at the least:
// below it, starting a goroutine costs more than it saves.
const parallelSenders = 8

// verifySenders does VerifySenders' work for txs, which start at index
// first of the block.
func verifySenders(txs []*Transaction, first int) error {
	for i, tx := range txs {
		from, err := Sender(tx)
		if err != nil {
			return fmt.Errorf("transaction %d: %w", first+i, err)
		}
		switch tx.From {
		case from:
		case Address{}:
			tx.From = from
		default:
			return fmt.Errorf("transaction %d: %w", first+i, &MismatchError{Field: "from", Given: tx.From.String(), Computed: from.String()})
		}
	}
	return nil
}

// signatureParams returns the chain id a transaction is signed for and the
// recovery id (0 or 1) of its signature.
func signatureParams(tx *Transaction) (chainID *uint256.Int, recovery byte, err error) {
	if tx.Type != LegacyTxType {
		if !isYParity(&tx.V) {
			return nil, 0, fmt.Errorf("%w: v %s is not a y-parity", ErrInvalidSignature, hexutil.EncodeU256(&tx.V))
		}
		if tx.ChainID == nil {
			return nil, 0, &FieldError{Field: "chainId", Err: ErrMissingField}
		}
		return tx.ChainID, byte(tx.V.Uint64()), nil
	}
	v := &tx.V
	switch {
	case v.Eq(uint256.NewInt(27)) || v.Eq(uint256.NewInt(28)):
		if tx.ChainID != nil && !tx.ChainID.IsZero() {
			return nil, 0, fmt.Errorf("%w: chainId %s given, but v %s has no replay protection", ErrInvalidSignature, hexutil.EncodeU256(tx.ChainID), hexutil.EncodeU256(v))
		}
		return nil, byte(v.Uint64() - 27), nil
	case v.Lt(uint256.NewInt(35)):
		return nil, 0, fmt.Errorf("%w: v %s is not a legacy signature value", ErrInvalidSignature, hexutil.EncodeU256(v))
	}
	id := new(uint256.Int).Sub(v, uint256.NewInt(35))
	recovery = byte(id.Uint64() & 1)
	id.Rsh(id, 1)
	if tx.ChainID != nil && !tx.ChainID.Eq(id) {
		return nil, 0, fmt.Errorf("%w: chainId %s given, but v %s is for chain %s", ErrInvalidSignature, hexutil.EncodeU256(tx.ChainID), hexutil.EncodeU256(v), hexutil.EncodeU256(id))
	}
	return id, recovery, nil
}

// AuthorizationSigningHash returns the hash an EIP-7702 authority signs:
// keccak256(0x05 || rlp([chainId, address, nonce])).
func AuthorizationSigningHash(a *SetCodeAuthorization) Hash {
	w := rlpWriter{buf: []byte{0x05}}
	mark := w.list()
	w.u256(&a.ChainID)
	w.bytes(a.Address[:])
	w.uint64(a.Nonce)
	w.endList(mark)
	return keccak(w.buf)
}

// Authority recovers the account that signed an EIP-7702 authorization:
// the account whose code the authorization sets. A chain skips an
// authorization whose signature is invalid rather than refusing the
// transaction, so an error here says nothing of the transaction.
func Authority(a *SetCodeAuthorization) (Address, error) {
	if a.YParity > 1 {
		return Address{}, fmt.Errorf("%w: yParity %d", ErrInvalidSignature, a.YParity)
	}
	if a.S.Gt(halfN) {
		return Address{}, fmt.Errorf("%w: s is in the upper half of the group's order", ErrInvalidSignature)
	}
	return recoverAddress(AuthorizationSigningHash(a), a.YParity, &a.R, &a.S)
}

// recoverAddress returns the address of the key that made the signature
// (r, s) of hash with the recovery id.
func recoverAddress(hash Hash, recovery byte, r, s *uint256.Int) (Address, error) {
	if r.IsZero() || s.IsZero() || !r.Lt(secp256k1N) || !s.Lt(secp256k1N) {
		return Address{}, fmt.Errorf("%w: r or s out of range", ErrInvalidSignature)
	}
	// The compact form is a recovery code (27 + id, for an uncompressed
	// key) and r and s as 32 bytes each.
	var sig [65]byte
	sig[0] = 27 + recovery
	r.WriteToSlice(sig[1:33])
	s.WriteToSlice(sig[33:65])
	pub, _, err := ecdsa.RecoverCompact(sig[:], hash[:])
	if err != nil {
		return Address{}, fmt.Errorf("%w: %v", ErrInvalidSignature, err)
	}
	return PublicKeyAddress(pub), nil
}

// PublicKeyAddress returns the address of a public key: the last 20 bytes
// of keccak256 of its uncompressed form without the 0x04 prefix.
func PublicKeyAddress(pub *secp256k1.PublicKey) Address {
	h := keccak(pub.SerializeUncompressed()[1:])
	var a Address
	copy(a[:], h[12:])
	return a
}
