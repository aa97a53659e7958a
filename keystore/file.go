package keystore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// File is a Store kept in one JSON file, for a single serving process
// whose keys must outlive it. Every change is written whole to a new file
// that then replaces the old one, so that a crash leaves either the old
// keys or the new, never a mix. The file holds digests, never keys; it is
// made readable by its owner only. Two processes must not write one file.
type File struct {
	path string
	// changing lets one change at a time write the file; mu guards t only
	// while a saved change takes its place, so that reads never wait
	// behind a save's fsync.
	changing sync.Mutex
	mu       sync.RWMutex
	t        table
}

// fileFormat is the version of the file's layout.
const fileFormat = 1

type fileContent struct {
	Format  int                   `json:"format"`
	Keys    []fileKey             `json:"keys"`
	Minutes map[string][][3]int64 `json:"minutes,omitempty"` // by key id: [unix minute, requests, errors]
}

type fileKey struct {
	ID       string    `json:"id"`
	Digest   string    `json:"sha256"`
	Label    string    `json:"label"`
	Rate     float64   `json:"rate,omitempty"`
	Burst    int       `json:"burst,omitempty"`
	Created  time.Time `json:"created"`
	Revoked  time.Time `json:"revoked,omitzero"`
	Requests int64     `json:"requests,omitempty"`
	Errors   int64     `json:"errors,omitempty"`
	Bytes    int64     `json:"bytes,omitempty"`
	LastUsed time.Time `json:"last_used,omitzero"`
}

// OpenFile opens the store kept at path, and starts an empty one when
// there is no file there yet (the directory must exist). A file whose keys
// break the rules a Store keeps (an id or a digest held twice, a label or
// a limit that Create would refuse) is refused, not served in part.
func OpenFile(path string) (*File, error) {
	f := &File{path: path}
	// A save's temporary file left for a minute is one a crash left: a
	// save takes milliseconds, and only one process writes the file (a
	// second may open it to read).
	removeTemporaries(path, time.Now().Add(-time.Minute))
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, f.save(&f.t)
	case err != nil:
		return nil, fmt.Errorf("keystore: %w", err)
	}
	var c fileContent
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("keystore: %s is not a key store: %w", path, err)
	}
	if c.Format != fileFormat {
		return nil, fmt.Errorf("keystore: %s has format %d, this version reads %d", path, c.Format, fileFormat)
	}
	ids, digests := make(map[string]bool, len(c.Keys)), make(map[Digest]bool, len(c.Keys))
	for _, fk := range c.Keys {
		k, err := fk.key()
		switch {
		case err != nil:
		case ids[k.ID]:
			err = errors.New("its id is held twice")
		case digests[k.Digest]:
			err = errors.New("its digest is held twice")
		}
		if err != nil {
			return nil, fmt.Errorf("keystore: %s: key %q is damaged: %w", path, fk.ID, err)
		}
		ids[k.ID], digests[k.Digest] = true, true
		f.t.keys = append(f.t.keys, k)
	}
	f.t.minutes = make(map[string][]Minute, len(c.Minutes))
	for id, ms := range c.Minutes {
		for _, m := range ms {
			f.t.minutes[id] = append(f.t.minutes[id], Minute{Start: time.Unix(m[0]*60, 0).UTC(), Requests: m[1], Errors: m[2]})
		}
		slices.SortFunc(f.t.minutes[id], func(a, b Minute) int { return a.Start.Compare(b.Start) })
	}
	return f, nil
}

// key is the key fk holds, its values checked as Create checks them.
func (fk fileKey) key() (Key, error) {
	d, err := ParseDigest(fk.Digest)
	if err != nil {
		return Key{}, err
	}
	k := Key{
		ID: fk.ID, Digest: d, Label: fk.Label, Rate: fk.Rate, Burst: fk.Burst,
		Created: fk.Created, Revoked: fk.Revoked,
		Used: Totals{Requests: fk.Requests, Errors: fk.Errors, Bytes: fk.Bytes, LastUsed: fk.LastUsed},
	}
	return k, k.Check()
}

