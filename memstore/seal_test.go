package memstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/holiman/uint256"
)

var (
	sender    = backend.Address{0xaa}
	recipient = backend.Address{0xbb}
)

// sampleBaseFee is the base fee of sampleBlock.
const sampleBaseFee = 100

// legacyTx returns a legacy transaction signed with v, at gas price 7.
func legacyTx(nonce, v uint64) *backend.Transaction {
	to := recipient
	return &backend.Transaction{
		Type:     backend.LegacyTxType,
		Nonce:    nonce,
		GasPrice: uint256.NewInt(7),
		Gas:      21_000,
		To:       &to,
		Value:    *uint256.NewInt(1),
		Input:    []byte{0xca, 0xfe},
		V:        *uint256.NewInt(v),
		R:        *uint256.NewInt(1),
		S:        *uint256.NewInt(2),
		From:     sender,
	}
}

// accessListTx returns a type 1 transaction at gas price 9.
func accessListTx(nonce uint64) *backend.Transaction {
	tx := legacyTx(nonce, 1)
	tx.Type = backend.AccessListTxType
	tx.ChainID = uint256.NewInt(1)
	tx.GasPrice = uint256.NewInt(9)
	tx.AccessList = []backend.AccessTuple{{Address: recipient, StorageKeys: []backend.Hash{{1}}}}
	return tx
}

// feeMarketTx returns a transaction of type 2, 3 or 4 with the given fee
// caps and no gasPrice.
func feeMarketTx(typ uint8, nonce, maxFee, maxPriorityFee uint64) *backend.Transaction {
	tx := legacyTx(nonce, 0)
	tx.Type = typ
	tx.ChainID = uint256.NewInt(1)
	tx.GasPrice = nil
	tx.MaxFeePerGas = uint256.NewInt(maxFee)
	tx.MaxPriorityFeePerGas = uint256.NewInt(maxPriorityFee)
	tx.AccessList = []backend.AccessTuple{}
	switch typ {
	case backend.BlobTxType:
		tx.MaxFeePerBlobGas = uint256.NewInt(3)
		tx.BlobVersionedHashes = []backend.Hash{{0x01, 0xbb}}
	case backend.SetCodeTxType:
		tx.AuthorizationList = []backend.SetCodeAuthorization{{
			ChainID: *uint256.NewInt(1), Address: backend.Address{0xcc}, Nonce: 4,
			R: *uint256.NewInt(5), S: *uint256.NewInt(6),
		}}
	}
	return tx
}

// sampleBlock returns a child of parent with a transaction of every type,
// two withdrawals and an uncle, and none of its derived values given.
func sampleBlock(parent *backend.Block) (*backend.Block, []*backend.Uncle) {
	b := childOf(parent, "sample")
	b.BaseFeePerGas = uint256.NewInt(sampleBaseFee)
	b.Transactions = []*backend.Transaction{
		legacyTx(0, 37), // chain id 1
		feeMarketTx(backend.DynamicFeeTxType, 1, 200, 5),
		feeMarketTx(backend.BlobTxType, 2, 103, 5),
		feeMarketTx(backend.SetCodeTxType, 3, 300, 0),
		accessListTx(4),
	}
	b.Withdrawals = []backend.Withdrawal{
		{Index: 1, ValidatorIndex: 10, Address: backend.Address{0xdd}, Amount: 32},
		{Index: 2, ValidatorIndex: 11, Address: backend.Address{0xde}, Amount: 7},
	}
	return b, []*backend.Uncle{uncleOf(parent, "sample uncle")}
}

