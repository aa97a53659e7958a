package blockrpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/google/go-cmp/cmp"
	"github.com/holiman/uint256"
)

// Uncles: by block hash and index, by block number and index (as
// go-ethereum's ethclient reads them), and their counts.

func TestGetUncleByBlockHashAndIndex(t *testing.T) {
	c := newTestChain(t)
	srv := newServer(t, c.store)
	uncleAt := func(hash backend.Hash, index string) answer {
		return call(t, srv, rpcRequest("eth_getUncleByBlockHashAndIndex", fmt.Sprintf(`[%q,%q]`, hash, index)))
	}

	t.Run("found", func(t *testing.T) {
		a := uncleAt(c.blocks[3].Hash, "0x0")
		uncle := resultObject(t, a)
		if _, ok := uncle["transactions"]; ok {
			t.Errorf("the uncle has a transactions member: %v", uncle["transactions"])
		}
		if uncles, ok := uncle["uncles"].([]any); !ok || len(uncles) != 0 {
			t.Errorf("uncles = %v, want []", uncle["uncles"])
		}
		if td, ok := uncle["totalDifficulty"]; !ok {
			t.Error("the uncle has no totalDifficulty member")
		} else if want := new(uint256.Int).Add(c.blocks[1].TotalDifficulty, &c.uncle.Difficulty); td != hexU256(want) {
			t.Errorf("totalDifficulty %v, want %s: its parent's plus its own", td, hexU256(want))
		}
		checkBlockNumber(t, uncle, "0x2")
		for member, want := range map[string]string{
			"hash":       c.uncle.Hash.String(),
			"parentHash": c.blocks[1].Hash.String(),
			"extraData":  "0x" + fmt.Sprintf("%x", "an uncle"),
		} {
			if uncle[member] != want {
				t.Errorf("%s = %v, want %s", member, uncle[member], want)
			}
		}
		if c.blocks[3].Uncles[0] != c.uncle.Hash {
			t.Errorf("block 3 lists uncle %s, the answer is %s", c.blocks[3].Uncles[0], c.uncle.Hash)
		}

		typed, err := blockrpc.NewService(c.store).GetUncleByBlockHashAndIndex(context.Background(), c.blocks[3].Hash, 0)
		if err != nil {
			t.Fatal(err)
		}
		typedJSON, err := json.Marshal(typed)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(decode(t, typedJSON), decode(t, a.Result)); diff != "" {
			t.Errorf("answer differs from Service.GetUncleByBlockHashAndIndex (-typed +answer):\n%s", diff)
		}
	})
	t.Run("index out of range", func(t *testing.T) {
		checkNullResult(t, uncleAt(c.blocks[3].Hash, "0x1"))
		checkNullResult(t, uncleAt(c.blocks[3].Hash, "0xffffffffffffffff"))
	})
	t.Run("block without uncles", func(t *testing.T) {
		checkNullResult(t, uncleAt(c.blocks[2].Hash, "0x0"))
	})
	t.Run("unknown hash", func(t *testing.T) {
		checkNullResult(t, uncleAt(backend.Hash{0xff}, "0x0"))
		checkNullResult(t, uncleAt(c.uncle.Hash, "0x0"))
	})
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
