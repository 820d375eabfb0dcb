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
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Coordinator is the checkpoint coordinator as the job master drives it: an
// I/O-free state machine whose methods return the actions to perform.
type Coordinator interface {
	Start(now time.Time) []CheckpointAction
	Tick(now time.Time) []CheckpointAction
	NextDeadline() (time.Time, bool)
	// TriggerNow asks for a checkpoint as soon as allowed (the final
	// checkpoint of a bounded job).
	TriggerNow(now time.Time) []CheckpointAction
	Ack(now time.Time, task checkpoint.TaskID, id int64, ack checkpoint.TaskAck) []CheckpointAction
	Decline(now time.Time, task checkpoint.TaskID, id int64, why DeclineReason, err error) []CheckpointAction
	MetadataWritten(now time.Time, id int64, path string, err error) []CheckpointAction
	TaskFinished(now time.Time, task checkpoint.TaskID) []CheckpointAction
	// Failover aborts the pending checkpoints of a restarting job.
	Failover(now time.Time) []CheckpointAction
	Restored(now time.Time, md *checkpoint.Metadata)
	// Invalid drops retained checkpoint id, found damaged on a restore,
	// from the retained ones and discards it.
	Invalid(now time.Time, id int64) []CheckpointAction
	Stop(now time.Time)
}

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

// CheckpointAction is an effect the coordinator asks for.
type CheckpointAction interface{ checkpointAction() }

// TriggerCheckpoint: inject barrier Barrier at the Tasks (the sources).
type TriggerCheckpoint struct {
	Barrier Barrier
	Tasks   []checkpoint.TaskID
}

// WriteMetadata: every task acknowledged; persist the metadata, then report
// MetadataWritten. Only then is the checkpoint complete.
type WriteMetadata struct{ Metadata *checkpoint.Metadata }

// NotifyComplete: checkpoint ID is complete.
type NotifyComplete struct {
	ID    int64
	Tasks []checkpoint.TaskID
}

// NotifyAbort: checkpoint ID was aborted; tasks release its alignment.
type NotifyAbort struct {
	ID     int64
	Reason string
	Tasks  []checkpoint.TaskID
}

// DiscardCheckpoint: retention no longer keeps checkpoint ID.
type DiscardCheckpoint struct{ ID int64 }

// FailJob: checkpoint failures exceeded the tolerable number.
type FailJob struct{ Err error }

func (TriggerCheckpoint) checkpointAction() {}
func (WriteMetadata) checkpointAction()     {}
func (NotifyComplete) checkpointAction()    {}
func (NotifyAbort) checkpointAction()       {}
func (DiscardCheckpoint) checkpointAction() {}
func (FailJob) checkpointAction()           {}

