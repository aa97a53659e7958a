package pebblestore

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/internal/handlerbench"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/blockrpc/blockrpc/memstore"
)

// The scale measurements are a test that runs only when asked for, as
// they take minutes:
//
//	go test -run TestScale -pebblestore.scale 1000,100000 -timeout 1h ./backend/pebblestore
//
// BenchmarkImport and BenchmarkBlockByNumber are the quick ones `make
// bench` runs.
var (
	scaleFlag   = flag.String("pebblestore.scale", "", "chain sizes for TestScale, comma-separated (e.g. 1000,100000,1000000)")
	scaleTxs    = flag.Int("pebblestore.txs", 8, "TestScale: mean transactions a block")
	scaleCache  = flag.Int64("pebblestore.cache", DefaultCacheBytes, "TestScale: the store's CacheBytes")
	scaleComp   = flag.Bool("pebblestore.compress", false, "TestScale: the store's Compress")
	scaleReads  = flag.Int("pebblestore.reads", 20000, "TestScale: random reads per measurement")
	scaleMem    = flag.Int("pebblestore.memstore-max", 100000, "TestScale: the largest size memstore is measured at")
	scaleRounds = flag.Int("pebblestore.rounds", 5, "TestScale: rounds of cold served reads interleaved with memstore's")
)

// TestScale imports synthetic chains of mainnet's shape (package synth)
// of each size into a new store and into memstore, and measures the
// import rate, the bytes on disk per byte of block RLP, and random
// BlockByNumber(n) over the whole chain: its latency (p50, p99, one
// reader) and throughput (two readers), cold and warm. Cold reads each
// read a block the store has not read since it opened (Pebble's cache
// empty of it; the operating system's page cache is not dropped); a chain
// of fewer blocks than reads is read whole several times, by a store
// opened again each time. Warm reads the same blocks again, all of them in
// the cache. Rendered is the block
// BlockByNumber returns written as JSON; served is the answer to
// eth_getBlockByNumber(n, true) through blockrpc's handler with its answer
// cache off, without the network, which borrows a block from a store that
// lends it (backend.Lender) rather than decoding it whole. Missed is
// served too, for blocks not in a cache full of others (see missed). A
// line a size gives the bytes read from storage, not the page cache,
// while the served answers were measured.
//
// This machine's speed changes by tens of percent from one minute to the
// next, which a ratio of two figures taken minutes apart takes for a
// difference between the stores. So each size up to memstore-max ends
// with rounds of cold served reads, each followed at once by memstore
// serving the same blocks in another process (TestScaleMemstore), and
// gives their ratio round by round and its median. (memstore's gigabytes
// of Go values, live in this process, would slow Pebble's reads: every
// collection would mark them.)
func TestScale(t *testing.T) {
	if *scaleFlag == "" {
		t.Skip("set -pebblestore.scale to run")
	}
	var sizes []int
	for _, f := range strings.Split(*scaleFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			t.Fatalf("bad size %q", f)
		}
		sizes = append(sizes, n)
	}
	var rows, rounds []string
	for _, n := range sizes {
		r, ratios := measureScale(t, n)
		rows, rounds = append(rows, r...), append(rounds, ratios...)
	}
	t.Logf("%d transactions a block on average, CacheBytes %d MiB, Compress %v, %d random reads a measurement\n"+
		"| blocks | store | import blocks/s | import MB/s (RLP) | disk / RLP (tables / RLP) | cold p50 | cold p99 | cold reads/s | warm p50 | warm p99 | warm reads/s | cold rendered/s | warm rendered/s | cold served p50 | cold served p99 | cold served/s | warm served p50 | warm served p99 | warm served/s | missed served p50 | missed served p99 | missed served/s |\n"+
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n%s",
		*scaleTxs, *scaleCache>>20, *scaleComp, *scaleReads, strings.Join(rows, "\n"))
	if len(rounds) > 0 {
		t.Logf("cold served reads, each round followed by memstore's, answers a second\n"+
			"| blocks | Pebble cold served/s, round by round | memstore served/s | cold ÷ memstore | median ratio |\n"+
			"|---|---|---|---|---|\n%s", strings.Join(rounds, "\n"))
	}
}

