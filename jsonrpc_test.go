package blockrpc_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/google/go-cmp/cmp"
)

// The JSON-RPC envelope: errors, members, ids, notifications and batches.

func TestEnvelopeErrors(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	const params = `,"params":["latest",false]`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"invalid JSON", `{"jsonrpc":"2.0",`, errorAnswer("null", -32700, "parse error")},
		{"empty body", ``, errorAnswer("null", -32700, "parse error")},
		{"only whitespace", " \n\t", errorAnswer("null", -32700, "parse error")},
		{"two values: the first is answered", `{} {}`, errorAnswer("null", -32600, "invalid request")},
		{"unterminated batch", `[{"jsonrpc":"2.0","id":1,"method":"eth_foo"}`, errorAnswer("null", -32700, "parse error")},
		{"number", `1`, errorAnswer("null", -32600, "invalid request")},
		{"string", `"x"`, errorAnswer("null", -32600, "invalid request")},
		{"null", `null`, errorAnswer("null", -32600, "invalid request")},
		{"boolean", `true`, errorAnswer("null", -32600, "invalid request")},
		// A number or literal ends where its grammar does, as go-ethereum's
		// json.Decoder reads it; one the grammar cannot end is no JSON.
		{"number and what follows", `1x`, errorAnswer("null", -32600, "invalid request")},
		{"number with a leading zero", `01`, errorAnswer("null", -32600, "invalid request")},
		{"literal and what follows", `true{}`, errorAnswer("null", -32600, "invalid request")},
		{"null and what follows", `null[`, errorAnswer("null", -32600, "invalid request")},
		{"number without its decimals", `1.x`, errorAnswer("null", -32700, "parse error")},
		{"number without its exponent", `1e+`, errorAnswer("null", -32700, "parse error")},
		{"minus alone", `-x`, errorAnswer("null", -32700, "parse error")},
		{"literal cut short", `tru`, errorAnswer("null", -32700, "parse error")},
		{"empty object", `{}`, errorAnswer("null", -32600, "invalid request")},
		{"missing jsonrpc", `{"id":7,"method":"eth_getBlockByNumber"` + params + `}`, errorAnswer("7", -32600, "invalid request")},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":7,"method":"eth_getBlockByNumber"` + params + `}`, errorAnswer("7", -32600, "invalid request")},
		{"jsonrpc as a number", `{"jsonrpc":2.0,"id":"seven","method":"eth_getBlockByNumber"` + params + `}`, errorAnswer(`"seven"`, -32600, "invalid request")},
		{"missing method", `{"jsonrpc":"2.0","id":7` + params + `}`, errorAnswer("7", -32600, "invalid request")},
		{"method not a string", `{"jsonrpc":"2.0","id":7,"method":1` + params + `}`, errorAnswer("7", -32600, "invalid request")},
		{"empty method", `{"jsonrpc":"2.0","id":7,"method":""` + params + `}`, errorAnswer("7", -32600, "invalid request")},
		{"notification without jsonrpc", `{"method":"eth_getBlockByNumber"` + params + `}`, errorAnswer("null", -32600, "invalid request")},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"eth_getBlockByNumber"` + params + `}`, errorAnswer("null", -32600, "invalid request")},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"eth_getBlockByNumber"` + params + `}`, errorAnswer("null", -32600, "invalid request")},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"eth_foo"` + params + `}`, errorAnswer("7", -32601, "the method eth_foo does not exist/is not available")},
		{"method name in another case", `{"jsonrpc":"2.0","id":7,"method":"ETH_GETBLOCKBYNUMBER"` + params + `}`, errorAnswer("7", -32601, "the method ETH_GETBLOCKBYNUMBER does not exist/is not available")},
		{"method name too long", `{"jsonrpc":"2.0","id":7,"method":"` + strings.Repeat("m", 2049) + `"}`, errorAnswer("7", -32600, "method name too long: 2049 > 2048")},
		{"longest method name", `{"jsonrpc":"2.0","id":7,"method":"` + strings.Repeat("m", 2048) + `"}`, errorAnswer("7", -32601, "the method "+strings.Repeat("m", 2048)+" does not exist/is not available")},
		{"method of another namespace", `{"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":[]}`, errorAnswer("7", -32601, "the method eth_getBalance does not exist/is not available")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := post(t, srv, tc.body)
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200; body %s", status, out)
			}
			parseAnswer(t, out) // a single answer object
			if diff := cmp.Diff(decode(t, []byte(tc.want)), decode(t, out)); diff != "" {
				t.Errorf("request %s: answer differs (-want +got):\n%s", tc.body, diff)
			}
		})
	}
}

func TestEnvelopeMembers(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, tc := range []struct {
		name, body string
	}{
		{"member order", `{"params":["0x1",false],"method":"eth_getBlockByNumber","id":1,"jsonrpc":"2.0"}`},
		{"whitespace", " \n{ \"jsonrpc\" : \"2.0\" ,\t\"id\" : 1 , \"method\" : \"eth_getBlockByNumber\" , \"params\" : [ \"0x1\" , false ] }\n"},
		{"keys in another case", `{"JSONRPC":"2.0","Id":1,"Method":"eth_getBlockByNumber","PARAMS":["0x1",false]}`},
		{"escaped method name", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlock\u0042yNumber","params":["0x1",false]}`},
		{"escaped version", `{"jsonrpc":"2\u002e0","id":1,"method":"eth_getBlockByNumber","params":["0x1",false]}`},
		{"unknown members", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",false],"extra":{"x":[1,2]}}`},
		{"last duplicate wins", `{"jsonrpc":"2.0","id":1,"method":"eth_foo","method":"eth_getBlockByNumber","params":["0x1",false]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, srv, tc.body)
			if string(a.ID) != "1" {
				t.Errorf("id %s, want 1", a.ID)
			}
			checkBlockNumber(t, resultObject(t, a), "0x1")
		})
	}
}

func TestEnvelopeIDEcho(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, id := range []string{
		`1`,
		`0`,
		`-7`,
		`1.50`,
		`1e3`,
		`123456789012345678901234567890123456789`,
		`"abc"`,
		`""`,
		`"a \"quoted\" \\ \u00e9 \n word"`,
		`"0x1"`,
		`null`,
		`true`,
	} {
		t.Run(id, func(t *testing.T) {
			a := call(t, srv, `{"jsonrpc":"2.0","id":`+id+`,"method":"eth_getBlockByNumber","params":["latest",false]}`)
			if string(a.ID) != id {
				t.Errorf("id echoed as %s, want %s exactly", a.ID, id)
			}
			checkBlockNumber(t, resultObject(t, a), "0x3")
		})
	}
	// An error answer echoes the id too.
	a := call(t, srv, `{"jsonrpc":"2.0","id":1.50,"method":"eth_foo"}`)
	if string(a.ID) != "1.50" {
		t.Errorf("error answer: id echoed as %s, want 1.50", a.ID)
	}
	checkError(t, a, -32601, "the method eth_foo does not exist/is not available")
}

func TestEnvelopeNotifications(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, tc := range []struct {
		name, body string
	}{
		{"call", `{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]}`},
		{"unknown method", `{"jsonrpc":"2.0","method":"eth_foo"}`},
		{"invalid params", `{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["0x01"]}`},
		{"batch of notifications", `[{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]},{"jsonrpc":"2.0","method":"eth_foo"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := post(t, srv, tc.body)
			if status != http.StatusOK {
				t.Errorf("status %d, want 200", status)
			}
			if len(out) != 0 {
				t.Errorf("a notification was answered: %s", out)
			}
		})
	}
}

