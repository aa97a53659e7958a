package pgstore_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
)

// The multi-process test re-runs this test binary as a writer or a
// serving reader: TestMain hands it to runRole when roleEnv is set.
const (
	roleEnv   = "PGSTORE_TEST_ROLE"
	urlEnv    = "PGSTORE_TEST_URL"
	schemaEnv = "PGSTORE_TEST_SCHEMA"
)

func runRole(role string) int {
	var err error
	switch role {
	case "writer":
		err = writerRole()
	case "reader":
		err = readerRole()
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
		return 1
	}
	return 0
}

// shared is the chain of the multi-process and standby tests, built alike
// in every process: a main branch, a longer fork that a deep reorg moves
// to, and a shorter one.
type shared struct {
	main, long, short *chaintest.Builder
	store             *memstore.Store
	// blocks holds every block of every branch by hash, and numbers the
	// numbers a branch has a block at.
	blocks map[backend.Hash]*backend.Block
	hashes []backend.Hash
}

func buildShared() *shared {
	cfg := chaintest.Config{Seed: 31, London: 5, Merge: 20, Shanghai: 25, Cancun: 30, Prague: 35}
	s := &shared{main: chaintest.New(cfg), blocks: make(map[backend.Hash]*backend.Block)}
	s.main.AddBlocks(80, func(i int, g *chaintest.BlockGen) {
		chaintest.Txs(3)(i, g)
		if g.Number() >= 2 && g.Number() < cfg.Merge && g.Number()%3 == 0 {
			g.AddUncle()
		}
	})
	s.long = s.main.Fork(60)
	s.long.AddBlocks(30, chaintest.Txs(2))
	s.short = s.main.Fork(75)
	s.short.AddBlocks(2, chaintest.Txs(1))
	s.store = s.main.Store()
	for _, br := range []*chaintest.Builder{s.main, s.long, s.short} {
		for n := uint64(0); n <= br.Head().Number; n++ {
			b := br.Block(n)
			if s.blocks[b.Hash] == nil {
				s.blocks[b.Hash] = b
				s.hashes = append(s.hashes, b.Hash)
			}
		}
	}
	return s
}

// write writes a block of the chain into w.
func (s *shared) write(w backend.Writer, b *backend.Block, canonical bool) error {
	uncles := make([]*backend.Uncle, len(b.Uncles))
	for i := range uncles {
		u, err := s.store.UncleByBlockHashAndIndex(context.Background(), b.Hash, uint64(i))
		if err != nil {
			return err
		}
		uncles[i] = u
	}
	if canonical {
		return w.AddBlock(b, uncles...)
	}
	return w.AddSideBlock(b, uncles...)
}

// addMain adds the main branch's blocks up to number last to w, one
// AddBlock each.
func (s *shared) addMain(t *testing.T, w backend.Writer, last uint64) {
	t.Helper()
	for n := uint64(0); n <= last; n++ {
		if err := s.write(w, s.main.Block(n), true); err != nil {
			t.Fatal(err)
		}
	}
}

