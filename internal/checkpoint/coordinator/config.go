package coordinator

import (
	"fmt"
	"slices"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
)

// Config configures a Coordinator. Start from DefaultConfig; every field
// names the Flink option it stands for and its default.
type Config struct {
	// JobID is written into every checkpoint's metadata.
	JobID string

	// Interval is the base interval of periodic checkpoints
	// (execution.checkpointing.interval). Zero disables periodic
	// checkpoints; manual checkpoints and savepoints still work. Otherwise
	// at least 10 ms. When shorter than MinPause, MinPause is used, as in
	// Flink. Default 0.
	Interval time.Duration

	// InitialDelay is the time from Start or Restart to the first periodic
	// trigger; after that, triggers follow every Interval. Zero means
	// Interval. Flink draws it at random from [MinPause, Interval] so that
	// many jobs do not checkpoint in lockstep; a caller that wants the same
	// draws it with its own random source. Default 0.
	InitialDelay time.Duration

	// MinPause is the least time between the completion of one checkpoint
	// and the periodic trigger of the next
	// (execution.checkpointing.min-pause). A periodic trigger that comes
	// too early is deferred to the end of the pause, never dropped. Manual
	// checkpoints and savepoints are not held back by it. Default 0.
	MinPause time.Duration

	// Timeout is how long a checkpoint may take, from its trigger to its
	// metadata being written, before it expires
	// (execution.checkpointing.timeout). At least 1 ms. Default 10 min.
	Timeout time.Duration

	// MaxConcurrent is the number of checkpoints that may be pending at
	// once (execution.checkpointing.max-concurrent-checkpoints). A periodic
	// trigger beyond it waits until one ends; a manual checkpoint beyond it
	// is refused. Savepoints are not limited by it unless Unaligned is set.
	// At least 1. Default 1.
	MaxConcurrent int

	// TolerableFailed is the number of consecutive counted checkpoint
	// failures tolerated; one more fails the job
	// (execution.checkpointing.tolerable-failed-checkpoints). At least 0.
	// Default 0: the first counted failure fails the job.
	TolerableFailed int

	// Mode is the consistency mode of checkpoints
	// (execution.checkpointing.mode). The coordinator passes it on in
	// Trigger and records it in the statistics; the barrier handlers act on
	// it. Default config.ExactlyOnce.
	Mode config.CheckpointingMode

	// Unaligned enables unaligned checkpoints
	// (execution.checkpointing.unaligned.enabled); it requires ExactlyOnce
	// and MaxConcurrent 1. The coordinator passes it on in Trigger
	// (savepoints are always aligned) and, as in Flink, then lets
	// savepoints wait for MaxConcurrent like checkpoints. Default false.
	Unaligned bool

	// HistorySize is the number of recent checkpoints whose statistics are
	// kept (web.checkpoints.history). At least 0. Default 10.
	HistorySize int

	// NumRetained is the number of completed checkpoints kept; older ones
	// are discarded (execution.checkpointing.num-retained). Savepoints are
	// never counted or discarded. At least 1. Default 1.
	NumRetained int
}

// DefaultConfig returns Flink's defaults, with periodic checkpoints off.
func DefaultConfig() Config {
	return Config{
		Mode:          config.ExactlyOnce,
		Timeout:       10 * time.Minute,
		MaxConcurrent: 1,
		HistorySize:   10,
		NumRetained:   1,
	}
}

// minInterval is Flink's smallest checkpoint interval.
const minInterval = 10 * time.Millisecond

// ConfigError reports an invalid Config or Tasks field by the Flink option
// it stands for.
type ConfigError struct {
	Key string
	Msg string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("checkpoint coordinator: %s: %s", e.Key, e.Msg)
}

func (c Config) validate() error {
	switch {
	case c.Interval < 0 || (c.Interval > 0 && c.Interval < minInterval):
		return &ConfigError{"execution.checkpointing.interval", fmt.Sprintf("%v: must be 0 (disabled) or at least %v", c.Interval, minInterval)}
	case c.InitialDelay < 0:
		return &ConfigError{"initial delay", fmt.Sprintf("%v: must not be negative", c.InitialDelay)}
	case c.MinPause < 0:
		return &ConfigError{"execution.checkpointing.min-pause", fmt.Sprintf("%v: must not be negative", c.MinPause)}
	case c.Timeout < time.Millisecond:
		return &ConfigError{"execution.checkpointing.timeout", fmt.Sprintf("%v: must be at least 1ms", c.Timeout)}
	case c.MaxConcurrent < 1:
		return &ConfigError{"execution.checkpointing.max-concurrent-checkpoints", fmt.Sprintf("%d: must be at least 1", c.MaxConcurrent)}
	case c.TolerableFailed < 0:
		return &ConfigError{"execution.checkpointing.tolerable-failed-checkpoints", fmt.Sprintf("%d: must be at least 0", c.TolerableFailed)}
	case c.Mode != config.ExactlyOnce && c.Mode != config.AtLeastOnce:
		return &ConfigError{"execution.checkpointing.mode", fmt.Sprintf("unknown mode %q", c.Mode)}
	case c.Unaligned && c.Mode != config.ExactlyOnce:
		return &ConfigError{"execution.checkpointing.unaligned.enabled", "unaligned checkpoints require execution.checkpointing.mode EXACTLY_ONCE"}
	case c.Unaligned && c.MaxConcurrent > 1:
		return &ConfigError{"execution.checkpointing.unaligned.enabled", "unaligned checkpoints require execution.checkpointing.max-concurrent-checkpoints 1"}
	case c.HistorySize < 0:
		return &ConfigError{"web.checkpoints.history", fmt.Sprintf("%d: must be at least 0", c.HistorySize)}
	case c.NumRetained < 1:
		return &ConfigError{"execution.checkpointing.num-retained", fmt.Sprintf("%d: must be at least 1", c.NumRetained)}
	}
	return nil
}

