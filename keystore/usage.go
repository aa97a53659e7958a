package keystore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/blockrpc/blockrpc"
)

// meter counts usage by key id between flushes: for each key, its totals
// and its counts of the minutes since the last flush (one or two, unless
// the store is down).
type meter struct {
	mu    sync.Mutex
	usage map[string]*Usage
}

// Observer returns the observer that counts each accepted request against
// its key. Give it to blockrpc.WithObserver, alone or beside others.
func (k *Keys) Observer() *blockrpc.Observer {
	return &blockrpc.Observer{Request: func(_ context.Context, r blockrpc.RequestInfo) { k.count(r, time.Now()) }}
}

func (k *Keys) count(r blockrpc.RequestInfo, now time.Time) {
	if r.KeyDigest == "" {
		return
	}
	id, ok := k.idOf(r.KeyDigest)
	if !ok {
		return // not in the store since the key was checked
	}
	minute := now.UTC().Truncate(time.Minute)
	errs := int64(r.Errors)
	m := &k.meter
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.usage[id]
	if p == nil {
		p = &Usage{ID: id}
		m.usage[id] = p
	}
	p.Requests++
	p.Errors += errs
	p.Bytes += r.Written
	if now.After(p.LastUsed) {
		p.LastUsed = now
	}
	// Oldest first, one entry a minute: a request that read the clock
	// before another, on either side of a minute's start, may be counted
	// after it. Its minute is among the last, if not the last.
	i := len(p.Minutes)
	for i > 0 && p.Minutes[i-1].Start.After(minute) {
		i--
	}
	if i > 0 && p.Minutes[i-1].Start.Equal(minute) {
		p.Minutes[i-1].Requests++
		p.Minutes[i-1].Errors += errs
		return
	}
	p.Minutes = slices.Insert(p.Minutes, i, Minute{Start: minute, Requests: 1, Errors: errs})
}

// Flush writes the usage counted since the last flush to the store. When
// the store cannot take it, the counts are kept for the next flush (the
// minutes of a day at most), so that an outage loses none.
func (k *Keys) Flush(ctx context.Context) error {
	m := &k.meter
	m.mu.Lock()
	taken := m.usage
	m.usage = make(map[string]*Usage, len(taken))
	m.mu.Unlock()
	if len(taken) == 0 {
		return nil
	}
	usage := make([]Usage, 0, len(taken))
	for _, p := range taken {
		usage = append(usage, *p)
	}
	err := k.store.Record(ctx, usage)
	if err == nil {
		return nil
	}
	k.log(slog.LevelWarn, "keystore: the usage of keys could not be written: kept for the next flush", "err", err, "keys", len(usage))
	horizon := time.Now().Add(-History)
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, p := range taken {
		// The store was given p.Minutes and may keep them (pgkeys keeps
		// a flush whose COMMIT went unanswered, to tell what it sent):
		// the counts kept for the next flush go to a copy.
		p.Minutes = slices.Clone(p.Minutes)
		if q := m.usage[id]; q != nil {
			p.Requests += q.Requests
			p.Errors += q.Errors
			p.Bytes += q.Bytes
			p.LastUsed = q.LastUsed
			p.Minutes = mergeMinutes(p.Minutes, q.Minutes, horizon)
		} else {
			p.Minutes = mergeMinutes(p.Minutes, nil, horizon)
		}
		m.usage[id] = p
	}
	return fmt.Errorf("keystore: writing usage: %w", err)
}
