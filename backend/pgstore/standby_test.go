package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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
// with pg_basebackup, hot standby) while the writer, on the primary,
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
	if err := pgtest.StandbyAvailable(); err != nil {
		if os.Getenv(pgtest.RequiredEnv) != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx := context.Background()
	schema := "standby"
	w, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s := buildShared()
	s.importMain(t, w, 30, 61)

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
	// The standby catches up: its reader serves the writer's last write.
	// The latest block alone would not tell (see caughtUp).
	written := time.Now()
	for !caughtUp(r, w) {
		if time.Since(written) > 30*time.Second {
			t.Fatalf("the standby's reader did not reach the writer's last write within 30s: it serves version %d of the head row, the writer wrote %d",
				pgstore.HeadVersion(r), pgstore.HeadVersion(&w.Reader))
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d answers checked (%d null) while the primary took writes; the standby's reader had the last write %v after it",
		c.answers.Load(), c.nulls.Load(), time.Since(written).Round(time.Millisecond))
	if b, err := r.BlockByNumber(ctx, backend.Latest); err != nil || b.Hash != s.long.Head().Hash {
		t.Fatalf("the standby's reader has the writer's last write, and its latest block is %v, %v; want the long branch's head", b, err)
	}
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

// caughtUp reports whether r serves what w wrote last (or later): whether
// its last poll read the head row of w's last write. Its latest block does
// not tell. The script makes the long branch's head the latest once a
// round and again at its end, and a reader that lags behind the writer
// (on a standby, which replays the primary's writes some time after they
// commit: up to a few hundred milliseconds with the tests' asynchronous
// commit) may serve an earlier round's, with the writes after it still to
// come: the short branch, the main one, and the long one again. Compared
// with the writer's chain then, it serves the main branch's blocks at 61
// and above as its polls bring them, rightly.
func caughtUp(r *pgstore.Reader, w *pgstore.Writer) bool {
	return pgstore.HeadVersion(r) >= pgstore.HeadVersion(&w.Reader)
}

// TestCaughtUp checks caughtUp, the condition TestStandby waits for, on a
// reader that polls only when the test makes it: lagging behind writes
// that leave the long branch and come back to it, it serves the long
// branch's head as the latest block and is not caught up, and the poll
// that follows makes it serve the main branch's blocks, as TestStandby's
// reader did when it was compared with the writer's chain too early.
func TestCaughtUp(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, nil)
	s.importMain(t, w, s.main.Head().Number, s.long.Head().Number)
	if err := s.write(w, s.short.Block(76), false); err != nil {
		t.Fatal(err)
	}
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write := func(heads ...*backend.Block) {
		t.Helper()
		for _, head := range heads {
			if err := s.write(w, head, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll := func() {
		t.Helper()
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, number backend.BlockNumber, want *backend.Block) {
		t.Helper()
		got, err := r.BlockByNumber(ctx, number)
		if err != nil || got.Hash != want.Hash {
			t.Fatalf("%s: block %v is %v, %v; want block %d %s", what, number, got, err, want.Number, want.Hash)
		}
	}
	if !caughtUp(r, w) {
		t.Fatal("a reader that polled after the last write is not caught up")
	}

	// A round ends on the long branch; the reader polls.
	write(s.long.Head())
	poll()
	expect("after a poll", backend.Latest, s.long.Head())
	if !caughtUp(r, w) {
		t.Fatal("a reader that polled after the last write is not caught up")
	}

	// The next round's first writes, which the reader has not polled: its
	// latest block is still the long branch's head.
	write(s.short.Head(), s.main.Head())
	expect("before a poll", backend.Latest, s.long.Head())
	if caughtUp(r, w) {
		t.Fatal("a reader two writes behind the writer is caught up: its latest block is the long branch's head, as TestStandby waited for")
	}
	// The poll brings them: block 61 of the main branch, as the writer has
	// it now.
	poll()
	expect("after a poll", 61, s.main.Block(61))
	expect("after a poll", backend.Latest, s.main.Head())
	if !caughtUp(r, w) {
		t.Fatal("a reader that polled after the last write is not caught up")
	}

	// Back to the long branch, then a whole round that comes back to it,
	// unpolled: the reader's latest block is the writer's, three writes
	// behind it.
	write(s.long.Head())
	poll()
	write(s.short.Head(), s.main.Head(), s.long.Head())
	expect("before a poll", backend.Latest, s.long.Head())
	if caughtUp(r, w) {
		t.Fatal("a reader three writes behind the writer is caught up: its latest block is the writer's")
	}
	poll()
	if !caughtUp(r, w) {
		t.Fatal("a reader that polled after the last write is not caught up")
	}
	s.long.Reorg()
	backendtest.TestBackend(t, r, s.store)
}
