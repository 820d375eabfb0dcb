package config

// Keys of the registered options. Each constant's value is Flink's key; the
// comment states the default and the accepted values. Deprecated Flink keys
// that are still accepted are listed with the key that replaced them.
const (
	// KeyCheckpointingInterval is the interval between checkpoint triggers.
	// Default: unset, which disables checkpointing. At least 10 ms.
	KeyCheckpointingInterval = "execution.checkpointing.interval"

	// KeyCheckpointingMode is the consistency mode of checkpoints:
	// EXACTLY_ONCE (aligned barriers) or AT_LEAST_ONCE. Default: EXACTLY_ONCE.
	KeyCheckpointingMode = "execution.checkpointing.mode"

	// KeyCheckpointingTimeout is how long a pending checkpoint may run before
	// it is discarded. Default: 10 min. At least 1 ms.
	KeyCheckpointingTimeout = "execution.checkpointing.timeout"

	// KeyCheckpointingMinPause is the minimum pause between the end of one
	// checkpoint and the trigger of the next. A value above zero limits
	// concurrent checkpoints to one. Default: 0 ms.
	KeyCheckpointingMinPause = "execution.checkpointing.min-pause"

	// KeyCheckpointingMaxConcurrent is the maximum number of checkpoints in
	// flight at once. Default: 1. At least 1.
	KeyCheckpointingMaxConcurrent = "execution.checkpointing.max-concurrent-checkpoints"

	// KeyCheckpointingTolerableFailures is the number of consecutive
	// checkpoint failures tolerated before the job fails. Default: 0. At least 0.
	KeyCheckpointingTolerableFailures = "execution.checkpointing.tolerable-failed-checkpoints"

	// KeyCheckpointingDir is the directory (a path or a URL such as
	// s3://bucket/path) checkpoints are written to. Setting it implies
	// filesystem checkpoint storage. Default: unset (checkpoints are kept in
	// the job manager's memory). Replaces state.checkpoints.dir and
	// state.backend.fs.checkpointdir.
	KeyCheckpointingDir = "execution.checkpointing.dir"

	// KeyCheckpointingStorage selects where checkpoints are stored: jobmanager
	// or filesystem. Default: unset, resolved to filesystem when
	// execution.checkpointing.dir is set and jobmanager otherwise. Replaces
	// state.checkpoint-storage.
	KeyCheckpointingStorage = "execution.checkpointing.storage"

	// KeyCheckpointingNumRetained is the number of completed checkpoints
	// kept. Default: 1. At least 1. Replaces state.checkpoints.num-retained.
	KeyCheckpointingNumRetained = "execution.checkpointing.num-retained"

	// KeyCheckpointingInlineThreshold is the size below which a subtask's
	// state is written inside the checkpoint's _metadata rather than as a
	// file of its own. Default: 20 kb. From 0 to 1 mb. Replaces
	// state.storage.fs.memory-threshold.
	KeyCheckpointingInlineThreshold = "execution.checkpointing.data-inline-threshold"

	// KeyCheckpointingExternalizedRetention says whether the retained
	// checkpoints outlive a cancelled job: NO_EXTERNALIZED_CHECKPOINTS,
	// DELETE_ON_CANCELLATION or RETAIN_ON_CANCELLATION. Default:
	// NO_EXTERNALIZED_CHECKPOINTS.
	KeyCheckpointingExternalizedRetention = "execution.checkpointing.externalized-checkpoint-retention"

	// KeyCheckpointingIncremental enables incremental checkpoints: of the
	// embedded LSM store's files, or of the heap's changes. Default:
	// false. Replaces state.backend.incremental.
	KeyCheckpointingIncremental = "execution.checkpointing.incremental"

	// KeyCheckpointingUnaligned enables unaligned checkpoints, which require
	// EXACTLY_ONCE mode and one concurrent checkpoint. Default: false.
	// Replaces execution.checkpointing.unaligned.
	KeyCheckpointingUnaligned = "execution.checkpointing.unaligned.enabled"

	// KeyCheckpointingAlignedTimeout is, with unaligned checkpoints enabled,
	// how long a checkpoint starts aligned before switching to unaligned; 0
	// starts every checkpoint unaligned. Default: 0 ms. Replaces
	// execution.checkpointing.alignment-timeout.
	KeyCheckpointingAlignedTimeout = "execution.checkpointing.aligned-checkpoint-timeout"

	// KeyCheckpointingSavepointDir is the default directory for savepoints.
	// Default: unset. Replaces state.savepoints.dir.
	KeyCheckpointingSavepointDir = "execution.checkpointing.savepoint-dir"

	// KeyCheckpointingCreateSubdir says whether checkpoints go to a
	// subdirectory named after the job ID, <dir>/<job-id>/chk-<n>. Default:
	// true. Replaces state.checkpoints.create-subdir.
	KeyCheckpointingCreateSubdir = "execution.checkpointing.create-subdir"

	// KeyStateRecoveryPath is the checkpoint or savepoint a job resumes from.
	// Default: unset (start without state). Replaces execution.savepoint.path.
	KeyStateRecoveryPath = "execution.state-recovery.path"

	// KeyStateRecoveryAllowDuplicateOutput lets a job resume from an older
	// checkpoint than its job's newest completed one (which does not
	// verify) although a sink cannot undo what the newer checkpoints
	// committed: their output is then written again. Default: false (the
	// resume is refused). weir's own key; Flink has no such check.
	KeyStateRecoveryAllowDuplicateOutput = "execution.state-recovery.allow-duplicate-output"

	// KeyStateRecoveryIgnoreUnclaimedState lets a job resume from a
	// checkpoint or savepoint that holds state for operators the job no
	// longer has (matched by uid): that state is dropped. Default: false
	// (the resume is refused, naming the operators). Flink's key, and its
	// CLI's --allowNonRestoredState; replaces
	// execution.savepoint.ignore-unclaimed-state.
	KeyStateRecoveryIgnoreUnclaimedState = "execution.state-recovery.ignore-unclaimed-state"

	// KeyStateRecoveryClaimMode says who owns the checkpoint a job resumes
	// from (Flink's RecoveryClaimMode). NO_CLAIM, the default, leaves it to
	// whoever made it: the job never deletes or changes it, even when it
	// lies in the job's own directory, and the job's checkpoints name none
	// of its files. CLAIM makes a retained checkpoint the job's own: it
	// counts among execution.checkpointing.num-retained, is subsumed like
	// the job's checkpoints and then deleted, with the files of its job's
	// directory that no completed checkpoint names any more. A savepoint
	// cannot be claimed. Flink's LEGACY is not implemented. Flink's CLI
	// --claimMode; replaces execution.savepoint-restore-mode.
	KeyStateRecoveryClaimMode = "execution.state-recovery.claim-mode"

	// KeySavepointFormat is the format of a job's savepoints when the
	// request names none (weir savepoint and weir stop without --type, a
	// REST request without formatType): CANONICAL, the default, restores
	// into either state backend at any parallelism; NATIVE is the state
	// backend's own (with pebble/rocksdb, its store's files: quicker to take
	// and to restore into the same backend). The heap backend writes the
	// canonical format for either.
	KeySavepointFormat = "execution.savepoint.format"

	// KeyCheckpointingLocalBackup makes every subtask keep, on its task
	// manager's disk, a copy of the state files it writes for a checkpoint
	// (Flink's task-local state). Unset, it follows
	// execution.state-recovery.from-local, as in Flink. Default: false.
	// Replaces state.backend.local-recovery (through from-local).
	KeyCheckpointingLocalBackup = "execution.checkpointing.local-backup.enabled"

	// KeyCheckpointingLocalBackupDirs are the directories, separated by
	// commas (or the system's path list separator), under which task
	// managers keep local copies of checkpoint state. Default: unset, the
	// pebble backend's working directory (state.backend.pebble.localdir)
	// or the system's temporary directory. Replaces
	// taskmanager.state.local.root-dirs.
	KeyCheckpointingLocalBackupDirs = "execution.checkpointing.local-backup.dirs"

	// KeyStateRecoveryFromLocal makes a subtask restarted on the task
	// manager that ran it restore from its local copies of the checkpoint
	// (execution.checkpointing.local-backup.enabled) rather than reading
	// checkpoint storage, file by file, falling back to storage where a
	// copy is missing or does not verify. Default: false. Replaces
	// state.backend.local-recovery.
	KeyStateRecoveryFromLocal = "execution.state-recovery.from-local"
)

