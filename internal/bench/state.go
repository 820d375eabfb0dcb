package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
)

// StateConfig configures the state-backend benchmark: the keyed sum of
// KeyedSumConfig over many keys, run once per backend.
type StateConfig struct {
	KeyedSumConfig
	// Memory is each keyed subtask's pebble memory
	// (state.backend.pebble.memory); "" leaves it unset.
	Memory string
	// ProcessSize, if not "", is taskmanager.memory.process.size: the
	// run's soft memory limit and, with Memory "", what the pebble
	// stores' managed memory is a fraction of.
	ProcessSize string
	// RescaleTo, if positive, resumes each run's last checkpoint at this
	// parallelism and times the rescale (StateResult.Rescale).
	RescaleTo int
	// ValueBytes, if positive, makes each key's state a value of that many
	// incompressible bytes (the running sum in its first eight), rewritten
	// by every record, rather than an int64: keys × ValueBytes is then the
	// size of the state, for state far larger than memory.
	ValueBytes int
}

// DefaultState is the configuration `weir bench state` runs.
func DefaultState() StateConfig {
	return StateConfig{
		KeyedSumConfig: KeyedSumConfig{Records: 4_000_000, Keys: 100_000, Parallelism: 2, Checkpoint: time.Second, Partitions: 2},
		Memory:         "64 mb",
	}
}

// StateBackends are the configurations `weir bench state` compares; Key
// names one in its --backends flag.
var StateBackends = []struct {
	Key, Name string
	Config    []string
}{
	{"hashmap", "hashmap", []string{"state.backend.type=hashmap"}},
	{"hashmap-incremental", "hashmap, incremental", []string{"state.backend.type=hashmap", "execution.checkpointing.incremental=true"}},
	{"pebble", "pebble, full checkpoints", []string{"state.backend.type=pebble"}},
	{"pebble-incremental", "pebble, incremental", []string{"state.backend.type=pebble", "execution.checkpointing.incremental=true"}},
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
	// WrittenShare is the median, over the later half of the run's
	// checkpoints (SharesMeasured of them), of what each wrote itself as
	// a share of the state it names: with an incremental backend and
	// --active, the steady cost of a checkpoint once every key is written.
	WrittenShare   float64
	SharesMeasured int
	// Rescale is, with RescaleTo, the time from submitting the job again
	// from the last checkpoint at parallelism RescaleTo until its last
	// keyed subtask has opened with its share of the key groups restored:
	// deployment, reading and redistributing the state.
	Rescale time.Duration
	// PeakRSS is the most resident memory of the process seen during the
	// run (sampled every 50 ms from /proc/self/statm; 0 where there is
	// none), StartRSS the resident memory when it started.
	PeakRSS, StartRSS int64
	// RescalePeakRSS is, with RescaleTo, the most resident memory seen
	// during the rescale, which starts after the run's memory is
	// returned to the system.
	RescalePeakRSS int64
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
		"state.backend.pebble.localdir=" + dir + "/local"}, backend...)
	if c.Memory != "" {
		kv = append(kv, config.KeyPebbleMemory+"="+c.Memory)
	}
	if c.ProcessSize != "" {
		kv = append(kv, config.KeyTaskManagerProcessSize+"="+c.ProcessSize)
	}
	if c.Checkpoint > 0 {
		kv = append(kv, "execution.checkpointing.interval="+c.Checkpoint.String())
	}
	cfg, err := config.ParseDynamic(kv)
	if err != nil {
		return StateResult{}, err
	}
	const jobID = "bench-state"
	st, err := storage.Open(ctx, dir, jobID)
	if err != nil {
		return StateResult{}, err
	}
	defer st.Close()
	// Each checkpoint's share of the state it wrote itself, read from its
	// metadata as it completes (retention discards it once the next one
	// completes).
	var (
		sharesMu sync.Mutex
		shares   = map[int64]float64{}
		reads    sync.WaitGroup
	)
	env, completed, err := c.stateJob(cfg, func(id int64) {
		reads.Go(func() {
			md, err := st.ReadMetadata(ctx, st.CheckpointPath(id))
			if err != nil || md.Size() == 0 {
				return
			}
			sharesMu.Lock()
			shares[id] = float64(writtenBy(md, id)) / float64(md.Size())
			sharesMu.Unlock()
		})
	}, stream.WithJobID(jobID))
	if err != nil {
		return StateResult{}, err
	}
	per := c.Records / int64(c.Partitions)
	runtime.GC()
	startRSS := residentBytes()
	peak := sampleRSS()
	cpu0, start := cpuTime(), time.Now()
	jc, err := env.ExecuteAsync(ctx, "bench-state")
	if err != nil {
		peak()
		return StateResult{}, err
	}
	err = jc.Wait()
	peakRSS := peak()
	reads.Wait()
	if err != nil {
		return StateResult{}, err
	}
	r := StateResult{Result: Result{Records: per * int64(c.Partitions), Elapsed: time.Since(start), Checkpoints: int(completed.Load())}, CPU: cpuTime() - cpu0,
		PeakRSS: peakRSS, StartRSS: startRSS}
	last := jc.Metrics().LastCheckpoint
	r.LastDuration = last.Duration
	if last.ID == 0 {
		if c.RescaleTo > 0 {
			return r, fmt.Errorf("no checkpoint completed to rescale from: give the run more records or a shorter checkpoint interval")
		}
		return r, nil
	}
	r.WrittenShare, r.SharesMeasured = secondHalfMedian(shares)
	md, err := st.ReadMetadata(ctx, st.CheckpointPath(last.ID))
	if err != nil {
		return r, err
	}
	r.LastFull = md.Size()
	if r.RestoreRemote, r.RestoreLocal, err = restoreReads(ctx, st, md, dir+"/local-copies"); err != nil {
		return r, err
	}
	if c.RescaleTo > 0 {
		runtime.GC()
		debug.FreeOSMemory()
		peak := sampleRSS()
		r.Rescale, err = c.rescale(ctx, cfg, st.CheckpointPath(last.ID))
		r.RescalePeakRSS = peak()
		if err != nil {
			return r, fmt.Errorf("rescaling to %d: %w", c.RescaleTo, err)
		}
	}
	r.LastWritten = writtenBy(md, last.ID)
	return r, nil
}

