package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
)

// runBackend reads from a Backend until stop is closed, and checks every
// answer as run does the server's.
func (c *checker) runBackend(b backend.Backend, seed uint64, stop <-chan struct{}) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 2))
	check := func(what string, blk *backend.Block, err error, number *uint64, fullTx bool) {
		switch {
		case errors.Is(err, backend.ErrNotFound):
			c.checkBlock(what, []byte("null"), number, fullTx)
		case err != nil:
			c.fail("%s: %v", what, err)
		default:
			c.checkBlock(what, blk.AppendJSON(nil, fullTx), number, fullTx)
		}
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		switch k := rng.IntN(10); {
		case k < 5:
			n := uint64(rng.IntN(93))
			blk, err := b.BlockByNumber(ctx, backend.BlockNumber(n))
			check(fmt.Sprintf("block %d", n), blk, err, &n, true)
		case k < 7:
			tag := []backend.BlockNumber{backend.Latest, backend.Safe, backend.Finalized, backend.Earliest}[rng.IntN(4)]
			blk, err := b.BlockByNumber(ctx, tag)
			check(tag.String(), blk, err, nil, false)
		default:
			h := c.s.hashes[rng.IntN(len(c.s.hashes))]
			blk, err := b.BlockByHash(ctx, h)
			want := c.s.blocks[h].Number
			check("block "+h.String(), blk, err, &want, true)
		}
	}
}

// TestStandby serves reads from a streaming-replication standby (made
// with pg_basebackup -R, hot standby) while the writer, on the primary,
// imports and reorganises the chain; the reader on the standby follows,
// every answer checked, and ends serving the writer's chain.
func TestStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second server")
	}
	primary, url := sharedURL(t)
	if primary == nil {
		t.Skip("the server is given by " + pgtest.URLEnv + ": no standby is made of it")
	}
	ctx := context.Background()
	schema := "standby"
	w, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s := buildShared()
	im := w.NewImporter(ctx, nil)
	for n := uint64(0); n <= 30; n++ {
		if err := s.write(im, s.main.Block(n), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := im.Flush(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	standby, err := primary.Standby(pgtest.Config{Settings: pgtest.Fast})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := standby.Stop(); err != nil {
			t.Error(err)
		}
	}()
	t.Logf("standby made and started in %v", time.Since(start).Round(time.Millisecond))
	standbyURL := standby.URL("blockrpc")

	// A writer cannot open on the standby: it is read-only.
	if _, err := pgstore.OpenWriter(ctx, standbyURL, &pgstore.Options{Schema: schema}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("a writer on the standby: %v, want a read-only error", err)
	}
	r, err := pgstore.OpenReader(ctx, standbyURL, &pgstore.Options{Schema: schema, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	c := &checker{s: s}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.runBackend(r, uint64(i), stop)
		}()
	}
	err = s.script(ctx, w, 3, func() { time.Sleep(20 * time.Millisecond) })
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	// The standby catches up.
	written := time.Now()
	for {
		b, err := r.BlockByNumber(ctx, backend.Latest)
		if err == nil && b.Hash == s.long.Head().Hash {
			break
		}
		if time.Since(written) > 30*time.Second {
			t.Fatalf("the standby's reader did not reach the writer's head within 30s: %v, %v", b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d answers checked (%d null) while the primary took writes; the standby's reader had the head %v after the last write",
		c.answers.Load(), c.nulls.Load(), time.Since(written).Round(time.Millisecond))
	for _, f := range c.failures {
		t.Error(f)
	}

	s.long.Reorg()
	if err := s.store.SetSafe(70); err != nil {
		t.Fatal(err)
	}
	if err := s.store.SetFinalized(60); err != nil {
		t.Fatal(err)
	}
	backendtest.TestBackend(t, r, s.store)
}