const (
	// KeyRestartStrategy is the restart strategy: none, fixed-delay,
	// exponential-delay or failure-rate; Flink's alternative spellings off,
	// disable, fixeddelay, exponentialdelay and failurerate are accepted.
	// Default: unset, resolved to exponential-delay when checkpointing is
	// enabled and none otherwise. Replaces restart-strategy.
	KeyRestartStrategy = "restart-strategy.type"

	// KeyFixedDelayAttempts is the number of restarts the fixed-delay strategy
	// allows before the job fails. Default: 1. At least 0.
	KeyFixedDelayAttempts = "restart-strategy.fixed-delay.attempts"

	// KeyFixedDelayDelay is the delay between two restarts of the fixed-delay
	// strategy. Default: 1 s.
	KeyFixedDelayDelay = "restart-strategy.fixed-delay.delay"

	// KeyExponentialDelayInitialBackoff is the first delay of the
	// exponential-delay strategy. Default: 1 s. At least 1 ms.
	KeyExponentialDelayInitialBackoff = "restart-strategy.exponential-delay.initial-backoff"

	// KeyExponentialDelayMaxBackoff is the largest delay of the
	// exponential-delay strategy; it must not be below the initial backoff.
	// Default: 1 min. At least 1 ms.
	KeyExponentialDelayMaxBackoff = "restart-strategy.exponential-delay.max-backoff"

	// KeyExponentialDelayBackoffMultiplier is the factor the delay grows by
	// after each failure. Default: 1.5. At least 1.
	KeyExponentialDelayBackoffMultiplier = "restart-strategy.exponential-delay.backoff-multiplier"

	// KeyExponentialDelayResetBackoffThreshold is how long a job must run
	// without failure for the delay to fall back to the initial backoff.
	// Default: 1 h. At least 1 ms.
	KeyExponentialDelayResetBackoffThreshold = "restart-strategy.exponential-delay.reset-backoff-threshold"

	// KeyExponentialDelayJitterFactor is the fraction of the delay added or
	// subtracted at random. Default: 0.1. From 0 to 1.
	KeyExponentialDelayJitterFactor = "restart-strategy.exponential-delay.jitter-factor"

	// KeyExponentialDelayAttemptsBeforeReset is the number of restarts allowed
	// before the backoff is reset; when they are used up the job fails.
	// Default: 2147483647 (Java's Integer.MAX_VALUE, in effect unlimited). At
	// least 1.
	KeyExponentialDelayAttemptsBeforeReset = "restart-strategy.exponential-delay.attempts-before-reset-backoff"

	// KeyFailureRateMaxFailures is the number of failures within one
	// failure-rate interval after which the job fails. Default: 1. At least 1.
	KeyFailureRateMaxFailures = "restart-strategy.failure-rate.max-failures-per-interval"

	// KeyFailureRateInterval is the window over which the failure-rate
	// strategy counts failures. Default: 1 min. At least 1 ms.
	KeyFailureRateInterval = "restart-strategy.failure-rate.failure-rate-interval"

	// KeyFailureRateDelay is the delay between two restarts of the
	// failure-rate strategy. Default: 1 s.
	KeyFailureRateDelay = "restart-strategy.failure-rate.delay"

	// KeyFailoverStrategy selects which tasks restart after a failure: region
	// (the failed task's pipelined region) or full (all tasks). Default:
	// region.
	KeyFailoverStrategy = "jobmanager.execution.failover-strategy"
)

