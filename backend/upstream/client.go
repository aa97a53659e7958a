package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// maxAnswerBytes bounds what is read of one endpoint answer: a batch of the
// largest mainnet blocks with their transactions is a few megabytes.
const maxAnswerBytes = 256 << 20

// answersInFlight bounds the bytes of the answers that the endpoints of one
// Backend, or a Follower's, are read at once: a reader per request, each
// up to maxAnswerBytes, would otherwise let a hostile endpoint (a gzip
// answer of 250 KB that inflates to 250 MB) take the process's memory as
// fast as clients ask for blocks it does not have.
var answersInFlight int64 = 512 << 20

// budget is what is left of answersInFlight, of size when none is read.
type budget struct {
	left atomic.Int64
	size int64
}

func newBudget() *budget {
	b := &budget{size: answersInFlight}
	b.left.Store(b.size)
	return b
}

// budgetReader reads r, taking what it reads from b until release.
type budgetReader struct {
	r     io.Reader
	b     *budget
	taken int64
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	br.taken += int64(n)
	if br.b.left.Add(-int64(n)) < 0 {
		if br.taken > br.b.size/8 {
			// An answer that took so much of the bound itself is the
			// endpoint's doing.
			return n, fmt.Errorf("%w: an answer of more than %d MiB, beside others, past the %d MiB the answers read at once may take", errBadAnswer, br.taken>>20, br.b.size>>20)
		}
		return n, errAnswersBusy
	}
	return n, err
}

// errAnswersBusy fails a read of an ordinary answer while others take the
// bound of the answers read at once: not the endpoint's fault.
var errAnswersBusy = errors.New("upstream: the answers being read at once take their bound")

func (br *budgetReader) release() { br.b.left.Add(br.taken) }

// maxPooledBytes is the largest buffer kept for the next answer: one that
// a huge answer grew is let go.
const maxPooledBytes = 4 << 20

// client speaks JSON-RPC 2.0 over HTTP to one endpoint. It is what the
// Backend and the Follower share.
type client struct {
	url    string
	http   *http.Client
	budget *budget // shared by the clients of a Backend
	// name is the endpoint as logs show it: the URL without its path,
	// which often holds a provider's key.
	name string
	// batchCap is the most calls a batch to the endpoint holds, once it
	// has refused a larger one; 0 until then. Providers cap batches
	// (go-ethereum's --rpc.batch-request-limit; plans that take 10 calls,
	// or none), and every poll would fail on one that refuses the
	// tracker's 32 headers.
	batchCap atomic.Int32
}

func newClient(endpoint string, hc *http.Client, b *budget) *client {
	return &client{url: endpoint, http: hc, budget: b, name: redact(endpoint)}
}

// call is one request of a batch. Its result is left raw: null when the
// endpoint has nothing, which the caller tells apart.
type call struct {
	method string
	params []any
	result json.RawMessage
	err    error // the endpoint's JSON-RPC error for this call, if any
}

// RPCError is a JSON-RPC error that an endpoint answered.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Error gives the code and the message.
func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// StatusError is an HTTP answer other than 200 OK. RetryAfter is what a
// 429 or 503 asked for, zero when it said nothing. Reason is what the
// answer's body said of it, for the operator: the message of a JSON-RPC
// error ("rejected due to project ID settings"), or else the first line
// of a body of plain text, 200 bytes at most; empty when it said nothing
// readable (an HTML page, say).
type StatusError struct {
	Status     int
	RetryAfter time.Duration
	Reason     string
}

// Error gives the status, the reason quoted, and the wait asked for.
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("HTTP %d", e.Status)
	if e.Reason != "" {
		msg += ": " + strconv.Quote(e.Reason)
	}
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

// maxReasonBytes bounds StatusError.Reason: a provider's reason is a
// sentence, and anything longer is a page no log line should hold.
const maxReasonBytes = 200

// statusReason is the Reason of a StatusError whose answer's body is body.
func statusReason(body []byte) string {
	var answer struct {
		Error *RPCError `json:"error"`
	}
	var reason string
	if json.Unmarshal(body, &answer) == nil && answer.Error != nil {
		reason = answer.Error.Message
	} else if text := bytes.TrimSpace(body); len(text) > 0 && text[0] != '<' && text[0] != '{' && text[0] != '[' {
		line, _, _ := bytes.Cut(text, []byte("\n"))
		reason = string(bytes.TrimSpace(line))
	}
	if !utf8.ValidString(reason) {
		return ""
	}
	if len(reason) > maxReasonBytes {
		cut := maxReasonBytes
		for !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut] + "…"
	}
	return reason
}

// errBadAnswer is an answer that is not what JSON-RPC promises: not JSON,
// truncated, or with the wrong ids.
var errBadAnswer = errors.New("malformed JSON-RPC answer")

type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id"`
	Method  string `json:"method"`
	Params  []any  `json:"params"`
}

