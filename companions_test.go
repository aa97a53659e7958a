package blockrpc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
)

// The companion methods are what clients ask for beside the block and uncle
// lookups: ethers starts with eth_chainId. Each follows go-ethereum's
// parameters, answers and errors. The uncle companions, by number and the
// counts, are in uncle_test.go; their backend failures in failures_test.go.

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
