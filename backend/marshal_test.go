package backend_test

import (
	"bytes"
	"encoding/json"
	"testing"
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
