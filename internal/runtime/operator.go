package runtime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/state"
)

// Operator is the lifecycle every operator of a chain implements. All calls
// come from the subtask's goroutine. Records arrive through the operator's
// typed Input(s), which the vertex's builder wires.
type Operator interface {
	// Open prepares the operator, restoring its state from ctx.Restored if
	// the subtask is recovering.
	Open(ctx *OperatorContext) error
	// ProcessWatermark is called when the operator's event time advances.
	// The operator fires its event-time timers and then forwards the
	// watermark to its output.
	ProcessWatermark(wm int64) error
	// Snapshot takes the synchronous part of checkpoint id: it must not
	// copy large state, and what it returns must not change when the
	// operator goes on processing.
	Snapshot(id int64) (Snapshot, error)
	// NotifyCheckpointComplete tells the operator checkpoint id is complete
	// (a transactional sink commits here).
	NotifyCheckpointComplete(id int64) error
	// Finish is called at the end of input: the operator emits what it
	// still holds (e.g. fires all windows).
	Finish() error
	// Close releases resources; it is called on every exit path.
	Close() error
}

// Snapshot is an operator's synchronous snapshot. The asynchronous part
// writes Keyed and Operator to checkpoint storage while the subtask goes
// on; Release is called back on the subtask's goroutine afterwards.
type Snapshot struct {
	// Keyed writes the keyed state; nil if the operator has none.
	Keyed io.WriterTo
	// KeyGroups is the range Keyed covers.
	KeyGroups checkpoint.KeyGroupRange
	// KeyedShared says that later checkpoints may name Keyed's file
	// (the piece of a heap backend's incremental chain): in a
	// checkpoint it goes to the job's shared/ directory.
	KeyedShared bool
	// KeyedFiles, for keyed state kept in an embedded store and
	// snapshotted in its own files, are those files; their handles follow
	// Keyed's in the checkpoint, each naming its File.
	KeyedFiles []KeyedFile
	// Written, if set, is called once Keyed and KeyedFiles are written,
	// on the goroutine that wrote them, with their handles: Keyed's
	// first, then those of KeyedFiles.
	Written func(keyed []checkpoint.StateHandle)
	// Operator is the non-keyed state, already serialized.
	Operator []byte
	// Release is called on the subtask's goroutine once the snapshot is
	// written or abandoned (copy-on-write state stops preserving it).
	Release func()
}

// KeyedFile is a file of a keyed snapshot in an embedded store's own
// files (see Snapshot.KeyedFiles).
type KeyedFile struct {
	// Name is the file's name in the store's snapshot.
	Name string
	// Path is where the file is on local disk.
	Path string
	// Reuse, if set, is the handle of the same file that an earlier
	// checkpoint wrote: the checkpoint names it instead of writing the
	// file again.
	Reuse *checkpoint.StateHandle
	// Shared says that later checkpoints may name the file (Reuse): in a
	// checkpoint it goes to the job's shared/ directory.
	Shared bool
}

// StateStore writes and reads state in checkpoint storage.
type StateStore interface {
	StateReader
	// WriteState writes a piece of checkpoint checkpointID's state.
	WriteState(ctx context.Context, checkpointID int64, name string, write func(io.Writer) error) (checkpoint.StateHandle, error)
	// WriteSharedState writes a piece of checkpoint checkpointID's
	// state that later checkpoints may name too: into the job's shared/
	// directory, under a name of its own (see storage.CreateSharedState).
	WriteSharedState(ctx context.Context, checkpointID int64, name string, write func(io.Writer) error) (checkpoint.StateHandle, error)
	// WriteSavepointState writes a piece of the state of the savepoint
	// being written in directory dir (a Barrier's Target); the handle's
	// path is relative to dir.
	WriteSavepointState(ctx context.Context, dir, name string, write func(io.Writer) error) (checkpoint.StateHandle, error)
}

// StateReader reads state, verifying its checksum: ReadState returns it
// whole, OpenState streams it, verifying it as the reader reaches its
// end, so a caller that loads what it reads before then must be able to
// discard it.
type StateReader interface {
	ReadState(ctx context.Context, h checkpoint.StateHandle) ([]byte, error)
	OpenState(ctx context.Context, h checkpoint.StateHandle) (io.ReadCloser, error)
}

// Restored is the state an operator restores from: its uid's state in the
// checkpoint, for every subtask of the run that took it, so a rescaled
// subtask can pick the key groups and splits it now owns.
type Restored struct {
	CheckpointID int64
	State        *checkpoint.OperatorState
	Store        StateReader
	// Own says this job wrote the checkpoint (a failover's restore, not a
	// resume of another job's): only then may its files be named by this
	// job's checkpoints.
	Own bool
}

// KeyedHandles returns the keyed state handles that overlap kg.
func (r *Restored) KeyedHandles(kg checkpoint.KeyGroupRange) []checkpoint.StateHandle {
	if r == nil || r.State == nil {
		return nil
	}
	var hs []checkpoint.StateHandle
	for _, st := range r.State.Subtasks {
		for _, h := range st.Keyed {
			if h.KeyGroups == nil || h.KeyGroups.End < kg.Start || h.KeyGroups.Start > kg.End {
				continue
			}
			hs = append(hs, h)
		}
	}
	return hs
}

