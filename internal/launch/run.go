package launch

import (
	"context"
	"math/rand/v2"
	"os"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/runtime/restart"
	"github.com/weirstream/weir/state"
)

// Handle is a job started with Start.
type Handle struct {
	jm   *runtime.JobMaster
	done chan struct{}
	err  error
}

// Start starts the job and returns at once; Wait returns its end. When
// it ends, its checkpoints are kept or discarded as
// execution.checkpointing.externalized-checkpoint-retention says.
func Start(ctx context.Context, j Job) (*Handle, error) {
	var exec runtime.Executor
	if inner := j.NewExecutor; inner != nil {
		j.NewExecutor = func(g *runtime.JobGraph, l runtime.Listener) (runtime.Executor, error) {
			e, err := inner(g, l)
			exec = e
			return e, err
		}
	}
	// An embedded run's process is its task manager: its process size
	// is the Go runtime's memory limit while the job runs. A job master
	// whose subtasks run elsewhere leaves the limit to its process.
	unlimit := func() {}
	if j.NewExecutor == nil {
		var err error
		if unlimit, err = MemoryLimit(j.Config, config.KeyTaskManagerProcessSize, OffHeapStores(j.Config, embeddedSlots(j.Graph), state.LSMMemoryOffHeap), nil, j.Logger); err != nil {
			return nil, err
		}
	}
	jm, st, closer, err := prepare(ctx, j)
	if err != nil {
		unlimit()
		return nil, err
	}
	h := &Handle{jm: jm, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		defer unlimit()
		defer closer()
		h.err = jm.Run(ctx)
		if g, ok := exec.(runtime.RetentionGate); ok && st != nil && !g.MayDiscard(h.err) {
			j.Logger.Warn("leaving the job's checkpoints as they are: they are another job manager's now")
			st = nil
		}
		if st != nil {
			retain(ctx, st.cp, st.storage, st.restored, st.claimed, h.err, ctx.Err() != nil, j.Logger)
		}
	}()
	return h, nil
}

// Master returns the job's job master.
func (h *Handle) Master() *runtime.JobMaster { return h.jm }

// Done is closed when the job has ended.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Wait blocks until the job ends and returns why it ended (nil when a
// bounded job finished).
func (h *Handle) Wait() error {
	<-h.done
	return h.err
}

// ending is what the end of a job needs to apply the retention.
type ending struct {
	cp      config.Checkpointing
	storage runtime.CheckpointStorage
	// restored is the checkpoint the job restored if it lies among the
	// job's own (resumed under the same job id): the job does not own it
	// (NO_CLAIM), so retention keeps it. 0: none, or one the job claimed.
	restored int64
	// claimed deletes the checkpoint the job claimed when it lies in
	// another job's directory (runtime.Restore.Discard); nil otherwise.
	claimed func(context.Context) error
}

// prepare turns the job into a job master ready to run. The returned
// function releases what the job master holds open; the ending is nil
// when the job does not checkpoint to storage.
func prepare(ctx context.Context, j Job) (*runtime.JobMaster, *ending, func() error, error) {
	nop := func() error { return nil }
	cp, err := j.Config.Checkpointing()
	if err != nil {
		return nil, nil, nop, err
	}
	if cp.Enabled && len(j.WithoutUID) > 0 {
		j.Logger.Warn("operators that may hold state have no uid (stream.Uid): a change to the job's shape moves the uids made for them, and a restore then cannot match their state",
			"operators", j.WithoutUID)
	}
	ks, err := keyedState(j.Config, j.Graph, embeddedSlots(j.Graph))
	if err != nil {
		return nil, nil, nop, err
	}
	if !cp.Enabled && cp.RecoveryPath != "" {
		// Restoring needs the checkpointing runtime: without it the path
		// would be ignored and the job would start from nothing.
		return nil, nil, nop, errorf("execution.state-recovery.path %s needs checkpointing: set execution.checkpointing.interval (a job that resumes without checkpoints would start over, not resume)", cp.RecoveryPath)
	}
	if ks.Backend == config.BackendRocksDB || ks.Backend == config.BackendForSt {
		j.Logger.Info("weir's embedded LSM state backend (Pebble) serves state.backend.type="+string(ks.Backend), "localdir", ks.Dir, "memory", ks.Memory)
	}
	if cp.Enabled && cp.AlignedTimeout > 0 && !cp.Unaligned {
		// Flink accepts and ignores it too: the timeout switches to
		// unaligned checkpoints, which are off.
		j.Logger.Warn("execution.checkpointing.aligned-checkpoint-timeout has no effect without execution.checkpointing.unaligned.enabled=true: checkpoints stay aligned", "timeout", cp.AlignedTimeout)
	}
	rs, err := j.Config.Restart()
	if err != nil {
		return nil, nil, nop, err
	}
	strategy, err := restartStrategy(rs)
	if err != nil {
		return nil, nil, nop, err
	}
	opts := runtime.Options{
		JobID:           j.JobID,
		Logger:          j.Logger,
		Clock:           j.Clock,
		Restart:         strategy,
		Failover:        string(rs.Failover),
		Events:          j.Events,
		Faults:          j.Faults,
		BatchSize:       j.BatchSize,
		ChannelCapacity: j.ChannelCapacity,
		NewExecutor:     j.NewExecutor,
		KeyedState:      ks,
		Debloat:         debloat(j.Config),
	}
	closer := nop
	if cp.Enabled {
		ckpt, restore, c, err := checkpointing(ctx, j, cp)
		if err != nil {
			return nil, nil, nop, err
		}
		opts.Checkpointing, opts.Restore, closer = ckpt, restore, c
		opts.Fallback = func(bad, to int64) error { return refuseFallback(j, []int64{bad}, to) }
		if opts.Local, err = localStore(j, cp, ks); err != nil {
			closer()
			return nil, nil, nop, err
		}
		if opts.Local != nil {
			opts.FromLocal = cp.FromLocal
			prev, local := closer, opts.Local
			closer = func() error { local.Close(); return prev() }
		}
	}
	jm, err := runtime.NewJobMaster(j.Graph, opts)
	if err != nil {
		if opts.Local != nil {
			opts.Local.Close()
		}
		closer()
		return nil, nil, nop, err
	}
	var end *ending
	if opts.Checkpointing != nil && opts.Checkpointing.Storage != nil {
		end = &ending{cp: cp, storage: opts.Checkpointing.Storage}
		if r := opts.Restore; r != nil && r.Claimed {
			end.claimed = r.Discard
		} else if r != nil && r.Metadata.JobID == j.JobID && r.Metadata.Kind == checkpoint.KindCheckpoint {
			end.restored = r.Metadata.CheckpointID
		}
	}
	return jm, end, closer, nil
}

