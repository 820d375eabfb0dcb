package stream

import (
	"context"
	"strconv"
	"strings"

	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runtime"
)

// FaultPoint is a place in a running job where a FaultFunc is asked
// whether to fail, stall or go on. Package streamtest declares faults
// against these points.
type FaultPoint uint8

const (
	// FaultBatch is before a subtask processes an input batch, or after a
	// source subtask emitted a fetch; FaultSite.Records counts the
	// subtask's records so far, the batch's included.
	FaultBatch FaultPoint = iota + 1
	// FaultOpen is an operator's Open: Step 0 before it opens, Step 1 once
	// it has opened and restored its state.
	FaultOpen
	// FaultRestore is a read of restored state inside an operator's Open;
	// Checkpoint is the restored checkpoint, Step counts the operator's
	// reads from 0.
	FaultRestore
	// FaultNewReader is a source about to open its connector's reader: an
	// error is the reader failing to open, a hang is a NewReader that
	// does not return until the subtask is canceled.
	FaultNewReader
	// FaultCommit is a sink about to commit the transactions of
	// checkpoint Checkpoint: an error leaves them uncommitted.
	FaultCommit
	// FaultCommitted is a sink that has just committed them: an error
	// fails the subtask although the commit took effect, so the commit
	// after the restore must not make the output visible twice.
	FaultCommitted
	// FaultSync is a step of checkpoint Checkpoint's synchronous part, on
	// the subtask's goroutine: Step 0 before the barrier goes downstream,
	// Step i in 1..n before the snapshot of the chain's i-th operator
	// (Operator), Step n+1 after the last; Steps is n+2.
	FaultSync
	// FaultAsync is a step of checkpoint Checkpoint's asynchronous part,
	// which writes the snapshot while the subtask goes on: Step k below
	// Steps-2 before the k-th state write, Steps-2 before the subtask
	// acknowledges the checkpoint, Steps-1 after. An error fails the
	// subtask; before the acknowledgement it also abandons the write.
	FaultAsync
	// FaultStorageWrite, FaultStorageRead, FaultStorageStat,
	// FaultStorageList and FaultStorageDelete are operations on the
	// job's checkpoint storage (execution.checkpointing.dir) by any part
	// of the job: state and _metadata writes, restores' reads, retention's
	// lists and deletes. Path is the object's key (a list's prefix);
	// Checkpoint is the checkpoint whose directory it is in, if any; Task
	// is zero. An error fails the operation, with what follows from it (a
	// checkpoint declined, a restore failed, a file left behind).
	FaultStorageWrite
	FaultStorageRead
	FaultStorageStat
	FaultStorageList
	FaultStorageDelete
	// FaultRestoreChannels is the read of an unaligned checkpoint's
	// channel state (the records that were in flight into the subtask),
	// before the subtask reads any input; Checkpoint is the restored
	// checkpoint, Operator the uid of the chain's head.
	FaultRestoreChannels
	// FaultStateStore is an operation on a file of a keyed operator's
	// embedded LSM store (state.backend.type pebble, rocksdb or forst):
	// Step 0 a read, Step 1 a write (creating, writing, syncing, renaming,
	// removing a file); Path is the file, Operator the keyed operator's
	// uid. An error is the disk failing: the state access or snapshot
	// that meets it fails the subtask, which restores from its
	// checkpoint. Pebble's own background work (flushes, compactions)
	// meets these errors too; the store then fails the next write.
	FaultStateStore
)

var faultPointNames = [...]string{
	FaultBatch: "batch", FaultOpen: "open", FaultRestore: "restore", FaultNewReader: "new-reader",
	FaultCommit: "commit", FaultCommitted: "committed", FaultSync: "sync", FaultAsync: "async",
	FaultStorageWrite: "storage-write", FaultStorageRead: "storage-read", FaultStorageStat: "storage-stat",
	FaultStorageList: "storage-list", FaultStorageDelete: "storage-delete", FaultRestoreChannels: "restore-channels",
	FaultStateStore: "state-store",
}

func (p FaultPoint) String() string {
	if int(p) < len(faultPointNames) && faultPointNames[p] != "" {
		return faultPointNames[p]
	}
	return "FaultPoint(" + strconv.Itoa(int(p)) + ")"
}

// Storage reports whether p is an operation on checkpoint storage.
func (p FaultPoint) Storage() bool { return p >= FaultStorageWrite && p <= FaultStorageDelete }

