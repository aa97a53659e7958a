package blockrpc_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/blockrpc/blockrpc"
)

// checkAnswerObject checks one JSON-RPC answer object: jsonrpc "2.0", an
// id that is neither an object nor an array, and exactly one of result and
// error, the error with an integer code and a message.
func checkAnswerObject(t *testing.T, raw json.RawMessage) {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		t.Fatalf("answer %s is not an object: %v", raw, err)
	}
	for name := range members {
		switch name {
		case "jsonrpc", "id", "result", "error":
		default:
			t.Errorf("answer %.300s has an unknown member %q", raw, name)
		}
	}
	if string(members["jsonrpc"]) != `"2.0"` {
		t.Errorf("answer %.300s: jsonrpc is %s, want \"2.0\"", raw, members["jsonrpc"])
	}
	id, ok := members["id"]
	if !ok {
		t.Errorf("answer %.300s has no id", raw)
	} else if id[0] == '{' || id[0] == '[' {
		t.Errorf("answer %.300s has id %s", raw, id)
	}
	_, hasResult := members["result"]
	rawErr, hasError := members["error"]
	if hasResult == hasError {
		t.Fatalf("answer %.300s: has result %v and error %v, want exactly one", raw, hasResult, hasError)
	}
	if hasError {
		var e struct {
			Code    *int    `json:"code"`
			Message *string `json:"message"`
		}
		if err := json.Unmarshal(rawErr, &e); err != nil || e.Code == nil || e.Message == nil || *e.Message == "" {
			t.Errorf("answer %.300s: error %s wants an integer code and a message (%v)", raw, rawErr, err)
		}
	}
}

// fuzzSeeds are request bodies, valid and not, single and batched.
var fuzzSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}`,
	`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",true]}`,
	`{"jsonrpc":"2.0","id":"a","method":"eth_getBlockByNumber","params":["pending",true]}`,
	`{"jsonrpc":"2.0","id":1.50,"method":"eth_getBlockByNumber","params":["earliest",false]}`,
	`{"jsonrpc":"2.0","id":null,"method":"eth_getBlockByNumber","params":["safe",false]}`,
	`{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByHash","params":["0x0000000000000000000000000000000000000000000000000000000000000000",true]}`,
	`{"jsonrpc":"2.0","id":3,"method":"eth_getUncleByBlockHashAndIndex","params":["0x0000000000000000000000000000000000000000000000000000000000000000","0x0"]}`,
	`{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]}`,
	`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x01",true,3]}`,
	`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":{"a":1}}`,
	`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber"}`,
	`{"jsonrpc":"2.0","id":{},"method":"eth_foo"}`,
	`{"jsonrpc":"1.0","id":[1],"method":"eth_foo"}`,
	`{"JSONRPC":"2.0","ID":1,"METHOD":"eth_getBlock\u0042yNumber","params":["latest",false]}`,
	`{"jsonrpc":"2.0","id":"\"\\","method":"eth_\u0000"}`,
	`[{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]},{"jsonrpc":"2.0","method":"eth_foo"},1,null,"x",[]]`,
	`[{"jsonrpc":"2.0","method":"eth_foo"}]`,
	`[{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x0",true]},{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["0x1",true]},{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["0x2",true]},{"jsonrpc":"2.0","id":4,"method":"eth_getBlockByNumber","params":["0x3",true]},{"jsonrpc":"2.0","id":5,"method":"eth_getBlockByNumber","params":["pending",true]},{"jsonrpc":"2.0","id":6,"method":"eth_getBlockByNumber","params":["latest",true]}]`,
	`[]`,
	` [ ] `,
	`[[[]]]`,
	``,
	`{`,
	`null`,
	`1`,
	`"x"`,
	"\t{\"jsonrpc\" : \"2.0\" , \"id\" : 1e3 , \"method\" : \"eth_getBlockByNumber\" , \"params\" : [ \"0XA\" , false ] }\n",
}

// FuzzHandler sends any body to the handler: it must never panic, always
// answer 200 with an empty body or valid JSON, and every answer object must
// be a well-formed JSON-RPC answer.
func FuzzHandler(f *testing.F) {
	c := newTestChain(f)
	// Small limits, so that the fuzzer reaches them.
	h := newHandler(c.store, blockrpc.WithBatchLimit(5), blockrpc.WithResponseLimit(4096))
	for _, seed := range fuzzSeeds {
		f.Add([]byte(seed))
	}
	hash := c.blocks[3].Hash.String()
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"eth_getUncleByBlockHashAndIndex","params":["` + hash + `","0x0"]}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByHash","params":["` + hash + `",true]},{"jsonrpc":"2.0","id":2,"method":"eth_getUncleByBlockHashAndIndex","params":["` + hash + `","0x1"]}]`))

	f.Fuzz(func(t *testing.T, body []byte) {
		rec := serveBody(h, body)
		out := rec.Body.Bytes()
		if rec.Code != http.StatusOK {
			t.Fatalf("body %q: status %d, want 200; answer %s", body, rec.Code, out)
		}
		if len(out) == 0 {
			return // notifications only
		}
		if !json.Valid(out) {
			t.Fatalf("body %q: answer %q is not valid JSON", body, out)
		}
		out = bytes.TrimSpace(out)
		if out[0] != '[' {
			checkAnswerObject(t, out)
			return
		}
		if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '[' {
			t.Fatalf("body %q is no batch, but the answer %.300s is an array", body, out)
		}
		var answers []json.RawMessage
		if err := json.Unmarshal(out, &answers); err != nil {
			t.Fatal(err)
		}
		if len(answers) == 0 {
			t.Fatalf("body %q: the answer is an empty array", body)
		}
		for _, a := range answers {
			checkAnswerObject(t, a)
		}
	})
}

