//go:build unix

package memstore

import "syscall"

const mapsSlabs = true

func mapSlab(size int) ([]byte, error) {
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

func unmapSlab(slab []byte) error { return syscall.Munmap(slab) }