// measureScale measures both stores at one size, and returns a table row
// for each, and the row of the interleaved rounds.
func measureScale(t *testing.T, n int) (rows, rounds []string) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{CacheBytes: *scaleCache, Compress: *scaleComp})
	if err != nil {
		t.Fatal(err)
	}
	g := synth.New(synth.Config{Seed: 1, TxsPerBlock: *scaleTxs})
	var rlp uint64
	var genTime, pebbleTime time.Duration
	const chunk = 5000
	blocks := make([]*backend.Block, 0, chunk)
	for done := 0; done < n; {
		start := time.Now()
		blocks = blocks[:0]
		for range min(chunk, n-done) {
			b := g.Next()
			blocks = append(blocks, b)
			rlp += b.Size
		}
		genTime += time.Since(start)
		start = time.Now()
		for _, b := range blocks {
			if err := s.AddBlock(b); err != nil {
				t.Fatal(err)
			}
		}
		pebbleTime += time.Since(start)
		done += len(blocks)
		if n >= 100000 && done%100000 == 0 {
			t.Logf("%d blocks: generated in %v, imported in %v", done, genTime.Round(time.Second), pebbleTime.Round(time.Second))
		}
	}
	blocks = nil
	start := time.Now()
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	pebbleTime += time.Since(start)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The files of a store opened again: Pebble deletes the obsolete
	// ones as it opens. Its log files, some kept for reuse, are a fixed
	// cost of a few memtables' size, apart from the tables.
	s, err = Open(dir, &Options{CacheBytes: *scaleCache, Compress: *scaleComp})
	if err != nil {
		t.Fatal(err)
	}
	shape := levels(s)
	s.Close()
	disk, tables := dirSize(t, dir), tablesSize(t, dir)
	t.Logf("%d blocks, %.1f MB of RLP (%.0f bytes a block): generated in %v; pebble imported in %v, %.1f MB on disk, %.1f MB of it in tables (%.3f of the RLP)",
		n, float64(rlp)/1e6, float64(rlp)/float64(n), genTime.Round(time.Millisecond), pebbleTime.Round(time.Millisecond), float64(disk)/1e6, float64(tables)/1e6, float64(tables)/float64(rlp))
	t.Logf("%d blocks: tables by level %s", n, shape)

	// Measured as a server serves a chain it loaded long ago: the
	// garbage of the import collected (the example server collects it as
	// a load ends), not a collection of it under way during the reads.
	runtime.GC()
	batches := coldBatches(n, *scaleReads)
	numbers := slices.Concat(batches...)
	rate := func(d time.Duration) string {
		return fmt.Sprintf("%.0f | %.1f", float64(n)/d.Seconds(), float64(rlp)/1e6/d.Seconds())
	}
	open := func() *Store {
		s, err := Open(dir, &Options{CacheBytes: *scaleCache, Compress: *scaleComp})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Cold: every batch on a store just opened, so that every read is of
	// a block the store has not read since it opened.
	coldLatencies := func(measure func(*Store, []backend.BlockNumber) []time.Duration) string {
		var d []time.Duration
		for _, b := range batches {
			s := open()
			d = append(d, measure(s, b)...)
			s.Close()
		}
		return percentiles(d)
	}
	coldRateOf := func(measure func(*Store, []backend.BlockNumber) time.Duration) time.Duration {
		var took time.Duration
		for _, b := range batches {
			s := open()
			took += measure(s, b)
			s.Close()
		}
		return took
	}
	coldRate := func(measure func(*Store, []backend.BlockNumber) time.Duration) string {
		return perSecond(len(numbers), coldRateOf(measure))
	}
	read := func(s *Store, b []backend.BlockNumber) []time.Duration { return latencies(t, s, b) }
	readTwo := func(s *Store, b []backend.BlockNumber) time.Duration { return throughput(t, s, b, false) }
	render := func(s *Store, b []backend.BlockNumber) time.Duration { return throughput(t, s, b, true) }
	answer := func(s *Store, b []backend.BlockNumber) []time.Duration { return serveLatencies(t, s, b) }
	answerTwo := func(s *Store, b []backend.BlockNumber) time.Duration { return serveRate(t, s, b) }
	coldLat, coldReads, coldRender := coldLatencies(read), coldRate(readTwo), coldRate(render)
	coldStorage := storageRead()
	coldServeLat, coldServe := coldLatencies(answer), coldRate(answerTwo)
	coldStorage = storageRead() - coldStorage
	// Warm: the blocks of the cold reads again, all of them in the cache
	// of a store that has read them.
	s = open()
	throughput(t, s, numbers, false)
	all := func(d time.Duration) string { return perSecond(len(numbers), d) }
	warmLat := percentiles(latencies(t, s, numbers))
	warmRate := all(throughput(t, s, numbers, false))
	warmRender := all(throughput(t, s, numbers, true))
	before := s.db.Metrics().BlockCache
	warmServeLat, warmServe := percentiles(serveLatencies(t, s, numbers)), all(serveRate(t, s, numbers))
	// Warm is warm only when the blocks read fit in the cache: 10^4
	// blocks of 150 transactions (786 MB) do not fit in 512 MiB.
	after := s.db.Metrics().BlockCache
	hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
	t.Logf("%d blocks: warm served reads: %.1f%% of their lookups in the cache hit (data, index and filter blocks)", n, 100*float64(hits)/float64(max(1, hits+misses)))
	missStorage := storageRead()
	missLat, miss := missed(t, s, n, numbers)
	missStorage = storageRead() - missStorage
	// Reads the page cache no longer held: on a machine that reclaims
	// memory left unused (as the one of the README's figures does), a
	// large chain's files are partly on the disk alone, and such reads
	// wait for it.
	t.Logf("%d blocks: read from storage while served: cold %.2f KB a read, missed (and the reads filling the cache) %.1f MB in all",
		n, float64(coldStorage)/1e3/float64(2*len(numbers)), float64(missStorage)/1e6)
	s.Close()
	rows = []string{fmt.Sprintf("| %d | pebble | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", n, rate(pebbleTime), fmt.Sprintf("%.3f (%.3f)", float64(disk)/float64(rlp), float64(tables)/float64(rlp)), coldLat, coldReads, warmLat, warmRate, coldRender, warmRender, coldServeLat, coldServe, warmServeLat, warmServe, missLat, miss)}
	if n > *scaleMem {
		return rows, nil
	}
	if *scaleRounds > 0 {
		rounds = []string{interleaved(t, n, len(numbers), func() time.Duration { return coldRateOf(answerTwo) })}
	}
	mem, memTime := memstoreOf(t, n)
	runtime.GC()
	lat, reads, rendered := percentiles(latencies(t, mem, numbers)), all(throughput(t, mem, numbers, false)), all(throughput(t, mem, numbers, true))
	servedLat, served := percentiles(serveLatencies(t, mem, numbers)), all(serveRate(t, mem, numbers))
	rows = append(rows, fmt.Sprintf("| %d | memstore | %s | (memory) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | | |", n, rate(memTime), lat, reads, lat, reads, rendered, rendered, servedLat, served, servedLat, served))
	return rows, rounds
}