func TestBatch(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	const (
		notification = `{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]}`
		unknown      = `{"jsonrpc":"2.0","id":"x","method":"eth_foo"}`
	)
	byNumber := func(id, number string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"eth_getBlockByNumber","params":["` + number + `",false]}`
	}
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{
			name: "answers in request order",
			body: "[" + byNumber("3", "0x2") + "," + byNumber("1", "0x0") + "," + byNumber("2", "0x1") + "]",
			want: []string{"3 result", "1 result", "2 result"},
		},
		{
			name: "notifications omitted",
			body: "[" + notification + "," + byNumber("3", "0x2") + "," + notification + "," + unknown + "," + notification + "]",
			want: []string{"3 result", `"x" error -32601 the method eth_foo does not exist/is not available`},
		},
		{
			name: "elements that are not objects",
			body: `[1, "x", null, true, [], ` + byNumber("5", "0x0") + `]`,
			want: []string{
				"null error -32600 invalid request",
				"null error -32600 invalid request",
				"null error -32600 invalid request",
				"null error -32600 invalid request",
				"null error -32600 invalid request",
				"5 result",
			},
		},
		{
			name: "invalid calls keep their ids",
			body: `[{"id":1,"method":"eth_foo"},{"jsonrpc":"2.0","id":{},"method":"eth_foo"},{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":[]}]`,
			want: []string{
				"1 error -32600 invalid request",
				"null error -32600 invalid request",
				"2 error -32602 missing value for required argument 0",
			},
		},
		{
			name: "single call",
			body: " [ " + byNumber("9", "latest") + " ] ",
			want: []string{"9 result"},
		},
		{
			name: "nested batch",
			body: "[[" + byNumber("1", "latest") + "]]",
			want: []string{"null error -32600 invalid request"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkAnswers(t, tc.body, callBatch(t, srv, tc.body), tc.want)
		})
	}

	t.Run("results match their calls", func(t *testing.T) {
		answers := callBatch(t, srv, "["+byNumber("1", "0x2")+","+byNumber("2", "0x0")+","+byNumber("3", "latest")+"]")
		for i, want := range []string{"0x2", "0x0", "0x3"} {
			checkBlockNumber(t, resultObject(t, answers[i]), want)
		}
	})
	t.Run("empty batch", func(t *testing.T) {
		for _, body := range []string{`[]`, " [ \n ] "} {
			status, out := post(t, srv, body)
			if status != http.StatusOK {
				t.Errorf("status %d, want 200", status)
			}
			// A single error, not an array.
			checkError(t, parseAnswer(t, out), -32600, "empty batch")
			if id := parseAnswer(t, out).ID; string(id) != "null" {
				t.Errorf("id %s, want null", id)
			}
		}
	})
}

