package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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
