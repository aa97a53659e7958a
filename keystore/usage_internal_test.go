package keystore

import (
	"context"
	"errors"
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

// countOneKey opens Keys over store, with a new key in it, flushed only
// when told to, and returns them and a request made with the key.
func countOneKey(t *testing.T, store Store) (*Keys, blockrpc.RequestInfo) {
	t.Helper()
	ctx := context.Background()
	secret, key, _ := NewKey("k", 0, 0, time.Now())
	if err := store.Create(ctx, key); err != nil {
		t.Fatal(err)
	}
	k, err := Open(ctx, store, Options{Refresh: time.Hour, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k, blockrpc.RequestInfo{Status: 200, Calls: 1, KeyDigest: DigestOf(secret).String()}
}

// TestMinutesOldestFirst counts requests of one key that read the clock
// on either side of a minute's start in the order opposite to it, as two
// goroutines may: the minutes a Store is given are oldest first, one entry
// a minute, as Store.Record says.
func TestMinutesOldestFirst(t *testing.T) {
	ctx := context.Background()
	store := &recording{Memory: NewMemory()}
	k, r := countOneKey(t, store)
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

// refusing is a Store whose Record keeps what it is given and fails.
type refusing struct {
	*Memory
	got [][]Usage
}

func (r *refusing) Record(_ context.Context, u []Usage) error {
	r.got = append(r.got, u)
	return errors.New("connection refused")
}

// TestFailedFlushLeavesItsUsage counts requests after a flush the store
// refused: the counts kept for the next flush must not change the usage
// the store was given, which a store may keep (pgkeys keeps a flush whose
// COMMIT went unanswered, to tell what it sent).
func TestFailedFlushLeavesItsUsage(t *testing.T) {
	ctx := context.Background()
	store := &refusing{Memory: NewMemory()}
	k, r := countOneKey(t, store)
	minute := time.Now().UTC().Truncate(time.Minute)
	for range 7 {
		k.count(r, minute)
	}
	if err := k.Flush(ctx); err == nil {
		t.Fatal("a flush the store refused succeeded")
	}
	for range 3 {
		k.count(r, minute)
	}
	k.count(r, minute.Add(-time.Minute)) // a minute before the one given
	if err := k.Flush(ctx); err == nil {
		t.Fatal("a flush the store refused succeeded")
	}
	first := store.got[0][0]
	if len(first.Minutes) != 1 || first.Minutes[0].Requests != 7 || !first.Minutes[0].Start.Equal(minute) {
		t.Errorf("the minutes of the first flush, as the store was given them, became %+v; want 7 requests at %v", first.Minutes, minute)
	}
	second := store.got[1][0]
	if second.Requests != 11 || len(second.Minutes) != 2 || second.Minutes[0].Requests != 1 || second.Minutes[1].Requests != 10 {
		t.Errorf("the second flush was given %d requests, minutes %+v; want 11, 1 then 10", second.Requests, second.Minutes)
	}
}

// TestMinutesOfTheLastDay reads the minutes of a key that were counted
// more than a day ago and not dropped since, as those of a key unused for
// a day are: Minutes gives the last day's only, as Store.Minutes says.
func TestMinutesOfTheLastDay(t *testing.T) {
	ctx := context.Background()
	_, key, _ := NewKey("k", 0, 0, time.Now())
	recent := time.Now().UTC().Truncate(time.Minute)
	old := recent.Add(-History - time.Hour)
	m := NewMemory()
	m.Create(ctx, key)
	m.t.minutes = map[string][]Minute{key.ID: {{Start: old, Requests: 5}, {Start: recent, Requests: 2}}}
	for _, since := range []time.Time{{}, old} {
		if got, err := m.Minutes(ctx, key.ID, since); err != nil || len(got) != 1 || !got[0].Start.Equal(recent) {
			t.Errorf("Minutes since %v: %+v, %v; want the last day's, 2 requests at %v", since, got, err, recent)
		}
	}
}

// refusingOnce is a Store whose first Record calls during, then fails; the
// later ones succeed.
type refusingOnce struct {
	*Memory
	during  func()
	refused bool
}

func (r *refusingOnce) Record(ctx context.Context, u []Usage) error {
	if !r.refused {
		r.refused = true
		r.during()
		return errors.New("connection refused")
	}
	return r.Memory.Record(ctx, u)
}

// TestFailedFlushKeepsWhatCameMeanwhile counts a request while a flush
// waits on the store, which then refuses it: the next flush writes both
// the refused counts and the request counted meanwhile, its minute and its
// time too.
func TestFailedFlushKeepsWhatCameMeanwhile(t *testing.T) {
	ctx := context.Background()
	store := &refusingOnce{Memory: NewMemory()}
	k, r := countOneKey(t, store)
	minute := time.Now().UTC().Truncate(time.Minute)
	k.count(r, minute)
	k.count(r, minute)
	later := minute.Add(time.Minute + time.Second)
	store.during = func() { k.count(r, later) }
	if err := k.Flush(ctx); err == nil {
		t.Fatal("a flush the store refused succeeded")
	}
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	keys, _ := store.Keys(ctx)
	if used := keys[0].Used; used.Requests != 3 || !used.LastUsed.Equal(later) {
		t.Errorf("the key's usage: %+v; want 3 requests, last used at %v", used, later)
	}
	ms, err := store.Minutes(ctx, keys[0].ID, minute)
	if err != nil || len(ms) != 2 || ms[0].Requests != 2 || ms[1].Requests != 1 || !ms[1].Start.Equal(minute.Add(time.Minute)) {
		t.Errorf("the key's minutes: %+v, %v; want 2 requests at %v, then 1 the minute after", ms, err, minute)
	}
}