// importMain imports the main branch up to block last with w's Importer,
// and its long branch's blocks from 61 up to (not including) number
// until, as side blocks.
func (s *shared) importMain(t *testing.T, w *pgstore.Writer, last, until uint64) {
	t.Helper()
	im := w.NewImporter(context.Background(), nil)
	for n := uint64(0); n <= last; n++ {
		if err := s.write(im, s.main.Block(n), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := im.Flush(); err != nil {
		t.Fatal(err)
	}
	for n := uint64(61); n < until; n++ {
		if err := s.write(w, s.long.Block(n), false); err != nil {
			t.Fatal(err)
		}
	}
}

// script is what the writer does: import the main branch in batches with
// COPY, set the tags, then move between the branches, which clears safe
// (block 70 of the main branch leaves the chain); it ends on the long
// branch, with safe set again at its block 70. pause is called between
// the steps.
func (s *shared) script(ctx context.Context, w *pgstore.Writer, rounds int, pause func()) error {
	im := w.NewImporter(ctx, &pgstore.ImportOptions{BatchBlocks: 8, Progress: func(pgstore.ImportProgress) { pause() }})
	for n := uint64(0); n <= s.main.Head().Number; n++ {
		if err := s.write(im, s.main.Block(n), true); err != nil {
			return err
		}
	}
	if err := im.Flush(); err != nil {
		return err
	}
	if err := w.SetSafe(70); err != nil {
		return err
	}
	if err := w.SetFinalized(60); err != nil {
		return err
	}
	for n := uint64(61); n < s.long.Head().Number; n++ {
		if err := s.write(w, s.long.Block(n), false); err != nil {
			return err
		}
	}
	if err := s.write(w, s.short.Block(76), false); err != nil {
		return err
	}
	for range rounds {
		for _, head := range []*backend.Block{s.long.Head(), s.short.Head(), s.main.Head()} {
			pause()
			if err := s.write(w, head, true); err != nil {
				return err
			}
		}
	}
	pause()
	if err := s.write(w, s.long.Head(), true); err != nil {
		return err
	}
	return w.SetSafe(70)
}

// writerRole writes the shared chain into the store, with pauses for the
// readers to read between the steps.
func writerRole() error {
	ctx := context.Background()
	w, err := pgstore.OpenWriter(ctx, os.Getenv(urlEnv), &pgstore.Options{Schema: os.Getenv(schemaEnv)})
	if err != nil {
		return err
	}
	defer w.Close()
	return buildShared().script(ctx, w, 6, func() { time.Sleep(25 * time.Millisecond) })
}

// readerRole serves the store over JSON-RPC on a port of 127.0.0.1, which
// it prints, until its standard input closes.
func readerRole() error {
	ctx := context.Background()
	r, err := pgstore.OpenReader(ctx, os.Getenv(urlEnv), &pgstore.Options{Schema: os.Getenv(schemaEnv), PollInterval: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	defer r.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: blockrpc.NewHandler(blockrpc.NewService(r), blockrpc.WithKeys(blockrpc.AnyKey)), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	fmt.Printf("listening %s\n", l.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

// process is a subprocess of the test.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
	done   chan struct{} // closed when it has exited, with err
	err    error
}

// start runs this test binary as role.
func start(t *testing.T, role, url, schema string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, urlEnv+"="+url, schemaEnv+"="+schema)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() && p.stderr.Len() > 0 {
			t.Logf("%s %d's standard error:\n%s", role, cmd.Process.Pid, p.stderr.String())
		}
	})
	return p
}

// checker sends JSON-RPC requests and checks every answer against the
// blocks of the shared chain: an answer is null or exactly the JSON of a
// block (or uncle) of one of its branches, at the number asked.
type checker struct {
	s        *shared
	client   *http.Client
	answers  atomic.Int64
	nulls    atomic.Int64
	mu       sync.Mutex
	failures []string
}

func (c *checker) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failures) < 20 {
		c.failures = append(c.failures, fmt.Sprintf(format, args...))
	}
}

// call returns the result of a JSON-RPC call.
func (c *checker) call(url, method string, params ...any) (json.RawMessage, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := c.client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, err
	}
	if answer.Error != nil {
		return nil, fmt.Errorf("%s: error %s", method, answer.Error)
	}
	return answer.Result, nil
}

// checkBlock checks an answer for a block: null, or a block of the chain,
// at want's number when given, rendered exactly.
func (c *checker) checkBlock(what string, got json.RawMessage, number *uint64, fullTx bool) {
	c.answers.Add(1)
	if string(got) == "null" {
		c.nulls.Add(1)
		return
	}
	var head struct{ Hash backend.Hash }
	if err := json.Unmarshal(got, &head); err != nil {
		c.fail("%s: %v", what, err)
		return
	}
	b := c.s.blocks[head.Hash]
	switch {
	case b == nil:
		c.fail("%s: block %s is of no branch", what, head.Hash)
	case number != nil && b.Number != *number:
		c.fail("%s: got block %d", what, b.Number)
	case string(got) != string(b.AppendJSON(nil, fullTx)):
		c.fail("%s: block %d differs:\n got  %s\n want %s", what, b.Number, got, b.AppendJSON(nil, fullTx))
	}
}

