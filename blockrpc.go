// Package blockrpc serves Ethereum block data over JSON-RPC 2.0 the way a
// hosted node provider does: POST {base}/v3/<API_KEY>, with the methods
// eth_getBlockByNumber and eth_getUncleByBlockHashAndIndex.
//
// A Service answers the two queries from a backend.Backend, as typed Go
// calls, and with them the companion methods clients ask for alongside:
// eth_getBlockByHash, eth_getUncleByBlockNumberAndIndex,
// eth_getUncleCountByBlockHash, eth_getUncleCountByBlockNumber,
// eth_blockNumber and eth_chainId. A Handler wraps the same Service in the JSON-RPC envelope over
// HTTP, to mount in any mux. Answers are byte-for-byte those of go-ethereum,
// except where this service's specification differs (see the README):
// every block carries its totalDifficulty, uncles are full block objects
// without transactions, and the pending block hides its hash, nonce,
// logsBloom and number.
//
// The memstore package is a ready Backend: an in-memory chain that loads
// JSONL dumps, for serving small chains and for tests.
package blockrpc

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/hexutil"
)

// Service answers block queries from a Backend. It is safe for concurrent
// use, and holds no state of its own.
type Service struct {
	backend backend.Backend
}

// NewService returns a Service reading from b.
func NewService(b backend.Backend) *Service {
	return &Service{backend: b}
}

// ---- Handler options -------------------------------------------------------

// The defaults of the limits are go-ethereum's.
const (
	DefaultBatchLimit    = 1000
	DefaultResponseLimit = 25_000_000
	DefaultBodyLimit     = 5 * 1024 * 1024
)

// An Option configures a Handler.
type Option func(*config)

type config struct {
	keys          KeyValidator
	batchLimit    int
	responseLimit int
	bodyLimit     int64
	gzip          bool
	corsOrigins   []string
	logger        *slog.Logger
}

// WithKeys sets the validator of API keys. Without it every request is
// refused with 401: serving without keys is a choice, made explicit with
// WithKeys(AnyKey).
func WithKeys(v KeyValidator) Option { return func(c *config) { c.keys = v } }

// WithBatchLimit sets the most calls a batch may hold (default 1,000); a
// larger batch is refused whole. 0 or less removes the limit.
func WithBatchLimit(n int) Option { return func(c *config) { c.batchLimit = n } }

// WithResponseLimit sets the most bytes of results a batch may produce
// (default 25 MB), counted as go-ethereum counts them; calls past it are
// answered with an error. 0 or less removes the limit.
func WithResponseLimit(n int) Option { return func(c *config) { c.responseLimit = n } }

// WithBodyLimit sets the largest request body accepted (default 5 MiB);
// a larger one is refused with 413. 0 or less removes the limit.
func WithBodyLimit(n int64) Option { return func(c *config) { c.bodyLimit = n } }

// WithGzip compresses answers of 1 KiB and more for clients that accept
// gzip.
func WithGzip() Option { return func(c *config) { c.gzip = true } }

// WithCORS lets browser pages from the given origins call the handler, and
// answers their preflight requests. "*" allows every origin.
func WithCORS(origins ...string) Option {
	return func(c *config) { c.corsOrigins = append(c.corsOrigins, origins...) }
}

// WithLogger sets where the handler reports backend failures, recovered
// panics and refused keys (never the keys themselves). By default it
// reports nothing.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// ---- API keys --------------------------------------------------------------

// A KeyValidator decides whether an API key may use the service. A non-nil
// error means the decision could not be made; the request is then refused
// with 503 rather than 401.
type KeyValidator interface {
	ValidKey(ctx context.Context, key string) (bool, error)
}

// KeyFunc adapts a function to a KeyValidator.
type KeyFunc func(ctx context.Context, key string) (bool, error)

// ValidKey calls f.
func (f KeyFunc) ValidKey(ctx context.Context, key string) (bool, error) { return f(ctx, key) }

// AnyKey accepts every non-empty key: open access, for local use.
var AnyKey KeyValidator = KeyFunc(func(_ context.Context, key string) (bool, error) {
	return key != "", nil
})

