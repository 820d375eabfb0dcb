package config

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"strings"
	"time"
)

// Checkpointing is the checkpointing configuration with defaults resolved,
// as the checkpoint coordinator and the barrier handlers use it.
type Checkpointing struct {
	// Enabled reports whether checkpointing is on, which it is exactly when
	// execution.checkpointing.interval is set.
	Enabled bool
	// Interval is the time between checkpoint triggers; 0 when disabled.
	Interval time.Duration
	// Mode is the consistency mode. Default: ExactlyOnce.
	Mode CheckpointingMode
	// Timeout is the time after which a pending checkpoint is discarded.
	// Default: 10 min.
	Timeout time.Duration
	// MinPause is the minimum time between the end of one checkpoint and the
	// next trigger. Default: 0.
	MinPause time.Duration
	// MaxConcurrent is the effective number of checkpoints allowed in flight:
	// execution.checkpointing.max-concurrent-checkpoints, except that it is 1
	// when MinPause is above zero, as in Flink. Default: 1.
	MaxConcurrent int
	// TolerableFailures is the number of consecutive checkpoint failures
	// tolerated before the job fails. Default: 0.
	TolerableFailures int
	// Dir is the checkpoint directory or URL; "" when unset.
	Dir string
	// Storage is where checkpoints go: StorageFilesystem when set so or when
	// Dir is set, otherwise StorageJobManager.
	Storage CheckpointStorage
	// NumRetained is the number of completed checkpoints kept. Default: 1.
	NumRetained int
	// ExternalizedRetention says whether retained checkpoints outlive a
	// cancelled job. Default: NoExternalizedCheckpoints.
	ExternalizedRetention ExternalizedRetention
	// Incremental enables incremental checkpoints, on either state
	// backend. Default: false.
	Incremental bool
	// Unaligned enables unaligned checkpoints. Default: false.
	Unaligned bool
	// AlignedTimeout is, with Unaligned, the time a checkpoint stays aligned
	// before it switches to unaligned; 0 starts unaligned. Default: 0.
	AlignedTimeout time.Duration
	// SavepointDir is the default savepoint directory; "" when unset.
	SavepointDir string
	// CreateSubdir puts checkpoints under <Dir>/<job-id>/. Default: true.
	CreateSubdir bool
	// RecoveryPath is the checkpoint or savepoint to resume from; "" to start
	// without state.
	RecoveryPath string
	// AllowDuplicateOutput accepts falling back past a completed checkpoint
	// that does not verify although a sink cannot undo its commits.
	AllowDuplicateOutput bool
	// IgnoreUnclaimedState drops the state of operators the job no longer
	// has on a restore, instead of refusing it.
	IgnoreUnclaimedState bool
	// ClaimMode says whether the job owns the checkpoint it resumes from.
	// Default: NoClaim.
	ClaimMode ClaimMode
	// SavepointFormat is the format of a savepoint whose request names
	// none. Default: SavepointCanonical.
	SavepointFormat SavepointFormat
	// InlineThreshold is the size in bytes below which state is kept
	// inside _metadata. Default: 20 KiB.
	InlineThreshold int64
	// LocalBackup keeps a copy of each subtask's checkpoint state on its
	// task manager's disk: execution.checkpointing.local-backup.enabled,
	// or, unset, FromLocal. Default: false.
	LocalBackup bool
	// LocalBackupDirs are the directories for the local copies; nil when
	// unset (the task manager chooses).
	LocalBackupDirs []string
	// FromLocal restores a subtask restarted on the same task manager from
	// its local copies. Default: false.
	FromLocal bool
}

