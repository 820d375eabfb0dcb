package coordinator

import (
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
)

// Output is an effect the caller performs, in the order returned. The set
// is closed: Trigger, WriteMetadata, NotifyComplete, NotifyAbort, Discard
// and FailJob.
type Output interface{ output() }

// Trigger asks the caller to start checkpoint ID at Tasks: each injects
// barrier ID behind the last record it read and snapshots its state. Tasks
// are the running sources and, after some tasks finished, the running tasks
// whose inputs have all finished.
type Trigger struct {
	ID        int64
	Kind      checkpoint.Kind
	Timestamp time.Time
	Tasks     []checkpoint.TaskID
	// Mode and Unaligned tell the barrier handlers how to align. Unaligned
	// is never set for a savepoint.
	Mode      config.CheckpointingMode
	Unaligned bool
}

// WriteMetadata asks the caller to write the checkpoint's _metadata durably
// (last, atomically) and report the result with MetadataWritten. Every task
// has acknowledged, but the checkpoint is not complete until the write
// succeeds: it must not be used for recovery, and tasks must not be told,
// before then.
type WriteMetadata struct {
	Metadata checkpoint.Metadata
}

// NotifyComplete tells Tasks that checkpoint ID completed: sinks commit
// their transactions, sources may commit offsets. It is sent for
// checkpoints only; as in Flink, a savepoint's completion is not announced,
// so that taking one commits no side effects.
type NotifyComplete struct {
	ID    int64
	Tasks []checkpoint.TaskID
}

// NotifyAbort tells Tasks that checkpoint ID was aborted: they stop
// aligning for it and drop its snapshots. The caller also deletes the files
// the checkpoint wrote to its own location (chk-ID/, and its _metadata if a
// write was in flight); state in shared/ is left to whoever references it.
// Reason is an *AbortError.
type NotifyAbort struct {
	ID     int64
	Reason error
	Tasks  []checkpoint.TaskID
}

// Discard asks the caller to delete completed checkpoint ID, which has
// fallen out of the num-retained newest. It is never sent for a savepoint.
type Discard struct {
	ID int64
}

// FailJob asks the caller to fail the job over: more consecutive
// checkpoints failed than are tolerated. Reason wraps
// ErrTolerableFailuresExceeded. Checkpointing is suspended until Restart
// (or Start).
type FailJob struct {
	Reason error
}

func (Trigger) output()        {}
func (WriteMetadata) output()  {}
func (NotifyComplete) output() {}
func (NotifyAbort) output()    {}
func (Discard) output()        {}
func (FailJob) output()        {}
