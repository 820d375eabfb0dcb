package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
)

// A savepoint is a checkpoint the user asks for, into a directory of its
// own that weir never deletes: always aligned, written as a checkpoint is
// (the subtasks write their state into the savepoint's directory, which
// the barrier names, and the job master its _metadata last), but never
// used for a failover, never subsuming a checkpoint and never committing
// a sink's transactions, as Flink does for savepoints that do not stop
// the job. A restore from it (execution.state-recovery.path) commits or
// aborts what its sinks had pending.

// savepointOp is a savepoint the job master is taking for a caller of
// TriggerSavepoint.
type savepointOp struct {
	w SavepointWriter
	// done is closed once path or err is set.
	done chan struct{}
	path string
	err  error
}

func (op *savepointOp) resolve(path string, err error) {
	op.path, op.err = path, err
	close(op.done)
}

// ErrSavepointsUnsupported is why a job without checkpoint storage cannot
// take a savepoint.
var ErrSavepointsUnsupported = errors.New("savepoints need checkpointing with checkpoint storage (execution.checkpointing.interval and execution.checkpointing.dir)")

// TriggerSavepoint takes a savepoint of the job in a new directory under
// dir (a local path or a URL of the checkpoint storage's kinds; ""
// means CheckpointingOptions.SavepointDir) and
// returns the savepoint's path once its _metadata is written, or why it
// failed. While a checkpoint is pending that the savepoint may not run
// beside (unaligned checkpoints allow one at a time) it waits for it. It
// fails when the job is restarting (not every subtask is running), ends,
// or ctx is done; a savepoint that fails leaves nothing behind.
func (jm *JobMaster) TriggerSavepoint(ctx context.Context, dir string) (string, error) {
	if jm.coord == nil || jm.storage == nil {
		return "", ErrSavepointsUnsupported
	}
	if dir == "" {
		dir = jm.opts.Checkpointing.SavepointDir
	}
	if dir == "" {
		return "", errors.New("no savepoint directory: name one, or set execution.checkpointing.savepoint-dir")
	}
	w, err := jm.storage.CreateSavepoint(ctx, dir)
	if err != nil {
		return "", fmt.Errorf("creating a savepoint under %s: %w", dir, err)
	}
	op := &savepointOp{w: w, done: make(chan struct{})}
	jm.post(func() error { return jm.startSavepoint(op) })
	select {
	case <-op.done:
		return op.path, op.err
	case <-ctx.Done():
		// The job master still ends the savepoint (it completes or is
		// aborted and deleted); the caller no longer waits for it.
		return "", context.Cause(ctx)
	case <-jm.stopped:
		select {
		case <-op.done:
			return op.path, op.err
		default:
			return "", errors.New("the job ended before the savepoint completed")
		}
	}
}

// startSavepoint triggers op's savepoint, or queues it behind the pending
// checkpoint that keeps it from starting.
func (jm *JobMaster) startSavepoint(op *savepointOp) error {
	if jm.restarting > 0 {
		jm.failSavepoint(op, errors.New("not all subtasks are running: the job is restarting"))
		return nil
	}
	id, acts, err := jm.coord.TriggerManual(jm.clock.Now(), checkpoint.KindSavepoint)
	if errors.Is(err, coordinator.ReasonTooManyConcurrent) {
		jm.queuedSavepoints = append(jm.queuedSavepoints, op)
		return nil
	}
	if err != nil {
		jm.failSavepoint(op, fmt.Errorf("triggering a savepoint: %w", err))
		return jm.perform(jm.ctx, acts)
	}
	jm.savepoints[id] = op
	return jm.perform(jm.ctx, acts)
}

// retrySavepoints starts the savepoints queued behind a checkpoint, if
// it has since completed or been aborted (they queue again if not).
func (jm *JobMaster) retrySavepoints() error {
	queued := jm.queuedSavepoints
	jm.queuedSavepoints = nil
	for _, op := range queued {
		if err := jm.startSavepoint(op); err != nil {
			return err
		}
	}
	return nil
}

