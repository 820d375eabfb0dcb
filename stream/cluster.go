package stream

import (
	"context"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runtime"
)

// WithExecutor runs the job's subtasks on the executor newExec makes
// instead of in this process: weir's cluster job manager uses it to place
// them on task managers. Its types are internal to weir.
func WithExecutor(newExec func(g *runtime.JobGraph, l runtime.Listener) (runtime.Executor, error)) Option {
	return func(e *Environment) { e.newExec = newExec }
}

// Worker runs the subtasks of an environment's job that a task manager was
// given, reporting to the job manager through a runtime.Listener. It is
// weir's task-manager side of a job; its types are internal to weir.
type Worker struct {
	*runtime.Worker
	env *Environment
	st  *storage.Storage

	mu       sync.Mutex
	restores map[string]runtime.StateReader
	closers  []func() error
}

// NewWorker builds the job graph of name the way ExecuteAsync does, with
// the environment's configuration, and returns a Worker for its subtasks.
// State goes to execution.checkpointing.dir, which every task manager
// must reach; without it, state travels inline with the acknowledgements.
func (e *Environment) NewWorker(ctx context.Context, name string, peers runtime.Peers, l runtime.Listener) (*Worker, error) {
	pipe, err := e.cfg.Pipeline()
	if err != nil {
		return nil, err
	}
	g, err := e.graph(name, pipe)
	if err != nil {
		return nil, err
	}
	cp, err := e.cfg.Checkpointing()
	if err != nil {
		return nil, err
	}
	wo := runtime.WorkerOptions{JobID: e.jobID, Logger: e.logger.With("job", name, "job_id", e.jobID), Peers: peers, Checkpointing: cp.Enabled,
		BatchSize: e.batchSize, ChannelCapacity: e.channelCapacity}
	if e.clock != nil {
		wo.Clock = e.clock
	}
	if e.faults != nil {
		wo.Faults = faultInjector(e.faults)
	}
	wo.Mode = cp.Mode
	w := &Worker{env: e, restores: map[string]runtime.StateReader{}}
	if cp.Enabled && cp.Dir != "" {
		st, err := storage.Open(ctx, cp.Dir, e.jobID, e.storageOptions()...)
		if err != nil {
			return nil, errorf("opening checkpoint storage %s (execution.checkpointing.dir): %w", cp.Dir, err)
		}
		w.st = st
		w.closers = append(w.closers, st.Close)
		wo.Store = blobStorage{st}
	}
	w.Worker = runtime.NewWorker(g, wo, l)
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
	r, closer, err := w.env.resolve(ctx, w.st, path)
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
