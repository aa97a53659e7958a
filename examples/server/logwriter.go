package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"
)

// logWriter buffers the log written to a file and flushes it a few times
// a second: a line per request written on its own is a system call per
// request, which a profile under load put at a tenth of the server's CPU.
// Errors are flushed at once (see flushOnError), and everything when the
// process stops.
type logWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	// cut is set when a failed write left part of a line out: the next
	// write ends that line first, so that no line is glued to a fragment.
	cut  bool
	stop chan struct{}
	done chan struct{}
}

// logBufferSize is how much a logWriter holds before it writes.
const logBufferSize = 64 << 10

// logFlushEvery bounds how old a buffered log line can get.
const logFlushEvery = 200 * time.Millisecond

// bufferLog returns w buffered when it is a file (a terminal, a pipe to a
// log collector), and as it is otherwise; close flushes and stops.
func bufferLog(w io.Writer) (out io.Writer, close func()) {
	if _, ok := w.(*os.File); !ok {
		return w, func() {}
	}
	l := newLogWriter(w)
	go l.flushEvery(logFlushEvery)
	openLogs.Lock()
	openLogs.m[l] = struct{}{}
	openLogs.Unlock()
	return l, func() {
		openLogs.Lock()
		delete(openLogs.m, l)
		openLogs.Unlock()
		l.close()
	}
}

// openLogs are the logs bufferLog buffers, until they are closed: what a
// second signal flushes before it ends the process.
var openLogs = struct {
	sync.Mutex
	m map[*logWriter]struct{}
}{m: make(map[*logWriter]struct{})}

// flushOpenLogs flushes the open logs, waiting at most d: a log whose
// reader has stopped reading must not keep a process that is told to end
// at once from ending.
func flushOpenLogs(d time.Duration) {
	openLogs.Lock()
	logs := make([]*logWriter, 0, len(openLogs.m))
	for l := range openLogs.m {
		logs = append(logs, l)
	}
	openLogs.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, l := range logs {
			l.Flush()
		}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

func newLogWriter(w io.Writer) *logWriter {
	return &logWriter{w: w, buf: make([]byte, 0, logBufferSize), stop: make(chan struct{}), done: make(chan struct{})}
}

// Write buffers a log line. A failed write loses what was buffered, never
// a line's end: a line the disk took part of is ended before the next.
func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf)+len(p) > logBufferSize {
		l.flushLocked() // on failure what was buffered is let go; p waits for the next flush
	}
	if len(p) > logBufferSize {
		l.writeLocked(p) // past the buffer: written through
		return len(p), nil
	}
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// Flush writes out what is buffered.
func (l *logWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked()
}

// flushLocked writes out what is buffered and lets it go, written or not:
// keeping what a full disk refused would only block the lines after it.
func (l *logWriter) flushLocked() error {
	if len(l.buf) == 0 {
		return nil
	}
	err := l.writeLocked(l.buf)
	l.buf = l.buf[:0]
	return err
}

// writeLocked writes data, ending first a line that a failed write cut.
func (l *logWriter) writeLocked(data []byte) error {
	if l.cut {
		if _, err := l.w.Write([]byte{'\n'}); err != nil {
			return err
		}
		l.cut = false
	}
	n, err := l.w.Write(data)
	if err != nil && n > 0 && data[n-1] != '\n' {
		l.cut = true
	}
	return err
}

// flushOnError is a log handler that flushes its writer after an error,
// so that what explains a failure is not lost if the process dies.
type flushOnError struct {
	slog.Handler
	w io.Writer
}

func (h flushOnError) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if f, ok := h.w.(interface{ Flush() error }); ok && r.Level >= slog.LevelError {
		f.Flush()
	}
	return err
}

func (h flushOnError) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushOnError{h.Handler.WithAttrs(attrs), h.w}
}

func (h flushOnError) WithGroup(name string) slog.Handler {
	return flushOnError{h.Handler.WithGroup(name), h.w}
}

func (l *logWriter) flushEvery(d time.Duration) {
	defer close(l.done)
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
			l.Flush()
		}
	}
}

func (l *logWriter) close() {
	close(l.stop)
	<-l.done
	l.Flush()
}
