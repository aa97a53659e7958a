package blockrpc_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
)

// fullBlockBatch is a batch of n calls for mainnet block 18,000,000 with its
// transactions: a 650 KB answer each.
func fullBlockBatch(n int) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["0x112A880",true]}`, i)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// stallingClient sends body and never reads the answer; its small receive
// buffer makes the server's writes block soon.
func stallingClient(t *testing.T, addr, body string, gzip bool) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) // before the server's own cleanup, which waits for its requests
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	encoding := ""
	if gzip {
		encoding = "Accept-Encoding: gzip\r\n"
	}
	fmt.Fprintf(conn, "POST /v3/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s",
		testKey, encoding, len(body), body)
	return conn
}

// heapPeak samples the heap in use until stop is closed and returns the
// highest value seen.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	peak := make(chan uint64, 1)
	go func() {
		var max uint64
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			max = maxOf(max, m.HeapInuse)
			select {
			case <-stop:
				peak <- max
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return peak
}

func maxOf(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// TestStalledReadersHoldLittleMemory sends big batches of full blocks from
// clients that never read their answers. Built whole, each answer would
// take 25 MB (the response limit) and more with gzip; written as produced,
// a stalled request holds about a chunk and one block. Meanwhile another
// client's requests are answered, and when the stalled clients go away
// their requests end without rendering the rest.
func TestStalledReadersHoldLittleMemory(t *testing.T) {
	store, _ := largestMainnetBlock(t)
	var cut atomic.Int32
	observer := &blockrpc.Observer{Request: func(_ context.Context, r blockrpc.RequestInfo) {
		if r.Batch && r.Cut {
			cut.Add(1)
		}
	}}
	srv := newServer(t, store, blockrpc.WithGzip(), blockrpc.WithObserver(observer))
	const stalled = 30
	body := fullBlockBatch(1000)

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := make(chan struct{})
	peak := heapPeak(stop)
	var conns []net.Conn
	for i := range stalled {
		conns = append(conns, stallingClient(t, srv.Listener.Addr().String(), body, i%2 == 0))
	}
	for range 20 {
		status, out := post(t, srv, latestBlock)
		if status != http.StatusOK || !bytes.Contains(out, []byte(`"result":{`)) {
			t.Fatalf("an honest request during the stall: %d %.200s", status, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	grown := int64(<-peak) - int64(before.HeapInuse)
	// 30 answers built whole would be 750 MB and more; streamed, each
	// holds a chunk, one block and a gzip stream: a few MB.
	if limit := int64(stalled * 5 << 20); grown > limit {
		t.Errorf("the heap grew by %d MB with %d stalled clients, want under %d MB", grown>>20, stalled, limit>>20)
	}
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for cut.Load() < stalled && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := cut.Load(); n != stalled {
		t.Errorf("%d of %d requests of departed clients were seen cut", n, stalled)
	}
}

// TestBacklogLimit checks that once the answers waiting for their clients
// pass the backlog limit, new requests are refused with 503 and
// Retry-After, and served again once the backlog drains.
func TestBacklogLimit(t *testing.T) {
	store, _ := largestMainnetBlock(t)
	srv := newServer(t, store, blockrpc.WithBacklogLimit(1))
	conn := stallingClient(t, srv.Listener.Addr().String(), fullBlockBatch(100), false)
	refused := false
	for deadline := time.Now().Add(20 * time.Second); !refused && time.Now().Before(deadline); {
		resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+testKey, latestBlock, "Content-Type", "application/json"))
		switch resp.StatusCode {
		case http.StatusOK:
			time.Sleep(20 * time.Millisecond)
		case http.StatusServiceUnavailable:
			refused = true
			if resp.Header.Get("Retry-After") == "" {
				t.Error("a 503 for a full backlog has no Retry-After")
			}
			checkError(t, parseAnswer(t, out), -32005, backlogFull)
		default:
			t.Fatalf("status %d: %s", resp.StatusCode, out)
		}
	}
	if !refused {
		t.Fatal("requests were still served with a stalled answer over the backlog limit")
	}
	conn.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		status, _ := post(t, srv, latestBlock)
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused (%d) after the stalled client left", status)
		}
	}
}

// backlogFull is the message of a request refused for a full backlog.
const backlogFull = "server busy: too many requests and answers in flight, retry later"

// TestBacklogBodies checks that request bodies count in the backlog: a
// client that sends large bodies and stalls cannot hold memory without
// bound, as the answers of one that reads slowly cannot.
func TestBacklogBodies(t *testing.T) {
	c := newTestChain(t)
	const limit = 1 << 20
	srv := newServer(t, c.store, blockrpc.WithBacklogLimit(limit))
	addr := srv.Listener.Addr().String()
	call := `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`
	padded := func(n int) string { return call + strings.Repeat(" ", n) }
	// rawPost sends the head and the first sent bytes of body on a
	// connection of its own.
	rawPost := func(body string, sent int) (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		go fmt.Fprintf(conn, "POST /v3/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			testKey, len(body), body[:sent])
		return conn, bufio.NewReader(conn)
	}
	answer := func(r *bufio.Reader) (int, string) {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(resp.Body)
		if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			t.Error("a 503 for a full backlog has no Retry-After")
		}
		return resp.StatusCode, out.String()
	}

	// One body alone may be larger than the backlog.
	if _, r := rawPost(padded(limit*3/2), len(padded(limit*3/2))); true {
		if status, out := answer(r); status != http.StatusOK {
			t.Fatalf("a body of 1.5 MiB alone: %d %s", status, out)
		}
	}
	// A body of 900 KiB that stalls before its end; bodies of 200 KiB
	// beside it are refused once it has been read, as they take the
	// backlog past 1 MiB.
	stalled := padded(900 << 10)
	stalledConn, stalledAnswer := rawPost(stalled, len(stalled)-10)
	refused := false
	for deadline := time.Now().Add(20 * time.Second); !refused && time.Now().Before(deadline); {
		_, r := rawPost(padded(200<<10), len(padded(200<<10)))
		switch status, out := answer(r); status {
		case http.StatusOK:
			time.Sleep(20 * time.Millisecond)
		case http.StatusServiceUnavailable:
			refused = true
			checkError(t, parseAnswer(t, []byte(out)), -32005, backlogFull)
		default:
			t.Fatalf("status %d: %s", status, out)
		}
	}
	if !refused {
		t.Fatal("bodies of 200 KiB were still read beside a stalled body of 900 KiB, over a backlog of 1 MiB")
	}
	// A small request, which keeps the backlog under its limit, is served.
	if status, out := post(t, srv, call); status != http.StatusOK {
		t.Errorf("a small request beside the stalled body: %d %s", status, out)
	}
	// The stalled body ends: it is served, and lets go of the backlog.
	fmt.Fprint(stalledConn, stalled[len(stalled)-10:])
	if status, out := answer(stalledAnswer); status != http.StatusOK || !strings.Contains(out, `"result":"0x`) {
		t.Fatalf("the stalled request, once sent whole: %d %s", status, out)
	}
	if _, r := rawPost(padded(200<<10), len(padded(200<<10))); true {
		if status, out := answer(r); status != http.StatusOK {
			t.Errorf("a body of 200 KiB once the stalled one was served: %d %s", status, out)
		}
	}
}

