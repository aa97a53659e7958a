package pebblestore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockrpc/blockrpc/backend"
	"github.com/blockrpc/blockrpc/backend/backendtest"
	"github.com/blockrpc/blockrpc/internal/synth"
	"github.com/blockrpc/blockrpc/memstore"
	"github.com/cockroachdb/pebble/v2"
	"github.com/holiman/uint256"
)

// crashEnv names the directory a child process of TestCrash writes into.
const crashEnv = "PEBBLESTORE_CRASH_DIR"

// crashBlocks is the length of the crash workload's chain.
const crashBlocks = 400

// crashWorkload imports a chain as a follower does, with a reorganisation
// to a longer fork and back every 20 blocks, the tags and the pending
// block moving along; op is called after each write. The same calls write
// the same chain, so that a process killed in the middle starts again
// from the beginning, as an import of a dump is started again: what is
// stored is written again as a no-op, the reorganisations are done again.
func crashWorkload(w backend.Writer, op func()) ([]backend.Hash, error) {
	g := synth.New(synth.Config{Seed: 3, TxsPerBlock: 2})
	var chain []*backend.Block
	var hashes []backend.Hash
	do := func(err error) error {
		if err == nil {
			op()
		}
		return err
	}
	for i := range crashBlocks {
		b := g.Next()
		chain, hashes = append(chain, b), append(hashes, b.Hash)
		if err := do(w.AddBlock(b)); err != nil {
			return nil, err
		}
		if i > 10 && i%20 == 0 {
			k := 2 + i%5
			p := chain[i-k]
			var fork []*backend.Block
			for range k + 2 {
				p = g.NextAfter(p)
				fork, hashes = append(fork, p), append(hashes, p.Hash)
			}
			for _, f := range fork[:len(fork)-1] {
				if err := do(w.AddSideBlock(f)); err != nil {
					return nil, err
				}
			}
			if err := do(w.AddBlock(fork[len(fork)-1])); err != nil { // to the fork
				return nil, err
			}
			if err := do(w.AddBlock(b)); err != nil { // and back
				return nil, err
			}
		}
		if i >= 10 && i%7 == 0 {
			if err := do(w.SetSafe(uint64(i - 5))); err != nil {
				return nil, err
			}
			if err := do(w.SetFinalized(uint64(i - 10))); err != nil {
				return nil, err
			}
		}
		if i%5 == 0 {
			if err := do(w.SetPending(g.NextAfter(b))); err != nil {
				return nil, err
			}
		}
	}
	return hashes, nil
}

