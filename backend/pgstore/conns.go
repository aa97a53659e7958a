package pgstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// poolConns are the open connections of a pool, so that Close can end the
// statements under way on them: a pool closes once every connection in
// use is back, and a statement on a server that stopped answering (a
// network partition) comes back only at its context's end, which may be
// never. Connections are noted as they open and close, not as they are
// taken and given back, which costs every statement nothing.
type poolConns struct {
	closed atomic.Bool
	mu     sync.Mutex
	conns  map[*pgconn.PgConn]struct{}
}

// track has cfg's pool note its connections in c, and take none once c
// is closed.
func (c *poolConns) track(cfg *pgxpool.Config) {
	c.conns = make(map[*pgconn.PgConn]struct{})
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed.Load() {
			return ErrClosed
		}
		c.conns[conn.PgConn()] = struct{}{}
		return nil
	}
	cfg.BeforeClose = func(conn *pgx.Conn) {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.conns, conn.PgConn())
	}
	// The pool pings a connection idle for a second before it hands it
	// out (pgxpool's rule, kept), and before PrepareConn: once closing, a
	// ping on a server that does not answer would hold Close.
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return !c.closed.Load() && p.IdleDuration > time.Second
	}
	cfg.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
		if c.closed.Load() {
			return true, ErrClosed
		}
		return true, nil
	}
}

// interrupt makes every read and write under way on the pool fail at
// once, and the pool refuse statements from then on. The idle
// connections, taken first, are left for the pool to close cleanly. A
// deadline in the past is what a net.Conn lets another goroutine set while
// one uses it; pgconn then closes the connection, and the pool lets it go
// as the statement returns.
func (c *poolConns) interrupt(pool *pgxpool.Pool) {
	idle := pool.AcquireAllIdle(context.Background())
	defer func() {
		for _, conn := range idle {
			conn.Release()
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed.Store(true)
	held := make(map[*pgconn.PgConn]bool, len(idle))
	for _, conn := range idle {
		held[conn.Conn().PgConn()] = true
	}
	for conn := range c.conns {
		if !held[conn] {
			conn.Conn().SetDeadline(time.Unix(1, 0))
		}
	}
}