func TestBatchLimit(t *testing.T) {
	store := newTestChain(t).store
	// calls is a batch of n calls with the ids 10, 11, ...; results are
	// their answers.
	calls := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["0x0",false]}`, 10+i)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	results := func(n int) []string {
		want := make([]string, n)
		for i := range want {
			want[i] = fmt.Sprintf("%d result", 10+i)
		}
		return want
	}
	const notification = `{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]}`
	tooLarge := func(id string) []string { return []string{id + " error -32600 batch too large"} }
	const defaultLimit = -1

	for _, tc := range []struct {
		name  string
		limit int // defaultLimit keeps the handler's default
		body  string
		want  []string
	}{
		{"at the limit", 2, calls(2), results(2)},
		// The one error takes the id of the first call.
		{"over the limit", 2, calls(3), tooLarge("10")},
		{
			"first call after a notification and an invalid element", 2,
			"[" + notification + `,1,{"jsonrpc":"2.0","id":"first","method":"eth_foo"},{"jsonrpc":"2.0","id":2,"method":"eth_foo"}]`,
			tooLarge(`"first"`),
		},
		{"no call at all", 2, "[" + notification + "," + notification + "," + notification + "]", tooLarge("null")},
		{"at the default limit", defaultLimit, calls(blockrpc.DefaultBatchLimit), results(blockrpc.DefaultBatchLimit)},
		{"over the default limit", defaultLimit, calls(blockrpc.DefaultBatchLimit + 1), tooLarge("10")},
		{"no limit", 0, calls(blockrpc.DefaultBatchLimit + 1), results(blockrpc.DefaultBatchLimit + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []blockrpc.Option
			if tc.limit != defaultLimit {
				opts = append(opts, blockrpc.WithBatchLimit(tc.limit))
			}
			srv := newServer(t, store, opts...)
			checkAnswers(t, tc.body, callBatch(t, srv, tc.body), tc.want)
		})
	}
}

func TestBatchResponseLimit(t *testing.T) {
	// Every block answer is over 1 KiB: the first call uses up the limit.
	srv := newServer(t, newTestChain(t).store, blockrpc.WithResponseLimit(100))
	byNumber := func(id, number string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"eth_getBlockByNumber","params":["` + number + `",true]}`
	}
	const notification = `{"jsonrpc":"2.0","method":"eth_getBlockByNumber","params":["latest",false]}`

	for _, tc := range []struct {
		name string
		body string // a batch, or a single call
		want []string
		// numbers are the block numbers of the results, in their order.
		numbers []string
	}{
		{
			name: "batch",
			body: "[" + byNumber("1", "0x1") + "," + notification + "," + byNumber("2", "0x2") + "," + byNumber(`"three"`, "latest") + "," + notification + "]",
			want: []string{
				"1 result",
				"2 error -32003 response too large",
				`"three" error -32003 response too large`,
			},
			numbers: []string{"0x1"},
		},
		{
			// The limit is on a batch's answers; a single answer is whole.
			name:    "single call",
			body:    byNumber("1", "0x1"),
			want:    []string{"1 result"},
			numbers: []string{"0x1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var answers []answer
			if strings.HasPrefix(tc.body, "[") {
				answers = callBatch(t, srv, tc.body)
			} else {
				answers = []answer{call(t, srv, tc.body)}
			}
			checkAnswers(t, tc.body, answers, tc.want)
			var numbers []string
			for _, a := range answers {
				if a.Error == nil {
					numbers = append(numbers, fmt.Sprint(resultObject(t, a)["number"]))
				}
			}
			if diff := cmp.Diff(tc.numbers, numbers); diff != "" {
				t.Errorf("block numbers of the results (-want +got):\n%s", diff)
			}
		})
	}
}

