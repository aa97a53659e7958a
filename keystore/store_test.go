package keystore_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestFileSurvivesARestart checks that what a File store was told is there
// when it is opened again, that only digests are written, and that the
// file is its owner's alone.
func TestFileSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.json")
	f, err := keystore.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	secret, k, _ := keystore.NewKey("kept", 3, 4, time.Now())
	if err := f.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	_, gone, _ := keystore.NewKey("revoked", 0, 0, time.Now())
	f.Create(ctx, gone)
	f.Revoke(ctx, gone.ID, time.Now())
	minute := time.Now().UTC().Truncate(time.Minute)
	f.Record(ctx, []keystore.Usage{{ID: k.ID, Totals: keystore.Totals{Requests: 2, Bytes: 9, LastUsed: minute}, Minutes: []keystore.Minute{{Start: minute, Requests: 2}}}})

	again, err := keystore.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := again.Keys(ctx)
	if len(keys) != 2 || keys[0].ID != k.ID || keys[0].Digest != keystore.DigestOf(secret) || keys[0].Rate != 3 ||
		keys[0].Burst != 4 || keys[0].Used.Requests != 2 || keys[1].Valid() {
		t.Errorf("reopened: %+v", keys)
	}
	if m, _ := again.Minutes(ctx, k.ID, minute); len(m) != 1 || m[0].Requests != 2 {
		t.Errorf("reopened minutes: %+v", m)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), secret) {
		t.Error("the file holds a key")
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode is %v, want 0600", info.Mode().Perm())
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d files beside the store, want none: a temporary file was left", len(entries)-1)
	}
}

// TestFileRefusesDamage checks that a file that is not a key store, or of
// another format, is refused rather than overwritten.
func TestFileRefusesDamage(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":       "hello",
		"another format": `{"format": 99, "keys": []}`,
		"a bad digest":   `{"format": 1, "keys": [{"id": "a", "sha256": "xyz"}]}`,
	} {
		path := filepath.Join(t.TempDir(), "keys.json")
		os.WriteFile(path, []byte(content), 0o600)
		if _, err := keystore.OpenFile(path); err == nil {
			t.Errorf("%s: opened", name)
		}
		if data, _ := os.ReadFile(path); string(data) != content {
			t.Errorf("%s: the file was changed", name)
		}
	}
	if _, err := keystore.OpenFile(filepath.Join(t.TempDir(), "no", "such", "dir", "keys.json")); err == nil {
		t.Error("a store in a missing directory opened")
	}
}

// TestNewKey checks what a new key is: 128 random bits, and valid values.
func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		secret, k, err := keystore.NewKey("x", 0, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(secret) != 32 || seen[secret] || seen[k.ID] || k.Digest != keystore.DigestOf(secret) {
			t.Fatalf("key %q (id %q)", secret, k.ID)
		}
		seen[secret], seen[k.ID] = true, true
	}
	for _, tc := range []struct {
		label string
		rate  float64
		burst int
	}{
		{strings.Repeat("x", keystore.MaxLabel+1), 0, 0},
		{"bell\a", 0, 0},
		{"\xff", 0, 0},
		{"", -1, 1},
		{"", math.NaN(), 1},
		{"", math.Inf(1), 1},
		{"", 0, 3},
		{"", 1, keystore.MaxBurst + 1},
	} {
		if _, _, err := keystore.NewKey(tc.label, tc.rate, tc.burst, time.Now()); err == nil {
			t.Errorf("NewKey(%q, %v, %d): no error", tc.label, tc.rate, tc.burst)
		}
	}
}
