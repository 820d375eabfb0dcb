//go:build cgo

package state

// LSMMemoryOffHeap says whether the pebble stores' block caches and
// memtables lie outside the Go heap. Pebble allocates them with C's
// malloc in a cgo build, so the Go runtime's memory limit does not see
// them.
const LSMMemoryOffHeap = true
