// Package storetest checks that a keystore.Store does what package
// keystore and the admin API rely on, in the spirit of testing/fstest.
package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/keystore"
)

// Run checks the Store that open returns: a new, empty store each time it
// is called.
func Run(t *testing.T, open func(t *testing.T) keystore.Store) {
	t.Run("CreateAndRead", func(t *testing.T) { createAndRead(t, open(t)) })
	t.Run("Update", func(t *testing.T) { update(t, open(t)) })
	t.Run("Revoke", func(t *testing.T) { revoke(t, open(t)) })
	t.Run("Usage", func(t *testing.T) { usage(t, open(t)) })
	t.Run("OddIDs", func(t *testing.T) { oddIDs(t, open(t)) })
}

// oddIDs asks for ids no key has that an admin API's path can carry,
// percent-decoded: a NUL, bytes that are not UTF-8. Each is no key's
// (ErrNotFound, a 404), not a failure of the store (a 503).
func oddIDs(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	create(t, s, "one")
	label := "x"
	for _, id := range []string{"\x00", "a\x00b", "\xff", "\xc3\x28", ""} {
		if _, err := s.Key(ctx, id); !errors.Is(err, keystore.ErrNotFound) {
			t.Errorf("Key(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := s.Update(ctx, id, keystore.Change{Label: &label}); !errors.Is(err, keystore.ErrNotFound) {
			t.Errorf("Update(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := s.Revoke(ctx, id, now); !errors.Is(err, keystore.ErrNotFound) {
			t.Errorf("Revoke(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := s.Minutes(ctx, id, now); !errors.Is(err, keystore.ErrNotFound) {
			t.Errorf("Minutes(%q): %v, want ErrNotFound", id, err)
		}
	}
}

// now is a fixed time, to microseconds: what every store keeps of a time.
var now = time.Date(2026, 11, 23, 9, 30, 15, 123456000, time.UTC)

func newKey(t *testing.T, label string, rate float64, burst int) (string, keystore.Key) {
	t.Helper()
	secret, k, err := keystore.NewKey(label, rate, burst, now)
	if err != nil {
		t.Fatal(err)
	}
	return secret, k
}

func create(t *testing.T, s keystore.Store, label string) keystore.Key {
	t.Helper()
	_, k := newKey(t, label, 0, 0)
	if err := s.Create(context.Background(), k); err != nil {
		t.Fatalf("Create(%q): %v", label, err)
	}
	return k
}

func same(t *testing.T, what string, got, want keystore.Key) {
	t.Helper()
	if got.ID != want.ID || got.Digest != want.Digest || got.Label != want.Label || got.Rate != want.Rate ||
		got.Burst != want.Burst || !got.Created.Equal(want.Created) || !got.Revoked.Equal(want.Revoked) ||
		got.Used.Requests != want.Used.Requests || got.Used.Errors != want.Used.Errors ||
		got.Used.Bytes != want.Used.Bytes || !got.Used.LastUsed.Equal(want.Used.LastUsed) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func createAndRead(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	if keys, err := s.Keys(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("a new store: Keys = %d keys, %v; want none", len(keys), err)
	}
	_, a := newKey(t, "first", 2.5, 0)
	if a.Burst != 3 {
		t.Errorf("a rate of 2.5 without a burst: burst %d, want 3", a.Burst)
	}
	if err := s.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := create(t, s, "second, ünïcode")
	got, err := s.Key(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "Key(first)", got, a)
	keys, err := s.Keys(ctx)
	if err != nil || len(keys) != 2 {
		t.Fatalf("Keys: %d keys, %v; want 2", len(keys), err)
	}
	same(t, "Keys()[0]", keys[0], a)
	same(t, "Keys()[1]", keys[1], b)

	if _, err := s.Key(ctx, "0000000000000000"); !errors.Is(err, keystore.ErrNotFound) {
		t.Errorf("Key of an unknown id: %v, want ErrNotFound", err)
	}
	dupID := create(t, s, "third")
	dupID.Digest = keystore.DigestOf("another key")
	dupID.Label = "same id"
	if err := s.Create(ctx, dupID); !errors.Is(err, keystore.ErrExists) {
		t.Errorf("Create with an id taken: %v, want ErrExists", err)
	}
	dupDigest := a
	dupDigest.ID = "ffffffffffffffff"
	if err := s.Create(ctx, dupDigest); !errors.Is(err, keystore.ErrExists) {
		t.Errorf("Create with a digest taken: %v, want ErrExists", err)
	}
	// Create checks a key as NewKey does, whoever made it.
	_, bad := newKey(t, "bad", 0, 0)
	for _, tc := range []struct {
		name   string
		change func(k *keystore.Key)
		want   error
	}{
		{"a label too long", func(k *keystore.Key) { k.Label = strings.Repeat("x", keystore.MaxLabel+1) }, keystore.ErrLabel},
		{"a label with a control", func(k *keystore.Key) { k.Label = "a\tb" }, keystore.ErrLabel},
		{"a negative rate", func(k *keystore.Key) { k.Rate, k.Burst = -1, 1 }, keystore.ErrLimit},
		{"a burst without a rate", func(k *keystore.Key) { k.Burst = 3 }, keystore.ErrLimit},
		{"no id", func(k *keystore.Key) { k.ID = "" }, keystore.ErrNoID},
	} {
		k := bad
		tc.change(&k)
		if err := s.Create(ctx, k); !errors.Is(err, tc.want) {
			t.Errorf("Create with %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if keys, _ := s.Keys(ctx); len(keys) != 3 {
		t.Errorf("after seven refused creations: %d keys, want 3", len(keys))
	}
	_, c := newKey(t, "x", 0, 0)
	c.Label, c.Rate, c.Burst = "  padded  ", 2.5, 0
	if err := s.Create(ctx, c); err != nil {
		t.Fatalf("Create with a rate and no burst: %v", err)
	}
	c.Label, c.Burst = "padded", 3
	if got, err := s.Key(ctx, c.ID); err != nil {
		t.Error(err)
	} else {
		same(t, "a key created with its label padded, and a rate without a burst", got, c)
	}
}

func update(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	k := create(t, s, "old name")
	label := "  new name  "
	got, err := s.Update(ctx, k.ID, keystore.Change{Label: &label})
	if err != nil {
		t.Fatal(err)
	}
	k.Label = "new name"
	same(t, "after a new label", got, k)
	got, err = s.Update(ctx, k.ID, keystore.Change{Limit: &blockrpc.Limit{Rate: 10}})
	if err != nil {
		t.Fatal(err)
	}
	k.Rate, k.Burst = 10, 10
	same(t, "after a new limit", got, k)
	if got, _ := s.Key(ctx, k.ID); got.Rate != 10 || got.Burst != 10 || got.Label != "new name" {
		t.Errorf("the key read again: %+v", got)
	}
	got, err = s.Update(ctx, k.ID, keystore.Change{Limit: &blockrpc.Limit{}})
	if err != nil || got.Rate != 0 || got.Burst != 0 {
		t.Errorf("back to the default limit: %+v, %v", got, err)
	}

	for _, c := range []keystore.Change{
		{Limit: &blockrpc.Limit{Rate: -1, Burst: 1}},
		{Limit: &blockrpc.Limit{Rate: 2e6, Burst: 1}},
		{Limit: &blockrpc.Limit{Rate: 0, Burst: 5}},
		{Label: ptr(string(make([]byte, keystore.MaxLabel+1)))},
		{Label: ptr("tab\there")},
		{Label: ptr("ok"), Limit: &blockrpc.Limit{Rate: 1, Burst: -1}},
	} {
		if _, err := s.Update(ctx, k.ID, c); err == nil {
			t.Errorf("Update with %+v: no error", c)
		}
	}
	if got, _ := s.Key(ctx, k.ID); got.Label != "new name" || got.Rate != 0 {
		t.Errorf("refused changes changed the key: %+v", got)
	}
	if _, err := s.Update(ctx, "0000000000000000", keystore.Change{Label: &label}); !errors.Is(err, keystore.ErrNotFound) {
		t.Errorf("Update of an unknown id: %v, want ErrNotFound", err)
	}
	if _, err := s.Revoke(ctx, k.ID, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, k.ID, keystore.Change{Label: &label}); !errors.Is(err, keystore.ErrRevoked) {
		t.Errorf("Update of a revoked key: %v, want ErrRevoked", err)
	}
}

func ptr[T any](v T) *T { return &v }

func revoke(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	k := create(t, s, "to revoke")
	other := create(t, s, "to keep")
	at := now.Add(time.Hour)
	got, err := s.Revoke(ctx, k.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	if got.Valid() || !got.Revoked.Equal(at) {
		t.Errorf("revoked: %+v, want revoked at %v", got, at)
	}
	again, err := s.Revoke(ctx, k.ID, at.Add(time.Hour))
	if err != nil || !again.Revoked.Equal(at) {
		t.Errorf("revoked twice: %v at %v; want the first time, %v", err, again.Revoked, at)
	}
	keys, _ := s.Keys(ctx)
	if len(keys) != 2 || keys[0].Valid() || !keys[1].Valid() || keys[1].ID != other.ID {
		t.Errorf("Keys after a revocation: %+v", keys)
	}
	if _, err := s.Revoke(ctx, "0000000000000000", at); !errors.Is(err, keystore.ErrNotFound) {
		t.Errorf("Revoke of an unknown id: %v, want ErrNotFound", err)
	}
}

func usage(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	a := create(t, s, "a")
	b := create(t, s, "b")
	// Recent minutes: a store may drop those older than a day, from its
	// own clock.
	m0 := time.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute)
	m1, m2 := m0.Add(time.Minute), m0.Add(2*time.Minute)
	last := m1.Add(30*time.Second + 250*time.Microsecond)
	err := s.Record(ctx, []keystore.Usage{
		{ID: a.ID, Totals: keystore.Totals{Requests: 5, Errors: 1, Bytes: 500, LastUsed: last},
			Minutes: []keystore.Minute{{Start: m0, Requests: 3, Errors: 1}, {Start: m1, Requests: 2}}},
		{ID: "0000000000000000", Totals: keystore.Totals{Requests: 7, LastUsed: last},
			Minutes: []keystore.Minute{{Start: m0, Requests: 7}}},
	})
	if err != nil {
		t.Fatalf("Record (an unknown id among them): %v", err)
	}
	err = s.Record(ctx, []keystore.Usage{
		{ID: a.ID, Totals: keystore.Totals{Requests: 4, Errors: 2, Bytes: 40, LastUsed: m0},
			Minutes: []keystore.Minute{{Start: m1, Requests: 1, Errors: 1}, {Start: m2, Requests: 3, Errors: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Key(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := keystore.Totals{Requests: 9, Errors: 3, Bytes: 540, LastUsed: last}
	if u := got.Used; u.Requests != want.Requests || u.Errors != want.Errors || u.Bytes != want.Bytes || !u.LastUsed.Equal(want.LastUsed) {
		t.Errorf("totals after two records: %+v, want %+v (the last use is the latest, not the last told)", u, want)
	}
	minutes, err := s.Minutes(ctx, a.ID, m0)
	if err != nil {
		t.Fatal(err)
	}
	wantMinutes := []keystore.Minute{{Start: m0, Requests: 3, Errors: 1}, {Start: m1, Requests: 3, Errors: 1}, {Start: m2, Requests: 3, Errors: 1}}
	checkMinutes(t, "Minutes from the first", minutes, wantMinutes)
	minutes, _ = s.Minutes(ctx, a.ID, m1.Add(time.Second))
	checkMinutes(t, "Minutes from within the second", minutes, wantMinutes[2:])
	if minutes, err := s.Minutes(ctx, b.ID, m0); err != nil || len(minutes) != 0 {
		t.Errorf("Minutes of an unused key: %v, %v; want none", minutes, err)
	}
	if kb, _ := s.Key(ctx, b.ID); kb.Used.Requests != 0 || !kb.Used.LastUsed.IsZero() {
		t.Errorf("an unused key's totals: %+v", kb.Used)
	}
	if _, err := s.Minutes(ctx, "0000000000000000", m0); !errors.Is(err, keystore.ErrNotFound) {
		t.Errorf("Minutes of an unknown id: %v, want ErrNotFound", err)
	}
	if err := s.Record(ctx, nil); err != nil {
		t.Errorf("Record of nothing: %v", err)
	}
}

func checkMinutes(t *testing.T, what string, got, want []keystore.Minute) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].Start.Equal(want[i].Start) && got[i].Requests == want[i].Requests && got[i].Errors == want[i].Errors
	}
	if !ok {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}
