package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBufferedLog checks that a log to a file is buffered, that an error is
// written at once with what came before it, and that closing writes the
// rest.
func TestBufferedLog(t *testing.T) {
	out, closeLog, written := bufferedFile(t)
	log := slog.New(flushOnError{slog.NewTextHandler(out, nil), out})

	log.Info("request one")
	if got := written(); got != "" {
		t.Fatalf("an info line was written at once, not buffered: %q", got)
	}
	log.Error("backend failure")
	if got := written(); !strings.Contains(got, "request one") || !strings.Contains(got, "backend failure") {
		t.Fatalf("after an error the file holds %q, want both lines", got)
	}
	log.Info("request two")
	closeLog()
	if got := written(); !strings.Contains(got, "request two") {
		t.Fatalf("after closing the file holds %q, want the last line", got)
	}
}

// bufferedFile returns a log buffered by bufferLog to a new file, what
// closes it, and what reads what the file holds.
func bufferedFile(t *testing.T) (out io.Writer, closeLog func(), written func() string) {
	path := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	out, closeLog = bufferLog(f)
	return out, closeLog, func() string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
}

// TestOpenLogsFlushed checks what a second signal does before it ends the
// process: the lines buffered so far are written, and a log whose reader
// has stopped does not hold it.
func TestOpenLogsFlushed(t *testing.T) {
	out, closeLog, written := bufferedFile(t)
	defer closeLog()
	slog.New(slog.NewTextHandler(out, nil)).Info("the last request")
	flushOpenLogs(10 * time.Second)
	if got := written(); !strings.Contains(got, "the last request") {
		t.Fatalf("after flushOpenLogs the file holds %q, want the line", got)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	stuck, closeStuck := bufferLog(w)
	// The pipe full, a flush of it blocks until the pipe is read. (Fd
	// makes the pipe blocking at each call.)
	fd := int(w.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := syscall.Write(fd, make([]byte, 4096)); err != nil {
			break
		}
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		t.Fatal(err)
	}
	slog.New(slog.NewTextHandler(stuck, nil)).Info("never read")
	flushed := make(chan struct{})
	go func() { flushOpenLogs(100 * time.Millisecond); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(10 * time.Second):
		t.Fatal("flushOpenLogs waited 10 s for a log no one reads, want 100 ms")
	}
	go io.Copy(io.Discard, r) // and then the stuck flush ends
	closeStuck()
}

// TestSecondSignalStuckStderr sends a second signal to a process whose
// log goes to a stderr no one reads, full: the process still ends, at
// once rather than when someone reads.
func TestSecondSignalStuckStderr(t *testing.T) {
	if os.Getenv("BLOCKRPC_TEST_STUCK_STDERR") == "1" {
		out, _ := bufferLog(os.Stderr)
		fd := int(os.Stderr.Fd())
		if err := syscall.SetNonblock(fd, true); err != nil {
			os.Exit(4)
		}
		for {
			if _, err := syscall.Write(fd, make([]byte, 4096)); err != nil {
				break
			}
		}
		syscall.SetNonblock(fd, false)
		slog.New(slog.NewTextHandler(out, nil)).Info("a line no one reads")
		exitOnSignal(func() {})
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(time.Minute)
		os.Exit(3)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondSignalStuckStderr$")
	cmd.Env = append(os.Environ(), "BLOCKRPC_TEST_STUCK_STDERR=1")
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("the process ended with %v, want exit status 1", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("30 s after the second signal the process, its stderr unread, has not ended")
	}
}

// fullDisk is a writer that fails while full is set, as a full disk does.
type fullDisk struct {
	full    bool
	written strings.Builder
}

func (d *fullDisk) Write(p []byte) (int, error) {
	if d.full {
		return 0, syscall.ENOSPC
	}
	return d.written.Write(p)
}

// TestBufferedLogAfterFullDisk fills the disk under the log for a while:
// the lines of that while are lost, and the log takes lines again once
// the disk does.
func TestBufferedLogAfterFullDisk(t *testing.T) {
	disk := &fullDisk{full: true}
	l := newLogWriter(disk)
	log := slog.New(slog.NewTextHandler(l, nil))
	log.Info("while the disk is full")
	if err := l.Flush(); err == nil {
		t.Fatal("a flush on a full disk: no error")
	}
	log.Info(strings.Repeat("a long line ", 10000)) // past the buffer: written through
	disk.full = false
	log.Info("once the disk takes writes")
	if err := l.Flush(); err != nil {
		t.Fatalf("a flush once the disk takes writes: %v", err)
	}
	if got := disk.written.String(); !strings.Contains(got, "once the disk takes writes") {
		t.Errorf("the log holds %q once the disk takes writes again, want the line written then", got)
	}
}

// shortDisk takes room bytes more and fails the rest of a write, as a disk
// that fills in the middle of one does.
type shortDisk struct {
	room    int
	written strings.Builder
}

func (d *shortDisk) Write(p []byte) (int, error) {
	if len(p) <= d.room {
		d.room -= len(p)
		return d.written.Write(p)
	}
	n := d.room
	d.written.Write(p[:n])
	d.room = 0
	return n, syscall.ENOSPC
}

// TestBufferedLogShortWrite fills the disk in the middle of a line, of a
// buffered flush and of a line past the buffer: the lines that did not
// fit are lost, and the part of one that did is left as it is, but the
// next line starts a line of its own. It used to be
// glued to the cut one, where a reader sees the first level, so that an
// error read as the INFO line before it.
func TestBufferedLogShortWrite(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines []string
	}{
		{"buffered", []string{"request one", "request two"}},
		{"past the buffer", []string{strings.Repeat("a long line ", 10000)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			disk := &shortDisk{room: 30}
			l := newLogWriter(disk)
			log := slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			}))
			for _, line := range c.lines {
				log.Info(line)
			}
			l.Flush()
			if disk.room != 0 {
				t.Fatalf("the disk was not filled: %d bytes of room left", disk.room)
			}
			disk.room = 1 << 20
			log.Error("backend failure")
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			got := disk.written.String()
			lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
			for _, line := range lines {
				if strings.Count(line, "level=") > 1 {
					t.Errorf("the log holds two lines in one, %q; whole log:\n%s", line, got)
				}
			}
			if last := lines[len(lines)-1]; last != `level=ERROR msg="backend failure"` {
				t.Errorf("the last line is %q, want the error", last)
			}
		})
	}
}
