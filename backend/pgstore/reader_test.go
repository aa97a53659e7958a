package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
	"github.com/jackc/pgx/v5"
)

// TestReaderView checks what a reader that has not polled since a
// reorganisation serves: the chain of its last poll, from its cache,
// until a read finds a block written after that poll, or a number that no
// longer has one; then it polls, and serves the new chain only.
func TestReaderView(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, nil)
	s.importMain(t, w, s.main.Head().Number, s.long.Head().Number+1)
	// Polling only when a read asks for it.
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	expect := func(n uint64, want *backend.Block) {
		t.Helper()
		got, err := r.BlockByNumber(ctx, backend.BlockNumber(n))
		switch {
		case want == nil && !errors.Is(err, backend.ErrNotFound):
			t.Fatalf("block %d: %v, %v; want none", n, got, err)
		case want == nil:
		case err != nil:
			t.Fatalf("block %d: %v", n, err)
		case got.Hash != want.Hash:
			t.Fatalf("block %d: %s, want %s", n, got.Hash, want.Hash)
		}
	}
	for n := uint64(0); n <= 80; n++ {
		expect(n, s.main.Block(n))
	}

	// The deep reorganisation to the long branch.
	if err := s.write(w, s.long.Head(), true); err != nil {
		t.Fatal(err)
	}
	expect(70, s.main.Block(70)) // the last poll's chain, from the cache
	if latest, _ := r.BlockByNumber(ctx, backend.Latest); latest.Hash != s.main.Head().Hash {
		t.Fatalf("latest before a poll: %d, want the main branch's head", latest.Number)
	}
	expect(85, s.long.Block(85)) // written after the poll: the reader polls
	expect(70, s.long.Block(70)) // and serves the new chain only
	if latest, _ := r.BlockByNumber(ctx, backend.Latest); latest.Hash != s.long.Head().Hash {
		t.Fatalf("latest after the poll: %d, want the long branch's head", latest.Number)
	}
	for n := uint64(0); n <= 88; n++ {
		expect(n, s.long.Block(n))
	}

	// Back to the short branch: blocks 78 to 90 are no longer canonical.
	if err := s.write(w, s.short.Block(76), false); err != nil {
		t.Fatal(err)
	}
	if err := s.write(w, s.short.Head(), true); err != nil {
		t.Fatal(err)
	}
	expect(88, s.long.Block(88)) // the last poll's chain, from the cache
	expect(89, nil)              // not cached, and no longer there: the reader polls
	expect(88, nil)
	expect(76, s.short.Block(76))
	expect(70, s.main.Block(70))
	if latest, _ := r.BlockByNumber(ctx, backend.Latest); latest.Hash != s.short.Head().Hash {
		t.Fatalf("latest after the poll: %d, want the short branch's head", latest.Number)
	}
}

// TestReaderNeverBack gives a reader a head row older than the one it
// serves, as a standby further behind than the one it polled before
// gives it behind a load balancer: the reader passes over it, and what it
// serves does not move back.
func TestReaderNeverBack(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, nil)
	s.addMain(t, w, 10)
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	latest := func(want uint64) {
		t.Helper()
		b, err := r.BlockByNumber(ctx, backend.Latest)
		if err != nil {
			t.Fatalf("latest: %v", err)
		}
		if b.Number != want {
			t.Fatalf("latest: block %d, want %d", b.Number, want)
		}
	}
	latest(10)
	version := pgstore.HeadVersion(r)

	if _, err := pgtest.Connect(t, url).Exec(ctx, `UPDATE `+pgx.Identifier{schema, "head"}.Sanitize()+` SET version = version - 1, latest = 9, latest_hash = $1`,
		s.main.Block(9).Hash[:]); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	latest(10)
	if v := pgstore.HeadVersion(r); v != version {
		t.Errorf("head version %d after reading an older row, want %d still", v, version)
	}

	// The writer's next write is read.
	if err := s.write(w, s.main.Block(11), true); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	latest(11)
}

