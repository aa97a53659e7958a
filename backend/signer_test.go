package backend_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/holiman/uint256"
)

// senderCounts counts the transactions whose sender was recovered, by
// type, with the legacy ones split by replay protection.
type senderCounts map[string]int

func (c senderCounts) note(tx *backend.Transaction) {
	switch {
	case tx.Type != backend.LegacyTxType:
		c[fmt.Sprintf("type %d", tx.Type)]++
	case tx.ChainID == nil:
		c["legacy without EIP-155"]++
	default:
		c["legacy EIP-155"]++
	}
}

// wantSenders recovers the sender of each transaction of b and compares it
// with the "from" the serving client gave.
func wantSenders(t *testing.T, b *backend.Block, counts senderCounts) {
	t.Helper()
	for i, tx := range b.Transactions {
		got, err := backend.Sender(tx)
		if err != nil {
			t.Errorf("block %d transaction %d (%s, type %d): %v", b.Number, i, tx.Hash, tx.Type, err)
			continue
		}
		if got != tx.From {
			t.Errorf("block %d transaction %d (%s, type %d): Sender = %s, want from %s", b.Number, i, tx.Hash, tx.Type, got, tx.From)
			continue
		}
		counts.note(tx)
	}
}

// TestSenderOfRealTransactions recovers the sender of every transaction of
// the fixtures that carry transaction objects, go-ethereum's answers and a
// production client's, and compares it with their "from".
func TestSenderOfRealTransactions(t *testing.T) {
	counts := make(senderCounts)
	dir := fixtures.Path(t, "execution-apis")
	for _, path := range append(glob(t, filepath.Join(dir, "eth_getBlockByNumber", "*.io")),
		glob(t, filepath.Join(dir, "eth_getBlockByHash", "*.io"))...) {
		c := readIOCase(t, path)
		if isNull(c.result) || !c.fullTx {
			continue
		}
		var b backend.Block
		if err := json.Unmarshal(c.result, &b); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		wantSenders(t, &b, counts)
	}
	for _, path := range glob(t, filepath.Join(fixtures.Path(t, "mainnet"), "*", "*.json")) {
		for _, c := range readMainnetCases(t, path) {
			if isNull(c.Response.Result) {
				continue
			}
			var b backend.Block
			if err := json.Unmarshal(c.Response.Result, &b); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			wantSenders(t, &b, counts)
		}
	}
	t.Logf("senders recovered: %v", counts)
	// These fixtures hold legacy and dynamic-fee transactions; the other
	// types are recovered from the execution-apis chain's RLP, by
	// TestSenderOfChainRLP.
	for _, kind := range []string{"legacy EIP-155", "legacy without EIP-155", "type 2"} {
		if counts[kind] == 0 {
			t.Errorf("no %s transaction in the fixtures: the fixtures look incomplete", kind)
		}
	}
}

// testKey is a fixed private key for the tests that sign.
func testKey(seed byte) *secp256k1.PrivateKey {
	var b [32]byte
	for i := range b {
		b[i] = seed + byte(i)
	}
	return secp256k1.PrivKeyFromBytes(b[:])
}

// sign signs tx with key as a wallet does, setting v, r and s.
func sign(t *testing.T, tx *backend.Transaction, key *secp256k1.PrivateKey) {
	t.Helper()
	h := backend.SigningHash(tx)
	sig := ecdsa.SignCompact(key, h[:], false)
	recovery := uint64(sig[0] - 27)
	tx.R.SetBytes(sig[1:33])
	tx.S.SetBytes(sig[33:65])
	switch {
	case tx.Type != backend.LegacyTxType:
		tx.V.SetUint64(recovery)
	case tx.ChainID == nil:
		tx.V.SetUint64(27 + recovery)
	default:
		tx.V.Mul(tx.ChainID, uint256.NewInt(2))
		tx.V.AddUint64(&tx.V, 35+recovery)
	}
}

