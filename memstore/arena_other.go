//go:build !unix

package memstore

// Elsewhere the encodings are kept in the heap.
const mapsSlabs = false

func mapSlab(int) ([]byte, error) { panic("unreachable") }

func unmapSlab([]byte) error { return nil }
