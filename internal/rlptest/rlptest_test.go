package rlptest

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func TestDecode(t *testing.T) {
	in, _ := hex.DecodeString("c78363617480c102ff") // ["cat", "", [2]], then a trailing ff
	item, rest, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	if !item.IsList || len(item.List) != 3 || !bytes.Equal(item.Raw, in[:8]) || !bytes.Equal(rest, []byte{0xff}) {
		t.Fatalf("Decode(%x) = %+v, rest %x", in, item, rest)
	}
	cat, empty, inner := item.List[0], item.List[1], item.List[2]
	if string(cat.Bytes) != "cat" || empty.IsList || len(empty.Bytes) != 0 || inner.List[0].Uint64() != 2 {
		t.Errorf("items = %+v", item.List)
	}
}

// TestDecodeRejects covers the checks that keep a bad input from panicking.
func TestDecodeRejects(t *testing.T) {
	for _, in := range []string{
		"",               // nothing
		"83ca",           // a string longer than its input
		"b9",             // a length of length longer than its input
		"bc0000000001aa", // a length of 5 bytes
		"fc0000000001aa", // a list's length of 5 bytes
		"c28361",         // a list whose item runs past it
	} {
		b, _ := hex.DecodeString(in)
		if _, _, err := Decode(b); err == nil {
			t.Errorf("Decode(%s) succeeded", in)
		}
	}
}

func TestUint64(t *testing.T) {
	for in, want := range map[string]uint64{"": 0, "7f": 0x7f, "0400": 0x400, "0102030405060708": 0x0102030405060708} {
		b, _ := hex.DecodeString(in)
		if got := (Item{Bytes: b}).Uint64(); got != want {
			t.Errorf("Uint64(%s) = %#x, want %#x", in, got, want)
		}
	}
}
