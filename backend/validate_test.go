package backend_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// TestTransactionValidate checks each rule on a Go value, as a store sees
// transactions made without JSON, and that decoding reports the same field
// for the same fault.
func TestTransactionValidate(t *testing.T) {
	for i, tx := range syntheticTransactions() {
		if err := tx.Validate(); err != nil {
			t.Errorf("synthetic transaction %d: Validate = %v", i, err)
		}
	}
	tests := []struct {
		name   string
		tx     int
		tamper func(tx *backend.Transaction)
		field  string
		err    error // the FieldError wraps it
	}{
		{"type 5", txSetCode, func(tx *backend.Transaction) { tx.Type = 5 }, "type", backend.ErrUnsupportedType},
		{"legacy without gasPrice", txLegacy, func(tx *backend.Transaction) { tx.GasPrice = nil }, "gasPrice", backend.ErrMissingField},
		{"type 1 without gasPrice", txAccessList, func(tx *backend.Transaction) { tx.GasPrice = nil }, "gasPrice", backend.ErrMissingField},
		{"type 2 without maxFeePerGas", txDynamicFee, func(tx *backend.Transaction) { tx.MaxFeePerGas = nil }, "maxFeePerGas", backend.ErrMissingField},
		{"type 2 without maxPriorityFeePerGas", txDynamicFee, func(tx *backend.Transaction) { tx.MaxPriorityFeePerGas = nil }, "maxPriorityFeePerGas", backend.ErrMissingField},
		{"type 1 without chainId", txAccessList, func(tx *backend.Transaction) { tx.ChainID = nil }, "chainId", backend.ErrMissingField},
		{"blob without to", txBlob, func(tx *backend.Transaction) { tx.To = nil }, "to", backend.ErrMissingField},
		{"set-code without to", txSetCode, func(tx *backend.Transaction) { tx.To = nil }, "to", backend.ErrMissingField},
		{"blob without maxFeePerBlobGas", txBlob, func(tx *backend.Transaction) { tx.MaxFeePerBlobGas = nil }, "maxFeePerBlobGas", backend.ErrMissingField},
		{"blob without hashes", txBlob, func(tx *backend.Transaction) { tx.BlobVersionedHashes = []backend.Hash{} }, "blobVersionedHashes", backend.ErrEmptyList},
		{"set-code without authorizations", txSetCode, func(tx *backend.Transaction) { tx.AuthorizationList = nil }, "authorizationList", backend.ErrEmptyList},
		{"typed with v 2", txDynamicFee, func(tx *backend.Transaction) { tx.V.SetUint64(2) }, "v", backend.ErrInvalidYParity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx := syntheticTransactions()[tt.tx]
			tt.tamper(tx)
			err := tx.Validate()
			var fe *backend.FieldError
			if !errors.As(err, &fe) || fe.Object != "" || fe.Field != tt.field || !errors.Is(err, tt.err) {
				t.Fatalf("Validate = %v, want a FieldError for %s, without object, wrapping %v", err, tt.field, tt.err)
			}
			if !strings.HasPrefix(err.Error(), tt.field+": ") {
				t.Errorf("Validate = %q, want it to begin with the field", err)
			}

			// Decoding the encoding of the same value names the same field.
			enc, _ := json.Marshal(tx)
			err = new(backend.Transaction).UnmarshalJSON(enc)
			if !errors.As(err, &fe) || fe.Object != "transaction" || fe.Field != tt.field {
				t.Errorf("UnmarshalJSON of the encoding = %v, want a FieldError for transaction %s", err, tt.field)
			}
		})
	}
}

// A typed transaction's yParity given without v becomes its v, and is held
// to the same rule: it round-trips only as 0 or 1.
func TestYParityWithoutV(t *testing.T) {
	tx := syntheticTransactions()[txDynamicFee]
	for _, yParity := range []uint64{0, 1, 5} {
		tx.V.SetUint64(yParity)
		var object map[string]any
		if err := json.Unmarshal(must(json.Marshal(tx)), &object); err != nil {
			t.Fatal(err)
		}
		delete(object, "v")
		var got backend.Transaction
		err := got.UnmarshalJSON(must(json.Marshal(object)))
		switch {
		case yParity <= 1 && (err != nil || !got.V.Eq(uint256.NewInt(yParity))):
			t.Errorf("yParity %d alone: v = %s, error %v; want v %d", yParity, got.V.Hex(), err, yParity)
		case yParity > 1 && !errors.Is(err, backend.ErrInvalidYParity):
			t.Errorf("yParity %d alone: error %v, want ErrInvalidYParity", yParity, err)
		}
	}
}
