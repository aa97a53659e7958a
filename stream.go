package blockrpc

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"sync"
)

// chunkSize is how much of a batch's answers is held before it is written.
// A request holds at most one chunk and the answer that overflowed it, so
// that a client that does not read pins little memory whatever it asked
// for: 64 KiB keeps the number of writes small next to the rendering.
const chunkSize = 64 << 10

// answerWriter writes the answers of one request. A single answer, and a
// batch whose answers fit in one chunk, are sent whole with their
// Content-Length. A longer batch is written as it is produced, chunk by
// chunk (compressed as one gzip stream when the client takes gzip): the
// memory it holds is bounded, and a client that stops reading stops the
// work, since nothing more is rendered once a write has failed.
type answerWriter struct {
	h            *Handler
	w            http.ResponseWriter
	r            *http.Request
	buf          *[]byte // answers not yet written; nil until the first
	status       int     // the HTTP status sent, once sent
	answerStatus int     // the status to send the answer with when not 200: a refusal
	written      int64   // body bytes written
	errors       int     // error answers, for the observer
	err          error   // the first failed write: the client is gone
	// leftBefore is whether the client had gone away (its request
	// cancelled) as the last write began: a client that reads its whole
	// answer and then closes cancels the request only after that write.
	leftBefore bool
	streaming  bool
	zip        *gzip.Writer // when streaming compressed
	zipped     bytes.Buffer // the compressed bytes of one chunk
	slot       bool         // holds one of the handler's batch slots
	share      *keyShare    // the key's share of the backlog; nil without one
	bodyHeld   int64        // the request body's bytes counted in it
	shared     sharedResult // a cached result the single answer refers to
	// bare is set for an error answered to the request as a whole (a
	// parse error, an empty or too large batch, a batch past the response
	// limit, a call past the request's deadline), which go-ethereum writes
	// without the newline that ends its other answers.
	bare bool
}

// answerWriters are pooled: one serves every request, and its gzip stream
// points into it, so it would be allocated each time.
var answerWriters = sync.Pool{New: func() any { return new(answerWriter) }}

func newAnswerWriter(h *Handler, w http.ResponseWriter, r *http.Request) *answerWriter {
	a := answerWriters.Get().(*answerWriter)
	a.h, a.w, a.r = h, w, r
	return a
}

// out returns the buffer that answers are appended to.
func (a *answerWriter) out() *[]byte {
	if a.buf == nil {
		a.buf = getBuffer()
		*a.buf = (*a.buf)[:0]
	}
	return a.buf
}

// release returns the buffers, the batch slot, and the writer itself.
func (a *answerWriter) release() {
	a.releaseSlot()
	if a.share != nil {
		a.h.backlog.leave(a.share, a.bodyHeld)
	}
	if a.buf != nil {
		putBuffer(a.buf)
	}
	if a.zip != nil {
		gzipWriters.Put(a.zip)
	}
	zipped := a.zipped
	zipped.Reset()
	if zipped.Cap() > 4*chunkSize {
		zipped = bytes.Buffer{}
	}
	*a = answerWriter{zipped: zipped}
	answerWriters.Put(a)
}