func unsignedTransactions() map[string]*backend.Transaction {
	to := backend.Address{0xaa}
	chain := uint256.NewInt(1337)
	list := []backend.AccessTuple{{Address: backend.Address{0xbb}, StorageKeys: []backend.Hash{{0x01}}}}
	return map[string]*backend.Transaction{
		"legacy":          {Type: backend.LegacyTxType, Nonce: 1, GasPrice: uint256.NewInt(7), Gas: 21000, To: &to, Value: *uint256.NewInt(5)},
		"legacy EIP-155":  {Type: backend.LegacyTxType, ChainID: chain, Nonce: 2, GasPrice: uint256.NewInt(7), Gas: 21000, To: &to},
		"legacy creation": {Type: backend.LegacyTxType, ChainID: chain, Nonce: 3, GasPrice: uint256.NewInt(7), Gas: 90000, Input: []byte{0x60, 0x00}},
		"access list":     {Type: backend.AccessListTxType, ChainID: chain, Nonce: 4, GasPrice: uint256.NewInt(7), Gas: 30000, To: &to, AccessList: list},
		"dynamic fee":     {Type: backend.DynamicFeeTxType, ChainID: chain, Nonce: 5, MaxFeePerGas: uint256.NewInt(9), MaxPriorityFeePerGas: uint256.NewInt(1), Gas: 21000, To: &to},
		"blob": {Type: backend.BlobTxType, ChainID: chain, Nonce: 6, MaxFeePerGas: uint256.NewInt(9), MaxPriorityFeePerGas: uint256.NewInt(1), Gas: 21000, To: &to,
			MaxFeePerBlobGas: uint256.NewInt(3), BlobVersionedHashes: []backend.Hash{{0x01, 0x02}}},
		"set code": {Type: backend.SetCodeTxType, ChainID: chain, Nonce: 7, MaxFeePerGas: uint256.NewInt(9), MaxPriorityFeePerGas: uint256.NewInt(1), Gas: 50000, To: &to,
			AuthorizationList: []backend.SetCodeAuthorization{{ChainID: *chain, Address: backend.Address{0xcc}, Nonce: 1}}},
	}
}

// TestSenderRoundTrip signs a transaction of each type and recovers the
// signer, and checks that what the signature covers is bound to it.
func TestSenderRoundTrip(t *testing.T) {
	key := testKey(1)
	want := backend.PublicKeyAddress(key.PubKey())
	for name, tx := range unsignedTransactions() {
		t.Run(name, func(t *testing.T) {
			sign(t, tx, key)
			got, err := backend.Sender(tx)
			if err != nil || got != want {
				t.Fatalf("Sender = %s, %v; want %s", got, err, want)
			}
			// Any signed field changed gives another signer (or none).
			changed := tx.Copy()
			changed.Nonce++
			if got, err := backend.Sender(changed); err == nil && got == want {
				t.Errorf("Sender of the transaction with another nonce is still the signer")
			}
		})
	}
}

