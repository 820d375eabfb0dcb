package runtime

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
)

// DeclineReason says why a subtask declined a checkpoint; only an
// asynchronous failure counts towards the tolerable failures.
type DeclineReason int

const (
	// DeclineSubsumed: a newer barrier arrived first, or the coordinator
	// aborted the checkpoint.
	DeclineSubsumed DeclineReason = iota
	// DeclineAsyncFailure: writing the snapshot failed.
	DeclineAsyncFailure
	// DeclineTaskClosing: the subtask had finished when the trigger came.
	DeclineTaskClosing
	// DeclineTaskNotReady: the subtask is not running yet (it waits for a
	// slot); it does not count as a failure.
	DeclineTaskNotReady
)

// reason is the coordinator's failure reason for a decline.
func (why DeclineReason) reason() coordinator.Reason {
	switch why {
	case DeclineAsyncFailure:
		return coordinator.ReasonAsyncFailure
	case DeclineTaskClosing:
		return coordinator.ReasonTaskClosing
	case DeclineTaskNotReady:
		return coordinator.ReasonTaskNotReady
	}
	return coordinator.ReasonNewerBarrier
}

// The job master drives the coordinator, an I/O-free state machine, the
// way an application drives raft: it feeds it inputs and performs the
// outputs it returns (perform). An input the coordinator refuses (a late
// acknowledgement, a decline of a checkpoint already aborted, the
// completion of a metadata write for a checkpoint aborted meanwhile) is
// stale, and logged.

func (jm *JobMaster) stale(what string, err error, args ...any) {
	if err != nil {
		jm.log.Debug("checkpoint coordinator ignored "+what, append(args, "reason", err)...)
	}
}

func (jm *JobMaster) coordAck(task checkpoint.TaskID, id int64, ack checkpoint.TaskAck) []coordinator.Output {
	out, err := jm.coord.Ack(jm.clock.Now(), task, id, ack)
	jm.stale("an acknowledgement", err, "task", task.String(), "checkpoint", id)
	if errors.Is(err, coordinator.ErrLate) && !jm.isRetained(id) {
		// The checkpoint was aborted and discarded while the subtask
		// still wrote its state: delete what it wrote since.
		jm.discard(jm.ctx, id, "discarding the late state of an aborted checkpoint")
	}
	return out
}

// isRetained reports whether checkpoint id is a retained completed one.
func (jm *JobMaster) isRetained(id int64) bool {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return slices.ContainsFunc(jm.retained, func(r *Restore) bool { return r.Metadata.CheckpointID == id })
}

func (jm *JobMaster) coordDecline(task checkpoint.TaskID, id int64, why DeclineReason, cause error) []coordinator.Output {
	out, err := jm.coord.Decline(jm.clock.Now(), task, id, fmt.Errorf("%w: %w", why.reason(), cause))
	jm.stale("a decline", err, "task", task.String(), "checkpoint", id)
	return out
}

func (jm *JobMaster) coordFinished(task checkpoint.TaskID) []coordinator.Output {
	out, err := jm.coord.TaskFinished(jm.clock.Now(), task)
	jm.stale("a finished subtask", err, "task", task.String())
	return out
}

// coordRestored tells the coordinator the job restored r.
func (jm *JobMaster) coordRestored(r *Restore) {
	jm.coord.Restored(jm.clock.Now(), r.Metadata.CheckpointID, r.Path)
}