const scaleMemstoreEnv = "PEBBLESTORE_SCALE_MEMSTORE"

// interleaved runs TestScale's rounds at n blocks: cold, which serves
// the reads of its cold measurements on stores just opened and returns
// how long they took, then memstore serving the same blocks in a
// TestScaleMemstore process. It returns the table row of the rounds.
func interleaved(t *testing.T, n, reads int, cold func() time.Duration) string {
	stdin, out, stop := startChild(t, "TestScaleMemstore", fmt.Sprintf("%s=%d", scaleMemstoreEnv, n),
		fmt.Sprintf("-pebblestore.txs=%d", *scaleTxs), fmt.Sprintf("-pebblestore.reads=%d", *scaleReads))
	defer stop()
	// reply reads the child's next line, a float after "memstore ".
	reply := func() float64 {
		line, err := out.ReadString('\n')
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "memstore ")
		f, perr := strconv.ParseFloat(v, 64)
		if err != nil || !ok || perr != nil {
			t.Fatalf("memstore's process: %q, %v", line, err)
		}
		return f
	}
	reply() // its chain built
	// Building it took memory from the page cache, which held the
	// store's files: in runs 16 and 17 the first round at 10^6 blocks
	// read 4.2 and 4.8 KB an answer from storage, where the cold reads
	// before it read none. A first pass, not counted, reads them back,
	// so that each round is cold as the measurements before are:
	// Pebble's cache empty, the page cache as the store left it.
	cold()
	var pebble, mem, ratios []string
	var r []float64
	for round := range *scaleRounds {
		fromStorage := storageRead()
		p := float64(reads) / cold().Seconds()
		fromStorage = storageRead() - fromStorage
		if _, err := fmt.Fprintln(stdin, "serve"); err != nil {
			t.Fatal(err)
		}
		m := float64(reads) / reply()
		pebble, mem = append(pebble, fmt.Sprintf("%.0f", p)), append(mem, fmt.Sprintf("%.0f", m))
		ratios, r = append(ratios, fmt.Sprintf("%.2f", p/m)), append(r, p/m)
		// A round whose blocks were not all in the page cache waited for
		// the disk: the page cache is what memstore's process, building
		// its chain, takes memory from.
		t.Logf("%d blocks, round %d: Pebble cold %.0f answers a second, %.2f KB a read from storage; memstore %.0f", n, round+1, p, float64(fromStorage)/1e3/float64(reads), m)
	}
	slices.Sort(r)
	median := r[len(r)/2]
	if len(r)%2 == 0 {
		median = (r[len(r)/2-1] + median) / 2
	}
	return fmt.Sprintf("| %d | %s | %s | %s | %.2f |", n, strings.Join(pebble, ", "), strings.Join(mem, ", "), strings.Join(ratios, ", "), median)
}

