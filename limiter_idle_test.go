//go:build go1.25

package blockrpc_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blockrpc/blockrpc"
)

// TestLimiterSlowKeyKeepsItsBucket spends a key's burst and asks again
// after more than ten idle minutes, on the fake clock of synctest: a
// limit whose burst takes longer than that to earn back allows only what
// it earned, its bucket not let go with its debt.
func TestLimiterSlowKeyKeepsItsBucket(t *testing.T) {
	for _, limit := range []blockrpc.Limit{
		{Rate: 1.0 / 3600, Burst: 1}, // a call an hour
		{Rate: 1, Burst: 1000},       // 1000 s to earn a burst back
	} {
		t.Run(fmt.Sprintf("rate=%g,burst=%d", limit.Rate, limit.Burst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := blockrpc.NewRateLimiter()
				ctx := context.Background()
				if ok, _, _ := l.Allow(ctx, "k", limit, limit.Burst); !ok {
					t.Fatal("the first burst refused")
				}
				time.Sleep(11 * time.Minute)
				earned := int(limit.Rate * (11 * time.Minute).Seconds())
				if ok, _, _ := l.Allow(ctx, "k", limit, earned+1); ok {
					t.Errorf("%d calls allowed 11 idle minutes after a burst, when %d were earned back", earned+1, earned)
				}
			})
		})
	}
}
