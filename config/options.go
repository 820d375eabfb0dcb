package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Kind is the type of an option's value.
type Kind int

// Option kinds.
const (
	KindString   Kind = iota // text such as a path, URL or address; never empty
	KindBool                 // true or false
	KindInt                  // a 32-bit decimal integer
	KindFloat                // a decimal number
	KindDuration             // a Flink duration such as "10 s"; see ParseDuration
	KindEnum                 // one of a fixed set of names, case-insensitive
	KindMemory               // a Flink memory size such as "20 kb"; see ParseMemorySize
)

// String returns the kind's name as shown by Options listings: string, bool,
// int, float, duration or enum.
func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindBool:
		return "bool"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindDuration:
		return "duration"
	case KindEnum:
		return "enum"
	case KindMemory:
		return "memory"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// OptionInfo describes one registered option. It is a copy: changing it has no
// effect on the registry.
type OptionInfo struct {
	// Key is the option's key, Flink's name for it.
	Key string
	// Kind is the type of the option's value.
	Kind Kind
	// Default is the default value in canonical form, or "" when the option
	// has no default; the Description then says what an unset option means.
	Default string
	// HasDefault reports whether the option has a default.
	HasDefault bool
	// Values lists the canonical enumeration values for KindEnum, the default
	// first where there is one; nil for other kinds.
	Values []string
	// Allowed describes the accepted values in words, as error messages do:
	// the syntax of the kind, the range, or the enumeration values with their
	// alternative spellings.
	Allowed string
	// DeprecatedKeys lists older Flink keys still accepted for this option.
	DeprecatedKeys []string
	// Sensitive marks values that must not be printed or logged, such as
	// credentials.
	Sensitive bool
	// Description says in one line what the option does.
	Description string
}

// Options returns every registered option, sorted by key. The slice and its
// elements are fresh copies the caller may keep or modify.
func Options() []OptionInfo {
	out := make([]OptionInfo, 0, len(registry.sorted))
	for _, o := range registry.sorted {
		info := OptionInfo{
			Key:            o.key,
			Kind:           o.kind,
			Default:        o.def,
			HasDefault:     o.def != "",
			Allowed:        o.allowed(),
			DeprecatedKeys: slices.Clone(o.deprecated),
			Sensitive:      o.sensitive,
			Description:    o.desc,
		}
		for _, v := range o.values {
			info.Values = append(info.Values, v.name)
		}
		out = append(out, info)
	}
	return out
}

// option is one entry of the registry.
type option struct {
	key  string
	kind Kind
	// def is the default in canonical form; "" means no default.
	def string
	// values are the accepted values of a KindEnum option.
	values []enumValue
	// unsupported are values Flink accepts for a KindEnum option but weir does
	// not implement.
	unsupported []string
	// check restricts the parsed value further; nil accepts every value of
	// the kind.
	check *constraint
	// deprecated are older keys that still set this option.
	deprecated []string
	sensitive  bool
	desc       string
}

// enumValue is one accepted value of an enumeration: its canonical spelling
// and the alternative spellings that mean the same.
type enumValue struct {
	name    string
	aliases []string
}

// constraint is a range or similar rule on a parsed value. ok receives the
// parsed value: bool, int, float64 or time.Duration as the option's kind
// dictates.
type constraint struct {
	desc string
	ok   func(v any) bool
	// why, if set, explains a refused value in errors.
	why string
}

// notImplemented accepts only false, for Flink's switches of features weir
// lacks; why says what to use instead.
func notImplemented(why string) *constraint {
	return &constraint{desc: "false", ok: func(v any) bool { return !v.(bool) }, why: why}
}

// only accepts the one value weir implements (compared in canonical,
// parsed form), for Flink options whose other values weir does not
// honour; why says what weir does instead.
func only[T comparable](v T, desc, why string) *constraint {
	return &constraint{desc: desc, ok: func(x any) bool { return x.(T) == v }, why: why}
}

// unset refuses every value of an option whose feature weir lacks.
func unset(why string) *constraint {
	return &constraint{desc: "none (leave it unset)", ok: func(any) bool { return false }, why: why}
}

func intAtLeast(n int) *constraint {
	return &constraint{
		desc: fmt.Sprintf("at least %d", n),
		ok:   func(v any) bool { return v.(int) >= n },
	}
}