// gate is a backend whose block lookups wait at a gate, counting how many
// wait at once.
type gate struct {
	backend.Backend
	open      chan struct{}
	entered   chan struct{}
	inside    atomic.Int32
	maxInside atomic.Int32
}

func (g *gate) BlockByNumber(ctx context.Context, n backend.BlockNumber) (*backend.Block, error) {
	if n != backend.Latest {
		now := g.inside.Add(1)
		defer g.inside.Add(-1)
		for old := g.maxInside.Load(); now > old && !g.maxInside.CompareAndSwap(old, now); old = g.maxInside.Load() {
		}
		g.entered <- struct{}{}
		<-g.open
	}
	return g.Backend.BlockByNumber(ctx, n)
}

// TestBatchConcurrency checks that no more batches render at once than the
// limit allows, and that a single call never waits for a batch's turn.
func TestBatchConcurrency(t *testing.T) {
	c := newTestChain(t)
	g := &gate{Backend: c.store, open: make(chan struct{}), entered: make(chan struct{}, 16)}
	srv := newServer(t, g, blockrpc.WithBatchConcurrency(1))
	batch := `[{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1",false]},{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["0x2",false]}]`

	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, out := post(t, srv, batch); status != http.StatusOK {
				t.Errorf("batch: %d %s", status, out)
			}
		}()
	}
	<-g.entered // one batch is rendering, and holds the only slot
	// A single call goes by, while the batch still waits at the gate.
	if status, out := post(t, srv, latestBlock); status != http.StatusOK {
		t.Fatalf("a single call during a batch: %d %s", status, out)
	}
	select {
	case <-g.entered:
		t.Fatal("a second batch started rendering while the first held the only slot")
	case <-time.After(200 * time.Millisecond):
	}
	close(g.open)
	wg.Wait()
	if n := g.maxInside.Load(); n != 1 {
		t.Errorf("%d batches rendered at once, want 1", n)
	}
}

// smallSendBuffers makes every accepted connection's kernel send buffer
// small, as a slow or distant client's connection fills it.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		c.(*net.TCPConn).SetWriteBuffer(4 << 10)
	}
	return c, err
}

// TestBatchSlotLetGoWhileClientReads has a client that does not read the
// answer to its batch, one chunk written whole, while the handler has one
// batch slot: another client's batch is answered all the same.
func TestBatchSlotLetGoWhileClientReads(t *testing.T) {
	c := newTestChain(t)
	srv := httptest.NewUnstartedServer(newHandler(c.store, blockrpc.WithBatchConcurrency(1)))
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)

	// About 50 KB of answers: one chunk, so written whole at the end.
	calls := make([]string, 16)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["0x1",true]}`, i)
	}
	big := "[" + strings.Join(calls, ",") + "]"
	if status, out := post(t, srv, big); status != http.StatusOK || len(out) < 30<<10 || len(out) > 60<<10 {
		t.Fatalf("the batch answer is %d bytes (status %d), want 30-60 KB for this test", len(out), status)
	}

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2<<10) })
	}}
	conn, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v3/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", testKey, len(big), big)
	time.Sleep(500 * time.Millisecond) // its answer is being written, and blocks

	client := &http.Client{Timeout: 3 * time.Second}
	start := time.Now()
	resp, err := client.Post(srv.URL+"/v3/"+testKey, "application/json",
		strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}]`))
	if err != nil {
		t.Errorf("another client's one-call batch was not answered while a stalled client holds the only batch slot: %v (after %v)", err, time.Since(start).Round(time.Millisecond))
	} else {
		resp.Body.Close()
	}
}