// perform carries out the coordinator's outputs. Writes of metadata and
// discards go to the storage queue, off the job master's goroutine: a
// slow store holds up the checkpoint concerned, not acknowledgements,
// failures and failover. A write's completion comes back through the
// inbox.
func (jm *JobMaster) perform(ctx context.Context, out []coordinator.Output) error {
	for len(out) > 0 {
		o := out[0]
		out = out[1:]
		if jm.stopping {
			// No checkpoint will build on a deferred discard's any more.
			for _, d := range jm.deferredDiscards {
				jm.discard(context.WithoutCancel(ctx), d, "discarding checkpoint")
			}
			jm.deferredDiscards = nil
			switch o := o.(type) {
			case coordinator.NotifyComplete:
				jm.emit(Event{Kind: EventCheckpointCompleted, Checkpoint: o.ID})
			case coordinator.Discard:
				jm.mu.Lock()
				jm.retained = slices.DeleteFunc(jm.retained, func(r *Restore) bool { return r.Metadata.CheckpointID == o.ID })
				jm.mu.Unlock()
				jm.discard(context.WithoutCancel(ctx), o.ID, "discarding checkpoint")
			}
			continue
		}
		switch o := o.(type) {
		case coordinator.Trigger:
			jm.snapshotSplits(o.ID)
			b := Barrier{ID: o.ID, Timestamp: o.Timestamp.UnixNano(), Savepoint: o.Kind == checkpoint.KindSavepoint}
			if !b.Savepoint && jm.lastCompleted > 0 {
				// Incremental snapshots may name the files of the latest
				// completed checkpoint: it is kept until this one ends.
				b.Base = jm.lastCompleted
				jm.bases[o.ID] = b.Base
			}
			if sp := jm.savepoints[o.ID]; sp != nil {
				b.Target, b.Stop, b.Drain = sp.w.Path(), sp.stop, sp.drain
				b.Native = sp.format == checkpoint.FormatNative
			}
			if o.Unaligned {
				if jm.alignedTimeout > 0 {
					b.AlignedTimeout = jm.alignedTimeout
				} else {
					b.Unaligned = true
				}
			}
			for _, id := range o.Tasks {
				r := jm.tasks[id]
				if r == nil || r.canceled || jm.finished[id] {
					out = append(out, jm.coordDecline(id, o.ID, DeclineTaskClosing, errors.New("the subtask has finished"))...)
					continue
				}
				r.triggered = max(r.triggered, o.ID)
				if r.firstTriggered == 0 {
					r.firstTriggered = o.ID
				}
				jm.exec.Trigger(r.ref, b)
			}
		case coordinator.WriteMetadata:
			md := o.Metadata
			md.JobID = jm.opts.JobID
			carried := jm.addFinished(&md)
			jm.addSplitAssignments(&md)
			if sp := jm.savepoints[md.CheckpointID]; sp != nil {
				jm.store.post(storageOp{ctx: ctx, write: func(ctx context.Context) {
					path, err := jm.writeSavepointMetadata(ctx, sp.w, &md, carried)
					jm.busy.Add(1)
					jm.written.post(func() error { return jm.perform(jm.ctx, jm.metadataWritten(&md, path, err)) })
				}})
				continue
			}
			if jm.storage == nil {
				out = append(out, jm.metadataWritten(&md, "", nil)...)
				continue
			}
			jm.store.post(storageOp{ctx: ctx, write: func(ctx context.Context) {
				path, err := jm.storage.WriteMetadata(ctx, &md)
				if p, ok := jm.exec.(CheckpointPublisher); ok && err == nil {
					// Recorded before any subtask hears of it: a sink
					// commits only a checkpoint a successor restores.
					err = p.PublishCheckpoint(ctx, md.CheckpointID, path)
				}
				jm.busy.Add(1)
				jm.written.post(func() error { return jm.perform(jm.ctx, jm.metadataWritten(&md, path, err)) })
			}})
		case coordinator.NotifyComplete:
			jm.checkpointCompleted(o.ID)
			jm.checkpointEnded(o.ID, nil)
			jm.baseEnded(ctx, o.ID)
			jm.emit(Event{Kind: EventCheckpointCompleted, Checkpoint: o.ID})
			for _, id := range o.Tasks {
				if r := jm.tasks[id]; r != nil {
					jm.exec.NotifyComplete(r.ref, o.ID)
				}
			}
		case coordinator.NotifyAbort:
			reason := "aborted"
			if o.Reason != nil {
				reason = o.Reason.Error()
			}
			for _, r := range jm.tasks {
				delete(r.acks, o.ID)
			}
			out = append(out, jm.savepointAborted(o.ID, o.Reason)...)
			if o.Reason != nil {
				jm.checkpointEnded(o.ID, o.Reason)
			} else {
				jm.checkpointEnded(o.ID, errors.New(reason))
			}
			jm.baseEnded(ctx, o.ID)
			if errors.Is(o.Reason, coordinator.ReasonTaskClosing) {
				// A subtask finished without taking part: those that
				// wait for their final checkpoint need another.
				jm.finalWanted = true
			}
			jm.emit(Event{Kind: EventCheckpointFailed, Checkpoint: o.ID, Message: reason})
			// Best effort: a snapshot still being written may add files
			// later; those stay as an incomplete checkpoint, never used.
			jm.discard(ctx, o.ID, "discarding aborted checkpoint")
			for _, id := range o.Tasks {
				if r := jm.tasks[id]; r != nil {
					jm.exec.NotifyAbort(r.ref, o.ID, reason)
				}
			}
		case coordinator.Discard:
			jm.mu.Lock()
			jm.retained = slices.DeleteFunc(jm.retained, func(r *Restore) bool { return r.Metadata.CheckpointID == o.ID })
			jm.mu.Unlock()
			if jm.lastCompleted == o.ID {
				jm.lastCompleted = 0
			}
			if jm.isBase(o.ID) {
				// A pending checkpoint may name its files: discard it
				// once no pending checkpoint builds on it.
				jm.deferredDiscards = append(jm.deferredDiscards, o.ID)
				continue
			}
			jm.discard(ctx, o.ID, "discarding checkpoint")
		case coordinator.FailJob:
			// A checkpoint failure beyond the tolerable count fails the
			// job over, through the restart strategy.
			err := o.Reason
			if err == nil {
				err = errors.New("checkpoint failures exceeded the tolerable number")
			}
			return jm.fail(checkpoint.TaskID{}, err, true)
		}
	}
	return nil
}

