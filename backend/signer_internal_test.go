package backend

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/internal/rlptest"
)

// TestSenderOfChainRLP recovers the sender of every transaction of the
// execution-apis chain, the only fixture with access-list, blob and
// set-code transactions in full. It carries no "from", but a chain only
// runs transactions from funded accounts, and a signing hash wrong in any
// byte recovers a random address: every sender must be an account the
// genesis funds. The authorities of set-code transactions are recovered
// too; they need not be funded, so only their recovery is checked.
func TestSenderOfChainRLP(t *testing.T) {
	data, err := os.ReadFile(fixtures.Path(t, "execution-apis", "chain.rlp"))
	if err != nil {
		t.Fatal(err)
	}
	genesis, err := os.ReadFile(fixtures.Path(t, "execution-apis", "genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Alloc map[string]json.RawMessage `json:"alloc"`
	}
	if err := json.Unmarshal(genesis, &g); err != nil {
		t.Fatal(err)
	}
	funded := make(map[Address]bool)
	for k := range g.Alloc {
		a, err := ParseAddress("0x" + k)
		if err != nil {
			t.Fatalf("genesis alloc %q: %v", k, err)
		}
		funded[a] = true
	}

	byType := make(map[uint8]int)
	authorities := 0
	for rest := data; len(rest) > 0; {
		var block rlptest.Item
		if block, rest, err = rlptest.Decode(rest); err != nil {
			t.Fatal(err)
		}
		number := headerFromRLP(block.List[0]).Number
		for i, item := range block.List[1].List {
			tx, _ := transactionFromRLP(t, item)
			from, err := Sender(tx)
			switch {
			case err != nil:
				t.Errorf("block %d transaction %d (type %d): %v", number, i, tx.Type, err)
			case !funded[from]:
				t.Errorf("block %d transaction %d (type %d): sender %s is not funded by the genesis", number, i, tx.Type, from)
			default:
				byType[tx.Type]++
			}
			for j := range tx.AuthorizationList {
				if _, err := Authority(&tx.AuthorizationList[j]); err != nil {
					t.Errorf("block %d transaction %d authorization %d: %v", number, i, j, err)
				}
				authorities++
			}
		}
	}
	t.Logf("senders recovered by type: %v; authorities: %d", byType, authorities)
	for typ := range uint8(5) {
		if byType[typ] == 0 {
			t.Errorf("no type %d transaction recovered", typ)
		}
	}
	if authorities == 0 {
		t.Error("no authorization recovered")
	}
}
