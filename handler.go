package blockrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Handler serves the Service as JSON-RPC 2.0 over HTTP. It answers POST
// requests with a JSON body at any path ending in /v3/<API_KEY>, so it can
// be mounted under any prefix, with or without http.StripPrefix. Each
// request's context reaches the backend: timeouts are the caller's, set on
// the http.Server or by middleware.
type Handler struct {
	methods map[string]method
	cfg     config
}

// NewHandler returns a Handler serving s.
func NewHandler(s *Service, opts ...Option) *Handler {
	h := &Handler{methods: methodTable(s), cfg: defaultConfig()}
	for _, opt := range opts {
		opt(&h.cfg)
	}
	if h.cfg.keys == nil {
		h.log(context.Background(), slog.LevelWarn, "blockrpc: no key validator: every request will be refused with 401")
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
	*body, err = h.readBody(w, r, (*body)[:0])
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.refuse(w, http.StatusRequestEntityTooLarge, codeInvalidRequest, fmt.Sprintf("request body too large (>%d)", h.cfg.bodyLimit))
		return
	case err != nil:
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
		h.log(ctx, slog.LevelError, "blockrpc: key validation failed", "err", err)
		return http.StatusServiceUnavailable, codeServerError, "key validation unavailable"
	case !ok:
		h.log(ctx, slog.LevelDebug, "blockrpc: refused an invalid API key")
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

// maxPresize bounds what a declared Content-Length reserves before the body
// arrives: enough for any ordinary request, little for a client that stalls.
const maxPresize = 64 << 10

// readBody reads the request body into buf. The limit is http.MaxBytesReader's
// (which also closes the connection of a client that sends too much); the
// declared length sizes the buffer only up to maxPresize, since the client
// says it, so the buffer grows with what actually arrives.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, buf []byte) ([]byte, error) {
	body := r.Body
	if h.cfg.bodyLimit > 0 {
		body = http.MaxBytesReader(w, body, h.cfg.bodyLimit)
	}
	if r.ContentLength > 0 {
		buf = slices.Grow(buf, int(min(r.ContentLength, maxPresize))+1)
	}
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(cap(buf), 4096))
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		}
	}
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
		if len(out) >= gzipThreshold && acceptsGzip(r) {
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

func (h *Handler) log(ctx context.Context, level slog.Level, msg string, args ...any) {
	if h.cfg.logger != nil {
		h.cfg.logger.Log(ctx, level, msg, args...)
	}
}
