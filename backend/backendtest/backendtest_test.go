package backendtest_test

import (
	"testing"

	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/internal/fixturechains"
	"github.com/blockrpc/blockrpc/memstore"
)

// TestMemstore runs the suite on memstore, the reference it compares
// with: a suite that memstore fails is a suite that is wrong.
func TestMemstore(t *testing.T) {
	backendtest.TestStore(t, func(*testing.T) backendtest.Store { return memstore.New() })
}

// TestMemstoreFixtures copies every chain of the shared fixtures into a new
// memstore: what memstore serves of them is what TestCopy compares the
// other stores with.
func TestMemstoreFixtures(t *testing.T) {
	for _, c := range fixturechains.All(t) {
		t.Run(c.Name, func(t *testing.T) {
			backendtest.TestCopy(t, memstore.New(), c.Store, c.Hashes...)
		})
	}
}
