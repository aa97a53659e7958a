package main

// The log and the keys of a server under attack: a key never in the log,
// keys written by hand.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLogNamesNoKey sends a key in every place a client could put it and
// checks that the log never shows it, and shows the id of the accepted key.
func TestLogNamesNoKey(t *testing.T) {
	const (
		key     = "Kx7leakCanary93f1"  // accepted
		refused = "Zq4strayKey20ab77c" // a key of some other service
	)
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", key+",spare-key")
	addr := regexp.MustCompile(`http://([^/\s]+)/v3/`).FindStringSubmatch(srv.stdout())[1]

	body := `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`
	type request struct {
		method, target string
		header         string
	}
	requests := []request{
		{"POST", "/v3/" + key, ""},
		{"POST", "/V3/" + key, ""},
		{"POST", "/" + key, ""},
		{"POST", "/v3" + key, ""},
		{"POST", "/v3/" + key + "/x", ""},
		{"POST", "/x/v3/" + key, ""},
		{"POST", "/v3/" + key + "?key=" + key, ""},
		{"POST", "/?key=" + key, ""},
		{"POST", "/v3/", "Referer: http://example.com/v3/" + key + "\r\nX-Api-Key: " + key + "\r\nAuthorization: Bearer " + key + "\r\n"},
		{"POST", "/v3%2F" + key, ""},
		{"POST", "/v3/" + key + "%2Fx", ""},
		{"POST", "/%76%33/" + key, ""},
		{"POST", "/v3/%4B" + key[1:], ""},
		{"POST", "/" + strings.Repeat("a/", 20_000) + "v3/" + key, ""},
		{"POST", "/v3/" + strings.Repeat(key, 3_000), ""},
		{"POST", "/v3/" + refused, ""},
		{"POST", "/" + refused, ""},
		{"GET", "/v3/" + key, ""},
		{key, "/v3/" + key, ""},
		{"POST", "http://" + addr + "/v3/" + key, ""},
	}
	for _, r := range requests {
		raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n%s",
			r.method, r.target, addr, len(body), r.header, body)
		status := rawRequest(t, addr, raw)
		if status == 0 {
			t.Errorf("%s %.60s: no answer", r.method, r.target)
		}
	}
	srv.stop(t)

	logs := srv.stderr()
	for _, secret := range []string{key, refused} {
		if i := strings.Index(strings.ToLower(logs), strings.ToLower(secret)); i >= 0 {
			line := logs[strings.LastIndexByte(logs[:i], '\n')+1:]
			line, _, _ = strings.Cut(line, "\n")
			t.Errorf("the log shows the key %s:\n%.500s", secret, line)
		}
	}
	if id := sha256Prefix(key); strings.Count(logs, "key_id="+id) < 6 {
		t.Errorf("the log does not name the accepted key by its id %s on each of its requests:\n%s", id, logs)
	}
	if id := sha256Prefix(refused); strings.Contains(logs, id) {
		t.Errorf("the log shows the id %s of a refused key:\n%s", id, logs)
	}
}

// sha256Prefix is the key id the log promises: 4 bytes of the key's
// SHA-256, in hex.
func sha256Prefix(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

// rawRequest sends a request as written, so that no client cleans up its
// path, and returns the answer's status, or 0 for none.
func rawRequest(t *testing.T, addr, raw string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	// The server may answer an oversized request before reading all of it.
	go io.WriteString(conn, raw)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestKeysWrittenByHand accepts keys with spaces around the commas, and
// refuses by position, never showing it, a key no path can carry.
func TestKeysWrittenByHand(t *testing.T) {
	t.Setenv("BLOCKRPC_KEYS", " gamma ,\tdelta ")
	check := func(srv *server, keys ...string) {
		t.Helper()
		url := regexp.MustCompile(`http://\S+/v3/`).FindString(srv.stdout())
		for _, k := range keys {
			resp, err := http.Post(url+k, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("key %q gets %d, want 200", k, resp.StatusCode)
			}
		}
		srv.stop(t)
	}
	check(start(t, "-addr", "127.0.0.1:0", "-keys", " alpha , beta"), "alpha", "beta")
	check(start(t, "-addr", "127.0.0.1:0"), "gamma", "delta")

	for _, tc := range []struct {
		env, flag, secret, want string
	}{
		{flag: "alpha, ,beta", want: "-keys: key 2 of 3 is empty"},
		{flag: "alpha,beta,", want: "-keys: key 3 of 3 is empty"},
		{flag: "alpha,be ta", secret: "be ta", want: "-keys: key 2 of 2 has whitespace or a control character"},
		{flag: "al\x01pha", secret: "al\x01pha", want: "-keys: key 1 of 1 has whitespace or a control character"},
		{flag: "alpha,be/ta", secret: "be/ta", want: "-keys: key 2 of 2 has a slash"},
		{env: "alpha,be\tta", secret: "be\tta", want: "BLOCKRPC_KEYS: key 2 of 2 has whitespace or a control character"},
		{env: ",alpha", want: "BLOCKRPC_KEYS: key 1 of 2 is empty"},
	} {
		t.Setenv("BLOCKRPC_KEYS", tc.env)
		args := []string{"-addr", "127.0.0.1:0", "-chain", writeDump(t, 1)}
		if tc.flag != "" {
			args = append(args, "-keys", tc.flag)
		}
		// A run that accepts the keys stops at once on this context.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var stderr bytes.Buffer
		err := run(ctx, args, io.Discard, &stderr)
		switch {
		case err == nil:
			t.Errorf("env %q, -keys %q: accepted, want %q", tc.env, tc.flag, tc.want)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("env %q, -keys %q: %q, want %q", tc.env, tc.flag, err, tc.want)
		case tc.secret != "" && strings.Contains(err.Error()+stderr.String(), tc.secret):
			t.Errorf("the refusal shows the key: %v\n%s", err, stderr.String())
		}
	}
}
