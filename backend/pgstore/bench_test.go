package pgstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pgstore"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/jackc/pgx/v5"
)

// scaleEnv sets the chains BenchmarkScale measures: blocks[:transactions a
// block], comma-separated. The default keeps make bench quick; the main
// README's figures come from BLOCKRPC_PGSTORE_BENCH=1000:8,100000:8,1000000:8.
const scaleEnv = "BLOCKRPC_PGSTORE_BENCH"

// benchServer is the server of the benchmarks: durable (fsync and
// synchronous commit on, unlike the tests'), with the settings a bulk
// load is given, and shared buffers that hold the 10^5-block chain (a
// sixth of a 24 GB machine).
var benchServer = map[string]string{
	"shared_buffers":     strconv.Itoa(sharedBuffers>>20) + "MB",
	"max_wal_size":       "8GB",
	"checkpoint_timeout": "30min",
	"max_connections":    "100",
}

// sharedBuffers is benchServer's shared_buffers in bytes.
const sharedBuffers = 4 << 30

// withHugePages returns benchServer's settings with huge_pages on when
// the machine has enough huge pages free for the shared buffers (its
// operator sets a number of them aside: vm.nr_hugepages), and off
// otherwise, so that a run says which it measured. Every backend process
// maps the shared buffers for itself and takes a page fault the first
// time it touches each of their pages: 4 KB pages, two to a buffer, or 2
// MB ones. Cold reads of a large chain keep touching buffers no backend
// has touched yet; a small chain's soon touch none.
func withHugePages() map[string]string {
	settings := maps.Clone(benchServer)
	settings["huge_pages"] = "off"
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return settings
	}
	field := func(name string) int64 {
		for line := range strings.Lines(string(meminfo)) {
			if rest, ok := strings.CutPrefix(line, name+":"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					n, _ := strconv.ParseInt(f[0], 10, 64)
					return n
				}
			}
		}
		return 0
	}
	// The server's shared memory is the buffers and a few percent more.
	free := field("HugePages_Free") - field("HugePages_Rsvd")
	if free*field("Hugepagesize")<<10 >= sharedBuffers*21/20 {
		settings["huge_pages"] = "on"
	}
	return settings
}

type scaleCase struct {
	blocks, txs int
}

func scaleCases(b *testing.B) []scaleCase {
	spec := os.Getenv(scaleEnv)
	if spec == "" {
		spec = "1000:150"
	}
	var cases []scaleCase
	for _, part := range strings.Split(spec, ",") {
		n, t, _ := strings.Cut(part, ":")
		c := scaleCase{txs: 150}
		var err error
		if c.blocks, err = strconv.Atoi(n); err != nil {
			b.Fatalf("%s: %v", scaleEnv, err)
		}
		if t != "" {
			if c.txs, err = strconv.Atoi(t); err != nil {
				b.Fatalf("%s: %v", scaleEnv, err)
			}
		}
		cases = append(cases, c)
	}
	return cases
}

// BenchmarkScale measures the stores on synthetic chains of mainnet's
// shape (internal/synth), memstore beside pgstore in the same run: import
// (blocks/s, MB/s of block RLP; pgstore through an Importer, with COPY,
// its Close's vacuum included),
// pgstore's bytes on disk per byte of RLP, and random
// eth_getBlockByNumber(n, true) through the handler (its answer cache
// off), 8 requests at a time: p50, p99 and requests/s. pgstore-cold reads
// with the block cache off, every answer one query; pgstore-warm with
// every block it reads in the cache, no query.
func BenchmarkScale(b *testing.B) {
	if err := pgtest.Available(); err != nil {
		b.Skip(err)
	}
	settings := withHugePages()
	srv, err := pgtest.Start(pgtest.Config{Settings: settings})
	if err != nil && settings["huge_pages"] == "on" {
		b.Logf("with huge pages: %v", err)
		settings["huge_pages"] = "off"
		srv, err = pgtest.Start(pgtest.Config{Settings: settings})
	}
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	b.Logf("shared buffers %s, huge pages %s", settings["shared_buffers"], settings["huge_pages"])
	url, err := srv.CreateDatabase("bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range scaleCases(b) {
		b.Run(fmt.Sprintf("blocks=%d/txs=%d", c.blocks, c.txs), func(b *testing.B) { benchScale(b, url, c) })
	}
}

func benchScale(b *testing.B, url string, c scaleCase) {
	ctx := context.Background()
	numbers := readSet(c.blocks)

	// The chain is generated again for each store, in chunks, with the
	// timer stopped: at 10^6 blocks it does not fit in memory beside a
	// store, and memstore is let go before pgstore is measured, so that
	// collections during pgstore's reads do not mark its gigabytes of Go
	// values (a server holds one store, not both).
	var mem *memstore.Store
	b.Run("import/memstore", func(b *testing.B) {
		var rlp int64
		for b.Loop() {
			mem = memstore.New()
			rlp = generate(b, c, mem.AddBlock, nil)
		}
		reportImport(b, c.blocks, rlp)
		b.Logf("%d blocks, %.1f MB of RLP (%.1f KB a block)", c.blocks, float64(rlp)/1e6, float64(rlp)/float64(c.blocks)/1e3)
	})
	if mem != nil {
		runtime.GC()
		b.Run("bynumber/memstore", func(b *testing.B) { benchByNumber(b, mem, numbers) })
		mem = nil
		runtime.GC()
	}

	var schema string
	var rlp int64
	b.Run("import/pgstore", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			s := fmt.Sprintf("scale_%d_%d_%d", c.blocks, c.txs, i)
			w, err := pgstore.OpenWriter(ctx, url, &pgstore.Options{Schema: s, CacheBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			im := w.NewImporter(ctx, nil)
			rlp = generate(b, c, im.AddBlock, im.Flush)
			if err := im.Close(); err != nil {
				b.Fatal(err)
			}
			w.Close()
			if schema == "" {
				schema = s
			}
		}
		reportImport(b, c.blocks, rlp)
		disk := diskBytes(b, url, schema)
		b.ReportMetric(float64(disk)/float64(rlp), "disk/rlp")
		b.Logf("on disk: %.1f MB for %.1f MB of RLP", float64(disk)/1e6, float64(rlp)/1e6)
	})
	if schema == "" {
		return
	}
	runtime.GC()
	for _, r := range []struct {
		name  string
		cache int64
	}{{"pgstore-cold", -1}, {"pgstore-warm", 4 * rlp}} {
		b.Run("bynumber/"+r.name, func(b *testing.B) {
			rd, err := pgstore.OpenReader(ctx, url, &pgstore.Options{Schema: schema, CacheBytes: r.cache, MaxConns: 16})
			if err != nil {
				b.Fatal(err)
			}
			defer rd.Close()
			if r.cache > 0 {
				prefill(b, rd, numbers)
			}
			benchByNumber(b, rd, numbers)
		})
	}
}

