package blockrpc_test

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// paramCase is a params value and the -32602 message it gets, or "" when it
// is accepted.
type paramCase struct {
	params string // "" leaves the member out
	want   string
}

func runParamCases(t *testing.T, srv *httptest.Server, method string, cases []paramCase) {
	t.Helper()
	for _, tc := range cases {
		name := tc.params
		if name == "" {
			name = "no params"
		}
		t.Run(name, func(t *testing.T) {
			a := call(t, srv, rpcRequest(method, tc.params))
			if string(a.ID) != "1" {
				t.Errorf("id %s, want 1", a.ID)
			}
			if tc.want != "" {
				checkError(t, a, -32602, tc.want)
				return
			}
			if a.Error != nil {
				t.Errorf("params %s: error %d %q, want them accepted", tc.params, a.Error.Code, a.Error.Message)
			}
		})
	}
}

func TestParamsGetBlockByNumber(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	runParamCases(t, srv, "eth_getBlockByNumber", []paramCase{
		{`["0xA",false]`, ""},
		{`["0XA",false]`, ""},
		{`["0xa",true]`, ""},
		{`["0x0",true]`, ""},
		{`["0x7fffffffffffffff",false]`, ""},
		{`["latest",false]`, ""},
		{`["earliest",false]`, ""},
		{`["pending",false]`, ""},
		{`["safe",false]`, ""},
		{`["finalized",false]`, ""},
		{`[ "latest" , true ]`, ""},
		{`["0x01",false]`, "invalid argument 0: hex number with leading zero digits"},
		{`["0x00",false]`, "invalid argument 0: hex number with leading zero digits"},
		{`["0x",false]`, `invalid argument 0: hex string "0x"`},
		{`["",false]`, "invalid argument 0: empty hex string"},
		{`["10",false]`, "invalid argument 0: hex string without 0x prefix"},
		{`["0xg",false]`, "invalid argument 0: invalid hex string"},
		{`["0x1g",false]`, "invalid argument 0: invalid hex string"},
		{`["0x8000000000000000",false]`, "invalid argument 0: block number larger than int64"},
		{`["0xffffffffffffffff",false]`, "invalid argument 0: block number larger than int64"},
		{`["0x10000000000000000",false]`, "invalid argument 0: hex number > 64 bits"},
		{`[5,false]`, "invalid argument 0: hex string without 0x prefix"},
		{`[null,false]`, "invalid argument 0: hex string without 0x prefix"},
		{`["Latest",false]`, "invalid argument 0: hex string without 0x prefix"},
		{`["LATEST",false]`, "invalid argument 0: hex string without 0x prefix"},
		{`[" latest",false]`, "invalid argument 0: hex string without 0x prefix"},
		{`["latest","true"]`, "invalid argument 1: json: cannot unmarshal string into Go value of type bool"},
		{`["latest",null]`, "invalid argument 1: json: cannot unmarshal null into Go value of type bool"},
		{`["latest",1]`, "invalid argument 1: json: cannot unmarshal number into Go value of type bool"},
		{`["latest",0]`, "invalid argument 1: json: cannot unmarshal number into Go value of type bool"},
		{`["latest",{}]`, "invalid argument 1: json: cannot unmarshal object into Go value of type bool"},
		{`["latest",[true]]`, "invalid argument 1: json: cannot unmarshal array into Go value of type bool"},
		{``, "missing value for required argument 0"},
		{`null`, "missing value for required argument 0"},
		{`[]`, "missing value for required argument 0"},
		{`["latest"]`, "missing value for required argument 1"},
		{`["latest",true,3]`, "too many arguments, want at most 2"},
		{`["latest",true,null]`, "too many arguments, want at most 2"},
		{`{"0":"latest","1":true}`, "non-array args"},
		{`"latest"`, "non-array args"},
		{`["0x01",true,3]`, "invalid argument 0: hex number with leading zero digits"},
		{`["latest","x",3]`, "invalid argument 1: json: cannot unmarshal string into Go value of type bool"},
	})
}

