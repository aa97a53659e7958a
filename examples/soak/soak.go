package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/memstore"
)

// config is what one soak run does.
type config struct {
	duration   time.Duration
	rate       int           // requests a second, all clients together
	clients    int           // concurrent clients
	reorgEvery time.Duration // how often the writer changes the chain
	report     time.Duration // how often a progress line is written
	seed       uint64
}

// Keys of the soak: one unlimited, one with a small limit of its own.
const (
	goodKey    = "soak-good-key"
	limitedKey = "soak-limited-key"
)

// result is what a run found.
type result struct {
	checked, wrong, unexpected, panics int64
	reorgs                             int64
	p99                                time.Duration
	failures                           []string // the first few
	memory                             []int64  // resident bytes at each report
}

// soak serves store with the handler a production server would use, drives
// it with a mix of requests while a writer reorganises the chain, and checks
// every answer.
func soak(ctx context.Context, cfg config, store *memstore.Store, progress io.Writer) (*result, error) {
	var panics atomic.Int64
	logger := slog.New(panicCounter{&panics})
	keys := blockrpc.NewKeySet(goodKey)
	keys.AddWithLimit(limitedKey, blockrpc.Limit{Rate: 5, Burst: 5})
	svc := blockrpc.NewService(store)
	handler := blockrpc.NewHandler(svc,
		blockrpc.WithKeys(keys),
		blockrpc.WithLimiter(blockrpc.NewRateLimiter(), blockrpc.Limit{Rate: math.Inf(1)}),
		blockrpc.WithGzip(),
		blockrpc.WithLogger(logger),
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	go srv.Serve(ln)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	d := &driver{
		svc:    svc,
		store:  store,
		url:    "http://" + ln.Addr().String() + "/v3/",
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.clients}},
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); d.reorganise(ctx, cfg.reorgEvery, cfg.seed) }()
	ticks := make(chan struct{}, cfg.clients)
	for i := range cfg.clients {
		wg.Add(1)
		go func() { defer wg.Done(); d.drive(ctx, ticks, cfg.seed+uint64(i)+1) }()
	}
	res := &result{}
	d.pace(ctx, cfg, ticks, res, progress)
	close(ticks)
	wg.Wait()
	res.checked, res.wrong, res.unexpected = d.checked.Load(), d.wrong.Load(), d.unexpected.Load()
	res.panics, res.reorgs, res.p99 = panics.Load(), d.reorgs.Load(), d.percentile(0.99)
	res.failures = d.failures
	return res, nil
}

// pace hands out cfg.rate requests a second to the clients, and reports.
func (d *driver) pace(ctx context.Context, cfg config, ticks chan<- struct{}, res *result, progress io.Writer) {
	every := time.Second / time.Duration(max(cfg.rate, 1))
	tick := time.NewTicker(every)
	defer tick.Stop()
	report := time.NewTicker(cfg.report)
	defer report.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			select {
			case ticks <- struct{}{}:
			default: // every client is busy: the request is skipped, not queued
			}
		case <-report.C:
			rss := residentBytes()
			res.memory = append(res.memory, rss)
			fmt.Fprintf(progress, "%6.0fs  checked %d  wrong %d  unexpected %d  reorgs %d  p99 %v  resident %d MB\n",
				time.Since(start).Seconds(), d.checked.Load(), d.wrong.Load(), d.unexpected.Load(), d.reorgs.Load(),
				d.percentile(0.99).Round(10*time.Microsecond), rss>>20)
		}
	}
}

// driver sends requests and checks their answers.
type driver struct {
	svc    *blockrpc.Service
	store  *memstore.Store
	url    string
	client *http.Client

	checked, wrong, unexpected, reorgs atomic.Int64

	mu        sync.Mutex
	latencies histogram
	failures  []string // the first few, for the report
}

func (d *driver) fail(wrong bool, format string, args ...any) {
	if wrong {
		d.wrong.Add(1)
	} else {
		d.unexpected.Add(1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.failures) < 20 {
		d.failures = append(d.failures, fmt.Sprintf(format, args...))
	}
}

func (d *driver) record(took time.Duration) {
	d.mu.Lock()
	d.latencies.add(took)
	d.mu.Unlock()
}

func (d *driver) percentile(p float64) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.latencies.percentile(p)
}

