package main

// A shutdown bounded in time: a client reading slowly cannot hold the
// server past its grace, nor a slow dump hold its load past a signal.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/pgstore/pgtest"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
	"github.com/blockrpc/blockrpc/memstore"
)

// TestShutdownCutsASlowReader holds a request in flight past the grace
// with a client that reads its answer a byte at a time, and checks that
// SIGTERM ends the server on time, cleanly, saying what it cut.
func TestShutdownCutsASlowReader(t *testing.T) {
	const grace = 500 * time.Millisecond
	// A block of 11 kB of extra data, answered 1,000 times in one batch: a
	// 22 MB answer, more than the socket buffers hold once the client's
	// receive buffer is made small, and within the 25 MB response limit.
	const key = "slow-reader"
	p := startBinary(t, "-addr", "127.0.0.1:0", "-grace", grace.String(), "-chain", bigBlockDump(t, 11_000), "-keys", key)
	p.waitServing(t)
	conn := readSlowly(t, p.host(t), key)
	defer conn.Close()

	took := p.stop(t, syscall.SIGTERM, 30*time.Second, 0)
	// The margin is for a loaded machine; a server waiting for the client
	// would take its minutes.
	if limit := grace + 5*time.Second; took > limit {
		t.Errorf("the server took %v to stop after SIGTERM, want under %v", took, limit)
	}
	if logs := p.stderr.String(); !regexp.MustCompile(`msg="stopped: cut[^\n]* cut=1 `).MatchString(logs) {
		t.Errorf("the log does not say that 1 request was cut:\n%s", logs)
	}
}

// readSlowly sends a batch of 1,000 calls for the latest block to addr,
// and reads its answer a byte every 100 ms once the first has come.
func readSlowly(t *testing.T, addr, key string) net.Conn {
	t.Helper()
	batch := latestBatch(1000)
	conn, err := slowReaderDialer().Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v3/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		key, addr, len(batch), batch)
	// The first byte of the answer: the handler is writing it.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		conn.Close()
		t.Fatalf("no answer begins: %v", err)
	}
	conn.SetReadDeadline(time.Time{})
	go func() {
		b := make([]byte, 1)
		for {
			if _, err := conn.Read(b); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return conn
}

// TestSecondSignal sends SIGINT to a server that waits out a long grace
// for a slow reader, and then SIGINT again, which must end it at once.
func TestSecondSignal(t *testing.T) {
	const key = "impatient"
	p := startBinary(t, "-addr", "127.0.0.1:0", "-grace", "10m", "-chain", bigBlockDump(t, 11_000), "-keys", key)
	p.waitServing(t)
	conn := readSlowly(t, p.host(t), key)
	defer conn.Close()

	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.stderr.String(), `msg="shutting down"`); {
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("the server does not begin to shut down:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop(t, os.Interrupt, 30*time.Second, 1)
	if logs := p.stderr.String(); !strings.Contains(logs, "a second signal (interrupt): stopping at once") {
		t.Errorf("the server does not say why it stopped at once:\n%s", logs)
	}
}

// TestSignalDuringLoad sends SIGTERM while the server reads a dump that
// arrives slowly, through a named pipe, and checks that it stops at once.
func TestSignalDuringLoad(t *testing.T) {
	dump, err := os.ReadFile(writeDump(t, 50))
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "chain.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipe: %v", err)
	}
	p := startBinary(t, "-addr", "127.0.0.1:0", "-chain", fifo)

	// Opening the pipe's end without blocking succeeds once the server
	// has opened the other: it is then loading, its signals caught.
	var w *os.File
	for deadline := time.Now().Add(30 * time.Second); ; {
		w, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) || p.exited() {
			t.Fatalf("the server does not open the dump: %v\n%s", err, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer w.Close()
	// Part of the dump, the rest never comes while the server runs.
	half := bytes.IndexByte(dump[len(dump)/2:], '\n') + len(dump)/2 + 1
	if _, err := w.Write(dump[:half]); err != nil {
		t.Fatal(err)
	}

	p.stop(t, syscall.SIGTERM, 15*time.Second, 0)
	if logs := p.stderr.String(); !strings.Contains(logs, "load was interrupted") {
		t.Errorf("the log does not say that the load was interrupted:\n%s", logs)
	}
}

// TestSignalAsStoreOpens has the first signal come while a Pebble store
// opens (Open, which takes no context, replays its log): the server then
// stops as an interrupted import does, status 0 and a line that says so,
// where the store's first read failed with the context's error and the
// server exited 1. With -follow too.
func TestSignalAsStoreOpens(t *testing.T) {
	for _, extra := range [][]string{nil, {"-follow", "http://127.0.0.1:1/"}} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the signal, as pebblestore.Open runs
		var stderr syncbuf.Buffer
		args := append([]string{"-addr", "127.0.0.1:0", "-keys", "k", "-store", "pebble:" + filepath.Join(t.TempDir(), "db")}, extra...)
		if err := run(ctx, args, io.Discard, &stderr); err != nil {
			t.Errorf("run %q, interrupted as the store opened: %v, want nil (exit status 0)", extra, err)
		}
		if !strings.Contains(stderr.String(), "interrupted while the store was opened") {
			t.Errorf("run %q: the log does not say it was interrupted:\n%s", extra, stderr.String())
		}
	}
}

// TestSignalAsKeyStoreOpens has the first signal come as a key store in
// PostgreSQL opens, whose first read then fails with the context's error:
// the server stops with status 0, and says why.
func TestSignalAsKeyStoreOpens(t *testing.T) {
	_, base := pgtest.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr syncbuf.Buffer
	keys := keySchema(t, base)
	if err := run(ctx, []string{"-addr", "127.0.0.1:0", "-keystore", keys}, io.Discard, &stderr); err != nil {
		t.Errorf("run, interrupted as the key store opened: %v, want nil (exit status 0)", err)
	}
	if !strings.Contains(stderr.String(), "interrupted while the key store was opened") {
		t.Errorf("the log does not say it was interrupted as the key store opened:\n%s", stderr.String())
	}
}

// bigBlockDump writes a dump of one block with extra bytes of extra data.
func bigBlockDump(t *testing.T, extra int) string {
	t.Helper()
	store := memstore.New()
	b := &backend.Block{Header: backend.Header{GasLimit: 30_000_000, ExtraData: bytes.Repeat([]byte{0xab}, extra)}}
	b.Difficulty.SetUint64(1)
	if err := store.AddBlock(b); err != nil {
		t.Fatal(err)
	}
	return saveDump(t, store)
}

// process is the server built and run as an operator runs it.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *syncbuf.Buffer
	done           chan struct{}
}

