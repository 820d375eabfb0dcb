//go:build !cgo

package state

// LSMMemoryOffHeap says whether the pebble stores' block caches and
// memtables lie outside the Go heap. Without cgo, pebble allocates them
// as Go byte slices, inside the Go runtime's memory limit.
const LSMMemoryOffHeap = false
