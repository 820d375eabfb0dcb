package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/objstore"
	"github.com/weirstream/weir/internal/ops"
	"github.com/weirstream/weir/internal/runtime"
)

// checkpointing builds the runtime's checkpoint settings and finds the
// checkpoint to restore from, if any.
func checkpointing(ctx context.Context, j Job, cp config.Checkpointing) (*runtime.CheckpointingOptions, *runtime.Restore, func() error, error) {
	var firstID int64 // the least id of the job's checkpoints, if above 0
	opts := &runtime.CheckpointingOptions{
		Mode:            cp.Mode,
		Unaligned:       cp.Unaligned,
		AlignedTimeout:  cp.AlignedTimeout,
		SavepointDir:    cp.SavepointDir,
		SavepointFormat: savepointFormat(cp.SavepointFormat),
		NewCoordinator: func(g *runtime.JobGraph, sources, all []checkpoint.TaskID) (*coordinator.Coordinator, error) {
			c, err := runtime.NewCoordinator(cp, j.JobID, j.Config.Int(config.KeyCheckpointHistory), g, sources, all)
			if err == nil && max(j.FirstCheckpointID, firstID) > 0 {
				c.SkipTo(max(j.FirstCheckpointID, firstID))
			}
			return c, err
		},
	}
	closer := func() error { return nil }
	if cp.Dir != "" {
		st, err := storage.Open(ctx, cp.Dir, j.JobID, storageOptions(j, storage.VerifyChecksums(true))...)
		if err != nil {
			return nil, nil, nil, errorf("opening checkpoint storage %s (execution.checkpointing.dir): %w", cp.Dir, err)
		}
		if cp.RecoveryPath != "" {
			// A job resumed under its own id, from an older checkpoint
			// than its newest, numbers its checkpoints above every one in
			// its directory: none is written into an existing one's. (A
			// job's id is random unless it is given.)
			highest, err := st.HighestID(ctx)
			if err != nil {
				st.Close()
				return nil, nil, nil, errorf("listing the checkpoints in %s (execution.checkpointing.dir): %w", cp.Dir, err)
			}
			firstID = highest + 1
		}
		opts.Storage = blobStorage{st}
		closer = st.Close
	}
	var restore *runtime.Restore
	if cp.RecoveryPath != "" {
		if opts.Storage == nil {
			return nil, nil, nil, errorf("execution.state-recovery.path %s needs execution.checkpointing.dir to be set", cp.RecoveryPath)
		}
		r, c, err := resolve(ctx, j, opts.Storage.(blobStorage).Storage, cp.RecoveryPath)
		if err != nil {
			closer()
			return nil, nil, nil, errorf("resuming from %s (execution.state-recovery.path): %w", cp.RecoveryPath, err)
		}
		if err := checkUnclaimed(j, cp, r); err != nil {
			c()
			closer()
			return nil, nil, nil, err
		}
		if cp.ClaimMode == config.Claim {
			if err := claim(j, opts.Storage.(blobStorage).Storage, r); err != nil {
				c()
				closer()
				return nil, nil, nil, err
			}
		}
		restore = r
		prev := closer
		closer = func() error { c(); return prev() }
	}
	return opts, restore, closer, nil
}

// checkUnclaimed refuses to restore r when it holds state for operators
// (by uid) that the job does not have, unless
// execution.state-recovery.ignore-unclaimed-state drops that state: a job
// whose code changed must not lose an operator's state without saying so.
func checkUnclaimed(j Job, cp config.Checkpointing, r *runtime.Restore) error {
	have := map[string]bool{}
	for _, v := range j.Graph.Vertices {
		have[v.UID] = true
		for _, uid := range v.OperatorUIDs {
			have[uid] = true
		}
	}
	var unclaimed []string
	for _, op := range r.Metadata.Operators {
		if !have[op.UID] {
			unclaimed = append(unclaimed, op.UID)
		}
	}
	if len(unclaimed) == 0 {
		return nil
	}
	if cp.IgnoreUnclaimedState {
		j.Logger.Warn("dropping the state of operators the job does not have", "operators", unclaimed, "restore", r.Path)
		return nil
	}
	return errorf("resuming from %s: it holds state for operators that the job does not have: %s (by uid); "+
		"give those operators back their uids, or set %s=true to drop their state",
		r.Path, strings.Join(unclaimed, ", "), config.KeyStateRecoveryIgnoreUnclaimedState)
}

