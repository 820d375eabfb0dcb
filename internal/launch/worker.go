package launch

import (
	"context"
	"io"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runtime"
)

// Worker runs the subtasks of a job that a task manager was given,
// reporting to the job manager through a runtime.Listener: the task
// manager's side of a job.
type Worker struct {
	*runtime.Worker
	job Job
	st  *storage.Storage

	mu       sync.Mutex
	restores map[string]runtime.StateReader
	closers  []func() error
}

// NewWorker returns a Worker for the subtasks of j. State goes to
// execution.checkpointing.dir, which every task manager must reach;
// without it, state travels inline with the acknowledgements.
func NewWorker(ctx context.Context, j Job, peers runtime.Peers, l runtime.Listener) (*Worker, error) {
	cp, err := j.Config.Checkpointing()
	if err != nil {
		return nil, err
	}
	wo := runtime.WorkerOptions{JobID: j.JobID, Logger: j.Logger.With("job", j.Name, "job_id", j.JobID), Peers: peers, Checkpointing: cp.Enabled,
		BatchSize: j.BatchSize, ChannelCapacity: j.ChannelCapacity, Clock: j.Clock, Faults: j.Faults, Debloat: debloat(j.Config)}
	wo.Mode, wo.Unaligned = cp.Mode, cp.Unaligned
	// A task manager's slots share its managed memory.
	cl, err := j.Config.Cluster()
	if err != nil {
		return nil, err
	}
	if wo.KeyedState, err = keyedState(j.Config, j.Graph, cl.TaskSlots); err != nil {
		return nil, err
	}
	w := &Worker{job: j, restores: map[string]runtime.StateReader{}}
	if cp.Enabled && cp.Dir != "" {
		st, err := storage.Open(ctx, cp.Dir, j.JobID, storageOptions(j)...)
		if err != nil {
			return nil, errorf("opening checkpoint storage %s (execution.checkpointing.dir): %w", cp.Dir, err)
		}
		w.st = st
		w.closers = append(w.closers, st.Close)
		wo.Store = blobStorage{st}
	}
	if wo.Local, err = localStore(j, cp, wo.KeyedState); err != nil {
		for _, c := range w.closers {
			c()
		}
		return nil, err
	}
	if wo.Local != nil {
		// Closed last of all: the job has ended on this task manager.
		w.closers = append([]func() error{wo.Local.Close}, w.closers...)
		wo.FromLocal = cp.FromLocal
	}
	w.Worker = runtime.NewWorker(j.Graph, wo, l)
	return w, nil
}

// Deploy starts the subtasks of d. A restore that names only its path (as
// it comes from the job manager) is read from that checkpoint; one with
// neither path nor store holds its state inline.
func (w *Worker) Deploy(ctx context.Context, d runtime.Deployment) {
	if r := d.Restore; r != nil && r.Store == nil {
		rr := *r
		store, err := w.restoreStore(ctx, r.Path)
		if err != nil {
			rr.Store = failingReader{err}
		} else {
			rr.Store = store
		}
		d.Restore = &rr
	}
	w.Worker.Deploy(ctx, d)
}

// restoreStore opens the checkpoint at path once, and keeps it open for
// the deployments that follow until Close.
func (w *Worker) restoreStore(ctx context.Context, path string) (runtime.StateReader, error) {
	if path == "" {
		return runtime.InlineState, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.restores[path]; ok {
		return s, nil
	}
	if w.st == nil {
		return nil, errorf("restoring from %s needs execution.checkpointing.dir to be set", path)
	}
	r, closer, err := resolve(ctx, w.job, w.st, path)
	if err != nil {
		return nil, errorf("restoring from %s: %w", path, err)
	}
	w.restores[path] = r.Store
	w.closers = append(w.closers, closer)
	return r.Store, nil
}

// Close releases the storage the worker opened. Its subtasks must have
// exited.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first error
	for i := len(w.closers) - 1; i >= 0; i-- {
		if err := w.closers[i](); err != nil && first == nil {
			first = err
		}
	}
	w.closers = nil
	return first
}

// failingReader fails every read with the reason the restore could not
// be opened, so the subtasks that need it fail and the job restarts.
type failingReader struct{ err error }

func (f failingReader) ReadState(context.Context, checkpoint.StateHandle) ([]byte, error) {
	return nil, f.err
}

func (f failingReader) OpenState(context.Context, checkpoint.StateHandle) (io.ReadCloser, error) {
	return nil, f.err
}
