package keystore_test

import (
	"path/filepath"
	"testing"

	"github.com/blockrpc/blockrpc/keystore"
	"github.com/blockrpc/blockrpc/keystore/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(*testing.T) keystore.Store { return keystore.NewMemory() })
}

func TestFile(t *testing.T) {
	storetest.Run(t, func(t *testing.T) keystore.Store {
		f, err := keystore.OpenFile(filepath.Join(t.TempDir(), "keys.json"))
		if err != nil {
			t.Fatal(err)
		}
		return f
	})
}
