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
	// stop ends the job once the savepoint is complete; drain ends its
	// event time first.
	stop, drain bool
	format      checkpoint.SavepointFormat
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
// dir (a local path or a URL of the checkpoint storage's kinds; "" means
// CheckpointingOptions.SavepointDir) and returns the savepoint's path
// once its _metadata is written, or why it failed. While a checkpoint is pending that the savepoint may not run
// beside (unaligned checkpoints allow one at a time) it waits for it. It
// fails when the job is restarting (not every subtask is running), ends,
// or ctx is done; a savepoint that fails leaves nothing behind.
func (jm *JobMaster) TriggerSavepoint(ctx context.Context, dir string, format checkpoint.SavepointFormat) (string, error) {
	return jm.savepoint(ctx, dir, false, false, format)
}

// StopWithSavepoint stops the job with a savepoint, as Flink's stop does:
// it takes a savepoint as TriggerSavepoint does, with no checkpoint after
// it (with drain, the sources first end event time, so that every timer
// and window fires and its output is in the savepoint, as Flink's
// --drain; a job resumed from such a savepoint finds its event time
// ended); every subtask that has taken it reads no more input; once it
// is complete, every subtask, sinks first, commits what the savepoint
// holds pending (nothing after it) and ends, and the job finishes. It
// returns the savepoint's path once the job has ended. If the savepoint
// fails, the job goes on running and checkpointing.
func (jm *JobMaster) StopWithSavepoint(ctx context.Context, dir string, drain bool, format checkpoint.SavepointFormat) (string, error) {
	path, err := jm.savepoint(ctx, dir, true, drain, format)
	if err != nil {
		return "", err
	}
	select {
	case <-jm.stopped:
		return path, nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

func (jm *JobMaster) savepoint(ctx context.Context, dir string, stop, drain bool, format checkpoint.SavepointFormat) (string, error) {
	if jm.coord == nil || jm.storage == nil {
		return "", ErrSavepointsUnsupported
	}
	if dir == "" {
		dir = jm.opts.Checkpointing.SavepointDir
	}
	if format == checkpoint.FormatDefault {
		format = jm.opts.Checkpointing.SavepointFormat
		if format == checkpoint.FormatDefault { // no default of its own
			format = checkpoint.FormatCanonical
		}
	}
	if dir == "" {
		return "", errors.New("no savepoint directory: name one, or set execution.checkpointing.savepoint-dir")
	}
	w, err := jm.storage.CreateSavepoint(ctx, dir)
	if err != nil {
		return "", fmt.Errorf("creating a savepoint under %s: %w", dir, err)
	}
	op := &savepointOp{w: w, stop: stop, drain: drain, format: format, done: make(chan struct{})}
	jm.post(func() error { return jm.startSavepoint(op) })
	// On ctx's end the job master still ends the savepoint (it completes
	// or is aborted and deleted); the caller no longer waits for it.
	if err := jm.await(ctx, op.done, "savepoint"); err != nil {
		return "", err
	}
	return op.path, op.err
}

// await waits for done, closed by an operation of the job master's loop,
// and returns nil once it is; or ctx's cause, or that the job ended
// before the operation (what) completed.
func (jm *JobMaster) await(ctx context.Context, done <-chan struct{}, what string) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-jm.stopped:
		select {
		case <-done:
			return nil
		default:
			return fmt.Errorf("the job ended before the %s completed", what)
		}
	}
}

// startSavepoint triggers op's savepoint, or queues it behind the pending
// checkpoint that keeps it from starting.
func (jm *JobMaster) startSavepoint(op *savepointOp) error {
	switch {
	case jm.term != nil || jm.stopOp != nil && jm.stopOp != op:
		jm.failSavepoint(op, errors.New("the job is stopping with a savepoint"))
		return nil
	case jm.restarting > 0:
		jm.failSavepoint(op, errors.New("not all subtasks are running: the job is restarting"))
		return nil
	}
	var acts []coordinator.Output
	if op.stop && jm.stopOp == nil {
		// No checkpoint may complete after the savepoint, or it would
		// commit what the savepoint does not hold.
		jm.stopOp = op
		acts = jm.coord.PausePeriodic(jm.clock.Now(), true)
	}
	id, out, err := jm.coord.TriggerManual(jm.clock.Now(), checkpoint.KindSavepoint)
	acts = append(acts, out...)
	if errors.Is(err, coordinator.ReasonTooManyConcurrent) {
		jm.queuedSavepoints = append(jm.queuedSavepoints, op)
		return jm.perform(jm.ctx, acts)
	}
	if err != nil {
		acts = append(acts, jm.savepointEnded(op)...)
		jm.failSavepoint(op, fmt.Errorf("triggering a savepoint: %w", err))
		return jm.perform(jm.ctx, acts)
	}
	jm.savepoints[id] = op
	return jm.perform(jm.ctx, acts)
}