// histogram counts latencies in buckets 5% wide, so that a run of any
// length measures its percentiles in the same memory.
type histogram struct {
	counts [600]uint64
	total  uint64
}

const bucketGrowth = 1.05

func (h *histogram) add(d time.Duration) {
	i := 0
	if d > time.Microsecond {
		i = min(int(math.Log(float64(d/time.Microsecond))/math.Log(bucketGrowth))+1, len(h.counts)-1)
	}
	h.counts[i]++
	h.total++
}

// percentile returns the upper bound of the bucket that holds the p-th
// latency.
func (h *histogram) percentile(p float64) time.Duration {
	rank := uint64(math.Ceil(p * float64(h.total)))
	var seen uint64
	for i, n := range h.counts {
		if seen += n; seen >= rank && n > 0 {
			return time.Duration(math.Pow(bucketGrowth, float64(i)) * float64(time.Microsecond))
		}
	}
	return 0
}

// post sends body with key and returns the status and the body of the
// answer.
func (d *driver) post(ctx context.Context, key, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url+key, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	d.record(time.Since(start))
	return resp.StatusCode, out, err
}

// rpcAnswer is one JSON-RPC answer.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// residentBytes reads this process's resident memory from /proc.
func residentBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb)
			return kb << 10
		}
	}
	return 0
}

// panicCounter is a log handler that counts the handler's recovered
// panics, which it logs as errors of a crashed method.
type panicCounter struct{ n *atomic.Int64 }

func (p panicCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (p panicCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "crashed") {
		p.n.Add(1)
	}
	return nil
}
func (p panicCounter) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p panicCounter) WithGroup(string) slog.Handler      { return p }

// reorganise changes the canonical chain every interval between branches
// it builds once: the chain as it was and six others, forking one, two or
// three blocks below the head, all one block longer than the head. A
// switch is a reorganisation of depth one to four, the chain never gets
// shorter (a block asked for by number always exists), and the store holds
// the same blocks throughout, so that its memory stays flat.
func (d *driver) reorganise(ctx context.Context, every time.Duration, seed uint64) {
	branches, err := d.branches(ctx)
	if err != nil {
		d.fail(false, "writer: %v", err)
		return
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	tick := time.NewTicker(every)
	defer tick.Stop()
	current := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		next := (current + 1 + rng.IntN(len(branches)-1)) % len(branches)
		// Every branch is stored already: making its last block canonical
		// switches to all of it in one step, as a follower does. Adding
		// its blocks one by one would show readers a shorter chain between
		// the first and the last, which no node serves.
		last := branches[next][len(branches[next])-1]
		if err := d.store.AddBlock(last); err != nil {
			d.fail(false, "writer: switching to branch %d at block %d: %v", next, last.Number, err)
			return
		}
		current = next
		d.reorgs.Add(1)
	}
}

// branches builds the branches the writer switches between, each the
// blocks from three below the head to one above it, and makes the first
// canonical.
func (d *driver) branches(ctx context.Context) ([][]*backend.Block, error) {
	head, err := d.store.BlockByNumber(ctx, backend.Latest)
	if err != nil || head.Number < 3 {
		return nil, fmt.Errorf("a chain of at least 4 blocks is needed: %v", err)
	}
	base := make([]*backend.Block, 4) // the canonical blocks head-3 .. head
	for i := range base {
		if base[i], err = d.store.BlockByNumber(ctx, backend.BlockNumber(head.Number-3+uint64(i))); err != nil {
			return nil, err
		}
	}
	var branches [][]*backend.Block
	for i, fork := range []int{3, 1, 2, 3, 1, 2, 3} { // where each leaves base: its last shared block
		if i == 0 {
			fork = 3 // the chain as it was, one block longer
		}
		branch := slices.Clone(base[:fork+1])
		for parent := branch[fork]; parent.Number <= head.Number; {
			child := childOf(parent, fmt.Sprintf("soak branch %d", i))
			if err := d.store.AddSideBlock(child); err != nil {
				return nil, err
			}
			stored, err := d.store.BlockByHash(ctx, child.Hash)
			if err != nil {
				return nil, err
			}
			branch, parent = append(branch, stored), stored
		}
		branches = append(branches, branch)
	}
	for _, b := range branches[0] {
		if err := d.store.AddBlock(b); err != nil {
			return nil, err
		}
	}
	return branches, nil
}

