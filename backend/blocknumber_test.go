package backend_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
)

// blockNumberCases are the wire forms of block numbers, with what they
// parse to or the error they give.
var blockNumberCases = []struct {
	in   string
	want backend.BlockNumber
	err  error
}{
	{in: "latest", want: backend.Latest},
	{in: "earliest", want: backend.Earliest},
	{in: "safe", want: backend.Safe},
	{in: "finalized", want: backend.Finalized},
	{in: "pending", want: backend.Pending},
	{in: "0x0", want: 0},
	{in: "0x1", want: 1},
	{in: "0xa", want: 10},
	{in: "0xA", want: 10},
	{in: "0XA", want: 10},
	{in: "0x112a880", want: 18_000_000},
	{in: "0x7fffffffffffffff", want: math.MaxInt64},

	{in: "0x8000000000000000", err: backend.ErrBlockNumberRange},
	{in: "0xffffffffffffffff", err: backend.ErrBlockNumberRange},
	{in: "0x10000000000000000", err: hexutil.ErrUint64Range},
	{in: "0x01", err: hexutil.ErrLeadingZero},
	{in: "0x00", err: hexutil.ErrLeadingZero},
	{in: "0x", err: hexutil.ErrEmptyNumber},
	{in: "", err: hexutil.ErrEmptyString},
	{in: "10", err: hexutil.ErrMissingPrefix},
	{in: "0xg", err: hexutil.ErrSyntax},
	{in: "0x1 ", err: hexutil.ErrSyntax},
	{in: "-0x1", err: hexutil.ErrMissingPrefix},
	{in: "Latest", err: hexutil.ErrMissingPrefix}, // tags are case-sensitive, as in go-ethereum
	{in: "latest ", err: hexutil.ErrMissingPrefix},
}

func TestParseBlockNumber(t *testing.T) {
	for _, tc := range blockNumberCases {
		got, err := backend.ParseBlockNumber(tc.in)
		if err != tc.err || got != tc.want {
			t.Errorf("ParseBlockNumber(%q) = %v, %v; want %v, %v", tc.in, int64(got), err, int64(tc.want), tc.err)
		}
	}
	if _, err := backend.ParseBlockNumber("0x8000000000000000"); err == nil || err.Error() != "block number larger than int64" {
		t.Errorf("error above int64: %v, want %q", err, "block number larger than int64")
	}
}

func TestBlockNumberUnmarshalJSON(t *testing.T) {
	for _, tc := range blockNumberCases {
		quoted, _ := json.Marshal(tc.in)
		var got backend.BlockNumber
		err := json.Unmarshal(quoted, &got)
		if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) || got != tc.want {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v, %v", quoted, int64(got), err, int64(tc.want), tc.err)
		}

		var text backend.BlockNumber
		err = text.UnmarshalText([]byte(tc.in))
		if err != tc.err || text != tc.want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v, %v", tc.in, int64(text), err, int64(tc.want), tc.err)
		}
	}

	// Values that are not strings are read as they stand, so a number gets
	// the hex error a go-ethereum client knows.
	for _, tc := range []struct {
		in      string
		message string
	}{
		{`5`, "hex string without 0x prefix"},
		{`0`, "hex string without 0x prefix"},
		{`null`, "hex string without 0x prefix"},
		{`true`, "hex string without 0x prefix"},
		{`"0x8000000000000000"`, "block number larger than int64"},
		{`"0x10000000000000000"`, "hex number > 64 bits"},
	} {
		n := backend.BlockNumber(42)
		err := n.UnmarshalJSON([]byte(tc.in))
		if err == nil || err.Error() != tc.message {
			t.Errorf("UnmarshalJSON(%s): error %v, want %q", tc.in, err, tc.message)
		}
		if n != 42 {
			t.Errorf("UnmarshalJSON(%s) failed but changed the value to %d", tc.in, int64(n))
		}
	}

	// Inside a request's params.
	var params struct {
		Block backend.BlockNumber `json:"block"`
	}
	if err := json.Unmarshal([]byte(`{"block":"finalized"}`), &params); err != nil || params.Block != backend.Finalized {
		t.Errorf(`{"block":"finalized"} decoded to %v, %v`, params.Block, err)
	}
	if err := json.Unmarshal([]byte(`{"block":12}`), &params); err == nil || !strings.Contains(err.Error(), "hex string without 0x prefix") {
		t.Errorf(`{"block":12}: error %v, want one about the missing 0x prefix`, err)
	}
}

func TestBlockNumberString(t *testing.T) {
	for _, tc := range []struct {
		n    backend.BlockNumber
		want string
	}{
		{backend.Latest, "latest"},
		{backend.Earliest, "earliest"},
		{backend.Safe, "safe"},
		{backend.Finalized, "finalized"},
		{backend.Pending, "pending"},
		{0, "0x0"},
		{10, "0xa"},
		{18_000_000, "0x112a880"},
		{math.MaxInt64, "0x7fffffffffffffff"},
		{-6, "BlockNumber(-6)"},
		{math.MinInt64, "BlockNumber(-9223372036854775808)"},
	} {
		if got := tc.n.String(); got != tc.want {
			t.Errorf("BlockNumber(%d).String() = %q, want %q", int64(tc.n), got, tc.want)
		}
		text, err := tc.n.MarshalText()
		if err != nil || string(text) != tc.want {
			t.Errorf("BlockNumber(%d).MarshalText() = %q, %v; want %q", int64(tc.n), text, err, tc.want)
		}
		if tc.n < backend.Earliest {
			continue // not a block number anyone can send
		}
		data, err := json.Marshal(tc.n)
		if err != nil {
			t.Fatal(err)
		}
		var back backend.BlockNumber
		if err := json.Unmarshal(data, &back); err != nil || back != tc.n {
			t.Errorf("BlockNumber(%d) encodes as %s, which decodes to %d, %v", int64(tc.n), data, int64(back), err)
		}
	}
}