// The response limit counts result bytes, as go-ethereum does: three
// chain ids of 5 bytes each fit in 20.
func TestResponseLimitCountsResults(t *testing.T) {
	srv := newServer(t, newTestChain(t).store, blockrpc.WithResponseLimit(20))
	answers := callBatch(t, srv, `[`+rpcRequest("eth_chainId", `[]`)+`,`+rpcRequest("eth_chainId", `[]`)+`,`+rpcRequest("eth_chainId", `[]`)+`]`)
	for i, a := range answers {
		if a.Error != nil || string(a.Result) != `"0x1"` {
			t.Errorf("answer %d = %s %v, want \"0x1\"", i, a.Result, a.Error)
		}
	}
}

// Error answers count for nothing against the response limit, as in
// go-ethereum, which counts result bytes alone: after three of them, a
// call with a result is still answered within 100 bytes.
func TestResponseLimitSkipsErrors(t *testing.T) {
	srv := newServer(t, newTestChain(t).store, blockrpc.WithResponseLimit(100))
	var calls []string
	for range 3 {
		calls = append(calls, rpcRequest("eth_noSuchMethod", `[]`))
	}
	calls = append(calls, rpcRequest("eth_chainId", `[]`))
	answers := callBatch(t, srv, "["+strings.Join(calls, ",")+"]")
	if len(answers) != 4 {
		t.Fatalf("%d answers, want 4", len(answers))
	}
	for i, a := range answers[:3] {
		if a.Error == nil || a.Error.Code != -32601 {
			t.Errorf("answer %d = %s %+v, want -32601", i, a.Result, a.Error)
		}
	}
	if a := answers[3]; a.Error != nil || string(a.Result) != `"0x1"` {
		t.Errorf("answer 3 = %s %+v, want \"0x1\"", a.Result, a.Error)
	}
}

