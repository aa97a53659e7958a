package backend_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/holiman/uint256"
)

// A Block, an Uncle and a Transaction marshal to their wire JSON alike by
// value, by pointer and as a struct field.
func TestMarshalByValue(t *testing.T) {
	for _, b := range syntheticBlocks() {
		byPointer, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		byValue, err := json.Marshal(*b)
		if err != nil {
			t.Fatal(err)
		}
		inStruct, err := json.Marshal(struct{ B any }{*b})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(byPointer, byValue) || !bytes.Equal(inStruct, []byte(`{"B":`+string(byPointer)+`}`)) {
			t.Errorf("block %d marshals differently by value:\n pointer %.120s\n value   %.120s\n field   %.120s", b.Number, byPointer, byValue, inStruct)
		}
		for _, tx := range b.Transactions {
			p, _ := json.Marshal(tx)
			v, _ := json.Marshal(*tx)
			if !bytes.Equal(p, v) {
				t.Errorf("transaction %s marshals differently by value", tx.Hash)
			}
		}
	}
	for _, u := range syntheticUncles() {
		p, _ := json.Marshal(u)
		v, _ := json.Marshal(*u)
		if !bytes.Equal(p, v) || !bytes.HasPrefix(v, []byte(`{"`)) {
			t.Errorf("uncle %s marshals differently by value", u.Hash)
		}
	}
}

// An access list's tuple and a set-code authorization marshal on their
// own as go-ethereum writes them inside a transaction, and the
// authorization reads back from what it writes.
func TestMarshalListElements(t *testing.T) {
	tuple := backend.AccessTuple{Address: backend.Address{0x01}, StorageKeys: []backend.Hash{{0xab}}}
	const wantTuple = `{"address":"0x0100000000000000000000000000000000000000","storageKeys":["0xab00000000000000000000000000000000000000000000000000000000000000"]}`
	if got, err := json.Marshal(tuple); err != nil || string(got) != wantTuple {
		t.Errorf("json.Marshal(AccessTuple) = %s, %v\nwant %s", got, err, wantTuple)
	}
	auth := backend.SetCodeAuthorization{ChainID: *uint256.NewInt(1), Address: backend.Address{0x02}, Nonce: 5, YParity: 1, R: *uint256.NewInt(7), S: *uint256.NewInt(9)}
	const wantAuth = `{"chainId":"0x1","address":"0x0200000000000000000000000000000000000000","nonce":"0x5","yParity":"0x1","r":"0x7","s":"0x9"}`
	got, err := json.Marshal(auth)
	if err != nil || string(got) != wantAuth {
		t.Errorf("json.Marshal(SetCodeAuthorization) = %s, %v\nwant %s", got, err, wantAuth)
	}
	var back backend.SetCodeAuthorization
	if err := json.Unmarshal(got, &back); err != nil || back != auth {
		t.Errorf("json.Unmarshal(json.Marshal(auth)) = %+v, %v; want %+v", back, err, auth)
	}
}