// perform carries out the coordinator's actions.
func (jm *JobMaster) perform(ctx context.Context, actions []CheckpointAction) error {
	for len(actions) > 0 {
		a := actions[0]
		actions = actions[1:]
		switch a := a.(type) {
		case TriggerCheckpoint:
			jm.snapshotSplits(a.Barrier.ID)
			for _, id := range a.Tasks {
				r := jm.tasks[id]
				if r == nil || r.canceled || jm.finished[id] {
					actions = append(actions, jm.coord.Decline(jm.clock.Now(), id, a.Barrier.ID, DeclineTaskClosing, errors.New("the subtask has finished"))...)
					continue
				}
				r.triggered = max(r.triggered, a.Barrier.ID)
				jm.exec.Trigger(r.ref, a.Barrier)
			}
		case WriteMetadata:
			md := a.Metadata
			md.JobID = jm.opts.JobID
			jm.addFinished(md)
			jm.addSplitAssignments(md)
			var path string
			var err error
			if jm.storage != nil {
				path, err = jm.storage.WriteMetadata(ctx, md)
			}
			actions = append(actions, jm.coord.MetadataWritten(jm.clock.Now(), md.CheckpointID, path, err)...)
			if err == nil {
				var store StateStore = memoryStore{}
				if jm.storage != nil {
					store = jm.storage
				}
				jm.mu.Lock()
				r := &Restore{Metadata: md, Store: store, Path: path}
				jm.retained = append(jm.retained, r)
				slices.SortFunc(jm.retained, func(a, b *Restore) int { return cmp.Compare(a.Metadata.CheckpointID, b.Metadata.CheckpointID) })
				if jm.latest == nil || md.CheckpointID > jm.latest.Metadata.CheckpointID {
					jm.latest = r
					now := jm.clock.Now()
					jm.completed = CompletedCheckpoint{ID: md.CheckpointID, Duration: now.Sub(md.TriggerTime), Size: md.Size(), At: now}
				}
				jm.mu.Unlock()
			}
		case NotifyComplete:
			jm.checkpointCompleted(a.ID)
			jm.emit(Event{Kind: EventCheckpointCompleted, Checkpoint: a.ID})
			for _, id := range a.Tasks {
				if r := jm.tasks[id]; r != nil {
					jm.exec.NotifyComplete(r.ref, a.ID)
				}
			}
		case NotifyAbort:
			for _, r := range jm.tasks {
				delete(r.acks, a.ID)
			}
			jm.emit(Event{Kind: EventCheckpointFailed, Checkpoint: a.ID, Message: a.Reason})
			if jm.storage != nil {
				// Best effort: a snapshot still being written may add files
				// later; those stay as an incomplete checkpoint, never used.
				if err := jm.storage.Discard(ctx, a.ID); err != nil {
					jm.log.Warn("discarding aborted checkpoint", "checkpoint", a.ID, "err", err)
				}
			}
			for _, id := range a.Tasks {
				if r := jm.tasks[id]; r != nil {
					jm.exec.NotifyAbort(r.ref, a.ID, a.Reason)
				}
			}
		case DiscardCheckpoint:
			jm.mu.Lock()
			jm.retained = slices.DeleteFunc(jm.retained, func(r *Restore) bool { return r.Metadata.CheckpointID == a.ID })
			jm.mu.Unlock()
			if jm.storage != nil {
				if err := jm.storage.Discard(ctx, a.ID); err != nil {
					jm.log.Warn("discarding checkpoint", "checkpoint", a.ID, "err", err)
				}
			}
		case FailJob:
			// A checkpoint failure beyond the tolerable count fails the
			// job over, through the restart strategy.
			return jm.fail(checkpoint.TaskID{}, a.Err, true)
		}
	}
	return nil
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
		r := jm.current(ref)
		if r == nil {
			return nil
		}
		r.acked = max(r.acked, id)
		r.acks[id] = ack
		return jm.perform(jm.ctx, jm.coord.Ack(jm.clock.Now(), ref.ID, id, ack))
	})
}

// Decline implements Listener.
func (jm *JobMaster) Decline(ref TaskRef, id int64, why DeclineReason, err error) {
	jm.post(func() error {
		if jm.coord == nil || jm.current(ref) == nil {
			return nil
		}
		return jm.perform(jm.ctx, jm.coord.Decline(jm.clock.Now(), ref.ID, id, why, err))
	})
}

// EndOfData implements Listener.
func (jm *JobMaster) EndOfData(ref TaskRef) {
	jm.post(func() error {
		if jm.current(ref) == nil {
			return nil
		}
		jm.eod[ref.ID] = true
		if jm.restarting > 0 || jm.coord == nil {
			return nil // the redeploy triggers checkpoints again
		}
		for _, s := range jm.sources {
			if !jm.eod[s] {
				return nil
			}
		}
		return jm.perform(jm.ctx, jm.coord.TriggerNow(jm.clock.Now()))
	})
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
// carried by reference: handles of files in an earlier checkpoint's
// directory, which storage keeps for as long as a completed checkpoint
// names them (see storage.Storage.Discard).
func (jm *JobMaster) addFinished(md *checkpoint.Metadata) {
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
			}
		}
	}
}

// checkpointCompleted records, for every subtask that acknowledged
// checkpoint id, that acknowledgement as the subtask's state in the newest
// completed checkpoint: the state a finished subtask is carried with. Only
// a completed checkpoint's files are sure to stay; an aborted one's are
// deleted.
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