// Checkpointing returns the checkpointing configuration with defaults
// resolved. It returns a *ConflictError (several joined with errors.Join)
// when unaligned checkpoints are enabled with AT_LEAST_ONCE mode or with more
// than one concurrent checkpoint, or when filesystem storage is chosen without
// a checkpoint directory.
func (c *Configuration) Checkpointing() (Checkpointing, error) {
	_, enabled := c.Get(KeyCheckpointingInterval)
	cp := Checkpointing{
		Enabled:               enabled,
		Interval:              c.Duration(KeyCheckpointingInterval),
		Mode:                  CheckpointingMode(c.String(KeyCheckpointingMode)),
		Timeout:               c.Duration(KeyCheckpointingTimeout),
		MinPause:              c.Duration(KeyCheckpointingMinPause),
		MaxConcurrent:         c.Int(KeyCheckpointingMaxConcurrent),
		TolerableFailures:     c.Int(KeyCheckpointingTolerableFailures),
		Dir:                   c.String(KeyCheckpointingDir),
		Storage:               CheckpointStorage(c.String(KeyCheckpointingStorage)),
		NumRetained:           c.Int(KeyCheckpointingNumRetained),
		ExternalizedRetention: ExternalizedRetention(c.String(KeyCheckpointingExternalizedRetention)),
		Incremental:           c.Bool(KeyCheckpointingIncremental),
		Unaligned:             c.Bool(KeyCheckpointingUnaligned),
		AlignedTimeout:        c.Duration(KeyCheckpointingAlignedTimeout),
		SavepointDir:          c.String(KeyCheckpointingSavepointDir),
		CreateSubdir:          c.Bool(KeyCheckpointingCreateSubdir),
		RecoveryPath:          c.String(KeyStateRecoveryPath),
		AllowDuplicateOutput:  c.Bool(KeyStateRecoveryAllowDuplicateOutput),
		IgnoreUnclaimedState:  c.Bool(KeyStateRecoveryIgnoreUnclaimedState),
		ClaimMode:             ClaimMode(c.String(KeyStateRecoveryClaimMode)),
		SavepointFormat:       SavepointFormat(c.String(KeySavepointFormat)),
		InlineThreshold:       c.MemorySize(KeyCheckpointingInlineThreshold),
		FromLocal:             c.Bool(KeyStateRecoveryFromLocal),
		LocalBackupDirs:       splitDirs(c.String(KeyCheckpointingLocalBackupDirs)),
		LocalBackup:           c.Bool(KeyCheckpointingLocalBackup),
	}
	if _, set := c.Get(KeyCheckpointingLocalBackup); !set {
		// Flink's local-backup.enabled falls back to from-local when it
		// is not set itself.
		cp.LocalBackup = cp.FromLocal
	}
	if cp.MinPause > 0 {
		cp.MaxConcurrent = 1
	}

	var errs []error
	if cp.Unaligned && cp.Mode == AtLeastOnce {
		errs = append(errs, &ConflictError{
			Keys:   []string{KeyCheckpointingUnaligned, KeyCheckpointingMode},
			Reason: fmt.Sprintf("unaligned checkpoints overtake records to keep exactly-once without alignment; %s=%s never aligns: unset %s, or use %s=%s", KeyCheckpointingMode, AtLeastOnce, KeyCheckpointingUnaligned, KeyCheckpointingMode, ExactlyOnce),
		})
	}
	if cp.Unaligned && cp.MaxConcurrent > 1 {
		errs = append(errs, &ConflictError{
			Keys:   []string{KeyCheckpointingUnaligned, KeyCheckpointingMaxConcurrent},
			Reason: fmt.Sprintf("weir takes one unaligned checkpoint at a time (a subtask collects the channel state of one checkpoint, and each channel carries one barrier's in-flight records, so a newer barrier would subsume the older checkpoint rather than run beside it): with %s=true set %s to 1 (it is %d)", KeyCheckpointingUnaligned, KeyCheckpointingMaxConcurrent, cp.MaxConcurrent),
		})
	}
	if cp.Storage == "" {
		cp.Storage = StorageJobManager
		if cp.Dir != "" {
			cp.Storage = StorageFilesystem
		}
	} else if cp.Storage == StorageJobManager && cp.Dir != "" {
		errs = append(errs, &ConflictError{
			Keys:   []string{KeyCheckpointingStorage, KeyCheckpointingDir},
			Reason: fmt.Sprintf("%s=%s keeps checkpoints in memory, but %s is set: choose %s=%s, or unset the directory", KeyCheckpointingStorage, cp.Storage, KeyCheckpointingDir, KeyCheckpointingStorage, StorageFilesystem),
		})
	} else if cp.Storage == StorageFilesystem && cp.Dir == "" {
		errs = append(errs, &ConflictError{
			Keys:   []string{KeyCheckpointingStorage, KeyCheckpointingDir},
			Reason: fmt.Sprintf("%s=%s requires %s, which is not set", KeyCheckpointingStorage, cp.Storage, KeyCheckpointingDir),
		})
	}
	errs = append(errs, cp.localRecoveryConflicts()...)
	if len(errs) > 0 {
		return Checkpointing{}, errors.Join(errs...)
	}
	return cp, nil
}