// FuzzParams calls each method with any params value: it must answer with
// a result, or with a -32602 error of go-ethereum's wording. A result comes
// only from an array of exactly two arguments of the right JSON kinds.
func FuzzParams(f *testing.F) {
	c := newTestChain(f)
	h := newHandler(c.store)
	methods := []string{"eth_getBlockByNumber", "eth_getUncleByBlockHashAndIndex", "eth_getBlockByHash"}

	hash := `"` + c.blocks[3].Hash.String() + `"`
	for _, seed := range []struct {
		method uint8
		params string
	}{
		{0, `["latest",false]`},
		{0, `["0x1",true]`},
		{0, `["pending",true]`},
		{0, `["0XA",false]`},
		{0, `["0x01",true]`},
		{0, `["0x8000000000000000",true]`},
		{0, `[5,"true"]`},
		{0, `["latest",null]`},
		{0, `["latest",true,3]`},
		{0, `["latest"]`},
		{0, `[]`},
		{0, `null`},
		{0, `{}`},
		{1, `[` + hash + `,"0x0"]`},
		{1, `[` + hash + `,"0x1"]`},
		{1, `[` + hash + `,"0x01"]`},
		{1, `[` + hash + `,""]`},
		{1, `[` + hash + `,0]`},
		{1, `["0x1234","0x0"]`},
		{1, `[` + hash + `]`},
		{2, `[` + hash + `,true]`},
		{2, `[` + hash + `,false,1]`},
	} {
		f.Add(seed.method, seed.params)
	}

	f.Fuzz(func(t *testing.T, m uint8, params string) {
		if !json.Valid([]byte(params)) {
			t.Skip("params must be JSON to make a request")
		}
		method := methods[int(m)%len(methods)]
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
		rec := serveBody(h, []byte(body))
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d, want 200; answer %s", body, rec.Code, rec.Body)
		}
		a := parseAnswer(t, rec.Body.Bytes())
		if string(a.ID) != "1" {
			t.Errorf("%s: id %s, want 1", body, a.ID)
		}
		if a.Error != nil {
			if a.Result != nil {
				t.Errorf("%s: answer has both a result and an error", body)
			}
			if a.Error.Code != -32602 || !isParamsMessage(a.Error.Message) {
				t.Fatalf("%s: error %d %q, want -32602 with an argument message", body, a.Error.Code, a.Error.Message)
			}
			return
		}
		if a.Result == nil {
			t.Fatalf("%s: answer has neither result nor error", body)
		}

		// A result: the params were two arguments of the right kinds.
		var args []json.RawMessage
		if err := json.Unmarshal([]byte(params), &args); err != nil || len(args) != 2 {
			t.Fatalf("%s: answered with a result, but the params are not an array of two values", body)
		}
		first, second := string(bytes.TrimSpace(args[0])), string(bytes.TrimSpace(args[1]))
		if !strings.HasPrefix(first, `"`) {
			t.Errorf("%s: answered with a result, but argument 0 is not a string", body)
		}
		switch method {
		case "eth_getUncleByBlockHashAndIndex":
			if len(first) != 68 || !strings.HasPrefix(second, `"`) {
				t.Errorf("%s: answered with a result, but the arguments are not a hash and a quantity", body)
			}
		default:
			if second != "true" && second != "false" {
				t.Errorf("%s: answered with a result, but argument 1 is not a boolean", body)
			}
		}
		if string(a.Result) == "null" {
			return
		}
		block, ok := decode(t, a.Result).(map[string]any)
		if !ok {
			t.Fatalf("%s: result %.300s is neither null nor an object", body, a.Result)
		}
		if _, ok := block["totalDifficulty"]; !ok {
			t.Errorf("%s: result has no totalDifficulty member", body)
		}
		_, hasTxs := block["transactions"]
		if wantTxs := method != "eth_getUncleByBlockHashAndIndex"; hasTxs != wantTxs {
			t.Errorf("%s: result has a transactions member: %v, want %v", body, hasTxs, wantTxs)
		}
	})
}

// isParamsMessage reports whether message is one of go-ethereum's messages
// for invalid params.
func isParamsMessage(message string) bool {
	for _, prefix := range []string{"invalid argument 0: ", "invalid argument 1: ", "missing value for required argument ", "too many arguments, want at most 2"} {
		if strings.HasPrefix(message, prefix) {
			return true
		}
	}
	return message == "non-array args"
}
