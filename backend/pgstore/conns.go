package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// busyConns are the connections of a pool that are in use, so that Close
// can end the statements under way on them: a pool closes once every
// connection in use is back, and a statement on a server that stopped
// answering (a network partition) comes back only at its context's end,
// which may be never. Idle connections are left to the pool, which ends
// their sessions cleanly.
type busyConns struct {
	mu     sync.Mutex
	conns  map[*pgconn.PgConn]struct{}
	closed bool
}

// track has cfg's pool note its connections in use in b.
func (b *busyConns) track(cfg *pgxpool.Config) {
	b.conns = make(map[*pgconn.PgConn]struct{})
	cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed {
			return true, ErrClosed
		}
		b.conns[c.PgConn()] = struct{}{}
		return true, nil
	}
	// A connection that its statement broke is closed rather than
	// released.
	cfg.AfterRelease = func(c *pgx.Conn) bool { b.done(c); return true }
	cfg.BeforeClose = b.done
}

func (b *busyConns) done(c *pgx.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c.PgConn())
}

// interrupt makes every read and write on the connections in use fail at
// once, and refuses them to statements from then on. A deadline in the
// past is what a net.Conn lets another goroutine set while one uses it;
// pgconn then closes the connection, and the pool lets it go as the
// statement returns.
func (b *busyConns) interrupt() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for c := range b.conns {
		c.Conn().SetDeadline(time.Unix(1, 0))
	}
}