// savepointEnded lets checkpoints run again after op, a stop that
// failed.
func (jm *JobMaster) savepointEnded(op *savepointOp) []coordinator.Output {
	if op != jm.stopOp {
		return nil
	}
	jm.stopOp = nil
	return jm.coord.PausePeriodic(jm.clock.Now(), false)
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
	jm.discardSavepoint(op.w, true)
	op.resolve("", err)
}

// discardSavepoint deletes what w's savepoint holds, on the storage
// queue, closing w afterwards if closeAfter is set.
func (jm *JobMaster) discardSavepoint(w SavepointWriter, closeAfter bool) {
	jm.store.post(storageOp{ctx: jm.ctx, write: func(ctx context.Context) {
		if err := w.Abort(context.WithoutCancel(ctx)); err != nil {
			jm.log.Warn("deleting a failed savepoint", "path", w.Path(), "err", err)
		}
		if closeAfter {
			w.Close()
		}
	}})
}

// failTriggered fails savepoint id, which subtasks may still be writing:
// a subtask whose write was under way when the savepoint failed reports
// it later (an acknowledgement or decline that comes too late), and
// lateSavepointReport deletes what it wrote then. The writer stays open
// for that until the job ends.
func (jm *JobMaster) failTriggered(id int64, op *savepointOp, err error) {
	jm.failedSavepoints[id] = op.w
	jm.discardSavepoint(op.w, false)
	op.resolve("", err)
}

// lateSavepointReport deletes again what failed savepoint id holds, when
// a subtask reports its part after the savepoint failed: its write has
// finished, so what it wrote is there to delete.
func (jm *JobMaster) lateSavepointReport(id int64) {
	if w := jm.failedSavepoints[id]; w != nil {
		jm.discardSavepoint(w, false)
	}
}

// savepointAborted ends savepoint id's operation, if it is one, with the
// reason the coordinator aborted it.
func (jm *JobMaster) savepointAborted(id int64, reason error) []coordinator.Output {
	op := jm.savepoints[id]
	if op == nil {
		return nil
	}
	delete(jm.savepoints, id)
	if reason == nil {
		reason = errors.New("aborted")
	}
	jm.failTriggered(id, op, fmt.Errorf("savepoint %d failed: %w", id, reason))
	return jm.savepointEnded(op)
}

// savepointWritten ends savepoint id's operation once its _metadata was
// written (err == nil) or could not be; a stop's savepoint then stops the
// job.
func (jm *JobMaster) savepointWritten(id int64, err error) []coordinator.Output {
	op := jm.savepoints[id]
	if op == nil {
		return nil
	}
	delete(jm.savepoints, id)
	if err != nil {
		jm.failTriggered(id, op, fmt.Errorf("writing savepoint %d: %w", id, err))
		return jm.savepointEnded(op)
	}
	op.w.Close()
	jm.log.Info("savepoint completed", "savepoint", id, "path", op.w.Path(), "stop", op.stop)
	op.resolve(op.w.Path(), nil)
	if op.stop {
		jm.mu.Lock()
		jm.stoppedWith = op.w.Path()
		jm.mu.Unlock()
		jm.startTermination(id)
	}
	return nil
}

// StoppedWith returns the path of the savepoint the job stopped with, or
// "" if it is not stopping with one (or its savepoint is not complete).
func (jm *JobMaster) StoppedWith() string {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return jm.stoppedWith
}

// termination is a stop-with-savepoint whose savepoint is complete: the
// subtasks are told, one vertex at a time from the sinks up, that it
// completed, and each commits and ends. Downstream first, so that no
// subtask ends while another still reads from it.
type termination struct {
	id       int64
	layers   [][]checkpoint.TaskID
	next     int
	notified map[checkpoint.TaskID]bool
}

func (jm *JobMaster) startTermination(id int64) {
	t := &termination{id: id, notified: map[checkpoint.TaskID]bool{}}
	for i := len(jm.graph.Vertices) - 1; i >= 0; i-- {
		v := jm.graph.Vertices[i]
		layer := make([]checkpoint.TaskID, v.Parallelism)
		for s := range layer {
			layer[s] = checkpoint.TaskID{Vertex: v.UID, Subtask: s}
		}
		t.layers = append(t.layers, layer)
	}
	jm.term = t
	jm.log.Info("stopping the job with its savepoint", "savepoint", id)
	jm.advanceTermination()
}