// run sends a mix of requests to url until stop is closed.
func (c *checker) run(url string, seed uint64, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for {
		select {
		case <-stop:
			return
		default:
		}
		switch k := rng.IntN(10); {
		case k < 4:
			n := uint64(rng.IntN(93))
			got, err := c.call(url, "eth_getBlockByNumber", fmt.Sprintf("0x%x", n), k%2 == 0)
			if err != nil {
				c.fail("block %d: %v", n, err)
				continue
			}
			c.checkBlock(fmt.Sprintf("block %d", n), got, &n, k%2 == 0)
		case k < 6:
			tag := []string{"latest", "safe", "finalized", "earliest"}[rng.IntN(4)]
			got, err := c.call(url, "eth_getBlockByNumber", tag, false)
			if err != nil {
				c.fail("%s: %v", tag, err)
				continue
			}
			c.checkBlock(tag, got, nil, false)
		case k < 8:
			h := c.s.hashes[rng.IntN(len(c.s.hashes))]
			got, err := c.call(url, "eth_getBlockByHash", h, true)
			if err != nil {
				c.fail("block %s: %v", h, err)
				continue
			}
			want := c.s.blocks[h].Number
			c.checkBlock("block "+h.String(), got, &want, true)
		case k < 9:
			b := c.s.main.Block(uint64(3 * (1 + rng.IntN(5))))
			got, err := c.call(url, "eth_getUncleByBlockHashAndIndex", b.Hash, "0x0")
			if err != nil {
				c.fail("uncle of %d: %v", b.Number, err)
				continue
			}
			c.answers.Add(1)
			u, _ := c.s.store.UncleByBlockHashAndIndex(context.Background(), b.Hash, 0)
			if string(got) != "null" && string(got) != string(u.AppendJSON(nil)) {
				c.fail("uncle of block %d differs:\n got  %s\n want %s", b.Number, got, u.AppendJSON(nil))
			}
		default:
			got, err := c.call(url, "eth_blockNumber")
			if err != nil {
				if !strings.Contains(err.Error(), "no blocks") {
					c.fail("blockNumber: %v", err)
				}
				continue
			}
			c.answers.Add(1)
			var n string
			_ = json.Unmarshal(got, &n)
			// Heads are the main branch's blocks as it is imported, and
			// the branches' heads.
			if v, err := strconv.ParseUint(strings.TrimPrefix(n, "0x"), 16, 64); err != nil || (v > 80 && v != 90) {
				c.fail("blockNumber %s", got)
			}
		}
	}
}

// TestMultiProcess runs one writer process and two serving processes on
// one database. While the writer imports the chain with COPY and moves it
// between branches (deep and shallow reorgs, each one transaction), the
// test asks both servers for blocks by number, tag and hash, and uncles,
// and checks every answer; at the end both serve the writer's chain.
func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	_, url := sharedURL(t)
	schema := "multiprocess"
	// The tables first: readers do not create them.
	ctx := context.Background()
	w, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()

	s := buildShared()
	var readers []string
	for range 2 {
		p := start(t, "reader", url, schema)
		line, err := p.stdout.ReadString('\n')
		if err != nil {
			t.Fatalf("a reader did not start: %v\n%s", err, p.stderr.String())
		}
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
		if !ok {
			t.Fatalf("a reader said %q", line)
		}
		readers = append(readers, "http://"+addr+"/v3/test-key")
	}
	c := &checker{s: s, client: &http.Client{Timeout: 10 * time.Second}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range readers {
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.run(r, uint64(10*i+j), stop)
			}()
		}
	}

	writer := start(t, "writer", url, schema)
	select {
	case <-writer.done:
		if writer.err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("the writer: %v\n%s", writer.err, writer.stderr.String())
		}
	case <-time.After(90 * time.Second):
		close(stop)
		wg.Wait()
		t.Fatal("the writer did not finish within 90s")
	}
	time.Sleep(200 * time.Millisecond) // the readers' polls
	close(stop)
	wg.Wait()
	t.Logf("%d answers checked (%d null) while the writer wrote", c.answers.Load(), c.nulls.Load())
	for _, f := range c.failures {
		t.Error(f)
	}

	// Both serve the long branch now, block by block.
	s.long.Reorg()
	for _, r := range readers {
		got, err := c.call(r, "eth_getBlockByNumber", "latest", true)
		if err != nil || string(got) != string(s.long.Head().AppendJSON(nil, true)) {
			t.Errorf("%s: latest is not the long branch's head: %v\n%s", r, err, got)
		}
		for n := uint64(0); n <= s.long.Head().Number+1; n++ {
			got, err := c.call(r, "eth_getBlockByNumber", fmt.Sprintf("0x%x", n), false)
			want := "null"
			if n <= s.long.Head().Number {
				want = string(s.long.Block(n).AppendJSON(nil, false))
			}
			if err != nil || string(got) != want {
				t.Errorf("%s: block %d after the writer finished: %v\n got  %s\n want %s", r, n, err, got, want)
			}
		}
	}
}