// KeySet is a set of accepted keys that can change while it is in use; its
// zero value accepts nothing until keys are added. Keys are held and looked
// up as SHA-256 digests, so that the time a check takes says nothing about
// how much of a wrong key was right.
type KeySet struct {
	mu   sync.RWMutex
	keys map[[sha256.Size]byte]struct{}
}

// NewKeySet returns a set accepting the given keys; empty keys are ignored.
func NewKeySet(keys ...string) *KeySet {
	s := &KeySet{keys: make(map[[sha256.Size]byte]struct{})}
	for _, k := range keys {
		s.Add(k)
	}
	return s
}

// Add accepts key from now on.
func (s *KeySet) Add(key string) {
	if key == "" {
		return
	}
	s.mu.Lock()
	if s.keys == nil {
		s.keys = make(map[[sha256.Size]byte]struct{})
	}
	s.keys[sha256.Sum256([]byte(key))] = struct{}{}
	s.mu.Unlock()
}

// Revoke refuses key from now on.
func (s *KeySet) Revoke(key string) {
	s.mu.Lock()
	delete(s.keys, sha256.Sum256([]byte(key)))
	s.mu.Unlock()
}

// ValidKey implements KeyValidator.
func (s *KeySet) ValidKey(_ context.Context, key string) (bool, error) {
	if key == "" {
		return false, nil
	}
	digest := sha256.Sum256([]byte(key))
	s.mu.RLock()
	_, ok := s.keys[digest]
	s.mu.RUnlock()
	return ok, nil
}

// ---- HTTP ------------------------------------------------------------------

// Handler serves the Service as JSON-RPC 2.0 over HTTP. It answers POST
// requests with a JSON body at any path ending in /v3/<API_KEY>, so it can
// be mounted under any prefix, with or without http.StripPrefix. Each
// request's context reaches the backend: timeouts are the caller's, set on
// the http.Server or by middleware.
type Handler struct {
	service *Service
	cfg     config
}

// NewHandler returns a Handler serving s.
func NewHandler(s *Service, opts ...Option) *Handler {
	h := &Handler{service: s, cfg: config{
		batchLimit:    DefaultBatchLimit,
		responseLimit: DefaultResponseLimit,
		bodyLimit:     DefaultBodyLimit,
	}}
	for _, opt := range opts {
		opt(&h.cfg)
	}
	if h.cfg.keys == nil && h.cfg.logger != nil {
		h.cfg.logger.Warn("blockrpc: no key validator: every request will be refused with 401")
	}
	return h
}

var (
	jsonContentType = []string{"application/json"}
	gzipEncoding    = []string{"gzip"}
)

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cors(w, r) {
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		h.refuse(w, http.StatusMethodNotAllowed, codeInvalidRequest, "method not allowed")
		return
	}
	key, ok := apiKey(r.URL.Path)
	if !ok {
		h.refuse(w, http.StatusNotFound, codeInvalidRequest, "not found: the path must end in /v3/<API_KEY>")
		return
	}
	// The checks that cost nothing come before the key's, which may ask
	// a database.
	if !isJSON(r.Header.Get("Content-Type")) {
		h.refuse(w, http.StatusUnsupportedMediaType, codeInvalidRequest, "invalid content type, only application/json is supported")
		return
	}
	if h.cfg.bodyLimit > 0 && r.ContentLength > h.cfg.bodyLimit {
		h.refuse(w, http.StatusRequestEntityTooLarge, codeInvalidRequest, fmt.Sprintf("content length too large (%d>%d)", r.ContentLength, h.cfg.bodyLimit))
		return
	}
	if status, code, msg := h.checkKey(r.Context(), key); status != 0 {
		h.refuse(w, status, code, msg)
		return
	}

	body := getBuffer()
	defer putBuffer(body)
	var err error
	*body, err = readBody(r.Body, (*body)[:0], r.ContentLength, h.cfg.bodyLimit)
	if err == errBodyTooLarge {
		h.refuse(w, http.StatusRequestEntityTooLarge, codeInvalidRequest, fmt.Sprintf("request body too large (>%d)", h.cfg.bodyLimit))
		return
	}
	if err != nil {
		h.refuse(w, http.StatusBadRequest, codeInvalidRequest, "read error")
		return
	}

	out := getBuffer()
	defer putBuffer(out)
	*out = h.serveJSONRPC(r.Context(), *body, (*out)[:0])
	h.write(w, r, *out)
}

