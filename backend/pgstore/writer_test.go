package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// TestWriterUnsureCommit has the writer forget a reorganisation it
// committed, as when the answer to its COMMIT is lost: its next write,
// a reorganisation back, must start from what the database holds, and a
// reader that served the forgotten branch must see it replaced.
func TestWriterUnsureCommit(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, nil)
	s.importMain(t, w, 80, 90)
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	expect := func(from, to uint64, branch *chaintest.Builder) {
		t.Helper()
		for n := from; n <= to; n++ {
			b, err := r.BlockByNumber(ctx, backend.BlockNumber(n))
			switch {
			case branch == nil && !errors.Is(err, backend.ErrNotFound):
				t.Fatalf("block %d: %v; want none", n, err)
			case branch == nil:
			case err != nil:
				t.Fatalf("block %d: %v", n, err)
			case b.Hash != branch.Block(n).Hash:
				t.Fatalf("block %d: %s, not the branch's %s", n, b.Hash, branch.Block(n).Hash)
			}
		}
	}
	expect(61, 80, s.main)

	// To the long branch, which the writer forgets it wrote.
	if err := pgstore.CommitLost(w, func() error { return s.write(w, s.long.Block(90), true) }); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	expect(61, 90, s.long)
	// The writer, which serves too: a block it finds newer than what it
	// knows makes it read the head row, so that it never serves a block by
	// number past its latest, nor a block of the branch replaced.
	if b, err := w.BlockByNumber(ctx, 90); err != nil || b.Hash != s.long.Block(90).Hash {
		t.Errorf("the writer's block 90: %v, want the long branch's", err)
	}
	for _, n := range []backend.BlockNumber{backend.Latest, 70} {
		want := s.long.Block(90)
		if n == 70 {
			want = s.long.Block(70)
		}
		if b, err := w.BlockByNumber(ctx, n); err != nil || b.Hash != want.Hash {
			t.Errorf("the writer's block %s: %v, want the long branch's %d", n, err, want.Number)
		}
	}

	// And back to the main branch.
	if err := s.write(w, s.main.Block(80), true); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	expect(61, 80, s.main)
	expect(81, 90, nil)
	for name, b := range map[string]backend.Backend{"the reader": r, "the writer": w} {
		if latest, err := b.BlockByNumber(ctx, backend.Latest); err != nil || latest.Hash != s.main.Head().Hash {
			t.Errorf("%s's latest: %v; want the main branch's head", name, err)
		}
	}
}

// TestWriterCloseDuringWrite closes a writer while a write waits for a
// lock another session holds on its table (as an operator's LOCK, REINDEX
// or VACUUM FULL holds one): Close ends the write, on the server too, and
// gives the lease up, so that another writer opens at once.
func TestWriterCloseDuringWrite(t *testing.T) {
	ctx := context.Background()
	w, url, schema, waiting, written := writerInWrite(t, buildShared(), 10, "blocks")
	closed := make(chan struct{})
	go func() { w.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited 30s for a write held on a lock, want it ended")
	}
	if err := <-written; err == nil {
		t.Error("the write held on the lock succeeded, want it ended by Close")
	}
	if n := waiting(); n != 0 {
		t.Errorf("%d statements of the writer still wait on the server after Close", n)
	}
	// Still under the lock, which a writer that opens does not wait for
	// (the tables' settings are made): the lease was given up, not left
	// to expire.
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w2, err := pgstore.OpenWriter(openCtx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("a writer opened after Close: %v", err)
	}
	w2.Close()
}

// TestWriterClosedTwiceAtOnce closes a writer twice at once: the second
// Close returns only when the first has, with the lease given up, so that
// a caller who sees Close return can open the next writer.
func TestWriterClosedTwiceAtOnce(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, nil)
	s.addMain(t, w, 3)
	// The first Close waits to give the lease up while another session
	// holds the lease's table.
	release := lockTable(t, url, schema, "writer_lease", "SHARE")
	waiting := lockWaiters(t, url)
	first, second := make(chan struct{}), make(chan struct{})
	go func() { w.Close(); close(first) }()
	awaitLockWait(t, waiting, "the release of the lease", nil)
	go func() { w.Close(); close(second) }()
	select {
	case <-second:
		t.Fatal("the second Close returned while the first still gave the lease up")
	case <-time.After(200 * time.Millisecond):
	}
	release()
	<-second
	// The first returns too, its lease given up: the second did not
	// return before the release, which is what it waits for.
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the first Close did not return within 30 s of the second")
	}
	w2, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("a writer opened once Close returned: %v", err)
	}
	w2.Close()
}

// TestWriterCloseWithReadsHeld closes a writer whose reads hold every
// connection of its pool, each waiting on the server for a lock another
// session holds on the blocks' table, while more reads wait for a
// connection: Close ends them all and still gives the lease up, so that
// another writer opens at once. The release used to wait 5 s for a
// connection and fail, leaving the lease to expire; then, the held reads
// ended first, the reads waiting took the connections they freed.
func TestWriterCloseWithReadsHeld(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, url, schema := openWriter(t, &pgstore.Options{MaxConns: 2, CacheBytes: -1})
	s.addMain(t, w, 5)
	lockTable(t, url, schema, "blocks", "ACCESS EXCLUSIVE")
	waiting := lockWaiters(t, url)
	const reads = 6
	read := make(chan error, reads)
	for i := range reads {
		go func() {
			_, err := w.BlockByHash(ctx, backend.Hash{byte(i + 1)})
			read <- err
		}()
	}
	for start := time.Now(); waiting() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatal("two reads did not wait for the lock within 30 s")
		}
	}
	time.Sleep(300 * time.Millisecond) // the other reads wait for a connection
	start := time.Now()
	w.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Close took %v with the pool's connections held by reads", took)
	}
	for range reads {
		if err := <-read; !errors.Is(err, pgstore.ErrClosed) {
			t.Errorf("a read held as the writer closed: %v, want ErrClosed", err)
		}
	}
	w2, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("a writer opened after Close: %v", err)
	}
	w2.Close()
}

