package keystore

import (
	"context"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
)

// recording is a Store that keeps what Record is given.
type recording struct {
	*Memory
	got [][]Usage
}

func (r *recording) Record(ctx context.Context, u []Usage) error {
	r.got = append(r.got, u)
	return r.Memory.Record(ctx, u)
}

// TestMinutesOldestFirst counts requests of one key that read the clock
// on either side of a minute's start in the order opposite to it, as two
// goroutines may: the minutes a Store is given are oldest first, one entry
// a minute, as Store.Record says.
func TestMinutesOldestFirst(t *testing.T) {
	ctx := context.Background()
	store := &recording{Memory: NewMemory()}
	secret, key, _ := NewKey("k", 0, 0, time.Now())
	store.Create(ctx, key)
	k, err := Open(ctx, store, Options{Refresh: time.Hour, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	r := blockrpc.RequestInfo{Status: 200, Calls: 1, KeyDigest: DigestOf(secret).String()}
	m := time.Now().UTC().Truncate(time.Minute)
	before, after := m.Add(-time.Millisecond), m.Add(time.Millisecond)
	// The goroutine that read `after` takes the lock first.
	k.count(r, after)
	k.count(r, before)
	k.count(r, after.Add(time.Millisecond))
	k.count(r, before.Add(-time.Millisecond))
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if last := store.got[0][0].LastUsed; !last.Equal(after.Add(time.Millisecond)) {
		t.Errorf("LastUsed %v, want the latest request's time, %v", last, after.Add(time.Millisecond))
	}
	ms := store.got[0][0].Minutes
	for i := 1; i < len(ms); i++ {
		if !ms[i-1].Start.Before(ms[i].Start) {
			t.Errorf("Usage.Minutes given to Store.Record is not oldest first with one entry a minute: %+v", ms)
			break
		}
	}
}