// TestScaleMemstore is memstore's side of TestScale's rounds, run by
// TestScale in a process of its own: it holds the chain of the size its
// parent names, and for each line its parent writes serves the blocks of
// TestScale's cold reads as serveRate does, and writes back the seconds
// they took.
func TestScaleMemstore(t *testing.T) {
	v := os.Getenv(scaleMemstoreEnv)
	if v == "" {
		t.Skip("run by TestScale")
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := memstoreOf(t, n)
	numbers := slices.Concat(coldBatches(n, *scaleReads)...)
	// The garbage of the build collected and its memory given back now,
	// not by the runtime's background work during the parent's rounds.
	debug.FreeOSMemory()
	fmt.Println("memstore 0")
	for in := bufio.NewScanner(os.Stdin); in.Scan(); {
		fmt.Printf("memstore %g\n", serveRate(t, mem, numbers).Seconds())
	}
}

// levels returns how many tables each level of s holds, as "L0 1, L6 9":
// a read checks a table of each level whose key range holds its key.
func levels(s *Store) string {
	var l []string
	for i, m := range s.db.Metrics().Levels {
		if m.TablesCount > 0 {
			l = append(l, fmt.Sprintf("L%d %d", i, m.TablesCount))
		}
	}
	return strings.Join(l, ", ")
}

// storageRead returns the bytes this process has had read from storage,
// not from the page cache (Linux's /proc/self/io), or 0 where that is
// not known.
func storageRead() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "read_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// coldBatches returns reads numbers of random blocks of a chain of n
// blocks, in batches in which no block appears twice: each batch is read
// from a store just opened, so that every read misses the store's cache,
// a cold read at every size. A chain of fewer blocks than reads gives
// several batches, each a new order of the whole chain.
func coldBatches(n, reads int) [][]backend.BlockNumber {
	rng := rand.New(rand.NewPCG(uint64(n), 2))
	var batches [][]backend.BlockNumber
	for left := reads; left > 0; {
		perm := rng.Perm(n)[:min(n, left)]
		b := make([]backend.BlockNumber, len(perm))
		for i, num := range perm {
			b[i] = backend.BlockNumber(num)
		}
		batches = append(batches, b)
		left -= len(b)
	}
	return batches
}

// missed serves blocks that are not in the store's cache while the cache
// is full of others, as a server that has run for a while serves a block
// not asked for lately: it reads blocks not read before until Pebble's
// cache is full, then serves blocks not read before, one at a time
// ("p50 | p99") and with two readers (answers a second). Unlike the cold
// measurements of a store just opened, the memory of the blocks read comes
// from the blocks the cache lets go, as in a server's steady state, not
// fresh from the operating system. A chain that fits in the cache gives
// "- | -" and "-".
func missed(t *testing.T, s *Store, n int, read []backend.BlockNumber) (latency, rate string) {
	seen := make(map[backend.BlockNumber]bool, len(read))
	for _, num := range read {
		seen[num] = true
	}
	order := rand.New(rand.NewPCG(uint64(n), 3)).Perm(n)
	next := func() (backend.BlockNumber, bool) {
		for len(order) > 0 {
			num := backend.BlockNumber(order[0])
			order = order[1:]
			if !seen[num] {
				return num, true
			}
		}
		return 0, false
	}
	ctx := context.Background()
	borrow := func(*backend.Block, backend.TransactionDecoder) error { return nil }
	for s.db.Metrics().BlockCache.Size < *scaleCache*95/100 {
		num, ok := next()
		if !ok {
			return "- | -", "-"
		}
		if err := s.LendBlockByNumber(ctx, num, borrow); err != nil {
			t.Fatal(err)
		}
	}
	sets := make([][]backend.BlockNumber, 2)
	for i := range sets {
		for range *scaleReads {
			num, ok := next()
			if !ok {
				return "- | -", "-"
			}
			sets[i] = append(sets[i], num)
		}
	}
	return percentiles(serveLatencies(t, s, sets[0])), perSecond(len(sets[1]), serveRate(t, s, sets[1]))
}

// memstoreOf returns a memstore holding the same n blocks as the Pebble
// store, generated again from the same seed, and the time AddBlock took.
// It is built only once Pebble has been measured: at 10^6 blocks it holds
// gigabytes of Go values, which every garbage collection during Pebble's
// reads would otherwise mark, and a server holds one store, not both.
func memstoreOf(t *testing.T, n int) (*memstore.Store, time.Duration) {
	mem := memstore.New()
	g := synth.New(synth.Config{Seed: 1, TxsPerBlock: *scaleTxs})
	var took time.Duration
	for range n {
		b := g.Next()
		start := time.Now()
		if err := mem.AddBlock(b); err != nil {
			t.Fatal(err)
		}
		took += time.Since(start)
	}
	return mem, took
}

// latencies reads the numbers one by one and returns how long each read
// took.
func latencies(t *testing.T, s backend.Backend, numbers []backend.BlockNumber) []time.Duration {
	ctx := context.Background()
	d := make([]time.Duration, len(numbers))
	for i, n := range numbers {
		start := time.Now()
		b, err := s.BlockByNumber(ctx, n)
		d[i] = time.Since(start)
		if err != nil || b.Number != uint64(n) {
			t.Fatalf("block %d: %v", n, err)
		}
	}
	return d
}

// percentiles returns "p50 | p99" of d, which it sorts.
func percentiles(d []time.Duration) string {
	slices.Sort(d)
	us := func(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3) }
	return us(d[len(d)/2]) + " | " + us(d[len(d)*99/100])
}

