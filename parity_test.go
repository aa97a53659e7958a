package blockrpc_test

import (
	"net/http"
	"strings"
	"testing"
)

// These are go-ethereum's answers to the less common shapes of request, as
// measured against its rpc.Server: the same bodies get the same answers.

func TestParityWithGeth(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, tc := range []struct {
		name, body, want string
	}{
		// go-ethereum decodes one JSON value from the body and leaves the rest.
		{"data after the request", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]} trailing`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		{"a second request after the first", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		// Its encoder escapes these in the echoed id.
		{"id with HTML characters", `{"jsonrpc":"2.0","id":"<a&b>","method":"eth_chainId"}`,
			`{"jsonrpc":"2.0","id":"\u003ca\u0026b\u003e","result":"0x1"}`},
		{"id with a line separator", "{\"jsonrpc\":\"2.0\",\"id\":\"a\u2028b\",\"method\":\"eth_chainId\"}",
			`{"jsonrpc":"2.0","id":"a\u2028b","result":"0x1"}`},
		// encoding/json matches member names with Unicode case folding.
		{"member name with a long s", `{"j` + "\u017f" + `onrpc":"2.0","id":1,"method":"eth_chainId"}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		// Subscriptions need a connection that stays open.
		{"subscribe", `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"notifications not supported"}}`},
		{"unsubscribe", `{"jsonrpc":"2.0","id":1,"method":"eth_unsubscribe","params":["0x9"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"subscription not found"}}`},
		{"unsubscribe without an id", `{"jsonrpc":"2.0","id":1,"method":"eth_unsubscribe","params":[]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"missing value for required argument 0"}}`},
		{"unsubscribe null", `{"jsonrpc":"2.0","id":1,"method":"eth_unsubscribe","params":[null]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"subscription not found"}}`},
		// It decodes a message before it tells a response: an error of
		// null is none.
		{"a null error and no method", `{"jsonrpc":"2.0","id":1,"error":null}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"invalid request"}}`},
		{"a null error and no method, in a batch", `[{"jsonrpc":"2.0","id":1,"error":null}]`,
			`[{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"invalid request"}}]`},
		{"unsubscribe a number", `{"jsonrpc":"2.0","id":1,"method":"eth_unsubscribe","params":[9]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid argument 0: json: cannot unmarshal number into Go value of type rpc.ID"}}`},
		// Invalid UTF-8 in a method name comes back as U+FFFD.
		{"method name with invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_\xff\"}",
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"the method eth_\uFFFD does not exist/is not available\"}}"},
		// Each byte that is not valid UTF-8 is one U+FFFD, counted so.
		{"method name with a run of invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_\xff\xfe\"}",
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"the method eth_\uFFFD\uFFFD does not exist/is not available\"}}"},
		{"method name long once decoded", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_" + strings.Repeat("\xff", 700) + "\"}",
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"method name too long: 2104 \u003e 2048"}}`},
		// Subscriptions are told apart before the name's length is checked.
		{"long name of a subscription", `{"jsonrpc":"2.0","id":1,"method":"` + strings.Repeat("a", 2050) + `_subscribe"}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"notifications not supported"}}`},
		{"long name of an unsubscription", `{"jsonrpc":"2.0","id":1,"method":"` + strings.Repeat("a", 2050) + `_unsubscribe","params":["0x1"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"subscription not found"}}`},
		// encoding/json leaves a string member as it was for a later value
		// of another kind, null included.
		{"method given again as null", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":null}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		{"method given again as a number", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":5}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		{"method given again as an object", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":{}}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		{"version given again as null", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","jsonrpc":null}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		{"version given again as a number", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","jsonrpc":2}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x1"}`},
		{"method a number alone", `{"jsonrpc":"2.0","id":1,"method":5}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"invalid request"}}`},
		// A range error before a syntax error for an over-long index, as
		// go-ethereum's hexutil.Uint reports it.
		{"over-long index with a bad digit", `{"jsonrpc":"2.0","id":1,"method":"eth_getUncleByBlockNumberAndIndex","params":["0x3","0xz0000000000000000"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid argument 1: json: cannot unmarshal hex number \u003e 64 bits into Go value of type hexutil.Uint"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := post(t, srv, tc.body)
			if status != http.StatusOK || strings.TrimSuffix(string(out), "\n") != tc.want {
				t.Errorf("%s\n got %d %s\nwant 200 %s", tc.body, status, out, tc.want)
			}
		})
	}
}

// A message shaped like a response is what a server sends; go-ethereum
// drops one it did not ask for, unanswered, alone or in a batch.
func TestResponsesAreDropped(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"result":"0x1"}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}`,
		`[{"jsonrpc":"2.0","id":1,"result":null}]`,
		// A method of "" or null is no method, once decoded.
		`{"jsonrpc":"2.0","id":1,"method":"","result":1}`,
		`{"jsonrpc":"2.0","id":1,"method":null,"result":1}`,
		// An error of any kind but null is one, as encoding/json makes
		// go-ethereum's pointer for it before it finds the kind wrong.
		`{"jsonrpc":"2.0","id":1,"error":5}`,
		`{"jsonrpc":"2.0","id":1,"error":null,"error":"x"}`,
	} {
		if status, out := post(t, srv, body); status != http.StatusOK || len(out) != 0 {
			t.Errorf("%s: %d %q, want an empty 200", body, status, out)
		}
	}
	_, out := post(t, srv, `[{"jsonrpc":"2.0","id":1,"result":"0x1"},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`)
	if got := strings.TrimSpace(string(out)); got != `[{"jsonrpc":"2.0","id":2,"result":"0x1"}]` {
		t.Errorf("a batch with a response and a call = %s, want only the call's answer", got)
	}
}

// TestParamsMakeNoResponse checks go-ethereum's rule for a message without
// a method: with params it is not a response, which would be dropped, but
// an invalid request, answered.
func TestParamsMakeNoResponse(t *testing.T) {
	srv := newServer(t, newTestChain(t).store)
	for _, tc := range []struct{ body, want string }{
		{`{"jsonrpc":"2.0","id":1,"params":[],"result":"0x1"}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"invalid request"}}`},
		{`[{"jsonrpc":"2.0","id":1,"params":null,"error":{"code":1,"message":"x"}}]`,
			`[{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"invalid request"}}]`},
	} {
		status, out := post(t, srv, tc.body)
		if status != http.StatusOK || strings.TrimSuffix(string(out), "\n") != tc.want {
			t.Errorf("%s\n got %d %s\nwant 200 %s", tc.body, status, out, tc.want)
		}
	}
}
