package pgtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// A Proxy relays the connections made to it to a PostgreSQL server, and
// can lose the server's answer to a COMMIT as a network failing at that
// moment does: the server commits, and the client's connection ends, or
// falls silent, before it hears so. The client cannot tell that from a
// COMMIT that never arrived.
type Proxy struct {
	ln     net.Listener
	target string
	lose   atomic.Int64 // answers to COMMIT still to lose
	hold   atomic.Int64 // answers to COMMIT still to hold
	cut    atomic.Bool  // Partition: nothing relayed, nothing closed
	// refuse closes new connections at once; refuseAfterLoss sets it
	// once a COMMIT's answer is lost.
	refuse, refuseAfterLoss atomic.Bool

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// StartProxy starts a proxy to the server of dbURL on a free port of
// 127.0.0.1, stopped when the test ends, and returns it with dbURL
// changed to lead through it. The client must not ask for TLS.
func StartProxy(t testing.TB, dbURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: u.Host, conns: make(map[net.Conn]bool)}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

// LoseCommitAnswers makes p lose the answers to the next n COMMITs sent
// through it.
func (p *Proxy) LoseCommitAnswers(n int) { p.lose.Add(int64(n)) }

// CommitAnswersToLose returns how many of the answers LoseCommitAnswers
// asked for are still to be lost.
func (p *Proxy) CommitAnswersToLose() int { return int(p.lose.Load()) }

// HoldCommitAnswers makes p hold the answers to the next n COMMITs sent
// through it: each is lost, and its client's connection stays open and
// silent until the client ends its session or closes the connection, as
// when the network stalls and the client's context ends first.
func (p *Proxy) HoldCommitAnswers(n int) { p.hold.Add(int64(n)) }

// CommitAnswersToHold returns how many of the answers HoldCommitAnswers
// asked for are still to be held.
func (p *Proxy) CommitAnswersToHold() int { return int(p.hold.Load()) }

// Refuse makes p close the connections made to it at once while on is
// set, as a server out of reach refuses them.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// LoseCommitAnswerThenRefuse makes p lose the answer to the next COMMIT,
// and then refuse connections (see Refuse) until Refuse(false): the
// network fails as the COMMIT is answered, and stays down a while.
func (p *Proxy) LoseCommitAnswerThenRefuse() {
	p.refuseAfterLoss.Store(true)
	p.lose.Add(1)
}

// Partition makes p relay nothing more, either way, and close nothing
// until it stops, as when the client's host or its network fails without
// a word: the server waits on a connection gone silent, and the client
// hears nothing. New connections are taken, and go nowhere.
func (p *Proxy) Partition() { p.cut.Store(true) }

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Go(func() { p.relay(client, server) })
	}
}

// track records the connections, so that close ends them; it reports
// false, having closed them, once p is closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		if p.closed {
			c.Close()
			continue
		}
		p.conns[c] = true
	}
	return !p.closed
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// relay copies the server's bytes to the client as they come, and the
// client's message by message, to see each COMMIT go by.
func (p *Proxy) relay(client, server net.Conn) {
	var losing, holding atomic.Bool
	p.wg.Go(func() {
		defer server.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if p.cut.Load() {
				if err != nil {
					return // and the client is not told
				}
				continue
			}
			if losing.Load() {
				// The server has answered the COMMIT (or failed it): it is
				// done with the transaction, and its answer goes nowhere.
				return
			}
			if n > 0 {
				if _, werr := client.Write(buf[:n]); werr != nil {
					client.Close()
					return
				}
			}
			if err != nil {
				client.Close()
				return
			}
		}
	})
	err := p.relayClient(client, server, &losing, &holding)
	if p.cut.Load() {
		return // the connections stay open until p stops
	}
	if losing.Load() {
		// The client hears nothing more; the server's side stays open
		// until it has answered, so that the COMMIT runs to its end.
		if holding.Load() {
			// Until the client ends its session as it closes the
			// connection (Terminate), as a server would.
			for {
				msg, err := readMessage(client, true)
				if err != nil || msg[0] == 'X' {
					break
				}
			}
		}
		client.Close()
		return
	}
	if err != nil {
		client.Close()
		server.Close()
	}
}

// relayClient forwards the client's messages to the server until either
// side fails or a COMMIT's answer is to be lost, which it sets losing for,
// and holding too when the client's connection is to stay open.
func (p *Proxy) relayClient(client, server net.Conn, losing, holding *atomic.Bool) error {
	// The startup message has no type byte; SSL and GSS encryption
	// requests (answered with one byte) come before it in the same form.
	for {
		msg, err := readMessage(client, false)
		if err != nil {
			return err
		}
		if p.cut.Load() {
			continue
		}
		if _, err := server.Write(msg); err != nil {
			return err
		}
		code := binary.BigEndian.Uint32(msg[4:8])
		if code != 80877103 && code != 80877104 {
			break
		}
	}
	for {
		msg, err := readMessage(client, true)
		if err != nil {
			return err
		}
		if p.cut.Load() {
			continue
		}
		commit := msg[0] == 'Q' && bytes.EqualFold(bytes.TrimSpace(bytes.TrimRight(msg[5:], "\x00;")), []byte("commit"))
		switch {
		case commit && take(&p.lose):
			losing.Store(true)
			if p.refuseAfterLoss.CompareAndSwap(true, false) {
				p.refuse.Store(true)
			}
		case commit && take(&p.hold):
			holding.Store(true)
			losing.Store(true)
		}
		if _, err := server.Write(msg); err != nil {
			return err
		}
		if losing.Load() {
			return nil
		}
	}
}

// take counts one off n, and reports whether there was one to take.
func take(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// readMessage reads one message of the frontend protocol, whole: with
// its type byte when typed, and its length.
func readMessage(r io.Reader, typed bool) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	msg := make([]byte, head, 64)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(msg[head-4:])
	if size < 4 || size > 1<<30 || (!typed && size < 8) {
		return nil, fmt.Errorf("pgtest: a message of %d bytes", size)
	}
	msg = append(msg, make([]byte, size-4)...)
	if _, err := io.ReadFull(r, msg[head:]); err != nil {
		return nil, err
	}
	return msg, nil
}
