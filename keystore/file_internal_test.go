package keystore

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestFileReadsDuringChange holds a change of a File in the middle: its
// keys, a key and its minutes are read meanwhile, as the table stood
// before it, where reads used to wait for the change's save and fsync.
// Once the change is saved, reads see it.
func TestFileReadsDuringChange(t *testing.T) {
	ctx := context.Background()
	f, err := OpenFile(filepath.Join(t.TempDir(), "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	k := Key{ID: "a", Digest: DigestOf("key-a"), Label: "first", Created: time.Now()}
	if err := f.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	inChange, release := make(chan struct{}), make(chan struct{})
	changed := make(chan error, 1)
	go func() {
		changed <- f.change(func(t *table) error {
			close(inChange)
			<-release
			t.keys[0].Label = "second"
			return nil
		})
	}()
	<-inChange
	read := make(chan error, 1)
	go func() {
		got, err := f.Key(ctx, "a")
		if err == nil && got.Label != "first" {
			t.Errorf("a key read during a change: label %q, want the one before it", got.Label)
		}
		if err == nil {
			_, err = f.Keys(ctx)
		}
		if err == nil {
			_, err = f.Minutes(ctx, "a", time.Time{})
		}
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		close(release)
		<-changed // before the test's directory goes
		<-read
		t.Fatal("reads waited for a change under way")
	}
	close(release)
	if err := <-changed; err != nil {
		t.Fatal(err)
	}
	if got, err := f.Key(ctx, "a"); err != nil || got.Label != "second" {
		t.Errorf("after the change: %+v, %v; want label second", got, err)
	}
}