// writtenBy is what checkpoint id, whose metadata is md, wrote itself:
// the size of its state less the files earlier checkpoints wrote.
func writtenBy(md *checkpoint.Metadata, id int64) int64 {
	var n int64
	for _, op := range md.Operators {
		for _, sub := range op.Subtasks {
			for _, h := range append(append(sub.Keyed, sub.Operator...), sub.InputChannels...) {
				if by, _, _ := storage.ParseStatePath(h.Path); h.Path == "" || by == id {
					n += h.Size
				}
			}
		}
	}
	return n
}

// secondHalfMedian returns the median of the shares of the later half of
// the checkpoints measured (by id), and how many that half holds.
func secondHalfMedian(shares map[int64]float64) (float64, int) {
	ids := slices.Sorted(maps.Keys(shares))
	ids = ids[len(ids)/2:]
	if len(ids) == 0 {
		return 0, 0
	}
	vs := make([]float64, len(ids))
	for i, id := range ids {
		vs[i] = shares[id]
	}
	slices.Sort(vs)
	return vs[len(vs)/2], len(vs)
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
	env, _, err := c.stateJob(cfg, nil, stream.WithJobID("bench-state-rescaled"), stream.WithFaults(func(_ context.Context, site stream.FaultSite) error {
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
		id, name, ok := storage.ParseStatePath(h.Path)
		if !ok {
			return 0, 0, fmt.Errorf("state file %s outside a checkpoint directory and shared/", h.Path)
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

// stateJob builds the benchmark's job: the keyed sum, or with ValueBytes
// its sum in values of that size.
func (c StateConfig) stateJob(cfg *config.Configuration, onCompleted func(int64), opts ...stream.Option) (*stream.Environment, *atomic.Int64, error) {
	fn := func() stream.KeyedProcessFunction[int64, Record, struct{}] { return &summer{} }
	if c.ValueBytes > 0 {
		if c.ValueBytes < 8 {
			return nil, nil, fmt.Errorf("values of %d bytes: want at least 8, for the sum", c.ValueBytes)
		}
		fn = func() stream.KeyedProcessFunction[int64, Record, struct{}] { return &paddedSummer{size: c.ValueBytes} }
	}
	return c.buildJob(cfg, fn, onCompleted, opts...)
}

// paddedSummer keeps each key's running sum in the first eight bytes of
// a value of size bytes, the rest incompressible bytes drawn from the key,
// and rewrites it on every record.
type paddedSummer struct {
	size int
	sum  state.ValueState[[]byte]
}

func (s *paddedSummer) Open(rc *stream.RuntimeContext[int64]) error {
	var err error
	s.sum, err = stream.ValueState[[]byte](rc, "sum")
	return err
}

func (s *paddedSummer) ProcessElement(ctx *stream.Context[int64, struct{}], r Record) error {
	v, ok := s.sum.Value()
	if !ok {
		v = make([]byte, s.size)
		x := uint64(r.Key)*0x9e3779b97f4a7c15 + 1
		for i := 8; i < len(v); i += 8 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], x)
			copy(v[i:], w[:])
		}
	}
	binary.LittleEndian.PutUint64(v, binary.LittleEndian.Uint64(v)+uint64(r.Value))
	s.sum.Update(v)
	return nil
}

// residentBytes is the process's resident memory, 0 if unknown.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// sampleRSS samples the process's resident memory every 50 ms until the
// returned function is called, which returns the most it saw.
func sampleRSS() func() int64 {
	stop, done := make(chan struct{}), make(chan int64)
	go func() {
		peak := residentBytes()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				peak = max(peak, residentBytes())
			case <-stop:
				done <- max(peak, residentBytes())
				return
			}
		}
	}()
	return func() int64 {
		close(stop)
		return <-done
	}
}

