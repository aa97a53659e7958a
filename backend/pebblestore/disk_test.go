package pebblestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/backend/record"
	"github.com/blockrpc/blockrpc/internal/answertest"
	"github.com/blockrpc/blockrpc/internal/syncbuf"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/blockrpc/blockrpc/memstore/chaintest"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failingDisk is the operating system's file system, made to fail the
// operations of kinds on files whose names end in suffix while it is on.
func failingDisk(suffix string, kinds ...errorfs.OpKind) (*errorfs.FS, *atomic.Bool) {
	on := new(atomic.Bool)
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if on.Load() && strings.HasSuffix(op.Path, suffix) {
			for _, k := range kinds {
				if op.Kind == k {
					return errorfs.ErrInjected
				}
			}
		}
		return nil
	}))
	return fs, on
}

// TestDiskFailsReads reads blocks that are not in the cache from a disk
// that fails every read of a table: each read is an error, which the
// handler answers as a backend failure, and once the disk reads again the
// store serves every block as before, the failed answers not remembered.
func TestDiskFailsReads(t *testing.T) {
	fs, failing := failingDisk(".sst", errorfs.OpFileReadAt, errorfs.OpFileRead)
	dir := t.TempDir()
	s, err := Open(dir, &Options{fs: fs})
	if err != nil {
		t.Fatal(err)
	}
	b := chaintest.New(chaintest.Config{Seed: 4})
	b.AddBlocks(300, chaintest.Txs(2))
	for n := uint64(0); n <= 300; n++ {
		if err := s.AddBlock(b.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil { // the blocks in a table, read from the disk
		t.Fatal(err)
	}
	s = reopen(t, s, &Options{fs: fs}) // with an empty cache
	ctx := t.Context()
	h := blockrpc.NewHandler(blockrpc.NewService(s),
		blockrpc.WithKeys(blockrpc.AnyKey),
		blockrpc.WithLogger(slog.New(slog.DiscardHandler)))

	failing.Store(true)
	if _, err := s.BlockByNumber(ctx, 100); !errors.Is(err, errorfs.ErrInjected) {
		t.Errorf("BlockByNumber on a failing disk: %v, want the disk's error", err)
	}
	if _, err := s.BlockByHash(ctx, b.Block(120).Hash); !errors.Is(err, errorfs.ErrInjected) {
		t.Errorf("BlockByHash on a failing disk: %v, want the disk's error", err)
	}
	lent := false
	err = s.LendBlockByNumber(ctx, 140, func(*backend.Block, backend.TransactionDecoder) error { lent = true; return nil })
	if !errors.Is(err, errorfs.ErrInjected) || lent {
		t.Errorf("LendBlockByNumber on a failing disk: %v (lent: %v), want the disk's error", err, lent)
	}
	answertest.BlockByNumber(t, h, 160, true).CheckBackendFailure(t, "block 160 on a failing disk")

	failing.Store(false)
	a := answertest.BlockByNumber(t, h, 160, true)
	if a.Error != nil {
		t.Fatalf("block 160 once the disk reads again: %s", a.Body)
	}
	var got struct{ Hash backend.Hash }
	if err := json.Unmarshal(a.Result, &got); err != nil || got.Hash != b.Block(160).Hash {
		t.Errorf("block 160 once the disk reads again: %s (%v), want %s", got.Hash, err, b.Block(160).Hash)
	}
	backendtest.TestBackend(t, s, b.Store(), b.Head().Hash)
}

// diskFailEnv holds the directory, the sync option and the number of
// writes after which the log's disk fails, for the child process of
// TestDiskFailsLog.
const diskFailEnv = "PEBBLESTORE_DISKFAIL"

// TestDiskFailsLog runs a process that imports a chain until the disk
// starts failing the writes and syncs of Pebble's log. Pebble cannot tell
// then what of its log is on the disk, and ends the process (Fatalf with
// Options.Sync, a panic on a later write without); the store opens again
// to a consistent chain, which with Options.Sync holds every block whose
// write returned.
func TestDiskFailsLog(t *testing.T) {
	if v := os.Getenv(diskFailEnv); v != "" {
		diskFailChild(v)
		return
	}
	if testing.Short() {
		t.Skip("runs processes: not in -short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			dir := t.TempDir()
			good := 1 + rng.IntN(200)
			cmd := exec.Command(exe, "-test.run=^TestDiskFailsLog$", "-test.count=1")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%v,%d", diskFailEnv, dir, sync, good))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
				t.Fatalf("the process whose disk failed: %v, want an exit with an error (seed %d)\n%s", err, seed, stderr.Bytes())
			}
			// Without Sync, Pebble panics where its log's error meets it
			// (a write, a switch to a new log), not always with the error.
			if sync && !strings.Contains(stderr.String(), errorfs.ErrInjected.Error()) {
				t.Errorf("the process's output does not name the disk's error:\n%s", stderr.Bytes())
			}
			returned := -1 // the highest block whose write returned
			for _, line := range strings.Fields(stdout.String()) {
				if n, err := strconv.Atoi(line); err == nil {
					returned = n
				}
			}
			if sync && !strings.Contains(stderr.String(), `level=ERROR msg="pebble: fatal commit error`) {
				t.Errorf("the process's log does not say why it ended:\n%s", stderr.Bytes())
			}
			if sync && returned != good-1 {
				t.Errorf("with Sync, writes returned up to block %d; the disk failed from block %d on", returned, good)
			}

			s, err := Open(dir, nil)
			if err != nil {
				t.Fatalf("opening the store again: %v", err)
			}
			defer s.Close()
			head := checkConsistent(t, s)
			// Without Sync, the last writes before the failure may
			// have been in the part of the log not yet written out.
			if sync && head < uint64(returned) {
				t.Errorf("the store opens again with head %d, below block %d whose write returned (seed %d)", head, returned, seed)
			}
			t.Logf("the disk failed after block %d; writes returned up to block %d; head %d when opened again", good-1, returned, head)
		})
	}
}