func TestAddBlockComputesDerivedValues(t *testing.T) {
	s := memstore.New()
	parent := add(t, s, genesis())
	block, uncles := sampleBlock(parent)
	got := add(t, s, block, uncles...)
	gotUncles := storedUncles(t, s, got.Hash)
	if len(gotUncles) != 1 {
		t.Fatalf("stored %d uncles, want 1", len(gotUncles))
	}
	uncleHeaders := []*backend.Header{&gotUncles[0].Header}

	if want := backend.HeaderHash(&got.Header); got.Hash != want {
		t.Errorf("hash = %s, want %s", got.Hash, want)
	}
	if want := backend.BlockSize(&got.Header, got.Transactions, uncleHeaders, got.Withdrawals); got.Size != want {
		t.Errorf("size = %d, want %d", got.Size, want)
	}
	if want := backend.UnclesHash(uncleHeaders); got.Sha3Uncles != want {
		t.Errorf("sha3Uncles = %s, want %s", got.Sha3Uncles, want)
	}
	if want := backend.TransactionsRoot(got.Transactions); got.TransactionsRoot != want {
		t.Errorf("transactionsRoot = %s, want %s", got.TransactionsRoot, want)
	}
	if want := backend.WithdrawalsRoot(block.Withdrawals); got.WithdrawalsRoot == nil || *got.WithdrawalsRoot != want {
		t.Errorf("withdrawalsRoot = %v, want %s", got.WithdrawalsRoot, want)
	}
	for i, tx := range got.Transactions {
		if want := backend.TransactionHash(tx); tx.Hash != want {
			t.Errorf("transaction %d: hash = %s, want %s", i, tx.Hash, want)
		}
	}
	if want := backend.HeaderHash(&uncles[0].Header); len(got.Uncles) != 1 || got.Uncles[0] != want {
		t.Errorf("uncles = %v, want [%s]", got.Uncles, want)
	}
	if want := backend.HeaderHash(&uncles[0].Header); gotUncles[0].Hash != want {
		t.Errorf("uncle hash = %s, want %s", gotUncles[0].Hash, want)
	}
	if want := backend.UncleSize(&uncles[0].Header); gotUncles[0].Size != want {
		t.Errorf("uncle size = %d, want %d", gotUncles[0].Size, want)
	}

	// What was computed is accepted when given.
	again := memstore.New()
	add(t, again, parent)
	if err := again.AddBlock(got, gotUncles...); err != nil {
		t.Errorf("AddBlock of the block with every derived value given: %v", err)
	}
}

