package pgstore_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/internal/answertest"
	"github.com/blockrpc/blockrpc/memstore"
)

// TestServerRestart stops the database under a reader and a writer, and
// starts it again, as an operator's restart or a failover does. While it
// is down, the reader serves the blocks it has cached by hash, and every
// other read and every write is an error at once (a backend failure to
// the handler), never a block said not to exist, nor a wait; once it is
// back, the writer writes on under the lease it held, and the reader
// serves its chain as memstore serves it.
func TestServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own")
	}
	if err := pgtest.Available(); err != nil {
		if os.Getenv(pgtest.RequiredEnv) != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	srv, err := pgtest.Start(pgtest.Config{Settings: pgtest.Fast})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}()
	url, err := srv.CreateDatabase("blockrpc")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, err := pgstore.OpenWriter(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s := buildShared()
	s.addMain(t, w, 60)
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := make([]*backend.Block, 0, 10)
	for n := range backend.BlockNumber(10) {
		b, err := r.BlockByNumber(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, b)
	}
	h := blockrpc.NewHandler(blockrpc.NewService(r),
		blockrpc.WithKeys(blockrpc.AnyKey),
		blockrpc.WithLogger(slog.New(slog.DiscardHandler)))

	if err := srv.Halt(); err != nil {
		t.Fatal(err)
	}
	// A wait would be for the context's end, where a refused connection
	// fails at once.
	down, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, b := range read {
		if got, err := r.BlockByHash(down, b.Hash); err != nil || got.Hash != b.Hash {
			t.Errorf("block %d, cached, by hash while the server is down: %v", b.Number, err)
		}
	}
	failed := func(what string, err error) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s while the server is down: no error", what)
		case errors.Is(err, backend.ErrNotFound):
			t.Errorf("%s while the server is down: %v, where the block exists", what, err)
		case errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s while the server is down: waited for the context's end", what)
		}
	}
	_, err = r.BlockByNumber(down, 30)
	failed("the reader's block 30", err)
	_, err = r.BlockByHash(down, s.main.Block(40).Hash)
	failed("the reader's block 40 by hash", err)
	_, err = r.BlockByNumber(down, backend.Latest)
	failed("the reader's latest block", err)
	_, err = w.BlockByNumber(down, 50)
	failed("the writer's block 50", err)
	failed("writing block 61", s.write(w, s.main.Block(61), true))

	answertest.BlockByNumber(t, h, 20, false).CheckBackendFailure(t, "block 20 through the handler while the server is down")

	if err := srv.Restart(pgtest.Config{Settings: pgtest.Fast}); err != nil {
		t.Fatal(err)
	}
	// The write that failed, and one more, under the lease held all along.
	for n := uint64(61); n <= 62; n++ {
		if err := s.write(w, s.main.Block(n), true); err != nil {
			t.Fatalf("writing block %d once the server is back: %v", n, err)
		}
	}
	select {
	case <-w.LeaseLost():
		t.Error("the writer lost its lease over the restart")
	default:
	}
	if err := r.Refresh(ctx); err != nil {
		t.Fatalf("the reader's poll once the server is back: %v", err)
	}
	ref := memstore.New()
	s.addMain(t, ref, 62)
	backendtest.TestBackend(t, r, ref, s.main.Block(62).Hash)
}
