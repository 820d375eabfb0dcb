package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/stream"
)

// StateConfig configures the state-backend benchmark: the keyed sum of
// KeyedSumConfig over many keys, run once per backend.
type StateConfig struct {
	KeyedSumConfig
	// Memory is each keyed subtask's pebble memory (state.backend.pebble.memory).
	Memory string
	// RescaleTo, if positive, resumes each run's last checkpoint at this
	// parallelism and times the rescale (StateResult.Rescale).
	RescaleTo int
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
	{"hashmap, incremental", []string{"state.backend.type=hashmap", "execution.checkpointing.incremental=true"}},
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
	// RestoreRemote and RestoreLocal are the time to read and verify
	// every state file of the last checkpoint as a restore does: from
	// checkpoint storage (here a local directory, so the figure leaves
	// out any network), and from local copies (local recovery). Zero
	// without a completed checkpoint.
	RestoreRemote, RestoreLocal time.Duration
	// Rescale is, with RescaleTo, the time from submitting the job again
	// from the last checkpoint at parallelism RescaleTo until its last
	// keyed subtask has opened with its share of the key groups restored:
	// deployment, reading and redistributing the state.
	Rescale time.Duration
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
		if c.RescaleTo > 0 {
			return r, fmt.Errorf("no checkpoint completed to rescale from: give the run more records or a shorter checkpoint interval")
		}
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
	if r.RestoreRemote, r.RestoreLocal, err = restoreReads(ctx, st, md, dir+"/local-copies"); err != nil {
		return r, err
	}
	if c.RescaleTo > 0 {
		if r.Rescale, err = c.rescale(ctx, cfg, st.CheckpointPath(last.ID)); err != nil {
			return r, fmt.Errorf("rescaling to %d: %w", c.RescaleTo, err)
		}
	}
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

// rescale submits the job again at parallelism c.RescaleTo from the
// checkpoint at path, and returns the time until every subtask of the sum
// has opened, its key groups' state restored. The job is canceled then:
// what it would go on to process is not part of the rescale.
func (c StateConfig) rescale(ctx context.Context, cfg *config.Configuration, path string) (time.Duration, error) {
	cfg = cfg.Clone()
	for k, v := range map[string]string{
		config.KeyParallelism:                       strconv.Itoa(c.RescaleTo),
		config.KeyStateRecoveryPath:                 path,
		config.KeyCheckpointingInterval:             "1 h",
		config.KeyStateRecoveryIgnoreUnclaimedState: "false",
	} {
		if err := cfg.Set(k, v); err != nil {
			return 0, err
		}
	}
	var mu sync.Mutex
	opened, fresh := 0, []int(nil) // fresh: subtasks that opened without state
	all := make(chan time.Time, 1)
	env, _, err := c.job(cfg, stream.WithJobID("bench-state-rescaled"), stream.WithFaults(func(_ context.Context, site stream.FaultSite) error {
		if site.Point != stream.FaultOpen || site.Operator != "sum" || site.Step != 1 {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if site.Restored == 0 {
			fresh = append(fresh, site.Task.Subtask)
		}
		if opened++; opened == c.RescaleTo {
			all <- time.Now()
		}
		return nil
	}))
	if err != nil {
		return 0, err
	}
	jctx, cancel := context.WithCancel(ctx)
	start := time.Now()
	jc, err := env.ExecuteAsync(jctx, "bench-state-rescaled")
	if err != nil {
		cancel()
		return 0, err
	}
	defer func() {
		cancel()
		_ = jc.Wait() // canceled
	}()
	select {
	case at := <-all:
		mu.Lock()
		defer mu.Unlock()
		if len(fresh) > 0 {
			return 0, fmt.Errorf("the sum's subtasks %v opened without the checkpoint's state", fresh)
		}
		return at.Sub(start), nil
	case <-jc.Done():
		return 0, fmt.Errorf("the rescaled job ended before its subtasks opened: %v", jc.Wait())
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// restoreReads times reading every state file of md, verified, from
// checkpoint storage, then from local copies of them made in localRoot
// the way a subtask with local backup makes them.
func restoreReads(ctx context.Context, st *storage.Storage, md *checkpoint.Metadata, localRoot string) (remote, local time.Duration, err error) {
	var hs []checkpoint.StateHandle
	for _, op := range md.Operators {
		for _, sub := range op.Subtasks {
			for _, h := range append(append(sub.Keyed, sub.Operator...), sub.InputChannels...) {
				if h.Path != "" {
					hs = append(hs, h)
				}
			}
		}
	}
	l, err := storage.OpenLocalStore([]string{localRoot}, md.JobID)
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	for _, h := range hs {
		b, err := st.ReadState(ctx, h)
		if err != nil {
			return 0, 0, err
		}
		dir, name, _ := strings.Cut(h.Path, "/")
		id, err := strconv.ParseInt(strings.TrimPrefix(dir, "chk-"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("state file %s outside a checkpoint directory", h.Path)
		}
		w := l.Create(id, name)
		w.Write(b)
		w.Commit(h)
	}
	readAll := func(r interface {
		ReadState(context.Context, checkpoint.StateHandle) ([]byte, error)
	}) (time.Duration, error) {
		start := time.Now()
		for _, h := range hs {
			if _, err := r.ReadState(ctx, h); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	if remote, err = readAll(st); err != nil {
		return 0, 0, err
	}
	lr := l.Reader(st, nil)
	if local, err = readAll(lr); err != nil {
		return 0, 0, err
	}
	if _, fromRemote, _ := lr.RestoreStats(); fromRemote != 0 {
		return 0, 0, fmt.Errorf("the local restore read %d bytes from checkpoint storage", fromRemote)
	}
	return remote, local, nil
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
