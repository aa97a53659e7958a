package pebblestore

import (
	"testing"

	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/internal/fixturechains"
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

// TestFixtures copies every chain of the shared fixtures into a new store,
// which must serve each as memstore does, byte for byte, and still once
// reopened.
func TestFixtures(t *testing.T) {
	for _, c := range fixturechains.All(t) {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			backendtest.TestCopy(t, s, c.Store, c.Hashes...)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			backendtest.TestBlocks(t, s, c.Store, c.Hashes...)
		})
	}
}