// FaultSite says where a running job reached a fault point.
type FaultSite struct {
	Point FaultPoint
	// Task is the subtask (zero for storage operations).
	Task TaskInfo
	// Attempt is the job's restart count when the subtask was deployed.
	Attempt int
	// Operator is the uid of the operator concerned, when the point is
	// about one (Open, Restore, NewReader, Commit, Committed, and the
	// operator steps of Sync).
	Operator string
	// Records is the number of records the subtask has taken in since it
	// was deployed.
	Records int64
	// Checkpoint is the checkpoint concerned, 0 if none.
	Checkpoint int64
	// Step and Steps place the site within its point (see FaultPoint).
	Step, Steps int
	// Restored is the checkpoint the subtask was deployed from, 0 if it
	// started without state.
	Restored int64
	// Path is a storage operation's object key, the file of a
	// FaultStateStore operation, or, at the FaultAsync step before an
	// unaligned checkpoint's channel state is written, that file's name
	// ("<uid>-<subtask>-channels").
	Path string
}

// FaultFunc is asked at every fault point of a job; a non-nil error fails
// the subtask (or storage operation) there. It may block, to make a
// subtask slow or hung, until ctx (the subtask's, or the storage
// operation's) is done: a hung subtask is canceled when the job fails
// over, for example after its checkpoints time out. It is called
// concurrently, from every subtask's goroutine and from the goroutines
// that write snapshots, and must be safe for that. It exists to test
// recovery; package streamtest builds one from declarative faults.
type FaultFunc func(ctx context.Context, site FaultSite) error

// WithFaults installs a fault injector (tests, chaos drills). Storage
// faults reach the job only when it checkpoints to
// execution.checkpointing.dir.
func WithFaults(f FaultFunc) Option { return func(e *Environment) { e.faults = f } }

// faultInjector adapts a FaultFunc to the runtime.
type faultInjector FaultFunc

var runtimePoints = map[runtime.FaultPoint]FaultPoint{
	runtime.FaultBatch: FaultBatch, runtime.FaultOpen: FaultOpen, runtime.FaultRestore: FaultRestore,
	runtime.FaultNewReader: FaultNewReader, runtime.FaultCommit: FaultCommit, runtime.FaultCommitted: FaultCommitted,
	runtime.FaultSync: FaultSync, runtime.FaultAsync: FaultAsync, runtime.FaultRestoreChannels: FaultRestoreChannels,
	runtime.FaultStateStore: FaultStateStore,
}

func (f faultInjector) Inject(ctx context.Context, s runtime.FaultSite) error {
	return f(ctx, FaultSite{
		Point:      runtimePoints[s.Point],
		Task:       TaskInfo{Vertex: s.Task.Vertex, Subtask: s.Task.Subtask},
		Attempt:    s.Attempt,
		Operator:   s.Operator,
		Records:    s.Records,
		Checkpoint: s.Checkpoint,
		Step:       s.Step,
		Steps:      s.Steps,
		Restored:   s.Restored,
		Path:       s.Path,
	})
}

var storagePoints = map[storage.Op]FaultPoint{
	storage.OpWrite: FaultStorageWrite, storage.OpRead: FaultStorageRead, storage.OpStat: FaultStorageStat,
	storage.OpList: FaultStorageList, storage.OpDelete: FaultStorageDelete,
}

// storageFaults routes the operations on the job's checkpoint storage
// through the environment's FaultFunc.
func (e *Environment) storageFaults() func(ctx context.Context, op storage.Op, key string) error {
	f := e.faults
	return func(ctx context.Context, op storage.Op, key string) error {
		return f(ctx, FaultSite{Point: storagePoints[op], Path: key, Checkpoint: checkpointOfKey(key)})
	}
}

// checkpointOfKey returns n for a key in a "chk-<n>" directory or of a
// file checkpoint n wrote in shared/ ("shared/<n>-..."), else 0.
func checkpointOfKey(key string) int64 {
	shared := false
	for el := range strings.SplitSeq(key, "/") {
		if shared {
			if id, _, ok := storage.ParseStatePath(storage.SharedDir + "/" + el); ok {
				return id
			}
		}
		shared = el == storage.SharedDir
		if s, ok := strings.CutPrefix(el, "chk-"); ok {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n
			}
		}
	}
	return 0
}