// TestReaderTagsAcrossReorg reorganises the chain below safe and
// finalized, which the writer then clears, while a reader has not polled:
// the reader answers the tags from its last poll, with the blocks the old
// chain tagged when it holds them, and otherwise, having polled as it read
// the new chain's rows, with none; never with the blocks that replaced the
// tagged ones, which were never safe or finalized.
func TestReaderTagsAcrossReorg(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			ctx := context.Background()
			s := buildShared()
			w, url, schema := openWriter(t, nil)
			s.importMain(t, w, s.main.Head().Number, s.long.Head().Number+1)
			if err := w.SetSafe(70); err != nil {
				t.Fatal(err)
			}
			if err := w.SetFinalized(65); err != nil {
				t.Fatal(err)
			}
			opts := &pgstore.Options{Schema: schema, PollInterval: time.Hour}
			if !cached {
				opts.CacheBytes = -1
			}
			r, err := pgstore.OpenReader(ctx, url, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			tagged := map[backend.BlockNumber]*backend.Block{backend.Safe: s.main.Block(70), backend.Finalized: s.main.Block(65)}
			if cached {
				for tag := range tagged {
					if _, err := r.BlockByNumber(ctx, tag); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.write(w, s.long.Head(), true); err != nil { // forks below 65
				t.Fatal(err)
			}
			for tag, old := range tagged {
				b, err := r.BlockByNumber(ctx, tag)
				got := fmt.Sprint(err)
				if err == nil {
					got = fmt.Sprintf("block %d (%s)", b.Number, b.Hash)
				}
				switch {
				case cached && (err != nil || b.Hash != old.Hash):
					t.Errorf("%v: %s; want the block of the last poll, %d (%s)", tag, got, old.Number, old.Hash)
				case !cached && !errors.Is(err, backend.ErrNotFound):
					t.Errorf("%v: %s; want ErrNotFound, the tag cleared by the reorganisation", tag, got)
				}
			}
		})
	}
}