func TestParamsGetUncleByBlockHashAndIndex(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	hash := `"` + c.blocks[3].Hash.String() + `"`
	short := `"` + c.blocks[3].Hash.String()[:64] + `"` // 62 digits
	noPrefix := `"` + c.blocks[3].Hash.String()[2:] + `"`
	upper := `"0x` + strings.ToUpper(c.blocks[3].Hash.String()[2:]) + `"`
	notHex := `"0x` + strings.Repeat("zz", 32) + `"`
	runParamCases(t, srv, "eth_getUncleByBlockHashAndIndex", []paramCase{
		{`[` + hash + `,"0x0"]`, ""},
		{`[` + hash + `,"0X0"]`, ""},
		{`[` + hash + `,"0x1"]`, ""},
		{`[` + upper + `,"0x0"]`, ""},
		{`[` + hash + `,"0xffffffffffffffff"]`, ""},
		{`[` + short + `,"0x0"]`, "invalid argument 0: hex string has length 62, want 64 for common.Hash"},
		{`[` + noPrefix + `,"0x0"]`, "invalid argument 0: json: cannot unmarshal hex string without 0x prefix into Go value of type common.Hash"},
		{`[` + notHex + `,"0x0"]`, "invalid argument 0: json: cannot unmarshal invalid hex string into Go value of type common.Hash"},
		{`["0x123","0x0"]`, "invalid argument 0: json: cannot unmarshal hex string of odd length into Go value of type common.Hash"},
		{`[1,"0x0"]`, "invalid argument 0: json: cannot unmarshal non-string into Go value of type common.Hash"},
		{`[` + hash + `,"0x01"]`, "invalid argument 1: json: cannot unmarshal hex number with leading zero digits into Go value of type hexutil.Uint"},
		{`[` + hash + `,"0x"]`, `invalid argument 1: json: cannot unmarshal hex string "0x" into Go value of type hexutil.Uint`},
		{`[` + hash + `,""]`, "invalid argument 1: json: cannot unmarshal empty hex string into Go value of type hexutil.Uint"},
		{`[` + hash + `,"1"]`, "invalid argument 1: json: cannot unmarshal hex string without 0x prefix into Go value of type hexutil.Uint"},
		{`[` + hash + `,"0xg"]`, "invalid argument 1: json: cannot unmarshal invalid hex string into Go value of type hexutil.Uint"},
		{`[` + hash + `,"0x10000000000000000"]`, "invalid argument 1: json: cannot unmarshal hex number > 64 bits into Go value of type hexutil.Uint"},
		{`[` + hash + `,0]`, "invalid argument 1: json: cannot unmarshal non-string into Go value of type hexutil.Uint"},
		{`[` + hash + `,null]`, "invalid argument 1: json: cannot unmarshal non-string into Go value of type hexutil.Uint"},
		{``, "missing value for required argument 0"},
		{`[]`, "missing value for required argument 0"},
		{`[` + hash + `]`, "missing value for required argument 1"},
		{`[` + hash + `,"0x0","0x0"]`, "too many arguments, want at most 2"},
		{`{"hash":` + hash + `}`, "non-array args"},
		{`[` + short + `,"0x0",3]`, "invalid argument 0: hex string has length 62, want 64 for common.Hash"},
	})
}

// TestUncleIndexErrorsNotHeldBack checks that an index that is not a hex
// quantity is refused for what it is, before the arguments are counted, as
// go-ethereum refuses it: only the empty index, which go-ethereum takes for
// 0, is refused after every other check.
func TestUncleIndexErrorsNotHeldBack(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, tc := range []struct{ params, message string }{
		{`["0x3","0xz",true]`, "invalid argument 1: json: cannot unmarshal invalid hex string into Go value of type hexutil.Uint"},
		{`["0x3",5,true]`, "invalid argument 1: json: cannot unmarshal non-string into Go value of type hexutil.Uint"},
		{`["0x3","",true]`, "too many arguments, want at most 2"},
	} {
		a := call(t, srv, rpcRequest("eth_getUncleByBlockNumberAndIndex", tc.params))
		checkError(t, a, -32602, tc.message)
	}
}
