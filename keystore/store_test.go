package keystore_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
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

// TestFileRefusesBrokenRules opens files whose keys break the rules a
// Store keeps, as a hand edit may leave them: each is refused, and left as
// it was. A key held twice under one id could not be revoked.
func TestFileRefusesBrokenRules(t *testing.T) {
	a, b := keystore.DigestOf("a").String(), keystore.DigestOf("b").String()
	key := func(id, digest, extra string) string {
		return `{"id":"` + id + `","sha256":"` + digest + `","label":"x","created":"2026-01-01T00:00:00Z"` + extra + `}`
	}
	for name, keys := range map[string]string{
		"an id held twice":       key("k1", a, "") + "," + key("k1", b, ""),
		"a digest held twice":    key("k1", a, "") + "," + key("k2", a, ""),
		"a burst without a rate": key("k1", a, `,"burst":3`),
		"a negative rate":        key("k1", a, `,"rate":-1,"burst":1`),
		"a burst past MaxBurst":  key("k1", a, `,"rate":1,"burst":2000000`),
		"a label with a control": key("k1", a, `,"label":"a\u0007b"`),
		"a key without an id":    key("", a, ""),
	} {
		path := filepath.Join(t.TempDir(), "keys.json")
		content := `{"format":1,"keys":[` + keys + `]}`
		os.WriteFile(path, []byte(content), 0o600)
		if _, err := keystore.OpenFile(path); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("%s: opened (%v)", name, err)
		}
		if data, _ := os.ReadFile(path); string(data) != content {
			t.Errorf("%s: the file was changed", name)
		}
	}
	// A rate without its burst takes the default burst, as Create gives it.
	path := filepath.Join(t.TempDir(), "keys.json")
	os.WriteFile(path, []byte(`{"format":1,"keys":[`+key("k1", a, `,"rate":2.5`)+`]}`), 0o600)
	f, err := keystore.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := f.Key(context.Background(), "k1"); err != nil || k.Rate != 2.5 || k.Burst != 3 {
		t.Errorf("a rate of 2.5 without a burst: %+v, %v; want a burst of 3", k, err)
	}
}

// TestFileRemovesTemporaries opens a store beside the temporary files
// that saves cut short by a crash leave: they are removed, and files of
// other names are not, nor one changed in the last minute, which may be a
// save under way in the process that writes the store.
func TestFileRemovesTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.json")
	if _, err := keystore.OpenFile(path); err != nil {
		t.Fatal(err)
	}
	left := []string{"keys.json.123456.tmp", "keys.json.7.tmp"}
	kept := []string{"keys.json.backup.tmp", "keys.json..tmp", "123.tmp", "other.json.5.tmp", "keys.json.5", "keys.json.99.tmp"}
	old := time.Now().Add(-2 * time.Minute)
	for _, name := range slices.Concat(left, kept) {
		os.WriteFile(filepath.Join(dir, name), []byte(`{"format":1,"keys":[`), 0o600)
		if name != "keys.json.99.tmp" { // being written
			os.Chtimes(filepath.Join(dir, name), old, old)
		}
	}
	if _, err := keystore.OpenFile(path); err != nil {
		t.Fatal(err)
	}
	for _, name := range left {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s, left by a save cut short, is still there (%v)", name, err)
		}
	}
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s, not the store's, was removed: %v", name, err)
		}
	}
}

// TestFileMinutesOfTheLastDay opens a file holding a minute counted two
// days ago: Minutes gives the last day's only.
func TestFileMinutesOfTheLastDay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	old, recent := time.Now().Add(-48*time.Hour).Unix()/60, time.Now().Unix()/60
	os.WriteFile(path, []byte(fmt.Sprintf(`{"format":1,"keys":[{"id":"k1","sha256":"%s","label":"x","created":"2026-01-01T00:00:00Z"}],
		"minutes":{"k1":[[%d,5,1],[%d,2,0]]}}`, keystore.DigestOf("a"), old, recent)), 0o600)
	f, err := keystore.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.Minutes(context.Background(), "k1", time.Time{}); err != nil || len(got) != 1 || got[0].Requests != 2 {
		t.Errorf("Minutes: %+v, %v; want the last day's: 2 requests", got, err)
	}
}

