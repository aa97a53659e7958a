package keystore

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Memory is a Store in this process's memory, for tests and for servers
// whose keys need not outlive them. Its zero value is an empty store.
type Memory struct {
	mu sync.Mutex
	t  table
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{} }

// Create implements Store.
func (m *Memory) Create(_ context.Context, k Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t.create(k)
}

// Key implements Store.
func (m *Memory) Key(_ context.Context, id string) (Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t.key(id)
}

// Keys implements Store.
func (m *Memory) Keys(context.Context) ([]Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.t.keys), nil
}

// Update implements Store.
func (m *Memory) Update(_ context.Context, id string, c Change) (Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t.update(id, c)
}

// Revoke implements Store.
func (m *Memory) Revoke(_ context.Context, id string, at time.Time) (Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t.revoke(id, at)
}

// Record implements Store.
func (m *Memory) Record(_ context.Context, usage []Usage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t.record(usage, time.Now())
	return nil
}

// Minutes implements Store.
func (m *Memory) Minutes(_ context.Context, id string, since time.Time) ([]Minute, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t.since(id, since)
}

// table is the keys and usage of Memory and File, guarded by their owner.
type table struct {
	keys    []Key               // in the order they were made
	minutes map[string][]Minute // by key id, oldest first
}

func (t *table) find(id string) int {
	return slices.IndexFunc(t.keys, func(k Key) bool { return k.ID == id })
}

func (t *table) create(k Key) error {
	if err := k.Check(); err != nil {
		return err
	}
	if slices.ContainsFunc(t.keys, func(o Key) bool { return o.ID == k.ID || o.Digest == k.Digest }) {
		return ErrExists
	}
	t.keys = append(t.keys, k)
	return nil
}

func (t *table) key(id string) (Key, error) {
	i := t.find(id)
	if i < 0 {
		return Key{}, ErrNotFound
	}
	return t.keys[i], nil
}

func (t *table) update(id string, c Change) (Key, error) {
	if err := c.Check(); err != nil {
		return Key{}, err
	}
	i := t.find(id)
	switch {
	case i < 0:
		return Key{}, ErrNotFound
	case !t.keys[i].Valid():
		return Key{}, ErrRevoked
	}
	c.Apply(&t.keys[i])
	return t.keys[i], nil
}

func (t *table) revoke(id string, at time.Time) (Key, error) {
	i := t.find(id)
	if i < 0 {
		return Key{}, ErrNotFound
	}
	if t.keys[i].Valid() {
		t.keys[i].Revoked = at.UTC().Truncate(time.Microsecond)
	}
	return t.keys[i], nil
}

func (t *table) record(usage []Usage, now time.Time) {
	if t.minutes == nil {
		t.minutes = make(map[string][]Minute)
	}
	horizon := now.Add(-History)
	for _, u := range usage {
		i := t.find(u.ID)
		if i < 0 {
			continue
		}
		k := &t.keys[i]
		k.Used.Requests += u.Requests
		k.Used.Errors += u.Errors
		k.Used.Bytes += u.Bytes
		if u.LastUsed.After(k.Used.LastUsed) {
			k.Used.LastUsed = u.LastUsed.UTC().Truncate(time.Microsecond)
		}
		t.minutes[u.ID] = mergeMinutes(t.minutes[u.ID], u.Minutes, horizon)
	}
}

// mergeMinutes adds the counts of more to those of have, both oldest
// first, and drops the minutes before horizon.
func mergeMinutes(have, more []Minute, horizon time.Time) []Minute {
	for _, m := range more {
		m.Start = m.Start.UTC().Truncate(time.Minute)
		i, found := slices.BinarySearchFunc(have, m.Start, func(h Minute, t time.Time) int { return h.Start.Compare(t) })
		if found {
			have[i].Requests += m.Requests
			have[i].Errors += m.Errors
		} else {
			have = slices.Insert(have, i, m)
		}
	}
	old, _ := slices.BinarySearchFunc(have, horizon, func(h Minute, t time.Time) int { return h.Start.Compare(t) })
	return slices.Delete(have, 0, old)
}

func (t *table) since(id string, since time.Time) ([]Minute, error) {
	if t.find(id) < 0 {
		return nil, ErrNotFound
	}
	// Minutes are dropped as usage is recorded: those of a key unused
	// for a day, or read from a file, may be older.
	if horizon := time.Now().Add(-History); since.Before(horizon) {
		since = horizon
	}
	have := t.minutes[id]
	i, _ := slices.BinarySearchFunc(have, since, func(h Minute, t time.Time) int { return h.Start.Compare(t) })
	return slices.Clone(have[i:]), nil
}
