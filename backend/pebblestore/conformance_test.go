package pebblestore

import (
	"testing"

	"github.com/blockrpc/blockrpc/backend/backendtest"
)

// openTest opens a store in a new temporary directory, closed when the
// test ends.
func openTest(t testing.TB, opts *Options) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	backendtest.TestStore(t, func(t *testing.T) backendtest.Store { return openTest(t, nil) })
}
