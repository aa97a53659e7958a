package hexutil

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/holiman/uint256"
)

// The messages below are go-ethereum's, word for word, for the same inputs:
// clients and their users match on them.
func TestUintMessages(t *testing.T) {
	tests := []struct {
		in  string
		err string
	}{
		{`"0x01"`, "json: cannot unmarshal hex number with leading zero digits into Go value of type hexutil.Uint"},
		{`"1"`, "json: cannot unmarshal hex string without 0x prefix into Go value of type hexutil.Uint"},
		{`"0x"`, `json: cannot unmarshal hex string "0x" into Go value of type hexutil.Uint`},
		{`"0xg"`, "json: cannot unmarshal invalid hex string into Go value of type hexutil.Uint"},
		{`"0x10000000000000000"`, "json: cannot unmarshal hex number > 64 bits into Go value of type hexutil.Uint"},
		{`1`, "json: cannot unmarshal non-string into Go value of type hexutil.Uint"},
		{`null`, "json: cannot unmarshal non-string into Go value of type hexutil.Uint"},
		{`""`, "json: cannot unmarshal empty hex string into Go value of type hexutil.Uint"},
		{`"0x0"`, ""},
		{`"0xA"`, ""},
	}
	for _, tt := range tests {
		var v Uint
		if got := errString(v.UnmarshalJSON([]byte(tt.in))); got != tt.err {
			t.Errorf("Uint.UnmarshalJSON(%s) error = %q, want %q", tt.in, got, tt.err)
		}
	}
}

func TestFieldContext(t *testing.T) {
	var v struct {
		Difficulty U256 `json:"difficulty"`
	}
	err := json.Unmarshal([]byte(`{"difficulty":"0x00"}`), &v)
	const want = "json: cannot unmarshal hex number with leading zero digits into Go struct field .difficulty of type hexutil.U256"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestFixedMessages(t *testing.T) {
	type hash [32]byte
	typ := reflect.TypeFor[hash]()
	tests := []struct {
		in  string
		err string
	}{
		{`"0x` + repeat("ab", 32) + `"`, ""},
		{`"0x` + repeat("ab", 31) + `"`, "hex string has length 62, want 64 for hexutil.hash"},
		{`"` + repeat("ab", 32) + `"`, "json: cannot unmarshal hex string without 0x prefix into Go value of type hexutil.hash"},
		{`"0x` + repeat("zz", 32) + `"`, "json: cannot unmarshal invalid hex string into Go value of type hexutil.hash"},
		{`12`, "json: cannot unmarshal non-string into Go value of type hexutil.hash"},
	}
	for _, tt := range tests {
		var h hash
		err := UnmarshalFixedJSON(typ, []byte(tt.in), h[:])
		if got := errString(err); got != tt.err {
			t.Errorf("UnmarshalFixedJSON(%s) error = %q, want %q", tt.in, got, tt.err)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	type all struct {
		B Bytes
		U Uint64
		I Uint
		Z *U256
	}
	in := all{B: Bytes{1, 2, 0xff}, U: 0xabc, I: 7, Z: (*U256)(uint256.MustFromHex("0x1000000000000000000000000"))}
	enc, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"B":"0x0102ff","U":"0xabc","I":"0x7","Z":"0x1000000000000000000000000"}`
	if string(enc) != want {
		t.Fatalf("Marshal = %s, want %s", enc, want)
	}
	var out all
	if err := json.Unmarshal(enc, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip gave %+v, want %+v", out, in)
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
