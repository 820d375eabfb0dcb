package stream

import (
	"context"
	"io"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runtime"
)

// checkpointing builds the runtime's checkpoint settings and finds the
// checkpoint to restore from, if any.
func (e *Environment) checkpointing(ctx context.Context, cp config.Checkpointing) (*runtime.CheckpointingOptions, *runtime.Restore, func() error, error) {
	mode := runtime.Aligned
	if cp.Mode == config.AtLeastOnce {
		mode = runtime.Tracked
	}
	opts := &runtime.CheckpointingOptions{
		Mode: mode,
		NewCoordinator: func(g *runtime.JobGraph, sources, all []checkpoint.TaskID) (runtime.Coordinator, error) {
			return runtime.NewCoordinator(cp, e.jobID, e.cfg.Int(config.KeyCheckpointHistory), g, sources, all)
		},
	}
	closer := func() error { return nil }
	if cp.Dir != "" {
		st, err := storage.Open(ctx, cp.Dir, e.jobID)
		if err != nil {
			return nil, nil, nil, errorf("opening checkpoint storage %s (execution.checkpointing.dir): %w", cp.Dir, err)
		}
		opts.Storage = blobStorage{st}
		closer = st.Close
	}
	var restore *runtime.Restore
	if cp.RecoveryPath != "" {
		if opts.Storage == nil {
			return nil, nil, nil, errorf("execution.state-recovery.path %s needs execution.checkpointing.dir to be set", cp.RecoveryPath)
		}
		snap, err := opts.Storage.(blobStorage).Resolve(ctx, cp.RecoveryPath)
		if err != nil {
			return nil, nil, nil, errorf("resuming from %s (execution.state-recovery.path): %w", cp.RecoveryPath, err)
		}
		restore = &runtime.Restore{Metadata: snap.Metadata, Store: snap, Path: snap.Path}
		prev := closer
		closer = func() error { snap.Close(); return prev() }
	}
	return opts, restore, closer, nil
}

// blobStorage adapts the checkpoint storage to the runtime.
type blobStorage struct{ *storage.Storage }

func (b blobStorage) WriteState(ctx context.Context, id int64, name string, write func(io.Writer) error) (checkpoint.StateHandle, error) {
	w, err := b.CreateState(ctx, id, name)
	if err != nil {
		return checkpoint.StateHandle{}, err
	}
	if err := write(w); err != nil {
		w.Abort()
		return checkpoint.StateHandle{}, err
	}
	return w.Close()
}