// TestLimitsAtTheirBounds accepts the largest label, rate and burst, and
// refuses a label that starts with a control character.
func TestLimitsAtTheirBounds(t *testing.T) {
	_, k, err := keystore.NewKey(strings.Repeat("x", keystore.MaxLabel), keystore.MaxRate, keystore.MaxBurst, time.Now())
	if err != nil || len(k.Label) != keystore.MaxLabel || k.Rate != keystore.MaxRate || k.Burst != keystore.MaxBurst {
		t.Errorf("NewKey at the bounds: %+v, %v; want accepted", k, err)
	}
	if _, _, err := keystore.NewKey("\x1bescape", 0, 0, time.Now()); !errors.Is(err, keystore.ErrLabel) {
		t.Errorf("NewKey with a label starting with ESC: %v, want ErrLabel", err)
	}
}

// TestParseDigest reads back what Digest.String writes, and nothing
// shorter or longer.
func TestParseDigest(t *testing.T) {
	d := keystore.DigestOf("key")
	if got, err := keystore.ParseDigest(d.String()); err != nil || got != d {
		t.Errorf("ParseDigest(%s) = %s, %v", d, got, err)
	}
	for _, bad := range []string{d.String()[:62], d.String() + "00", ""} {
		if _, err := keystore.ParseDigest(bad); err == nil {
			t.Errorf("ParseDigest(%q): no error", bad)
		}
	}
}

// TestRecordByMinute records usage whose minutes are given mid-minute: a
// store counts them in the minute they fall in, one entry a minute.
func TestRecordByMinute(t *testing.T) {
	ctx := context.Background()
	for name, open := range map[string]func(t *testing.T) keystore.Store{
		"memory": func(*testing.T) keystore.Store { return keystore.NewMemory() },
		"file": func(t *testing.T) keystore.Store {
			f, err := keystore.OpenFile(filepath.Join(t.TempDir(), "keys.json"))
			if err != nil {
				t.Fatal(err)
			}
			return f
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			_, k := addKey(t, s, "k", 0, 0)
			minute := time.Now().UTC().Truncate(time.Minute)
			for _, at := range []time.Duration{10 * time.Second, 40 * time.Second} {
				if err := s.Record(ctx, []keystore.Usage{{ID: k.ID, Totals: keystore.Totals{Requests: 1}, Minutes: []keystore.Minute{{Start: minute.Add(at), Requests: 1}}}}); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := s.Minutes(ctx, k.ID, minute); err != nil || len(got) != 1 || !got[0].Start.Equal(minute) || got[0].Requests != 2 {
				t.Errorf("Minutes = %+v, %v; want 2 requests at %v", got, err, minute)
			}
		})
	}
}

// TestFileOpenedBesideItsWriter opens a store again and again, as a tool
// reading it may, while the process that writes it saves changes: every
// save succeeds, and each open reads a whole file.
func TestFileOpenedBesideItsWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.json")
	f, err := keystore.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	opened := make(chan error, 1)
	go func() {
		defer close(opened)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := keystore.OpenFile(path); err != nil {
				opened <- err
				return
			}
		}
	}()
	for i := range 100 {
		_, k, _ := keystore.NewKey(fmt.Sprint("key ", i), 0, 0, time.Now())
		if err := f.Create(ctx, k); err != nil {
			t.Errorf("save %d beside an OpenFile of the same path: %v", i, err)
			break
		}
	}
	close(done)
	if err := <-opened; err != nil {
		t.Errorf("OpenFile beside the writer: %v", err)
	}
}