type response struct {
	ID     *int            `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// do sends the calls, as a batch when there is more than one, and fills in
// each one's result or error. The error returned is the exchange's: the
// endpoint was not reached, answered other than 200, or answered something
// that is not JSON-RPC. A batch the endpoint refuses as too large is sent
// again in halves, and the endpoint's cap is kept for the next batches.
func (c *client) do(ctx context.Context, calls ...*call) error {
	for len(calls) > 0 {
		n := len(calls)
		if most := int(c.batchCap.Load()); most > 0 {
			n = min(n, most)
		}
		err := c.send(ctx, calls[:n])
		if n > 1 && errors.Is(err, errBatchRefused) {
			c.lowerBatchCap(int32(n / 2))
			continue
		}
		if err != nil {
			return err
		}
		calls = calls[n:]
	}
	return nil
}

// lowerBatchCap makes most the endpoint's cap unless it is lower already.
func (c *client) lowerBatchCap(most int32) {
	for {
		old := c.batchCap.Load()
		if old != 0 && old <= most {
			return
		}
		if c.batchCap.CompareAndSwap(old, most) {
			return
		}
	}
}

// errBatchRefused is an endpoint's refusal of a batch as a whole: too
// many calls, or batches not taken at all.
var errBatchRefused = errors.New("batch refused")

// refusesBatch reports whether an error answered for a whole batch, or for
// its first call only, refuses the batch: an invalid request (go-ethereum's
// "batch too large" is -32600), or any error that speaks of batches.
func refusesBatch(e *RPCError) bool {
	return e.Code == -32600 || strings.Contains(strings.ToLower(e.Message), "batch")
}

// send is do for calls that go in one request.
func (c *client) send(ctx context.Context, calls []*call) error {
	reqs := make([]request, len(calls))
	for i, cl := range calls {
		params := cl.params
		if params == nil {
			params = []any{}
		}
		reqs[i] = request{JSONRPC: "2.0", ID: i, Method: cl.method, Params: params}
	}
	var body []byte
	var err error
	if len(reqs) == 1 {
		body, err = json.Marshal(reqs[0])
	} else {
		body, err = json.Marshal(reqs)
	}
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// A *url.Error quotes the URL, whose path may hold a provider's
		// key: name the endpoint as the logs do.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = c.name
		}
		return err
	}
	defer resp.Body.Close()
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBytes {
			bufPool.Put(buf)
		}
	}()
	if resp.StatusCode != http.StatusOK {
		// Read whole (64 KB at most), so that the connection is kept.
		_, _ = buf.ReadFrom(io.LimitReader(resp.Body, 64<<10))
		err := &StatusError{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After")),
			Reason: statusReason(buf.Bytes())}
		if len(calls) > 1 && resp.StatusCode == http.StatusRequestEntityTooLarge {
			return fmt.Errorf("%w: %w", errBatchRefused, err)
		}
		return err
	}
	answer := &budgetReader{r: io.LimitReader(resp.Body, maxAnswerBytes+1), b: c.budget}
	defer answer.release() // once fill has copied the results out
	if _, err := buf.ReadFrom(answer); err != nil {
		return err
	}
	if buf.Len() > maxAnswerBytes {
		return fmt.Errorf("%w: more than %d bytes", errBadAnswer, maxAnswerBytes)
	}
	return fill(buf.Bytes(), calls)
}

// fill reads an answer into the calls it is for. The results are copied
// out of data, which is reused.
func fill(data []byte, calls []*call) error {
	var resps []response
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &resps); err != nil {
			return fmt.Errorf("%w: %v", errBadAnswer, err)
		}
	} else {
		var r response
		if err := json.Unmarshal(trimmed, &r); err != nil {
			return fmt.Errorf("%w: %v", errBadAnswer, err)
		}
		if r.ID == nil && r.Error != nil && (len(calls) == 1 || !refusesBatch(r.Error)) {
			return r.Error // an error for the whole request
		}
		resps = []response{r}
	}
	if len(calls) > 1 && len(resps) == 1 && resps[0].Error != nil && refusesBatch(resps[0].Error) {
		// A batch refused whole: one error, without an id or, as
		// go-ethereum answers a batch past its limit, under the first
		// call's.
		return fmt.Errorf("%w: %w", errBatchRefused, resps[0].Error)
	}
	seen := make([]bool, len(calls))
	for _, r := range resps {
		if r.ID == nil || *r.ID < 0 || *r.ID >= len(calls) || seen[*r.ID] {
			return fmt.Errorf("%w: an answer with an unknown or repeated id", errBadAnswer)
		}
		seen[*r.ID] = true
		cl := calls[*r.ID]
		if r.Error != nil {
			cl.err = r.Error
			continue
		}
		if r.Result == nil {
			return fmt.Errorf("%w: neither result nor error", errBadAnswer)
		}
		cl.result = append(json.RawMessage(nil), r.Result...)
	}
	for i, ok := range seen {
		if !ok {
			return fmt.Errorf("%w: no answer to %s", errBadAnswer, calls[i].method)
		}
	}
	return nil
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// redact returns a URL as logs may show it: scheme and host only, since a
// provider's key is often in the path.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "endpoint"
	}
	return u.Scheme + "://" + u.Host
}
