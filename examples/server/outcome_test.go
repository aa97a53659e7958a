package main

// The access log tells what became of a request: a body that never came
// whole, an answer the client never got whole.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestSlowBodyIs408 sends the headers and part of the body, then stalls
// past the read timeout: the answer is 408, and so is the log line.
func TestSlowBodyIs408(t *testing.T) {
	const key = "slow-body"
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", key, "-read-timeout", "300ms")
	addr := regexp.MustCompile(`http://([^/\s]+)/v3/`).FindStringSubmatch(srv.stdout())[1]

	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`
	fmt.Fprintf(conn, "POST /v3/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		key, addr, len(body), body[:10])
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a stalled body is answered %d, want 408", resp.StatusCode)
	}
	srv.stop(t)

	logs := srv.stderr()
	want := regexp.MustCompile(`msg=request method=POST route=rpc key_id=` + sha256Prefix(key) + ` status=408 bytes=[1-9]`)
	if !want.MatchString(logs) {
		t.Errorf("the stalled body is not logged as a 408:\n%s", logs)
	}
}

// TestCutAnswerIsLoggedCut sends a batch whose answer is far more than
// the sockets hold and does not read it: the write timeout cuts the answer,
// and the log says so, with the bytes written before the cut, rather than
// a plain 200.
func TestCutAnswerIsLoggedCut(t *testing.T) {
	const (
		key   = "stalled-reader"
		calls = 1000
		// Each answer holds the block's 11,000 bytes of extra data in hex.
		leastWhole = calls * 22_000
	)
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", key, "-chain", bigBlockDump(t, 11_000), "-write-timeout", "500ms")
	addr := regexp.MustCompile(`http://([^/\s]+)/v3/`).FindStringSubmatch(srv.stdout())[1]

	batch := latestBatch(calls)
	dialer := slowReaderDialer()
	conn, err := dialer.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v3/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		key, addr, len(batch), batch)

	// Nothing is read until the request is logged.
	line := regexp.MustCompile(`msg=request [^\n]*rpc="batch of 1000"[^\n]*`)
	for deadline := time.Now().Add(30 * time.Second); !line.MatchString(srv.stderr()); {
		if time.Now().After(deadline) {
			t.Fatalf("the batch is not logged:\n%s", srv.stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	logged := line.FindString(srv.stderr())

	// What arrived before the server closed the connection.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	received := int64(0)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		received, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	srv.stop(t)

	m := regexp.MustCompile(`route=rpc key_id=` + sha256Prefix(key) + ` rpc="batch of 1000" status=200 bytes=(\d+) cut=true `).FindStringSubmatch(logged)
	if m == nil {
		t.Fatalf("the cut answer is not logged with cut=true:\n%s", logged)
	}
	written, _ := strconv.ParseInt(m[1], 10, 64)
	t.Logf("%d bytes written before the cut, %d received", written, received)
	if written <= 0 || written >= leastWhole || received > written {
		t.Errorf("logged %d bytes written, %d received, of an answer of more than %d", written, received, leastWhole)
	}
}