// localRecoveryConflicts refuses the settings of local recovery that
// would have no effect: restoring from local copies none are kept of
// (Flink accepts it and restores from checkpoint storage), local copies
// of state that never goes to checkpoint storage's files, and
// directories for copies that are not kept.
func (cp *Checkpointing) localRecoveryConflicts() []error {
	var errs []error
	if cp.FromLocal && !cp.LocalBackup {
		errs = append(errs, &ConflictError{
			Keys:   []string{KeyStateRecoveryFromLocal, KeyCheckpointingLocalBackup},
			Reason: fmt.Sprintf("%s=true restores from local copies of checkpoint state, but %s=false keeps none: set %s=true, or unset it (it then follows %s)", KeyStateRecoveryFromLocal, KeyCheckpointingLocalBackup, KeyCheckpointingLocalBackup, KeyStateRecoveryFromLocal),
		})
	}
	if cp.LocalBackup && cp.Dir == "" {
		errs = append(errs, &ConflictError{
			Keys:   []string{KeyCheckpointingLocalBackup, KeyCheckpointingDir},
			Reason: fmt.Sprintf("%s=true keeps local copies of the state files subtasks write to checkpoint storage, but %s is not set: without it state travels inside the acknowledgements and there are no files to copy", KeyCheckpointingLocalBackup, KeyCheckpointingDir),
		})
	}
	if len(cp.LocalBackupDirs) > 0 && !cp.LocalBackup {
		errs = append(errs, &ConflictError{
			Keys:   []string{KeyCheckpointingLocalBackupDirs, KeyCheckpointingLocalBackup},
			Reason: fmt.Sprintf("%s is set but no local copies are kept: set %s=true (or %s=true), or unset the directories", KeyCheckpointingLocalBackupDirs, KeyCheckpointingLocalBackup, KeyStateRecoveryFromLocal),
		})
	}
	return errs
}

