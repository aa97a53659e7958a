package blockrpc

import (
	"fmt"
	"testing"
	"time"
)

// TestRateLimiterLetsBucketsGo looks over the buckets as time passes:
// one full again is let go, so that memory follows the keys in use; one
// that has not refilled yet is kept.
func TestRateLimiterLetsBucketsGo(t *testing.T) {
	l := NewRateLimiter()
	start := time.Now()
	spend := func(id string, limit Limit, at time.Time) {
		if r := l.bucketOf(id, limit, at).ReserveN(at, limit.Burst); !r.OK() || r.DelayFrom(at) > 0 {
			t.Fatalf("%s: its first burst refused", id)
		}
	}
	spend("quick", Limit{Rate: 1, Burst: 5}, start)           // full again in 5 s
	spend("hourly", Limit{Rate: 1.0 / 3600, Burst: 1}, start) // in an hour
	for _, step := range []struct {
		after time.Duration
		want  []string
	}{
		{sweepEvery + time.Minute, []string{"hourly", "now"}},
		{time.Hour + 2*sweepEvery, []string{"now"}},
	} {
		at := start.Add(step.after)
		l.bucketOf("now", Limit{Rate: 1, Burst: 1}, at)
		for _, id := range []string{"quick", "hourly", "now"} {
			_, kept := l.buckets[id]
			want := false
			for _, w := range step.want {
				want = want || w == id
			}
			if kept != want {
				t.Errorf("after %v: bucket %q kept %v, want %v", step.after, id, kept, want)
			}
		}
	}
}

// TestRateLimiterOneOffKeys gives the limiter a new key at every call, as
// clients behind AnyKey may: the buckets of those spent long enough ago to
// have refilled are let go as the buckets grow, so that they are about as
// many as refill at once, however many keys have come.
func TestRateLimiterOneOffKeys(t *testing.T) {
	l := NewRateLimiter()
	start := time.Now()
	limit := Limit{Rate: 10, Burst: 10} // a call's token back in 0.1 s
	const keys = 100_000
	most := 0
	for i := range keys {
		at := start.Add(time.Duration(i) * time.Millisecond) // 100 keys refill at once
		if r := l.bucketOf(fmt.Sprint("key", i), limit, at).ReserveN(at, 1); !r.OK() || r.DelayFrom(at) > 0 {
			t.Fatalf("key %d: its first call refused", i)
		}
		most = max(most, len(l.buckets))
	}
	if most > minSweepAt {
		t.Errorf("%d keys used once each: %d buckets held at most, want at most %d", keys, most, minSweepAt)
	}
}
