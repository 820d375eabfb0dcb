package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/ops"
	"github.com/weirstream/weir/internal/runtime"
)

// checkpointing builds the runtime's checkpoint settings and finds the
// checkpoint to restore from, if any.
func (e *Environment) checkpointing(ctx context.Context, cp config.Checkpointing) (*runtime.CheckpointingOptions, *runtime.Restore, func() error, error) {
	opts := &runtime.CheckpointingOptions{
		Mode: cp.Mode,
		NewCoordinator: func(g *runtime.JobGraph, sources, all []checkpoint.TaskID) (runtime.Coordinator, error) {
			return runtime.NewCoordinator(cp, e.jobID, e.cfg.Int(config.KeyCheckpointHistory), g, sources, all)
		},
	}
	closer := func() error { return nil }
	if cp.Dir != "" {
		st, err := storage.Open(ctx, cp.Dir, e.jobID, e.storageOptions(storage.VerifyChecksums(true))...)
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
		r, c, err := e.resolve(ctx, opts.Storage.(blobStorage).Storage, cp.RecoveryPath)
		if err != nil {
			closer()
			return nil, nil, nil, errorf("resuming from %s (execution.state-recovery.path): %w", cp.RecoveryPath, err)
		}
		restore = r
		prev := closer
		closer = func() error { c(); return prev() }
	}
	return opts, restore, closer, nil
}

// resolve finds what to resume from at p: a checkpoint or savepoint
// directory, its _metadata file, or a job's checkpoint directory
// (<dir>/<job-id>), whose newest completed checkpoint that verifies is
// taken, skipping corrupt or incomplete ones for the previous one.
func (e *Environment) resolve(ctx context.Context, st *storage.Storage, p string) (*runtime.Restore, func() error, error) {
	snap, err := st.Resolve(ctx, p)
	if err == nil {
		return &runtime.Restore{Metadata: snap.Metadata, Store: snap, Path: snap.Path}, snap.Close, nil
	}
	trimmed := strings.TrimSuffix(p, "/")
	i := strings.LastIndex(trimmed, "/")
	if i <= 0 {
		return nil, nil, err
	}
	parent, jobID := trimmed[:i], trimmed[i+1:]
	js, jerr := storage.Open(ctx, parent, jobID, e.storageOptions(storage.VerifyChecksums(true))...)
	if jerr != nil {
		return nil, nil, err
	}
	md, skipped, lerr := js.Latest(ctx)
	for _, s := range skipped {
		e.logger.Warn("skipping a checkpoint that does not verify", "skipped", s)
	}
	if lerr != nil {
		js.Close()
		if errors.Is(lerr, storage.ErrNoCheckpoint) {
			return nil, nil, fmt.Errorf("%w (and as a job directory: %w)", err, lerr)
		}
		return nil, nil, lerr
	}
	if err := e.checkFallback(md.CheckpointID, skipped); err != nil {
		js.Close()
		return nil, nil, err
	}
	return &runtime.Restore{Metadata: md, Store: blobStorage{js}, Path: js.CheckpointPath(md.CheckpointID)}, js.Close, nil
}

// checkFallback refuses to restore checkpoint id in place of a newer one
// that completed (it has a _metadata) but does not verify, when a sink of
// the job cannot undo what that newer checkpoint's transactions committed:
// the replay would write that output a second time. A checkpoint without
// _metadata never completed and committed nothing.
func (e *Environment) checkFallback(id int64, skipped []storage.Skipped) error {
	var completed []string
	for _, s := range skipped {
		if !errors.Is(s.Err, storage.ErrIncomplete) {
			completed = append(completed, fmt.Sprint(s.CheckpointID))
		}
	}
	return e.refuseFallback(completed, id)
}

