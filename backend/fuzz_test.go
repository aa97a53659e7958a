package backend_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/google/go-cmp/cmp"
)

// addBlockSeeds adds the synthetic blocks and, when the fixtures are there,
// the smaller real ones to the corpus of f.
func addBlockSeeds(f *testing.F) {
	for _, b := range syntheticBlocks() {
		f.Add(b.AppendJSON(nil, true))
		f.Add(b.AppendJSON(nil, false))
	}
	for _, u := range syntheticUncles() {
		f.Add(u.AppendJSON(nil))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"transactions":[{}]}`))

	paths, _ := filepath.Glob(fixtures.Path(f, "execution-apis", "eth_getBlockBy*", "*.io"))
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		for line := range bytes.Lines(data) {
			if result, ok := bytes.CutPrefix(line, []byte(`<< `)); ok {
				var resp struct{ Result json.RawMessage }
				if json.Unmarshal(result, &resp) == nil && !isNull(resp.Result) {
					f.Add([]byte(resp.Result))
				}
			}
		}
	}
	for _, name := range []string{"eth_getBlockByHash/test_10.json", "eth_getBlockByNumber/test_01.json"} {
		for _, c := range readMainnetCases(f, fixtures.Path(f, "mainnet", name)) {
			f.Add([]byte(c.Response.Result))
		}
	}
}

// FuzzBlockJSON decodes arbitrary bytes as a block object (and as an uncle
// object). Decoding must not panic, and what it accepts must survive
// encoding: the encoding decodes again, to the same value, and encoding that
// gives the same bytes.
func FuzzBlockJSON(f *testing.F) {
	addBlockSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkUncleJSON(t, data)

		var b backend.Block
		if err := b.UnmarshalJSON(data); err != nil {
			return
		}
		if hashes := b.AppendJSON(nil, false); !json.Valid(hashes) {
			t.Fatalf("AppendJSON(nil, false) wrote invalid JSON: %s", hashes)
		}
		enc := b.AppendJSON(nil, true)
		if !json.Valid(enc) {
			t.Fatalf("AppendJSON wrote invalid JSON: %s", enc)
		}
		var again backend.Block
		if err := again.UnmarshalJSON(enc); err != nil {
			t.Fatalf("the encoding of a decoded block does not decode: %v\ninput:    %s\nencoding: %s", err, data, enc)
		}
		if want := lossless(&b, &again); !sameValue(want, &again) {
			t.Fatalf("decode(encode(block)) differs from the block (-decoded +re-decoded):\n%s\ninput:    %s\nencoding: %s", cmp.Diff(want, &again, equateEmpty), data, enc)
		}
		if enc2 := again.AppendJSON(nil, true); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not a fixed point; %s", firstDifference(enc2, enc))
		}
	})
}

func checkUncleJSON(t *testing.T, data []byte) {
	var u backend.Uncle
	if err := u.UnmarshalJSON(data); err != nil {
		return
	}
	enc := u.AppendJSON(nil)
	var again backend.Uncle
	if err := again.UnmarshalJSON(enc); err != nil {
		t.Fatalf("the encoding of a decoded uncle does not decode: %v\ninput:    %s\nencoding: %s", err, data, enc)
	}
	if !sameValue(&u, &again) {
		t.Fatalf("decode(encode(uncle)) differs from the uncle (-decoded +re-decoded):\n%s\ninput: %s", cmp.Diff(&u, &again, equateEmpty), data)
	}
}

// sameValue is cmp.Equal(a, b, equateEmpty) at the speed of
// reflect.DeepEqual, which a fuzz target needs: empty slices are made nil
// in copies of both first. go-cmp is left to explain a difference.
func sameValue[T any](a, b *T) bool {
	ca, cb := *a, *b
	nilEmptySlices(reflect.ValueOf(&ca).Elem())
	nilEmptySlices(reflect.ValueOf(&cb).Elem())
	return reflect.DeepEqual(ca, cb)
}

// nilEmptySlices sets every empty slice reachable from v to nil, copying
// what it changes below pointers so the original is left alone.
func nilEmptySlices(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			c := reflect.New(v.Elem().Type())
			c.Elem().Set(v.Elem())
			nilEmptySlices(c.Elem())
			v.Set(c)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		for i := range c.Len() {
			nilEmptySlices(c.Index(i))
		}
		v.Set(c)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				nilEmptySlices(v.Field(i))
			}
		}
	}
}

// lossless returns the part of b that the wire form keeps: what the block
// object of the pending block leaves null, and the gas price of a fee-market
// transaction, which the encoder derives (the effective price in a mined
// block, the fee cap outside one), are taken from the re-decoded block.
func lossless(b, again *backend.Block) *backend.Block {
	c := b.Copy()
	if c.Pending {
		c.Number, c.Nonce, c.LogsBloom = 0, backend.Nonce{}, backend.Bloom{}
	}
	for i, tx := range c.Transactions {
		if tx.Type >= backend.DynamicFeeTxType && i < len(again.Transactions) {
			tx.GasPrice = again.Transactions[i].GasPrice
		}
	}
	return c
}

// FuzzBlockNumber parses arbitrary strings as block numbers: no panic, and a
// parsed value prints as the canonical form of its input, which parses back
// to the same value.
func FuzzBlockNumber(f *testing.F) {
	for _, tc := range blockNumberCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := backend.ParseBlockNumber(s)

		// A JSON string holding s reads the same, when s needs no escapes.
		if quoted := strconv.Quote(s); quoted == `"`+s+`"` {
			var fromJSON backend.BlockNumber
			jsonErr := fromJSON.UnmarshalJSON([]byte(quoted))
			if jsonErr != err || fromJSON != n {
				t.Fatalf("ParseBlockNumber(%q) = %d, %v but UnmarshalJSON(%s) = %d, %v", s, int64(n), err, quoted, int64(fromJSON), jsonErr)
			}
		}
		if err != nil {
			return
		}
		str := n.String()
		back, err := backend.ParseBlockNumber(str)
		if err != nil || back != n {
			t.Fatalf("ParseBlockNumber(%q) = %d, whose String %q parses to %d, %v", s, int64(n), str, int64(back), err)
		}
		if v, ok := n.Uint64(); ok {
			// A number: the canonical hex, up to the case of digits and
			// prefix, and the value strconv reads.
			if !strings.EqualFold(str, s) {
				t.Fatalf("ParseBlockNumber accepted %q, which is not the canonical %q", s, str)
			}
			if want, err := strconv.ParseUint(s[2:], 16, 63); err != nil || want != v {
				t.Fatalf("ParseBlockNumber(%q) = %d; strconv reads %d, %v", s, v, want, err)
			}
		} else if str != s {
			t.Fatalf("ParseBlockNumber(%q) = tag %q", s, str)
		}
	})
}
