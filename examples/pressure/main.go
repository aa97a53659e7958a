// Command pressure measures how examples/server holds up under the two
// attacks a hostile client can make with valid requests, and what an honest
// client sees meanwhile:
//
//   - stall: clients that each send a batch of full blocks and never read
//     the answer;
//   - gzip: clients that loop on gzipped batches of full blocks, reading
//     every answer.
//
// It starts the server itself (to read its resident memory from /proc), on
// loopback, runs the attack for a while, and prints the honest client's
// latency percentiles and failures and the server's peak resident memory:
//
//	go build -o /tmp/server ./examples/server
//	go run ./examples/pressure -server /tmp/server -chain dump.jsonl -attack stall
//
// It is a measurement, not a test: its figures depend on the machine.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

type options struct {
	server, chain, attack, extra string
	clients, batch               int
	duration                     time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.server, "server", "", "the example server's `binary`")
	flag.StringVar(&o.chain, "chain", "", "the dump `FILE` the server serves")
	flag.StringVar(&o.attack, "attack", "stall", "`stall` or gzip")
	flag.StringVar(&o.extra, "args", "", "more server `flags`, space-separated")
	flag.IntVar(&o.clients, "clients", 0, "attacking clients (default 100 for stall, 4 for gzip)")
	flag.IntVar(&o.batch, "batch", 1000, "calls in each attacking batch")
	flag.DurationVar(&o.duration, "duration", 25*time.Second, "how long the attack lasts")
	flag.Parse()
	if o.server == "" || o.chain == "" {
		flag.Usage()
		os.Exit(2)
	}
	if o.clients == 0 {
		o.clients = map[string]int{"stall": 100, "gzip": 4}[o.attack]
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "pressure:", err)
		os.Exit(1)
	}
}

const key = "pressure-key"

func run(o options) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := append([]string{"-addr", addr, "-chain", o.chain, "-keys", key}, strings.Fields(o.extra)...)
	cmd := exec.Command(o.server, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	url := "http://" + addr + "/v3/" + key
	head, err := waitReady(url)
	if err != nil {
		return err
	}
	fmt.Printf("server ready: head %d, resident %d MB\n", head, rss(cmd.Process.Pid)>>20)

	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	peak := make(chan int64, 1)
	go func() { peak <- samplePeak(ctx, cmd.Process.Pid) }()
	body := batchBody(o.batch, head)
	var wg sync.WaitGroup
	for range o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o.attack == "stall" {
				stall(ctx, addr, body)
			} else {
				loopGzip(ctx, url, body)
			}
		}()
	}
	latencies, failures := honest(ctx, url)
	wg.Wait()
	report(o, latencies, failures, <-peak)
	return nil
}

// honest asks for the head block with its transactions every 10 ms, as a
// client of the service would, and times each answer.
func honest(ctx context.Context, url string) ([]time.Duration, int) {
	client := &http.Client{Timeout: 10 * time.Second}
	body := `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",true]}`
	var latencies []time.Duration
	failures := 0
	for ctx.Err() == nil {
		start := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		ok := err == nil
		if ok {
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK && bytes.Contains(out, []byte(`"result":{`))
		}
		if !ok {
			failures++
		}
		latencies = append(latencies, time.Since(start))
		time.Sleep(10 * time.Millisecond)
	}
	return latencies, failures
}

// stall sends the batch and never reads, holding the connection open until
// the attack ends.
func stall(ctx context.Context, addr, body string) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v3/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", key, addr, len(body), body)
	<-ctx.Done()
}

// loopGzip asks for the batch gzipped, reads it whole, and asks again.
func loopGzip(ctx context.Context, url, body string) {
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func batchBody(n int, head uint64) string {
	calls := make([]string, n)
	for i := range calls {
		number := uint64(0) // a chain of the genesis alone
		if head > 0 {
			number = 1 + uint64(i)%head
		}
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["0x%x",true]}`, i, number)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

func report(o options, latencies []time.Duration, failures int, peak int64) {
	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))]
	}
	fmt.Printf("attack %s: %d clients, batches of %d, %v\n", o.attack, o.clients, o.batch, o.duration)
	fmt.Printf("honest client: %d requests, %d failed, p50 %v, p99 %v, max %v\n",
		len(latencies), failures, pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), pct(1).Round(10*time.Microsecond))
	fmt.Printf("server peak resident memory: %d MB\n", peak>>20)
}

func waitReady(url string) (uint64, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`))
		if err == nil {
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if i := bytes.Index(out, []byte(`"result":"0x`)); i >= 0 {
				rest := out[i+len(`"result":"0x`):]
				return strconv.ParseUint(string(rest[:bytes.IndexByte(rest, '"')]), 16, 64)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("the server at %s did not answer", url)
}

func samplePeak(ctx context.Context, pid int) int64 {
	var peak int64
	for ctx.Err() == nil {
		peak = max(peak, rss(pid))
		time.Sleep(100 * time.Millisecond)
	}
	return peak
}

// rss reads a process's resident memory from /proc.
func rss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