func TestEffectiveGasPrice(t *testing.T) {
	tests := []struct {
		name                string
		tx                  *backend.Transaction
		given               *uint256.Int // gasPrice given with the transaction, if any
		want                uint64
		wantMismatchOnGiven bool
	}{
		{name: "type 2: base fee plus tip", tx: feeMarketTx(2, 0, 200, 5), want: 105},
		{name: "type 2: capped by maxFeePerGas", tx: feeMarketTx(2, 0, 103, 5), want: 103},
		{name: "type 2: cap equals base fee plus tip", tx: feeMarketTx(2, 0, 105, 5), want: 105},
		{name: "type 3: base fee plus tip", tx: feeMarketTx(3, 0, 200, 7), want: 107},
		{name: "type 3: capped by maxFeePerGas", tx: feeMarketTx(3, 0, 101, 50), want: 101},
		{name: "type 4: no tip", tx: feeMarketTx(4, 0, 300, 0), want: 100},
		{name: "type 4: capped by maxFeePerGas", tx: feeMarketTx(4, 0, 100, 1), want: 100},
		{name: "type 2: given and right", tx: feeMarketTx(2, 0, 200, 5), given: uint256.NewInt(105), want: 105},
		{name: "type 2: given the fee cap", tx: feeMarketTx(2, 0, 200, 5), given: uint256.NewInt(200), wantMismatchOnGiven: true},
		{name: "type 1: gasPrice kept", tx: accessListTx(0), given: uint256.NewInt(9), want: 9},
		{name: "legacy: gasPrice kept", tx: legacyTx(0, 27), given: uint256.NewInt(7), want: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New()
			b := childOf(add(t, s, genesis()), "gas price")
			b.BaseFeePerGas = uint256.NewInt(sampleBaseFee)
			if tt.given != nil {
				tt.tx.GasPrice = tt.given
			}
			b.Transactions = []*backend.Transaction{tt.tx}

			err := s.AddBlock(b)
			if tt.wantMismatchOnGiven {
				var mm *backend.MismatchError
				if !errors.As(err, &mm) || mm.Field != "gasPrice" {
					t.Fatalf("AddBlock = %v, want a *backend.MismatchError for gasPrice", err)
				}
				wantNotStored(t, s, 1, b, backend.HeaderHash(&b.Header))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stored, err := s.BlockByNumber(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := stored.Transactions[0].GasPrice; got == nil || !got.Eq(uint256.NewInt(tt.want)) {
				t.Errorf("gasPrice = %s, want %d (base fee %d, maxFeePerGas %s, maxPriorityFeePerGas %s)",
					tdString(got), tt.want, sampleBaseFee, tdString(tt.tx.MaxFeePerGas), tdString(tt.tx.MaxPriorityFeePerGas))
			}
		})
	}
}

func TestLegacyChainID(t *testing.T) {
	tests := []struct {
		v            uint64
		given        *uint256.Int
		want         string // the chain id stored, "<nil>" for none
		wantMismatch bool   // a *backend.MismatchError for chainId
		wantErr      bool   // some other error
	}{
		{v: 27, want: "<nil>"},
		{v: 28, want: "<nil>"},
		{v: 35, want: "0"},
		{v: 36, want: "0"},
		{v: 37, want: "1"},
		{v: 38, want: "1"},
		{v: 2709, want: "1337"},
		{v: 2710, want: "1337"},
		{v: 37, given: uint256.NewInt(1), want: "1"},
		{v: 37, given: uint256.NewInt(2), wantMismatch: true},
		{v: 27, given: uint256.NewInt(1), wantMismatch: true},
		{v: 30, wantErr: true},
	}
	for _, tt := range tests {
		s := memstore.New()
		b := childOf(add(t, s, genesis()), "legacy")
		tx := legacyTx(0, tt.v)
		tx.ChainID = tt.given
		b.Transactions = []*backend.Transaction{tx}
		what := "v=" + uint256.NewInt(tt.v).Dec() + ", chainId " + tdString(tt.given)

		err := s.AddBlock(b)
		var mm *backend.MismatchError
		switch {
		case tt.wantMismatch:
			if !errors.As(err, &mm) || mm.Field != "chainId" {
				t.Errorf("%s: AddBlock = %v, want a *backend.MismatchError for chainId", what, err)
			}
			wantNotStored(t, s, 1, b, backend.HeaderHash(&b.Header))
		case tt.wantErr:
			if err == nil {
				t.Errorf("%s: AddBlock succeeded, want an error", what)
			}
			wantNotStored(t, s, 1, b, backend.HeaderHash(&b.Header))
		case err != nil:
			t.Errorf("%s: AddBlock: %v", what, err)
		default:
			stored, err := s.BlockByNumber(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := tdString(stored.Transactions[0].ChainID); got != tt.want {
				t.Errorf("%s: stored chainId %s, want %s", what, got, tt.want)
			}
			// As go-ethereum serves it: a chainId member for chain ids
			// other than 0 alone, which alone bind the store's chain id.
			served := string(stored.AppendJSON(nil, true))
			var wantMember string
			if tt.want != "<nil>" && tt.want != "0" {
				wantMember = `"chainId":"` + uint256.MustFromDecimal(tt.want).Hex() + `"`
			}
			if has := strings.Contains(served, `"chainId"`); has != (wantMember != "") || !strings.Contains(served, wantMember) {
				t.Errorf("%s: served %s, want chainId member %q", what, served, wantMember)
			}
			id, err := s.ChainID(t.Context())
			if wantMember == "" && !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("%s: ChainID = %d, %v, want ErrNotFound", what, id, err)
			}
			if wantMember != "" && (err != nil || uint256.NewInt(id).Dec() != tt.want) {
				t.Errorf("%s: ChainID = %d, %v, want %s", what, id, err, tt.want)
			}
		}
	}
}

// sample is a block with its uncles, for tampering with.
type sample struct {
	block  *backend.Block
	uncles []*backend.Uncle
}

// rejectCase is a change to a sample that AddBlock must refuse.
type rejectCase struct {
	name   string
	tamper func(s *sample)
	// What the error must be: a *backend.MismatchError, or a *backend.FieldError
	// for a missing field, with this Field, and contain this text.
	mismatch, missing, text string
}

// isMissing reports whether err is a *backend.FieldError for field, and
// ErrMissingField.
func isMissing(err error, field string) bool {
	var fe *backend.FieldError
	return errors.As(err, &fe) && fe.Field == field && errors.Is(err, backend.ErrMissingField)
}

// wantRejected adds each case's tampered copy of base to a store holding
// parent, and checks the error and that nothing was stored.
func wantRejected(t *testing.T, parent *backend.Block, base sample, tests []rejectCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New()
			add(t, s, parent)
			x := sample{base.block.Copy(), copyUncles(base.uncles)}
			tt.tamper(&x)

			err := s.AddBlock(x.block, x.uncles...)
			if err == nil {
				t.Fatal("AddBlock succeeded, want an error")
			}
			var mm *backend.MismatchError
			if tt.mismatch != "" && (!errors.As(err, &mm) || mm.Field != tt.mismatch) {
				t.Errorf("AddBlock = %v, want a *backend.MismatchError for %s", err, tt.mismatch)
			}
			if tt.missing != "" && !isMissing(err, tt.missing) {
				t.Errorf("AddBlock = %v, want a missing-field error for %s", err, tt.missing)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("AddBlock = %v, want an error mentioning %q", err, tt.text)
			}
			wantNotStored(t, s, 1, x.block, base.block.Hash)
			wantNotStored(t, s, 1, x.block, backend.HeaderHash(&x.block.Header))
		})
	}
}