// StateScenario is one of the runs of `weir bench state --suite`.
type StateScenario struct {
	Title    string
	Config   StateConfig
	Backends []string // keys of StateBackends
}

// StateSuite returns the scenarios of `weir bench state --suite`: state
// that fits in memory on each backend (pebble's throughput next to the
// heap's), a rescale from parallelism 4 to 2 on each, and 10 GiB of
// state in pebble under a 1 GiB process size with 1 % of the keys
// changing once every key is written (incremental checkpoints' steady
// share of the state, restore times from checkpoint storage and from
// local copies).
func StateSuite() []StateScenario {
	all := []string{"hashmap", "pebble", "pebble-incremental"}
	return []StateScenario{
		{"state within memory: 500,000 keys, parallelism 2", StateConfig{
			KeyedSumConfig: KeyedSumConfig{Records: 80_000_000, Keys: 500_000, Parallelism: 2, Partitions: 2, Checkpoint: time.Second},
			Memory:         "64 mb"}, all},
		{"rescale 4 → 2: 1,000,000 keys, the last checkpoint resumed at parallelism 2", StateConfig{
			KeyedSumConfig: KeyedSumConfig{Records: 8_000_000, Keys: 1_000_000, Parallelism: 4, Partitions: 4, Checkpoint: time.Second},
			Memory:         "64 mb", RescaleTo: 2}, all},
		{"10 GiB of state under a 1 GiB process: 10,000,000 keys of 1,000 bytes, then 1 % of them changing", StateConfig{
			KeyedSumConfig: KeyedSumConfig{Records: 300_000_000, Keys: 10_000_000, Parallelism: 2, Partitions: 2, Checkpoint: 10 * time.Second, Active: 0.01},
			ProcessSize:    "1gb", ValueBytes: 1000}, []string{"pebble-incremental"}},
	}
}