// splitDirs splits a list of directories at commas and at the system's
// path list separator, dropping empty entries.
func splitDirs(s string) []string {
	var dirs []string
	for _, d := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == os.PathListSeparator }) {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Restart is the restart and failover configuration with defaults resolved.
// The settings of every strategy are filled in, whichever is chosen.
type Restart struct {
	// Strategy is the restart strategy: restart-strategy.type if set, else
	// RestartExponentialDelay when checkpointing is enabled and RestartNone
	// when it is not, as in Flink.
	Strategy RestartStrategy
	// Failover selects which tasks restart. Default: FailoverRegion.
	Failover FailoverStrategy
	// FixedDelay configures RestartFixedDelay.
	FixedDelay FixedDelay
	// ExponentialDelay configures RestartExponentialDelay.
	ExponentialDelay ExponentialDelay
	// FailureRate configures RestartFailureRate.
	FailureRate FailureRate
}

// FixedDelay configures the fixed-delay restart strategy.
type FixedDelay struct {
	// Attempts is the number of restarts before the job fails. Default: 1.
	Attempts int
	// Delay is the time between restarts. Default: 1 s.
	Delay time.Duration
}

// ExponentialDelay configures the exponential-delay restart strategy.
type ExponentialDelay struct {
	// InitialBackoff is the first delay. Default: 1 s.
	InitialBackoff time.Duration
	// MaxBackoff caps the delay; not below InitialBackoff. Default: 1 min.
	MaxBackoff time.Duration
	// BackoffMultiplier is the factor the delay grows by after each failure;
	// at least 1. Default: 1.5.
	BackoffMultiplier float64
	// ResetBackoffThreshold is the failure-free running time after which the
	// delay returns to InitialBackoff. Default: 1 h.
	ResetBackoffThreshold time.Duration
	// JitterFactor is the fraction of the delay added or subtracted at
	// random, from 0 to 1. Default: 0.1.
	JitterFactor float64
	// AttemptsBeforeResetBackoff is the number of restarts allowed before the
	// backoff resets. Default: math.MaxInt32, in effect unlimited.
	AttemptsBeforeResetBackoff int
}

// FailureRate configures the failure-rate restart strategy.
type FailureRate struct {
	// MaxFailuresPerInterval is the number of failures within Interval after
	// which the job fails. Default: 1.
	MaxFailuresPerInterval int
	// Interval is the window failures are counted over. Default: 1 min.
	Interval time.Duration
	// Delay is the time between restarts. Default: 1 s.
	Delay time.Duration
}

// Restart returns the restart and failover configuration with defaults
// resolved. It returns a *ConflictError when the exponential-delay strategy
// is chosen with an initial backoff above its maximum.
func (c *Configuration) Restart() (Restart, error) {
	r := Restart{
		Strategy: RestartStrategy(c.String(KeyRestartStrategy)),
		Failover: FailoverStrategy(c.String(KeyFailoverStrategy)),
		FixedDelay: FixedDelay{
			Attempts: c.Int(KeyFixedDelayAttempts),
			Delay:    c.Duration(KeyFixedDelayDelay),
		},
		ExponentialDelay: ExponentialDelay{
			InitialBackoff:             c.Duration(KeyExponentialDelayInitialBackoff),
			MaxBackoff:                 c.Duration(KeyExponentialDelayMaxBackoff),
			BackoffMultiplier:          c.Float(KeyExponentialDelayBackoffMultiplier),
			ResetBackoffThreshold:      c.Duration(KeyExponentialDelayResetBackoffThreshold),
			JitterFactor:               c.Float(KeyExponentialDelayJitterFactor),
			AttemptsBeforeResetBackoff: c.Int(KeyExponentialDelayAttemptsBeforeReset),
		},
		FailureRate: FailureRate{
			MaxFailuresPerInterval: c.Int(KeyFailureRateMaxFailures),
			Interval:               c.Duration(KeyFailureRateInterval),
			Delay:                  c.Duration(KeyFailureRateDelay),
		},
	}
	if r.Strategy == "" {
		r.Strategy = RestartNone
		if _, checkpointing := c.Get(KeyCheckpointingInterval); checkpointing {
			r.Strategy = RestartExponentialDelay
		}
	}
	if ed := r.ExponentialDelay; r.Strategy == RestartExponentialDelay && ed.InitialBackoff > ed.MaxBackoff {
		return Restart{}, &ConflictError{
			Keys: []string{KeyExponentialDelayInitialBackoff, KeyExponentialDelayMaxBackoff},
			Reason: fmt.Sprintf("%s (%s) must not exceed %s (%s)",
				KeyExponentialDelayInitialBackoff, FormatDuration(ed.InitialBackoff),
				KeyExponentialDelayMaxBackoff, FormatDuration(ed.MaxBackoff)),
		}
	}
	return r, nil
}

// Pipeline is the job-wide execution configuration with defaults resolved.
type Pipeline struct {
	// Parallelism is the parallelism of operators that do not set their own.
	// Default: 1.
	Parallelism int
	// MaxParallelism is the configured maximum parallelism of keyed
	// operators, or -1 (the default) to derive it per operator; use
	// MaxParallelismFor to resolve it.
	MaxParallelism int
	// AutoWatermarkInterval is the interval of periodic watermarks; 0
	// disables them. Default: 200 ms.
	AutoWatermarkInterval time.Duration
	// BufferTimeout is the longest a partly filled output batch waits before
	// it is flushed. Default: 100 ms.
	BufferTimeout time.Duration
	// StateBackend is the keyed-state backend. Default: BackendHashMap.
	StateBackend StateBackend
	// PebbleLocalDir is where the pebble backend keeps its working files;
	// "" is the system's temporary directory.
	PebbleLocalDir string
	// PebbleMemory is the memory of each keyed operator subtask's pebble
	// store. Default: 64 MiB.
	PebbleMemory int64
	// TimerService is where the pebble backend keeps timers. Default:
	// TimersInStore.
	TimerService TimerService
	// PebbleSlotMemory, if not 0, is the memory the pebble stores of one
	// slot's keyed subtasks share
	// (state.backend.rocksdb.memory.fixed-per-slot), replacing
	// PebbleMemory.
	PebbleSlotMemory int64
	// RocksDBMemoryManaged says whether the pebble stores of a slot share
	// its part of managed memory when ManagedMemory is set. Default: true.
	RocksDBMemoryManaged bool
	// ManagedMemory, if not 0, is a task manager's managed memory, whose
	// share per slot its pebble stores share
	// (state.backend.rocksdb.memory.managed with
	// taskmanager.memory.managed.size, or else with
	// taskmanager.memory.managed.fraction of
	// taskmanager.memory.process.size), replacing PebbleMemory.
	ManagedMemory int64
}

// MaxParallelismFor returns the maximum parallelism, and so the number of key
// groups, of a keyed operator running with the given parallelism: the
// configured value, or DefaultMaxParallelism(parallelism) when it is -1.
func (p Pipeline) MaxParallelismFor(parallelism int) int {
	if p.MaxParallelism > 0 {
		return p.MaxParallelism
	}
	return DefaultMaxParallelism(parallelism)
}

// Pipeline returns the job-wide execution configuration with defaults
// resolved. It returns a *ConflictError when the default parallelism exceeds
// a configured maximum parallelism.
func (c *Configuration) Pipeline() (Pipeline, error) {
	p := Pipeline{
		Parallelism:           c.Int(KeyParallelism),
		MaxParallelism:        c.Int(KeyMaxParallelism),
		AutoWatermarkInterval: c.Duration(KeyAutoWatermarkInterval),
		BufferTimeout:         c.Duration(KeyBufferTimeout),
		StateBackend:          StateBackend(c.String(KeyStateBackend)),
		PebbleLocalDir:        c.String(KeyPebbleLocalDir),
		PebbleMemory:          c.MemorySize(KeyPebbleMemory),
		TimerService:          TimerService(c.String(KeyTimerService)),
		RocksDBMemoryManaged:  c.Bool(KeyRocksDBMemoryManaged),
	}
	if p.MaxParallelism > 0 && p.Parallelism > p.MaxParallelism {
		return Pipeline{}, &ConflictError{
			Keys: []string{KeyParallelism, KeyMaxParallelism},
			Reason: fmt.Sprintf("%s (%d) must not exceed %s (%d)",
				KeyParallelism, p.Parallelism, KeyMaxParallelism, p.MaxParallelism),
		}
	}
	if err := c.pebbleMemory(&p); err != nil {
		return Pipeline{}, err
	}
	return p, nil
}

// pebbleMemory settles what bounds the pebble stores' memory, in Flink's
// order: fixed-per-slot, else managed memory if a managed size is set,
// else managed memory as the managed fraction of the process size if that
// is set (and state.backend.pebble.memory is not), else
// state.backend.pebble.memory per keyed subtask. A key that the chosen
// one would leave without effect is a conflict.
func (c *Configuration) pebbleMemory(p *Pipeline) error {
	fixed, fixedSet := c.Get(KeyRocksDBMemoryFixedPerSlot)
	size, sizeSet := c.Get(KeyManagedMemorySize)
	managed, managedSet := c.Get(KeyRocksDBMemoryManaged)
	perSubtask, perSubtaskSet := c.Get(KeyPebbleMemory)
	fraction, fractionSet := c.Get(KeyManagedMemoryFraction)
	process, processSet := c.Get(KeyTaskManagerProcessSize)
	unused := func(key, value, why string) error {
		return &ConflictError{Keys: []string{KeyManagedMemoryFraction, key}, Reason: fmt.Sprintf(
			"%s (%s) would have no effect: %s (%s) %s; leave the fraction unset",
			KeyManagedMemoryFraction, fraction, key, value, why)}
	}
	switch {
	case fixedSet && perSubtaskSet:
		return &ConflictError{Keys: []string{KeyPebbleMemory, KeyRocksDBMemoryFixedPerSlot}, Reason: fmt.Sprintf(
			"%s (%s) bounds each keyed subtask alone, %s (%s) the keyed subtasks of a slot together: set one of them",
			KeyPebbleMemory, perSubtask, KeyRocksDBMemoryFixedPerSlot, fixed)}
	case fixedSet && sizeSet:
		return &ConflictError{Keys: []string{KeyManagedMemorySize, KeyRocksDBMemoryFixedPerSlot}, Reason: fmt.Sprintf(
			"%s (%s) overrides managed memory, so %s (%s) would have no effect: set one of them",
			KeyRocksDBMemoryFixedPerSlot, fixed, KeyManagedMemorySize, size)}
	case fixedSet && fractionSet:
		return unused(KeyRocksDBMemoryFixedPerSlot, fixed, "overrides managed memory")
	case fixedSet:
		p.PebbleSlotMemory = c.MemorySize(KeyRocksDBMemoryFixedPerSlot)
	case sizeSet && !c.Bool(KeyRocksDBMemoryManaged):
		return &ConflictError{Keys: []string{KeyManagedMemorySize, KeyRocksDBMemoryManaged}, Reason: fmt.Sprintf(
			"%s is false, so %s (%s) would have no effect (nothing else in weir uses managed memory): set %s true or leave the size unset",
			KeyRocksDBMemoryManaged, KeyManagedMemorySize, size, KeyRocksDBMemoryManaged)}
	case sizeSet && perSubtaskSet:
		return &ConflictError{Keys: []string{KeyPebbleMemory, KeyManagedMemorySize}, Reason: fmt.Sprintf(
			"%s (%s) bounds each keyed subtask alone, managed memory (%s %s) the keyed subtasks of a slot together: set one of them, or %s false",
			KeyPebbleMemory, perSubtask, KeyManagedMemorySize, size, KeyRocksDBMemoryManaged)}
	case sizeSet && fractionSet:
		return unused(KeyManagedMemorySize, size, "is the managed memory")
	case sizeSet && processSet && c.MemorySize(KeyManagedMemorySize) >= c.MemorySize(KeyTaskManagerProcessSize):
		return &ConflictError{Keys: []string{KeyManagedMemorySize, KeyTaskManagerProcessSize}, Reason: fmt.Sprintf(
			"%s (%s) must be below %s (%s), the memory of the whole process",
			KeyManagedMemorySize, size, KeyTaskManagerProcessSize, process)}
	case sizeSet:
		p.ManagedMemory = c.MemorySize(KeyManagedMemorySize)
	case fractionSet && !processSet:
		return &ConflictError{Keys: []string{KeyManagedMemoryFraction, KeyTaskManagerProcessSize}, Reason: fmt.Sprintf(
			"%s (%s) is a share of %s, which is not set: set the process size, or %s instead",
			KeyManagedMemoryFraction, fraction, KeyTaskManagerProcessSize, KeyManagedMemorySize)}
	case processSet && !c.Bool(KeyRocksDBMemoryManaged) && fractionSet:
		return unused(KeyRocksDBMemoryManaged, managed, "leaves the pebble stores out of managed memory (nothing else in weir uses it)")
	case processSet && perSubtaskSet && (fractionSet || managedSet && managed == "true"):
		return &ConflictError{Keys: []string{KeyPebbleMemory, KeyManagedMemoryFraction, KeyRocksDBMemoryManaged}, Reason: fmt.Sprintf(
			"%s (%s) bounds each keyed subtask alone, managed memory (%s of %s %s) the keyed subtasks of a slot together: set one of them (%s false keeps %s)",
			KeyPebbleMemory, perSubtask, KeyManagedMemoryFraction, KeyTaskManagerProcessSize, process, KeyRocksDBMemoryManaged, KeyPebbleMemory)}
	case processSet && c.Bool(KeyRocksDBMemoryManaged) && !perSubtaskSet:
		p.ManagedMemory = int64(c.Float(KeyManagedMemoryFraction) * float64(c.MemorySize(KeyTaskManagerProcessSize)))
	case managedSet && managed == "true" && !processSet:
		return &ConflictError{Keys: []string{KeyRocksDBMemoryManaged, KeyManagedMemorySize}, Reason: fmt.Sprintf(
			"%s is true but neither %s nor %s is set, so there is no managed memory: set one of them, or %s, or leave %s unset (or false) for %s per keyed subtask",
			KeyRocksDBMemoryManaged, KeyManagedMemorySize, KeyTaskManagerProcessSize, KeyRocksDBMemoryFixedPerSlot, KeyRocksDBMemoryManaged, KeyPebbleMemory)}
	}
	return nil
}

// DefaultMaxParallelism returns the maximum parallelism Flink derives for an
// operator of parallelism p when pipeline.max-parallelism is -1: one and a half
// times p rounded up to a power of two, but at least 128 and at most 32768,
// that is min(max(roundUpToPowerOfTwo(p + p/2), 128), 32768). A p below 1 is
// taken as 1.
func DefaultMaxParallelism(p int) int {
	p = min(max(p, 1), UpperBoundMaxParallelism)
	return min(max(roundUpToPowerOfTwo(p+p/2), DefaultLowerBoundMaxParallelism), UpperBoundMaxParallelism)
}

// roundUpToPowerOfTwo returns the smallest power of two not below x, for x ≥ 1.
func roundUpToPowerOfTwo(x int) int {
	if x <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(x-1))
}

