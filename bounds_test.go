package blockrpc_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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

// TestBacklogBodies checks that request bodies count in the backlog, and
// in their key's share of it (half): clients that send large bodies and
// stall cannot hold memory without bound, nor take the backlog from the
// other keys.
func TestBacklogBodies(t *testing.T) {
	c := newTestChain(t)
	const limit = 1 << 20
	h := blockrpc.NewHandler(blockrpc.NewService(c.store), blockrpc.WithBacklogLimit(limit), blockrpc.WithKeys(blockrpc.NewKeySet("key-a", "key-b", "key-c")))
	srv := serve(t, h)
	addr := srv.Listener.Addr().String()
	// held waits until the backlog counts want bytes: a request's are let
	// go as its handler returns, after its client has the answer.
	held := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); blockrpc.BacklogHeld(h) != int64(want); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the backlog holds %d bytes, want %d", blockrpc.BacklogHeld(h), want)
			}
		}
	}
	padded := func(n int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}` + strings.Repeat(" ", n)
	}
	// rawPost sends the head and the first sent bytes of body, for key,
	// on a connection of its own.
	rawPost := func(key, body string, sent int) (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		go fmt.Fprintf(conn, "POST /v3/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			key, len(body), body[:sent])
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
		if resp.StatusCode == http.StatusServiceUnavailable {
			if resp.Header.Get("Retry-After") == "" {
				t.Error("a 503 for a full backlog has no Retry-After")
			}
			checkError(t, parseAnswer(t, out.Bytes()), -32005, backlogFull)
		}
		return resp.StatusCode, out.String()
	}
	send := func(key string, size int) (int, string) {
		_, r := rawPost(key, padded(size), len(padded(size)))
		return answer(r)
	}
	// stall sends all of a body of size but its last 10 bytes, waits
	// until the server has read them, with before the bytes held already,
	// and returns what sends the rest and reads the answer.
	stall := func(key string, size, before int) (end func() (int, string), sent int) {
		body := padded(size)
		conn, r := rawPost(key, body, len(body)-10)
		held(before + len(body) - 10)
		return func() (int, string) {
			fmt.Fprint(conn, body[len(body)-10:])
			return answer(r)
		}, len(body) - 10
	}

	if status, out := send("key-a", limit*3/2); status != http.StatusOK {
		t.Fatalf("a body of 1.5 MiB alone, over the 1 MiB backlog: %d %s", status, out)
	}
	held(0)
	// key-a stalls 400 KiB: its next body of 200 KiB takes it past its
	// share, while key-b's is read.
	endA, sentA := stall("key-a", 400<<10, 0)
	if status, out := send("key-a", 200<<10); status != http.StatusServiceUnavailable {
		t.Fatalf("key-a's body of 200 KiB beside its stalled one of 400 KiB, past its share of 512 KiB: %d %s", status, out)
	}
	held(sentA)
	if status, out := send("key-b", 200<<10); status != http.StatusOK {
		t.Fatalf("key-b's body of 200 KiB beside key-a's stalled one: %d %s", status, out)
	}
	held(sentA)
	// key-b stalls 450 KiB: a body of 200 KiB of key-c takes the backlog
	// past its limit, a small one does not.
	endB, sentB := stall("key-b", 450<<10, sentA)
	if status, out := send("key-c", 200<<10); status != http.StatusServiceUnavailable {
		t.Fatalf("key-c's body of 200 KiB beside stalled ones of 850 KiB, past the backlog of 1 MiB: %d %s", status, out)
	}
	held(sentA + sentB)
	if status, out := send("key-c", 0); status != http.StatusOK {
		t.Errorf("a small request of key-c beside the stalled bodies: %d %s", status, out)
	}
	// The stalled bodies end: they are served, and let go of the backlog.
	for _, end := range []func() (int, string){endA, endB} {
		if status, out := end(); status != http.StatusOK || !strings.Contains(out, `"result":"0x`) {
			t.Fatalf("a stalled request, once sent whole: %d %s", status, out)
		}
	}
	held(0)
	for _, key := range []string{"key-a", "key-c"} {
		if status, out := send(key, 200<<10); status != http.StatusOK {
			t.Errorf("%s's body of 200 KiB once the stalled ones were served: %d %s", key, status, out)
		}
	}
}