func TestAddBlockRejectsMismatch(t *testing.T) {
	// The sample as stored: every derived value given, and right.
	scratch := memstore.New()
	parent := add(t, scratch, genesis())
	b, uncles := sampleBlock(parent)
	block := add(t, scratch, b, uncles...)
	base := sample{block, storedUncles(t, scratch, block.Hash)}

	flip := func(h *backend.Hash) { h[0] ^= 1 }
	plusOne := func(z *uint256.Int) { z.AddUint64(z, 1) }
	tests := []rejectCase{
		{name: "block hash", tamper: func(s *sample) { flip(&s.block.Hash) }, mismatch: "hash"},
		{name: "size", tamper: func(s *sample) { s.block.Size++ }, mismatch: "size"},
		{name: "sha3Uncles", tamper: func(s *sample) { flip(&s.block.Sha3Uncles) }, mismatch: "sha3Uncles"},
		{name: "transactionsRoot", tamper: func(s *sample) { flip(&s.block.TransactionsRoot) }, mismatch: "transactionsRoot"},
		{name: "withdrawalsRoot", tamper: func(s *sample) { flip(s.block.WithdrawalsRoot) }, mismatch: "withdrawalsRoot"},
		{name: "withdrawal amount", tamper: func(s *sample) { s.block.Withdrawals[1].Amount++ }, mismatch: "withdrawalsRoot"},
		{name: "header field under the given hash", tamper: func(s *sample) { s.block.GasUsed++ }, mismatch: "hash"},
		{name: "totalDifficulty", tamper: func(s *sample) { s.block.TotalDifficulty = uint256.NewInt(1) }, mismatch: "totalDifficulty"},
		{name: "transaction hash", tamper: func(s *sample) { flip(&s.block.Transactions[2].Hash) }, mismatch: "hash", text: "transaction 2"},
		{name: "transaction input under its given hash", tamper: func(s *sample) { s.block.Transactions[0].Input[1]++ }, mismatch: "hash", text: "transaction 0"},
		{name: "transaction input, hash cleared", tamper: func(s *sample) {
			s.block.Transactions[0].Input[1]++
			s.block.Transactions[0].Hash = backend.Hash{}
		}, mismatch: "transactionsRoot"},
		{name: "effective gasPrice, type 2", tamper: func(s *sample) { plusOne(s.block.Transactions[1].GasPrice) }, mismatch: "gasPrice", text: "transaction 1"},
		{name: "effective gasPrice, type 3", tamper: func(s *sample) { plusOne(s.block.Transactions[2].GasPrice) }, mismatch: "gasPrice", text: "transaction 2"},
		{name: "effective gasPrice, type 4", tamper: func(s *sample) { plusOne(s.block.Transactions[3].GasPrice) }, mismatch: "gasPrice", text: "transaction 3"},
		{name: "legacy chainId", tamper: func(s *sample) { plusOne(s.block.Transactions[0].ChainID) }, mismatch: "chainId", text: "transaction 0"},
		{name: "transaction hashes beside the bodies", tamper: func(s *sample) {
			s.block.TransactionHashes = backend.TransactionHashes(s.block.Transactions)
			flip(&s.block.TransactionHashes[1])
		}, mismatch: "transactions[1]"},
		{name: "uncle hash in the block's list", tamper: func(s *sample) { flip(&s.block.Uncles[0]) }, mismatch: "uncles[0]"},
		{name: "uncle header, its hash cleared", tamper: func(s *sample) {
			s.uncles[0].ExtraData = []byte("another uncle")
			s.uncles[0].Hash, s.uncles[0].Size = backend.Hash{}, 0
		}, mismatch: "uncles[0]"},
		{name: "uncle's own hash", tamper: func(s *sample) { flip(&s.uncles[0].Hash) }, mismatch: "hash", text: "uncle 0"},
		{name: "uncle size", tamper: func(s *sample) { s.uncles[0].Size++ }, mismatch: "size", text: "uncle 0"},
	}
	wantRejected(t, parent, base, tests)

	// The untampered copy is accepted: each failure is the tampering's.
	s := memstore.New()
	add(t, s, parent)
	if err := s.AddBlock(base.block.Copy(), copyUncles(base.uncles)...); err != nil {
		t.Fatalf("AddBlock of the untampered sample: %v", err)
	}
}