// acquireSlot waits for one of the batch slots, which bound how many
// batches are rendered at once, so that big batches leave CPU to everyone
// else. A slot is held while rendering and let go while writing.
func (a *answerWriter) acquireSlot(ctx context.Context) error {
	if a.slot || a.h.slots == nil {
		return nil
	}
	select {
	case a.h.slots <- struct{}{}:
		a.slot = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *answerWriter) releaseSlot() {
	if a.slot {
		<-a.h.slots
		a.slot = false
	}
}

// noteAnswer counts answer, one call's, when it is an error. A call ended
// by the request's deadline makes the whole answer bare: go-ethereum writes
// its timeout's answer, single or batch, as it writes an error of the
// request as a whole.
func (a *answerWriter) noteAnswer(answer []byte) {
	if len(answer) == 0 {
		return
	}
	switch answerCode(answer) {
	case 0:
	case codeTimeout:
		a.errors++
		a.bare = true
	default:
		a.errors++
	}
}

// refuse answers a request that does not reach JSON-RPC with an HTTP status
// and a JSON-RPC error body, so that JSON clients can read why.
func (a *answerWriter) refuse(status, code int, msg string) {
	body := appendError(nil, nil, code, msg)
	body = append(body, '\n')
	header := a.w.Header()
	header["Content-Type"] = jsonContentType
	header["Content-Length"] = []string{strconv.Itoa(len(body))}
	a.send(status, body)
}

// flushFull writes the answers held once they fill a chunk.
func (a *answerWriter) flushFull() {
	if a.buf != nil && len(*a.buf) >= chunkSize {
		a.flush()
	}
}

// flush writes the answers held, starting the stream if need be.
func (a *answerWriter) flush() {
	if !a.streaming {
		a.startStream()
	}
	data := *a.buf
	if a.zip != nil {
		a.zipped.Reset()
		a.zip.Write(data) // writes to a bytes.Buffer cannot fail
		data = a.zipped.Bytes()
	}
	a.writeBody(data)
	*a.buf = (*a.buf)[:0]
	if cap(*a.buf) > 4*chunkSize {
		// An answer much larger than a chunk grew the buffer: let it go
		// rather than hold it while the client reads.
		*a.buf = make([]byte, 0, chunkSize)
	}
	runtime.Gosched() // between chunks, let light requests run
}

func (a *answerWriter) startStream() {
	a.streaming = true
	header := a.w.Header()
	header["Content-Type"] = jsonContentType
	if a.h.cfg.gzip {
		header.Add("Vary", "Accept-Encoding")
		if acceptsGzip(a.r) {
			header["Content-Encoding"] = gzipEncoding
			a.zip = gzipWriters.Get().(*gzip.Writer)
			a.zip.Reset(&a.zipped)
		}
	}
	a.status = http.StatusOK
	a.w.WriteHeader(http.StatusOK)
}

// finish writes what is left of the answer: the whole of it, with its
// length, unless it is being streamed. An empty answer (notifications only)
// is an empty 200 response.
//
// A stream, and any answer when an observer wants to know whether it was
// cut, is flushed to the connection here: the last bytes would otherwise sit
// in the server's buffer, and a client gone away would go unnoticed.
func (a *answerWriter) finish(observed bool) {
	var out []byte
	if a.buf != nil {
		out = *a.buf
	}
	if !a.streaming {
		a.writeWhole(out)
	} else if a.err == nil {
		if !a.bare {
			*a.buf = append(out, '\n')
		}
		a.flush()
		if a.zip != nil {
			a.zipped.Reset()
			a.zip.Close()
			a.writeBody(a.zipped.Bytes())
		}
	}
	if (a.streaming || observed) && a.err == nil {
		a.releaseSlot()
		// A writer that cannot flush (one of a middleware that does not
		// pass Flush on) has not failed: what was written is on its way.
		if err := http.NewResponseController(a.w).Flush(); !errors.Is(err, http.ErrNotSupported) {
			a.err = err
		}
	}
}

// writeWhole sends a complete answer with its Content-Length.
func (a *answerWriter) writeWhole(out []byte) {
	header := a.w.Header()
	header["Content-Type"] = jsonContentType
	if len(out) == 0 {
		a.noteLeft()
		a.status = http.StatusOK
		a.w.WriteHeader(http.StatusOK)
		return
	}
	if !a.bare {
		out = append(out, '\n')
		*a.buf = out // the newline may have grown it
	}
	shared := a.shared.json
	if a.h.cfg.gzip {
		header.Add("Vary", "Accept-Encoding")
		if len(out)+len(shared) >= gzipThreshold && acceptsGzip(a.r) {
			zipped := getBuffer()
			defer putBuffer(zipped)
			*zipped = gzipBytes((*zipped)[:0], a.parts(out)...)
			header["Content-Encoding"] = gzipEncoding
			header["Content-Length"] = []string{strconv.Itoa(len(*zipped))}
			a.send(cmp.Or(a.answerStatus, http.StatusOK), *zipped)
			return
		}
	}
	header["Content-Length"] = []string{strconv.Itoa(len(out) + len(shared))}
	if shared == nil {
		a.send(cmp.Or(a.answerStatus, http.StatusOK), out)
		return
	}
	a.status = http.StatusOK
	a.w.WriteHeader(http.StatusOK)
	for _, part := range a.sharedParts(out) {
		a.writeBody(part)
	}
}

// parts returns the answer as the pieces it is made of: out alone, or out
// around the cached result it refers to.
func (a *answerWriter) parts(out []byte) [][]byte {
	if a.shared.json == nil {
		return [][]byte{out}
	}
	return [][]byte{out[:a.shared.at], a.shared.json, out[a.shared.at:]}
}

// sharedParts splits an answer around a cached result into writes. The
// cache keeps each result followed in memory by the end of a single answer,
// so that such an answer goes out as two writes, its start and then the
// cached bytes through to its end: net/http sends a body whose last write
// is large in as few system calls as a body written whole, where a write
// of the end alone would cost one more, with its own TCP segment (a third
// of the time of a cached hashes-only answer went to it).
func (a *answerWriter) sharedParts(out []byte) [][]byte {
	json, at := a.shared.json, a.shared.at
	if end := out[at:]; cap(json)-len(json) >= len(end) && string(json[len(json):len(json)+len(end)]) == string(end) {
		return [][]byte{out[:at], json[:len(json)+len(end)]}
	}
	return [][]byte{out[:at], json, out[at:]}
}

func (a *answerWriter) send(status int, body []byte) {
	a.status = status
	a.w.WriteHeader(status)
	a.writeBody(body)
}

// noteLeft notes, as a write begins, whether the client has gone away.
func (a *answerWriter) noteLeft() {
	a.leftBefore = errors.Is(a.r.Context().Err(), context.Canceled)
}

// writeBody writes to the client, counting the bytes waiting to be written
// against the handler's total. The batch slot is let go first, whether the
// answer is streamed or sent whole: a client that reads slowly, or not at
// all, must not hold up other batches.
func (a *answerWriter) writeBody(data []byte) {
	a.releaseSlot()
	if a.err != nil || len(data) == 0 {
		return
	}
	a.noteLeft()
	if a.share != nil {
		a.h.backlog.add(a.share, int64(len(data)))
	}
	n, err := a.w.Write(data)
	if a.share != nil {
		a.h.backlog.add(a.share, -int64(len(data)))
	}
	a.written += int64(n)
	a.err = err
}