// TestCrash kills (SIGKILL) a process importing a chain with
// reorganisations at random points, many times, and checks after each
// kill that the store reopens to a consistent chain; then lets one run to
// the end and compares the store with memstore given the same writes.
func TestCrash(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("kills processes: not in -short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The writes of the workload, to draw kill points from and to make
	// again on a copy of the store.
	var writes recorder
	hashes, err := crashWorkload(&writes, func() {})
	if err != nil {
		t.Fatal(err)
	}
	total := len(writes)
	ref := memstore.New()
	if err := writes.replay(ref, 0, total); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	const kills = 24
	deadline := time.Now().Add(35 * time.Second)
	killed, furthest, heads, lost := 0, 0, []uint64{}, []int{}
	for i := 0; i < kills && time.Now().Before(deadline); i++ {
		if i > 0 && i%8 == 0 {
			// A new store now and then, for kills in the first import
			// rather than in runs that write again what is stored.
			dir, furthest = t.TempDir(), 0
		}
		mirror := copyOf(t, dir, hashes) // the store as the run finds it
		// Half the kills anywhere in the workload, half in the writes
		// past those of the previous runs on the store: in new blocks.
		at := 1 + rng.IntN(total)
		if i%2 == 1 {
			at = min(total, furthest+1+rng.IntN(60))
		}
		ops, done := runChild(t, exe, dir, at, time.Duration(rng.IntN(2000))*time.Microsecond)
		furthest = max(furthest, ops)
		if done {
			t.Logf("run %d ended before its kill point", i)
		} else {
			killed++
		}
		s, err := Open(dir, nil)
		if err != nil {
			t.Fatalf("reopening after kill %d (after write %d): %v", i, ops, err)
		}
		head := checkConsistent(t, s)
		if t.Failed() {
			s.Close()
			t.Fatalf("kill %d after write %d of %d (seed %d): the store is inconsistent", i, ops, total, seed)
		}
		// The store is as the run left it after one of its writes: the
		// last that returned, the one under way, or one before them that
		// the killed process had not yet handed to the system (Options).
		m, err := writes.match(mirror, s, ops, hashes)
		if err != nil {
			s.Close()
			t.Fatalf("kill %d after write %d of %d (seed %d): %v", i, ops, total, seed, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		heads, lost = append(heads, head), append(lost, ops-m)
	}
	// A run to the end.
	if _, done := runChild(t, exe, dir, total+1, 0); !done {
		t.Fatal("the last run did not end")
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkConsistent(t, s)
	backendtest.TestBackend(t, s, ref, hashes...)
	t.Logf("%d processes killed at random points of %d writes (seed %d); heads after each: %v; writes that had returned and were lost: %v", killed, total, seed, heads, lost)

}

// holdEnv names the directory a child process of TestOpenHeldElsewhere
// holds a store open in.
const holdEnv = "PEBBLESTORE_HOLD_DIR"

// TestOpenHeldElsewhere opens a store that another process has open: the
// error says so.
func TestOpenHeldElsewhere(t *testing.T) {
	if dir := os.Getenv(holdEnv); dir != "" {
		s, err := Open(dir, nil)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("open")
		io.Copy(io.Discard, os.Stdin) // until the parent is done
		s.Close()
		return
	}
	dir := t.TempDir()
	_, out, stop := startChild(t, "TestOpenHeldElsewhere", holdEnv+"="+dir)
	defer stop()
	if line, _ := out.ReadString('\n'); line != "open\n" {
		t.Fatalf("the child did not open the store: %q", line)
	}
	s, err := Open(dir, nil)
	if err == nil {
		s.Close()
		t.Fatal("a store open in another process was opened again")
	}
	if want := dir + " is open in another process"; !strings.Contains(err.Error(), want) {
		t.Errorf("Open = %v, want an error that says %q", err, want)
	}
}

// startChild runs this test binary again for the test named alone, with
// env added to its environment and args to its flags, and returns the
// child's stdin and stdout, and stop, which closes its stdin and waits for
// it to end.
func startChild(t testing.TB, test, env string, args ...string) (io.Writer, *bufio.Reader, func()) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"-test.run=^" + test + "$", "-test.count=1"}, args...)...)
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stdin, bufio.NewReader(stdout), func() {
		stdin.Close()
		cmd.Wait()
	}
}

// A recorder records the writes given to it, to make them again on any
// Writer.
type recorder []func(backend.Writer) error

func (r *recorder) add(f func(backend.Writer) error) error { *r = append(*r, f); return nil }

func (r *recorder) AddBlock(b *backend.Block, u ...*backend.Uncle) error {
	return r.add(func(w backend.Writer) error { return w.AddBlock(b, u...) })
}

func (r *recorder) AddSideBlock(b *backend.Block, u ...*backend.Uncle) error {
	return r.add(func(w backend.Writer) error { return w.AddSideBlock(b, u...) })
}

func (r *recorder) SetPending(b *backend.Block) error {
	return r.add(func(w backend.Writer) error { return w.SetPending(b) })
}

func (r *recorder) SetSafe(n uint64) error {
	return r.add(func(w backend.Writer) error { return w.SetSafe(n) })
}

func (r *recorder) SetFinalized(n uint64) error {
	return r.add(func(w backend.Writer) error { return w.SetFinalized(n) })
}

func (r *recorder) SetChainID(id uint64) error {
	return r.add(func(w backend.Writer) error { return w.SetChainID(id) })
}

// replay makes writes from to to on w.
func (r recorder) replay(w backend.Writer, from, to int) error {
	for i, f := range r[from:to] {
		if err := f(w); err != nil {
			return fmt.Errorf("write %d: %w", from+i+1, err)
		}
	}
	return nil
}