// advanceTermination tells the next vertex's subtasks that the stop's
// savepoint completed once every subtask of the vertices after it has
// ended.
func (jm *JobMaster) advanceTermination() {
	t := jm.term
	for ; t.next < len(t.layers); t.next++ {
		waiting := false
		for _, id := range t.layers[t.next] {
			if jm.finished[id] {
				continue
			}
			waiting = true
			if r := jm.tasks[id]; r != nil && !t.notified[id] {
				t.notified[id] = true
				jm.exec.NotifyComplete(r.ref, t.id)
			}
		}
		if waiting {
			return
		}
	}
}

// terminated records that subtask id ended while the job stops: err, if
// not nil, does not restart it; what it had not committed stays pending
// in the savepoint, which commits it when a job resumes from it.
func (jm *JobMaster) terminated(id checkpoint.TaskID, err error) {
	if err != nil {
		jm.log.Warn("a subtask failed while the job stopped with its savepoint; the savepoint holds what it had not committed", "task", id.String(), "err", err)
	}
	jm.finished[id] = true
	jm.advanceTermination()
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
// progress, deleting what they wrote, and the manual checkpoints.
func (jm *JobMaster) endSavepoints() {
	ops := jm.queuedSavepoints
	for _, op := range jm.savepoints {
		ops = append(ops, op)
	}
	jm.queuedSavepoints, jm.savepoints = nil, nil
	cks := jm.queuedCheckpoints
	for _, op := range jm.manualCheckpoints {
		cks = append(cks, op)
	}
	jm.queuedCheckpoints, jm.manualCheckpoints = nil, nil
	for _, op := range cks {
		op.err = errors.New("the job ended before the checkpoint completed")
		close(op.done)
	}
	// Failed savepoints once more, now that no subtask writes.
	for _, w := range jm.failedSavepoints {
		if err := w.Abort(context.Background()); err != nil {
			jm.log.Warn("deleting a failed savepoint", "path", w.Path(), "err", err)
		}
		w.Close()
	}
	jm.failedSavepoints = nil
	for _, op := range ops {
		if err := op.w.Abort(context.Background()); err != nil {
			jm.log.Warn("deleting an unfinished savepoint", "path", op.w.Path(), "err", err)
		}
		op.w.Close()
		op.resolve("", errors.New("the job ended before the savepoint completed"))
	}
}

// checkpointOp is a checkpoint a caller of TriggerCheckpoint waits for.
type checkpointOp struct {
	done chan struct{}
	id   int64
	err  error
}

// TriggerCheckpoint takes a checkpoint now, whatever the interval (Flink's
// manual checkpoint, POST /jobs/:jobid/checkpoints), and returns its id
// once it has completed, or why it failed. While as many checkpoints are
// pending as may run at once, it waits for one of them to end.
func (jm *JobMaster) TriggerCheckpoint(ctx context.Context) (int64, error) {
	if jm.coord == nil {
		return 0, errors.New("the job takes no checkpoints (execution.checkpointing.interval is not set)")
	}
	op := &checkpointOp{done: make(chan struct{})}
	jm.post(func() error { return jm.startCheckpoint(op) })
	if err := jm.await(ctx, op.done, "checkpoint"); err != nil {
		return 0, err
	}
	return op.id, op.err
}

func (jm *JobMaster) startCheckpoint(op *checkpointOp) error {
	fail := func(err error) error {
		op.err = err
		close(op.done)
		return nil
	}
	switch {
	case jm.stopOp != nil || jm.term != nil:
		return fail(errors.New("the job is stopping with a savepoint"))
	case jm.restarting > 0:
		return fail(errors.New("not all subtasks are running: the job is restarting"))
	}
	id, out, err := jm.coord.TriggerManual(jm.clock.Now(), checkpoint.KindCheckpoint)
	switch {
	case errors.Is(err, coordinator.ReasonTooManyConcurrent):
		jm.queuedCheckpoints = append(jm.queuedCheckpoints, op)
	case err != nil:
		fail(fmt.Errorf("triggering a checkpoint: %w", err))
	default:
		jm.manualCheckpoints[id] = op
	}
	return jm.perform(jm.ctx, out)
}

// checkpointEnded ends the operation waiting for checkpoint id, if any:
// completed when err is nil, failed with err otherwise.
func (jm *JobMaster) checkpointEnded(id int64, err error) {
	op := jm.manualCheckpoints[id]
	if op == nil {
		return
	}
	delete(jm.manualCheckpoints, id)
	if err != nil {
		op.err = fmt.Errorf("checkpoint %d failed: %w", id, err)
	} else {
		op.id = id
	}
	close(op.done)
}

// retryCheckpoints triggers the manual checkpoints queued while too many
// were pending (they queue again if still so).
func (jm *JobMaster) retryCheckpoints() error {
	queued := jm.queuedCheckpoints
	jm.queuedCheckpoints = nil
	for _, op := range queued {
		if err := jm.startCheckpoint(op); err != nil {
			return err
		}
	}
	return nil
}