// Debloat is buffer debloating (Flink's
// taskmanager.network.memory.buffer-debloat.*) with defaults resolved.
type Debloat struct {
	// Enabled turns it on. Default: false.
	Enabled bool
	// Target is the time a subtask should take to consume the records in
	// flight on its input channels. Default: 1 s.
	Target time.Duration
	// Period is how often a subtask recomputes the limit. Default: 200 ms.
	Period time.Duration
	// Samples is the number of periods the consumption rate is averaged
	// over. Default: 20.
	Samples int
	// Threshold is the smallest change of the limit, in percent of the
	// current one, that is applied. Default: 25.
	Threshold int
}

// Debloat returns the buffer-debloating configuration with defaults
// resolved.
func (c *Configuration) Debloat() Debloat {
	return Debloat{
		Enabled:   c.Bool(KeyBufferDebloatEnabled),
		Target:    c.Duration(KeyBufferDebloatTarget),
		Period:    c.Duration(KeyBufferDebloatPeriod),
		Samples:   c.Int(KeyBufferDebloatSamples),
		Threshold: c.Int(KeyBufferDebloatThreshold),
	}
}

// Cluster is the configuration of the job manager, task managers and REST
// server with defaults resolved.
type Cluster struct {
	// HeartbeatInterval is the time between heartbeats. Default: 10 s.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is the time without heartbeats after which a peer is
	// lost; not below HeartbeatInterval. Default: 50 s.
	HeartbeatTimeout time.Duration
	// TaskSlots is the number of slots of a task manager. Default: 1.
	TaskSlots int
	// RESTAddress is the address clients use for the REST API; "" when unset.
	RESTAddress string
	// RESTBindAddress is the address the REST server listens on. Default:
	// localhost.
	RESTBindAddress string
	// RESTPort is the REST server's port; 0 picks a free one. Default: 8081.
	RESTPort int
	// RESTAuthToken is the bearer token the REST API requires; "" when
	// authentication is off (the default). It must not be logged.
	RESTAuthToken string
	// CheckpointHistory is the number of recent checkpoints whose statistics
	// the REST API keeps. Default: 10.
	CheckpointHistory int
	// AuthToken is the secret the cluster's processes share; "" when
	// authentication is off (the default). It must not be logged.
	AuthToken string
	// TaskManagerProcessMemory and JobManagerProcessMemory, if not 0, are
	// taskmanager.memory.process.size and jobmanager.memory.process.size:
	// the Go runtime's soft memory limit of a process that runs subtasks,
	// and of one that is only a job manager.
	TaskManagerProcessMemory int64
	JobManagerProcessMemory  int64
}