// match makes the writes of a run on mirror, a copy of the store as the
// run found it, one at a time up to the one after ops (under way when the
// run was killed), and returns the number of the last after which mirror
// holds what s holds: the same tags and pending block, and of the blocks
// of hashes, the same ones, canonical or not.
func (r recorder) match(mirror backend.Writer, s *Store, ops int, hashes []backend.Hash) (int, error) {
	m := mirror.(backend.Backend)
	want, wantBlocks := summary(s), ""
	found := -1
	for i := 0; i <= min(ops+1, len(r)); i++ {
		if i > 0 {
			if err := r.replay(mirror, i-1, i); err != nil {
				return 0, err
			}
		}
		if summary(m) != want {
			continue
		}
		if wantBlocks == "" {
			wantBlocks = blocksHeld(s, hashes)
		}
		if blocksHeld(m, hashes) == wantBlocks {
			found = i
		}
	}
	if found < 0 {
		return 0, fmt.Errorf("the store holds what none of the run's writes up to %d left: %s", ops+1, want)
	}
	return found, nil
}

// summary is what b's tags name: the latest block's hash, the earliest,
// safe and finalized numbers, and the pending block's header.
func summary(b backend.Backend) string {
	ctx := context.Background()
	var out strings.Builder
	for _, tag := range []backend.BlockNumber{backend.Latest, backend.Earliest, backend.Safe, backend.Finalized, backend.Pending} {
		blk, err := b.BlockByNumber(ctx, tag)
		switch {
		case err != nil:
			fmt.Fprintf(&out, "%s: %v; ", tag, err)
		case tag == backend.Pending:
			fmt.Fprintf(&out, "%s: %s; ", tag, backend.HeaderHash(&blk.Header))
		default:
			fmt.Fprintf(&out, "%s: %d %s; ", tag, blk.Number, blk.Hash)
		}
	}
	return out.String()
}

// blocksHeld says which blocks of hashes b holds, and which are canonical.
func blocksHeld(b backend.Backend, hashes []backend.Hash) string {
	ctx := context.Background()
	held := make([]byte, len(hashes))
	for i, h := range hashes {
		blk, err := b.BlockByHash(ctx, h)
		switch {
		case err != nil:
			held[i] = '-'
		case canonicalAt(b, blk.Number) == h:
			held[i] = 'c'
		default:
			held[i] = 's'
		}
	}
	return string(held)
}

func canonicalAt(b backend.Backend, n uint64) backend.Hash {
	blk, err := b.BlockByNumber(context.Background(), backend.BlockNumber(n))
	if err != nil {
		return backend.Hash{}
	}
	return blk.Hash
}

// copyOf copies the store in dir into a new memstore, with the blocks of
// hashes it holds, its tags and its pending block.
func copyOf(t *testing.T, dir string, hashes []backend.Hash) *memstore.Store {
	t.Helper()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var held []backend.Hash
	for _, h := range hashes {
		if _, err := s.BlockByHash(context.Background(), h); err == nil {
			held = append(held, h)
		}
	}
	c := memstore.New()
	if len(held) > 0 {
		backendtest.TestCopy(t, c, s, held...)
	}
	return c
}

