package memstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestArenaCopies copies encodings of every size, slabs and larger, and
// finds each intact after all the others, with no room to grow into the
// next.
func TestArenaCopies(t *testing.T) {
	s := New()
	rng := rand.New(rand.NewPCG(1, 2))
	var want, got [][]byte
	for _, size := range []int{1, 7, minSlab - 1, minSlab, minSlab + 1, 3 * maxSlab, 100, maxSlab} {
		for range 3 {
			b := make([]byte, size)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			want = append(want, b)
			got = append(got, s.arena.copy(b))
		}
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("copy %d (%d bytes) changed", i, len(want[i]))
		}
		if cap(got[i]) != len(got[i]) {
			t.Fatalf("copy %d has room past its end: len %d, cap %d", i, len(got[i]), cap(got[i]))
		}
	}
	if mapsSlabs && len(s.arena.slabs.mapped) < 3 {
		t.Errorf("%d slabs mapped for %d copies up to %d bytes", len(s.arena.slabs.mapped), len(got), 3*maxSlab)
	}
	runtime.KeepAlive(s)
}

// TestArenaGoesWithTheStore drops a store and finds its slabs unmapped.
func TestArenaGoesWithTheStore(t *testing.T) {
	if !mapsSlabs {
		t.Skip("the encodings are in the heap on this system")
	}
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("no /proc/self/maps to read the mappings from")
	}
	s := New()
	s.arena.copy(make([]byte, 1000))
	if len(s.arena.slabs.mapped) != 1 {
		t.Fatalf("%d slabs mapped, want 1", len(s.arena.slabs.mapped))
	}
	// The kernel may merge the slab with the mappings beside it: it is
	// mapped while a range holds its address.
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(s.arena.slabs.mapped[0])))
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.Lines(string(maps)) {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			found = true
		}
	}
	if !found {
		t.Fatalf("the slab at %#x is not in /proc/self/maps", addr)
	}

	// Whether the range is mapped afterwards says nothing: any mapping
	// made since may have taken it. The unmapping itself is watched.
	done := make(chan error, 1)
	tell := func(slab []byte, err error) {
		if uintptr(unsafe.Pointer(unsafe.SliceData(slab))) == addr {
			done <- err
		}
	}
	unmapped.Store(&tell)
	defer unmapped.Store(nil)
	s = nil
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("unmapping the slab of an unreachable store: %v", err)
			}
			return
		case <-deadline:
			t.Fatal("the slabs of an unreachable store are not unmapped after 10s")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
