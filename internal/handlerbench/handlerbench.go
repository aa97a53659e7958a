// Package handlerbench serves one request to an http.Handler again and
// again, as the handler's benchmarks and the stores' scale runs do: its body
// is read again each time and its answer counted, not kept, so that what is
// measured is the handler, not net/http or a recorder's copies.
package handlerbench

import (
	"io"
	"net/http"
	"net/http/httptest"
)

// A Caller posts JSON bodies to one path, reusing its request and writer.
type Caller struct {
	body body
	req  *http.Request
	w    counter
}

// New returns a Caller of path.
func New(path string) *Caller {
	c := &Caller{w: counter{header: make(http.Header)}}
	c.req = httptest.NewRequest(http.MethodPost, path, &c.body)
	c.req.Header.Set("Content-Type", "application/json")
	return c
}

// Call serves body to h and returns the answer's status and length.
func (c *Caller) Call(h http.Handler, body []byte) (status, n int) {
	c.body.data, c.body.off = body, 0
	h.ServeHTTP(&c.w, c.req)
	return c.w.status, c.w.n
}

// body is a request body that can be read again after resetting off.
type body struct {
	data []byte
	off  int
}

func (r *body) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}

func (r *body) Close() error { return nil }

// counter is a ResponseWriter that counts what it is given.
type counter struct {
	header http.Header
	status int
	n      int
}

func (w *counter) Header() http.Header { return w.header }

func (w *counter) WriteHeader(status int) {
	w.status = status
	w.n = 0
}

func (w *counter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}
