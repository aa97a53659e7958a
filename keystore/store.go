package keystore

import (
	"context"
	"errors"
	"time"

	"github.com/blockrpc/blockrpc"
)

// A Store keeps API keys and their usage. Its methods are safe for
// concurrent use, and a Store shared by many processes (package
// backend/pgstore/pgkeys) is consistent across them: what one process
// wrote, the next read of any process sees.
type Store interface {
	// Create stores a new key, checked first (Key.Check), and fails with
	// its error when the check does. It fails with ErrExists when a key
	// with its id or its digest is stored already.
	Create(ctx context.Context, k Key) error
	// Key returns the key with the given id, or ErrNotFound.
	Key(ctx context.Context, id string) (Key, error)
	// Keys returns every key, revoked ones too, in the order they were
	// made.
	Keys(ctx context.Context) ([]Key, error)
	// Update changes a valid key's label and limit, and returns the key
	// as it is now: ErrNotFound when there is no such key, ErrRevoked
	// when it was revoked. The values are checked (CheckLabel,
	// CheckLimit) before anything is changed.
	Update(ctx context.Context, id string, c Change) (Key, error)
	// Revoke revokes the key at the given time, and returns it. A key
	// revoked already stays revoked at its first time.
	Revoke(ctx context.Context, id string, at time.Time) (Key, error)
	// Record adds usage to the keys' totals and their per-minute counts.
	// Usage of a key the store does not hold (deleted by the operator
	// meanwhile) is dropped; minutes older than a day may be.
	Record(ctx context.Context, usage []Usage) error
	// Minutes returns a key's per-minute counts from since on, oldest
	// first: the minutes in which it was used, of the last day at most
	// (History), however long ago since is.
	Minutes(ctx context.Context, id string, since time.Time) ([]Minute, error)
}

// A Change is what Store.Update changes: each field that is not nil.
type Change struct {
	Label *string
	// Limit sets the key's Rate and Burst together; a Rate of 0 puts the
	// key back under the server's default.
	Limit *blockrpc.Limit
}

// Check checks the values of c, and gives a limit's burst its default:
// what a Store does before it changes anything.
func (c *Change) Check() error {
	if c.Label != nil {
		label, err := CheckLabel(*c.Label)
		if err != nil {
			return err
		}
		c.Label = &label
	}
	if c.Limit != nil {
		rate, burst, err := CheckLimit(c.Limit.Rate, c.Limit.Burst)
		if err != nil {
			return err
		}
		c.Limit = &blockrpc.Limit{Rate: rate, Burst: burst}
	}
	return nil
}

// Apply changes k as c says; c has been checked.
func (c Change) Apply(k *Key) {
	if c.Label != nil {
		k.Label = *c.Label
	}
	if c.Limit != nil {
		k.Rate, k.Burst = c.Limit.Rate, c.Limit.Burst
	}
}

// Usage is what a serving process counted of one key since it last told
// the store.
type Usage struct {
	ID string
	// Totals holds the counts to add, and the last use.
	Totals
	// Minutes are the counts by minute, oldest first.
	Minutes []Minute
}

// A Minute is a key's usage in one minute of the clock.
type Minute struct {
	// Start is the minute's first instant, in UTC.
	Start            time.Time
	Requests, Errors int64
}

// Errors of a Store.
var (
	ErrNotFound = errors.New("keystore: no key with that id")
	ErrExists   = errors.New("keystore: a key with that id or digest exists already")
	ErrRevoked  = errors.New("keystore: the key is revoked")
)

// History is how long a store keeps per-minute counts.
const History = 24 * time.Hour