// claim makes the job the owner of the checkpoint it restores, r
// (execution.state-recovery.claim-mode=CLAIM): the runtime retains it as
// one of the job's checkpoints and deletes it once subsumed. A savepoint
// is refused: weir never deletes one. A checkpoint in the job's own
// storage (resumed under the same job id) is deleted as the job's own
// are, by id; one in another job's directory, <dir>/<job-id>/chk-<n>, is
// deleted through a storage opened on that directory, which keeps the
// files a completed checkpoint there still names. A checkpoint elsewhere
// (a chk-<n> directory moved out of its job's directory) is refused:
// files it names in its job's other checkpoints could not be found.
func claim(j Job, st *storage.Storage, r *runtime.Restore) error {
	md := r.Metadata
	if md.Kind != checkpoint.KindCheckpoint {
		return errorf("resuming from %s with %s=%s (--claim-mode claim): it is a savepoint (its _metadata says so), which weir never deletes, so a job cannot take it over; resume from it with %s=%s, or claim a retained checkpoint",
			r.Path, config.KeyStateRecoveryClaimMode, config.Claim, config.KeyStateRecoveryClaimMode, config.NoClaim)
	}
	r.Claimed = true
	id := md.CheckpointID
	if md.JobID == st.JobID() && r.Path == st.CheckpointPath(id) {
		return nil
	}
	parent, jobID, ok := checkpointJobDir(r.Path, id)
	if !ok {
		return errorf("resuming from %s with %s=%s (--claim-mode claim): a claimed checkpoint must lie in its job's checkpoint directory, <dir>/<job-id>/chk-%d, for the job to delete it with the files it shares with that job's other checkpoints; resume with %s=%s",
			r.Path, config.KeyStateRecoveryClaimMode, config.Claim, id, config.KeyStateRecoveryClaimMode, config.NoClaim)
	}
	r.Discard = func(ctx context.Context) error {
		js, err := storage.Open(ctx, parent, jobID, storageOptions(j)...)
		if err != nil {
			return err
		}
		defer js.Close()
		return js.Discard(ctx, id)
	}
	return nil
}

// checkpointJobDir splits the path of checkpoint id, <dir>/<job-id>/chk-<id>
// (a local path or a URL, with its query), into <dir> and <job-id>.
func checkpointJobDir(p string, id int64) (dir, jobID string, ok bool) {
	p, query, _ := strings.Cut(p, "?")
	if query != "" {
		query = "?" + query
	}
	p = strings.TrimSuffix(filepath.ToSlash(p), "/")
	jobDir, chk, ok := cutLast(p)
	if !ok || chk != fmt.Sprintf("chk-%d", id) {
		return "", "", false
	}
	dir, jobID, ok = cutLast(jobDir)
	if !ok || dir == "" || jobID == "" || strings.HasSuffix(dir, ":/") {
		return "", "", false
	}
	return filepath.FromSlash(dir) + query, jobID, true
}

// cutLast splits p at its last "/".
func cutLast(p string) (before, after string, ok bool) {
	i := strings.LastIndex(p, "/")
	if i < 0 {
		return "", "", false
	}
	return p[:i], p[i+1:], true
}

// storageOptions adds to opts what the job's configuration sets (the s3.*
// options of s3:// buckets, the inline threshold) and what routes the
// storage's operations through the job's StorageFaults, if it has them.
func storageOptions(j Job, opts ...storage.Option) []storage.Option {
	opts = append(opts, storage.URLMux(objstore.URLMux(j.Config)),
		storage.InlineThreshold(int(j.Config.MemorySize(config.KeyCheckpointingInlineThreshold))))
	if j.StorageFaults == nil {
		return opts
	}
	return append(opts, storage.WithFaults(storage.NewHookFaults(0, j.StorageFaults)))
}

