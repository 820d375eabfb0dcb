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
	return coordinator.New(cfg, tasks)
}