// childOf returns an empty block on top of parent, of the parent's fork,
// with extra data that makes it unlike any sibling, and its roots and hash
// computed, so that it can be found again once stored.
func childOf(parent *backend.Block, extra string) *backend.Block {
	b := &backend.Block{Header: parent.Header.Copy()}
	b.Number, b.ParentHash = parent.Number+1, parent.Hash
	b.Timestamp += 12
	b.ExtraData = []byte(extra)
	b.GasUsed = 0
	b.TransactionsRoot, b.Sha3Uncles = backend.TransactionsRoot(nil), backend.UnclesHash(nil)
	if b.WithdrawalsRoot != nil {
		b.Withdrawals = []backend.Withdrawal{}
		root := backend.WithdrawalsRoot(b.Withdrawals)
		b.WithdrawalsRoot = &root
	}
	if b.BlobGasUsed != nil {
		b.BlobGasUsed = new(uint64)
	}
	b.Hash = backend.HeaderHash(&b.Header)
	return b
}

// blockResult is the part of a block answer the checks read.
type blockResult struct {
	Hash   backend.Hash `json:"hash"`
	Number string       `json:"number"`
}

// drive sends one request per tick, of a kind drawn from the mix.
func (d *driver) drive(ctx context.Context, ticks <-chan struct{}, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	for range ticks {
		if ctx.Err() != nil {
			return
		}
		switch k := rng.IntN(100); {
		case k < 30:
			d.blockByNumber(ctx, rng)
		case k < 45:
			d.blockByHash(ctx, rng)
		case k < 55:
			d.uncle(ctx, rng)
		case k < 65:
			d.companion(ctx, rng)
		case k < 75:
			d.batch(ctx, rng)
		case k < 83:
			d.badInput(ctx, rng)
		case k < 88:
			d.expectStatus(ctx, "not-a-key", latestCall, http.StatusUnauthorized)
		case k < 95:
			d.limited(ctx)
		default:
			d.disconnect(ctx, rng)
		}
	}
}

const latestCall = `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}`

// call sends one call with the good key and returns its answer; a transport
// failure after the run ended is not counted.
func (d *driver) call(ctx context.Context, method, params string) (rpcAnswer, bool) {
	status, out, err := d.post(ctx, goodKey, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params))
	var a rpcAnswer
	switch {
	case ctx.Err() != nil:
		return a, false
	case err != nil:
		d.fail(false, "%s%s: %v", method, params, err)
		return a, false
	case status != http.StatusOK:
		d.fail(false, "%s%s: status %d: %.200s", method, params, status, out)
		return a, false
	}
	if err := json.Unmarshal(out, &a); err != nil {
		d.fail(true, "%s%s: not a JSON-RPC answer: %.200s", method, params, out)
		return a, false
	}
	if a.Error != nil {
		d.fail(false, "%s%s: error %d %s", method, params, a.Error.Code, a.Error.Message)
		return a, false
	}
	return a, true
}

func (d *driver) head(ctx context.Context) uint64 {
	b, err := d.store.BlockByNumber(ctx, backend.Latest)
	if err != nil {
		return 0
	}
	return b.Number
}

func (d *driver) blockByNumber(ctx context.Context, rng *rand.Rand) {
	n := rng.Uint64N(d.head(ctx) + 1)
	fullTx := rng.IntN(2) == 0
	a, ok := d.call(ctx, "eth_getBlockByNumber", fmt.Sprintf(`["0x%x",%t]`, n, fullTx))
	if ok {
		d.checkBlock(ctx, a.Result, n, fullTx, fmt.Sprintf("block %d", n))
	}
}

