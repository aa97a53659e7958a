package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBufferedLog checks that a log to a file is buffered, that an error is
// written at once with what came before it, and that closing writes the
// rest.
func TestBufferedLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, closeLog := bufferLog(f)
	log := slog.New(flushOnError{slog.NewTextHandler(out, nil), out})
	written := func() string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

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
