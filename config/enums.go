package config

// CheckpointingMode is the value of [KeyCheckpointingMode].
type CheckpointingMode string

// Checkpointing modes.
const (
	// ExactlyOnce aligns barriers so that a checkpoint holds each record's
	// effect exactly once. The default.
	ExactlyOnce CheckpointingMode = "EXACTLY_ONCE"
	// AtLeastOnce does not block input channels during a checkpoint; records
	// after the barrier may be in the snapshot and are replayed again after a
	// restore.
	AtLeastOnce CheckpointingMode = "AT_LEAST_ONCE"
)

// CheckpointStorage is the value of [KeyCheckpointingStorage].
type CheckpointStorage string

// Checkpoint storages.
const (
	// StorageJobManager keeps checkpoints in the job manager's memory; meant
	// for development and small state. The default when no checkpoint
	// directory is set.
	StorageJobManager CheckpointStorage = "jobmanager"
	// StorageFilesystem writes checkpoints under [KeyCheckpointingDir]. The
	// default when that directory is set.
	StorageFilesystem CheckpointStorage = "filesystem"
)

// ExternalizedRetention is the value of
// [KeyCheckpointingExternalizedRetention].
type ExternalizedRetention string

// Externalized checkpoint retention policies.
const (
	// NoExternalizedCheckpoints deletes retained checkpoints when the job
	// ends. The default.
	NoExternalizedCheckpoints ExternalizedRetention = "NO_EXTERNALIZED_CHECKPOINTS"
	// DeleteOnCancellation keeps retained checkpoints when the job fails and
	// deletes them when it is cancelled.
	DeleteOnCancellation ExternalizedRetention = "DELETE_ON_CANCELLATION"
	// RetainOnCancellation keeps retained checkpoints when the job fails or
	// is cancelled.
	RetainOnCancellation ExternalizedRetention = "RETAIN_ON_CANCELLATION"
)

// ClaimMode is the value of [KeyStateRecoveryClaimMode].
type ClaimMode string

// Recovery claim modes (Flink's RecoveryClaimMode).
const (
	// NoClaim leaves the checkpoint or savepoint a job resumes from to
	// whoever made it: the job never deletes or changes it, and its own
	// checkpoints name none of its files. The default.
	NoClaim ClaimMode = "NO_CLAIM"
	// Claim makes the retained checkpoint a job resumes from the job's
	// own: it counts among its retained checkpoints and is deleted once
	// subsumed. A savepoint cannot be claimed.
	Claim ClaimMode = "CLAIM"
)

// SavepointFormat is the value of [KeySavepointFormat].
type SavepointFormat string

// Savepoint formats (Flink's SavepointFormatType).
const (
	// SavepointCanonical is weir's backend-independent format. The default.
	SavepointCanonical SavepointFormat = "CANONICAL"
	// SavepointNative is the state backend's own format.
	SavepointNative SavepointFormat = "NATIVE"
)

// RestartStrategy is the value of [KeyRestartStrategy].
type RestartStrategy string

// Restart strategies.
const (
	// RestartNone fails the job on the first failure. The default when
	// checkpointing is disabled.
	RestartNone RestartStrategy = "none"
	// RestartFixedDelay restarts a fixed number of times with a fixed delay.
	RestartFixedDelay RestartStrategy = "fixed-delay"
	// RestartExponentialDelay restarts with a delay that grows after each
	// failure and resets after a quiet period. The default when checkpointing
	// is enabled.
	RestartExponentialDelay RestartStrategy = "exponential-delay"
	// RestartFailureRate restarts until too many failures fall within one
	// interval.
	RestartFailureRate RestartStrategy = "failure-rate"
)

// FailoverStrategy is the value of [KeyFailoverStrategy].
type FailoverStrategy string

// Failover strategies.
const (
	// FailoverRegion restarts the failed task's pipelined region and the
	// regions that depend on it. The default.
	FailoverRegion FailoverStrategy = "region"
	// FailoverFull restarts every task of the job.
	FailoverFull FailoverStrategy = "full"
)