// buildServer builds the command into the test's directory.
func buildServer(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the server with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func startBinary(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{
		cmd:    exec.Command(buildServer(t), args...),
		stdout: new(syncbuf.Buffer),
		stderr: new(syncbuf.Buffer),
		done:   make(chan struct{}),
	}
	p.cmd.Env = append(os.Environ(), "BLOCKRPC_KEYS=")
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitServing waits for the server to listen and to print its endpoint;
// the two streams are copied apart, so either may come first.
func (p *process) waitServing(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(p.stderr.String(), "msg=serving") || !strings.Contains(p.stdout.String(), "JSON-RPC endpoint:"); {
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("the server does not serve:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// host returns the host and port of the endpoint the server printed.
func (p *process) host(t *testing.T) string {
	t.Helper()
	addr := regexp.MustCompile(`http://([^/\s]+)/v3/`).FindStringSubmatch(p.stdout.String())
	if addr == nil {
		t.Fatalf("no endpoint printed:\n%s", p.stdout.String())
	}
	return addr[1]
}

// stop sends sig and waits for the process to exit with status want,
// killing it after limit; it returns how long the process took.
func (p *process) stop(t *testing.T, sig os.Signal, limit time.Duration, want int) time.Duration {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	code, took := p.wait(t, limit)
	t.Logf("exit status %d, %v after %v", code, took.Round(time.Millisecond), sig)
	if code != want {
		t.Errorf("exit status %d after %v, want %d:\n%s", code, sig, want, p.stderr.String())
	}
	return took
}

// wait waits for the process to exit and returns its status and the time
// it took since now, killing it after limit.
func (p *process) wait(t *testing.T, limit time.Duration) (int, time.Duration) {
	t.Helper()
	from := time.Now()
	select {
	case <-p.done:
	case <-time.After(limit):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("the server did not stop within %v of the signal:\n%s", limit, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(from)
}

// TestHelpExitsZero asks the server for its usage, as -h does: printed,
// with status 0, where it used to end with "server: flag: help
// requested" and status 1.
func TestHelpExitsZero(t *testing.T) {
	out, err := exec.Command(buildServer(t), "-h").CombinedOutput()
	if err != nil {
		t.Errorf("server -h: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-store STORE") || strings.Contains(string(out), "help requested") {
		t.Errorf("server -h printed:\n%s", out)
	}
}
