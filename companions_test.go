package blockrpc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/google/go-cmp/cmp"
)

// The companion methods are what clients ask for beside the two main ones:
// ethers starts with eth_chainId, go-ethereum's ethclient reads uncles by
// number. Each follows go-ethereum's parameters, answers and errors.

func TestChainID(t *testing.T) {
	c := newTestChain(t) // its dynamic-fee transaction is signed for chain 1
	srv := newServer(t, c.store)
	if a := call(t, srv, rpcRequest("eth_chainId", `[]`)); string(a.Result) != `"0x1"` || a.Error != nil {
		t.Errorf("eth_chainId = %s %v, want \"0x1\"", a.Result, a.Error)
	}
	runParamCases(t, srv, "eth_chainId", []paramCase{
		{"", ""},
		{`null`, ""},
		{`[]`, ""},
		{`["0x1"]`, "too many arguments, want at most 0"},
		{`{}`, "non-array args"},
	})

	// A chain whose transactions do not tell it: unknown until it is set.
	bare := memstore.New()
	if err := bare.AddBlock(&backend.Block{Header: testHeader(0)}); err != nil {
		t.Fatal(err)
	}
	bareSrv := newServer(t, bare)
	checkError(t, call(t, bareSrv, rpcRequest("eth_chainId", `[]`)), -32000, "the chain id is not known")
	if err := bare.SetChainID(3503995874084926); err != nil {
		t.Fatal(err)
	}
	if a := call(t, bareSrv, rpcRequest("eth_chainId", `[]`)); string(a.Result) != `"0xc72dd9d5e883e"` {
		t.Errorf("eth_chainId after SetChainID = %s %v", a.Result, a.Error)
	}
	if id, err := blockrpc.NewService(bare).ChainID(context.Background()); id != 3503995874084926 || err != nil {
		t.Errorf("Service.ChainID = %d, %v", id, err)
	}
}

func TestBlockNumber(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	if a := call(t, srv, rpcRequest("eth_blockNumber", `[]`)); string(a.Result) != `"0x3"` {
		t.Errorf("eth_blockNumber = %s %v, want \"0x3\" (the pending block is not the head)", a.Result, a.Error)
	}
	runParamCases(t, srv, "eth_blockNumber", []paramCase{
		{"", ""},
		{`["latest"]`, "too many arguments, want at most 0"},
	})
	empty := newServer(t, memstore.New())
	checkError(t, call(t, empty, rpcRequest("eth_blockNumber", `[]`)), -32000, "the chain has no blocks")
	if _, err := blockrpc.NewService(memstore.New()).BlockNumber(context.Background()); !errors.Is(err, blockrpc.ErrNoBlocks) {
		t.Errorf("Service.BlockNumber on an empty chain: %v, want ErrNoBlocks", err)
	}
}

func TestGetUncleByBlockNumberAndIndex(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	byHash := call(t, srv, rpcRequest("eth_getUncleByBlockHashAndIndex", `["`+c.blocks[3].Hash.String()+`","0x0"]`))
	for _, number := range []string{`"0x3"`, `"latest"`} {
		byNumber := call(t, srv, rpcRequest("eth_getUncleByBlockNumberAndIndex", `[`+number+`,"0x0"]`))
		if byNumber.Error != nil || string(byNumber.Result) != string(byHash.Result) {
			t.Errorf("uncle 0 of %s = %s %v, want the answer by hash %s", number, byNumber.Result, byNumber.Error, byHash.Result)
		}
	}
	for _, params := range []string{`["0x3","0x1"]`, `["0x2","0x0"]`, `["0x63","0x0"]`, `["pending","0x0"]`, `["safe","0x0"]`} {
		checkNullResult(t, call(t, srv, rpcRequest("eth_getUncleByBlockNumberAndIndex", params)))
	}
	runParamCases(t, srv, "eth_getUncleByBlockNumberAndIndex", []paramCase{
		{`["0x3","0x0"]`, ""},
		{`["0X3","0x0"]`, ""},
		{`["0x03","0x0"]`, "invalid argument 0: hex number with leading zero digits"},
		{`["0x3","0x00"]`, "invalid argument 1: json: cannot unmarshal hex number with leading zero digits into Go value of type hexutil.Uint"},
		{`["0x3",0]`, "invalid argument 1: json: cannot unmarshal non-string into Go value of type hexutil.Uint"},
		{`["0x3"]`, "missing value for required argument 1"},
		{`["0x3","0x0",1]`, "too many arguments, want at most 2"},
	})

	svc := blockrpc.NewService(c.store)
	u, err := svc.GetUncleByBlockNumberAndIndex(context.Background(), 3, 0)
	if err != nil || u == nil || u.Hash != c.uncle.Hash {
		t.Fatalf("Service.GetUncleByBlockNumberAndIndex(3, 0) = %v, %v", u, err)
	}
	if diff := cmp.Diff(c.uncle, u); diff != "" {
		t.Errorf("typed uncle differs from the stored one:\n%s", diff)
	}
	if u, err := svc.GetUncleByBlockNumberAndIndex(context.Background(), 3, 1); u != nil || err != nil {
		t.Errorf("index past the uncles = %v, %v; want nil, nil", u, err)
	}
}

