package runtime

import (
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
)

// NewCoordinator returns the checkpoint coordinator for g, configured by
// cp; the job master drives it (see perform).
func NewCoordinator(cp config.Checkpointing, jobID string, history int, g *JobGraph, sources, all []checkpoint.TaskID) (*coordinator.Coordinator, error) {
	cfg := coordinator.DefaultConfig()
	cfg.JobID = jobID
	cfg.Interval = cp.Interval
	cfg.MinPause = cp.MinPause
	cfg.Timeout = cp.Timeout
	cfg.MaxConcurrent = cp.MaxConcurrent
	cfg.TolerableFailed = cp.TolerableFailures
	cfg.NumRetained = cp.NumRetained
	cfg.Unaligned = cp.Unaligned
	cfg.HistorySize = history
	if cp.Mode == config.AtLeastOnce {
		cfg.Mode = config.AtLeastOnce
	}
	tasks := coordinator.Tasks{Sources: sources, All: all, MaxParallelism: map[string]int{}}
	for _, v := range g.Vertices {
		tasks.MaxParallelism[v.UID] = v.MaxParallelism
	}
	// With the tasks' inputs, a checkpoint can be triggered at the running
	// tasks whose inputs have all finished. Unaligned checkpoints need it:
	// an unaligned snapshot may come before a task's end of data, and the
	// task then needs a checkpoint after it, when its sources are gone.
	// Aligned ones do not (every task's snapshot after its end of data is
	// the same checkpoint's), and keep triggering sources only.
	if cp.Unaligned {
		tasks.Inputs = map[checkpoint.TaskID][]checkpoint.TaskID{}
		for gc := range g.Channels() {
			to := checkpoint.TaskID{Vertex: gc.Edge.To.UID, Subtask: gc.To}
			tasks.Inputs[to] = append(tasks.Inputs[to], checkpoint.TaskID{Vertex: gc.Edge.From.UID, Subtask: gc.From})
		}
	}
	return coordinator.New(cfg, tasks)
}
