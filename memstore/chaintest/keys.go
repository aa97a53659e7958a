package chaintest

import (
	"fmt"
	"sync"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/holiman/uint256"
	"golang.org/x/crypto/sha3"
)

// PrivateKey is a secp256k1 key that signs the builder's transactions.
// Test keys are public by construction: never hold value with them.
type PrivateKey struct {
	key     *secp256k1.PrivateKey
	address backend.Address
}

// keys caches the keys made so far: deriving one costs a scalar
// multiplication, and a chain of many blocks asks for the same few keys
// for every transaction.
var keys sync.Map // int -> *PrivateKey

// Key returns the i'th test key, the same in every run and every chain:
// its secret is keccak256 of "blockrpc chaintest key <i>", so a test can
// name the account that sent a transaction without asking the builder.
func Key(i int) *PrivateKey {
	if k, ok := keys.Load(i); ok {
		return k.(*PrivateKey)
	}
	h := sha3.NewLegacyKeccak256()
	fmt.Fprintf(h, "blockrpc chaintest key %d", i)
	k := NewPrivateKey(h.Sum(nil))
	actual, _ := keys.LoadOrStore(i, k)
	return actual.(*PrivateKey)
}

// NewPrivateKey returns the key with the given 32-byte big-endian secret.
// A secret of zero or past the group's order is reduced modulo the order,
// which a test key has no reason to care about.
func NewPrivateKey(secret []byte) *PrivateKey {
	key := secp256k1.PrivKeyFromBytes(secret)
	return &PrivateKey{key: key, address: backend.PublicKeyAddress(key.PubKey())}
}

// Address returns the account address of the key.
func (k *PrivateKey) Address() backend.Address { return k.address }

// Bytes returns the 32-byte secret, for handing the key to another
// library (a go-ethereum signer, a wallet under test).
func (k *PrivateKey) Bytes() []byte {
	b := k.key.Key.Bytes()
	return b[:]
}

// sign returns the recovery id (0 or 1), r and s of a signature of hash.
func (k *PrivateKey) sign(hash backend.Hash) (recovery uint8, r, s uint256.Int) {
	sig := ecdsa.SignCompact(k.key, hash[:], false)
	recovery = sig[0] - 27
	if recovery > 1 {
		// The point's x coordinate overflowed the group order: a chance
		// of about 2^-128, and a form Ethereum's v cannot carry.
		panic(fmt.Sprintf("chaintest: signature with recovery id %d", recovery))
	}
	r.SetBytes(sig[1:33])
	s.SetBytes(sig[33:65])
	return recovery, r, s
}

// SignTx signs tx as a wallet does, for the chain tx.ChainID names (for a
// legacy transaction, nil signs without EIP-155 replay protection): it sets
// V, R and S, and From to the key's address. The signature is
// deterministic (RFC 6979), so the same transaction always gets the same
// hash.
func (k *PrivateKey) SignTx(tx *backend.Transaction) {
	recovery, r, s := k.sign(backend.SigningHash(tx))
	tx.R, tx.S = r, s
	switch {
	case tx.Type != backend.LegacyTxType:
		tx.V.SetUint64(uint64(recovery))
	case tx.ChainID == nil:
		tx.V.SetUint64(27 + uint64(recovery))
	default:
		tx.V.Lsh(tx.ChainID, 1)
		tx.V.AddUint64(&tx.V, 35+uint64(recovery))
	}
	tx.From = k.address
}

// SignAuthorization returns a signed with the key: the EIP-7702
// authorization, by this key's account, to run the code at a.Address.
func (k *PrivateKey) SignAuthorization(a backend.SetCodeAuthorization) backend.SetCodeAuthorization {
	a.YParity, a.R, a.S = k.sign(backend.AuthorizationSigningHash(&a))
	return a
}