func TestBlockNumberUint64(t *testing.T) {
	for _, tc := range []struct {
		n    backend.BlockNumber
		want uint64
		ok   bool
	}{
		{0, 0, true},
		{5, 5, true},
		{math.MaxInt64, math.MaxInt64, true},
		{backend.Latest, 0, false},
		{backend.Pending, 0, false},
		{backend.Earliest, 0, false},
		{backend.Safe, 0, false},
		{backend.Finalized, 0, false},
	} {
		if got, ok := tc.n.Uint64(); got != tc.want || ok != tc.ok {
			t.Errorf("%v.Uint64() = %d, %t; want %d, %t", tc.n, got, ok, tc.want, tc.ok)
		}
	}
}

const hash64 = "0x9242685bf161793cc25603c231bc2f568eb630ea16aa137d2664ac8038825608"

func TestParseHash(t *testing.T) {
	h, err := backend.ParseHash(hash64)
	if err != nil || h.String() != hash64 {
		t.Errorf("ParseHash(%s) = %v, %v", hash64, h, err)
	}
	if h, err := backend.ParseHash(strings.ToUpper(hash64[2:])); err == nil {
		t.Errorf("ParseHash without 0x = %v, want an error", h)
	}
	if h, err := backend.ParseHash("0X" + strings.ToUpper(hash64[2:])); err != nil || h.String() != hash64 {
		t.Errorf("ParseHash(upper case) = %v, %v; want %s", h, err, hash64)
	}
	for _, tc := range []struct{ in, message string }{
		{hash64[:64], "hex string has length 62, want 64"},
		{hash64 + "00", "hex string has length 66, want 64"},
		{"", "hex string has length 0, want 64"},
		{"0x", "hex string has length 0, want 64"},
		{hash64[:65], "hex string of odd length"},
		{hash64[2:], "hex string without 0x prefix"},
		{hash64[:65] + "g", "invalid hex string"},
	} {
		if _, err := backend.ParseHash(tc.in); err == nil || err.Error() != tc.message {
			t.Errorf("ParseHash(%q): error %v, want %q", tc.in, err, tc.message)
		}
	}

	const addr = "0x8ba1f109551bd432803012645ac136ddd64dba72"
	if a, err := backend.ParseAddress(addr); err != nil || a.String() != addr {
		t.Errorf("ParseAddress(%s) = %v, %v", addr, a, err)
	}
	if _, err := backend.ParseAddress(hash64); err == nil || err.Error() != "hex string has length 64, want 40" {
		t.Errorf("ParseAddress(a hash): error %v, want %q", err, "hex string has length 64, want 40")
	}
}

func TestFixedTypesJSON(t *testing.T) {
	var h backend.Hash
	if err := json.Unmarshal([]byte(`"`+hash64+`"`), &h); err != nil || h.String() != hash64 {
		t.Errorf("Hash from JSON = %v, %v", h, err)
	}
	if data, err := json.Marshal(h); err != nil || string(data) != `"`+hash64+`"` {
		t.Errorf("Hash to JSON = %s, %v", data, err)
	}
	if data, err := json.Marshal(backend.Address{19: 0xab}); err != nil || string(data) != `"0x00000000000000000000000000000000000000ab"` {
		t.Errorf("Address to JSON = %s, %v", data, err)
	}
	if data, err := json.Marshal(backend.Nonce{7: 0x42}); err != nil || string(data) != `"0x0000000000000042"` {
		t.Errorf("Nonce to JSON = %s, %v", data, err)
	}

	for _, tc := range []struct {
		name    string
		target  json.Unmarshaler
		in      string
		message string
	}{
		{"short hash", new(backend.Hash), `"` + hash64[:64] + `"`, "hex string has length 62, want 64 for backend.Hash"},
		{"number as hash", new(backend.Hash), `5`, "json: cannot unmarshal non-string into Go value of type backend.Hash"},
		{"null hash", new(backend.Hash), `null`, "json: cannot unmarshal non-string into Go value of type backend.Hash"},
		{"bad digit in hash", new(backend.Hash), `"` + hash64[:65] + `x"`, "json: cannot unmarshal invalid hex string into Go value of type backend.Hash"},
		{"hash without prefix", new(backend.Hash), `"` + hash64[2:] + `"`, "json: cannot unmarshal hex string without 0x prefix into Go value of type backend.Hash"},
		{"hash as address", new(backend.Address), `"` + hash64 + `"`, "hex string has length 64, want 40 for backend.Address"},
		{"number as address", new(backend.Address), `1`, "json: cannot unmarshal non-string into Go value of type backend.Address"},
		{"short bloom", new(backend.Bloom), `"0x00"`, "hex string has length 2, want 512 for backend.Bloom"},
		{"long nonce", new(backend.Nonce), `"0x000000000000000042"`, "hex string has length 18, want 16 for backend.Nonce"},
	} {
		if err := tc.target.UnmarshalJSON([]byte(tc.in)); err == nil || err.Error() != tc.message {
			t.Errorf("%s: UnmarshalJSON(%s): error %v, want %q", tc.name, tc.in, err, tc.message)
		}
	}

	// Through encoding/json, a length error keeps its own message.
	var lengthErr *hexutil.LengthError
	if err := json.Unmarshal([]byte(`"0x00"`), &h); !errors.As(err, &lengthErr) || lengthErr.Digits != 2 || lengthErr.Want != 64 {
		t.Errorf(`Unmarshal("0x00") into a Hash: error %v, want a LengthError for 2 of 64 digits`, err)
	}
}