// apiKey returns the key of a path ending in /v3/<key>, and false for a
// path of another shape. A path ending in /v3 or /v3/ has an empty key.
func apiKey(path string) (string, bool) {
	i := strings.LastIndexByte(path, '/')
	dir, last := path[:max(i, 0)], path[i+1:]
	switch {
	case dir == "v3" || strings.HasSuffix(dir, "/v3"):
		return last, true
	case last == "v3":
		return "", true // the key is missing
	}
	return "", false
}

// isJSON reports whether a Content-Type is application/json, with any
// parameters. The exact header most clients send is accepted without
// parsing it.
func isJSON(contentType string) bool {
	if contentType == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// checkKey returns 0 for an accepted key, and otherwise the HTTP status,
// code and message to refuse the request with. A validator that fails or
// panics is a server error, not the client's.
func (h *Handler) checkKey(ctx context.Context, key string) (status, code int, msg string) {
	switch {
	case key == "":
		return http.StatusUnauthorized, codeInvalidRequest, "missing API key: the path must end in /v3/<API_KEY>"
	case h.cfg.keys == nil:
		return http.StatusUnauthorized, codeInvalidRequest, "invalid API key"
	}
	ok, err := h.validKey(ctx, key)
	switch {
	case err != nil:
		h.log(slog.LevelError, "blockrpc: key validation failed", "err", err)
		return http.StatusServiceUnavailable, codeServerError, "key validation unavailable"
	case !ok:
		h.log(slog.LevelDebug, "blockrpc: refused an invalid API key")
		return http.StatusUnauthorized, codeInvalidRequest, "invalid API key"
	}
	return 0, 0, ""
}

func (h *Handler) validKey(ctx context.Context, key string) (ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			ok, err = false, fmt.Errorf("key validator panicked: %v", p)
		}
	}()
	return h.cfg.keys.ValidKey(ctx, key)
}

// refuse answers a request that does not reach JSON-RPC with an HTTP status
// and a JSON-RPC error body, so that JSON clients can read why.
func (h *Handler) refuse(w http.ResponseWriter, status, code int, msg string) {
	body := appendError(nil, nil, code, msg)
	w.Header()["Content-Type"] = jsonContentType
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// write sends a JSON-RPC answer; an empty one (notifications only) is an
// empty 200 response.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, out []byte) {
	header := w.Header()
	header["Content-Type"] = jsonContentType
	if len(out) == 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	out = append(out, '\n')
	if h.cfg.gzip {
		header.Add("Vary", "Accept-Encoding")
		if len(out) >= 1024 && acceptsGzip(r) {
			zipped := getBuffer()
			defer putBuffer(zipped)
			*zipped = gzipBytes((*zipped)[:0], out)
			header["Content-Encoding"] = gzipEncoding
			out = *zipped
		}
	}
	header["Content-Length"] = []string{strconv.Itoa(len(out))}
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}

// acceptsGzip reports whether the client accepts gzip: named with a
// weight above zero ("gzip", "gzip;q=0.5"), or covered by "*", and not
// refused with q=0.
func acceptsGzip(r *http.Request) bool {
	gzip, star := -1.0, -1.0 // the weights given; -1: not named
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(coding)) {
			case "gzip":
				gzip = weight(params)
			case "*":
				star = weight(params)
			}
		}
	}
	if gzip >= 0 {
		return gzip > 0
	}
	return star > 0 // "*" stands for any coding not named
}

// weight returns the q parameter of an Accept-Encoding entry: 1 when it is
// absent, 0 when it does not parse.
func weight(params string) float64 {
	for param := range strings.SplitSeq(params, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(param), "=")
		if strings.EqualFold(strings.TrimSpace(name), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return 0
			}
			return q
		}
	}
	return 1
}