// diskFailChild writes a chain into a store whose log's disk fails after
// the given number of blocks, and prints each block number whose write
// returned. It should not outlive the failure.
func diskFailChild(v string) {
	args := strings.Split(v, ",")
	good, _ := strconv.Atoi(args[2])
	fs, failing := failingDisk(".log", errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := Open(args[0], &Options{Sync: args[1] == "true", Logger: log, fs: fs})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	g := synth.New(synth.Config{Seed: 5, TxsPerBlock: 2})
	for n := range 20000 {
		if n == good {
			failing.Store(true)
		}
		if err := s.AddBlock(g.Next()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(n)
	}
	fmt.Fprintln(os.Stderr, "20000 blocks written on a disk that fails")
	os.Exit(0)
}

// TestCorruptBlock damages the record of one block in a file of the store:
// the reads of the blocks in the damaged part of the file fail with an
// error, a backend failure to the handler, and the store goes on serving
// every other block; the damage is logged, with the file.
func TestCorruptBlock(t *testing.T) {
	ch := chaintest.New(chaintest.Config{Seed: 6})
	ch.AddBlocks(300, chaintest.Txs(2))
	const damaged = 150
	dir, file, at := damagedStore(t, ch, damaged)

	var log bytes.Buffer
	s, err := Open(dir, &Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	h := blockrpc.NewHandler(blockrpc.NewService(s),
		blockrpc.WithKeys(blockrpc.AnyKey),
		blockrpc.WithLogger(slog.New(slog.DiscardHandler)))
	answertest.BlockByNumber(t, h, damaged, true).CheckBackendFailure(t, "the damaged block")
	var failed []uint64
	for n := uint64(0); n <= 300; n++ {
		b, err := s.BlockByNumber(ctx, backend.BlockNumber(n))
		switch {
		case errors.Is(err, backend.ErrNotFound):
			t.Errorf("block %d: %v, where a block is stored", n, err)
		case err != nil:
			failed = append(failed, n)
		case b.Hash != ch.Block(n).Hash:
			t.Errorf("block %d: %s, want %s", n, b.Hash, ch.Block(n).Hash)
		}
	}
	// A block of the file holds a few records of 800 bytes.
	if !slices.Contains(failed, damaged) || len(failed) > 8 {
		t.Errorf("the blocks whose reads failed: %v; want block %d among a few neighbours", failed, damaged)
	}
	if _, err := s.BlockByNumber(ctx, backend.Latest); err != nil {
		t.Errorf("the latest block: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), filepath.Base(file)) {
		t.Errorf("the log does not report the damaged file %s:\n%s", filepath.Base(file), log.Bytes())
	}
	t.Logf("damaged block %d, at byte %d of %s: reads failed for blocks %v", damaged, at, filepath.Base(file), failed)
}

// damagedStore writes blocks 0 to 300 of ch into a store in a new
// directory, flushed into a file, and damages the record of block damaged
// in it. It returns the directory, the file and where in it.
func damagedStore(t *testing.T, ch *chaintest.Builder, damaged uint64) (dir, file string, at int) {
	t.Helper()
	dir = t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := uint64(0); n <= 300; n++ {
		if err := s.AddBlock(ch.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A state root is 32 random bytes, which no compression shortens:
	// found in a file, it is within the block's record.
	root := ch.Block(damaged).StateRoot
	files, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(data, root[:]); i >= 0 {
			data[i+7] ^= 0x20
			if err := os.WriteFile(f, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return dir, f, i
		}
	}
	t.Fatalf("block %d's state root is in none of the files %v", damaged, files)
	return "", "", 0
}

// TestCompactionOfDamagedFile writes on into a store with a damaged
// file until Pebble compacts it, which fails at every try: Pebble is made
// to wait between its tries, where it tried hundreds of times a second, a
// core's worth of work; and the damage is logged once, where each try
// logged a line.
func TestCompactionOfDamagedFile(t *testing.T) {
	ch := chaintest.New(chaintest.Config{Seed: 6})
	ch.AddBlocks(3000, chaintest.Txs(2))
	dir, file, _ := damagedStore(t, ch, 150)
	var log syncbuf.Buffer
	s, err := Open(dir, &Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), MemTableBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for n := uint64(301); n <= 3000 && s.db.Metrics().Compact.FailedCount == 0; n++ {
		if err := s.AddBlock(ch.Block(n)); err != nil {
			t.Fatalf("block %d, before a compaction failed: %v", n, err)
		}
	}
	if s.db.Metrics().Compact.FailedCount == 0 {
		t.Fatal("no compaction of the damaged file failed")
	}
	failed := s.db.Metrics().Compact.FailedCount
	time.Sleep(2 * time.Second)
	// Waits of 10 ms, then twice as long each time up to 100 ms: about
	// 20 tries in two seconds.
	n := s.db.Metrics().Compact.FailedCount - failed
	t.Logf("%d compactions of the damaged file failed in 2 s", n)
	if n > 60 {
		t.Errorf("%d compactions failed in 2 s: Pebble is not made to wait between its tries", n)
	}
	if n := strings.Count(log.String(), "is damaged"); n != 1 {
		t.Errorf("the damage was logged %d times, want once in 10 s:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), filepath.Base(file)) {
		t.Errorf("the log does not name the damaged file %s:\n%s", filepath.Base(file), log.String())
	}
}

// TestMisplacedRecord writes a block's record under another block's
// key, and changes the hash a record keeps for one of its transactions,
// through Pebble, whose checksums then hold, as a bad copy of the files
// or a write to the wrong key would leave them: every read of those
// blocks fails as corrupt, lent or decoded, where the misplaced block was
// served for the other, and a lent block's transaction with a hash not
// the one its record keeps for it.
func TestMisplacedRecord(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, nil)
	ch := chaintest.New(chaintest.Config{Seed: 6})
	ch.AddBlocks(20, chaintest.Txs(3))
	for n := uint64(0); n <= 20; n++ {
		if err := s.AddBlock(ch.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	value := func(n uint64) []byte {
		v, found, err := get(s.db, canonicalKey(n))
		if err != nil || !found {
			t.Fatalf("block %d's entry: %v, found %v", n, err, found)
		}
		return bytes.Clone(v)
	}
	set := func(n uint64, v []byte) {
		if err := s.db.Set(canonicalKey(n), v, nil); err != nil {
			t.Fatal(err)
		}
	}
	borrow := func(b *backend.Block, txs backend.TransactionDecoder) error {
		_, err := b.AppendLentJSON(nil, true, txs) // as the handler writes it
		return err
	}
	// hashesKept is set where the record's hash list is whole: served
	// without details, the block's answer is written from it, its
	// transactions unread, by the handler and the Service alike.
	check := func(what string, number backend.BlockNumber, hash backend.Hash, hashesKept bool) {
		t.Helper()
		reads := map[string]error{}
		_, reads["BlockByNumber"] = s.BlockByNumber(ctx, number)
		reads["LendBlockByNumber"] = s.LendBlockByNumber(ctx, number, borrow)
		_, reads["BlockByHash"] = s.BlockByHash(ctx, hash)
		reads["LendBlockByHash"] = s.LendBlockByHash(ctx, hash, borrow)
		// The Service's typed methods copy a lent block, not write it.
		svc := blockrpc.NewService(s)
		_, reads["Service.GetBlockByNumber(true)"] = svc.GetBlockByNumber(ctx, number, true)
		_, reads["Service.GetBlockByHash(true)"] = svc.GetBlockByHash(ctx, hash, true)
		if b, err := svc.GetBlockByHash(ctx, hash, false); hashesKept && (err != nil || !slices.Equal(b.TransactionHashes, backend.TransactionHashes(ch.Block(uint64(number)).Transactions))) {
			t.Errorf("%s: Service.GetBlockByHash(false): %v, want the hashes the record keeps", what, err)
		} else if !hashesKept {
			reads["Service.GetBlockByHash(false)"] = err
		}
		for read, err := range reads {
			var mismatch *backend.MismatchError
			if !errors.Is(err, errCorrupt) && !errors.Is(err, record.ErrCorrupt) && !errors.As(err, &mismatch) {
				t.Errorf("%s: %s: %v, want the record found corrupt", what, read, err)
			}
		}
	}

	// Block 9's entry, hash and record, at number 12.
	v9, v12 := value(9), value(12)
	set(12, v9)
	_, err := s.BlockByNumber(ctx, 12)
	if !errors.Is(err, errCorrupt) {
		t.Errorf("block 12, its entry block 9's: %v, want the record found corrupt", err)
	}
	if err := s.LendBlockByNumber(ctx, 12, borrow); !errors.Is(err, errCorrupt) {
		t.Errorf("block 12 lent, its entry block 9's: %v, want the record found corrupt", err)
	}
	// Block 12's hash, with block 9's record.
	set(12, append(v12[:32:32], v9[32:]...))
	check("block 12's entry holding block 9's record", 12, ch.Block(12).Hash, false)
	set(12, v12)

	// The last transaction of block 15 with another hash than the one
	// kept for it: its own hash is the last of the two in the entry.
	b := ch.Block(15)
	last := b.Transactions[len(b.Transactions)-1].Hash
	v15 := value(15)
	at := bytes.LastIndex(v15, last[:])
	if at < 0 || at == bytes.Index(v15, last[:]) {
		t.Fatal("the transaction's hash is not twice in block 15's entry")
	}
	v15[at+5] ^= 0x01
	set(15, v15)
	check("block 15 with a transaction's hash changed", 15, b.Hash, true)
	for _, n := range []backend.BlockNumber{9, 14, 16} {
		if _, err := s.BlockByNumber(ctx, n); err != nil {
			t.Errorf("block %d, undamaged: %v", n, err)
		}
	}
}

// TestReorgThroughMisplacedRecord writes main's block 5's record under
// the key of side block F5, whose child F6 then makes its branch
// canonical: the reorganisation fails as corrupt, where it took the
// misplaced record's parent for F5's and left main's block 4 canonical
// under F5, the chain no longer linked.
func TestReorgThroughMisplacedRecord(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, nil)
	main := chaintest.New(chaintest.Config{Seed: 6})
	main.AddBlocks(10, chaintest.Txs(1))
	fork := main.Fork(3)
	fork.AddBlocks(3, chaintest.Txs(1))
	for n := uint64(0); n <= 10; n++ {
		if err := s.AddBlock(main.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	for n := uint64(4); n <= 6; n++ {
		if err := s.AddSideBlock(fork.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	entry, found, err := get(s.db, canonicalKey(5))
	if err != nil || !found {
		t.Fatalf("block 5's entry: %v, found %v", err, found)
	}
	f5 := fork.Block(5)
	if err := s.db.Set(recordKey(5, f5.Hash), bytes.Clone(entry[32:]), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AddBlock(fork.Block(6)); !errors.Is(err, errCorrupt) {
		t.Errorf("F6 made canonical through F5's misplaced record: %v, want the record found corrupt", err)
	}
	// Nothing of the refused write was kept: main's chain, linked up.
	latest, err := s.BlockByNumber(ctx, backend.Latest)
	if err != nil || latest.Hash != main.Head().Hash {
		t.Fatalf("latest: %v, want main's block 10", err)
	}
	for n := latest.Number; n > 0; n-- {
		b, err := s.BlockByNumber(ctx, backend.BlockNumber(n))
		below, berr := s.BlockByNumber(ctx, backend.BlockNumber(n-1))
		if err != nil || berr != nil || b.ParentHash != below.Hash {
			t.Fatalf("block %d's parent is not block %d: %v %v", n, n-1, err, berr)
		}
	}
}

// TestCanonicalKeyDamaged writes a canonical entry whose key is not a
// block number past the others, as a damaged key would read: the store
// refuses to open, where it took its chain to end at block 0.
func TestCanonicalKeyDamaged(t *testing.T) {
	s := openTest(t, nil)
	ch := chaintest.New(chaintest.Config{Seed: 6})
	ch.AddBlocks(5, nil)
	for n := uint64(0); n <= 5; n++ {
		if err := s.AddBlock(ch.Block(n)); err != nil {
			t.Fatal(err)
		}
	}
	v, _, err := get(s.db, canonicalKey(5))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set([]byte{prefixCanonical, 0xff, 0, 0, 0, 0, 0, 0}, v, nil); err != nil {
		t.Fatal(err)
	}
	dir := s.Dir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if again, err := Open(dir, nil); !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), "not a block number") {
		if err == nil {
			again.Close()
		}
		t.Errorf("a store with a canonical key of 7 bytes opened: %v, want it refused as corrupt", err)
	}
}

// TestDiskFailsFlushes has the disk refuse the writes of Pebble's tables
// while a chain is imported, as a full disk does. Pebble keeps trying its
// flushes, and would make a write wait for good once its memory tables are
// full: the store refuses writes instead, with an error, from the first
// failed flush until one succeeds, and logs the failures a line at a time
// rather than as often as Pebble tries. Once the disk writes again, so does
// the store, and it holds the whole chain; a store closed while the disk
// fails closes, and the calls after Close fail at once.
func TestDiskFailsFlushes(t *testing.T) {
	fs, failing := failingDisk(".sst", errorfs.OpFileWrite, errorfs.OpFileWriteAt)
	var log syncbuf.Buffer
	dir := t.TempDir()
	opts := &Options{fs: fs, MemTableBytes: 1 << 20, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newDiskChain(t)
	add := func() error { return c.add(s) }
	within := func(what string, f func()) { withinAMinute(t, what, failing, f) }

	failing.Store(true)
	var refused error
	within("writing on a disk that fails", func() {
		for i := 0; i < 20000 && refused == nil; i++ {
			refused = add()
		}
	})
	if refused == nil || !strings.Contains(refused.Error(), "writes are refused until Pebble can write its files again") {
		t.Fatalf("writes on a disk that fails: %v, want them refused", refused)
	}
	time.Sleep(time.Second) // Pebble tries its flush again
	// Waiting 10 ms before the second try, twice as long before each
	// after: about 7 in the second, where Pebble would try hundreds.
	if n := s.disk.flushFailures.Load(); n > 20 {
		t.Errorf("%d flushes failed in about a second: Pebble is not made to wait between its tries", n)
	}
	if n := strings.Count(log.String(), "level=ERROR"); n == 0 || n > 2 {
		t.Errorf("%d lines logged at error in a second of failed flushes, want one or two:\n%s", n, log.String())
	}
	if b, err := s.BlockByHash(t.Context(), c.hashes[len(c.hashes)-1]); err != nil || b.Hash != c.hashes[len(c.hashes)-1] {
		t.Errorf("the last block written, while the disk fails: %v", err)
	}

	failing.Store(false)
	within("writing once the disk writes again", func() {
		for add() != nil {
			time.Sleep(10 * time.Millisecond)
		}
		for range 100 {
			if err := add(); err != nil {
				t.Errorf("a write once a flush succeeded: %v", err)
				return
			}
		}
	})
	// In the same line, the failures of the last second, which the
	// log left out.
	if !regexp.MustCompile(`writes are taken again" failures_since_last_line=[1-9]`).MatchString(log.String()) {
		t.Errorf("the log does not say that writes are taken again, with the failures it left out:\n%s", log.String())
	}
	if strings.Contains(log.String(), "stack trace") {
		t.Errorf("the log holds Pebble's stack traces:\n%s", log.String())
	}
	s = reopen(t, s, opts)
	backendtest.TestBlocks(t, s, c.ref, c.hashes...)

	failing.Store(true)
	var stopped error
	within("writing on a disk that fails again", func() {
		for stopped = add(); stopped == nil; stopped = add() {
		}
	})
	// Close, as a wait of a second between two flushes begins, need
	// not wait for its end.
	within("waiting for Pebble's waits to reach a second", func() {
		for s.disk.flushFailures.Load() < 8 {
			time.Sleep(10 * time.Millisecond)
		}
	})
	n := s.disk.flushFailures.Load()
	for s.disk.flushFailures.Load() == n {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	within("closing while the disk fails", func() {
		if err := s.Close(); err != nil {
			t.Logf("Close: %v", err)
		}
	})
	if took := time.Since(start); took > flushRetryMost/2 {
		t.Errorf("Close took %v, as Pebble waited %v to try its flush again", took.Round(time.Millisecond), flushRetryMost)
	}
	if _, err := s.BlockByHash(t.Context(), c.hashes[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("a read after Close: %v, want ErrClosed", err)
	}
	failing.Store(false)
	s = reopen(t, s, opts)
	if strings.Contains(stopped.Error(), "waits in Pebble") {
		// The write that stopped was left in doubt: stored or not, it
		// is once given again.
		if err := add(); err != nil {
			t.Fatalf("the block in doubt, given again: %v", err)
		}
	}
	backendtest.TestBlocks(t, s, c.ref, c.hashes...)
}

// TestDiskFailsFlushAfterQuickCommit writes on a disk that fails every
// flush, with small memory tables. A commit that fills a table has Pebble
// schedule its flush on a goroutine that may not have begun it when the
// next commits come, and the one that fills the next table waits in
// Pebble for that flush, which fails. Every write must be refused, or
// returned in doubt, and none wait for good; one used to, when commits
// that saw no flush under way were made without watching for failures.
// With one processor and the collector off, the flush's goroutine waits
// for the writer's: the first store showed it.
func TestDiskFailsFlushAfterQuickCommit(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	g := synth.New(synth.Config{Seed: 7, TxsPerBlock: 12})
	blocks := make([]*backend.Block, 400)
	for i := range blocks {
		blocks[i] = g.Next()
	}
	deadline := time.Now().Add(10 * time.Second)
	stores, inDoubt := 0, 0
	for ; stores < 100 && time.Now().Before(deadline); stores++ {
		fs, failing := failingDisk(".sst", errorfs.OpFileWrite, errorfs.OpFileWriteAt)
		s, err := Open(t.TempDir(), &Options{fs: fs, MemTableBytes: 64 << 10, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		failing.Store(true)
		done := make(chan error, 1)
		var written atomic.Int64
		go func() {
			for _, b := range blocks {
				if err := s.AddBlock(b); err != nil {
					done <- err
					return
				}
				written.Add(1)
			}
			done <- nil
		}()
		select {
		case err := <-done:
			switch {
			case err != nil && strings.Contains(err.Error(), "waits in Pebble"):
				inDoubt++
			case err == nil || !strings.Contains(err.Error(), "refused"):
				t.Fatalf("store %d: a write on a disk that fails every flush: %v", stores, err)
			}
			failing.Store(false)
			s.Close() // with a write in doubt, an error: the store closes once it ends
			continue
		case <-time.After(5 * time.Second):
		}
		stuck := written.Load()
		failing.Store(false) // the write ends, and the store can close
		<-done
		s.Close()
		t.Fatalf("store %d: write %d of %d waited 5 s while the flushes failed, neither refused nor in doubt", stores, stuck, len(blocks))
	}
	t.Logf("%d stores, no write waited; in %d a write ended in doubt, in the others one was refused", stores, inDoubt)
}

// TestDiskFailsCompactions has the disk refuse files of more than 3 MB, as
// a disk nearly full does: Pebble's flushes of its memory tables fit,
// the compactions that merge them do not. Each flush adds a layer of
// files to Pebble's first level, and at 12 Pebble would make every write
// wait for a compaction to succeed, for good: the store refuses writes
// before, with an error. Once the disk takes large files again, the
// compactions go through, writes are taken again, and the store holds
// the whole chain.
func TestDiskFailsCompactions(t *testing.T) {
	// The disk nearly full: while full is set, no table file takes more
	// than 3 MB.
	var full atomic.Bool
	disk := tableWriteFS{FS: vfs.Default, check: func(written int64, p []byte) error {
		if full.Load() && written+int64(len(p)) > 3<<20 {
			return syscall.ENOSPC
		}
		return nil
	}}
	opts := &Options{fs: disk, MemTableBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	s, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := newDiskChain(t)

	full.Store(true)
	var refused error
	withinAMinute(t, "writing while compactions fail", &full, func() {
		for i := 0; i < 20000 && refused == nil; i++ {
			refused = c.add(s)
		}
	})
	if refused == nil || !strings.Contains(refused.Error(), "writes are refused until Pebble can compact its files again") {
		t.Fatalf("writes while compactions fail: %v, want them refused", refused)
	}
	last := c.hashes[len(c.hashes)-1]
	if b, err := s.BlockByHash(t.Context(), last); err != nil || b.Hash != last {
		t.Errorf("the last block written, while compactions fail: %v", err)
	}

	full.Store(false)
	withinAMinute(t, "writing once compactions succeed", &full, func() {
		for c.add(s) != nil {
			time.Sleep(10 * time.Millisecond)
		}
		for range 100 {
			if err := c.add(s); err != nil {
				t.Errorf("a write once compactions succeeded: %v", err)
				return
			}
		}
	})
	s = reopen(t, s, opts)
	backendtest.TestBlocks(t, s, c.ref, c.hashes...)
}

// TestDiskFailsSlowFlush has the disk refuse Pebble's tables only once
// the writes have filled Pebble's memory tables, as a slow disk that
// fills up during a flush does: the last write waits in Pebble for room,
// past the store's refusal, checked before the flush failed. Once the
// flush fails, that write returns an error that says it is in doubt;
// Close returns at once, with an error, and the store closes once the
// disk writes again. Opened again, it holds every block taken, and the
// one in doubt. Before, the write and then Close waited for good.
func TestDiskFailsSlowFlush(t *testing.T) {
	// The disk slow to fail: while failing is set, a table's write waits
	// until answer is closed, and is then refused.
	var failing atomic.Bool
	answer := make(chan struct{})
	disk := tableWriteFS{FS: vfs.Default, check: func(int64, []byte) error {
		for failing.Load() {
			select {
			case <-answer:
				return syscall.ENOSPC
			case <-time.After(10 * time.Millisecond):
			}
		}
		return nil
	}}
	dir := t.TempDir()
	opts := &Options{fs: disk, MemTableBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	c := newDiskChain(t)
	for range 5 {
		if err := c.add(s); err != nil {
			t.Fatal(err)
		}
	}

	failing.Store(true)
	var written atomic.Int64
	inDoubt := make(chan error, 1)
	go func() {
		for {
			if err := c.add(s); err != nil {
				inDoubt <- err
				return
			}
			written.Add(1)
		}
	}()
	// The writer stops: its write waits for room, which the flush that
	// the disk holds would make.
	for last, since := written.Load(), time.Now(); time.Since(since) < time.Second; time.Sleep(10 * time.Millisecond) {
		if n := written.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	close(answer)
	var err1 error
	withinAMinute(t, "a write waiting while the flush fails", &failing, func() { err1 = <-inDoubt })
	if !strings.Contains(err1.Error(), "waits in Pebble") {
		t.Fatalf("the write waiting for room as the flush failed: %v, want it in doubt", err1)
	}
	if err := c.add(s); err == nil || !strings.Contains(err.Error(), "writes are refused") {
		t.Errorf("a write while the flush fails: %v, want it refused", err)
	}
	start := time.Now()
	var closeErr error
	withinAMinute(t, "closing with a write in doubt", &failing, func() { closeErr = s.Close() })
	if took := time.Since(start); closeErr == nil || took > 5*time.Second {
		t.Errorf("Close with a write in doubt: %v after %v, want an error at once", closeErr, took.Round(time.Millisecond))
	}
	if _, err := s.BlockByHash(t.Context(), c.hashes[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("a read after Close: %v, want ErrClosed", err)
	}

	failing.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for s, err = Open(dir, opts); err != nil; s, err = Open(dir, opts) {
		if time.Now().After(deadline) {
			t.Fatalf("the store, 30 s after the disk writes again, is still open: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer s.Close()
	if b, err := s.BlockByHash(t.Context(), c.next.Hash); err != nil || b.Hash != c.next.Hash {
		t.Fatalf("the block in doubt, once the disk writes again: %v", err)
	}
	if err := c.add(s); err != nil { // the block in doubt, given again
		t.Fatal(err)
	}
	backendtest.TestBlocks(t, s, c.ref, c.hashes...)
}

// tableWriteFS is the operating system's file system, whose writes of
// Pebble's table files go first through check, which may refuse them,
// as a full, nearly full or slow disk does.
type tableWriteFS struct {
	vfs.FS
	check func(written int64, p []byte) error
}

func (d tableWriteFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := d.FS.Create(name, category)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return &tableFile{File: f, check: d.check}, nil
}

// tableFile is a table file of tableWriteFS; written counts the bytes
// it took.
type tableFile struct {
	vfs.File
	check   func(written int64, p []byte) error
	written int64
}

func (f *tableFile) Write(p []byte) (int, error) {
	if err := f.check(f.written, p); err != nil {
		return 0, err
	}
	f.written += int64(len(p))
	return f.File.Write(p)
}

// diskChain is a synthetic chain written into a store on a disk that
// fails, and into memstore beside it: the blocks the store took, the
// reference it is compared with once the disk is mended.
type diskChain struct {
	t      *testing.T
	g      *synth.Generator
	next   *backend.Block
	ref    *memstore.Store
	hashes []backend.Hash
}

func newDiskChain(t *testing.T) *diskChain {
	g := synth.New(synth.Config{Seed: 7, TxsPerBlock: 20})
	return &diskChain{t: t, g: g, next: g.Next(), ref: memstore.New()}
}

// add writes the next block into s, and into the reference when s took
// it.
func (c *diskChain) add(s *Store) error {
	err := s.AddBlock(c.next)
	if err == nil {
		if err := c.ref.AddBlock(c.next); err != nil {
			c.t.Fatal(err)
		}
		c.hashes = append(c.hashes, c.next.Hash)
		c.next = c.g.Next()
	}
	return err
}

// withinAMinute runs f, and fails the test if it has not returned in a
// minute: what these tests are about is calls that would never return.
// The disk is mended then (failing cleared), so that they do, and the
// test ends.
func withinAMinute(t *testing.T, what string, failing *atomic.Bool, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		failing.Store(false)
		<-done
		t.Fatalf("%s: no return in a minute", what)
	}
}
