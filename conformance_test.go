package blockrpc_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/blockrpc/blockrpc/internal/fixtures"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/google/go-cmp/cmp"
)

// mainnetCase is one case of the mainnet fixtures: a request and the answer
// a production client gave.
type mainnetCase struct {
	file     string
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response"`
}

func mainnetCases(t testing.TB) []mainnetCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtures.Path(t, "mainnet"), "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no mainnet fixtures: %v", err)
	}
	var cases []mainnetCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fc []mainnetCase
		if err := json.Unmarshal(data, &fc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i := range fc {
			fc[i].file = filepath.Join(filepath.Base(filepath.Dir(f)), filepath.Base(f))
		}
		cases = append(cases, fc...)
	}
	return cases
}

// mainnetDump turns the block objects of the fixture answers into a dump:
// the blocks go in through the loader like any user's data.
func mainnetDump(t testing.TB, cases []mainnetCase) []byte {
	t.Helper()
	var dump bytes.Buffer
	for _, c := range cases {
		var resp struct{ Result json.RawMessage }
		if err := json.Unmarshal(c.Response, &resp); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if string(resp.Result) == "null" {
			continue
		}
		dump.WriteString(`{"block":`)
		if err := json.Compact(&dump, resp.Result); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		dump.WriteString("}\n")
	}
	return dump.Bytes()
}

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