func TestAddBlockRejectsIncomplete(t *testing.T) {
	parent := add(t, memstore.New(), genesis())
	block, uncles := sampleBlock(parent)
	base := sample{block, uncles}
	hashOnly := func(s *sample) {
		for _, tx := range s.block.Transactions {
			s.block.TransactionHashes = append(s.block.TransactionHashes, backend.TransactionHash(tx))
		}
		s.block.Transactions = nil
	}
	tests := []rejectCase{
		{name: "no sender", tamper: func(s *sample) { s.block.Transactions[2].From = backend.Address{} }, missing: "from", text: "transaction 2"},
		{name: "typed transaction without chainId", tamper: func(s *sample) { s.block.Transactions[1].ChainID = nil }, missing: "chainId"},
		{name: "legacy transaction without gasPrice", tamper: func(s *sample) { s.block.Transactions[0].GasPrice = nil }, missing: "gasPrice"},
		{name: "fee-market transaction without maxFeePerGas", tamper: func(s *sample) { s.block.Transactions[1].MaxFeePerGas = nil }, missing: "maxFeePerGas"},
		{name: "fee-market transaction in a block without base fee", tamper: func(s *sample) { s.block.BaseFeePerGas = nil }, text: "baseFeePerGas"},
		{name: "listed uncle without its header", tamper: func(s *sample) {
			s.block.Uncles = []backend.Hash{backend.HeaderHash(&s.uncles[0].Header)}
			s.uncles = nil
		}, missing: "uncles[0]"},
		{name: "more uncle headers than listed", tamper: func(s *sample) {
			s.block.Uncles = []backend.Hash{backend.HeaderHash(&s.uncles[0].Header)}
			s.uncles = append(s.uncles, uncleOf(parent, "extra uncle"))
		}, text: "uncles"},
		{name: "transaction hashes only, no size", tamper: func(s *sample) {
			hashOnly(s)
			s.block.TransactionsRoot = backend.Hash{1}
		}, missing: "size"},
		{name: "transaction hashes only, no transactionsRoot", tamper: func(s *sample) {
			hashOnly(s)
			s.block.Size = 1000
		}, missing: "transactionsRoot"},
	}
	wantRejected(t, parent, base, tests)
}

