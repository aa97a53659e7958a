package blockrpc

import (
	"testing"
	"time"
)

// TestRateLimiterLetsBucketsGo looks over the buckets as time passes:
// one unused for idleBucket and full again is let go, so that memory
// follows the keys in use; one that has not refilled yet is kept.
func TestRateLimiterLetsBucketsGo(t *testing.T) {
	l := NewRateLimiter()
	start := time.Now()
	spend := func(id string, limit Limit, at time.Time) {
		if r := l.bucketOf(id, limit, at).limiter.ReserveN(at, limit.Burst); !r.OK() || r.DelayFrom(at) > 0 {
			t.Fatalf("%s: its first burst refused", id)
		}
	}
	spend("quick", Limit{Rate: 1, Burst: 5}, start)           // full again in 5 s
	spend("hourly", Limit{Rate: 1.0 / 3600, Burst: 1}, start) // in an hour
	for _, step := range []struct {
		after time.Duration
		want  []string
	}{
		{idleBucket + time.Minute, []string{"hourly", "now"}},
		{time.Hour + 2*idleBucket, []string{"now"}},
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
