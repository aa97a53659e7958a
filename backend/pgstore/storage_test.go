package pgstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/jackc/pgx/v5"
)

// TestStorage checks where PostgreSQL keeps block bodies: in their rows
// when they fit in a page, so that a read of one costs no lookups in the
// TOAST table, and in TOAST, compressed, when they do not; and that a
// writer opened again leaves settings made since as they are.
func TestStorage(t *testing.T) {
	w, url, schema := openWriter(t, nil)
	ctx := context.Background()
	conn := pgtest.Connect(t, url)
	blocks := pgx.Identifier{schema, "blocks"}.Sanitize()
	inToast := func() (rows int64) {
		t.Helper()
		var toast string
		if err := conn.QueryRow(ctx, `SELECT reltoastrelid::regclass::TEXT FROM pg_class WHERE oid = $1::regclass`, blocks).Scan(&toast); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT count(DISTINCT chunk_id) FROM `+toast).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}

	gen := synth.New(synth.Config{Seed: 1, TxsPerBlock: 8})
	for range 40 {
		if err := w.AddBlock(gen.Next()); err != nil {
			t.Fatal(err)
		}
	}
	// A row holds the hashes and numbers beside the body: a body of up to
	// 8,000 bytes fits in a page with them.
	var fits, over, overStored, overLength int64
	err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE octet_length(body) BETWEEN 2048 AND 8000),
		count(*) FILTER (WHERE octet_length(body) > 8160),
		COALESCE(sum(pg_column_size(body)) FILTER (WHERE octet_length(body) > 8160), 0),
		COALESCE(sum(octet_length(body)) FILTER (WHERE octet_length(body) > 8160), 0)
		FROM `+blocks).Scan(&fits, &over, &overStored, &overLength)
	if err != nil {
		t.Fatal(err)
	}
	if fits < 10 || over < 1 {
		t.Fatalf("%d bodies of 2 to 8 kB and %d over a page: the test needs both", fits, over)
	}
	// toast_tuple_target is PostgreSQL 11's: before, bodies over 2 kB
	// go to TOAST.
	inRows := serverVersion(t, conn) >= 110000
	if n := inToast(); inRows && n > over {
		t.Errorf("%d bodies in TOAST, want at most the %d that do not fit in a page", n, over)
	}
	lz4 := hasLZ4(t, conn)
	switch {
	case lz4 && overStored >= overLength:
		t.Errorf("the bodies over a page take %d bytes for %d, want them compressed with lz4", overStored, overLength)
	case !lz4 && overStored != overLength:
		// pglz would spend its time for nothing: see compressBodies.
		t.Errorf("without lz4, the bodies over a page take %d bytes for %d, want them stored as they are", overStored, overLength)
	}

	// The writer sets only what is not set yet: what the database's
	// owner chose stays.
	w.Close()
	wantOptions := []string(nil)
	if inRows {
		if _, err := conn.Exec(ctx, `ALTER TABLE `+blocks+` SET (toast_tuple_target = 4096)`); err != nil {
			t.Fatal(err)
		}
		wantOptions = []string{"toast_tuple_target=4096"}
	}
	owners, column, want := `SET COMPRESSION pglz`, "attcompression", "p"
	if !lz4 {
		owners, column, want = `SET STORAGE MAIN`, "attstorage", "m"
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE `+blocks+` ALTER COLUMN body `+owners); err != nil {
		t.Fatal(err)
	}
	w2, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
	var options []string
	var setting string
	err = conn.QueryRow(ctx, `SELECT c.reloptions, a.`+column+`::TEXT FROM pg_class c
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'body' WHERE c.oid = $1::regclass`, blocks).Scan(&options, &setting)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(options, wantOptions) || setting != want {
		t.Errorf("reopened, the writer left the table's options %q and the bodies' %s %q, want the owner's %q and %s", options, column, setting, wantOptions, want)
	}
}

// hasLZ4 reports whether the server compresses with lz4: PostgreSQL 14
// and later, built with it (Debian's packages are).
func hasLZ4(t *testing.T, conn *pgx.Conn) bool {
	t.Helper()
	ctx := context.Background()
	if serverVersion(t, conn) < 140000 {
		return false
	}
	if _, err := conn.Exec(ctx, `SET default_toast_compression = lz4`); err != nil {
		return false
	}
	if _, err := conn.Exec(ctx, `RESET default_toast_compression`); err != nil {
		t.Fatal(err)
	}
	return true
}

// serverVersion returns the server's server_version_num, as 150004.
func serverVersion(t testing.TB, conn *pgx.Conn) int {
	t.Helper()
	var version int
	if err := conn.QueryRow(context.Background(), `SELECT current_setting('server_version_num')::INT`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	return version
}