// refuseFallback returns why the job must not restore checkpoint id in
// place of the completed checkpoints newer, or nil if every sink undoes
// their output on that restore or duplicates are accepted.
func (e *Environment) refuseFallback(completed []string, id int64) error {
	if len(completed) == 0 || e.cfg.Bool(config.KeyStateRecoveryAllowDuplicateOutput) {
		return nil
	}
	var sinks []string
	for _, n := range e.nodes {
		if n.sink == nil {
			continue
		}
		if r, ok := n.sink.(connector.Reconciler); ok && r.ReconcilesOnRestore() {
			continue
		}
		uid := n.settings.uid
		if uid == "" {
			uid = n.describe()
		}
		sinks = append(sinks, uid)
	}
	if len(sinks) == 0 {
		return nil
	}
	return fmt.Errorf("checkpoints %s completed but do not verify; falling back to checkpoint %d would write again what their transactions committed, which sink %s cannot undo: resume from a savepoint or a checkpoint you choose, or set %s=true to accept the duplicates",
		strings.Join(completed, ", "), id, strings.Join(sinks, ", "), config.KeyStateRecoveryAllowDuplicateOutput)
}

// retain applies execution.checkpointing.externalized-checkpoint-retention
// when the job ends: checkpoints are kept only with RETAIN_ON_CANCELLATION,
// or, with DELETE_ON_CANCELLATION, when the job failed.
func retain(ctx context.Context, cp config.Checkpointing, st runtime.CheckpointStorage, runErr error, canceled bool, log interface {
	Warn(msg string, args ...any)
}) {
	bs, ok := st.(blobStorage)
	if !ok {
		return
	}
	keep := cp.ExternalizedRetention == config.RetainOnCancellation ||
		(cp.ExternalizedRetention == config.DeleteOnCancellation && runErr != nil && !canceled)
	if keep {
		return
	}
	if err := bs.DiscardAll(context.WithoutCancel(ctx)); err != nil {
		log.Warn("discarding checkpoints at the end of the job", "err", err)
	}
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

// RestoreInfo describes the checkpoint or savepoint a job resumes from.
type RestoreInfo struct {
	// CheckpointID is the checkpoint's id; Path is where it was found.
	CheckpointID int64
	Path         string
	// JobID is the id of the job that took it.
	JobID string
	// SinkLocations maps the uid of each sink asked about to where the
	// checkpoint's job wrote its output (connector.Located); a sink
	// without a recorded location is absent.
	SinkLocations map[string]string
}

// InspectRestore resolves execution.state-recovery.path the way Execute
// will, and reads from the checkpoint where the sinks with the given uids
// wrote, so that a program resuming a job can write to the same place. It
// returns nil when the configuration sets no recovery path.
func (e *Environment) InspectRestore(ctx context.Context, sinkUIDs ...string) (*RestoreInfo, error) {
	cp, err := e.cfg.Checkpointing()
	if err != nil {
		return nil, err
	}
	if cp.RecoveryPath == "" {
		return nil, nil
	}
	if cp.Dir == "" {
		return nil, errorf("execution.state-recovery.path %s needs execution.checkpointing.dir to be set", cp.RecoveryPath)
	}
	st, err := storage.Open(ctx, cp.Dir, e.jobID, e.storageOptions(storage.VerifyChecksums(true))...)
	if err != nil {
		return nil, errorf("opening checkpoint storage %s (execution.checkpointing.dir): %w", cp.Dir, err)
	}
	defer st.Close()
	r, closeRestore, err := e.resolve(ctx, st, cp.RecoveryPath)
	if err != nil {
		return nil, errorf("resuming from %s (execution.state-recovery.path): %w", cp.RecoveryPath, err)
	}
	defer closeRestore()
	info := &RestoreInfo{CheckpointID: r.Metadata.CheckpointID, Path: r.Path, JobID: r.Metadata.JobID, SinkLocations: make(map[string]string)}
	for _, uid := range sinkUIDs {
		op, ok := r.Metadata.Operator(uid)
		if !ok {
			continue
		}
		for _, sub := range op.Subtasks {
			for _, h := range sub.Operator {
				b, err := r.Store.ReadState(ctx, h)
				if err != nil {
					return nil, errorf("reading the state of sink %s in checkpoint %d: %w", uid, info.CheckpointID, err)
				}
				loc, _, err := ops.DecodeSinkState(b)
				if err != nil {
					return nil, errorf("sink %s in checkpoint %d: %w", uid, info.CheckpointID, err)
				}
				if prev, ok := info.SinkLocations[uid]; ok && prev != loc && loc != "" {
					return nil, errorf("sink %s in checkpoint %d wrote to two places, %s and %s", uid, info.CheckpointID, prev, loc)
				}
				if loc != "" {
					info.SinkLocations[uid] = loc
				}
			}
		}
	}
	return info, nil
}
