package backendtest_test

import (
	"testing"

	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/memstore"
)

// TestMemstore runs the suite on memstore, the reference it compares
// with: a suite that memstore fails is a suite that is wrong.
func TestMemstore(t *testing.T) {
	backendtest.TestStore(t, func(*testing.T) backendtest.Store { return memstore.New() })
}