// localStore opens the store of the local copies of the job's checkpoint
// state in this process, under execution.checkpointing.local-backup.dirs,
// or else the embedded LSM backend's working directory (so that its files
// can be hard-linked) or the system's temporary directory; nil without
// local backup.
func localStore(j Job, cp config.Checkpointing, ks runtime.KeyedStateOptions) (*storage.LocalStore, error) {
	if !cp.Enabled || !cp.LocalBackup {
		return nil, nil
	}
	roots := cp.LocalBackupDirs
	if len(roots) == 0 {
		root := ks.Dir
		if root == "" {
			root = os.TempDir()
		}
		roots = []string{root}
	}
	l, err := storage.OpenLocalStore(roots, j.JobID)
	if err != nil {
		return nil, errorf("local backup (%s): %w", config.KeyCheckpointingLocalBackupDirs, err)
	}
	return l, nil
}

// embeddedSlots is the number of slots of an embedded run's one task
// manager: one per subtask index.
func embeddedSlots(g *runtime.JobGraph) int {
	slots := 0
	for _, v := range g.Vertices {
		slots = max(slots, v.Parallelism)
	}
	return slots
}

// keyedState says where the job's keyed operators keep their state, and
// with how much memory: per keyed subtask, or per slot with
// state.backend.rocksdb.memory.fixed-per-slot or managed memory (a task
// manager's managed size divided by its slots). Each slot's keyed
// subtasks must have at least 4 MiB each.
func keyedState(c *config.Configuration, g *runtime.JobGraph, slots int) (runtime.KeyedStateOptions, error) {
	p, err := c.Pipeline()
	if err != nil {
		return runtime.KeyedStateOptions{}, err
	}
	cp, err := c.Checkpointing()
	if err != nil {
		return runtime.KeyedStateOptions{}, err
	}
	ks := runtime.KeyedStateOptions{Backend: p.StateBackend, Dir: p.PebbleLocalDir, Memory: p.PebbleMemory,
		HeapTimers:  p.TimerService == config.TimersOnHeap,
		Incremental: cp.Incremental}
	if !p.StateBackend.EmbeddedLSM() {
		return ks, nil
	}
	key := config.KeyRocksDBMemoryFixedPerSlot
	switch {
	case p.PebbleSlotMemory > 0:
		ks.SlotMemory = p.PebbleSlotMemory
	case p.RocksDBMemoryManaged && p.ManagedMemory > 0:
		key = config.KeyManagedMemorySize
		if _, ok := c.Get(key); !ok {
			key = config.KeyManagedMemoryFraction + " of " + config.KeyTaskManagerProcessSize
		}
		ks.SlotMemory = p.ManagedMemory / int64(max(slots, 1))
	default:
		return ks, nil
	}
	// Slot 0 holds the most keyed subtasks: subtask 0 of every vertex.
	if n := runtime.SlotKeyedOperators(g, 0); n > 0 && ks.SlotMemory/int64(n) < 4<<20 {
		return ks, errorf("%s: a slot has %d bytes for its %d keyed subtasks, below 4 MiB each", key, ks.SlotMemory, n)
	}
	return ks, nil
}

// restartStrategy builds the restart strategy the configuration names.
func restartStrategy(r config.Restart) (restart.Strategy, error) {
	var c restart.Config
	switch r.Strategy {
	case config.RestartFixedDelay:
		c = restart.FixedDelay{Attempts: r.FixedDelay.Attempts, Delay: r.FixedDelay.Delay}
	case config.RestartExponentialDelay:
		ed := r.ExponentialDelay
		c = restart.ExponentialDelay{
			InitialBackoff:             ed.InitialBackoff,
			MaxBackoff:                 ed.MaxBackoff,
			BackoffMultiplier:          ed.BackoffMultiplier,
			ResetBackoffThreshold:      ed.ResetBackoffThreshold,
			JitterFactor:               ed.JitterFactor,
			AttemptsBeforeResetBackoff: ed.AttemptsBeforeResetBackoff,
			Rand:                       rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		}
	case config.RestartFailureRate:
		c = restart.FailureRate{MaxFailuresPerInterval: r.FailureRate.MaxFailuresPerInterval, FailureRateInterval: r.FailureRate.Interval, Delay: r.FailureRate.Delay}
	default:
		c = restart.None{}
	}
	return restart.New(c)
}

// debloat returns the runtime's buffer debloating from the job's
// configuration (taskmanager.network.memory.buffer-debloat.*).
func debloat(c *config.Configuration) runtime.DebloatOptions {
	d := c.Debloat()
	return runtime.DebloatOptions{Enabled: d.Enabled, Target: d.Target, Period: d.Period, Samples: d.Samples, Threshold: d.Threshold}
}
