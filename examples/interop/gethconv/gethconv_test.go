package gethconv

import (
	"bytes"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rlp"
)

// A crafted export can carry numbers wider than 256 bits, which go-ethereum's
// big integers take and blockrpc's cannot: the conversion fails, not panics.
func TestExportWithAnOverlongNumber(t *testing.T) {
	genesis := &core.Genesis{Config: params.AllDevChainProtocolChanges, GasLimit: 30_000_000, Difficulty: big.NewInt(1)}
	parent := genesis.ToBlock()
	huge := new(big.Int).Lsh(big.NewInt(1), 300)
	b := types.NewBlockWithHeader(&types.Header{
		ParentHash: parent.Hash(), Number: big.NewInt(1), Difficulty: huge, GasLimit: 30_000_000,
		UncleHash: types.EmptyUncleHash, TxHash: types.EmptyTxsHash, ReceiptHash: types.EmptyReceiptsHash,
	})
	var export bytes.Buffer
	if err := rlp.Encode(&export, b); err != nil {
		t.Fatal(err)
	}
	_, err := LoadExport(genesis, &export)
	if err == nil || !strings.Contains(err.Error(), "does not fit in 256 bits") {
		t.Errorf("LoadExport of a 300-bit difficulty = %v, want it refused", err)
	}
}
