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
	keys map[[sha256.Size]byte]struct{}
}

// NewKeySet returns a set accepting the given keys; empty keys are ignored.
func NewKeySet(keys ...string) *KeySet {
	s := &KeySet{keys: make(map[[sha256.Size]byte]struct{})}
	for _, k := range keys {
		s.Add(k)
	}
	return s
}

// Add accepts key from now on.
func (s *KeySet) Add(key string) {
	if key == "" {
		return
	}
	s.mu.Lock()
	if s.keys == nil {
		s.keys = make(map[[sha256.Size]byte]struct{})
	}
	s.keys[sha256.Sum256([]byte(key))] = struct{}{}
	s.mu.Unlock()
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