// TestAnswerEnds checks the last byte of each kind of answer against
// go-ethereum's: a newline after the answer to a call or a batch of calls
// (its json.Encoder), none after an error answered to the request as a
// whole (its json.Marshal).
func TestAnswerEnds(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	byNumber := func(id, number string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"eth_getBlockByNumber","params":["` + number + `",false]}`
	}
	tooLarge := "[" + strings.Repeat(byNumber("1", "0x0")+",", blockrpc.DefaultBatchLimit) + byNumber("1", "0x0") + "]"
	for _, tc := range []struct {
		name, body string
		newline    bool
	}{
		{"a parse error", `{"jsonrpc":"2.0",`, false},
		{"an empty body", ``, false},
		{"an empty batch", `[]`, false},
		{"a batch too large", tooLarge, false},
		{"a call", byNumber("1", "0x0"), true},
		{"a call's error", `{"jsonrpc":"2.0","id":1,"method":"eth_noSuchMethod"}`, true},
		{"an invalid call", `{"jsonrpc":"1.0","id":1,"method":"eth_chainId"}`, true},
		{"a batch", "[" + byNumber("1", "0x0") + "," + byNumber("2", "0x1") + "]", true},
		{"a batch of invalid calls", `[1,2]`, true},
	} {
		_, out := post(t, srv, tc.body)
		if ends := strings.HasSuffix(string(out), "\n"); ends != tc.newline {
			t.Errorf("%s: the answer ends with a newline: %v, want %v: %q", tc.name, ends, tc.newline, out)
		}
	}

	// go-ethereum writes its answers to calls past the request's deadline,
	// and to a batch it cut short at its response limit, as it writes an
	// error of the request as a whole.
	chainID := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`
	limited := newServer(t, newTestChain(t).store, blockrpc.WithResponseLimit(10))
	for _, tc := range []struct {
		name, body string
		newline    bool
	}{
		{"a batch within the response limit", "[" + chainID + "," + chainID + "]", true},
		{"a batch past the response limit", "[" + strings.Repeat(chainID+",", 3) + chainID + "]", false},
	} {
		_, out := post(t, limited, tc.body)
		if ends := strings.HasSuffix(string(out), "\n"); ends != tc.newline {
			t.Errorf("%s: the answer ends with a newline: %v, want %v: %q", tc.name, ends, tc.newline, out)
		}
	}
	h := newHandler(newTestChain(t).store)
	past, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	for _, body := range []string{byNumber("1", "0x0"), "[" + byNumber("1", "0x0") + "," + byNumber("2", "0x1") + "]"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, handlerRequest(past, body))
		if out := rec.Body.String(); !strings.Contains(out, "request timed out") || strings.HasSuffix(out, "\n") {
			t.Errorf("%s past its deadline: %q, want request timed out, without a newline", body, out)
		}
	}
}

// TestResponseLimitAddsUpResults checks that the response limit counts the
// results of a batch together, and only past the limit: chain ids of 5
// bytes each, under a limit of 10, fill it exactly with two (the third is
// still answered, as go-ethereum answers until it is over) and go over it
// with three, so the fourth is refused.
func TestResponseLimitAddsUpResults(t *testing.T) {
	srv := newServer(t, newTestChain(t).store, blockrpc.WithResponseLimit(10))
	chainID := func(id string) string { return `{"jsonrpc":"2.0","id":` + id + `,"method":"eth_chainId"}` }
	body := "[" + strings.Join([]string{chainID("1"), chainID("2"), chainID("3"), chainID("4")}, ",") + "]"
	checkAnswers(t, body, callBatch(t, srv, body), []string{
		"1 result",
		"2 result",
		"3 result",
		"4 error -32003 response too large",
	})
}

// TestRefusedBatchLeavesResponsesUnanswered checks that a message shaped
// like a response is not answered when the calls around it are refused
// (past the response limit), as it is not when they run.
func TestRefusedBatchLeavesResponsesUnanswered(t *testing.T) {
	srv := newServer(t, newTestChain(t).store, blockrpc.WithResponseLimit(100))
	block := `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",false]}`
	body := "[" + block + `,{"jsonrpc":"2.0","id":2,"result":"0x1"},{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}},` +
		`{"jsonrpc":"2.0","method":"eth_chainId"},{"jsonrpc":"2.0","id":4,"method":"eth_chainId"}]`
	checkAnswers(t, body, callBatch(t, srv, body), []string{
		"1 result",
		"4 error -32003 response too large",
	})
}
