package stream

import (
	"context"

	"github.com/weirstream/weir/internal/launch"
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
	*launch.Worker
}

// NewWorker builds the job graph of name the way ExecuteAsync does, with
// the environment's configuration, and returns a Worker for its subtasks.
func (e *Environment) NewWorker(ctx context.Context, name string, peers runtime.Peers, l runtime.Listener) (*Worker, error) {
	j, err := e.describe(name)
	if err != nil {
		return nil, err
	}
	w, err := launch.NewWorker(ctx, j, peers, l)
	if err != nil {
		return nil, err
	}
	return &Worker{w}, nil
}
