package pgstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/blockrpc/blockrpc/backend/pgstore"
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
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
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
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE octet_length(body) BETWEEN 2048 AND 8000),
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
	if n := inToast(); n > over {
		t.Errorf("%d bodies in TOAST, want at most the %d that do not fit in a page", n, over)
	}
	if overStored >= overLength {
		t.Errorf("the bodies over a page take %d bytes for %d, want them compressed", overStored, overLength)
	}

	// The writer sets only what is not set yet: what the database's
	// owner chose stays.
	w.Close()
	if _, err := conn.Exec(ctx, `ALTER TABLE `+blocks+` SET (toast_tuple_target = 4096)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE `+blocks+` ALTER COLUMN body SET COMPRESSION pglz`); err != nil {
		t.Fatal(err)
	}
	w2, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
	var options []string
	var compression string
	err = conn.QueryRow(ctx, `SELECT c.reloptions, a.attcompression::TEXT FROM pg_class c
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'body' WHERE c.oid = $1::regclass`, blocks).Scan(&options, &compression)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(options, []string{"toast_tuple_target=4096"}) || compression != "p" {
		t.Errorf("reopened, the writer left the table's options %q and the bodies' compression %q, want the owner's toast_tuple_target=4096 and pglz (p)", options, compression)
	}
}