var gzipWriters = sync.Pool{New: func() any {
	// Answers are mostly hex, which every level compresses to about
	// half; the fastest level gets there at a fraction of the cost.
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

func gzipBytes(dst, data []byte) []byte {
	buf := bytes.NewBuffer(dst)
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(buf)
	zw.Write(data) // writes to a bytes.Buffer cannot fail
	zw.Close()
	gzipWriters.Put(zw)
	return buf.Bytes()
}

// cors sets the CORS headers for an allowed origin and answers preflight
// requests; it reports whether the request has been answered.
func (h *Handler) cors(w http.ResponseWriter, r *http.Request) bool {
	if len(h.cfg.corsOrigins) == 0 {
		return false
	}
	w.Header().Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	switch {
	case slices.Contains(h.cfg.corsOrigins, "*"):
		w.Header().Set("Access-Control-Allow-Origin", "*")
	case slices.Contains(h.cfg.corsOrigins, origin):
		w.Header().Set("Access-Control-Allow-Origin", origin)
	default:
		return false
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	w.Header().Set("Access-Control-Allow-Methods", "POST")
	w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
	w.Header().Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

var errBodyTooLarge = errors.New("request body too large")

// maxPresize bounds what a declared Content-Length reserves before the body
// arrives: enough for any ordinary request, little for a client that stalls.
const maxPresize = 64 << 10

// readBody reads r into buf, failing once more than limit bytes arrive.
// The declared length sizes the buffer only up to maxPresize: the client
// says it, so the buffer grows with what actually arrives.
func readBody(r io.Reader, buf []byte, length, limit int64) ([]byte, error) {
	if length > 0 {
		buf = slices.Grow(buf, int(min(length, maxPresize))+1)
	}
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(cap(buf), 4096))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if limit > 0 && int64(len(buf)) > limit {
			return buf, errBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// Buffers are reused across requests: an answer is built in one buffer and
// written with one call. Very large ones are let go rather than pooled.
const maxPooledBuffer = 8 << 20

var buffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 16<<10)
	return &b
}}

func getBuffer() *[]byte { return buffers.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		buffers.Put(b)
	}
}

func (h *Handler) log(level slog.Level, msg string, args ...any) {
	if h.cfg.logger != nil {
		h.cfg.logger.Log(context.Background(), level, msg, args...)
	}
}

// ---- JSON-RPC --------------------------------------------------------------

// Error codes; the messages that go with them are go-ethereum's.
const (
	codeParseError       = -32700
	codeInvalidRequest   = -32600
	codeMethodNotFound   = -32601
	codeInvalidParams    = -32602
	codeInternalError    = -32603 // a recovered panic
	codeServerError      = -32000 // a backend failure
	codeTimeout          = -32002
	codeResponseTooLarge = -32003
)

// maxMethodName bounds the method name echoed in an error, as go-ethereum's.
const maxMethodName = 2048

// rpcError is an error answered with its own code and message.
type rpcError struct {
	code    int
	message string
}

// Error returns the message.
func (e *rpcError) Error() string { return e.message }

// backendError is a failure of the backend. Its details go to the log, not
// to the client.
type backendError struct{ err error }

// Error returns the backend's error, for logs.
func (e *backendError) Error() string { return "backend: " + e.err.Error() }

// Unwrap returns the backend's error.
func (e *backendError) Unwrap() error { return e.err }

func invalidArgument(i int, err error) error {
	return &rpcError{codeInvalidParams, fmt.Sprintf("invalid argument %d: %v", i, err)}
}

// method answers one JSON-RPC method: it reads params and appends the
// result to dst.
type method func(s *Service, ctx context.Context, params, dst []byte) ([]byte, error)

// unsubscribe answers *_unsubscribe(id) as go-ethereum does over HTTP,
// where no subscription can exist.
func unsubscribe(_ *Service, _ context.Context, params, dst []byte) ([]byte, error) {
	var id subscriptionID
	if err := readParams(params, id.UnmarshalJSON); err != nil {
		return dst, err
	}
	return dst, &rpcError{codeServerError, "subscription not found"}
}

// subscriptionID is the argument of *_unsubscribe: a string, named in
// errors as go-ethereum names it.
type subscriptionID struct{}

func (subscriptionID) UnmarshalJSON(raw []byte) error {
	if raw[0] == '"' {
		return nil
	}
	return errors.New("json: cannot unmarshal " + jsonKind(raw) + " into Go value of type rpc.ID")
}

var methods = map[string]method{
	"eth_getBlockByNumber":              (*Service).serveBlockByNumber,
	"eth_getUncleByBlockHashAndIndex":   (*Service).serveUncle,
	"eth_getBlockByHash":                (*Service).serveBlockByHash,
	"eth_getUncleByBlockNumberAndIndex": (*Service).serveUncleByNumber,
	"eth_getUncleCountByBlockHash":      (*Service).serveUncleCountByHash,
	"eth_getUncleCountByBlockNumber":    (*Service).serveUncleCountByNumber,
	"eth_blockNumber":                   (*Service).serveBlockNumber,
	"eth_chainId":                       (*Service).serveChainID,
}

// request is one JSON-RPC message object, as raw JSON values sliced from
// the body.
type request struct {
	version, method, id, params []byte
	result, errorMember         []byte // present only in a response
}

func (q *request) validVersion() bool {
	return string(stringText(q.version)) == "2.0"
}

// validID reports whether the id can be echoed: any JSON value but an
// object or an array, as go-ethereum accepts.
func (q *request) validID() bool {
	return q.id != nil && q.id[0] != '{' && q.id[0] != '['
}

// serveJSONRPC answers a request body, single or batch, into out. Like
// go-ethereum it reads the first JSON value of the body and ignores what
// follows. The answer is empty when there is nothing to answer
// (notifications, responses).
func (h *Handler) serveJSONRPC(ctx context.Context, body, out []byte) []byte {
	start := skipSpace(body, 0)
	if start == len(body) {
		return appendError(out, nil, codeParseError, "parse error")
	}
	// valueEnd only scans, so the span it finds is checked before use.
	end := valueEnd(body, start)
	if !json.Valid(body[start:end]) {
		return appendError(out, nil, codeParseError, "parse error")
	}
	if body[start] != '[' {
		return h.answer(ctx, body[start:end], out)
	}
	return h.batch(ctx, body[start:end], out)
}

// batch answers a batch: the answers in the order of the calls, without
// those of notifications and responses.
func (h *Handler) batch(ctx context.Context, batch, out []byte) []byte {
	// Spans of the elements, no more of them than the limit allows: a
	// batch too large is refused before anything is kept of it.
	limit := h.cfg.batchLimit
	var elements [][2]int
	count := 0
	for i := skipSpace(batch, 1); batch[i] != ']'; count++ {
		end := valueEnd(batch, i)
		if limit <= 0 || count < limit {
			elements = append(elements, [2]int{i, end})
		}
		i = nextMember(batch, end)
	}
	switch {
	case count == 0:
		return appendError(out, nil, codeInvalidRequest, "empty batch")
	case limit > 0 && count > limit:
		return h.refuseBatch(batch, out)
	}

	mark := len(out)
	out = append(out, '[')
	answered, size := 0, 0
	for _, e := range elements {
		element := batch[e[0]:e[1]]
		before := len(out)
		if answered > 0 {
			out = append(out, ',')
		}
		start := len(out)
		switch {
		case ctx.Err() != nil:
			// A batch ends with its deadline: the calls left are
			// answered, not run.
			code, message := h.errorCode(ctx.Err(), nil)
			out = h.refuseCall(element, out, code, message)
		case h.cfg.responseLimit > 0 && size > h.cfg.responseLimit:
			out = h.refuseCall(element, out, codeResponseTooLarge, "response too large")
		default:
			out = h.answer(ctx, element, out)
			size += payloadSize(out[start:])
		}
		if len(out) == start {
			out = out[:before] // nothing to answer: no comma either
			continue
		}
		answered++
	}
	if answered == 0 {
		return out[:mark]
	}
	return append(out, ']')
}

// refuseBatch answers a batch with more calls than the limit: the protocol
// cannot fail a batch as a whole, so, like go-ethereum, with one error
// bearing the first call's id.
func (h *Handler) refuseBatch(batch, out []byte) []byte {
	var id []byte
	for i := skipSpace(batch, 1); batch[i] != ']'; {
		end := valueEnd(batch, i)
		if q, _, kind := classify(batch[i:end]); kind == call {
			id = q.id
			break
		}
		i = nextMember(batch, end)
	}
	out = append(out, '[')
	return append(appendError(out, id, codeInvalidRequest, "batch too large"), ']')
}

// payloadSize is what go-ethereum counts of an answer against the response
// limit: the bytes of its result or error member.
func payloadSize(answer []byte) int {
	if len(answer) == 0 {
		return 0
	}
	afterID := valueEnd(answer, len(`{"jsonrpc":"2.0","id":`))
	member := len(`,"error":`)
	if bytes.HasPrefix(answer[afterID:], []byte(`,"result":`)) {
		member = len(`,"result":`)
	}
	return len(answer) - afterID - member - len("}")
}

// A message object is a call, a notification (no id: never answered), a
// response (what a server would send: go-ethereum drops it unanswered) or
// invalid, by go-ethereum's rules.
const (
	invalid = iota
	call
	notification
	response
)

// classify also returns the method name; it is a slice of the body unless
// the name has escapes, so that looking it up allocates nothing.
func classify(raw []byte) (request, []byte, int) {
	q, ok := parseRequest(raw)
	name := stringText(q.method)
	switch {
	case ok && q.validVersion() && q.validID() && len(q.method) == 0 && q.params == nil && (q.result != nil || q.errorMember != nil):
		return q, name, response
	case !ok || !q.validVersion() || len(name) == 0:
		return q, name, invalid
	case q.id == nil:
		return q, name, notification
	case !q.validID():
		q.id = nil // answered with a null id
		return q, name, invalid
	}
	return q, name, call
}

// refuseCall answers a message with an error without running it, and a
// notification or response with nothing. Invalid messages get the error
// too, as go-ethereum gives them.
func (h *Handler) refuseCall(raw, out []byte, code int, message string) []byte {
	q, _, kind := classify(raw)
	if kind == notification || kind == response {
		return out
	}
	return appendError(out, echoedID(q), code, message)
}

// echoedID is the id to answer a message with: its own if valid, else null.
func echoedID(q request) []byte {
	if q.validID() {
		return q.id
	}
	return nil
}

// answer appends the answer to one request object (nothing for a
// notification).
func (h *Handler) answer(ctx context.Context, raw, out []byte) []byte {
	q, name, kind := classify(raw)
	switch {
	case kind == invalid:
		return appendError(out, echoedID(q), codeInvalidRequest, "invalid request")
	case kind == notification || kind == response:
		return out // nothing is answered, so nothing is run
	case len(name) > maxMethodName:
		return appendError(out, q.id, codeInvalidRequest, fmt.Sprintf("method name too long: %d > %d", len(name), maxMethodName))
	case bytes.HasSuffix(name, []byte("_subscribe")):
		// Subscriptions need a connection that stays open; over HTTP
		// go-ethereum answers so.
		return appendError(out, q.id, codeMethodNotFound, "notifications not supported")
	case bytes.HasSuffix(name, []byte("_unsubscribe")):
		return h.call(ctx, unsubscribe, &q, out)
	}
	m, found := methods[string(name)]
	if !found {
		// As encoding/json does for go-ethereum, invalid UTF-8 in the name
		// is echoed as U+FFFD.
		return appendError(out, q.id, codeMethodNotFound, "the method "+strings.ToValidUTF8(string(name), "\uFFFD")+" does not exist/is not available")
	}
	return h.call(ctx, m, &q, out)
}

// call runs a method and appends its answer. A panic in the method (in a
// Backend, say) is recovered into an internal error, with whatever the
// method had written discarded.
func (h *Handler) call(ctx context.Context, m method, q *request, out []byte) (answer []byte) {
	mark := len(out)
	defer func() {
		if p := recover(); p != nil {
			h.log(slog.LevelError, "blockrpc: method handler crashed", "method", decodeString(q.method), "panic", p, "stack", string(debug.Stack()))
			answer = appendError(out[:mark], q.id, codeInternalError, "method handler crashed")
		}
	}()
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = appendID(out, q.id)
	out = append(out, `,"result":`...)
	out, err := m(h.service, ctx, q.params, out)
	if err != nil {
		code, message := h.errorCode(err, q)
		return appendError(out[:mark], q.id, code, message)
	}
	return append(out, '}')
}

// errorCode turns a method's error into the code and message the client
// sees.
func (h *Handler) errorCode(err error, q *request) (int, string) {
	var re *rpcError
	var be *backendError
	switch {
	case errors.As(err, &re):
		return re.code, re.message
	case errors.Is(err, context.DeadlineExceeded):
		return codeTimeout, "request timed out"
	case errors.Is(err, context.Canceled):
		return codeServerError, "request canceled"
	case errors.As(err, &be):
		h.log(slog.LevelError, "blockrpc: backend failure", "method", decodeString(q.method), "err", be.err)
		return codeServerError, "backend failure"
	default:
		return codeServerError, err.Error()
	}
}

// appendID echoes an id as go-ethereum's encoder writes it: as given, but
// with <, >, & and the line and paragraph separators escaped.
func appendID(dst, id []byte) []byte {
	if bytes.ContainsAny(id, "<>&\u2028\u2029") {
		var escaped bytes.Buffer
		json.HTMLEscape(&escaped, id)
		return append(dst, escaped.Bytes()...)
	}
	return append(dst, id...)
}

// appendError appends an error answer; a nil id is null.
func appendError(dst, id []byte, code int, message string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if id == nil {
		id = []byte("null")
	}
	dst = appendID(dst, id)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	msg, _ := json.Marshal(message) // a string always marshals
	dst = append(dst, msg...)
	return append(dst, '}', '}')
}

// ---- Reading JSON ----------------------------------------------------------
//
// Requests are read by slicing the body, which json.Valid has already
// checked, instead of decoding it into values: the hot path allocates
// nothing. Keys match as encoding/json matches them (exact or
// case-insensitive, the last occurrence winning), which is how go-ethereum
// reads its requests.

// parseRequest slices the members of a message object. It reports false
// for a JSON value that is not an object.
func parseRequest(raw []byte) (request, bool) {
	var q request
	if len(raw) == 0 || raw[0] != '{' {
		return q, false
	}
	for i := skipSpace(raw, 1); raw[i] != '}'; {
		keyEnd := valueEnd(raw, i)
		key := raw[i+1 : keyEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = stringText(raw[i:keyEnd]) // rare: an escaped key
		}
		i = skipSpace(raw, skipSpace(raw, keyEnd)+1) // past the colon
		end := valueEnd(raw, i)
		value := raw[i:end]
		switch {
		case equalFold(key, "jsonrpc"):
			q.version = value
		case equalFold(key, "method"):
			q.method = value
		case equalFold(key, "id"):
			q.id = value
		case equalFold(key, "params"):
			q.params = value
		case equalFold(key, "result"):
			q.result = value
		case equalFold(key, "error"):
			q.errorMember = value
		}
		i = nextMember(raw, end)
	}
	return q, true
}

// equalFold matches a member name as encoding/json does: exactly, or with
// Unicode case folding (so "ID" and "jſonrpc", with a long s, match too).
func equalFold(b []byte, name string) bool {
	return string(b) == name || strings.EqualFold(string(b), name)
}

// decodeString returns the text of a JSON string value, or "" for any other
// value.
func decodeString(raw []byte) string {
	return string(stringText(raw))
}

// stringText returns the text of a JSON string value, or nil for any other
// value: a slice of raw when the string has no escapes, decoded otherwise.
func stringText(raw []byte) []byte {
	if len(raw) < 2 || raw[0] != '"' {
		return nil
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	var s string
	json.Unmarshal(raw, &s) // valid JSON: the body was checked
	return []byte(s)
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just past the JSON value that starts at
// data[i]. Nesting is counted, not recursed into, so no depth of input can
// exhaust the stack.
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				j = stringEnd(data, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(data)
	default: // a number or a literal
		j := i
		for j < len(data) && !isDelimiter(data[j]) {
			j++
		}
		return j
	}
}

// nextMember returns where the element or member after the one ending at
// end begins: past the separating comma, or at the closing bracket.
func nextMember(data []byte, end int) int {
	i := skipSpace(data, end)
	if data[i] == ',' {
		i = skipSpace(data, i+1)
	}
	return i
}

func isDelimiter(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}

// readParams decodes the arguments of a params array in order, one decoder
// each: all of them required, no more allowed.
func readParams(params []byte, decoders ...func([]byte) error) error {
	args, err := readArgs(params)
	if err != nil {
		return err
	}
	for _, decode := range decoders {
		if err := args.next(decode); err != nil {
			return err
		}
	}
	return args.end()
}

// args reads positional parameters one by one, reporting errors as
// go-ethereum does and in the same order: an argument is checked before any
// later one is looked at.
type args struct {
	raw []byte // the params array, or nil
	pos int    // next position in raw
	n   int    // arguments read so far
}

// readArgs starts reading a params value: an array, or absent or null for
// no arguments.
func readArgs(params []byte) (args, error) {
	if len(params) == 0 || string(params) == "null" {
		return args{}, nil
	}
	if params[0] != '[' {
		return args{}, &rpcError{codeInvalidParams, "non-array args"}
	}
	return args{raw: params, pos: skipSpace(params, 1)}, nil
}

// next decodes the next argument with decode.
func (a *args) next(decode func([]byte) error) error {
	if a.raw == nil || a.raw[a.pos] == ']' {
		return &rpcError{codeInvalidParams, fmt.Sprintf("missing value for required argument %d", a.n)}
	}
	end := valueEnd(a.raw, a.pos)
	if err := decode(a.raw[a.pos:end]); err != nil {
		return invalidArgument(a.n, err)
	}
	a.n++
	a.pos = nextMember(a.raw, end)
	return nil
}

// end checks that no arguments are left.
func (a *args) end() error {
	if a.raw != nil && a.raw[a.pos] != ']' {
		return &rpcError{codeInvalidParams, fmt.Sprintf("too many arguments, want at most %d", a.n)}
	}
	return nil
}

// jsonBool is a boolean argument: JSON true or false, and nothing else.
type jsonBool bool

// UnmarshalJSON accepts only the literals true and false. Unlike
// encoding/json, it refuses null: the specification asks for a boolean.
func (b *jsonBool) UnmarshalJSON(raw []byte) error {
	switch string(raw) {
	case "true":
		*b = true
		return nil
	case "false":
		*b = false
		return nil
	}
	return errors.New("json: cannot unmarshal " + jsonKind(raw) + " into Go value of type bool")
}

// hashArg is a hash argument. Its errors name go-ethereum's type, as
// go-ethereum's own messages do ("hex string has length 62, want 64 for
// common.Hash"): clients and their users know those words.
type hashArg backend.Hash

// UnmarshalJSON reads a JSON string of exactly 32 bytes of hex.
func (h *hashArg) UnmarshalJSON(raw []byte) error {
	if len(raw) < 2 || raw[0] != '"' {
		return errors.New("json: cannot unmarshal non-string into Go value of type common.Hash")
	}
	err := hexutil.DecodeFixed(raw[1:len(raw)-1], h[:])
	var short *hexutil.LengthError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &short):
		return errors.New(short.Error() + " for common.Hash")
	}
	return errors.New("json: cannot unmarshal " + err.Error() + " into Go value of type common.Hash")
}

// jsonKind names the kind of a JSON value as encoding/json's errors do.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 'n':
		return "null"
	case 't', 'f':
		return "bool"
	}
	return "number"
}