func TestGetUncleCount(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	for _, tc := range []struct{ method, arg, want string }{
		{"eth_getUncleCountByBlockHash", `"` + c.blocks[3].Hash.String() + `"`, `"0x1"`},
		{"eth_getUncleCountByBlockHash", `"` + c.blocks[2].Hash.String() + `"`, `"0x0"`},
		{"eth_getUncleCountByBlockHash", `"0x` + repeatHex("ab", 32) + `"`, `null`},
		{"eth_getUncleCountByBlockNumber", `"0x3"`, `"0x1"`},
		{"eth_getUncleCountByBlockNumber", `"earliest"`, `"0x0"`},
		{"eth_getUncleCountByBlockNumber", `"pending"`, `"0x0"`},
		{"eth_getUncleCountByBlockNumber", `"finalized"`, `null`},
		{"eth_getUncleCountByBlockNumber", `"0x64"`, `null`},
	} {
		a := call(t, srv, rpcRequest(tc.method, `[`+tc.arg+`]`))
		if a.Error != nil || string(a.Result) != tc.want {
			t.Errorf("%s(%s) = %s %v, want %s", tc.method, tc.arg, a.Result, a.Error, tc.want)
		}
	}
	runParamCases(t, srv, "eth_getUncleCountByBlockHash", []paramCase{
		{"", "missing value for required argument 0"},
		{`["0x` + repeatHex("ab", 31) + `"]`, "invalid argument 0: hex string has length 62, want 64 for common.Hash"},
		{`["0x` + repeatHex("ab", 32) + `",true]`, "too many arguments, want at most 1"},
	})
	runParamCases(t, srv, "eth_getUncleCountByBlockNumber", []paramCase{
		{`[]`, "missing value for required argument 0"},
		{`["0x"]`, `invalid argument 0: hex string "0x"`},
		{`["latest","0x0"]`, "too many arguments, want at most 1"},
	})

	svc := blockrpc.NewService(c.store)
	if n, err := svc.GetUncleCountByBlockHash(context.Background(), c.blocks[3].Hash); n == nil || *n != 1 || err != nil {
		t.Errorf("Service.GetUncleCountByBlockHash = %v, %v; want 1", n, err)
	}
	if n, err := svc.GetUncleCountByBlockNumber(context.Background(), 42); n != nil || err != nil {
		t.Errorf("Service.GetUncleCountByBlockNumber(42) = %v, %v; want nil, nil (no such block)", n, err)
	}
}

// TestCompanionFailures checks that the companions answer a failing backend
// as the main methods do: -32000, with nothing of the backend's error.
func TestCompanionFailures(t *testing.T) {
	srv := newServer(t, failingBackend{})
	for _, tc := range []struct{ method, params string }{
		{"eth_chainId", `[]`},
		{"eth_blockNumber", `[]`},
		{"eth_getUncleByBlockNumberAndIndex", `["0x1","0x0"]`},
		{"eth_getUncleCountByBlockHash", `["0x` + repeatHex("ab", 32) + `"]`},
		{"eth_getUncleCountByBlockNumber", `["0x1"]`},
	} {
		status, body := post(t, srv, rpcRequest(tc.method, tc.params))
		a := parseAnswer(t, body)
		if status != 200 || a.Error == nil || a.Error.Code != -32000 || a.Error.Message != "backend failure" {
			t.Errorf("%s: %d %s, want -32000 backend failure", tc.method, status, body)
		}
	}
}

func repeatHex(s string, n int) string {
	out := make([]byte, 0, len(s)*n)
	for range n {
		out = append(out, s...)
	}
	return string(out)
}