// clearDerived zeroes what a block's contents determine, for the store to
// compute.
func clearDerived(b *backend.Block) {
	b.Hash, b.Size = backend.Hash{}, 0
	b.Sha3Uncles, b.TransactionsRoot, b.WithdrawalsRoot = backend.Hash{}, backend.Hash{}, nil
	b.Uncles = nil
	for _, tx := range b.Transactions {
		tx.Hash = backend.Hash{}
		switch tx.Type {
		case backend.LegacyTxType:
			tx.ChainID = nil
		case backend.DynamicFeeTxType, backend.BlobTxType, backend.SetCodeTxType:
			tx.GasPrice = nil
		}
	}
}

// wantAsServed returns the block as the store must serve it after adding
// b: b itself, and for a genesis its difficulty as total difficulty.
func wantAsServed(b *backend.Block) *backend.Block {
	want := b.Copy()
	if want.Number == 0 && want.ParentHash == (backend.Hash{}) && want.TotalDifficulty == nil {
		want.TotalDifficulty = new(uint256.Int).Set(&want.Difficulty)
	}
	return want
}

func TestAddBlockAcceptsFixtures(t *testing.T) {
	for _, file := range []string{"test_01.json", "test_02.json", "test_08.json", "test_12.json", "test_13.json"} {
		t.Run(file, func(t *testing.T) {
			original := fixtureBlock(t, file)
			s := memstore.New()
			if err := s.AddBlock(original.Copy()); err != nil {
				t.Fatalf("AddBlock of mainnet block %d as fetched: %v", original.Number, err)
			}
			got, err := s.BlockByHash(t.Context(), original.Hash)
			if err != nil {
				t.Fatal(err)
			}
			if diff := jsonDiff(t, blockJSON(got), blockJSON(wantAsServed(original))); diff != "" {
				t.Errorf("block %d as served differs from the fixture (-want +got):\n%s", original.Number, diff)
			}
		})
	}
}

func TestAddBlockFillsFixtureValues(t *testing.T) {
	for _, file := range []string{"test_02.json", "test_08.json", "test_12.json"} {
		t.Run(file, func(t *testing.T) {
			original := fixtureBlock(t, file)
			b := original.Copy()
			clearDerived(b)
			s := memstore.New()
			if err := s.AddBlock(b); err != nil {
				t.Fatalf("AddBlock of mainnet block %d without derived values: %v", original.Number, err)
			}
			got, err := s.BlockByNumber(t.Context(), backend.BlockNumber(original.Number))
			if err != nil {
				t.Fatal(err)
			}
			if got.Hash != original.Hash || got.Size != original.Size {
				t.Errorf("computed hash %s and size %d, want %s and %d", got.Hash, got.Size, original.Hash, original.Size)
			}
			if diff := jsonDiff(t, blockJSON(got), blockJSON(wantAsServed(original))); diff != "" {
				t.Errorf("block %d with computed values differs from the fixture (-want +got):\n%s", original.Number, diff)
			}
		})
	}
}