// Cluster returns the cluster configuration with defaults resolved. It returns
// a *ConflictError when the heartbeat timeout is below the heartbeat interval.
func (c *Configuration) Cluster() (Cluster, error) {
	cl := Cluster{
		HeartbeatInterval: c.Duration(KeyHeartbeatInterval),
		HeartbeatTimeout:  c.Duration(KeyHeartbeatTimeout),
		TaskSlots:         c.Int(KeyTaskSlots),
		RESTAddress:       c.String(KeyRESTAddress),
		RESTBindAddress:   c.String(KeyRESTBindAddress),
		RESTPort:          c.Int(KeyRESTPort),
		RESTAuthToken:     c.String(KeyRESTAuthToken),
		CheckpointHistory: c.Int(KeyCheckpointHistory),
		AuthToken:         c.String(KeyClusterAuthToken),

		TaskManagerProcessMemory: c.MemorySize(KeyTaskManagerProcessSize),
		JobManagerProcessMemory:  c.MemorySize(KeyJobManagerProcessSize),
	}
	if cl.HeartbeatTimeout < cl.HeartbeatInterval {
		return Cluster{}, &ConflictError{
			Keys: []string{KeyHeartbeatTimeout, KeyHeartbeatInterval},
			Reason: fmt.Sprintf("%s (%s) must not be below %s (%s)",
				KeyHeartbeatTimeout, FormatDuration(cl.HeartbeatTimeout),
				KeyHeartbeatInterval, FormatDuration(cl.HeartbeatInterval)),
		}
	}
	return cl, nil
}