const (
	// KeyParallelism is the parallelism of operators that do not set their
	// own. Default: 1. From 1 to 32768.
	KeyParallelism = "parallelism.default"

	// KeyMaxParallelism is the maximum parallelism of keyed operators, which is
	// also their number of key groups; -1 derives it from each operator's
	// parallelism with [DefaultMaxParallelism]. Default: -1. Either -1 or from
	// 1 to 32768.
	KeyMaxParallelism = "pipeline.max-parallelism"

	// KeyAutoWatermarkInterval is the interval at which periodic watermarks
	// are emitted; 0 disables them. Default: 200 ms.
	KeyAutoWatermarkInterval = "pipeline.auto-watermark-interval"

	// KeyBufferTimeout is the longest time a partly filled output batch waits
	// before it is flushed. Default: 100 ms. Replaces execution.buffer-timeout.
	KeyBufferTimeout = "execution.buffer-timeout.interval"

	// KeyBufferDebloatEnabled turns on buffer debloating: each subtask
	// with inputs measures how fast it consumes records and limits the
	// records in flight on each of its input channels to what it
	// consumes within KeyBufferDebloatTarget, so that an aligned barrier
	// waits behind about that much work under backpressure. Default:
	// false.
	KeyBufferDebloatEnabled = "taskmanager.network.memory.buffer-debloat.enabled"

	// KeyBufferDebloatTarget is the time a subtask should take to consume
	// the records in flight on its input channels. Default: 1 s. At least
	// 1 ms.
	KeyBufferDebloatTarget = "taskmanager.network.memory.buffer-debloat.target"

	// KeyBufferDebloatPeriod is how often a subtask recomputes its input
	// channels' limit. Default: 200 ms. At least 1 ms.
	KeyBufferDebloatPeriod = "taskmanager.network.memory.buffer-debloat.period"

	// KeyBufferDebloatSamples is the number of periods the consumption
	// rate is averaged over. Default: 20. From 1 to 1000.
	KeyBufferDebloatSamples = "taskmanager.network.memory.buffer-debloat.samples"

	// KeyBufferDebloatThreshold is the smallest change, in percent of the
	// current limit, that replaces it. Default: 25. From 0 to 100.
	KeyBufferDebloatThreshold = "taskmanager.network.memory.buffer-debloat.threshold-percentages"

	// KeyMinSegmentSize is Flink's smallest network buffer, the floor of
	// buffer debloating. weir refuses it: its channels hold records, not
	// byte buffers, and the floor is 64 records a channel.
	KeyMinSegmentSize = "taskmanager.memory.min-segment-size"

	// KeyStateBackend selects the keyed-state backend: hashmap (state in
	// memory, copy-on-write snapshots) or pebble (an embedded LSM store on
	// local disk), which also serves Flink's rocksdb and forst. Default:
	// hashmap. Replaces state.backend.
	KeyStateBackend = "state.backend.type"

	// KeyPebbleLocalDir is the directory under which each keyed operator
	// subtask of the pebble backend makes its working directory (removed
	// when the subtask ends). Default: unset, the system's temporary
	// directory.
	KeyPebbleLocalDir = "state.backend.pebble.localdir"

	// KeyPebbleMemory bounds the memory of each keyed operator subtask's
	// pebble store: five eighths for the write-back caches of its states'
	// rows, an eighth for its block cache, a quarter for its memtables.
	// Default: 64 mb. At least 4 mb.
	KeyPebbleMemory = "state.backend.pebble.memory"

	// KeyRocksDBMemoryFixedPerSlot is the memory that the embedded LSM
	// stores of the keyed operator subtasks in one slot share (subtask i
	// of every vertex runs in slot i): one block cache of an eighth of
	// it, the rest split evenly among them. It overrides managed memory,
	// as in Flink, and cannot be combined with state.backend.pebble.memory
	// or taskmanager.memory.managed.size. Default: unset. At least 4 mb.
	KeyRocksDBMemoryFixedPerSlot = "state.backend.rocksdb.memory.fixed-per-slot"

	// KeyRocksDBMemoryManaged bounds the embedded LSM stores of a slot by
	// the slot's share of taskmanager.memory.managed.size (the size
	// divided by the task manager's slots), shared as with
	// fixed-per-slot. Default: true, as in Flink; with no managed size
	// configured, each keyed subtask has state.backend.pebble.memory
	// instead, and setting it true explicitly without a managed size is
	// an error.
	KeyRocksDBMemoryManaged = "state.backend.rocksdb.memory.managed"

	// KeyRocksDBWriteBufferRatio and KeyRocksDBHighPrioPoolRatio are
	// Flink's shares of RocksDB's memory for memtables and for index and
	// filter blocks; weir's LSM store splits its memory in fixed shares
	// and refuses them.
	KeyRocksDBWriteBufferRatio  = "state.backend.rocksdb.memory.write-buffer-ratio"
	KeyRocksDBHighPrioPoolRatio = "state.backend.rocksdb.memory.high-prio-pool-ratio"

	// KeyManagedMemorySize is a task manager's managed memory, which the
	// embedded LSM stores of its slots share, a slot's share being the
	// size divided by the number of slots (see KeyRocksDBMemoryManaged).
	// Default: unset.
	KeyManagedMemorySize = "taskmanager.memory.managed.size"

	// KeyManagedMemoryFraction is the share of
	// taskmanager.memory.process.size that is a task manager's managed
	// memory when taskmanager.memory.managed.size is not set, as Flink
	// takes it of the total Flink memory: weir has no JVM metaspace or
	// overhead to set aside, so its total memory is the process size.
	// Only with taskmanager.memory.process.size set; refused without it.
	// Default: 0.4, as in Flink. Above 0 and below 1.
	KeyManagedMemoryFraction = "taskmanager.memory.managed.fraction"

	// KeyTaskManagerProcessSize is the memory of a task manager's process
	// (Flink's total process memory). weir makes it the Go runtime's soft
	// memory limit (runtime/debug.SetMemoryLimit) of the process that
	// runs subtasks — weir taskmanager, and a process that runs a job
	// embedded — with nothing taken off: the limit bounds the memory the
	// Go runtime maps for its heap (the heap backend's state, the pebble
	// backend's write-back caches, records in flight), goroutine stacks
	// and its own metadata; in a build with CGO_ENABLED=0 (the container
	// image) also the pebble stores' block caches and memtables, which a
	// cgo build allocates with C's malloc, outside the limit. It does not
	// bound the page cache of the stores' files. The limit is soft: the
	// garbage collector runs more often as the heap nears it, but no
	// allocation fails. Its managed fraction
	// (taskmanager.memory.managed.fraction) bounds the pebble stores when
	// no other key does. GOMEMLIMIT in the environment wins. Default:
	// unset (no limit but GOMEMLIMIT's). At least 64 mb.
	KeyTaskManagerProcessSize = "taskmanager.memory.process.size"

	// KeyJobManagerProcessSize is the memory of a job manager's process:
	// the Go runtime's soft memory limit of weir jobmanager, bounding
	// what taskmanager.memory.process.size bounds. It does not apply to
	// an embedded run, whose process is its task manager. GOMEMLIMIT in
	// the environment wins. Default: unset. At least 64 mb.
	KeyJobManagerProcessSize = "jobmanager.memory.process.size"

	// KeyTimerService says where the embedded LSM backend keeps timers:
	// ROCKSDB, in the store with the keyed state (Flink's default), or
	// HEAP, in memory. The heap backend keeps them in memory either way.
	KeyTimerService = "state.backend.rocksdb.timer-service.factory"
)