func intBetween(lo, hi int) *constraint {
	return &constraint{
		desc: fmt.Sprintf("from %d to %d", lo, hi),
		ok:   func(v any) bool { return v.(int) >= lo && v.(int) <= hi },
	}
}

func floatAtLeast(f float64) *constraint {
	return &constraint{
		desc: fmt.Sprintf("at least %g", f),
		ok:   func(v any) bool { return v.(float64) >= f },
	}
}

func floatBetween(lo, hi float64) *constraint {
	return &constraint{
		desc: fmt.Sprintf("from %g to %g", lo, hi),
		ok:   func(v any) bool { return v.(float64) >= lo && v.(float64) <= hi },
	}
}

// floatAbove0Below1 accepts a fraction strictly between 0 and 1.
var floatAbove0Below1 = &constraint{
	desc: "above 0 and below 1",
	ok:   func(v any) bool { return v.(float64) > 0 && v.(float64) < 1 },
}

func durationAtLeast(d time.Duration) *constraint {
	return &constraint{
		desc: "at least " + FormatDuration(d),
		ok:   func(v any) bool { return v.(time.Duration) >= d },
	}
}

// dnsLabel accepts a DNS label (RFC 1123) of at most n characters, as
// Kubernetes names and namespaces are made of.
func dnsLabel(n int) *constraint {
	return &constraint{
		desc: fmt.Sprintf("a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most %d characters", n),
		ok: func(v any) bool {
			return len(v.(string)) <= n && dnsLabelRE.MatchString(v.(string))
		},
	}
}

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// httpURL accepts an absolute http:// or https:// URL with a host and
// nothing after its path: an endpoint.
func httpURL() *constraint {
	return &constraint{
		desc: "an http:// or https:// URL such as http://127.0.0.1:8333",
		ok: func(v any) bool {
			u, err := url.Parse(v.(string))
			return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
				u.User == nil && u.RawQuery == "" && u.Fragment == ""
		},
	}
}

// UpperBoundMaxParallelism is the largest maximum parallelism, and so the
// largest number of key groups, a keyed operator may have: 32768, as in Flink.
// Package state checks key group assignments and snapshots against it.
const UpperBoundMaxParallelism = 1 << 15

// DefaultLowerBoundMaxParallelism is the smallest maximum parallelism
// DefaultMaxParallelism derives: 128, as in Flink.
const DefaultLowerBoundMaxParallelism = 1 << 7

var maxParallelismRange = &constraint{
	desc: fmt.Sprintf("that is -1 (derive from the parallelism) or from 1 to %d", UpperBoundMaxParallelism),
	ok: func(v any) bool {
		n := v.(int)
		return n == -1 || (n >= 1 && n <= UpperBoundMaxParallelism)
	},
}