// finishWrites lets a canceled job's metadata writes in flight end (under
// the job's canceled context, one not yet done fails) and records those
// that completed, so that what the job reports as its latest checkpoint
// is what its storage holds (a resume takes the newest _metadata it
// finds); the retention discards they cause run too. The subtasks are
// gone: no notification goes out.
func (jm *JobMaster) finishWrites() {
	jm.stopping = true
	jm.store.stop()
	for _, f := range jm.written.take() {
		if err := f(); err != nil {
			jm.log.Warn("recording a checkpoint completed as the job was canceled", "err", err)
		}
	}
	for _, d := range jm.deferredDiscards {
		jm.discard(context.Background(), d, "discarding checkpoint")
	}
	jm.deferredDiscards = nil
	jm.store.drain(true)
}

// discard deletes checkpoint id's files on the storage queue, after every
// write queued before it; what names the discard in a warning. The
// claimed checkpoint that lies outside the job's storage is deleted by
// its own Discard, once.
func (jm *JobMaster) discard(ctx context.Context, id int64, what string) {
	if c := jm.claimed; c != nil && c.Metadata.CheckpointID == id {
		jm.claimed = nil
		jm.store.post(storageOp{ctx: ctx, write: func(ctx context.Context) {
			if err := c.Discard(ctx); err != nil {
				jm.log.Warn("discarding the claimed checkpoint", "checkpoint", id, "path", c.Path, "err", err)
			}
		}})
		return
	}
	if jm.storage == nil {
		return
	}
	jm.store.post(storageOp{ctx: ctx, discard: id, what: what})
}

// claim makes the restored checkpoint r the job's own (CLAIM): the
// coordinator retains it, and counts it among the num-retained, as if the
// job had completed it. In the job's storage it is the checkpoint the
// first new one builds on, as after a failover; elsewhere the first
// checkpoint writes all its state, and r's Discard deletes r once it is
// subsumed.
func (jm *JobMaster) claim(r *Restore) {
	id := r.Metadata.CheckpointID
	var paths []string
	if r.Discard == nil {
		for _, op := range r.Metadata.Operators {
			for _, st := range op.Subtasks {
				for _, hs := range [][]checkpoint.StateHandle{st.Keyed, st.Operator, st.InputChannels} {
					for _, h := range hs {
						if h.Path != "" {
							paths = append(paths, h.Path)
						}
					}
				}
			}
		}
		jm.lastCompleted = max(jm.lastCompleted, id)
	} else {
		jm.claimed = r
	}
	jm.coord.Claimed(id, paths)
	jm.log.Info("claimed the restored checkpoint: it is deleted once subsumed", "checkpoint", id, "path", r.Path)
}

