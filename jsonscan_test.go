package blockrpc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestValueEnd(t *testing.T) {
	for _, tc := range []struct {
		data string
		want string // the value that starts at the first byte
	}{
		{`"abc",1`, `"abc"`},
		{`"a\"b\\",1`, `"a\"b\\"`},
		{`{"a":[1,{"b":"}"}]} tail`, `{"a":[1,{"b":"}"}]}`},
		{`[[],[[]]],`, `[[],[[]]]`},
		{`123]`, `123`},
		{`-1.5e3}`, `-1.5e3`},
		{`true ,`, `true`},
		{`null`, `null`},
		{`[` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `]x`, `[` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `]`},
		{`"unterminated`, `"unterminated`},
		{`[1,2`, `[1,2`},
	} {
		if got := tc.data[:valueEnd([]byte(tc.data), 0)]; got != tc.want {
			t.Errorf("valueEnd(%.40q) ends the value at %.40q, want %.40q", tc.data, got, tc.want)
		}
	}
}

func TestNextMember(t *testing.T) {
	data := []byte(`[1 , 2,3 ]`)
	var got []string
	for i := skipSpace(data, 1); data[i] != ']'; {
		end := valueEnd(data, i)
		got = append(got, string(data[i:end]))
		i = nextMember(data, end)
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("elements %q, want [1 2 3]", got)
	}
}

func TestStringText(t *testing.T) {
	for raw, want := range map[string]string{
		`"plain"`:          "plain",
		`"esc\u0061ped\n"`: "escaped\n",
		`""`:               "",
		`12`:               "",
		`null`:             "",
	} {
		if got := decodeString([]byte(raw)); got != want {
			t.Errorf("decodeString(%s) = %q, want %q", raw, got, want)
		}
	}
}

// TestParseRequest checks that members are found as encoding/json finds
// them: case-insensitively, with escaped names, the last one winning.
func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		raw                         string
		version, method, id, params string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":[]}`, `"2.0"`, `"m"`, `1`, `[]`},
		{`{ "JSONRPC" : "2.0" , "Method":"m", "ID":"x" }`, `"2.0"`, `"m"`, `"x"`, ``},
		{`{"jſonrpc":"2.0","method":"a","method":"b"}`, `"2.0"`, `"b"`, ``, ``},
		{`{"\u006dethod":"m","id":null,"params":{"a":[1]}}`, ``, `"m"`, `null`, `{"a":[1]}`},
		{`{}`, ``, ``, ``, ``},
	} {
		q, ok := parseRequest([]byte(tc.raw))
		if !ok {
			t.Errorf("parseRequest(%s): not an object", tc.raw)
			continue
		}
		got := [4]string{string(q.version), string(q.method), string(q.id), string(q.params)}
		if want := [4]string{tc.version, tc.method, tc.id, tc.params}; got != want {
			t.Errorf("parseRequest(%s) = %q, want %q", tc.raw, got, want)
		}
	}
	for _, raw := range []string{`[]`, `"x"`, `1`, ``} {
		if _, ok := parseRequest([]byte(raw)); ok {
			t.Errorf("parseRequest(%s) took a non-object for a request", raw)
		}
	}
}

// TestReadParamsOrder checks that parameter errors come in go-ethereum's
// order: each argument in turn, then the count, and only then a refusal
// that go-ethereum would not make (it takes null for false).
func TestReadParamsOrder(t *testing.T) {
	read := func(params string) string {
		var a, b jsonBool
		if err := readParams([]byte(params), a.UnmarshalJSON, b.UnmarshalJSON); err != nil {
			return err.Error()
		}
		return ""
	}
	for params, want := range map[string]string{
		`[true,false]`:      "",
		`[null,true]`:       "invalid argument 0: json: cannot unmarshal null into Go value of type bool",
		`[null,null,null]`:  "too many arguments, want at most 2",
		`[true,null,1]`:     "too many arguments, want at most 2",
		`[null,1]`:          "invalid argument 1: json: cannot unmarshal number into Go value of type bool",
		`[1,null]`:          "invalid argument 0: json: cannot unmarshal number into Go value of type bool",
		`[null]`:            "missing value for required argument 1",
		`[]`:                "missing value for required argument 0",
		`null`:              "missing value for required argument 0",
		`{}`:                "non-array args",
		`[true, false, {}]`: "too many arguments, want at most 2",
	} {
		if got := read(params); got != want {
			t.Errorf("params %s: %q, want %q", params, got, want)
		}
	}
}

// BenchmarkReadRequest measures the hand-written request reader against
// encoding/json decoding the same request into raw members, both after the
// body has been checked with json.Valid. The reader stays only while it is
// faster.
func BenchmarkReadRequest(b *testing.B) {
	raw := []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x112A880",true]}`)
	b.Run("slicing", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			q, name, kind := classify(raw)
			if kind != call || len(name) == 0 || q.params == nil {
				b.Fatal("not a call")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var q struct {
				Version string          `json:"jsonrpc"`
				Method  string          `json:"method"`
				ID      json.RawMessage `json:"id"`
				Params  json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(raw, &q); err != nil || q.Method == "" {
				b.Fatal(err)
			}
		}
	})
}
