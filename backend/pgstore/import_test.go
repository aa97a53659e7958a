package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/hexutil"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/blockrpc/blockrpc/memstore/demo"
	"github.com/holiman/uint256"
	"github.com/jackc/pgx/v5"
)

// dump returns the dump of a store.
func dump(t testing.TB, s *memstore.Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// headVersion reads the head row's version: it grows with every write.
func headVersion(t testing.TB, url, schema string) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int64
	if err := conn.QueryRow(ctx, `SELECT version FROM `+pgx.Identifier{schema, "head"}.Sanitize()).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestImportDump imports the demo chain's dump with COPY, then again,
// which writes nothing, and refuses a dump of another chain.
func TestImportDump(t *testing.T) {
	ctx := context.Background()
	ref, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	data := dump(t, ref)
	w, url, schema := openWriter(t, nil)

	var batches int
	im := w.NewImporter(ctx, &pgstore.ImportOptions{SameChain: true, BatchBlocks: 16, Progress: func(pgstore.ImportProgress) { batches++ }})
	if err := (&memstore.Loader{}).LoadInto(bytes.NewReader(data), im); err != nil {
		t.Fatal(err)
	}
	if err := im.Flush(); err != nil {
		t.Fatal(err)
	}
	p := im.Progress()
	t.Logf("%d blocks (%d bytes of RLP), %d by COPY, %d progress reports", p.Blocks, p.Bytes, pgstore.Copied(im), batches)
	if p.Blocks != 112 || pgstore.Copied(im) < 100 {
		t.Errorf("%d blocks written, %d of them by COPY; want 112 (the genesis and the side block apart)", p.Blocks, pgstore.Copied(im))
	}
	// Save leaves the tags out: set them as demo.Store does.
	if err := w.SetSafe(demo.Safe); err != nil {
		t.Fatal(err)
	}
	if err := w.SetFinalized(demo.Finalized); err != nil {
		t.Fatal(err)
	}
	pending, _ := ref.BlockByNumber(ctx, backend.Pending)
	if err := w.SetPending(pending); err != nil {
		t.Fatal(err)
	}
	backendtest.TestBackend(t, w, ref, demo.SideHash)

	// Again: nothing is written.
	before := headVersion(t, url, schema)
	if err := w.ImportDump(ctx, bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	if after := headVersion(t, url, schema); after != before {
		t.Errorf("importing the same dump again wrote %d times", after-before)
	}
	backendtest.TestBackend(t, w, ref, demo.SideHash)

	// A dump of another chain is refused, and changes nothing.
	other := chaintest.New(chaintest.Config{Seed: 99, ChainID: demo.ChainID})
	other.AddBlocks(3, chaintest.Txs(1))
	err = w.ImportDump(ctx, bytes.NewReader(dump(t, other.Store())), nil)
	if !errors.Is(err, pgstore.ErrOtherChain) {
		t.Errorf("importing another chain's dump: %v, want ErrOtherChain", err)
	}
	var lineErr *memstore.LineError
	if !errors.As(err, &lineErr) || lineErr.Line != 1 {
		t.Errorf("the error %v does not name line 1", err)
	}
	if after := headVersion(t, url, schema); after != before {
		t.Errorf("a refused dump wrote %d times", after-before)
	}
	// Nor a part of it that starts above the store's latest block, which
	// would leave a gap below it.
	other.AddBlocks(demo.Head+5-3, chaintest.Txs(1))
	lines := bytes.SplitAfter(dump(t, other.Store()), []byte("\n"))
	err = w.ImportDump(ctx, bytes.NewReader(bytes.Join(lines[demo.Head+3:], nil)), nil)
	if !errors.Is(err, pgstore.ErrOtherChain) || !strings.Contains(err.Error(), "is next to no block of the store's chain (0 to 110)") {
		t.Errorf("importing a part of another chain above the store's latest block: %v, want ErrOtherChain", err)
	}
	if after := headVersion(t, url, schema); after != before {
		t.Errorf("a refused dump wrote %d times", after-before)
	}
}

// TestImportDumpNextToChain imports dumps into stores that hold part of
// a chain: a dump of another chain of the same chain id is refused, and
// changes nothing, whether its first block lies below the store's first
// block or fills a hole in the store's chain; a dump of the store's own
// chain that fills the hole is taken.
func TestImportDumpNextToChain(t *testing.T) {
	ctx := context.Background()
	ours := chaintest.New(chaintest.Config{Seed: 97, ChainID: demo.ChainID})
	ours.AddBlocks(8, chaintest.Txs(1))
	theirs := chaintest.New(chaintest.Config{Seed: 98, ChainID: demo.ChainID})
	theirs.AddBlocks(8, chaintest.Txs(1))
	// part is the dump of the chain's blocks from to to, but those in
	// holes.
	part := func(c *chaintest.Builder, from, to uint64, holes ...uint64) []byte {
		t.Helper()
		s := memstore.New()
		for n := from; n <= to; n++ {
			if !slices.Contains(holes, n) {
				if err := s.AddBlock(c.Block(n)); err != nil {
					t.Fatal(err)
				}
			}
		}
		return dump(t, s)
	}
	importDump := func(w *pgstore.Writer, data []byte) error {
		return w.ImportDump(ctx, bytes.NewReader(data), &pgstore.ImportOptions{BatchBlocks: 2})
	}

	// Blocks 2 to 6, without the genesis: another chain's whole dump.
	w, url, schema := openWriter(t, nil)
	if err := importDump(w, part(ours, 2, 6)); err != nil {
		t.Fatal(err)
	}
	before := headVersion(t, url, schema)
	err := importDump(w, part(theirs, 0, 8))
	if !errors.Is(err, pgstore.ErrOtherChain) || !strings.Contains(err.Error(), "below the store's first block, 2, and not its parent") {
		t.Errorf("another chain's dump from below the store's first block: %v, want ErrOtherChain", err)
	}
	if after := headVersion(t, url, schema); after != before {
		t.Errorf("the refused dump wrote %d times", after-before)
	}

	// Blocks 0 to 6 but 2 and 3: another chain's, then its own.
	w, url, schema = openWriter(t, nil)
	if err := importDump(w, part(ours, 0, 6, 2, 3)); err != nil {
		t.Fatal(err)
	}
	before = headVersion(t, url, schema)
	err = importDump(w, part(theirs, 2, 3))
	if !errors.Is(err, pgstore.ErrOtherChain) || !strings.Contains(err.Error(), "is not the child of the store's block 1") {
		t.Errorf("another chain's blocks in the store's hole: %v, want ErrOtherChain", err)
	}
	if after := headVersion(t, url, schema); after != before {
		t.Errorf("the refused dump wrote %d times", after-before)
	}
	if err := importDump(w, part(ours, 2, 3)); err != nil {
		t.Fatalf("its own blocks in the hole: %v", err)
	}
	for n := backend.BlockNumber(0); n <= 6; n++ {
		if b, err := w.BlockByNumber(ctx, n); err != nil || b.Hash != ours.Block(uint64(n)).Hash {
			t.Errorf("block %d once its own blocks filled the hole: %v", n, err)
		}
	}
}

// TestImportCommitAnswerLost imports a dump through a proxy that loses
// the answers to four COMMITs, of the genesis and of batches, as a
// network failing at those moments does: each import fails, and the
// same import run again goes on from what the database holds, until
// one succeeds with the whole chain stored once.
func TestImportCommitAnswerLost(t *testing.T) {
	ctx := context.Background()
	ref, err := demo.Store()
	if err != nil {
		t.Fatal(err)
	}
	data := dump(t, ref)
	w, proxy, dbURL, schema := openWriterThroughProxy(t)
	proxy.LoseCommitAnswers(4)
	failed := 0
	for ; ; failed++ {
		err := w.ImportDump(ctx, bytes.NewReader(data), &pgstore.ImportOptions{BatchBlocks: 16, SameChain: true})
		if err == nil {
			break
		}
		if failed == 4 {
			t.Fatalf("the fifth import, with no answer lost: %v", err)
		}
	}
	if failed != 4 || proxy.CommitAnswersToLose() != 0 {
		t.Fatalf("%d imports failed, %d answers still to lose; want 4 and 0", failed, proxy.CommitAnswersToLose())
	}
	// The dump leaves the tags out: set them as demo.Store does.
	pending, _ := ref.BlockByNumber(ctx, backend.Pending)
	if err := errors.Join(w.SetSafe(demo.Safe), w.SetFinalized(demo.Finalized), w.SetPending(pending)); err != nil {
		t.Fatal(err)
	}
	var hashes []backend.Hash
	for n := uint64(0); n <= demo.Head; n++ {
		b, err := ref.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, b.Hash)
	}
	r, err := pgstore.OpenReader(ctx, dbURL, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	backendtest.TestBlocks(t, r, ref, hashes...)
}

// TestImportGrowingDump imports a dump, then a longer dump of the same
// chain, whose known blocks are skipped and the rest copied; then one that
// reorganises.
func TestImportGrowingDump(t *testing.T) {
	ctx := context.Background()
	b := chaintest.New(chaintest.Config{Seed: 5, London: 3, Merge: 8, Shanghai: 10, Cancun: 12, Prague: 14})
	b.AddBlocks(20, func(i int, g *chaintest.BlockGen) {
		chaintest.Txs(2)(i, g)
		if g.Number() >= 2 && g.Number() < 8 {
			g.AddUncle()
		}
	})
	first := dump(t, b.Store())
	b.AddBlocks(30, chaintest.Txs(2))
	second := dump(t, b.Store())
	side := b.Fork(45)
	side.AddBlocks(8, chaintest.Txs(1))
	side.Reorg()
	third := dump(t, b.Store())

	w, _, _ := openWriter(t, nil)
	for i, d := range [][]byte{first, second, third} {
		im := w.NewImporter(ctx, &pgstore.ImportOptions{SameChain: true, BatchBlocks: 7})
		if err := (&memstore.Loader{}).LoadInto(bytes.NewReader(d), im); err != nil {
			t.Fatalf("dump %d: %v", i, err)
		}
		if err := im.Flush(); err != nil {
			t.Fatalf("dump %d: %v", i, err)
		}
		t.Logf("dump %d: %d blocks, %d by COPY", i, im.Progress().Blocks, pgstore.Copied(im))
		if i == 1 && pgstore.Copied(im) != 30 {
			t.Errorf("the longer dump copied %d blocks, want the 30 new ones", pgstore.Copied(im))
		}
	}
	backendtest.TestBackend(t, w, b.Store(), b.Block(50).Hash)
}

// TestImportRefusesAtTheLine checks that a bad block is refused by the
// call that gives it, the blocks before it written.
func TestImportRefusesAtTheLine(t *testing.T) {
	ctx := context.Background()
	b := chaintest.New(chaintest.Config{Seed: 6})
	b.AddBlocks(12, chaintest.Txs(2))
	src := b.Store()
	w, _, _ := openWriter(t, nil)
	im := w.NewImporter(ctx, &pgstore.ImportOptions{BatchBlocks: 100})
	for n := uint64(0); n <= 12; n++ {
		blk, _ := src.BlockByNumber(ctx, backend.BlockNumber(n))
		if n == 9 {
			bad := blk.Copy()
			bad.Transactions[0].Nonce++
			if err := im.AddBlock(bad); err == nil {
				t.Fatal("a block with a tampered transaction was taken")
			}
			break
		}
		if err := im.AddBlock(blk); err != nil {
			t.Fatal(err)
		}
	}
	latest, err := w.BlockByNumber(ctx, backend.Latest)
	if err != nil || latest.Number != 8 {
		t.Fatalf("latest after the refused block 9: %v, %v; want block 8, the blocks before it written", latest, err)
	}
}

// TestImporterClose checks that Close ends an import, and that after an
// import large enough for autovacuum to start on (not a few blocks, nor
// less than a fifth of a store's) it has vacuumed and analyzed the tables,
// so that serving them does not wait for autovacuum.
func TestImporterClose(t *testing.T) {
	ctx := context.Background()
	w, url, schema := openWriter(t, nil)
	conn := pgtest.Connect(t, url)
	// Manual vacuums and analyzes only: autovacuum counts its own. From
	// PostgreSQL 15 on, a vacuum counts itself as it ends, so the counts
	// are read without waiting; before, the statistics collector has them
	// within half a second or so, which a count that did not change (a
	// vacuum that should not have run) cannot be told from.
	collected := serverVersion(t, conn) < 150000
	maintained := func(table string, want int64) (vacuums, analyzes int64) {
		t.Helper()
		for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
			err := conn.QueryRow(ctx, `SELECT vacuum_count, analyze_count FROM pg_stat_user_tables
				WHERE schemaname = $1 AND relname = $2`, schema, table).Scan(&vacuums, &analyzes)
			if err != nil {
				t.Fatal(err)
			}
			if !collected || vacuums == want && analyzes == want || time.Since(start) > 5*time.Second {
				return vacuums, analyzes
			}
		}
	}
	g := synth.New(synth.Config{Seed: 3, TxsPerBlock: 1})
	var next *backend.Block // generated, not imported yet
	nextBlock := func() *backend.Block {
		if next == nil {
			next = g.Next()
		}
		return next
	}
	var logged bytes.Buffer
	importBlocks := func(n int) *pgstore.Importer {
		t.Helper()
		logged.Reset()
		im := w.NewImporter(ctx, &pgstore.ImportOptions{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		for range n {
			if err := im.AddBlock(nextBlock()); err != nil {
				t.Fatal(err)
			}
			next = nil
		}
		if err := im.Close(); err != nil {
			t.Fatal(err)
		}
		return im
	}

	few := importBlocks(10)
	if v, a := maintained("blocks", 0); v != 0 || a != 0 || logged.Len() != 0 {
		t.Errorf("after an import of 10 blocks, blocks was vacuumed %d times and analyzed %d times, and the log says %q; want autovacuum left to it", v, a, logged.String())
	}
	if err := few.AddBlock(nextBlock()); !errors.Is(err, pgstore.ErrClosed) {
		t.Errorf("AddBlock after Close: %v, want ErrClosed", err)
	}
	if err := few.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}

	many := importBlocks(1200)
	if pgstore.Copied(many) != 1200 {
		t.Fatalf("%d blocks copied, want 1200", pgstore.Copied(many))
	}
	if !strings.Contains(logged.String(), "vacuuming") || !strings.Contains(logged.String(), "vacuumed") {
		t.Errorf("the log of an import of 1200 blocks does not tell of the vacuum: %q", logged.String())
	}
	for _, table := range []string{"blocks", "canonical", "uncles"} {
		if v, a := maintained(table, 1); v != 1 || a != 1 {
			t.Errorf("after an import of 1200 blocks, %s was vacuumed %d times and analyzed %d times; want once each", table, v, a)
		}
	}

	// The store holds 1210 blocks: autovacuum would start only after
	// 1000 and a fifth of them more, and so does Close.
	importBlocks(1100)
	if v, _ := maintained("blocks", 1); v != 1 || logged.Len() != 0 {
		t.Errorf("after 1100 blocks more, blocks was vacuumed %d times in all, and the log says %q; want once, before them", v, logged.String())
	}
	latest, err := w.BlockByNumber(ctx, backend.Latest)
	if err != nil || latest.Number != 2309 {
		t.Fatalf("latest after the imports: %v, %v; want block 2309", latest, err)
	}
}

// TestImporterCloseAfterWriter checks that a vacuum that cannot run (its
// Writer closed) fails the upkeep, not the import: Close logs it and
// returns nil, and the blocks are served.
func TestImporterCloseAfterWriter(t *testing.T) {
	ctx := context.Background()
	w, url, schema := openWriter(t, nil)
	var logged bytes.Buffer
	im := w.NewImporter(ctx, &pgstore.ImportOptions{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	addSynthBlocks(t, im, 4, 1200)
	if err := im.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := im.Close(); err != nil {
		t.Errorf("Close after the Writer's: %v, want nil (the blocks are written)", err)
	}
	if !strings.Contains(logged.String(), "left to autovacuum") || !strings.Contains(logged.String(), pgstore.ErrClosed.Error()) {
		t.Errorf("the log does not tell why the tables were not vacuumed: %q", logged.String())
	}
	r, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	latest, err := r.BlockByNumber(ctx, backend.Latest)
	if err != nil || latest.Number != 1199 {
		t.Fatalf("latest: %v, %v; want block 1199", latest, err)
	}
}

// TestImporterCloseDuringVacuum checks that a Writer's Close stops a
// vacuum under way, rather than waiting for it, and leaves nothing of it
// on the server. The vacuum is held on a lock the test takes, so that it
// is under way when the Writer closes.
func TestImporterCloseDuringVacuum(t *testing.T) {
	ctx := context.Background()
	w, url, schema := openWriter(t, nil)
	im := w.NewImporter(ctx, &pgstore.ImportOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	addSynthBlocks(t, im, 7, 1200)
	if err := im.Flush(); err != nil {
		t.Fatal(err)
	}
	// A vacuum waits for this lock; reads and writes do not.
	lockTable(t, url, schema, "blocks", "SHARE UPDATE EXCLUSIVE")
	closed := make(chan error, 1)
	go func() { closed <- im.Close() }()

	// Not the locker's: a transaction reads pg_stat_activity once.
	watcher := pgtest.Connect(t, url)
	// The backends whose last statement is a vacuum, and those of them
	// running it.
	vacuums := func() (backends, running int) {
		t.Helper()
		err := watcher.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'VACUUM%'`).Scan(&backends, &running)
		if err != nil {
			t.Fatal(err)
		}
		return backends, running
	}
	vacuuming := func() bool { _, running := vacuums(); return running > 0 }
	for start := time.Now(); !vacuuming(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatal("the Importer's Close did not start a vacuum within 30s")
		}
	}
	writerClosed := make(chan struct{})
	go func() { w.Close(); close(writerClosed) }()
	select {
	case <-writerClosed:
	case <-time.After(30 * time.Second):
		t.Fatal("the Writer's Close waited 30s for a vacuum held on a lock, want it stopped")
	}
	// The vacuum ended with the Writer's Close: the server had answered
	// its cancel.
	if vacuuming() {
		t.Error("the vacuum still runs on the server after the Writer's Close returned")
	}
	if err := <-closed; err != nil {
		t.Errorf("the Importer's Close: %v, want nil (the blocks are written)", err)
	}
	// Its backend ends once it reads the connection's Terminate.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if backends, _ := vacuums(); backends == 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the vacuum's backend is still there 10s after the Writer closed")
		}
	}
}

// TestImporterCloseNotOwner checks an import by a writer whose role may
// write the tables but neither owns them nor may create anything, as an
// administrator may set it up: the writer opens, and the import is
// written, but PostgreSQL skips the vacuum with a warning, and Close says
// so rather than that the tables were vacuumed. A role that may only read
// the tables serves them.
func TestImporterCloseNotOwner(t *testing.T) {
	ctx := context.Background()
	owner, ownerURL, schema := openWriter(t, nil)
	owner.Close()
	admin, err := pgx.Connect(ctx, ownerURL)
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the roles are dropped: cleanups run last first.
	t.Cleanup(func() { admin.Close(ctx) })
	role := schema + "_writer"
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Skipf("cannot create a role on this server: %v", err)
	}
	dropRole(t, admin, role)
	u, err := url.Parse(ownerURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	if w, err := pgstore.OpenWriter(ctx, u.String(), &pgstore.Options{Schema: schema}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		if err == nil {
			w.Close()
		}
		t.Fatalf("a writer whose role may not use the schema: %v, want permission denied", err)
	}
	// No privilege to create anything: the writer creates nothing on
	// tables at its version.
	for _, grant := range []string{
		"GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + schema + " TO " + role,
	} {
		if _, err := admin.Exec(ctx, grant); err != nil {
			t.Fatal(err)
		}
	}
	w, err := pgstore.OpenWriter(ctx, u.String(), &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("a writer whose role does not own the tables: %v", err)
	}
	defer w.Close()
	var logged bytes.Buffer
	im := w.NewImporter(ctx, &pgstore.ImportOptions{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	addSynthBlocks(t, im, 5, 1200)
	if err := im.Close(); err != nil {
		t.Fatalf("Close: %v, want nil (the blocks are written)", err)
	}
	if got := logged.String(); !strings.Contains(got, "left to autovacuum") || !strings.Contains(got, `\"blocks\"`) || strings.Contains(got, "msg=\"pgstore: vacuumed\"") {
		t.Errorf("the log does not tell that the tables were not vacuumed, and why: %q", got)
	}
	var vacuums int64
	if err := admin.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'blocks'`, schema).Scan(&vacuums); err != nil {
		t.Fatal(err)
	}
	if vacuums != 0 {
		t.Errorf("blocks was vacuumed %d times by a role that does not own it", vacuums)
	}
	latest, err := w.BlockByNumber(ctx, backend.Latest)
	if err != nil || latest.Number != 1199 {
		t.Fatalf("latest: %v, %v; want block 1199", latest, err)
	}

	// A reader needs to read, and nothing more.
	reader := schema + "_reader"
	if _, err := admin.Exec(ctx, "CREATE ROLE "+reader+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	dropRole(t, admin, reader)
	for _, grant := range []string{
		"GRANT USAGE ON SCHEMA " + schema + " TO " + reader,
		"GRANT SELECT ON ALL TABLES IN SCHEMA " + schema + " TO " + reader,
	} {
		if _, err := admin.Exec(ctx, grant); err != nil {
			t.Fatal(err)
		}
	}
	u.User = url.User(reader)
	r, err := pgstore.OpenReader(ctx, u.String(), &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("a reader whose role may only read: %v", err)
	}
	defer r.Close()
	if b, err := r.BlockByNumber(ctx, 600); err != nil || b.Number != 600 {
		t.Fatalf("a read-only role's block 600: %v, %v", b, err)
	}
}

// addSynthBlocks adds n synthetic blocks of one transaction each, from
// the generator of seed, through the Importer.
func addSynthBlocks(t *testing.T, im *pgstore.Importer, seed uint64, n int) {
	t.Helper()
	g := synth.New(synth.Config{Seed: seed, TxsPerBlock: 1})
	for range n {
		if err := im.AddBlock(g.Next()); err != nil {
			t.Fatal(err)
		}
	}
}

// dropRole drops the role when the test ends: roles belong to the whole
// server, which may be one given by the user.
func dropRole(t *testing.T, admin *pgx.Conn, role string) {
	t.Cleanup(func() {
		ctx := context.Background()
		for _, sql := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := admin.Exec(ctx, sql); err != nil {
				t.Errorf("%s: %v", sql, err)
			}
		}
	})
}

// TestImporterCloseTwiceAfterFailure checks that a Close whose blocks
// could not be written says so again when called again, rather than
// hiding the failure behind a nil.
func TestImporterCloseTwiceAfterFailure(t *testing.T) {
	ctx := context.Background()
	w, _, _ := openWriter(t, nil)
	im := w.NewImporter(ctx, nil)
	// Fewer than a batch: buffered, not written.
	addSynthBlocks(t, im, 6, 10)
	w.Close()
	first := im.Close()
	if !errors.Is(first, pgstore.ErrClosed) {
		t.Fatalf("Close after the Writer's, with blocks buffered: %v, want ErrClosed", first)
	}
	if again := im.Close(); again != first {
		t.Errorf("a second Close: %v, want the first's %v", again, first)
	}
}

// TestImporterAfterWriterClosed writes through an Importer whose Writer
// closed between two batches, and makes an Importer of a closed Writer:
// each write fails with ErrClosed, and not with context.Canceled, which
// would say that the caller's context ended.
func TestImporterAfterWriterClosed(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, _, _ := openWriter(t, nil)
	im := w.NewImporter(ctx, nil)
	for n := uint64(0); n <= 5; n++ {
		if err := s.write(im, s.main.Block(n), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := im.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, pgstore.ErrClosed) || errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want ErrClosed", what, err)
		}
	}
	check("a write of an Importer whose Writer closed", s.write(im, s.main.Block(6), true))
	im.Close()
	late := w.NewImporter(ctx, nil)
	check("a write of an Importer made after the Writer closed", s.write(late, s.main.Block(6), true))
	late.Close()
}

// TestImportDumpEndsHeldWrite has an import's batch wait for a lock on the
// blocks table (as a CREATE INDEX without CONCURRENTLY holds it), and
// ends the import while it waits: by its context, or by closing the
// Writer. The write is cancelled on the server and ImportDump returns
// why; the write used to run on the Writer's context alone, and waited
// for the lock.
func TestImportDumpEndsHeldWrite(t *testing.T) {
	for _, end := range []string{"context", "writer closed"} {
		t.Run(end, func(t *testing.T) {
			s := buildShared()
			w, url, schema := openWriter(t, nil)
			s.addMain(t, w, 10)
			data := dump(t, s.main.Store())

			waiting := lockWaiters(t, url)
			lockTable(t, url, schema, "blocks", "SHARE")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- w.ImportDump(ctx, bytes.NewReader(data), nil) }()
			awaitLockWait(t, waiting, "the import", done)

			want := context.Canceled
			if end == "context" {
				cancel()
			} else {
				want = pgstore.ErrClosed
				go w.Close()
			}
			select {
			case err := <-done:
				if !errors.Is(err, want) {
					t.Errorf("ImportDump returned %v, want %v", err, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("ImportDump had not returned 10 s after it was ended")
			}
		})
	}
}

// TestImportStoredBlockWrongTD gives again a block the store holds, with
// a total difficulty one more than its own: the call that gives it
// refuses it, as AddBlock and memstore do, and ImportDump names its line.
// The Importer used to check it with its batch, and a later call
// returned the error, with the line of another block or none.
func TestImportStoredBlockWrongTD(t *testing.T) {
	ctx := context.Background()
	s := buildShared()
	w, _, _ := openWriter(t, nil)
	s.addMain(t, w, 10)

	bad := s.main.Block(5).Copy()
	bad.TotalDifficulty = new(uint256.Int).AddUint64(bad.TotalDifficulty, 1)
	im := w.NewImporter(ctx, nil)
	if err := im.AddBlock(bad); err == nil || !strings.Contains(err.Error(), "totalDifficulty") {
		t.Errorf("Importer.AddBlock of block 5 with a wrong total difficulty: %v", err)
	}
	// A block refused changes nothing: its child, with its own total
	// right, is checked against the stored block 5, not the refused one.
	if err := s.write(im, s.main.Block(6), true); err != nil {
		t.Errorf("Importer.AddBlock of block 6 after block 5 was refused: %v", err)
	}
	im.Close()

	src := s.main.Store()
	five, err := src.BlockByNumber(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(dump(t, src), []byte("\n"))
	badLine := -1
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"hash":"`+five.Hash.String()+`"`)) && !bytes.Contains(l, []byte(`"uncles":[{`)) {
			badLine = i
		}
	}
	if badLine < 0 {
		t.Fatal("no line of block 5 in the dump")
	}
	td := hexutil.EncodeU256(five.TotalDifficulty)
	wrong := hexutil.EncodeU256(new(uint256.Int).AddUint64(five.TotalDifficulty, 1))
	old := fmt.Sprintf(`"totalDifficulty":"%s"`, td)
	if !bytes.Contains(lines[badLine], []byte(old)) {
		t.Fatalf("line %d has no %s", badLine+1, old)
	}
	lines[badLine] = bytes.Replace(lines[badLine], []byte(old), []byte(fmt.Sprintf(`"totalDifficulty":"%s"`, wrong)), 1)

	// memstore refuses it at its line.
	_, merr := memstore.Load(bytes.NewReader(bytes.Join(lines, nil)))
	var mline *memstore.LineError
	if !errors.As(merr, &mline) || mline.Line != badLine+1 {
		t.Fatalf("memstore: %v; want an error at line %d", merr, badLine+1)
	}

	err = w.ImportDump(ctx, bytes.NewReader(bytes.Join(lines, nil)), nil)
	var le *memstore.LineError
	switch {
	case err == nil:
		t.Errorf("ImportDump took block 5 with a wrong total difficulty")
	case !errors.As(err, &le):
		t.Errorf("ImportDump: %v; not a *memstore.LineError (want line %d)", err, badLine+1)
	case le.Line != badLine+1:
		t.Errorf("ImportDump: the error names line %d, the bad block is on line %d: %v", le.Line, badLine+1, err)
	}
}

// TestImportDumpHeldBlocksSkipped imports dumps of blocks the store holds,
// canonical or not: each leaves the store as it was, where blocks it held
// off its chain were made canonical again, and a block whose parent the
// dump leaves out was refused the second time as another chain's.
func TestImportDumpHeldBlocksSkipped(t *testing.T) {
	ctx := context.Background()
	a := chaintest.New(chaintest.Config{Seed: 51})
	a.AddBlocks(10, chaintest.Txs(1))
	x := a.Fork(1)
	x.AddBlocks(2, func(i int, g *chaintest.BlockGen) { g.SetExtraData([]byte("x")) })
	b := a.Fork(5)
	b.AddBlocks(7, func(i int, g *chaintest.BlockGen) { g.SetExtraData([]byte("b")) })
	dumpOf := func(blocks ...*backend.Block) []byte {
		var out []byte
		for _, blk := range blocks {
			out = append(append(append(out, `{"block":`...), blk.AppendJSON(nil, true)...), "}\n"...)
		}
		return out
	}
	branch := func(br *chaintest.Builder, from, to uint64) []*backend.Block {
		var out []*backend.Block
		for n := from; n <= to; n++ {
			out = append(out, br.Block(n))
		}
		return out
	}
	importDump := func(w *pgstore.Writer, data []byte) error {
		return w.ImportDump(ctx, bytes.NewReader(data), &pgstore.ImportOptions{BatchBlocks: 4})
	}
	chain := func(w *pgstore.Writer, upto uint64) []backend.Hash {
		var out []backend.Hash
		for n := uint64(0); n <= upto; n++ {
			blk, err := w.BlockByNumber(ctx, backend.BlockNumber(n))
			if err != nil {
				t.Fatalf("block %d: %v", n, err)
			}
			out = append(out, blk.Hash)
		}
		return out
	}
	hashes := func(blocks []*backend.Block) []backend.Hash {
		var out []backend.Hash
		for _, blk := range blocks {
			out = append(out, blk.Hash)
		}
		return out
	}

	t.Run("a dump that reorganises, twice", func(t *testing.T) {
		w, _, _ := openWriter(t, nil)
		data := dumpOf(slices.Concat(branch(a, 0, 3), branch(x, 2, 3))...)
		if err := importDump(w, data); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(w.SetSafe(3), w.SetFinalized(3)); err != nil {
			t.Fatal(err)
		}
		if err := importDump(w, data); err != nil {
			t.Fatalf("the same dump again: %v", err)
		}
		if got, want := chain(w, 3), hashes(branch(x, 0, 3)); !slices.Equal(got, want) {
			t.Errorf("after the second import the chain is %v, want %v", got, want)
		}
		for _, tag := range []backend.BlockNumber{backend.Safe, backend.Finalized} {
			if blk, err := w.BlockByNumber(ctx, tag); err != nil || blk.Hash != x.Block(3).Hash {
				t.Errorf("%v after the second import: %v, want block 3 of the dump's chain", tag, err)
			}
		}
	})

	t.Run("a dump with a hole, twice", func(t *testing.T) {
		w, _, _ := openWriter(t, nil)
		data := dumpOf(slices.Concat(branch(x, 0, 3), branch(a, 4, 4))...)
		for i := range 2 {
			if err := importDump(w, data); err != nil {
				t.Fatalf("import %d: %v", i+1, err)
			}
		}
	})

	t.Run("an old dump into a store that moved on", func(t *testing.T) {
		w, _, _ := openWriter(t, nil)
		old, newer := dumpOf(branch(a, 0, 10)...), dumpOf(branch(b, 0, 12)...)
		for _, data := range [][]byte{old, newer, old} {
			if err := importDump(w, data); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := chain(w, 12), hashes(branch(b, 0, 12)); !slices.Equal(got, want) {
			t.Errorf("after the old dump again, the chain is %v, want the newer dump's %v", got, want)
		}
	})
}
