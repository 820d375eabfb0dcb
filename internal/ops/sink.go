package ops

import (
	"fmt"
	"maps"
	"slices"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/runtime"
)

// Sink writes records through a connector's writer and runs its two-phase
// commit: at every barrier the writer prepares its committables, which go
// into the checkpoint; when the checkpoint completes they are committed.
// After a restore, the committables in the restored checkpoint are
// committed again (committing is idempotent), so a crash between the
// checkpoint's completion and the commit loses nothing.
type Sink[T any] struct {
	sink connector.Sink[T]
	ctx  *runtime.OperatorContext
	w    connector.SinkWriter[T]
	// pending holds committables by checkpoint id until committed.
	pending       map[int64][][]byte
	checkpointing bool
	exactlyOnce   bool
}

// NewSink returns the sink operator for sink. checkpointing and
// exactlyOnce describe the job's checkpoint settings.
func NewSink[T any](sink connector.Sink[T], checkpointing, exactlyOnce bool) *Sink[T] {
	return &Sink[T]{sink: sink, pending: make(map[int64][][]byte), checkpointing: checkpointing, exactlyOnce: exactlyOnce}
}

func (s *Sink[T]) location() string {
	if l, ok := s.sink.(connector.Located); ok {
		return l.Location()
	}
	return ""
}

func (s *Sink[T]) Open(ctx *runtime.OperatorContext) error {
	s.ctx = ctx
	restored, restoredID, err := s.restored(ctx)
	if err != nil {
		return err
	}
	w, err := s.sink.NewWriter(ctx, connector.WriterInfo{
		Subtask:              ctx.Subtask,
		Parallelism:          ctx.Parallelism,
		JobID:                ctx.JobID,
		UID:                  ctx.UID,
		ExactlyOnce:          s.checkpointing && s.exactlyOnce,
		RestoredCheckpointID: restoredID,
	})
	if err != nil {
		return fmt.Errorf("opening sink writer: %w", err)
	}
	s.w = w
	// Everything in the restored checkpoint was prepared at or before its
	// barrier: the checkpoint completed, so all of it is committed now.
	return s.commit(restored)
}

// restored reads the committables this subtask commits from the restored
// checkpoint, and checks that the checkpoint's sink wrote where this one
// writes. The committables of all old subtasks are split among the new
// ones, so each is committed by exactly one new subtask.
func (s *Sink[T]) restored(ctx *runtime.OperatorContext) (map[int64][][]byte, int64, error) {
	if ctx.Restored == nil {
		return nil, 0, nil
	}
	if ctx.Restored.State == nil {
		return make(map[int64][][]byte), ctx.Restored.CheckpointID, nil
	}
	var pieces [][]byte
	for _, st := range ctx.Restored.State.Subtasks {
		for _, h := range st.Operator {
			b, err := ctx.Restored.Store.ReadState(ctx, h)
			if err != nil {
				return nil, 0, fmt.Errorf("reading sink committables: %w", err)
			}
			pieces = append(pieces, b)
		}
	}
	ob, err := restoreOperatorState(ctx.Parallelism, ctx.Subtask, pieces)
	if err != nil {
		return nil, 0, fmt.Errorf("restoring sink committables: %w", err)
	}
	locs, restored, err := decodeSink(ob)
	if err != nil {
		return nil, 0, fmt.Errorf("restoring sink committables: %w", err)
	}
	if here := s.location(); here != "" {
		for _, loc := range locs {
			if loc != here {
				return nil, 0, connector.Permanent(fmt.Errorf(
					"sink %s: checkpoint %d wrote its output to %s, but this job's sink writes to %s; a resumed job must write where the checkpoint's job did, or its output would be split and the checkpoint's pending transactions lost",
					ctx.UID, ctx.Restored.CheckpointID, loc, here))
			}
		}
	}
	return restored, ctx.Restored.CheckpointID, nil
}

func (s *Sink[T]) Process(v T, ts int64) error { return s.w.Write(v, ts) }

func (s *Sink[T]) ProcessWatermark(int64) error { return nil }

// Snapshot prepares the writer's commit for checkpoint id and stores every
// committable not yet committed.
func (s *Sink[T]) Snapshot(id int64) (runtime.Snapshot, error) {
	cs, err := s.w.PrepareCommit(s.ctx, id)
	if err != nil {
		return runtime.Snapshot{}, fmt.Errorf("preparing commit: %w", err)
	}
	if len(cs) > 0 {
		s.pending[id] = cs
	}
	loc := s.location()
	if len(s.pending) == 0 && loc == "" {
		return runtime.Snapshot{}, nil
	}
	b, err := encodeSink(id, loc, s.pending)
	if err != nil {
		return runtime.Snapshot{}, err
	}
	return runtime.Snapshot{Operator: b}, nil
}

// NotifyCheckpointComplete commits everything prepared up to checkpoint id.
func (s *Sink[T]) NotifyCheckpointComplete(id int64) error {
	due := make(map[int64][][]byte)
	for k, cs := range s.pending {
		if k <= id {
			due[k] = cs
			delete(s.pending, k)
		}
	}
	if err := s.commit(due); err != nil {
		return err
	}
	if l, ok := s.w.(connector.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(s.ctx, id)
	}
	return nil
}

func (s *Sink[T]) commit(byID map[int64][][]byte) error {
	if len(byID) == 0 {
		return nil
	}
	c, ok := s.w.(connector.Committer)
	if !ok {
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		if err := s.ctx.InjectFault(runtime.FaultSite{Point: runtime.FaultCommit, Checkpoint: id}); err != nil {
			return fmt.Errorf("committing checkpoint %d: %w", id, err)
		}
		if err := c.Commit(s.ctx, byID[id]); err != nil {
			return fmt.Errorf("committing checkpoint %d: %w", id, err)
		}
		if err := s.ctx.InjectFault(runtime.FaultSite{Point: runtime.FaultCommitted, Checkpoint: id}); err != nil {
			return fmt.Errorf("after committing checkpoint %d: %w", id, err)
		}
	}
	return nil
}

// Finish flushes at the end of input. Without checkpoints nothing else
// would ever commit, so the writer's last transaction commits here.
func (s *Sink[T]) Finish() error {
	if s.checkpointing {
		return nil // the final checkpoint commits
	}
	cs, err := s.w.PrepareCommit(s.ctx, 0)
	if err != nil {
		return err
	}
	return s.commit(map[int64][][]byte{0: cs})
}

func (s *Sink[T]) Close() error {
	if s.w == nil {
		return nil
	}
	return s.w.Close()
}