// StateBackend is the value of [KeyStateBackend].
type StateBackend string

// State backends.
const (
	// BackendHashMap keeps keyed state in memory and snapshots it
	// copy-on-write. The default.
	BackendHashMap StateBackend = "hashmap"
	// BackendPebble keeps keyed state in an embedded LSM store (Pebble) on
	// local disk, so it may be far larger than memory.
	BackendPebble StateBackend = "pebble"
	// BackendRocksDB is Flink's RocksDB backend; weir's embedded LSM
	// backend (Pebble) serves it.
	BackendRocksDB StateBackend = "rocksdb"
	// BackendForSt is Flink's ForSt backend; weir's embedded LSM backend
	// (Pebble) serves it.
	BackendForSt StateBackend = "forst"
)

// TimerService is the value of [KeyTimerService].
type TimerService string

// Timer services.
const (
	// TimersInStore keeps timers in the embedded LSM store. The default.
	TimersInStore TimerService = "ROCKSDB"
	// TimersOnHeap keeps timers in memory.
	TimersOnHeap TimerService = "HEAP"
)

// EmbeddedLSM reports whether the backend keeps state in the embedded LSM
// store: pebble, and Flink's rocksdb and forst, which it serves.
func (b StateBackend) EmbeddedLSM() bool {
	return b == BackendPebble || b == BackendRocksDB || b == BackendForSt
}

// The accepted values of each enumeration option, canonical spelling first
// and then the alternative spellings Flink also accepts. Matching ignores
// case.
var (
	checkpointingModes = []enumValue{
		{name: string(ExactlyOnce)},
		{name: string(AtLeastOnce)},
	}
	checkpointStorages = []enumValue{
		{name: string(StorageJobManager)},
		{name: string(StorageFilesystem)},
	}
	retentionPolicies = []enumValue{
		{name: string(NoExternalizedCheckpoints)},
		{name: string(DeleteOnCancellation)},
		{name: string(RetainOnCancellation)},
	}
	restartStrategies = []enumValue{
		{name: string(RestartNone), aliases: []string{"off", "disable"}},
		{name: string(RestartFixedDelay), aliases: []string{"fixeddelay"}},
		{name: string(RestartExponentialDelay), aliases: []string{"exponentialdelay"}},
		{name: string(RestartFailureRate), aliases: []string{"failurerate"}},
	}
	failoverStrategies = []enumValue{
		{name: string(FailoverRegion)},
		{name: string(FailoverFull)},
	}
	// stateBackends lists the implemented state backends, the default first.
	// A new backend is one more line here.
	stateBackends = []enumValue{
		{name: string(BackendHashMap)},
		{name: string(BackendPebble)},
		{name: string(BackendRocksDB)},
		{name: string(BackendForSt)},
	}
	savepointFormats = []enumValue{
		{name: string(SavepointCanonical)},
		{name: string(SavepointNative)},
	}
	claimModes = []enumValue{
		{name: string(NoClaim), aliases: []string{"no-claim"}},
		{name: string(Claim)},
	}
	// metricNamings are the names /metrics may use: weir's own (the
	// default) or those of Flink's Prometheus reporter.
	haTypes = []enumValue{
		{name: string(HANone)},
		{name: string(HAEtcd)},
		{name: string(HAKubernetes)},
	}
	metricNamings = []enumValue{
		{name: "weir"},
		{name: "flink"},
	}
	timerServices = []enumValue{
		{name: string(TimersInStore)},
		{name: string(TimersOnHeap)},
	}
)

// HAType is the value of [KeyHAType].
type HAType string

// High availability types.
const (
	// HANone runs one job manager: its jobs stop with it. The default.
	HANone HAType = "none"
	// HAEtcd elects a leader among job managers through etcd, which keeps
	// the submitted jobs and their latest completed checkpoints.
	HAEtcd HAType = "etcd"
	// HAKubernetes elects a leader on a Kubernetes Lease and keeps the
	// submitted jobs and their latest completed checkpoints in ConfigMaps.
	HAKubernetes HAType = "kubernetes"
)
