// Package state holds the state of stream operators: keyed state (value,
// list, map, reducing and aggregating state, scoped to the current key and
// a namespace), timers, and operator list state, with checkpoint snapshots
// that can be restored at a different parallelism.
//
// # Key groups
//
// As in Flink, keys are hashed (HasherFor, deterministic across processes)
// into maxParallelism key groups (KeyGroupFor), and each subtask owns a
// contiguous range of key groups (RangeForSubtask). State is snapshotted
// per key group, so a rescaled job restores whole key groups into their
// new owners.
//
// # Ownership
//
// A backend belongs to its subtask's goroutine; nothing on the record path
// takes a lock. The only concurrent access is the serialization of a
// snapshot (KeyedSnapshot.WriteTo, OperatorSnapshot.WriteTo) on another
// goroutine while the owner keeps processing records.
//
// # Snapshots
//
// KeyedBackend.Snapshot is the synchronous part of a checkpoint and copies no
// entries: it records pointers to the shards of every state and advances
// an epoch. Afterwards the owner copies a shard (or a list's, map's or
// accumulator's container) before its first modification while a pending
// snapshot may share it, so the snapshot stays exactly as it was taken.
// KeyedSnapshot.Release, run on the owner's goroutine once the snapshot is
// written, lets the owner modify in place again. See table.go for the
// invariants.
//
// Because stored values are shared with pending snapshots, a value given
// to the state (Update, Add, Put, AddAll) must not be modified afterwards,
// and a value read from it (Value, Get, All) must not be modified in place.
// State that the backend builds or hands to user functions itself (lists,
// maps, reduced values and accumulators passed to Reduce, Add and Merge) is
// copied when needed, so modifying it through the API is always safe.
//
// # Incremental snapshots
//
// A backend created WithIncrementalSnapshots stamps every entry with the
// epoch it was last written in and keeps tombs of removals, so that
// IncrementalSnapshot can write a delta: the changes since the snapshot of
// an earlier checkpoint. A chain of a full snapshot and the deltas after
// it restores with RestoreChain (see delta.go).
//
// # Format
//
// Snapshots serialize to a versioned, checksummed format (see format.go):
// a header naming the states and their kinds, then one CRC-32C-protected
// block per key group (or per operator state). A restore verifies every
// checksum and the block sequence before loading anything, can take any
// subset of key groups, and can combine the snapshots of several old
// subtasks.
package state
