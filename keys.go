package blockrpc

import (
	"context"
	"crypto/sha256"
	"sync"
)

// A KeyValidator decides whether an API key may use the service. A non-nil
// error means the decision could not be made; the request is then refused
// with 503 rather than 401.
type KeyValidator interface {
	ValidKey(ctx context.Context, key string) (bool, error)
}

// KeyFunc adapts a function to a KeyValidator.
type KeyFunc func(ctx context.Context, key string) (bool, error)

// ValidKey calls f.
func (f KeyFunc) ValidKey(ctx context.Context, key string) (bool, error) { return f(ctx, key) }

// AnyKey accepts every non-empty key: open access, for local use.
var AnyKey KeyValidator = KeyFunc(func(_ context.Context, key string) (bool, error) {
	return key != "", nil
})

// KeySet is a set of accepted keys that can change while it is in use; its
// zero value accepts nothing until keys are added. Keys are held and looked
// up as SHA-256 digests, so that the time a check takes says nothing about
// how much of a wrong key was right.
type KeySet struct {
	mu   sync.RWMutex
	keys map[[sha256.Size]byte]keyEntry
}

type keyEntry struct {
	limit    Limit
	hasLimit bool
}

// NewKeySet returns a set accepting the given keys; empty keys are ignored.
func NewKeySet(keys ...string) *KeySet {
	s := &KeySet{keys: make(map[[sha256.Size]byte]keyEntry)}
	for _, k := range keys {
		s.Add(k)
	}
	return s
}

// Add accepts key from now on, under the handler's default limit.
func (s *KeySet) Add(key string) { s.add(key, keyEntry{}) }

// AddWithLimit accepts key from now on, under a limit of its own; adding
// a key again changes its limit.
func (s *KeySet) AddWithLimit(key string, l Limit) { s.add(key, keyEntry{l, true}) }

func (s *KeySet) add(key string, e keyEntry) {
	if key == "" {
		return
	}
	s.mu.Lock()
	if s.keys == nil {
		s.keys = make(map[[sha256.Size]byte]keyEntry)
	}
	s.keys[sha256.Sum256([]byte(key))] = e
	s.mu.Unlock()
}

// KeyLimit implements KeyLimits: the limit key was added with, if any.
func (s *KeySet) KeyLimit(_ context.Context, key string) (Limit, bool) {
	digest := sha256.Sum256([]byte(key))
	s.mu.RLock()
	e := s.keys[digest]
	s.mu.RUnlock()
	return e.limit, e.hasLimit
}

// Revoke refuses key from now on.
func (s *KeySet) Revoke(key string) {
	s.mu.Lock()
	delete(s.keys, sha256.Sum256([]byte(key)))
	s.mu.Unlock()
}

// ValidKey implements KeyValidator.
func (s *KeySet) ValidKey(_ context.Context, key string) (bool, error) {
	if key == "" {
		return false, nil
	}
	digest := sha256.Sum256([]byte(key))
	s.mu.RLock()
	_, ok := s.keys[digest]
	s.mu.RUnlock()
	return ok, nil
}