// checkBlock checks a block answer: the block of the number asked for,
// byte for byte the answer that block has.
func (d *driver) checkBlock(ctx context.Context, result json.RawMessage, number uint64, fullTx bool, what string) {
	d.checked.Add(1)
	var got blockResult
	if string(result) == "null" || json.Unmarshal(result, &got) != nil {
		d.fail(true, "%s: answered %.100s, want the block", what, result)
		return
	}
	if got.Number != fmt.Sprintf("0x%x", number) {
		d.fail(true, "%s: answered block %s", what, got.Number)
		return
	}
	// The run's end cancels ctx, not the check of an answer already in.
	want, err := d.svc.GetBlockByHash(context.WithoutCancel(ctx), got.Hash, fullTx)
	if err != nil || want == nil {
		d.fail(true, "%s: answered a block (%s) the store does not hold: %v", what, got.Hash, err)
		return
	}
	if wantJSON, _ := json.Marshal(want); string(wantJSON) != string(result) {
		d.fail(true, "%s: the answer for %s differs from the block's own JSON", what, got.Hash)
	}
}

func (d *driver) blockByHash(ctx context.Context, rng *rand.Rand) {
	n := rng.Uint64N(d.head(ctx) + 1)
	b, err := d.store.BlockByNumber(ctx, backend.BlockNumber(n))
	if err != nil {
		return
	}
	fullTx := rng.IntN(2) == 0
	a, ok := d.call(ctx, "eth_getBlockByHash", fmt.Sprintf(`["%s",%t]`, b.Hash, fullTx))
	if ok {
		d.checkBlock(ctx, a.Result, n, fullTx, "block "+b.Hash.String())
	}
}

// uncle asks for an uncle of a block low in the chain (reorganisations
// happen near the head) and checks it against the store's.
func (d *driver) uncle(ctx context.Context, rng *rand.Rand) {
	n := rng.Uint64N(min(d.head(ctx), 64) + 1)
	b, err := d.store.BlockByNumber(ctx, backend.BlockNumber(n))
	if err != nil {
		return
	}
	index := rng.IntN(len(b.Uncles) + 1) // one past the end answers null
	a, ok := d.call(ctx, "eth_getUncleByBlockHashAndIndex", fmt.Sprintf(`["%s","0x%x"]`, b.Hash, index))
	if !ok {
		return
	}
	d.checked.Add(1)
	want, _ := d.svc.GetUncleByBlockHashAndIndex(context.WithoutCancel(ctx), b.Hash, uint64(index))
	wantJSON := []byte("null")
	if want != nil {
		wantJSON, _ = json.Marshal(want)
	}
	if string(wantJSON) != string(a.Result) {
		d.fail(true, "uncle %d of block %d: %.100s, want %.100s", index, n, a.Result, wantJSON)
	}
}

func (d *driver) companion(ctx context.Context, rng *rand.Rand) {
	switch rng.IntN(3) {
	case 0:
		low := d.head(ctx)
		a, ok := d.call(ctx, "eth_blockNumber", "[]")
		if !ok {
			return
		}
		d.checked.Add(1)
		var n uint64
		if json.Unmarshal(a.Result, new(string)) != nil || !parseQuantity(a.Result, &n) || n < low {
			d.fail(true, "eth_blockNumber: %s, want at least 0x%x", a.Result, low)
		}
	case 1:
		want, err := d.svc.ChainID(ctx)
		a, ok := d.call(ctx, "eth_chainId", "[]")
		if !ok || err != nil {
			return
		}
		d.checked.Add(1)
		if string(a.Result) != fmt.Sprintf(`"0x%x"`, want) {
			d.fail(true, "eth_chainId: %s, want 0x%x", a.Result, want)
		}
	default:
		n := rng.Uint64N(min(d.head(ctx), 64) + 1)
		b, err := d.store.BlockByNumber(ctx, backend.BlockNumber(n))
		if err != nil {
			return
		}
		a, ok := d.call(ctx, "eth_getUncleCountByBlockNumber", fmt.Sprintf(`["0x%x"]`, n))
		if !ok {
			return
		}
		d.checked.Add(1)
		if string(a.Result) != fmt.Sprintf(`"0x%x"`, len(b.Uncles)) {
			d.fail(true, "uncle count of block %d: %s, want 0x%x", n, a.Result, len(b.Uncles))
		}
	}
}

