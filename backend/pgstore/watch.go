package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// A write whose connection falls silent would wait for the server's
// answer until TCP gives up (close to an hour with the keepalive pgx
// sets), and the follower or import behind it with it. While a write runs,
// the lease's renewal (which would only wait behind the write's own lock
// on the lease row) watches it instead, on a connection of its own.

// writing is the write under way.
type writing struct {
	pid     uint32 // its session's process on the server
	started time.Time
	cancel  context.CancelCauseFunc
	// lost counts the checks in a row that found its transaction ended
	// on the server: one alone may have met the moment between the
	// server's answer to a COMMIT and the client's reading it.
	lost int
}

// errWriteLost ends a write whose transaction the server no longer runs
// (the session ended, or its COMMIT was answered) while the writer still
// waits for an answer: the answer was lost on the way.
var errWriteLost = errors.New("the server no longer runs the write's transaction, and its answer did not arrive")

// errServerSilent ends a write while the server cannot be reached: for a
// whole LeaseTTL, a write's own statements included, nothing came back.
var errServerSilent = errors.New("the server has not answered for the lease's TTL")

// watcher checks the write under way on a connection of its own: a
// connection of the pool could be waiting behind readers.
type watcher struct {
	w       *Writer
	conn    *pgx.Conn
	contact time.Time // the last check the server answered
}

// check looks at wr on the server, and cancels it when it has ended
// there unheard, or when the server has not answered for a LeaseTTL.
func (c *watcher) check(wr *writing) {
	ctx, cancel := context.WithTimeout(c.w.ctx, c.w.opts.LeaseTTL/3)
	defer cancel()
	running, err := c.running(ctx, wr.pid)
	switch {
	case c.w.ctx.Err() != nil:
		return
	case err != nil:
		c.close()
		heard := wr.started
		if c.contact.After(heard) {
			heard = c.contact
		}
		if time.Since(heard) >= c.w.opts.LeaseTTL {
			wr.cancel(errServerSilent)
		}
		return
	}
	c.contact = time.Now()
	if running {
		wr.lost = 0
		return
	}
	if wr.lost++; wr.lost >= 2 {
		wr.cancel(errWriteLost)
	}
}

// running reports whether the session pid is in a transaction on the
// server. CockroachDB's sessions have no such number: there, a session
// is taken to run while the server answers.
func (c *watcher) running(ctx context.Context, pid uint32) (bool, error) {
	if c.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, c.w.pool.Config().ConnConfig)
		if err != nil {
			return false, err
		}
		c.conn = conn
	}
	if c.w.server.cockroach {
		_, err := c.conn.Exec(ctx, `SELECT 1`)
		return true, err
	}
	var running bool
	err := c.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
		WHERE pid = $1 AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)'))`, int64(pid)).Scan(&running)
	return running, err
}

// close closes the watcher's connection, if it has one.
func (c *watcher) close() {
	if c.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	c.conn.Close(ctx)
	c.conn = nil
}
