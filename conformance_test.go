package blockrpc_test

import (
	"bytes"
	"testing"

	"github.com/blockrpc/blockrpc/memstore"
	"github.com/google/go-cmp/cmp"
)

// TestMainnetConformance loads real mainnet blocks through the dump loader,
// which recomputes and checks every hash, size and transaction hash, and
// answers every fixture request through the handler: each answer must be
// the production client's, field for field. The only difference is the
// totalDifficulty this service adds: the blocks are sparse, so it is known
// for the genesis alone.
func TestMainnetConformance(t *testing.T) {
	cases := mainnetCases(t)
	store, err := memstore.Load(bytes.NewReader(mainnetDump(t, cases)))
	if err != nil {
		t.Fatalf("loading the mainnet blocks: %v", err)
	}
	srv := newServer(t, store)
	for _, c := range cases {
		status, got := post(t, srv, string(c.Request))
		if status != 200 {
			t.Errorf("%s: status %d: %s", c.file, status, got)
			continue
		}
		gotV, wantV := decode(t, got).(map[string]any), decode(t, c.Response).(map[string]any)
		if result, ok := gotV["result"].(map[string]any); ok {
			td, present := result["totalDifficulty"]
			delete(result, "totalDifficulty")
			want := any(nil)
			if result["number"] == "0x0" {
				want = result["difficulty"]
			}
			if !present || td != want {
				t.Errorf("%s: totalDifficulty = %v (present %v), want %v", c.file, td, present, want)
			}
		}
		if diff := cmp.Diff(wantV, gotV); diff != "" {
			t.Errorf("%s: answer differs from the fixture (-want +got):\n%s", c.file, diff)
		}
	}
}