// TestBacklogKeyShare checks that the answers one key's clients read
// slowly take at most its share of the backlog: past it that key's
// requests are refused, and the other keys' still served.
func TestBacklogKeyShare(t *testing.T) {
	store, _ := largestMainnetBlock(t)
	const limit = 4 << 20
	srv := newServer(t, store, blockrpc.WithBacklogLimit(limit), blockrpc.WithKeys(blockrpc.NewKeySet(testKey, "other-key")))
	// Each stalled batch holds one block's answer (650 KB), and at most a
	// chunk of others: four hold more than the key's share of 2 MiB, and
	// less than the backlog of 4 MiB.
	for range 4 {
		stallingClient(t, srv.Listener.Addr().String(), fullBlockBatch(100), false)
	}
	ask := func(key string) int {
		resp, out := send(t, newRequest(t, http.MethodPost, srv.URL+"/v3/"+key, latestBlock, "Content-Type", "application/json"))
		if resp.StatusCode == http.StatusServiceUnavailable {
			checkError(t, parseAnswer(t, out), -32005, backlogFull)
		}
		return resp.StatusCode
	}
	for deadline := time.Now().Add(20 * time.Second); ask(testKey) != http.StatusServiceUnavailable; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("requests of a key whose stalled answers hold more than its share were still served")
		}
	}
	for range 3 {
		if status := ask("other-key"); status != http.StatusOK {
			t.Fatalf("another key's request beside the stalled answers: %d, want 200", status)
		}
	}
}

// TestBacklogKeepsNoPath checks that what the backlog keeps of a key
// after its requests end is not the path it came in, which a client may
// make a megabyte long.
func TestBacklogKeepsNoPath(t *testing.T) {
	c := newTestChain(t)
	keys := make([]string, 50)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
	}
	h := blockrpc.NewHandler(blockrpc.NewService(c.store), blockrpc.WithKeys(blockrpc.NewKeySet(keys...)))
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	for _, key := range keys {
		r := httptest.NewRequest(http.MethodPost, "/"+strings.Repeat("a", 1<<20)+"/v3/"+key, strings.NewReader(latestBlock))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("key %s: %d %s", key, w.Code, w.Body)
		}
	}
	grew := int64(heap()) - int64(before)
	runtime.KeepAlive(h)
	if grew > 10<<20 {
		t.Errorf("50 requests with paths of 1 MiB ended, and the heap kept %d MiB more", grew>>20)
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

// goneWriter is the ResponseWriter of a client that has gone away: every
// write fails.
type goneWriter struct{ header http.Header }

func (w *goneWriter) Header() http.Header       { return w.header }
func (w *goneWriter) WriteHeader(int)           {}
func (w *goneWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// TestBatchStopsWhenClientIsGone checks that once a write of a batch's
// answers has failed, the rest of the batch is not run: a client that went
// away stops the work it asked for.
func TestBatchStopsWhenClientIsGone(t *testing.T) {
	c := newTestChain(t)
	counted := &countingBackend{Backend: c.store, calls: new(atomic.Int32)}
	var observed atomic.Int32
	obs := &blockrpc.Observer{Call: func(context.Context, blockrpc.CallInfo) { observed.Add(1) }}
	h := newHandler(counted, blockrpc.WithObserver(obs))
	const n = 1000
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["0x1",true]}`, i)
	}
	h.ServeHTTP(&goneWriter{header: http.Header{}}, handlerRequest(context.Background(), "["+strings.Join(calls, ",")+"]"))
	if got := counted.calls.Load(); got >= n/2 {
		t.Errorf("%d of the %d calls of a batch reached the backend after the writes to its client failed", got, n)
	}
	if got := observed.Load(); got >= n/2 {
		t.Errorf("the observer was told of %d of the %d calls of a batch whose client had gone", got, n)
	}
}

// TestBacklogCountsBodyByteByByte checks that a body sent a byte at a time
// counts in the backlog as it arrives: a client that trickles its bodies
// cannot hold memory the backlog does not see.
func TestBacklogCountsBodyByteByByte(t *testing.T) {
	c := newTestChain(t)
	h := blockrpc.NewHandler(blockrpc.NewService(c.store), blockrpc.WithKeys(blockrpc.NewKeySet(testKey)))
	srv := serve(t, h)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := latestBlock
	fmt.Fprintf(conn, "POST /v3/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", testKey, len(body))
	for i := range 3 {
		conn.Write([]byte(body[i : i+1]))
		for deadline := time.Now().Add(10 * time.Second); blockrpc.BacklogHeld(h) != int64(i+1); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d bytes of a body sent a byte at a time: the backlog holds %d", i+1, blockrpc.BacklogHeld(h))
			}
		}
	}
	conn.Write([]byte(body[3:]))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the body sent a byte at a time, then whole: status %d", resp.StatusCode)
	}
}
