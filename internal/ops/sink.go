package ops

import (
	"encoding/json"
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

// sinkState is what a sink subtask checkpoints: where its output is and
// the committables not yet committed, by checkpoint id.
type sinkState struct {
	Location string             `json:"location,omitempty"`
	Pending  map[int64][][]byte `json:"pending,omitempty"`
}

// DecodeSinkState decodes a sink subtask's checkpointed state: its
// output's location (empty if the sink has none, or the state predates
// locations) and its pending committables.
func DecodeSinkState(b []byte) (location string, pending map[int64][][]byte, err error) {
	var st sinkState
	if err := json.Unmarshal(b, &st); err == nil && (st.Location != "" || st.Pending != nil) {
		return st.Location, st.Pending, nil
	}
	// Before locations, the state was the pending map alone.
	if err := json.Unmarshal(b, &pending); err != nil {
		return "", nil, fmt.Errorf("decoding sink state: %w", err)
	}
	return "", pending, nil
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
// writes. Old subtask i's committables are this subtask's if i mod p is
// its index, so each is committed by exactly one new subtask.
func (s *Sink[T]) restored(ctx *runtime.OperatorContext) (map[int64][][]byte, int64, error) {
	if ctx.Restored == nil {
		return nil, 0, nil
	}
	restored := make(map[int64][][]byte)
	if ctx.Restored.State == nil {
		return restored, ctx.Restored.CheckpointID, nil
	}
	here := s.location()
	for i, st := range ctx.Restored.State.Subtasks {
		for _, h := range st.Operator {
			if i%ctx.Parallelism != ctx.Subtask && here == "" {
				continue
			}
			b, err := ctx.Restored.Store.ReadState(ctx, h)
			if err != nil {
				return nil, 0, fmt.Errorf("reading sink committables: %w", err)
			}
			loc, m, err := DecodeSinkState(b)
			if err != nil {
				return nil, 0, err
			}
			if loc != "" && here != "" && loc != here {
				return nil, 0, connector.Permanent(fmt.Errorf(
					"sink %s: checkpoint %d wrote its output to %s, but this job's sink writes to %s; a resumed job must write where the checkpoint's job did, or its output would be split and the checkpoint's pending transactions lost",
					ctx.UID, ctx.Restored.CheckpointID, loc, here))
			}
			if i%ctx.Parallelism != ctx.Subtask {
				continue
			}
			for id, cs := range m {
				restored[id] = append(restored[id], cs...)
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
	st := sinkState{Location: s.location(), Pending: s.pending}
	if len(st.Pending) == 0 {
		if st.Location == "" {
			return runtime.Snapshot{}, nil
		}
		st.Pending = nil
	}
	b, err := json.Marshal(st)
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