// throughput reads the numbers with two readers and returns how long they
// took; with render, each block is also written as the JSON that
// eth_getBlockByNumber(n, true) answers, as the handler does.
func throughput(t *testing.T, s backend.Backend, numbers []backend.BlockNumber, render bool) time.Duration {
	ctx := context.Background()
	return readRate(numbers, func() func(backend.BlockNumber) bool {
		var buf []byte
		return func(n backend.BlockNumber) bool {
			b, err := s.BlockByNumber(ctx, n)
			if err != nil {
				t.Error(err)
				return false
			}
			if render {
				buf = b.AppendJSON(buf[:0], true)
			}
			return true
		}
	})
}

// scaleHandler is blockrpc's handler over s with its answer cache off:
// every answer rendered, as for a block not asked for before.
func scaleHandler(s backend.Backend) http.Handler {
	return blockrpc.NewHandler(blockrpc.NewService(s), blockrpc.WithKeys(blockrpc.NewKeySet(scaleKey)), blockrpc.WithAnswerCache(0))
}

const scaleKey = "scale"

// serveLatencies asks scaleHandler for eth_getBlockByNumber(n, true) for
// the numbers, one at a time, and returns how long each answer took.
func serveLatencies(t *testing.T, s backend.Backend, numbers []backend.BlockNumber) []time.Duration {
	h := scaleHandler(s)
	d := make([]time.Duration, len(numbers))
	a := newAnswerer(scaleKey)
	for i, n := range numbers {
		start := time.Now()
		if !a.answer(t, h, n) {
			t.FailNow()
		}
		d[i] = time.Since(start)
	}
	return d
}

