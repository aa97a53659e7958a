package pebblestore

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// diskState is what the store learns from Pebble of a disk that fails
// it, and how it tells the operator.
type diskState struct {
	log *slog.Logger

	// flushErr is why Pebble's last flush of a memory table failed, nil
	// once one has succeeded since.
	flushErr atomic.Pointer[error]
	// flushFailures and compactFailures count the flushes and the
	// compactions failed in a row.
	flushFailures   atomic.Int64
	compactFailures atomic.Int64
	// lastFailure is Pebble's last failed flush or compaction.
	lastFailure atomic.Pointer[failure]
	// closing ends the wait of backOff, once the store is closing.
	closing   chan struct{}
	closeOnce sync.Once
	// failed is closed once a flush fails, and made anew once one
	// succeeds: a write waiting in Pebble for room stops waiting then.
	failedMu sync.Mutex
	failed   chan struct{}

	// Pebble tries a failed flush (see backOff) or compaction again at
	// once, as often as it fails: its errors are logged once every
	// backgroundLogEvery, with the count of those left out.
	// Their messages only: slog formats an error with %+v, which gives
	// Pebble's errors their stack traces, tens of lines each.
	mu        sync.Mutex
	loggedAt  time.Time
	unlogged  int
	lastError error
	// damaged is each damaged file's line: Pebble meets the damage again
	// at each read of what it holds, and at each try of a compaction of
	// it, which never succeeds.
	damaged map[string]*damageLine
}

// damageLine is when the last line about a damaged file was logged, and
// how many times the damage was met since.
type damageLine struct {
	at    time.Time
	since int
}

const backgroundLogEvery = 10 * time.Second

// failure is a failed flush or compaction, and when it failed.
type failure struct {
	at  time.Time
	err error
}

func newDiskState(log *slog.Logger) *diskState {
	return &diskState{log: log, closing: make(chan struct{}), failed: make(chan struct{})}
}

// flushFailed returns a channel that is closed once a flush has failed
// and none has succeeded since.
func (d *diskState) flushFailed() <-chan struct{} {
	d.failedMu.Lock()
	defer d.failedMu.Unlock()
	return d.failed
}

// setFlushFailed closes the channel of flushFailed, or makes a new one
// once a flush has succeeded.
func (d *diskState) setFlushFailed(failed bool) {
	d.failedMu.Lock()
	defer d.failedMu.Unlock()
	select {
	case <-d.failed:
		if !failed {
			d.failed = make(chan struct{})
		}
	default:
		if failed {
			close(d.failed)
		}
	}
}

// close ends a wait of backOff, and those after it, so that Pebble's
// Close does not wait for one.
func (d *diskState) close() { d.closeOnce.Do(func() { close(d.closing) }) }

// flushedNothing is the error of a flush that succeeded without a table
// to write (its keys all deleted), which Pebble does not export.
const flushedNothing = "pebble: empty table"

// listener is the store's handler of Pebble's events.
func (d *diskState) listener() *pebble.EventListener {
	return &pebble.EventListener{
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err != nil && info.Err.Error() != flushedNothing {
				d.flushErr.Store(&info.Err)
				d.setFlushFailed(true)
				d.backOff(&d.flushFailures, flushRetryMost)
				return
			}
			d.flushFailures.Store(0)
			// The channel first, the error then, as a failure sets them
			// the other way round: a closed channel always means a flush
			// is failing, and a commit that sees one is not told it is in
			// doubt by a flush that has just succeeded.
			d.setFlushFailed(false)
			writes := d.flushErr.Swap(nil) != nil
			d.succeeded(writes)
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			switch {
			case info.Err == nil:
				d.compactFailures.Store(0)
				d.succeeded(false)
			case pebble.IsCorruptionError(info.Err):
				// It fails at once, and will at every try: without a
				// wait, a core's worth of tries. Others (a disk that
				// refuses large files) fail once the work is done.
				d.backOff(&d.compactFailures, compactRetryMost)
			}
		},
		BackgroundError: d.backgroundError,
		// Pebble's default, given a Logger, ends the process on a
		// checksum that fails, a read's too: one request of one damaged
		// block would stop the serving of the whole chain.
		DataCorruption: d.dataCorruption,
	}
}

func (d *diskState) backgroundError(err error) {
	d.lastFailure.Store(&failure{at: time.Now(), err: err})
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if now.Sub(d.loggedAt) < backgroundLogEvery {
		d.unlogged++
		d.lastError = err
		return
	}
	attrs := []any{"err", err.Error()}
	if d.unlogged > 0 {
		attrs = append(attrs, "failures_since_last_line", d.unlogged, "last_err", d.lastError.Error())
	}
	d.log.Error("pebblestore: Pebble failed to write or compact its files, and tries again", attrs...)
	d.loggedAt, d.unlogged, d.lastError = now, 0, nil
}