// metadataWritten hands the coordinator the outcome of md's write (path,
// err), and on success makes md the checkpoint a restore takes. A write
// that completes after its checkpoint was aborted (a failover meanwhile)
// is stale: the abort queued a discard of its files behind it.
func (jm *JobMaster) metadataWritten(md *checkpoint.Metadata, path string, err error) []coordinator.Output {
	out, cerr := jm.coord.MetadataWritten(jm.clock.Now(), md.CheckpointID, err)
	if cerr != nil {
		jm.stale("a metadata write", cerr, "checkpoint", md.CheckpointID)
		return out
	}
	if md.Kind == checkpoint.KindSavepoint {
		return append(out, jm.savepointWritten(md.CheckpointID, err)...)
	}
	if err != nil {
		return out
	}
	var store StateStore = memoryStore{}
	if jm.storage != nil {
		store = jm.storage
	}
	jm.mu.Lock()
	r := &Restore{Metadata: md, Store: store, Path: path}
	jm.lastCompleted = max(jm.lastCompleted, md.CheckpointID)
	jm.retained = append(jm.retained, r)
	slices.SortFunc(jm.retained, func(a, b *Restore) int { return cmp.Compare(a.Metadata.CheckpointID, b.Metadata.CheckpointID) })
	if jm.latest == nil || md.CheckpointID > jm.latest.Metadata.CheckpointID {
		jm.latest = r
		now := jm.clock.Now()
		jm.completed = CompletedCheckpoint{ID: md.CheckpointID, Duration: now.Sub(md.TriggerTime), Size: md.Size(), At: now}
	}
	jm.mu.Unlock()
	return out
}

// storageQueue runs the job master's storage operations in the order
// they were queued, one at a time, on a goroutine of its own that Run
// starts and, when the job ends, lets finish what is queued. The discards
// queued together run as one (storage reads the other checkpoints'
// references once for all of them), so a backlog left by a slow store
// drains in one pass rather than one per checkpoint.
type storageQueue struct {
	jm   *JobMaster
	mu   sync.Mutex
	ops  []storageOp
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
	// queued counts the operations queued and not yet done (tests).
	queued atomic.Int64
	once   sync.Once
	// retry holds the discards that failed, with the attempts made: they
	// run again with the next discards and once more as the queue stops,
	// so that a storage error does not leave a subsumed checkpoint behind
	// for good. Only the queue's goroutine uses it.
	retry map[int64]int
}

// discardAttempts bounds how often the storage queue tries to discard a
// checkpoint before it leaves it, with a warning naming it.
const discardAttempts = 5

// storageOp is a write (write is set) or the discard of a checkpoint.
type storageOp struct {
	ctx     context.Context
	write   func(ctx context.Context)
	discard int64
	what    string
}