// removeTemporaries removes the files save makes beside the store's
// (os.CreateTemp's name: the pattern's star a decimal number) last
// changed before then.
func removeTemporaries(path string, before time.Time) {
	prefix := filepath.Base(path) + "."
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		rest, isOurs := strings.CutPrefix(e.Name(), prefix)
		number, isTemporary := strings.CutSuffix(rest, ".tmp")
		if !isOurs || !isTemporary || number == "" || strings.Trim(number, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(before) {
			os.Remove(filepath.Join(filepath.Dir(path), e.Name()))
		}
	}
}

// save writes t to a new file beside the store's, syncs it, and renames
// it over the old one.
func (f *File) save(t *table) error {
	c := fileContent{Format: fileFormat, Keys: make([]fileKey, 0, len(t.keys))}
	for _, k := range t.keys {
		c.Keys = append(c.Keys, fileKey{
			ID: k.ID, Digest: k.Digest.String(), Label: k.Label, Rate: k.Rate, Burst: k.Burst,
			Created: k.Created, Revoked: k.Revoked,
			Requests: k.Used.Requests, Errors: k.Used.Errors, Bytes: k.Used.Bytes, LastUsed: k.Used.LastUsed,
		})
	}
	if len(t.minutes) > 0 {
		c.Minutes = make(map[string][][3]int64, len(t.minutes))
		for id, ms := range t.minutes {
			for _, m := range ms {
				c.Minutes[id] = append(c.Minutes[id], [3]int64{m.Start.Unix() / 60, m.Requests, m.Errors})
			}
		}
	}
	data, err := json.MarshalIndent(c, "", "\t")
	if err != nil {
		return fmt.Errorf("keystore: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("keystore: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(f.path))
	}
	if err != nil {
		return fmt.Errorf("keystore: saving %s: %w", f.path, err)
	}
	return nil
}

// syncDir makes a rename in dir durable. Systems that cannot sync a
// directory (Windows) make it durable without.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

// change applies do to a copy of the table, saves the copy and keeps it
// only when it was saved: a change that could not be written is not made.
// Reads go on from the table as it was until then.
func (f *File) change(do func(t *table) error) error {
	f.changing.Lock()
	defer f.changing.Unlock()
	// Only a change replaces f.t, and this one holds changing: f.t can be
	// read without mu.
	next := table{keys: slices.Clone(f.t.keys), minutes: make(map[string][]Minute, len(f.t.minutes))}
	for id, ms := range f.t.minutes {
		next.minutes[id] = slices.Clone(ms)
	}
	if err := do(&next); err != nil {
		return err
	}
	if err := f.save(&next); err != nil {
		return err
	}
	f.mu.Lock()
	f.t = next
	f.mu.Unlock()
	return nil
}

// Create implements Store.
func (f *File) Create(_ context.Context, k Key) error {
	return f.change(func(t *table) error { return t.create(k) })
}

// Key implements Store.
func (f *File) Key(_ context.Context, id string) (Key, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.t.key(id)
}

// Keys implements Store.
func (f *File) Keys(context.Context) ([]Key, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clone(f.t.keys), nil
}

// Update implements Store.
func (f *File) Update(_ context.Context, id string, c Change) (k Key, err error) {
	err = f.change(func(t *table) error {
		k, err = t.update(id, c)
		return err
	})
	return k, err
}

// Revoke implements Store.
func (f *File) Revoke(_ context.Context, id string, at time.Time) (k Key, err error) {
	err = f.change(func(t *table) error {
		k, err = t.revoke(id, at)
		return err
	})
	return k, err
}

// Record implements Store.
func (f *File) Record(_ context.Context, usage []Usage) error {
	if len(usage) == 0 {
		return nil
	}
	return f.change(func(t *table) error {
		t.record(usage, time.Now())
		return nil
	})
}

// Minutes implements Store.
func (f *File) Minutes(_ context.Context, id string, since time.Time) ([]Minute, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.t.since(id, since)
}