// failSavepoint deletes what op's savepoint wrote, on the storage queue
// behind its writes, and reports err.
func (jm *JobMaster) failSavepoint(op *savepointOp, err error) {
	jm.store.post(storageOp{ctx: jm.ctx, write: func(ctx context.Context) {
		if aerr := op.w.Abort(context.WithoutCancel(ctx)); aerr != nil {
			jm.log.Warn("deleting a failed savepoint", "path", op.w.Path(), "err", aerr)
		}
		op.w.Close()
	}})
	op.resolve("", err)
}

// savepointAborted ends savepoint id's operation, if it is one, with the
// reason the coordinator aborted it.
func (jm *JobMaster) savepointAborted(id int64, reason error) {
	op := jm.savepoints[id]
	if op == nil {
		return
	}
	delete(jm.savepoints, id)
	if reason == nil {
		reason = errors.New("aborted")
	}
	jm.failSavepoint(op, fmt.Errorf("savepoint %d failed: %w", id, reason))
}

// savepointWritten ends savepoint id's operation once its _metadata was
// written (err == nil) or could not be.
func (jm *JobMaster) savepointWritten(id int64, path string, err error) {
	op := jm.savepoints[id]
	if op == nil {
		return
	}
	delete(jm.savepoints, id)
	if err != nil {
		jm.failSavepoint(op, fmt.Errorf("writing savepoint %d: %w", id, err))
		return
	}
	op.w.Close()
	jm.log.Info("savepoint completed", "savepoint", id, "path", op.w.Path())
	op.resolve(op.w.Path(), nil)
}

// writeSavepointMetadata writes md, the metadata of a savepoint, into its
// directory, with copies of the files of the finished subtasks' state
// that addFinished carried into it by reference to a checkpoint: a
// savepoint holds all its state, so it can be moved and outlives the
// job's checkpoints.
func (jm *JobMaster) writeSavepointMetadata(ctx context.Context, w SavepointWriter, md *checkpoint.Metadata, carried []carriedState) (string, error) {
	for _, c := range carried {
		op, _ := md.Operator(c.uid)
		st := &op.Subtasks[c.subtask]
		// The handles are the job master's carried ones: copy, not modify.
		st.Keyed, st.Operator = slices.Clone(st.Keyed), slices.Clone(st.Operator)
		for kind, hs := range map[string][]checkpoint.StateHandle{"keyed": st.Keyed, "op": st.Operator} {
			for i := range hs {
				h := &hs[i]
				if h.Path == "" {
					continue
				}
				b, err := jm.storage.ReadState(ctx, *h)
				if err != nil {
					return "", fmt.Errorf("copying the state of finished subtask %d of %s: %w", c.subtask, c.uid, err)
				}
				nh, err := w.WriteState(ctx, fmt.Sprintf("%s-%d-%s-%d", c.uid, c.subtask, kind, i), func(out io.Writer) error {
					_, err := out.Write(b)
					return err
				})
				if err != nil {
					return "", fmt.Errorf("copying the state of finished subtask %d of %s: %w", c.subtask, c.uid, err)
				}
				nh.KeyGroups = h.KeyGroups
				*h = nh
			}
		}
	}
	return w.WriteMetadata(ctx, md)
}

// endSavepoints, when the job has ended, fails the savepoints still in
// progress and deletes what they wrote.
func (jm *JobMaster) endSavepoints() {
	ops := jm.queuedSavepoints
	for _, op := range jm.savepoints {
		ops = append(ops, op)
	}
	jm.queuedSavepoints, jm.savepoints = nil, nil
	for _, op := range ops {
		if err := op.w.Abort(context.Background()); err != nil {
			jm.log.Warn("deleting an unfinished savepoint", "path", op.w.Path(), "err", err)
		}
		op.w.Close()
		op.resolve("", errors.New("the job ended before the savepoint completed"))
	}
}