// serveRate asks as serveLatencies does, with two readers, and returns how
// long they took.
func serveRate(t *testing.T, s backend.Backend, numbers []backend.BlockNumber) time.Duration {
	h := scaleHandler(s)
	return readRate(numbers, func() func(backend.BlockNumber) bool {
		a := newAnswerer(scaleKey)
		return func(n backend.BlockNumber) bool { return a.answer(t, h, n) }
	})
}

// readRate reads the numbers with two readers, each made by newReader and
// taking every other number until it reports a failure, and returns how
// long they took.
func readRate(numbers []backend.BlockNumber, newReader func() func(backend.BlockNumber) bool) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	const readers = 2
	for first := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			read := newReader()
			for i := first; i < len(numbers); i += readers {
				if !read(numbers[i]) {
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// perSecond is reads a second, for reads that took d.
func perSecond(reads int, d time.Duration) string {
	return fmt.Sprintf("%.0f", float64(reads)/d.Seconds())
}

// answerer asks a handler for blocks, reusing its request and writer.
type answerer struct {
	c    *handlerbench.Caller
	body []byte
}

func newAnswerer(key string) *answerer {
	return &answerer{c: handlerbench.New("/v3/" + key)}
}

// answer asks for block n with its transactions, and reports whether the
// answer came.
func (a *answerer) answer(t testing.TB, h http.Handler, n backend.BlockNumber) bool {
	a.body = fmt.Appendf(a.body[:0], `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["%#x",true]}`, int64(n))
	status, size := a.c.Call(h, a.body)
	if status != http.StatusOK || size < 1000 {
		t.Errorf("block %d: status %d, %d bytes", n, status, size)
		return false
	}
	return true
}

// tablesSize is the size of the database's tables (.sst files).
func tablesSize(t testing.TB, dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sst") {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			size += info.Size()
		}
	}
	return size
}

func dirSize(t testing.TB, dir string) int64 {
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			size += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return size
}

// BenchmarkImport adds b.N mainnet-shaped blocks (150 transactions) to a
// new store, generated beforehand.
func BenchmarkImport(b *testing.B) {
	for _, txs := range []int{8, 150} {
		b.Run(fmt.Sprintf("txs=%d", txs), func(b *testing.B) {
			s := openTest(b, nil)
			g := synth.New(synth.Config{Seed: 1, TxsPerBlock: txs})
			blocks := make([]*backend.Block, b.N)
			var rlp int64
			for i := range blocks {
				blocks[i] = g.Next()
				rlp += int64(blocks[i].Size)
			}
			b.SetBytes(rlp / int64(b.N))
			b.ResetTimer()
			for _, blk := range blocks {
				if err := s.AddBlock(blk); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
		})
	}
}

// BenchmarkBlockByNumber reads random blocks of a chain of 1000
// mainnet-shaped blocks (150 transactions), from the store and from
// memstore, with the store's cache warm; "lend" borrows them as blockrpc's
// handler does (backend.Lender), the transactions left encoded.
func BenchmarkBlockByNumber(b *testing.B) {
	const n = 1000
	s := openTest(b, nil)
	mem := memstore.New()
	g := synth.New(synth.Config{Seed: 1, TxsPerBlock: 150})
	for range n {
		blk := g.Next()
		if err := s.AddBlock(blk); err != nil {
			b.Fatal(err)
		}
		if err := mem.AddBlock(blk); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, st := range []struct {
		name string
		s    interface {
			backend.Backend
			backend.Lender
		}
	}{{"pebble", s}, {"memstore", mem}} {
		b.Run(st.name, func(b *testing.B) {
			b.ReportAllocs()
			rng := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				if _, err := st.s.BlockByNumber(ctx, backend.BlockNumber(rng.IntN(n))); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(st.name+"/lend", func(b *testing.B) {
			b.ReportAllocs()
			rng := rand.New(rand.NewPCG(1, 2))
			borrow := func(*backend.Block, backend.TransactionDecoder) error { return nil }
			for b.Loop() {
				if err := st.s.LendBlockByNumber(ctx, backend.BlockNumber(rng.IntN(n)), borrow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