func parseQuantity(raw json.RawMessage, n *uint64) bool {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	_, err := fmt.Sscanf(s, "0x%x", n)
	return err == nil
}

// batch sends ten calls for blocks by number and checks every answer, in
// order.
func (d *driver) batch(ctx context.Context, rng *rand.Rand) {
	head := d.head(ctx)
	numbers := make([]uint64, 10)
	calls := make([]string, len(numbers))
	fullTx := rng.IntN(2) == 0
	for i := range numbers {
		numbers[i] = rng.Uint64N(head + 1)
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["0x%x",%t]}`, i, numbers[i], fullTx)
	}
	status, out, err := d.post(ctx, goodKey, "["+strings.Join(calls, ",")+"]")
	if ctx.Err() != nil {
		return
	}
	var answers []rpcAnswer
	if err != nil || status != http.StatusOK || json.Unmarshal(out, &answers) != nil || len(answers) != len(numbers) {
		d.fail(false, "batch: status %d, %v: %.200s", status, err, out)
		return
	}
	for i, a := range answers {
		if string(a.ID) != fmt.Sprint(i) || a.Error != nil {
			d.fail(true, "batch answer %d: id %s, error %v", i, a.ID, a.Error)
			continue
		}
		d.checkBlock(ctx, a.Result, numbers[i], fullTx, fmt.Sprintf("batch call %d, block %d", i, numbers[i]))
	}
}

// badInput sends what a careless or hostile client sends, and checks that
// it gets the error go-ethereum gives.
func (d *driver) badInput(ctx context.Context, rng *rand.Rand) {
	cases := []struct {
		body string
		code int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1"`, -32700},
		{`{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x01",false]}`, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"eth_getUncleByBlockHashAndIndex","params":["0x12","0x0"]}`, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x00"]}`, -32601},
		{`{"jsonrpc":"1.0","id":1,"method":"eth_chainId"}`, -32600},
	}
	c := cases[rng.IntN(len(cases))]
	status, out, err := d.post(ctx, goodKey, c.body)
	if ctx.Err() != nil {
		return
	}
	var a rpcAnswer
	if err != nil || status != http.StatusOK || json.Unmarshal(out, &a) != nil {
		d.fail(false, "bad input %.60s: status %d, %v", c.body, status, err)
		return
	}
	d.checked.Add(1)
	if a.Error == nil || a.Error.Code != c.code {
		d.fail(true, "bad input %.60s: %.200s, want error %d", c.body, out, c.code)
	}
}

func (d *driver) expectStatus(ctx context.Context, key, body string, want int) {
	status, out, err := d.post(ctx, key, body)
	if ctx.Err() != nil {
		return
	}
	d.checked.Add(1)
	if err != nil || status != want {
		d.fail(true, "key %q: status %d (%v), want %d: %.100s", key, status, err, want, out)
	}
}

// limited calls with the key that has a small limit of its own: a call
// within it is answered, one past it refused with 429 and -32005.
func (d *driver) limited(ctx context.Context) {
	status, out, err := d.post(ctx, limitedKey, latestCall)
	if ctx.Err() != nil {
		return
	}
	d.checked.Add(1)
	var a rpcAnswer
	switch {
	case err != nil:
		d.fail(false, "limited key: %v", err)
	case status == http.StatusOK:
	case status == http.StatusTooManyRequests && json.Unmarshal(out, &a) == nil && a.Error != nil && a.Error.Code == -32005:
	default:
		d.fail(true, "limited key: status %d: %.200s", status, out)
	}
}

// disconnect asks for a big batch of full blocks and goes away after the
// first kilobyte of the answer.
func (d *driver) disconnect(ctx context.Context, rng *rand.Rand) {
	head := d.head(ctx)
	calls := make([]string, 100)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["0x%x",true]}`, i, rng.Uint64N(head+1))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.url+goodKey, strings.NewReader("["+strings.Join(calls, ",")+"]"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return
	}
	io.CopyN(io.Discard, resp.Body, 1024)
	cancel()
	resp.Body.Close()
}