// dataCorruption logs a damaged part of a file, once every
// backgroundLogEvery for each file, with the count of the times it was met
// since: a compaction of a damaged file fails at each try.
func (d *diskState) dataCorruption(info pebble.DataCorruptionInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	line := d.damaged[info.Path]
	if line == nil {
		line = new(damageLine)
		if d.damaged == nil {
			d.damaged = make(map[string]*damageLine)
		}
		d.damaged[info.Path] = line
	} else if now.Sub(line.at) < backgroundLogEvery {
		line.since++
		return
	}
	attrs := []any{"file", info.Path, "err", info.Details.Error()}
	if line.since > 0 {
		attrs = append(attrs, "met_since_last_line", line.since)
	}
	d.log.Error("pebblestore: a part of a file of the store is damaged: the reads of what it holds fail, and so do the compactions of the file", attrs...)
	line.at, line.since = now, 0
}

// Pebble tries a failed flush or compaction again at once, as often as
// it fails: a core's worth of work on a full disk, or on a damaged file
// for good. backOff, called from FlushEnd or CompactionEnd in the
// goroutine of the flush or compaction before Pebble schedules the next,
// counts the failure in failures, and waits first flushRetryFirst and
// then twice as long for each failure in a row, up to most. Pebble holds
// its lock meanwhile: reads do not take it, writes are refused while
// flushes fail, a read of its metrics (as a write does while compactions
// fail) and the switch to a new memory table wait, and Close ends the
// wait.
func (d *diskState) backOff(failures *atomic.Int64, most time.Duration) {
	n := failures.Add(1)
	wait := time.NewTimer(min(flushRetryFirst<<min(n-1, 20), most))
	defer wait.Stop()
	select {
	case <-wait.C:
	case <-d.closing:
	}
}

const (
	flushRetryFirst = 10 * time.Millisecond
	flushRetryMost  = time.Second
	// compactRetryMost is shorter: writes go on while compactions fail,
	// until the files waiting for one pile up.
	compactRetryMost = 100 * time.Millisecond
)

// succeeded tells, once Pebble writes its files again, of the failures
// left out of the log since its last line, and whether writes, refused
// while flushes failed, are taken again: without it, failures that
// stopped within backgroundLogEvery of that line would go untold.
func (d *diskState) succeeded(writesTaken bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unlogged == 0 && !writesTaken {
		return
	}
	msg := "pebblestore: Pebble wrote its files again"
	if writesTaken {
		msg = "pebblestore: a flush succeeded: writes are taken again"
	}
	var attrs []any
	if d.unlogged > 0 {
		attrs = append(attrs, "failures_since_last_line", d.unlogged, "last_err", d.lastError.Error())
	}
	d.log.Info(msg, attrs...)
	d.unlogged, d.lastError = 0, nil
}

// refusal is the error of a write while flushes fail: the write itself
// would go through, but once Pebble's memory tables are full it would wait
// for good, in the middle of a call that takes no context. Refused, the
// write can be made again once a flush has succeeded.
func (d *diskState) refusal() error {
	if p := d.flushErr.Load(); p != nil {
		return fmt.Errorf("pebblestore: writes are refused until Pebble can write its files again: its last flush failed: %w", *p)
	}
	return nil
}

// failingFor is how long after Pebble's last failed flush or compaction
// its files are taken to be still failing it. It retries a failed
// compaction within tens of milliseconds.
const failingFor = time.Minute

// stallMargin is how many layers of files short of the count at which
// Pebble holds writes the store refuses them: one write adds a layer at
// most, from its memory table flushed; one the size of several memory
// tables, a few.
const stallMargin = 3

// stallRefusal is the error of a write while Pebble fails its compactions
// and the first level of its files has nearly as many layers as it
// allows (stopAt) before it holds every write until a compaction
// succeeds: such a write would wait for good, as one while flushes fail.
// Pebble's metrics are read only while it fails.
func (d *diskState) stallRefusal(db *pebble.DB, stopAt int) error {
	last := d.lastFailure.Load()
	if last == nil || time.Since(last.at) > failingFor {
		return nil
	}
	layers := int(db.Metrics().Levels[0].Sublevels)
	if layers < stopAt-stallMargin {
		return nil
	}
	return fmt.Errorf("pebblestore: writes are refused until Pebble can compact its files again: %d layers of files wait for a compaction, and at %d it would hold writes until one succeeds; its last failure: %w",
		layers, stopAt, last.err)
}

// pebbleLogger passes Pebble's lines to a slog.Logger.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	// Pebble reports every flush and compaction: formatted only when kept.
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(pebbleLine(format, args))
	}
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(pebbleLine(format, args))
}

// Fatalf ends the process, as Pebble requires: it calls Fatalf where it
// cannot go on (its log failed to reach the disk), and would carry on with
// a database it can no longer vouch for if Fatalf returned.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error(pebbleLine(format, args))
	os.Exit(1)
}

// pebbleLine formats a line of Pebble's, which begins "pebble: " unless it
// names Pebble already.
func pebbleLine(format string, args []any) string {
	line := fmt.Sprintf(format, args...)
	if !strings.HasPrefix(line, "pebble") {
		line = "pebble: " + line
	}
	return line
}