const (
	// KeyHeartbeatInterval is the interval between heartbeats of the job
	// manager and the task managers. Default: 10 s. At least 1 ms.
	KeyHeartbeatInterval = "heartbeat.interval"

	// KeyHeartbeatTimeout is how long a peer may miss heartbeats before it is
	// considered lost; it must not be below the interval. Default: 50 s. At
	// least 1 ms.
	KeyHeartbeatTimeout = "heartbeat.timeout"

	// KeyTaskSlots is the number of slots a task manager offers. Default: 1.
	// At least 1.
	KeyTaskSlots = "taskmanager.numberOfTaskSlots"

	// KeyTaskManagerHost is the host name or address other task managers
	// reach a task manager's data plane at (with the port it listens on).
	// Default: unset, the address it listens on, which must then not be a
	// wildcard (0.0.0.0, ::). In Kubernetes, the pod's IP.
	KeyTaskManagerHost = "taskmanager.host"

	// KeyRESTAddress is the host (name or address) clients reach this job
	// manager's REST API at, with its port; with high availability the
	// leader publishes it, and a standby's REST API redirects there.
	// Default: unset, the address the REST API listens on, which must
	// then not be a wildcard (0.0.0.0, ::) for a highly available job
	// manager. In Kubernetes, the pod's IP.
	KeyRESTAddress = "rest.address"

	// KeyRESTBindAddress is the address the REST server listens on. Default:
	// localhost, so the API is reachable only from the local machine unless
	// configured otherwise (Flink's default binds to all interfaces).
	KeyRESTBindAddress = "rest.bind-address"

	// KeyRESTPort is the port of the REST server; 0 picks a free port.
	// Default: 8081. From 0 to 65535.
	KeyRESTPort = "rest.port"

	// KeyRESTAuthToken is a bearer token the REST API requires on every
	// request; a weir option with no Flink counterpart. Default: unset (no
	// authentication). The value is sensitive and should not be printed.
	KeyRESTAuthToken = "rest.auth-token"

	// KeyRESTFlinkDashboardDir is a directory holding the web dashboard of
	// Apache Flink (the web/ folder of org.apache.flink:flink-runtime-web's
	// jar), which the REST server then serves under /flink/; a weir option
	// with no Flink counterpart. Default: unset (weir serves only its own
	// UI; it ships none of Flink's files).
	KeyRESTFlinkDashboardDir = "rest.flink-dashboard.dir"

	// KeyMetricsPrometheusNames says which names the Prometheus metrics at
	// the REST server's /metrics use: weir (weir_ names in Prometheus'
	// conventions) or flink (the names and labels of Flink's Prometheus
	// reporter, flink_taskmanager_job_task_operator_numRecordsIn and the
	// like, for dashboards made for Flink). A weir option: Flink
	// configures its reporters under metrics.reporter.<name>.*, each with
	// a port of its own, which weir does not have. Default: weir.
	KeyMetricsPrometheusNames = "metrics.prometheus.names"

	// KeyCheckpointHistory is the number of recent checkpoints whose
	// statistics the REST API keeps. Default: 10. At least 0.
	KeyCheckpointHistory = "web.checkpoints.history"

	// KeyClusterAuthToken is the secret every process of a cluster shares:
	// the job manager requires it of task managers and of the clients that
	// submit, list and cancel jobs, and task managers require it of each
	// other's data connections. It never travels in clear: each side
	// proves it holds the token with an HMAC. A weir option with no Flink
	// counterpart. Default: unset (no authentication), which only a
	// loopback listen address allows. The value is sensitive and should
	// not be printed.
	KeyClusterAuthToken = "cluster.auth-token"

	// KeyHAType says how job managers stay available: none (one job
	// manager; its jobs stop with it), etcd (job managers elect a leader
	// through etcd, which keeps the submitted jobs and their latest
	// completed checkpoints; a standby takes over) or kubernetes (the same
	// on a Lease and ConfigMaps of the Kubernetes API). Flink's zookeeper
	// is refused. Default: none.
	KeyHAType = "high-availability.type"

	// KeyHAEtcdEndpoints are the etcd endpoints (host:port, comma-separated)
	// that high-availability.type etcd uses; the counterpart of Flink's
	// high-availability.zookeeper.quorum, named after etcd's own
	// --endpoints. Required with etcd.
	KeyHAEtcdEndpoints = "high-availability.etcd.endpoints"

	// KeyHAStorageDir is where high availability keeps what is too big for
	// etcd (a submitted job larger than its limit), a path or URL, as in
	// Flink. Default: unset (such a job is refused).
	KeyHAStorageDir = "high-availability.storageDir"

	// KeyHAClusterID names the cluster in etcd, so that several clusters
	// can share one etcd. Default: default.
	KeyHAClusterID = "high-availability.cluster-id"

	// KeyHAEtcdLeaseTTL is the lease of the leader's election key: a
	// leader that cannot renew it for this long (it died, paused, or lost
	// etcd) is replaced. Default: 15 s, as Flink's Kubernetes lease. At
	// least 1 s.
	KeyHAEtcdLeaseTTL = "high-availability.etcd.lease-ttl"

	// KeyHAKubernetesLeaseDuration is, with high-availability.type
	// kubernetes, how long a standby waits after it last saw the leader's
	// Lease renewed before it takes over. Default: 15 s, as in Flink. At
	// least 1 s.
	KeyHAKubernetesLeaseDuration = "high-availability.kubernetes.leader-election.lease-duration"

	// KeyHAKubernetesRenewDeadline is how long the leader keeps trying to
	// renew its Lease before it gives the leadership up (and its process
	// exits). Default: 15 s, as in Flink. At most the lease duration.
	KeyHAKubernetesRenewDeadline = "high-availability.kubernetes.leader-election.renew-deadline"

	// KeyHAKubernetesRetryPeriod is how often the leader renews its Lease
	// and a standby tries to take it. Default: 5 s, as in Flink. Below
	// the renew deadline (by more than a fifth: each wait is stretched by
	// up to a fifth at random).
	KeyHAKubernetesRetryPeriod = "high-availability.kubernetes.leader-election.retry-period"

	// KeyKubernetesClusterID names the cluster's Kubernetes objects with
	// high-availability.type kubernetes: the Lease weir-<id>-leader and the
	// ConfigMaps weir-<id>-ha and weir-<id>-job-.... A DNS label of at
	// most 40 characters. Default: unset, high-availability.cluster-id.
	KeyKubernetesClusterID = "kubernetes.cluster-id"

	// KeyKubernetesNamespace is the namespace of those objects. Default:
	// unset, the pod's own namespace (in a pod), else the kubeconfig
	// context's, else default.
	KeyKubernetesNamespace = "kubernetes.namespace"

	// KeyKubernetesConfigFile is the kubeconfig file a process outside the
	// cluster (a client, a job manager on a machine) reaches the
	// Kubernetes API with. Default: unset, the pod's service account (the
	// process runs in a pod).
	KeyKubernetesConfigFile = "kubernetes.config.file"

	// KeySSLInternalEnabled is Flink's switch for TLS on internal
	// connections (job manager, task managers, data plane). weir does not
	// implement TLS yet: true is refused. Default: false.
	KeySSLInternalEnabled = "security.ssl.internal.enabled"

	// KeySSLRESTEnabled is Flink's switch for TLS on the REST API. weir
	// does not implement TLS yet: true is refused. Default: false.
	KeySSLRESTEnabled = "security.ssl.rest.enabled"
)