// OperatorContext is what an operator gets at Open.
type OperatorContext struct {
	context.Context
	// JobID is the id of the job the operator runs in.
	JobID          string
	UID            string
	Name           string
	Subtask        int
	Parallelism    int
	MaxParallelism int
	// KeyGroups is the range of key groups this subtask owns.
	KeyGroups checkpoint.KeyGroupRange
	// Restored is nil on a fresh start.
	Restored *Restored
	// Splits is a source's assignment from the job master: the splits
	// the subtask reads (more may come through SplitReceiver). Nil for
	// other operators, and for a source vertex whose splits the job
	// master does not list (Vertex.ListSplits): the source lists them
	// and takes split i if i mod Parallelism is Subtask.
	Splits *SplitAssignment
	// Watermark is the operator's event time when it opens: MinWatermark,
	// or the watermark the restored checkpoint recorded for the subtask.
	// Its event-time timers up to it fired before the checkpoint;
	// ProcessWatermark is called only with later watermarks.
	Watermark int64
	Logger    *slog.Logger
	// KeyedState says where a keyed operator keeps its state.
	KeyedState KeyedStateOptions

	task *Task
}

// KeyedStateOptions says where keyed operators keep their state: the
// job's state.backend.type, and for the embedded LSM backend its
// directory and memory.
type KeyedStateOptions struct {
	Backend config.StateBackend
	// Dir is where an embedded LSM store makes its working directory; ""
	// is the system's temporary directory.
	Dir string
	// Memory bounds each keyed operator subtask's embedded LSM store; 0 is
	// its default. It is not used when SlotMemory is set.
	Memory int64
	// SlotMemory, if not 0, bounds the embedded LSM stores of the keyed
	// operator subtasks of one slot together (subtask i of every vertex
	// runs in slot i): state.backend.rocksdb.memory.fixed-per-slot, or a
	// slot's share of managed memory.
	SlotMemory int64
	// Slot is the shared budget of the subtask's slot, set by the worker
	// for each subtask when SlotMemory is; SlotErr says why it could not
	// be made.
	Slot    *state.SlotMemory
	SlotErr error
	// HeapTimers keeps the timers of an embedded LSM store's operators in
	// memory rather than in the store.
	HeapTimers bool
	// Incremental takes incremental checkpoints: the embedded LSM store's
	// in its own files, written only when an earlier checkpoint does not
	// hold them; the heap's as deltas over the earlier checkpoints' keyed
	// state (state.KeyedBackend.IncrementalSnapshot).
	Incremental bool
}

// Now returns the processing time.
func (c *OperatorContext) Now() time.Time { return c.task.clock.Now() }

// Snapshotting says, while the subtask takes a snapshot, whether it is a
// savepoint's, and which checkpoint an incremental snapshot may build on:
// the latest checkpoint completed when this one was triggered (0: none),
// whose files it may name instead of writing them again. The job master
// keeps that checkpoint until every checkpoint built on it has completed
// or failed.
func (c *OperatorContext) Snapshotting() (savepoint bool, base int64) {
	b := c.task.snapshotting
	return b.Savepoint, b.Base
}

// SnapshottingNative reports whether the snapshot being taken is a
// savepoint in the backends' own format (checkpoint.FormatNative).
func (c *OperatorContext) SnapshottingNative() bool {
	b := c.task.snapshotting
	return b.Savepoint && b.Native
}

// ErrInterrupted is returned (possibly wrapped) by an operator's
// ProcessWatermark that stopped firing its event-time timers because
// Interrupted said so, without forwarding the watermark. The subtask takes
// its snapshot, then calls ProcessWatermark with the same watermark
// again, which fires the timers still due and forwards it: the burst goes
// on where it stopped. A snapshot taken so records that timers are still
// due, and a subtask restored from it fires them before anything else.
var ErrInterrupted = errors.New("runtime: interrupted by a snapshot")

// Interrupted reports whether an unaligned barrier has gone out and the
// subtask's snapshot waits for the operator to return. An operator in a
// burst of work made of independent steps (timers firing, say) checks it
// between steps and returns, so the snapshot need not wait for the whole
// burst: ProcessWatermark with ErrInterrupted, a processing-time callback
// by scheduling the rest anew. A single step (one record, one timer)
// is never split: what it emits meanwhile goes out without waiting, as
// channel state.
func (c *OperatorContext) Interrupted() bool { return c.task != nil && c.task.interrupt }

// AtProcessingTime runs f on the subtask's goroutine at or after t.
func (c *OperatorContext) AtProcessingTime(t time.Time, f func() error) {
	c.task.schedule(t, f)
}

// ReportWatermark reports a source's watermark to the job master, for
// the watermark alignment of its vertex (Vertex.Alignment).
func (c *OperatorContext) ReportWatermark(wm int64) {
	c.task.master.reportWatermark(c.task.id, wm)
}

// SetIdle tells downstream subtasks that this subtask has no data for now
// (idle: its watermark must not hold event time back) or has again.
func (c *OperatorContext) SetIdle(idle bool) error {
	t := c.task
	if t.idle == idle {
		return nil
	}
	t.idle = idle
	kind := msgActive
	if idle {
		kind = msgIdle
	}
	return t.broadcast(message{kind: kind})
}

// KeyGroupsFor returns the key groups subtask index owns among
// parallelism subtasks: Flink's contiguous ranges.
func KeyGroupsFor(maxParallelism, parallelism, index int) checkpoint.KeyGroupRange {
	start := (index*maxParallelism + parallelism - 1) / parallelism
	end := ((index+1)*maxParallelism - 1) / parallelism
	return checkpoint.KeyGroupRange{Start: start, End: end}
}