// HighAvailability is the job managers' high availability (Flink's
// HighAvailabilityOptions).
type HighAvailability struct {
	// Type is none (the default) or etcd.
	Type HAType
	// EtcdEndpoints are etcd's client endpoints; required with etcd.
	EtcdEndpoints []string
	// StorageDir is where what is too big for etcd goes; "" when unset.
	StorageDir string
	// ClusterID names the cluster in etcd. Default: default.
	ClusterID string
	// LeaseTTL is the leader's lease. Default: 15 s.
	LeaseTTL time.Duration
	// Kubernetes is the configuration of high-availability.type
	// kubernetes.
	Kubernetes KubernetesHA
}

// Enabled reports whether job managers are highly available (any type but
// none).
func (h HighAvailability) Enabled() bool { return h.Type != "" && h.Type != HANone }

// KubernetesHA is where and how high-availability.type kubernetes keeps
// the leadership and the jobs (Flink's KubernetesConfigOptions and
// KubernetesLeaderElectionConfiguration).
type KubernetesHA struct {
	// ClusterID names the Lease and ConfigMaps; default: the
	// high-availability.cluster-id.
	ClusterID string
	// Namespace holds them; "": the pod's, else the kubeconfig context's.
	Namespace string
	// ConfigFile is a kubeconfig; "": the pod's service account.
	ConfigFile string
	// LeaseDuration, RenewDeadline and RetryPeriod time the election.
	// Defaults: 15 s, 15 s, 5 s.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// HighAvailability returns the high availability configuration. It
// returns a *ConflictError when etcd is chosen without endpoints.
func (c *Configuration) HighAvailability() (HighAvailability, error) {
	ha := HighAvailability{
		Type:       HAType(c.String(KeyHAType)),
		StorageDir: c.String(KeyHAStorageDir),
		ClusterID:  c.String(KeyHAClusterID),
		LeaseTTL:   c.Duration(KeyHAEtcdLeaseTTL),
		Kubernetes: KubernetesHA{
			ClusterID:     c.String(KeyKubernetesClusterID),
			Namespace:     c.String(KeyKubernetesNamespace),
			ConfigFile:    c.String(KeyKubernetesConfigFile),
			LeaseDuration: c.Duration(KeyHAKubernetesLeaseDuration),
			RenewDeadline: c.Duration(KeyHAKubernetesRenewDeadline),
			RetryPeriod:   c.Duration(KeyHAKubernetesRetryPeriod),
		},
	}
	if ha.Kubernetes.ClusterID == "" {
		ha.Kubernetes.ClusterID = ha.ClusterID
	}
	for _, e := range strings.Split(c.String(KeyHAEtcdEndpoints), ",") {
		if e = strings.TrimSpace(e); e != "" {
			ha.EtcdEndpoints = append(ha.EtcdEndpoints, e)
		}
	}
	if ha.Type == HAEtcd && len(ha.EtcdEndpoints) == 0 {
		return HighAvailability{}, &ConflictError{
			Keys:   []string{KeyHAEtcdEndpoints, KeyHAType},
			Reason: fmt.Sprintf("%s etcd needs %s (host:port, comma-separated)", KeyHAType, KeyHAEtcdEndpoints),
		}
	}
	if ha.Type == HAKubernetes {
		k := ha.Kubernetes
		if k.ClusterID != "" && (len(k.ClusterID) > 40 || !dnsLabelRE.MatchString(k.ClusterID)) {
			return HighAvailability{}, &ConflictError{
				Keys:   []string{KeyHAClusterID, KeyKubernetesClusterID, KeyHAType},
				Reason: fmt.Sprintf("%s kubernetes names its objects after %s, else %s %q, which is not a DNS label of at most 40 characters (lower-case letters, digits and '-'): set %s", KeyHAType, KeyKubernetesClusterID, KeyHAClusterID, k.ClusterID, KeyKubernetesClusterID),
			}
		}
		if k.RenewDeadline > k.LeaseDuration {
			return HighAvailability{}, &ConflictError{
				Keys:   []string{KeyHAKubernetesRenewDeadline, KeyHAKubernetesLeaseDuration},
				Reason: fmt.Sprintf("%s %s is above %s %s: a standby could take over while the leader still acts", KeyHAKubernetesRenewDeadline, FormatDuration(k.RenewDeadline), KeyHAKubernetesLeaseDuration, FormatDuration(k.LeaseDuration)),
			}
		}
		if k.RetryPeriod*6/5 >= k.RenewDeadline {
			return HighAvailability{}, &ConflictError{
				Keys:   []string{KeyHAKubernetesRetryPeriod, KeyHAKubernetesRenewDeadline},
				Reason: fmt.Sprintf("%s %s, stretched by up to a fifth, must stay below %s %s", KeyHAKubernetesRetryPeriod, FormatDuration(k.RetryPeriod), KeyHAKubernetesRenewDeadline, FormatDuration(k.RenewDeadline)),
			}
		}
	}
	return ha, nil
}

// Validate checks the rules that involve several keys by building every view
// (Checkpointing, Restart, Pipeline and Cluster) and returns their errors
// joined with errors.Join, or nil. Rules on single values are checked
// earlier, when the values are set.
func (c *Configuration) Validate() error {
	_, errC := c.Checkpointing()
	_, errR := c.Restart()
	_, errP := c.Pipeline()
	_, errCl := c.Cluster()
	_, errHA := c.HighAvailability()
	return errors.Join(errC, errR, errP, errCl, errHA)
}