// Tasks describes the job's execution graph as far as checkpoints need it.
type Tasks struct {
	// Sources are the tasks a checkpoint is triggered at: they inject the
	// barrier. Every source is also in All.
	Sources []checkpoint.TaskID

	// All are the tasks that must acknowledge a checkpoint, sources
	// included. The subtasks of a vertex are numbered 0 to n-1; n is the
	// parallelism recorded in the metadata.
	All []checkpoint.TaskID

	// Inputs optionally names, for each task that is not a source, the
	// tasks it reads from. With it, once some tasks have finished, a
	// checkpoint is also triggered at every running task whose inputs have
	// all finished, as Flink's checkpoint plan does. Without it, only
	// running sources are triggered, and no checkpoint can be taken once
	// every source has finished.
	Inputs map[checkpoint.TaskID][]checkpoint.TaskID

	// MaxParallelism is the max parallelism (number of key groups) of each
	// vertex, recorded in the metadata. A vertex it does not name gets
	// DefaultMaxParallelism.
	MaxParallelism map[string]int
}

// graph is the validated, indexed form of Tasks.
type graph struct {
	all         []checkpoint.TaskID // in the order given
	index       map[checkpoint.TaskID]int
	source      []bool // by index
	inputs      [][]int
	hasInputs   bool
	parallelism map[string]int
	maxPar      map[string]int
}

func (t Tasks) validate() (*graph, error) {
	if len(t.All) == 0 {
		return nil, &ConfigError{"tasks", "no tasks"}
	}
	if len(t.Sources) == 0 {
		return nil, &ConfigError{"tasks", "no source tasks"}
	}
	g := &graph{
		all:         slices.Clone(t.All),
		index:       make(map[checkpoint.TaskID]int, len(t.All)),
		source:      make([]bool, len(t.All)),
		parallelism: map[string]int{},
		maxPar:      map[string]int{},
	}
	subtasks := map[string][]int{}
	for i, id := range t.All {
		if _, dup := g.index[id]; dup {
			return nil, &ConfigError{"tasks", fmt.Sprintf("task %v listed twice", id)}
		}
		if id.Subtask < 0 {
			return nil, &ConfigError{"tasks", fmt.Sprintf("task %v: negative subtask index", id)}
		}
		g.index[id] = i
		subtasks[id.Vertex] = append(subtasks[id.Vertex], id.Subtask)
	}
	for v, idx := range subtasks {
		slices.Sort(idx)
		for i, s := range idx {
			if s != i {
				return nil, &ConfigError{"tasks", fmt.Sprintf("vertex %s: subtasks must be numbered 0 to %d", v, len(idx)-1)}
			}
		}
		g.parallelism[v] = len(idx)
		// A vertex Tasks.MaxParallelism does not name has Flink's default.
		g.maxPar[v] = config.DefaultMaxParallelism(len(idx))
	}
	for v, n := range t.MaxParallelism {
		p, ok := g.parallelism[v]
		if !ok {
			return nil, &ConfigError{"tasks", fmt.Sprintf("max parallelism for unknown vertex %s", v)}
		}
		if n < p {
			return nil, &ConfigError{"tasks", fmt.Sprintf("vertex %s: max parallelism %d is below its parallelism %d", v, n, p)}
		}
		g.maxPar[v] = n
	}
	for _, id := range t.Sources {
		i, ok := g.index[id]
		if !ok {
			return nil, &ConfigError{"tasks", fmt.Sprintf("source %v is not among all tasks", id)}
		}
		if g.source[i] {
			return nil, &ConfigError{"tasks", fmt.Sprintf("source %v listed twice", id)}
		}
		g.source[i] = true
	}
	if t.Inputs != nil {
		g.hasInputs = true
		g.inputs = make([][]int, len(t.All))
		for id, ins := range t.Inputs {
			i, ok := g.index[id]
			if !ok {
				return nil, &ConfigError{"tasks", fmt.Sprintf("inputs of unknown task %v", id)}
			}
			if g.source[i] && len(ins) > 0 {
				return nil, &ConfigError{"tasks", fmt.Sprintf("source %v has inputs", id)}
			}
			for _, in := range ins {
				j, ok := g.index[in]
				if !ok {
					return nil, &ConfigError{"tasks", fmt.Sprintf("task %v reads from unknown task %v", id, in)}
				}
				g.inputs[i] = append(g.inputs[i], j)
			}
		}
		for i := range g.all {
			if !g.source[i] && len(g.inputs[i]) == 0 {
				return nil, &ConfigError{"tasks", fmt.Sprintf("task %v is not a source and has no inputs", g.all[i])}
			}
		}
	}
	return g, nil
}

// plan computes whom a checkpoint is triggered at and who must acknowledge
// it, given which tasks have finished: every running task acknowledges;
// running sources are triggered and, when inputs are known, so is every
// running task whose inputs have all finished (Flink's
// DefaultCheckpointPlanCalculator).
func (g *graph) plan(finished []bool) (trigger, wait []checkpoint.TaskID) {
	for i, id := range g.all {
		if finished[i] {
			continue
		}
		wait = append(wait, id)
		if g.source[i] {
			trigger = append(trigger, id)
			continue
		}
		if !g.hasInputs {
			continue
		}
		root := true
		for _, j := range g.inputs[i] {
			if !finished[j] {
				root = false
				break
			}
		}
		if root {
			trigger = append(trigger, id)
		}
	}
	return trigger, wait
}