func TestSenderRefusesInvalidSignatures(t *testing.T) {
	key := testKey(2)
	txs := unsignedTransactions()
	legacy, typed, unprotected := txs["legacy EIP-155"], txs["dynamic fee"], txs["legacy"]
	sign(t, legacy, key)
	sign(t, typed, key)
	sign(t, unprotected, key)
	// The other form of a signature: s in the upper half, the recovery
	// id the other one.
	n := uint256.MustFromHex("0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141")
	otherForm := func(tx *backend.Transaction) {
		tx.S.Sub(n, &tx.S)
		if tx.V.Uint64()%2 == 1 { // 27, or chainId*2+35: recovery id 0
			tx.V.AddUint64(&tx.V, 1)
		} else {
			tx.V.SubUint64(&tx.V, 1)
		}
	}

	tests := []struct {
		name   string
		tx     *backend.Transaction
		change func(tx *backend.Transaction)
	}{
		{"legacy v below 35", legacy, func(tx *backend.Transaction) { tx.V.SetUint64(30) }},
		{"legacy chainId disagrees with v", legacy, func(tx *backend.Transaction) { tx.ChainID = uint256.NewInt(1) }},
		{"legacy v 27 with a chainId", legacy, func(tx *backend.Transaction) { tx.V.SetUint64(27) }},
		{"typed v not a y-parity", typed, func(tx *backend.Transaction) { tx.V.SetUint64(27) }},
		{"typed without chainId", typed, func(tx *backend.Transaction) { tx.ChainID = nil }},
		{"r zero", typed, func(tx *backend.Transaction) { tx.R.Clear() }},
		{"s zero", typed, func(tx *backend.Transaction) { tx.S.Clear() }},
		{"s of the group's order", typed, func(tx *backend.Transaction) {
			tx.S = *uint256.MustFromHex("0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141")
		}},
		{"typed s in the upper half", typed, func(tx *backend.Transaction) {
			tx.S.Sub(n, &tx.S)
			tx.V.Xor(&tx.V, uint256.NewInt(1))
		}},
		// Replay protection (EIP-155) came after EIP-2, as go-ethereum's
		// EIP155Signer has it.
		{"legacy EIP-155 s in the upper half", legacy, otherForm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx := tt.tx.Copy()
			tt.change(tx)
			if got, err := backend.Sender(tx); err == nil {
				t.Fatalf("Sender = %s, want an error", got)
			}
		})
	}

	// A legacy transaction without replay protection, s in the upper
	// half, is the other form of the same signature, which blocks before
	// Homestead accepted.
	tx := unprotected.Copy()
	otherForm(tx)
	if got, err := backend.Sender(tx); err != nil || got != backend.PublicKeyAddress(key.PubKey()) {
		t.Errorf("Sender of a legacy transaction (v %d) with s in the upper half = %s, %v; want the signer", tx.V.Uint64(), got, err)
	}
}

func TestAuthority(t *testing.T) {
	key := testKey(3)
	a := backend.SetCodeAuthorization{ChainID: *uint256.NewInt(1337), Address: backend.Address{0xde, 0xad}, Nonce: 4}
	h := backend.AuthorizationSigningHash(&a)
	sig := ecdsa.SignCompact(key, h[:], false)
	a.YParity = sig[0] - 27
	a.R.SetBytes(sig[1:33])
	a.S.SetBytes(sig[33:65])
	if got, err := backend.Authority(&a); err != nil || got != backend.PublicKeyAddress(key.PubKey()) {
		t.Fatalf("Authority = %s, %v; want %s", got, err, backend.PublicKeyAddress(key.PubKey()))
	}
	bad := a
	bad.YParity = 2
	if _, err := backend.Authority(&bad); !errors.Is(err, backend.ErrInvalidSignature) {
		t.Errorf("Authority with yParity 2: %v, want ErrInvalidSignature", err)
	}
	other := a
	other.Nonce++
	if got, err := backend.Authority(&other); err == nil && got == backend.PublicKeyAddress(key.PubKey()) {
		t.Errorf("Authority of an authorization with another nonce is still the signer")
	}
}

// TestPublicKeyAddress checks the address derivation against a known pair:
// the private key 1 is the generator, whose address is well known.
func TestPublicKeyAddress(t *testing.T) {
	var one [32]byte
	one[31] = 1
	got := backend.PublicKeyAddress(secp256k1.PrivKeyFromBytes(one[:]).PubKey())
	if want := "0x7e5f4552091a69125d5dfcb7b8c2659029395bdf"; got.String() != want {
		t.Errorf("address of private key 1 = %s, want %s", got, want)
	}
}