// optionTable is the registry's source: every option weir understands. It is
// read once, by newRegistry, and never modified.
var optionTable = []option{
	// Checkpointing (Flink's CheckpointingOptions and StateRecoveryOptions).
	{key: KeyCheckpointingInterval, kind: KindDuration, check: durationAtLeast(10 * time.Millisecond),
		desc: "Interval between checkpoint triggers; unset disables checkpointing."},
	{key: KeyCheckpointingMode, kind: KindEnum, def: string(ExactlyOnce), values: checkpointingModes,
		desc: "Consistency mode of checkpoints."},
	{key: KeyCheckpointingTimeout, kind: KindDuration, def: "10 min", check: durationAtLeast(time.Millisecond),
		desc: "Time after which a pending checkpoint is discarded."},
	{key: KeyCheckpointingMinPause, kind: KindDuration, def: "0 ms",
		desc: "Minimum pause between the end of one checkpoint and the next trigger; above zero allows one checkpoint at a time."},
	{key: KeyCheckpointingMaxConcurrent, kind: KindInt, def: "1", check: intAtLeast(1),
		desc: "Maximum number of checkpoints in flight at once."},
	{key: KeyCheckpointingTolerableFailures, kind: KindInt, def: "0", check: intAtLeast(0),
		desc: "Number of consecutive checkpoint failures tolerated before the job fails."},
	{key: KeyCheckpointingDir, kind: KindString,
		deprecated: []string{"state.checkpoints.dir", "state.backend.fs.checkpointdir"},
		desc:       "Directory or URL checkpoints are written to; unset keeps them in job manager memory."},
	{key: KeyCheckpointingStorage, kind: KindEnum, values: checkpointStorages,
		deprecated: []string{"state.checkpoint-storage"},
		desc:       "Checkpoint storage; unset means filesystem when a checkpoint directory is set, jobmanager otherwise."},
	{key: KeyCheckpointingNumRetained, kind: KindInt, def: "1", check: intAtLeast(1),
		deprecated: []string{"state.checkpoints.num-retained"},
		desc:       "Number of completed checkpoints retained."},
	{key: KeyCheckpointingInlineThreshold, kind: KindMemory, def: "20 kb", check: memoryBetween(0, 1<<20),
		deprecated: []string{"state.storage.fs.memory-threshold"},
		desc:       "State smaller than this is kept inside the checkpoint's _metadata instead of a file of its own."},
	{key: KeyCheckpointingExternalizedRetention, kind: KindEnum, def: string(NoExternalizedCheckpoints), values: retentionPolicies,
		desc: "Whether retained checkpoints are kept when the job is cancelled or fails."},
	{key: KeyCheckpointingIncremental, kind: KindBool, def: "false",
		deprecated: []string{"state.backend.incremental"},
		desc:       "Incremental checkpoints: pebble's of its store's files, the heap's as deltas over the earlier checkpoints' keyed state."},
	{key: KeyCheckpointingUnaligned, kind: KindBool, def: "false",
		deprecated: []string{"execution.checkpointing.unaligned"},
		desc:       "Unaligned checkpoints; requires EXACTLY_ONCE and one concurrent checkpoint."},
	{key: KeyCheckpointingAlignedTimeout, kind: KindDuration, def: "0 ms",
		check:      durationAtLeast(0),
		deprecated: []string{"execution.checkpointing.alignment-timeout"},
		desc:       "With unaligned checkpoints, time a checkpoint stays aligned before switching; 0 starts unaligned."},
	{key: KeyCheckpointingSavepointDir, kind: KindString,
		deprecated: []string{"state.savepoints.dir"},
		desc:       "Default directory or URL for savepoints (weir savepoint, POST /jobs/:jobid/savepoints) when the request names none."},
	{key: KeyCheckpointingCreateSubdir, kind: KindBool, def: "true",
		check:      only(true, "true", "weir always writes checkpoints under <dir>/<job-id>/chk-<n>; writing them into the directory itself is not implemented"),
		deprecated: []string{"state.checkpoints.create-subdir"},
		desc:       "Write checkpoints under a subdirectory named after the job ID."},
	{key: KeyStateRecoveryPath, kind: KindString,
		deprecated: []string{"execution.savepoint.path"},
		desc:       "Checkpoint or savepoint to resume the job from."},
	{key: KeyStateRecoveryAllowDuplicateOutput, kind: KindBool, def: "false",
		desc: "Resume from an older checkpoint than the newest completed one (which does not verify) even if a sink cannot undo the newer checkpoints' commits, writing their output again."},
	{key: KeyStateRecoveryClaimMode, kind: KindEnum, def: "NO_CLAIM", values: claimModes,
		deprecated: []string{"execution.savepoint-restore-mode"},
		desc:       "Who owns the checkpoint a job resumes from: NO_CLAIM leaves it alone; CLAIM makes a retained checkpoint the job's, deleted once subsumed (not a savepoint)."},
	{key: KeySavepointFormat, kind: KindEnum, def: "CANONICAL", values: savepointFormats,
		desc: "Format of a savepoint whose request names none: CANONICAL restores into either backend; NATIVE is the backend's own (pebble/rocksdb: its store's files)."},
	{key: KeyStateRecoveryIgnoreUnclaimedState, kind: KindBool, def: "false",
		deprecated: []string{"execution.savepoint.ignore-unclaimed-state"},
		desc:       "Resume from a checkpoint or savepoint that holds state for operators the job no longer has, dropping that state."},
	{key: KeyCheckpointingLocalBackup, kind: KindBool,
		desc: "Keep a copy of each subtask's checkpoint state on its task manager's disk; unset follows execution.state-recovery.from-local."},
	{key: KeyCheckpointingLocalBackupDirs, kind: KindString,
		deprecated: []string{"taskmanager.state.local.root-dirs"},
		desc:       "Directories (comma-separated) for local copies of checkpoint state; unset uses state.backend.pebble.localdir or the temporary directory."},
	{key: KeyStateRecoveryFromLocal, kind: KindBool, def: "false",
		deprecated: []string{"state.backend.local-recovery"},
		desc:       "Restore a subtask restarted on the same task manager from its local copies of the checkpoint, falling back to checkpoint storage per file."},

	// Restart and failover (Flink's RestartStrategyOptions and JobManagerOptions).
	{key: KeyRestartStrategy, kind: KindEnum, values: restartStrategies,
		deprecated: []string{"restart-strategy"},
		desc:       "Restart strategy; unset means exponential-delay with checkpointing enabled, none otherwise."},
	{key: KeyFixedDelayAttempts, kind: KindInt, def: "1", check: intAtLeast(0),
		desc: "Restarts allowed by fixed-delay before the job fails."},
	{key: KeyFixedDelayDelay, kind: KindDuration, def: "1 s",
		desc: "Delay between restarts for fixed-delay."},
	{key: KeyExponentialDelayInitialBackoff, kind: KindDuration, def: "1 s", check: durationAtLeast(time.Millisecond),
		desc: "First restart delay for exponential-delay."},
	{key: KeyExponentialDelayMaxBackoff, kind: KindDuration, def: "1 min", check: durationAtLeast(time.Millisecond),
		desc: "Largest restart delay for exponential-delay."},
	{key: KeyExponentialDelayBackoffMultiplier, kind: KindFloat, def: "1.5", check: floatAtLeast(1),
		desc: "Factor the exponential-delay backoff grows by after each failure."},
	{key: KeyExponentialDelayResetBackoffThreshold, kind: KindDuration, def: "1 h", check: durationAtLeast(time.Millisecond),
		desc: "Failure-free running time after which the exponential-delay backoff resets."},
	{key: KeyExponentialDelayJitterFactor, kind: KindFloat, def: "0.1", check: floatBetween(0, 1),
		desc: "Fraction of the exponential-delay backoff added or subtracted at random."},
	{key: KeyExponentialDelayAttemptsBeforeReset, kind: KindInt, def: "2147483647", check: intAtLeast(1),
		desc: "Restarts allowed by exponential-delay before the backoff resets; 2147483647 means unlimited."},
	{key: KeyFailureRateMaxFailures, kind: KindInt, def: "1", check: intAtLeast(1),
		desc: "Failures within one interval after which failure-rate fails the job."},
	{key: KeyFailureRateInterval, kind: KindDuration, def: "1 min", check: durationAtLeast(time.Millisecond),
		desc: "Window over which failure-rate counts failures."},
	{key: KeyFailureRateDelay, kind: KindDuration, def: "1 s",
		desc: "Delay between restarts for failure-rate."},
	{key: KeyFailoverStrategy, kind: KindEnum, def: string(FailoverRegion), values: failoverStrategies,
		desc: "Which tasks restart after a failure: the failed pipelined region or all."},

	// Pipeline (Flink's CoreOptions, PipelineOptions, ExecutionOptions and StateBackendOptions).
	{key: KeyParallelism, kind: KindInt, def: "1", check: intBetween(1, UpperBoundMaxParallelism),
		desc: "Parallelism of operators that do not set their own."},
	{key: KeyMaxParallelism, kind: KindInt, def: "-1", check: maxParallelismRange,
		desc: "Maximum parallelism (number of key groups) of keyed operators; -1 derives it from the parallelism."},
	{key: KeyAutoWatermarkInterval, kind: KindDuration, def: "200 ms",
		check: only(200*time.Millisecond, "200 ms", "weir's sources emit a watermark after every batch they read, not periodically; another interval is not implemented"),
		desc:  "Interval of periodic watermark emission; 0 disables it."},
	{key: KeyBufferTimeout, kind: KindDuration, def: "100 ms",
		check:      only(100*time.Millisecond, "100 ms", "a weir task sends a partly filled batch as soon as it has no input to process, so batches never wait; another timeout is not implemented"),
		deprecated: []string{"execution.buffer-timeout"},
		desc:       "Longest time a partly filled output batch waits before it is flushed."},
	{key: KeyBufferDebloatEnabled, kind: KindBool, def: "false",
		desc: "Buffer debloating: limit the records in flight on each input channel to what its subtask consumes within the target time."},
	{key: KeyBufferDebloatTarget, kind: KindDuration, def: "1 s", check: durationAtLeast(time.Millisecond),
		desc: "With buffer debloating, the time a subtask should take to consume the records in flight on its input channels."},
	{key: KeyBufferDebloatPeriod, kind: KindDuration, def: "200 ms", check: durationAtLeast(time.Millisecond),
		desc: "With buffer debloating, how often a subtask recomputes its input channels' in-flight limit."},
	{key: KeyBufferDebloatSamples, kind: KindInt, def: "20", check: intBetween(1, 1000),
		desc: "With buffer debloating, the number of periods a subtask's consumption rate is averaged over."},
	{key: KeyBufferDebloatThreshold, kind: KindInt, def: "25", check: intBetween(0, 100),
		desc: "With buffer debloating, the smallest change of the in-flight limit, in percent of the current one, that is applied."},
	{key: KeyMinSegmentSize, kind: KindMemory,
		check: unset("weir's channels hold records, not byte buffers: buffer debloating's floor is 64 records a channel; a floor in bytes is not implemented"),
		desc:  "Smallest network buffer, the floor of buffer debloating."},
	{key: KeyStateBackend, kind: KindEnum, def: string(BackendHashMap), values: stateBackends,
		deprecated: []string{"state.backend"},
		desc:       "Keyed-state backend: hashmap (the heap), or pebble (an embedded LSM store on local disk), which also serves rocksdb and forst."},
	{key: KeyPebbleLocalDir, kind: KindString,
		desc: "Directory where the pebble backend keeps its working files; unset is the system's temporary directory."},
	{key: KeyPebbleMemory, kind: KindMemory, def: "64 mb", check: memoryBetween(4<<20, 1<<40),
		desc: "Memory of each keyed operator subtask's pebble store: five eighths write-back caches of its rows, an eighth block cache, a quarter memtables."},
	{key: KeyRocksDBMemoryFixedPerSlot, kind: KindMemory, check: memoryBetween(4<<20, 1<<40),
		desc: "Memory the pebble (rocksdb, forst) stores of one slot's keyed subtasks share: an eighth one block cache, the rest split among them. Overrides managed memory."},
	{key: KeyRocksDBMemoryManaged, kind: KindBool, def: "true",
		desc: "Whether a slot's pebble stores share the slot's part of taskmanager.memory.managed.size; without a managed size, each keyed subtask has state.backend.pebble.memory."},
	{key: KeyRocksDBWriteBufferRatio, kind: KindFloat,
		check: unset("weir's pebble store gives a fixed quarter of its memory to memtables, a quarter to its block cache and half to its write-back cache; the ratio is not implemented"),
		desc:  "Share of the memory for memtables."},
	{key: KeyRocksDBHighPrioPoolRatio, kind: KindFloat,
		check: unset("weir's pebble store has no high-priority pool for index and filter blocks in its block cache; the ratio is not implemented"),
		desc:  "Share of the block cache for index and filter blocks."},
	{key: KeyManagedMemorySize, kind: KindMemory, check: memoryBetween(4<<20, 1<<50),
		desc: "Managed memory of a task manager, shared by its slots' pebble stores (state.backend.rocksdb.memory.managed)."},
	{key: KeyManagedMemoryFraction, kind: KindFloat, def: "0.4", check: floatAbove0Below1,
		desc: "Managed memory as a fraction of taskmanager.memory.process.size, when no managed size is set."},
	{key: KeyTaskManagerProcessSize, kind: KindMemory, check: memoryBetween(64<<20, 1<<50),
		desc: "Memory of a task manager's process: the Go runtime's soft memory limit of a process that runs subtasks, and what the managed fraction is taken of."},
	{key: KeyJobManagerProcessSize, kind: KindMemory, check: memoryBetween(64<<20, 1<<50),
		desc: "Memory of a job manager's process: the Go runtime's soft memory limit of weir jobmanager."},
	{key: KeyTimerService, kind: KindEnum, def: string(TimersInStore), values: timerServices,
		desc: "Where the pebble (rocksdb, forst) backend keeps timers: ROCKSDB, in its store with the keyed state, or HEAP, in memory."},

	// Cluster and REST (Flink's HeartbeatManagerOptions, TaskManagerOptions, RestOptions, WebOptions).
	{key: KeyHeartbeatInterval, kind: KindDuration, def: "10 s", check: durationAtLeast(time.Millisecond),
		desc: "Interval between heartbeats of the job manager and task managers."},
	{key: KeyHeartbeatTimeout, kind: KindDuration, def: "50 s", check: durationAtLeast(time.Millisecond),
		desc: "Time without heartbeats after which a peer is considered lost."},
	{key: KeyTaskSlots, kind: KindInt, def: "1", check: intAtLeast(1),
		desc: "Number of slots a task manager offers."},
	{key: KeyTaskManagerHost, kind: KindString,
		desc: "Host name or address other task managers reach this one's data plane at; unset: the address it listens on (--data-listen), which must then not be a wildcard."},
	{key: KeyRESTAddress, kind: KindString,
		desc: "Host clients reach the job manager's REST API at; a highly available leader publishes it and standbys redirect there (unset: the bind address)."},
	{key: KeyRESTBindAddress, kind: KindString, def: "localhost",
		desc: "Address the REST server listens on; the default reaches only the local machine."},
	{key: KeyRESTPort, kind: KindInt, def: "8081", check: intBetween(0, 65535),
		desc: "Port of the REST server; 0 picks a free port."},
	{key: KeyRESTAuthToken, kind: KindString, sensitive: true,
		desc: "Bearer token required by the REST API (weir only); unset disables authentication."},
	{key: KeyRESTFlinkDashboardDir, kind: KindString,
		desc: "Directory holding Flink's web dashboard (the web/ folder of flink-runtime-web), served under /flink/ (weir only); unset serves none."},
	{key: KeyMetricsPrometheusNames, kind: KindEnum, def: "weir", values: metricNamings,
		desc: "Names of the Prometheus metrics at /metrics: weir (weir_ names) or flink (the names and labels of Flink's Prometheus reporter) (weir only)."},
	{key: KeyCheckpointHistory, kind: KindInt, def: "10", check: intAtLeast(0),
		desc: "Number of recent checkpoints whose statistics the REST API keeps."},
	{key: KeyClusterAuthToken, kind: KindString, sensitive: true,
		desc: "Secret shared by the job manager, task managers and clients, required of every control and data connection (weir only); unset disables authentication."},

	// S3 object storage (Flink's S3 file systems, flink-s3-fs-hadoop and flink-s3-fs-presto).
	{key: KeyS3Endpoint, kind: KindString, check: httpURL(),
		desc: "URL of an S3-compatible server for s3:// paths, such as http://127.0.0.1:8333; unset uses AWS."},
	{key: KeyS3AccessKey, kind: KindString, sensitive: true,
		desc: "Access key id for s3:// paths; unset uses the AWS SDK's default credential chain."},
	{key: KeyS3SecretKey, kind: KindString, sensitive: true,
		desc: "Secret access key for s3:// paths; unset uses the AWS SDK's default credential chain."},
	{key: KeyS3PathStyleAccess, kind: KindBool, def: "false",
		desc: "Address buckets by path (http://endpoint/bucket/key) rather than by host name, as most S3-compatible servers need."},
	// Google Cloud Storage (Flink's gs file system, flink-gs-fs-hadoop).
	{key: KeyGSStorageRootURL, kind: KindString, check: httpURL(),
		desc: "Root URL of the Cloud Storage JSON API for gs:// paths, such as an emulator's http://127.0.0.1:4443/; unset uses Google's."},
	{key: KeyGSServiceAccountKeyFile, kind: KindString,
		desc: "Path of a service account JSON key for gs:// paths; unset uses Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud, the metadata server)."},
	// High availability (Flink's HighAvailabilityOptions).
	{key: KeyHAType, kind: KindEnum, def: "none", values: haTypes, unsupported: []string{"zookeeper"},
		deprecated: []string{"high-availability"},
		desc:       "How job managers stay available: none, etcd (leader election and job and checkpoint pointers in etcd) or kubernetes (the same on a Lease and ConfigMaps)."},
	{key: KeyHAEtcdEndpoints, kind: KindString,
		desc: "etcd endpoints (host:port, comma-separated) for high-availability.type etcd (weir only)."},
	{key: KeyHAStorageDir, kind: KindString,
		desc: "Path or URL where high availability keeps submitted jobs too big for etcd."},
	{key: KeyHAClusterID, kind: KindString, def: "default",
		desc: "Name of the cluster in etcd, so that clusters can share one etcd."},
	{key: KeyHAEtcdLeaseTTL, kind: KindDuration, def: "15 s", check: durationAtLeast(time.Second),
		desc: "Lease of the leader's election key: a leader that cannot renew it this long is replaced (weir only)."},
	{key: KeyHAKubernetesLeaseDuration, kind: KindDuration, def: "15 s", check: durationAtLeast(time.Second),
		desc: "With high-availability.type kubernetes: how long a standby waits after the leader's Lease was last renewed before it takes over."},
	{key: KeyHAKubernetesRenewDeadline, kind: KindDuration, def: "15 s", check: durationAtLeast(time.Millisecond),
		desc: "How long the leader keeps trying to renew its Lease before it gives the leadership up; at most the lease duration."},
	{key: KeyHAKubernetesRetryPeriod, kind: KindDuration, def: "5 s", check: durationAtLeast(time.Millisecond),
		desc: "How often the leader renews its Lease and standbys try to take it; below the renew deadline."},

	// Kubernetes (Flink's KubernetesConfigOptions).
	{key: KeyKubernetesClusterID, kind: KindString, check: dnsLabel(40),
		desc: "Name of the cluster's Lease and ConfigMaps with high-availability.type kubernetes; unset: high-availability.cluster-id."},
	{key: KeyKubernetesNamespace, kind: KindString, check: dnsLabel(63),
		desc: "Namespace of the cluster's Lease and ConfigMaps; unset: the pod's, else the kubeconfig context's."},
	{key: KeyKubernetesConfigFile, kind: KindString,
		desc: "kubeconfig file for reaching the Kubernetes API from outside a pod; unset: the pod's service account."},

	// Security (Flink's SecurityOptions).
	{key: KeySSLInternalEnabled, kind: KindBool, def: "false",
		check: notImplemented("TLS is not implemented yet; authenticate the cluster with " + KeyClusterAuthToken),
		desc:  "TLS on the job manager's port and the data plane; not implemented yet, so only false is accepted."},
	{key: KeySSLRESTEnabled, kind: KindBool, def: "false",
		check: notImplemented("TLS is not implemented yet; authenticate the REST API with " + KeyRESTAuthToken + " and keep it on loopback or behind a TLS proxy"),
		desc:  "TLS on the REST API; not implemented yet, so only false is accepted."},
}