// TestReaderOverPartition reads through a network that stops carrying
// anything, neither answering nor closing: a read with a deadline ends
// soon after it, not after pgx's grace for a cancel the server would
// answer; Close ends a read without one, in its statement or in the ping
// the pool sends on a connection idle for a second, which returns
// ErrClosed, and returns in pgx's bound for closing a connection it cannot
// reach; reads and Refresh after Close return ErrClosed.
func TestReaderOverPartition(t *testing.T) {
	s := buildShared()
	w, url, schema := openWriter(t, nil)
	s.addMain(t, w, 20)
	for _, inPing := range []bool{false, true} {
		t.Run(fmt.Sprintf("ping=%v", inPing), func(t *testing.T) {
			proxy, viaProxy := pgtest.StartProxy(t, url)
			r, err := pgstore.OpenReader(context.Background(), viaProxy, &pgstore.Options{Schema: schema, PollInterval: time.Hour, CacheBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.BlockByNumber(context.Background(), 5); err != nil {
				t.Fatal(err)
			}
			if inPing {
				time.Sleep(1500 * time.Millisecond) // idle for more than a second: pinged as it is taken
			}
			proxy.Partition()

			if !inPing {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				start := time.Now()
				if _, err := r.BlockByNumber(ctx, 6); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("read with a deadline over the partition: %v, want %v", err, context.DeadlineExceeded)
				}
				if late := time.Since(start) - 300*time.Millisecond; late > 2*time.Second {
					t.Errorf("the read with a deadline returned %v after it", late.Round(time.Millisecond))
				}
			}

			read := make(chan error, 1)
			go func() {
				_, err := r.BlockByNumber(context.Background(), 7)
				read <- err
			}()
			time.Sleep(200 * time.Millisecond) // the read waits for its answer
			closed := make(chan struct{})
			go func() {
				r.Close()
				close(closed)
			}()
			select {
			case err := <-read:
				if !errors.Is(err, pgstore.ErrClosed) {
					t.Errorf("read under way at Close: %v, want ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a read under way at Close had not returned 5 s after it")
			}
			select {
			case <-closed:
			case <-time.After(30 * time.Second):
				t.Fatal("Close had not returned after 30 s")
			}
			if _, err := r.BlockByNumber(context.Background(), 8); !errors.Is(err, pgstore.ErrClosed) {
				t.Errorf("read after Close: %v, want ErrClosed", err)
			}
			if err := r.Refresh(context.Background()); !errors.Is(err, pgstore.ErrClosed) {
				t.Errorf("Refresh after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestReaderPollFailsQuietly makes every poll fail at once for a while,
// as a database that refuses them does: the failure is logged once, not at
// each of the polls, and the end of it once.
func TestReaderPollFailsQuietly(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, nil)
	s.addMain(t, w, 3)
	var log syncbuf.Buffer
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	db := pgtest.Connect(t, url)
	head := pgx.Identifier{schema, "head"}.Sanitize()
	if _, err := db.Exec(ctx, `ALTER TABLE `+head+` RENAME TO head_away`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // about 50 polls
	if _, err := db.Exec(ctx, `ALTER TABLE `+pgx.Identifier{schema, "head_away"}.Sanitize()+` RENAME TO head`); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); !strings.Contains(log.String(), "polling the head row again"); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the polls succeed again, and it is not logged in 10 s:\n%s", log.String())
		}
	}
	if n := strings.Count(log.String(), "polling the head row failed"); n != 1 {
		t.Errorf("%d warnings of failed polls in 0.5 s, want 1:\n%s", n, log.String())
	}
}

// TestReaderCorruptHash cuts the hash of a canonical block short in its
// rows, as a hand-made change could: reading the block is an error, not a
// panic, and the other blocks are served.
func TestReaderCorruptHash(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, nil)
	s.addMain(t, w, 5)
	conn := pgtest.Connect(t, url)
	for _, table := range []string{"canonical", "blocks"} {
		if _, err := conn.Exec(ctx, `UPDATE `+pgx.Identifier{schema, table}.Sanitize()+` SET hash = substring(hash from 1 for 5) WHERE hash = $1`,
			s.main.Block(3).Hash[:]); err != nil {
			t.Fatal(err)
		}
	}
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.BlockByNumber(ctx, 3); err == nil || errors.Is(err, backend.ErrNotFound) {
		t.Errorf("block 3, its hash cut short: %v, want an error", err)
	} else {
		t.Logf("block 3: %v", err)
	}
	if b, err := r.BlockByNumber(ctx, 4); err != nil || b.Hash != s.main.Block(4).Hash {
		t.Errorf("block 4: %v", err)
	}
}

// TestDamagedHeadValues damages the pending block, and then the chain id,
// of the head row, as a hand-made change could. A read of the damaged
// value is an error, logged once; the polls go on, so that the latest
// block and the tags move with the writer's writes, and readers open. A
// writer opened on a damaged chain id writes nothing, rather than write it
// back lost, until it is set right in the database.
func TestDamagedHeadValues(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, nil)
	s.addMain(t, w, 40)
	pending := s.main.Block(41).Copy()
	pending.Pending = true
	if err := w.SetPending(pending); err != nil {
		t.Fatal(err)
	}
	var log syncbuf.Buffer
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, PollInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	conn := pgtest.Connect(t, url)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetPending(pending); err != nil { // a pending block the reader has not read
		t.Fatal(err)
	}
	exec(`UPDATE ` + pgx.Identifier{schema, "pending"}.Sanitize() + ` SET body = '\x00'::bytea`)
	for n := uint64(41); n <= 45; n++ {
		if err := s.write(w, s.main.Block(n), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetSafe(44); err != nil {
		t.Fatal(err)
	}
	check := func(who string, b backend.Backend) {
		t.Helper()
		if _, err := b.BlockByNumber(ctx, backend.Pending); err == nil || errors.Is(err, backend.ErrNotFound) {
			t.Errorf("%s: the damaged pending block: %v, want an error", who, err)
		}
		for tag, want := range map[backend.BlockNumber]uint64{backend.Latest: 45, backend.Safe: 44} {
			if b, err := b.BlockByNumber(ctx, tag); err != nil || b.Hash != s.main.Block(want).Hash {
				t.Errorf("%s: %s is %v (%v), want block %d", who, tag, b, err, want)
			}
		}
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatalf("a poll of a head row whose pending block is damaged: %v", err)
	}
	check("a reader polling", r)
	r2, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("a reader opened on a damaged pending block: %v", err)
	}
	defer r2.Close()
	check("a reader opened after", r2)
	for n := uint64(41); n <= 43; n++ { // new head rows, the same damage
		if err := w.SetSafe(n); err != nil {
			t.Fatal(err)
		}
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(log.String(), "level=ERROR"); got != 1 {
		t.Errorf("%d errors logged, want one:\n%s", got, log.String())
	}
	// Written again, it is served again.
	if err := w.SetPending(pending); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := r.BlockByNumber(ctx, backend.Pending); err != nil || b.Hash != pending.Hash {
		t.Errorf("the pending block written again: %v", err)
	}

	// The chain id, negative.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	head := pgx.Identifier{schema, "head"}.Sanitize()
	exec(`UPDATE ` + head + ` SET chain_id = -1`)
	if err := r.Refresh(ctx); err != nil {
		t.Fatalf("a poll of a head row whose chain id is damaged: %v", err)
	}
	if _, err := r.ChainID(ctx); err == nil || errors.Is(err, backend.ErrNotFound) {
		t.Errorf("the damaged chain id: %v, want an error", err)
	}
	if b, err := r.BlockByNumber(ctx, backend.Latest); err != nil || b.Number != 45 {
		t.Errorf("latest, with the chain id damaged: %v (%v)", b, err)
	}
	w2, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("a writer opened on a damaged chain id: %v", err)
	}
	defer w2.Close()
	if err := s.write(w2, s.main.Block(46), true); err == nil || !strings.Contains(err.Error(), "set right in the database") {
		t.Errorf("a write on a damaged chain id: %v, want it refused until the chain id is set right", err)
	}
	chainID, err := s.store.ChainID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE `+head+` SET chain_id = $1`, int64(chainID))
	if err := s.write(w2, s.main.Block(46), true); err != nil {
		t.Fatalf("a write once the chain id is set right: %v", err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if id, err := r.ChainID(ctx); err != nil || id != chainID {
		t.Errorf("the chain id set right: %d (%v)", id, err)
	}
}

// TestReaderBehindPastLatest reads numbers past the latest block of the
// head row polled, on a server behind it (PolledAhead, as in
// TestReaderMissingRow): there is no block there on either server, and a
// client that waits for the next block by asking for it must be told
// null, not an error, whichever standby its read reaches.
func TestReaderBehindPastLatest(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, &pgstore.Options{CacheBytes: -1})
	s.addMain(t, w, 40)
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, CacheBytes: -1, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pgstore.PolledAhead(r, 45, s.main.Block(45).Hash, false)
	for _, n := range []backend.BlockNumber{46, 50, 1000} {
		if b, err := r.BlockByNumber(ctx, n); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("block %d, past the latest (45) of the head row polled, on a server at 40: %v, %v; want ErrNotFound", n, b, err)
		}
	}
}

// TestReaderMissingRow deletes rows of blocks that the head row says are
// stored, as a hand-made deletion would, and has a reader read a server
// behind the one it polled (a standby behind another, where one address
// leads to several): a read of a block the head row says is stored is an
// error, never a block said not to exist, which a client would be told as
// null. A canonical row deleted is a gap in the chain, which the Writer's
// contract allows: no block at that number, as memstore answers it.
func TestReaderMissingRow(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, &pgstore.Options{CacheBytes: -1})
	s.addMain(t, w, 40)
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	conn := pgtest.Connect(t, url)
	if _, err := conn.Exec(ctx, `DELETE FROM `+pgx.Identifier{schema, "canonical"}.Sanitize()+` WHERE number IN (30, 40)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM `+pgx.Identifier{schema, "blocks"}.Sanitize()+` WHERE hash = $1`, s.main.Block(40).Hash[:]); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		name string
		backend.Backend
	}{{"the reader", r}, {"the writer", w}} {
		if _, err := b.BlockByNumber(ctx, 30); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("%s's block 30, its canonical row deleted: %v, want ErrNotFound, a gap", b.name, err)
		}
		if _, err := b.BlockByNumber(ctx, backend.Latest); err == nil || errors.Is(err, backend.ErrNotFound) {
			t.Errorf("%s's latest block, its rows deleted: %v, want an error", b.name, err)
		}
		if blk, err := b.BlockByNumber(ctx, 31); err != nil || blk.Hash != s.main.Block(31).Hash {
			t.Errorf("%s's block 31: %v", b.name, err)
		}
		if _, err := b.BlockByNumber(ctx, 41); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("%s's block 41, past the latest: %v, want ErrNotFound", b.name, err)
		}
	}

	// A reader whose last poll was of a server further on than the one
	// it reads, a standby behind another: the blocks it has not got yet
	// are errors too, not null.
	r2, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, CacheBytes: -1, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	pgstore.PolledAhead(r2, 45, s.main.Block(45).Hash, false)
	for _, n := range []backend.BlockNumber{43, backend.Latest} {
		if _, err := r2.BlockByNumber(ctx, n); err == nil || errors.Is(err, backend.ErrNotFound) {
			t.Errorf("block %s, on a server behind the one polled: %v, want an error", n, err)
		}
	}
	// Blocks both servers have are served, unless a reorganisation may
	// have replaced them in between.
	if b, err := r2.BlockByNumber(ctx, 20); err != nil || b.Hash != s.main.Block(20).Hash {
		t.Errorf("block 20, on a server behind the one polled: %v", err)
	}
	pgstore.PolledAhead(r2, 45, s.main.Block(45).Hash, true)
	if _, err := r2.BlockByNumber(ctx, 21); err == nil || errors.Is(err, backend.ErrNotFound) {
		t.Errorf("block 21, on a server behind the one polled by a reorganisation: %v, want an error", err)
	}
}

// TestReaderMisplacedRecord gives rows the record of another block, as a
// restore of the wrong rows or a hand-made change would: block 12's row
// block 9's record, the canonical row of 13 block 9's hash, and the head
// row's latest hash block 5's; and deletes an uncle's row. Each read of
// them is an error, where block 9 was served for the others, and the
// uncle that block 6's record lists was said not to exist.
func TestReaderMisplacedRecord(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, &pgstore.Options{CacheBytes: -1})
	s.addMain(t, w, 20)
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, CacheBytes: -1, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	conn := pgtest.Connect(t, url)
	table := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	hash := func(n uint64) []byte { h := s.main.Block(n).Hash; return h[:] }
	exec(`UPDATE `+table("blocks")+` SET body = (SELECT body FROM `+table("blocks")+` WHERE hash = $1) WHERE hash = $2`, hash(9), hash(12))
	exec(`UPDATE `+table("canonical")+` SET hash = $1 WHERE number = 13`, hash(9))
	exec(`UPDATE `+table("head")+` SET latest_hash = $1, version = version + 1`, hash(5))
	exec(`DELETE FROM `+table("uncles")+` WHERE block_hash = $1`, hash(6))
	exec(`UPDATE `+table("uncles")+` SET header = (SELECT header FROM `+table("uncles")+` WHERE block_hash = $1 AND idx = 0) WHERE block_hash = $2 AND idx = 0`, hash(18), hash(15))
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	reads := map[string]error{}
	_, reads["block 12 by hash"] = r.BlockByHash(ctx, s.main.Block(12).Hash)
	_, reads["block 12 by number"] = r.BlockByNumber(ctx, 12)
	_, reads["block 13 by number"] = r.BlockByNumber(ctx, 13)
	_, reads["the latest block"] = r.BlockByNumber(ctx, backend.Latest)
	_, reads["uncle 0 of block 6"] = r.UncleByBlockHashAndIndex(ctx, s.main.Block(6).Hash, 0)
	_, reads["uncle 0 of block 15, block 18's"] = r.UncleByBlockHashAndIndex(ctx, s.main.Block(15).Hash, 0)
	_, reads["uncle 0 of block 12, whose record is block 9's"] = r.UncleByBlockHashAndIndex(ctx, s.main.Block(12).Hash, 0)
	for what, err := range reads {
		if err == nil || errors.Is(err, backend.ErrNotFound) {
			t.Errorf("%s: %v, want an error", what, err)
		}
	}
	if _, err := r.UncleByBlockHashAndIndex(ctx, s.main.Block(6).Hash, 1); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("uncle 1 of block 6, which has one: %v, want ErrNotFound", err)
	}
	if b, err := r.BlockByNumber(ctx, 9); err != nil || b.Hash != s.main.Block(9).Hash {
		t.Errorf("block 9: %v", err)
	}
	if u, err := r.UncleByBlockHashAndIndex(ctx, s.main.Block(18).Hash, 0); err != nil || u.Hash != s.main.Block(18).Uncles[0] {
		t.Errorf("uncle 0 of block 18: %v", err)
	}

	// A block whose record's front is longer than what is read of it
	// first, for its 10 kB of extra data: its uncle 0, which it does not
	// have, is not found, from the whole body.
	long := &backend.Block{Header: backend.Header{GasLimit: 30_000_000, ExtraData: bytes.Repeat([]byte{7}, 10_000)}}
	long.Difficulty.SetUint64(1)
	if err := backend.Seal(long, nil); err != nil {
		t.Fatal(err)
	}
	w2, _, _ := openWriter(t, &pgstore.Options{CacheBytes: -1})
	if err := w2.AddBlock(long); err != nil {
		t.Fatal(err)
	}
	if _, err := w2.UncleByBlockHashAndIndex(ctx, long.Hash, 0); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("uncle 0 of a block with none and 10 kB of extra data: %v, want ErrNotFound", err)
	}
}

// TestReaderPollStuck holds a lock on the pending block's table, which
// the head row's poll reads, while reads find blocks written after the
// last poll and poll in their turn: a read waiting for another's poll
// gives up at its own deadline, and a poll a read started gives up at
// the store's, so that one stuck statement does not stop the others.
func TestReaderPollStuck(t *testing.T) {
	s := buildShared()
	w, url, schema := openWriter(t, nil)
	s.addMain(t, w, 40)
	r, err := pgstore.OpenReader(context.Background(), url, &pgstore.Options{Schema: schema, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the lock is let go (cleanups run last first): Close
	// waits for the reads' connections.
	t.Cleanup(r.Close)
	for n := uint64(41); n <= 42; n++ {
		if err := s.write(w, s.main.Block(n), true); err != nil {
			t.Fatal(err)
		}
	}
	lockTable(t, url, schema, "pending", "ACCESS EXCLUSIVE")

	// The first read polls, and its poll waits for the lock; its own
	// context has no deadline.
	first := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := r.BlockByNumber(context.Background(), 41)
		first <- err
	}()
	watcher := pgtest.Connect(t, url)
	for waiting := false; !waiting; time.Sleep(10 * time.Millisecond) {
		err := watcher.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_locks l
			JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'pending' AND NOT l.granted)`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("no poll waits for the lock after 10 s")
		}
	}

	// A second read, with a short deadline, would poll too.
	second := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := r.BlockByNumber(ctx, 42)
		second <- err
	}()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the second read: %v, want its deadline exceeded", err)
		}
	case <-time.After(3 * time.Second):
		t.Error("the second read, with a deadline of 300 ms, still waits after 3 s")
	}

	select {
	case err := <-first:
		if err == nil {
			t.Error("the first read succeeded while its poll could not read the head row")
		}
		if took := time.Since(start); took > 5*time.Second+3*time.Second {
			t.Errorf("the first read returned after %v; its poll's limit is 5 s", took.Round(time.Millisecond))
		}
	case <-time.After(30 * time.Second):
		t.Error("the first read's poll still waits after 30 s")
	}
}