// TestWriterCommitAnswerLost writes through a proxy that loses the answer
// to the COMMIT of a block, as a network failing at that moment does: the
// write fails for the writer, and is in the database. The writer serves
// that block from then on, takes the same block again as the write it
// already is, and goes on from it.
func TestWriterCommitAnswerLost(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, proxy, url, schema := openWriterThroughProxy(t)
	s.addMain(t, w, 40)

	proxy.LoseCommitAnswers(1)
	if err := s.write(w, s.main.Block(41), true); err == nil {
		t.Fatal("the write whose COMMIT answer was lost succeeded")
	}
	if n := proxy.CommitAnswersToLose(); n != 0 {
		t.Fatalf("no COMMIT went through the proxy: %d answers still to lose", n)
	}
	// The client hears of the failure as the server commits, not after:
	// the commit may take a moment to show.
	for _, n := range []backend.BlockNumber{41, backend.Latest} {
		for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
			b, err := w.BlockByNumber(ctx, n)
			if err == nil && b.Hash == s.main.Block(41).Hash {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("the writer's block %s 10 s after the lost answer: %v, want block 41", n, err)
				break
			}
		}
	}
	for n := uint64(41); n <= 43; n++ {
		if err := s.write(w, s.main.Block(n), true); err != nil {
			t.Fatalf("block %d after the lost answer: %v", n, err)
		}
	}
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for n := uint64(0); n <= 43; n++ {
		if b, err := r.BlockByNumber(ctx, backend.BlockNumber(n)); err != nil || b.Hash != s.main.Block(n).Hash {
			t.Fatalf("a reader's block %d: %v", n, err)
		}
	}
	if b, err := r.BlockByNumber(ctx, backend.Latest); err != nil || b.Hash != s.main.Block(43).Hash {
		t.Errorf("a reader's latest: %v, want block 43", err)
	}
}

// TestWriterCommitAnswerHeld holds back the answer to a block's COMMIT on
// a connection that stays open and silent, as a network that stalls at
// that moment does: the write fails once the server shows the
// transaction over, where it used to wait until Close. The block is in
// the database, and the writer goes on from it.
func TestWriterCommitAnswerHeld(t *testing.T) {
	s := buildShared()
	_, url := pgtest.Shared(t)
	proxy, viaProxy := pgtest.StartProxy(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl = 2 * time.Second
	w, err := pgstore.OpenWriter(ctx, viaProxy, &pgstore.Options{Schema: pgtest.Schema(t), LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s.addMain(t, w, 5)

	proxy.HoldCommitAnswers(1)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.write(w, s.main.Block(6), true) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the write whose COMMIT answer was held succeeded")
		}
		t.Logf("the write failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(writeGiveUp(ttl)):
		w.Close() // ends it
		<-done
		t.Fatalf("the write whose COMMIT answer was held had not returned after %v", writeGiveUp(ttl))
	}
	if n := proxy.CommitAnswersToHold(); n != 0 {
		t.Fatalf("no COMMIT went through the proxy: %d answers still to hold", n)
	}
	for n := uint64(6); n <= 8; n++ {
		if err := s.write(w, s.main.Block(n), true); err != nil {
			t.Fatalf("block %d after the held answer: %v", n, err)
		}
	}
	if b, err := w.BlockByNumber(ctx, backend.Latest); err != nil || b.Hash != s.main.Block(8).Hash {
		t.Errorf("the writer's latest block: %v, want block 8", err)
	}
}

// TestWriterCommitAnswerLostOneConnection loses a COMMIT's answer on a
// Writer whose pool has one connection: the next write reads the head row
// on its own transaction's connection, where it used to ask the pool for
// a second one and wait for it for good, holding the lease's row.
func TestWriterCommitAnswerLostOneConnection(t *testing.T) {
	s := buildShared()
	_, url := pgtest.Shared(t)
	proxy, viaProxy := pgtest.StartProxy(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := pgstore.OpenWriter(ctx, viaProxy, &pgstore.Options{Schema: pgtest.Schema(t), MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s.addMain(t, w, 5)

	proxy.LoseCommitAnswers(1)
	if err := s.write(w, s.main.Block(6), true); err == nil {
		t.Fatal("the write whose COMMIT answer was lost succeeded")
	}
	done := make(chan error, 1)
	go func() { done <- s.write(w, s.main.Block(7), true) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the write after the lost answer: %v", err)
		}
	case <-time.After(15 * time.Second):
		w.Close() // ends it
		<-done
		t.Fatal("the write after the lost answer had not returned after 15 s")
	}
	if b, err := w.BlockByNumber(ctx, backend.Latest); err != nil || b.Hash != s.main.Block(7).Hash {
		t.Errorf("the writer's latest block: %v, want block 7", err)
	}
}