// generate writes the case's chain with add, generated a chunk at a time
// with the timer stopped, and returns its size in RLP. settle, when not
// nil, waits for what add left running (an Importer's COPY goes on in the
// background) before the timer stops, so that no writing goes untimed. A
// chunk is five of an Importer's batches: the one wait a chunk costs the
// import the overlap of one batch's COPY with the next one's checks.
func generate(b *testing.B, c scaleCase, add func(*backend.Block, ...*backend.Uncle) error, settle func() error) (rlp int64) {
	gen := synth.New(synth.Config{Seed: uint64(c.blocks), TxsPerBlock: c.txs})
	const chunk = 10000
	blocks := make([]*backend.Block, 0, chunk)
	for done := 0; done < c.blocks; done += len(blocks) {
		if settle != nil {
			if err := settle(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		blocks = blocks[:0]
		for range min(chunk, c.blocks-done) {
			blk := gen.Next()
			rlp += int64(blk.Size)
			blocks = append(blocks, blk)
		}
		b.StartTimer()
		for _, blk := range blocks {
			if err := add(blk); err != nil {
				b.Fatal(err)
			}
		}
	}
	return rlp
}

// readSet returns the random block numbers the reads ask for: a set
// that the warm cache holds whatever the chain's length, so that warm
// measures a cache hit at every size.
func readSet(blocks int) []int {
	rng := rand.New(rand.NewPCG(1, 2))
	numbers := make([]int, 4096)
	for i := range numbers {
		numbers[i] = rng.IntN(blocks)
	}
	return numbers
}

// prefill reads the blocks of the read set, 8 at a time, into the
// reader's cache.
func prefill(b *testing.B, rd *pgstore.Reader, numbers []int) {
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(numbers)); i = next.Add(1) - 1 {
				if _, err := rd.BlockByNumber(context.Background(), backend.BlockNumber(numbers[i])); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.Logf("cache filled with %d reads in %v", len(numbers), time.Since(start).Round(time.Millisecond))
}

func reportImport(b *testing.B, blocks int, rlp int64) {
	per := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(blocks)/per, "blocks/s")
	b.ReportMetric(float64(rlp)/per/1e6, "MB/s")
}

// diskBytes returns what the schema's tables take, indexes and TOAST
// included.
func diskBytes(b *testing.B, url, schema string) int64 {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 2 DESC`, schema)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var total int64
	var parts []string
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			b.Fatal(err)
		}
		total += size
		parts = append(parts, fmt.Sprintf("%s %.1f MB", name, float64(size)/1e6))
	}
	b.Logf("tables: %s", strings.Join(parts[:min(len(parts), 4)], ", "))
	return total
}

// benchByNumber asks the handler for random blocks with full
// transactions: one request at a time for the latencies ("latency"), and
// 4 a core at a time for the throughput ("throughput").
func benchByNumber(b *testing.B, be backend.Backend, numbers []int) {
	h := blockrpc.NewHandler(blockrpc.NewService(be), blockrpc.WithKeys(blockrpc.AnyKey), blockrpc.WithAnswerCache(0))
	bodies := make([][]byte, len(numbers))
	for i, n := range numbers {
		bodies[i] = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x%x",true]}`, n)
	}
	serve := func(w *discard, rng *rand.Rand) {
		req := httptest.NewRequest(http.MethodPost, "/v3/bench", bytes.NewReader(bodies[rng.IntN(len(bodies))]))
		req.Header.Set("Content-Type", "application/json")
		w.status, w.n = 0, 0
		h.ServeHTTP(w, req)
		if w.status != 0 && w.status != http.StatusOK || w.n < 1000 {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
	b.Run("latency", func(b *testing.B) {
		w := &discard{header: make(http.Header)}
		rng := rand.New(rand.NewPCG(3, 4))
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			serve(w, rng)
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
		b.ReportMetric(float64(w.total)/float64(len(lat))/1e3, "KB/answer")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("throughput", func(b *testing.B) {
		var seed atomic.Uint64
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			w := &discard{header: make(http.Header)}
			rng := rand.New(rand.NewPCG(seed.Add(1), 5))
			for pb.Next() {
				serve(w, rng)
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	})
}

// discard is a ResponseWriter that counts what is written.
type discard struct {
	header   http.Header
	status   int
	n, total int64
}

func (d *discard) Header() http.Header { return d.header }
func (d *discard) WriteHeader(s int)   { d.status = s }
func (d *discard) Write(p []byte) (int, error) {
	d.n += int64(len(p))
	d.total += int64(len(p))
	return len(p), nil
}

var _ io.Writer = (*discard)(nil)
