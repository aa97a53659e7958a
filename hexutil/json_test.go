package hexutil

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
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

// TestMarshalByValueAndPointer checks that every type encodes the same held
// by value and by pointer, as go-ethereum's do: a pointer-receiver
// MarshalText is skipped for a value, and encoding/json then writes the
// underlying type (U256 by value came out as an array of four numbers).
func TestMarshalByValueAndPointer(t *testing.T) {
	z := U256(*uint256.MustFromHex("0x1000000000000000000000000"))
	b, u, i := Bytes{1, 2, 0xff}, Uint64(0xabc), Uint(7)
	tests := []struct {
		name           string
		byValue, byPtr any
		want           string
	}{
		{"Bytes", struct{ V Bytes }{b}, struct{ V *Bytes }{&b}, `{"V":"0x0102ff"}`},
		{"Uint64", struct{ V Uint64 }{u}, struct{ V *Uint64 }{&u}, `{"V":"0xabc"}`},
		{"Uint", struct{ V Uint }{i}, struct{ V *Uint }{&i}, `{"V":"0x7"}`},
		{"U256", struct{ V U256 }{z}, struct{ V *U256 }{&z}, `{"V":"0x1000000000000000000000000"}`},
	}
	for _, tt := range tests {
		for form, v := range map[string]any{"by value": tt.byValue, "by pointer": tt.byPtr} {
			got, err := json.Marshal(v)
			if err != nil {
				t.Errorf("%s %s: %v", tt.name, form, err)
				continue
			}
			if string(got) != tt.want {
				t.Errorf("%s %s: Marshal = %s, want %s", tt.name, form, got, tt.want)
			}
		}
	}
}

// UnmarshalFixedText names the type in the length error only, as
// go-ethereum's does; the other errors are the plain ones.
func TestUnmarshalFixedText(t *testing.T) {
	tests := []struct {
		in  string
		err string
	}{
		{"0x" + repeat("ab", 20), ""},
		{"", "hex string has length 0, want 40 for common.Address"},
		{"0x" + repeat("ab", 19), "hex string has length 38, want 40 for common.Address"},
		{"0x" + repeat("ab", 19) + "a", ErrOddLength.Error()},
		{repeat("ab", 20), ErrMissingPrefix.Error()},
		{"0x" + repeat("zz", 20), ErrSyntax.Error()},
	}
	for _, tt := range tests {
		var out [20]byte
		err := UnmarshalFixedText("common.Address", []byte(tt.in), out[:])
		if got := errString(err); got != tt.err {
			t.Errorf("UnmarshalFixedText(%q) error = %q, want %q", tt.in, got, tt.err)
		}
		var le *LengthError
		if strings.HasPrefix(tt.err, "hex string has length") && (!errors.As(err, &le) || le.TypeName != "common.Address") {
			t.Errorf("UnmarshalFixedText(%q) error %v, want a *LengthError naming common.Address", tt.in, err)
		}
	}
}
