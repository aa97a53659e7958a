package pgstore_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/jackc/pgx/v5"
)

// TestPoolSize checks where the size of a Reader's connection pool comes
// from: Options.MaxConns, else the connection string's pool_max_conns (in
// a URL or in key=value settings), else max(4, 2×GOMAXPROCS).
func TestPoolSize(t *testing.T) {
	_, url, schema := openWriter(t, nil)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	settings := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, cfg.Database)
	for _, c := range []struct {
		name, conn string
		opt, want  int32
	}{
		{"default", url, 0, int32(max(4, 2*runtime.GOMAXPROCS(0)))},
		{"URL", url + "&pool_max_conns=2", 0, 2},
		{"URL first", url[:len(url)-len("?sslmode=disable")] + "?pool_max_conns=3&sslmode=disable", 0, 3},
		{"settings", settings + " pool_max_conns=2", 0, 2},
		{"settings spaced", settings + " pool_max_conns = 3", 0, 3},
		{"Options over the URL", url + "&pool_max_conns=2", 5, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := pgstore.OpenReader(context.Background(), c.conn, &pgstore.Options{Schema: schema, MaxConns: c.opt})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := pgstore.MaxConns(r); got != c.want {
				t.Errorf("a pool of %d connections, want %d", got, c.want)
			}
		})
	}
}
