package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pgstore"
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
