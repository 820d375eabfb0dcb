package runtime

import (
	"context"
	"io"

	"github.com/weirstream/weir/internal/checkpoint"
)

// FaultPoint is a place in a subtask's life where its FaultInjector is
// asked whether to fail, stall or go on.
type FaultPoint uint8

const (
	// FaultBatch is before the subtask processes an input batch, or after
	// a source emitted a fetch; Records counts the records so far, the
	// batch's included.
	FaultBatch FaultPoint = iota + 1
	// FaultOpen is an operator's Open: Step 0 before it opens, Step 1
	// once it has opened (and restored its state).
	FaultOpen
	// FaultRestore is a read of restored state, inside an operator's
	// Open; Checkpoint is the restored checkpoint and Step counts the
	// operator's reads from 0.
	FaultRestore
	// FaultNewReader is a source about to open its reader.
	FaultNewReader
	// FaultCommit is a sink about to commit the transactions of
	// checkpoint Checkpoint; an error here leaves them uncommitted.
	FaultCommit
	// FaultCommitted is a sink that has just committed them; an error here
	// fails the subtask although the commit took effect.
	FaultCommitted
	// FaultSync is a step of the synchronous part of checkpoint
	// Checkpoint, on the subtask's goroutine: Step 0 before the barrier
	// goes downstream, Step i in 1..n before the snapshot of the chain's
	// i-th operator (Operator), Step n+1 after the last; Steps is n+2.
	FaultSync
	// FaultAsync is a step of the asynchronous part of checkpoint
	// Checkpoint, on the goroutine that writes the snapshot: Step k below
	// Steps-2 before the k-th state write, Steps-2 before the subtask
	// acknowledges the checkpoint, Steps-1 after. An error fails the
	// subtask; before the acknowledgement it also abandons the write.
	// The step before the write of an unaligned checkpoint's channel
	// state (once it is complete, whether or not anything was in flight)
	// has Path, the channel state file's name ("<uid>-<subtask>-channels").
	FaultAsync
	// FaultRestoreChannels is the read of the channel state of an
	// unaligned checkpoint, before the subtask reads any input;
	// Checkpoint is the restored checkpoint, Operator the chain's head.
	FaultRestoreChannels
	// FaultStateStore is an operation on a file of a keyed operator's
	// embedded LSM store, on its subtask's goroutine or on the store's
	// own: Step 0 a read, Step 1 a write (creating, writing, syncing,
	// renaming, removing); Path is the file; Operator the keyed
	// operator. An error is the disk's: the store fails the state access
	// or snapshot that meets it, which fails the subtask.
	FaultStateStore
)

// FaultSite says where a subtask reached a fault point.
type FaultSite struct {
	Point FaultPoint
	Task  checkpoint.TaskID
	// Attempt is the job master's restart count when the subtask was
	// deployed.
	Attempt int
	// Operator is the uid of the chain's operator concerned (Open,
	// Restore, NewReader, Commit, Committed, and Sync's operator steps).
	Operator string
	// Records is the number of records the subtask has taken in since it
	// was deployed.
	Records int64
	// Checkpoint is the checkpoint concerned (Restore, Commit, Committed,
	// Sync, Async).
	Checkpoint int64
	// Step and Steps place the site within its point (see FaultPoint).
	Step, Steps int
	// Restored is the checkpoint the subtask was deployed from, 0 if none.
	Restored int64
	// Path is the file of a FaultStateStore operation, or the channel
	// state file at its FaultAsync step.
	Path string
}

// FaultInjector lets tests fail, stall or slow a subtask at a chosen
// moment. It is asked at every fault point of every subtask; a non-nil
// error fails the subtask there. It may block, to make the subtask slow or
// hung, until ctx (the subtask's) is done. It is called concurrently, from
// the subtasks' goroutines and from their asynchronous snapshot writers.
type FaultInjector interface {
	Inject(ctx context.Context, site FaultSite) error
}

// fault asks the injector, if any, about site in this subtask.
func (t *Task) fault(ctx context.Context, site FaultSite) error {
	if t.opts.faults == nil {
		return nil
	}
	site.Task, site.Attempt, site.Records = t.id, t.opts.attempt, t.recordsIn.Load()
	if t.restore != nil && t.restore.Metadata != nil {
		site.Restored = t.restore.Metadata.CheckpointID
	}
	return t.opts.faults.Inject(ctx, site)
}

// InjectFault asks the job's fault injector, if any, about site in the
// operator's subtask: the subtask, attempt and operator are filled in. A
// non-nil error is the operator's to return, which fails the subtask.
// Operators call it where only they know a fault point is reached (a
// source opening its reader, a sink committing).
func (c *OperatorContext) InjectFault(site FaultSite) error {
	if c.task == nil || c.task.opts.faults == nil {
		return nil
	}
	site.Operator = c.UID
	return c.task.fault(c, site)
}

// FaultsInjected reports whether the job has a fault injector, for
// operators that must set up their fault points beforehand (an embedded
// store's file system).
func (c *OperatorContext) FaultsInjected() bool {
	return c.task != nil && c.task.opts.faults != nil
}

// faultReader asks the injector before every read of restored state.
type faultReader struct {
	under StateReader
	t     *Task
	uid   string
	id    int64
	reads int
}

func (r *faultReader) ReadState(ctx context.Context, h checkpoint.StateHandle) ([]byte, error) {
	if err := r.fault(ctx); err != nil {
		return nil, err
	}
	return r.under.ReadState(ctx, h)
}

// OpenState asks the injector before it opens the state, and again when
// the reader reaches its end: a fault there fails the restore after part
// of the state was loaded.
func (r *faultReader) OpenState(ctx context.Context, h checkpoint.StateHandle) (io.ReadCloser, error) {
	if err := r.fault(ctx); err != nil {
		return nil, err
	}
	rc, err := r.under.OpenState(ctx, h)
	if err != nil {
		return nil, err
	}
	return &faultAtEnd{ReadCloser: rc, ctx: ctx, r: r}, nil
}

func (r *faultReader) fault(ctx context.Context) error {
	step := r.reads
	r.reads++
	return r.t.fault(ctx, FaultSite{Point: FaultRestore, Operator: r.uid, Checkpoint: r.id, Step: step})
}

// faultAtEnd asks its faultReader's injector when the state it reads
// ends, and returns the fault instead of io.EOF.
type faultAtEnd struct {
	io.ReadCloser
	ctx   context.Context
	r     *faultReader
	asked bool
}

func (f *faultAtEnd) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if err == io.EOF && !f.asked {
		f.asked = true
		if ferr := f.r.fault(f.ctx); ferr != nil {
			return n, ferr
		}
	}
	return n, err
}
