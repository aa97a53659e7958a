package memstore

import (
	"runtime"
	"sync/atomic"
)

// An arena holds the encodings of a store's transactions, which live as
// long as the store: outside the Go heap where the system allows
// (arena_unix.go), in slabs mapped from the operating system. The garbage
// collector then neither scans them nor counts them in the heap whose size
// sets how far the heap may grow before the next collection: a chain held
// in the heap would double the process's memory with that headroom.
type arena struct {
	slab  []byte // the free end of the newest slab
	slabs *slabs // every slab, unmapped once the store is gone
}

// slabs are an arena's mappings, apart from the store so that the cleanup
// that unmaps them does not keep the store reachable.
type slabs struct{ mapped [][]byte }

// Slab sizes: small stores (a test's chain) take little, large ones few
// mappings.
const (
	minSlab = 64 << 10
	maxSlab = 4 << 20
)

// newArena returns the arena of s, whose slabs are unmapped once s is
// unreachable.
func newArena(s *Store) arena {
	a := arena{slabs: new(slabs)}
	runtime.AddCleanup(s, (*slabs).unmap, a.slabs)
	return a
}

// copy returns a copy of b in the arena's memory. The caller holds the
// store's write lock.
func (a *arena) copy(b []byte) []byte {
	if len(b) == 0 || !mapsSlabs {
		return append([]byte(nil), b...)
	}
	if len(b) > cap(a.slab) {
		size := minSlab
		if n := len(a.slabs.mapped); n > 0 {
			size = min(2*len(a.slabs.mapped[n-1]), maxSlab)
		}
		slab, err := mapSlab(max(size, len(b)))
		if err != nil {
			// Out of mappings or address space: the heap will do.
			return append([]byte(nil), b...)
		}
		a.slabs.mapped = append(a.slabs.mapped, slab)
		a.slab = slab[:0]
	}
	n := len(a.slab)
	a.slab = append(a.slab, b...)
	c := a.slab[n:len(a.slab):len(a.slab)]
	a.slab = a.slab[len(a.slab):]
	return c
}

func (s *slabs) unmap() {
	for _, slab := range s.mapped {
		err := unmapSlab(slab)
		if tell := unmapped.Load(); tell != nil {
			(*tell)(slab, err)
		}
	}
	s.mapped = nil
}

// unmapped, when set (by a test), is told of each slab unmapped: the
// address space's own record cannot tell, since the next mapping may reuse
// the range at once. Cleanups run on a goroutine of their own: hence the
// atomic.
var unmapped atomic.Pointer[func(slab []byte, err error)]
