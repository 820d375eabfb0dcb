package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/stream"
)

// StateConfig configures the state-backend benchmark: the keyed sum of
// KeyedSumConfig over many keys, run once per backend.
type StateConfig struct {
	KeyedSumConfig
	// Memory is each keyed subtask's pebble memory (state.backend.pebble.memory).
	Memory string
}

// DefaultState is the configuration `weir bench state` runs.
func DefaultState() StateConfig {
	return StateConfig{
		KeyedSumConfig: KeyedSumConfig{Records: 4_000_000, Keys: 100_000, Parallelism: 2, Checkpoint: time.Second, Partitions: 2},
		Memory:         "64 mb",
	}
}

// StateBackends are the configurations `weir bench state` compares.
var StateBackends = []struct {
	Name   string
	Config []string
}{
	{"hashmap", []string{"state.backend.type=hashmap"}},
	{"pebble, full checkpoints", []string{"state.backend.type=pebble"}},
	{"pebble, incremental", []string{"state.backend.type=pebble", "execution.checkpointing.incremental=true"}},
}

// StateResult is one backend's run.
type StateResult struct {
	Result
	// CPU is the process's user and system time during the run.
	CPU time.Duration
	// LastDuration is the last completed checkpoint's duration; LastFull
	// the size of the state it names, LastWritten what it wrote itself
	// (the rest it names in earlier checkpoints).
	LastDuration          time.Duration
	LastFull, LastWritten int64
}

// RunState runs the keyed sum on one backend configuration, checkpointing
// to a temporary directory.
func RunState(ctx context.Context, c StateConfig, backend []string) (StateResult, error) {
	dir, err := os.MkdirTemp("", "weir-bench-state-")
	if err != nil {
		return StateResult{}, err
	}
	defer os.RemoveAll(dir)
	kv := append([]string{fmt.Sprintf("parallelism.default=%d", c.Parallelism),
		"execution.checkpointing.dir=" + dir, "execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
		"state.backend.pebble.memory=" + c.Memory, "state.backend.pebble.localdir=" + dir + "/local"}, backend...)
	if c.Checkpoint > 0 {
		kv = append(kv, "execution.checkpointing.interval="+c.Checkpoint.String())
	}
	cfg, err := config.ParseDynamic(kv)
	if err != nil {
		return StateResult{}, err
	}
	const jobID = "bench-state"
	env, completed, err := c.job(cfg, stream.WithJobID(jobID))
	if err != nil {
		return StateResult{}, err
	}
	per := c.Records / int64(c.Partitions)
	runtime.GC()
	cpu0, start := cpuTime(), time.Now()
	jc, err := env.ExecuteAsync(ctx, "bench-state")
	if err != nil {
		return StateResult{}, err
	}
	if err := jc.Wait(); err != nil {
		return StateResult{}, err
	}
	r := StateResult{Result: Result{Records: per * int64(c.Partitions), Elapsed: time.Since(start), Checkpoints: int(completed.Load())}, CPU: cpuTime() - cpu0}
	last := jc.Metrics().LastCheckpoint
	r.LastDuration = last.Duration
	if last.ID == 0 {
		return r, nil
	}
	st, err := storage.Open(ctx, dir, jobID)
	if err != nil {
		return r, err
	}
	defer st.Close()
	md, err := st.ReadMetadata(ctx, st.CheckpointPath(last.ID))
	if err != nil {
		return r, err
	}
	r.LastFull = md.Size()
	own := fmt.Sprintf("chk-%d/", last.ID)
	for _, op := range md.Operators {
		for _, sub := range op.Subtasks {
			for _, h := range append(append(sub.Keyed, sub.Operator...), sub.InputChannels...) {
				if h.Path == "" || strings.HasPrefix(h.Path, own) {
					r.LastWritten += h.Size
				}
			}
		}
	}
	return r, nil
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