// TestVerifySenders checks a real block's senders, then the same block with
// one sender changed, which must be refused, and one cleared, which must be
// filled in.
func TestVerifySenders(t *testing.T) {
	var block *backend.Block
	for _, path := range glob(t, filepath.Join(fixtures.Path(t, "mainnet"), "*", "*.json")) {
		for _, c := range readMainnetCases(t, path) {
			var b backend.Block
			if isNull(c.Response.Result) || json.Unmarshal(c.Response.Result, &b) != nil || len(b.Transactions) < 3 {
				continue
			}
			block = &b
			break
		}
		if block != nil {
			break
		}
	}
	if block == nil {
		t.Fatal("no mainnet fixture block with transaction objects")
	}
	if err := backend.VerifySenders(block.Copy()); err != nil {
		t.Fatalf("block %d as served: %v", block.Number, err)
	}

	tampered := block.Copy()
	tampered.Transactions[2].From[19] ^= 1
	var mismatch *backend.MismatchError
	if err := backend.VerifySenders(tampered); !errors.As(err, &mismatch) || mismatch.Field != "from" {
		t.Errorf("a changed sender: err = %v, want a mismatch of from", err)
	}

	cleared := block.Copy()
	cleared.Transactions[1].From = backend.Address{}
	if err := backend.VerifySenders(cleared); err != nil {
		t.Fatalf("a cleared sender: %v", err)
	}
	if got, want := cleared.Transactions[1].From, block.Transactions[1].From; got != want {
		t.Errorf("a cleared sender is filled in as %s, want %s", got, want)
	}
}

// BenchmarkVerifySenders recovers the senders of a block of 200 signed
// transactions on one core and on all of them, in the same run.
func BenchmarkVerifySenders(b *testing.B) {
	build := chaintest.New(chaintest.Config{Seed: 4})
	block := build.AddBlock(func(g *chaintest.BlockGen) { chaintest.Txs(200)(0, g) })
	for _, procs := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			for b.Loop() {
				if err := backend.VerifySenders(block); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(block.Transactions)), "ns/tx")
		})
	}
}

// TestPreEIP155ZeroChainID reads a transaction without replay protection
// (v 27 or 28) whose JSON says "chainId":"0x0", as some nodes (Erigon
// before erigontech/erigon#5856) write it: go-ethereum takes its chain id
// to be 0 and leaves it out. Its sender is recovered, the block verifies,
// and it is served as without the member.
func TestPreEIP155ZeroChainID(t *testing.T) {
	key := secp256k1.PrivKeyFromBytes(bytes.Repeat([]byte{0x42}, 32))
	to := backend.Address{0xaa}
	tx := &backend.Transaction{Type: backend.LegacyTxType, Nonce: 1, GasPrice: uint256.NewInt(7), Gas: 21000, To: &to, Value: *uint256.NewInt(5)}
	h := backend.SigningHash(tx)
	sig := ecdsa.SignCompact(key, h[:], false)
	tx.V.SetUint64(uint64(sig[0])) // 27 or 28
	tx.R.SetBytes(sig[1:33])
	tx.S.SetBytes(sig[33:65])
	from, err := backend.Sender(tx)
	if err != nil {
		t.Fatal(err)
	}
	tx.From = from
	b := &backend.Block{Header: backend.Header{GasLimit: 30_000_000, Number: 1_000_000}, Transactions: []*backend.Transaction{tx}}
	if err := backend.Seal(b, nil); err != nil {
		t.Fatal(err)
	}
	want := b.AppendJSON(nil, true)
	withZero := bytes.Replace(want, []byte(`"v":`), []byte(`"chainId":"0x0","v":`), 1)
	if bytes.Equal(withZero, want) {
		t.Fatal("no v member to put the chain id before")
	}

	var got backend.Block
	if err := json.Unmarshal(withZero, &got); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	if s, err := backend.Sender(got.Transactions[0]); err != nil || s != from {
		t.Errorf("Sender = %s, %v; want %s", s, err, from)
	}
	if err := backend.Seal(&got, nil); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if served := got.AppendJSON(nil, true); !bytes.Equal(served, want) {
		t.Errorf("served\n%s\nwant\n%s", served, want)
	}
}