// runChild runs the workload in a child process on dir and kills it
// (SIGKILL) after it reports write number at, and a pause. It returns the
// writes the child reported and whether it ended on its own.
func runChild(t *testing.T, exe, dir string, at int, pause time.Duration) (int, bool) {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^TestCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ops := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		n, err := strconv.Atoi(sc.Text())
		if err != nil {
			continue // the test binary's own lines
		}
		ops = n
		if ops >= at {
			time.Sleep(pause)
			cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	for sc.Scan() { // to the end of the output: the writes it did before it died
		if n, err := strconv.Atoi(sc.Text()); err == nil {
			ops = n
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return ops, true
	case errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled():
		return ops, false
	default:
		t.Fatalf("the child process failed: %v", err)
		return 0, false
	}
}

// crashChild is the child process: it runs the workload on dir and
// prints the number of each write done.
func crashChild(dir string) {
	s, err := Open(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n := 0
	if _, err := crashWorkload(s, func() { n++; fmt.Println(n) }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// checkConsistent checks what a store must hold whatever write it was
// stopped in: a canonical chain without gaps from the genesis, each block
// stored, indexed by hash and the child of the one below, with the total
// difficulty its parent's gives; the latest block the highest canonical,
// the tags on canonical blocks, every indexed hash stored. It returns the
// latest number.
func checkConsistent(t *testing.T, s *Store) uint64 {
	t.Helper()
	ctx := context.Background()
	var head uint64
	err := s.read(ctx, func(v *view) error {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCanonical}, UpperBound: []byte{prefixCanonical + 1}})
		if err != nil {
			return err
		}
		defer it.Close()
		var prev *backend.Block
		for ok := it.First(); ok; ok = it.Next() {
			n, _ := decodeUint64(it.Key()[1:])
			var h backend.Hash
			copy(h[:], it.Value())
			// A block not stored is an error of decoded's.
			r, err := v.decoded(blockRef{number: n, hash: h}, decodeAll)
			switch {
			case err != nil:
				return fmt.Errorf("canonical %w", err) // err names the block
			case r.block.Hash != h || r.block.Number != n:
				return fmt.Errorf("canonical %d (%s) holds block %d (%s)", n, h, r.block.Number, r.block.Hash)
			}
			if _, found, err := v.get(recordKey(n, h)); err != nil || found {
				return fmt.Errorf("canonical block %d (%s) is also stored as a side block (%v)", n, h, err)
			}
			if num, found, err := v.uint64(numberKey(h)); err != nil || !found || num != n {
				return fmt.Errorf("block %d (%s) by hash: %d, %v, %v", n, h, num, found, err)
			}
			b := r.block
			want := new(uint256.Int).Set(&b.Difficulty)
			switch {
			case prev == nil && n != 0:
				return fmt.Errorf("the canonical chain starts at %d", n)
			case prev != nil && n != prev.Number+1:
				return fmt.Errorf("the canonical chain jumps from %d to %d", prev.Number, n)
			case prev != nil && b.ParentHash != prev.Hash:
				return fmt.Errorf("canonical block %d's parent is %s, not the canonical %s", n, b.ParentHash, prev.Hash)
			case prev != nil:
				want.Add(want, prev.TotalDifficulty)
			}
			if b.TotalDifficulty == nil || !b.TotalDifficulty.Eq(want) {
				return fmt.Errorf("block %d: totalDifficulty %v, want %v", n, b.TotalDifficulty, want)
			}
			prev, head = b, n
		}
		if prev == nil {
			return nil // killed before the genesis was written
		}
		if g, ok := s.Genesis(); !ok {
			return errors.New("no genesis recorded")
		} else if ref, _, _ := v.findNumber(0); ref.hash != g {
			return fmt.Errorf("the genesis is %s, canonical block 0 %s", g, ref.hash)
		}
		hit, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixNumber}, UpperBound: []byte{prefixNumber + 1}})
		if err != nil {
			return err
		}
		defer hit.Close()
		for ok := hit.First(); ok; ok = hit.Next() {
			var h backend.Hash
			copy(h[:], hit.Key()[1:])
			n, _ := decodeUint64(hit.Value())
			if _, err := v.decoded(blockRef{number: n, hash: h}, decodeUncles); err != nil {
				return err // err names the block
			}
		}
		return it.Error()
	})
	if err != nil {
		t.Error(err)
		return head
	}
	if latest, err := s.BlockByNumber(ctx, backend.Latest); err == nil && latest.Number != head {
		t.Errorf("latest is %d, the highest canonical %d", latest.Number, head)
	}
	for _, tag := range []backend.BlockNumber{backend.Safe, backend.Finalized} {
		if b, err := s.BlockByNumber(ctx, tag); err != nil && !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("%s: %v", tag, err)
		} else if err == nil && b.Number > head {
			t.Errorf("%s is block %d, above the head %d", tag, b.Number, head)
		}
		if n, found, err := s.tag(tag); err != nil || found && n > head {
			t.Errorf("%s is %d (%v, %v), above the head %d", tag, n, found, err, head)
		}
	}
	if _, err := s.BlockByNumber(ctx, backend.Pending); err != nil && !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("pending: %v", err)
	}
	return head
}

// tag returns the number a tag holds, for tests.
func (s *Store) tag(tag backend.BlockNumber) (uint64, bool, error) {
	key := keySafe
	if tag == backend.Finalized {
		key = keyFinalized
	}
	var n uint64
	var found bool
	err := s.read(context.Background(), func(v *view) error {
		var err error
		n, found, err = v.uint64(key)
		return err
	})
	return n, found, err
}
