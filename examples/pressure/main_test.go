package main

import (
	"encoding/json"
	"testing"
)

// TestBatchBody checks the batches the load asks for: numbered calls of
// blocks 1 to head, and block 0 for a chain of the genesis alone, where
// the count of blocks past the genesis divided by zero.
func TestBatchBody(t *testing.T) {
	for _, c := range []struct {
		head uint64
		want []string
	}{
		{0, []string{"0x0", "0x0", "0x0"}},
		{2, []string{"0x1", "0x2", "0x1"}},
	} {
		var calls []struct {
			ID     int
			Method string
			Params []any
		}
		if err := json.Unmarshal([]byte(batchBody(3, c.head)), &calls); err != nil {
			t.Fatalf("head %d: %v", c.head, err)
		}
		if len(calls) != len(c.want) {
			t.Fatalf("head %d: %d calls, want %d", c.head, len(calls), len(c.want))
		}
		for i, call := range calls {
			if call.ID != i || call.Method != "eth_getBlockByNumber" || call.Params[0] != c.want[i] || call.Params[1] != true {
				t.Errorf("head %d, call %d: %+v, want block %s with its transactions", c.head, i, call, c.want[i])
			}
		}
	}
}