// Keys of the S3 object store options, which apply to every s3:// URL weir
// reads or writes (checkpoint and savepoint directories, restore paths).
// They are the keys of Flink's S3 file systems (flink-s3-fs-hadoop and
// flink-s3-fs-presto). Unset credentials fall back to the AWS SDK's
// default chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the shared
// config and credentials files, web identity, container and instance
// roles.
const (
	// KeyS3Endpoint is the URL of an S3-compatible server (MinIO,
	// SeaweedFS, Ceph, a cloud's S3 API) to use instead of AWS's,
	// http://host:port or https://host. Default: unset (AWS).
	KeyS3Endpoint = "s3.endpoint"

	// KeyS3AccessKey is the access key id. Set together with
	// KeyS3SecretKey, or neither. Default: unset (the AWS default chain).
	// The value is sensitive and never printed.
	KeyS3AccessKey = "s3.access-key"

	// KeyS3SecretKey is the secret access key. Default: unset (the AWS
	// default chain). The value is sensitive and never printed.
	KeyS3SecretKey = "s3.secret-key"

	// KeyS3PathStyleAccess addresses buckets as http://endpoint/bucket/key
	// instead of http://bucket.endpoint/key, as most S3-compatible servers
	// need. Default: false.
	KeyS3PathStyleAccess = "s3.path.style.access"
)

// Keys of the Google Cloud Storage options, which apply to every gs:// URL
// weir reads or writes. They are the keys Flink's gs file system
// (flink-gs-fs-hadoop) passes on to the GCS connector as fs.gs.*. Without
// a key file, credentials are Google's Application Default Credentials:
// GOOGLE_APPLICATION_CREDENTIALS, gcloud's, or the metadata server's.
const (
	// KeyGSStorageRootURL is the root URL of the Cloud Storage JSON API,
	// such as http://127.0.0.1:4443/ for an emulator. Default: unset
	// (Google's). With a root URL set, no key file and no
	// GOOGLE_APPLICATION_CREDENTIALS, requests carry no credentials, as
	// emulators expect.
	KeyGSStorageRootURL = "gs.storage.root.url"

	// KeyGSServiceAccountKeyFile is the path of a service account's JSON
	// key. Default: unset (Application Default Credentials).
	KeyGSServiceAccountKeyFile = "gs.auth.service.account.json.keyfile"
)