// registry indexes optionTable. It is built once at package initialisation
// and only read afterwards.
var registry = newRegistry(optionTable)

type optionRegistry struct {
	byKey map[string]*option
	// byAlias maps each deprecated key to the option it sets.
	byAlias map[string]*option
	sorted  []*option
}

// newRegistry indexes table and checks it for consistency; a malformed table
// is a programming error and panics.
func newRegistry(table []option) *optionRegistry {
	r := &optionRegistry{
		byKey:   make(map[string]*option, len(table)),
		byAlias: make(map[string]*option),
	}
	for i := range table {
		o := &table[i]
		if _, dup := r.byKey[o.key]; dup {
			panic("config: option " + o.key + " registered twice")
		}
		r.byKey[o.key] = o
		r.sorted = append(r.sorted, o)
	}
	for _, o := range r.sorted {
		for _, a := range o.deprecated {
			if _, dup := r.byKey[a]; dup {
				panic("config: deprecated key " + a + " is also a current key")
			}
			if _, dup := r.byAlias[a]; dup {
				panic("config: deprecated key " + a + " registered twice")
			}
			r.byAlias[a] = o
		}
		if (o.kind == KindEnum) != (len(o.values) > 0) {
			panic("config: option " + o.key + ": enumeration values must be given exactly for enums")
		}
		if o.def != "" {
			canon, _, err := o.parse(o.def)
			if err != nil || canon != o.def {
				panic(fmt.Sprintf("config: option %s: default %q is not canonical (%q, %v)", o.key, o.def, canon, err))
			}
		}
	}
	slices.SortFunc(r.sorted, func(a, b *option) int { return strings.Compare(a.key, b.key) })
	return r
}

// lookup finds the option for key, which may be a deprecated key; alias
// reports whether it was one.
func (r *optionRegistry) lookup(key string) (o *option, alias bool, ok bool) {
	if o, ok := r.byKey[key]; ok {
		return o, false, true
	}
	if o, ok := r.byAlias[key]; ok {
		return o, true, true
	}
	return nil, false, false
}

// mustLookup is lookup for keys given by Go code, where an unknown key is a
// programming error.
func (r *optionRegistry) mustLookup(key string) *option {
	o, _, ok := r.lookup(key)
	if !ok {
		panic(fmt.Sprintf("config: unknown key %q", key))
	}
	return o
}