func TestAddBlockRejectsTamperedFixture(t *testing.T) {
	original := fixtureBlock(t, "test_08.json")
	withInput, legacyNoChainID := -1, -1
	for i, tx := range original.Transactions {
		if withInput < 0 && len(tx.Input) > 0 {
			withInput = i
		}
		if tx.Type == backend.LegacyTxType && tx.ChainID == nil {
			legacyNoChainID = i
		}
	}
	if withInput < 0 || legacyNoChainID < 0 {
		t.Fatal("test_08.json lacks a transaction with input or a legacy one without chainId")
	}
	tests := []struct {
		name   string
		tamper func(b *backend.Block)
		field  string
	}{
		{"one byte of a transaction's input", func(b *backend.Block) { b.Transactions[withInput].Input[0] ^= 1 }, "hash"},
		{"one byte of a transaction's input, its hash cleared", func(b *backend.Block) {
			b.Transactions[withInput].Input[0] ^= 1
			b.Transactions[withInput].Hash = backend.Hash{}
		}, "transactionsRoot"},
		{"a withdrawal's amount", func(b *backend.Block) { b.Withdrawals[3].Amount++ }, "withdrawalsRoot"},
		{"size", func(b *backend.Block) { b.Size-- }, "size"},
		{"gasUsed", func(b *backend.Block) { b.GasUsed-- }, "hash"},
		{"chainId of a transaction signed without one", func(b *backend.Block) {
			b.Transactions[legacyNoChainID].ChainID = uint256.NewInt(1)
		}, "chainId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := original.Copy()
			tt.tamper(b)
			s := memstore.New()
			err := s.AddBlock(b)
			var mm *backend.MismatchError
			if !errors.As(err, &mm) || mm.Field != tt.field {
				t.Fatalf("AddBlock = %v, want a *backend.MismatchError for %s", err, tt.field)
			}
			wantNotStored(t, s, 0, b, original.Hash)
		})
	}
}

func TestAddBlockHashOnlyFixtures(t *testing.T) {
	for _, file := range []string{"test_01.json", "test_13.json"} {
		t.Run(file, func(t *testing.T) {
			original := fixtureBlock(t, file)
			if original.Transactions != nil || len(original.TransactionHashes) == 0 {
				t.Fatalf("%s: want a block with transaction hashes only", file)
			}
			tests := []struct {
				name              string
				tamper            func(b *backend.Block)
				missing, mismatch string
			}{
				{"no size", func(b *backend.Block) { b.Size = 0 }, "size", ""},
				{"no transactionsRoot", func(b *backend.Block) { b.TransactionsRoot = backend.Hash{} }, "transactionsRoot", ""},
				{"transactionsRoot changed under the hash", func(b *backend.Block) { b.TransactionsRoot[0] ^= 1 }, "", "hash"},
			}
			for _, tt := range tests {
				b := original.Copy()
				tt.tamper(b)
				s := memstore.New()
				err := s.AddBlock(b)
				var mm *backend.MismatchError
				switch {
				case tt.missing != "" && !isMissing(err, tt.missing):
					t.Errorf("%s: AddBlock = %v, want a missing-field error for %s", tt.name, err, tt.missing)
				case tt.mismatch != "" && (!errors.As(err, &mm) || mm.Field != tt.mismatch):
					t.Errorf("%s: AddBlock = %v, want a *backend.MismatchError for %s", tt.name, err, tt.mismatch)
				}
				wantNotStored(t, s, 0, b, original.Hash)
			}

			// Without bodies the size cannot be checked: it is kept as given.
			b := original.Copy()
			b.Size += 10
			s := memstore.New()
			got := add(t, s, b)
			if got.Size != b.Size || got.TransactionsRoot != original.TransactionsRoot {
				t.Errorf("stored size %d and transactionsRoot %s, want them as given: %d and %s", got.Size, got.TransactionsRoot, b.Size, original.TransactionsRoot)
			}
			if got.Transactions != nil || len(got.TransactionHashes) != len(original.TransactionHashes) {
				t.Errorf("stored %d transaction bodies and %d hashes, want 0 and %d", len(got.Transactions), len(got.TransactionHashes), len(original.TransactionHashes))
			}
		})
	}
}