// resolve finds what to resume from at p: a checkpoint or savepoint
// directory, its _metadata file, or a job's checkpoint directory
// (<dir>/<job-id>), whose newest completed checkpoint that verifies is
// taken, skipping corrupt or incomplete ones for the previous one.
func resolve(ctx context.Context, j Job, st *storage.Storage, p string) (*runtime.Restore, func() error, error) {
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
	js, jerr := storage.Open(ctx, parent, jobID, storageOptions(j, storage.VerifyChecksums(true))...)
	if jerr != nil {
		return nil, nil, err
	}
	md, skipped, lerr := js.Latest(ctx)
	for _, s := range skipped {
		j.Logger.Warn("skipping a checkpoint that does not verify", "skipped", s)
	}
	if lerr != nil {
		js.Close()
		if errors.Is(lerr, storage.ErrNoCheckpoint) {
			return nil, nil, fmt.Errorf("%w (and as a job directory: %w)", err, lerr)
		}
		return nil, nil, lerr
	}
	if err := checkFallback(j, md.CheckpointID, skipped); err != nil {
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
func checkFallback(j Job, id int64, skipped []storage.Skipped) error {
	var completed []int64
	for _, s := range skipped {
		if !errors.Is(s.Err, storage.ErrIncomplete) {
			completed = append(completed, s.CheckpointID)
		}
	}
	return refuseFallback(j, completed, id)
}

// refuseFallback returns why the job must not restore checkpoint id in
// place of the completed checkpoints newer, or nil if every sink undoes
// their output on that restore or duplicates are accepted.
func refuseFallback(j Job, completed []int64, id int64) error {
	if len(completed) == 0 || len(j.Unreconciled) == 0 || j.Config.Bool(config.KeyStateRecoveryAllowDuplicateOutput) {
		return nil
	}
	ids := make([]string, len(completed))
	for i, c := range completed {
		ids[i] = fmt.Sprint(c)
	}
	return fmt.Errorf("checkpoints %s completed but do not verify; falling back to checkpoint %d would write again what their transactions committed, which sink %s cannot undo: resume from a savepoint or a checkpoint you choose, or set %s=true to accept the duplicates",
		strings.Join(ids, ", "), id, strings.Join(j.Unreconciled, ", "), config.KeyStateRecoveryAllowDuplicateOutput)
}

// retain applies execution.checkpointing.externalized-checkpoint-retention
// when the job ends: checkpoints are kept only with RETAIN_ON_CANCELLATION,
// or, with DELETE_ON_CANCELLATION, when the job failed.
func retain(ctx context.Context, cp config.Checkpointing, st runtime.CheckpointStorage, restored int64, claimed func(context.Context) error, runErr error, canceled bool, log interface {
	Warn(msg string, args ...any)
}) {
	bs, ok := st.(blobStorage)
	if !ok {
		return
	}
	keep := cp.ExternalizedRetention == config.RetainOnCancellation ||
		(cp.ExternalizedRetention == config.DeleteOnCancellation && runErr != nil && !canceled)
	if keep {
		// What the retained checkpoints do not need: checkpoints that
		// never completed (some subtask may have written into one after
		// its abort's discard).
		if err := bs.DiscardIncomplete(context.WithoutCancel(ctx)); err != nil {
			log.Warn("discarding incomplete checkpoints at the end of the job", "err", err)
		}
		return
	}
	// The checkpoint the job restored is not the job's to delete
	// (NO_CLAIM), even when it lies among the job's own; nor are the
	// files it names.
	var notOwned []int64
	if restored > 0 {
		notOwned = append(notOwned, restored)
	}
	if err := bs.DiscardAll(context.WithoutCancel(ctx), notOwned...); err != nil {
		log.Warn("discarding checkpoints at the end of the job", "err", err)
	}
	// A claimed checkpoint in another job's directory is the job's too
	// (deleting it again, once subsumed, is harmless).
	if claimed != nil {
		if err := claimed(context.WithoutCancel(ctx)); err != nil {
			log.Warn("discarding the claimed checkpoint at the end of the job", "err", err)
		}
	}
}

// blobStorage adapts the checkpoint storage to the runtime.
type blobStorage struct{ *storage.Storage }

func (b blobStorage) WriteState(ctx context.Context, id int64, name string, write func(io.Writer) error) (checkpoint.StateHandle, error) {
	return writeThrough(b.CreateState(ctx, id, name))(write)
}

func (b blobStorage) WriteSharedState(ctx context.Context, id int64, name string, write func(io.Writer) error) (checkpoint.StateHandle, error) {
	return writeThrough(b.CreateSharedState(ctx, id, name))(write)
}

func (b blobStorage) WriteSavepointState(ctx context.Context, dir, name string, write func(io.Writer) error) (checkpoint.StateHandle, error) {
	sp, err := b.OpenSavepoint(ctx, dir)
	if err != nil {
		return checkpoint.StateHandle{}, err
	}
	defer sp.Close()
	return writeThrough(sp.CreateState(ctx, name))(write)
}

// writeThrough returns the function that writes a piece of state with
// write through w (created with err) and closes it for its handle, or
// aborts it if write fails.
func writeThrough(w *storage.StateWriter, err error) func(write func(io.Writer) error) (checkpoint.StateHandle, error) {
	return func(write func(io.Writer) error) (checkpoint.StateHandle, error) {
		if err != nil {
			return checkpoint.StateHandle{}, err
		}
		if err := write(w); err != nil {
			w.Abort()
			return checkpoint.StateHandle{}, err
		}
		return w.Close()
	}
}

// CreateSavepoint implements runtime.CheckpointStorage.
func (b blobStorage) CreateSavepoint(ctx context.Context, dir string) (runtime.SavepointWriter, error) {
	sp, err := b.Storage.CreateSavepoint(ctx, dir)
	if err != nil {
		return nil, err
	}
	return savepointWriter{sp}, nil
}

// savepointWriter adapts a storage.Savepoint to the runtime.
type savepointWriter struct{ *storage.Savepoint }

// Abort deletes the savepoint, written or not: the job master aborts only
// a savepoint it reports failed.
func (s savepointWriter) Abort(ctx context.Context) error { return s.Discard(ctx) }

func (s savepointWriter) WriteState(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.StateHandle, error) {
	return writeThrough(s.CreateState(ctx, name))(write)
}

// RestoreInfo describes the checkpoint or savepoint a job resumes from.
type RestoreInfo struct {
	CheckpointID  int64
	Path          string
	JobID         string
	SinkLocations map[string]string
}

// InspectRestore resolves execution.state-recovery.path the way Start
// will, and reads from the checkpoint where the sinks with the given uids
// wrote. It returns nil when the configuration sets no recovery path. The
// job's Graph is not needed.
func InspectRestore(ctx context.Context, j Job, sinkUIDs ...string) (*RestoreInfo, error) {
	cp, err := j.Config.Checkpointing()
	if err != nil {
		return nil, err
	}
	if cp.RecoveryPath == "" {
		return nil, nil
	}
	if cp.Dir == "" {
		return nil, errorf("execution.state-recovery.path %s needs execution.checkpointing.dir to be set", cp.RecoveryPath)
	}
	st, err := storage.Open(ctx, cp.Dir, j.JobID, storageOptions(j, storage.VerifyChecksums(true))...)
	if err != nil {
		return nil, errorf("opening checkpoint storage %s (execution.checkpointing.dir): %w", cp.Dir, err)
	}
	defer st.Close()
	r, closeRestore, err := resolve(ctx, j, st, cp.RecoveryPath)
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

// savepointFormat returns the runtime's savepoint format for
// execution.savepoint.format's value f.
func savepointFormat(f config.SavepointFormat) checkpoint.SavepointFormat {
	if f == config.SavepointNative {
		return checkpoint.FormatNative
	}
	return checkpoint.FormatCanonical
}