func newStorageQueue(jm *JobMaster) *storageQueue {
	return &storageQueue{jm: jm, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// post queues op; the job master counts as busy until it has run.
func (q *storageQueue) post(op storageOp) {
	q.jm.busy.Add(1)
	q.queued.Add(1)
	q.mu.Lock()
	q.ops = append(q.ops, op)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *storageQueue) run() {
	defer close(q.done)
	for {
		select {
		case <-q.wake:
			q.drain(false)
		case <-q.quit:
			q.drain(true)
			return
		}
	}
}

func (q *storageQueue) drain(final bool) {
	q.mu.Lock()
	ops := q.ops
	q.ops = nil
	q.mu.Unlock()
	// Writes first, in order, then the discards: a checkpoint's write
	// waits for no other checkpoint's discard, and a discard still runs
	// after every write queued before it (a checkpoint's own abort, after
	// its write; a discard reads the references of every checkpoint
	// written, so a newer checkpoint's carried files are kept).
	var ids []int64
	var discards []storageOp
	for _, op := range ops {
		if op.write != nil {
			op.write(op.ctx)
			q.finished(1)
			continue
		}
		discards = append(discards, op)
		ids = append(ids, op.discard)
	}
	if len(discards) == 0 && (!final || len(q.retry) == 0) {
		return
	}
	ctx, what := context.Background(), "retrying the discard of checkpoints"
	if len(discards) > 0 {
		ctx, what = discards[0].ctx, discards[0].what
	}
	for id := range q.retry {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if err := q.jm.storage.Discard(ctx, ids...); err != nil {
		// Which of them failed is not known: all are tried again (a
		// discard of a checkpoint already gone deletes nothing).
		var left []int64
		for _, id := range ids {
			if q.retry == nil {
				q.retry = map[int64]int{}
			}
			if q.retry[id]++; q.retry[id] >= discardAttempts {
				delete(q.retry, id)
				left = append(left, id)
			}
		}
		q.jm.log.Warn(what, "checkpoints", ids, "err", err)
		if len(left) > 0 {
			q.jm.log.Warn("leaving checkpoints that could not be discarded", "checkpoints", left, "attempts", discardAttempts)
		}
	} else {
		clear(q.retry)
	}
	q.finished(len(discards))
}

func (q *storageQueue) finished(n int) {
	q.queued.Add(-int64(n))
	q.jm.busy.Add(-int64(n))
}

// stop runs what is queued and waits for the queue's goroutine to end;
// once stopped, what is posted runs only when drain is called.
func (q *storageQueue) stop() {
	q.once.Do(func() { close(q.quit) })
	<-q.done
}

// current returns the run of ref if it is the subtask's current
// deployment and was not canceled; reports from others are stale.
func (jm *JobMaster) current(ref TaskRef) *taskRun {
	if r := jm.tasks[ref.ID]; r != nil && r.ref == ref && !r.canceled {
		return r
	}
	return nil
}

// Acknowledge implements Listener.
func (jm *JobMaster) Acknowledge(ref TaskRef, id int64, ack checkpoint.TaskAck) {
	jm.post(func() error {
		if jm.coord == nil {
			return nil
		}
		jm.lateSavepointReport(id)
		r := jm.current(ref)
		if r == nil {
			return nil
		}
		r.acked = max(r.acked, id)
		r.acks[id] = ack
		return jm.perform(jm.ctx, jm.coordAck(ref.ID, id, ack))
	})
}

// Decline implements Listener.
func (jm *JobMaster) Decline(ref TaskRef, id int64, why DeclineReason, err error) {
	jm.post(func() error {
		if jm.coord == nil {
			return nil
		}
		jm.lateSavepointReport(id)
		if jm.current(ref) == nil {
			return nil
		}
		return jm.perform(jm.ctx, jm.coordDecline(ref.ID, id, why, err))
	})
}

// EndOfData implements Listener.
func (jm *JobMaster) EndOfData(ref TaskRef) {
	jm.post(func() error {
		if jm.current(ref) == nil {
			return nil
		}
		jm.eod[ref.ID] = true
		jm.finalWanted = true
		return jm.triggerFinal()
	})
}

// triggerFinal triggers a checkpoint now, rather than at the next
// interval, when a subtask has reported its end of data since the last
// such trigger and every source has ended: the subtasks that finished
// wait for a checkpoint taken after their end (their final checkpoint,
// which commits what their sinks wrote) before they close. A subtask
// with inputs reports its end too under unaligned checkpoints, where a
// barrier can overtake the end of data on an input, so that the
// checkpoint under way snapshotted it before it finished. While another
// checkpoint keeps the trigger from starting, it is tried again after
// each batch of the job master's work.
func (jm *JobMaster) triggerFinal() error {
	if !jm.finalWanted || jm.restarting > 0 || jm.coord == nil || jm.stopOp != nil {
		return nil // a redeploy triggers checkpoints again
	}
	for _, s := range jm.sources {
		if !jm.eod[s] {
			return nil
		}
	}
	_, out, err := jm.coord.TriggerManual(jm.clock.Now(), checkpoint.KindCheckpoint)
	if !errors.Is(err, coordinator.ReasonTooManyConcurrent) {
		jm.finalWanted = false
		jm.stale("a trigger", err)
	}
	return jm.perform(jm.ctx, out)
}

func (jm *JobMaster) emitRestored(r *Restore) {
	if r == nil {
		jm.log.Info("restarting without a completed checkpoint: sources start from their beginning")
		jm.emit(Event{Kind: EventRestored})
		return
	}
	jm.log.Info("restoring from checkpoint", "checkpoint", r.Metadata.CheckpointID, "path", r.Path)
	jm.emit(Event{Kind: EventRestored, Checkpoint: r.Metadata.CheckpointID, Message: r.Path})
}

// InlineState reads state held inline in its handles.
var InlineState StateReader = memoryStore{}

// memoryStore keeps state inline in the handles: checkpoints live only in
// the job master's memory (Flink's JobManagerCheckpointStorage).
type memoryStore struct{}

func (memoryStore) WriteState(_ context.Context, _ int64, _ string, write func(io.Writer) error) (checkpoint.StateHandle, error) {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return checkpoint.StateHandle{}, err
	}
	b := buf.Bytes()
	return checkpoint.StateHandle{Inline: b, Size: int64(len(b)), CRC32C: crc32.Checksum(b, castagnoli)}, nil
}

func (m memoryStore) WriteSharedState(ctx context.Context, id int64, name string, write func(io.Writer) error) (checkpoint.StateHandle, error) {
	return m.WriteState(ctx, id, name, write)
}

func (m memoryStore) WriteSavepointState(ctx context.Context, _, name string, write func(io.Writer) error) (checkpoint.StateHandle, error) {
	return m.WriteState(ctx, 0, name, write)
}

func (m memoryStore) OpenState(ctx context.Context, h checkpoint.StateHandle) (io.ReadCloser, error) {
	b, err := m.ReadState(ctx, h)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (memoryStore) ReadState(_ context.Context, h checkpoint.StateHandle) ([]byte, error) {
	if h.Inline == nil && h.Size > 0 {
		return nil, fmt.Errorf("runtime: state handle %q is not inline and no checkpoint storage is configured", h.Path)
	}
	if got := crc32.Checksum(h.Inline, castagnoli); got != h.CRC32C {
		return nil, fmt.Errorf("runtime: inline state checksum %08x, want %08x", got, h.CRC32C)
	}
	return h.Inline, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// addFinished puts the state of finished subtasks into a checkpoint's
// metadata, whatever its size: a finished source's positions say its
// splits have ended, so a restore does not read them again, and a finished
// operator's state is the state a failure-free run would hold. The state
// is the subtask's last acknowledgement of a completed checkpoint,
// carried by reference: handles of files the subtask wrote to the job's
// shared/ directory, having finished (see Task.writeSnapshot), which
// storage keeps for as long as a completed checkpoint names them (see
// storage.Storage.Discard).
//
// It returns the subtask states it added.
func (jm *JobMaster) addFinished(md *checkpoint.Metadata) []carriedState {
	var carried []carriedState
	for id, ack := range jm.finishedAcks {
		v := jm.vertex(id.Vertex)
		if v == nil {
			continue
		}
		for uid, st := range ack.States {
			op, ok := md.Operator(uid)
			if !ok {
				md.Operators = append(md.Operators, checkpoint.OperatorState{
					UID: uid, Parallelism: v.Parallelism, MaxParallelism: v.MaxParallelism,
					Subtasks: make([]checkpoint.SubtaskState, v.Parallelism),
				})
				op = &md.Operators[len(md.Operators)-1]
			}
			if id.Subtask < len(op.Subtasks) && op.Subtasks[id.Subtask].Empty() {
				op.Subtasks[id.Subtask] = st
				carried = append(carried, carriedState{uid: uid, subtask: id.Subtask})
			}
		}
	}
	return carried
}

// carriedState names a subtask state that addFinished carried into a
// checkpoint's metadata.
type carriedState struct {
	uid     string
	subtask int
}

// checkpointCompleted records, for every subtask that acknowledged
// checkpoint id, that acknowledgement as the subtask's state in the newest
// completed checkpoint: the state a finished subtask is carried with. Only
// a completed checkpoint's files are sure to stay; an aborted one's are
// deleted.
// isBase reports whether a pending checkpoint builds on checkpoint id.
func (jm *JobMaster) isBase(id int64) bool {
	for _, b := range jm.bases {
		if b == id {
			return true
		}
	}
	return false
}

// baseEnded notes that checkpoint id has ended (completed or aborted), and
// discards the checkpoints whose discard waited for it.
func (jm *JobMaster) baseEnded(ctx context.Context, id int64) {
	if _, ok := jm.bases[id]; !ok {
		return
	}
	delete(jm.bases, id)
	jm.deferredDiscards = slices.DeleteFunc(jm.deferredDiscards, func(d int64) bool {
		if jm.isBase(d) {
			return false
		}
		jm.discard(ctx, d, "discarding checkpoint")
		return true
	})
}

func (jm *JobMaster) checkpointCompleted(id int64) {
	for tid, r := range jm.tasks {
		ack, ok := r.acks[id]
		if !ok {
			continue
		}
		r.completedAck = &ack
		for k := range r.acks {
			if k <= id {
				delete(r.acks, k)
			}
		}
		if jm.finished[tid] {
			jm.finishedAcks[tid] = ack
		}
	}
}

func (jm *JobMaster) vertex(uid string) *Vertex {
	for _, v := range jm.graph.Vertices {
		if v.UID == uid {
			return v
		}
	}
	return nil
}
