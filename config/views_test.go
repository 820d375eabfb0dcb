package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// with returns a configuration with the given key/value pairs set.
func with(t *testing.T, kv ...string) *Configuration {
	t.Helper()
	c := New()
	for i := 0; i+1 < len(kv); i += 2 {
		if err := c.Set(kv[i], kv[i+1]); err != nil {
			t.Fatalf("Set(%s, %s): %v", kv[i], kv[i+1], err)
		}
	}
	return c
}

func TestRestartStrategyDefault(t *testing.T) {
	tests := []struct {
		name string
		kv   []string
		want RestartStrategy
	}{
		{"checkpointing disabled", nil, RestartNone},
		{"checkpointing enabled", []string{KeyCheckpointingInterval, "10 s"}, RestartExponentialDelay},
		{"explicit with checkpointing", []string{KeyCheckpointingInterval, "10 s", KeyRestartStrategy, "fixed-delay"}, RestartFixedDelay},
		{"explicit none with checkpointing", []string{KeyCheckpointingInterval, "10 s", KeyRestartStrategy, "off"}, RestartNone},
		{"explicit without checkpointing", []string{KeyRestartStrategy, "failurerate"}, RestartFailureRate},
		{"deprecated key", []string{"restart-strategy", "exponentialdelay"}, RestartExponentialDelay},
	}
	for _, tt := range tests {
		r, err := with(t, tt.kv...).Restart()
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if r.Strategy != tt.want {
			t.Errorf("%s: strategy %q, want %q", tt.name, r.Strategy, tt.want)
		}
	}
}

func TestRestartSettings(t *testing.T) {
	r, err := with(t,
		KeyRestartStrategy, "fixed-delay",
		KeyFixedDelayAttempts, "3",
		KeyFixedDelayDelay, "10 s",
		KeyExponentialDelayInitialBackoff, "2 s",
		KeyExponentialDelayMaxBackoff, "2 s",
		KeyExponentialDelayBackoffMultiplier, "1",
		KeyExponentialDelayAttemptsBeforeReset, "10",
		KeyFailureRateMaxFailures, "5",
		KeyFailureRateInterval, "5 min",
		KeyFailureRateDelay, "0",
		KeyFailoverStrategy, "full",
	).Restart()
	if err != nil {
		t.Fatal(err)
	}
	if r.FixedDelay != (FixedDelay{Attempts: 3, Delay: 10 * time.Second}) ||
		r.ExponentialDelay.InitialBackoff != 2*time.Second || r.ExponentialDelay.MaxBackoff != 2*time.Second ||
		r.ExponentialDelay.BackoffMultiplier != 1 || r.ExponentialDelay.AttemptsBeforeResetBackoff != 10 ||
		r.FailureRate != (FailureRate{MaxFailuresPerInterval: 5, Interval: 5 * time.Minute, Delay: 0}) ||
		r.Failover != FailoverFull {
		t.Errorf("Restart() = %+v", r)
	}
}

func TestDefaultMaxParallelism(t *testing.T) {
	tests := []struct{ p, want int }{
		{-5, 128},
		{0, 128},
		{1, 128},
		{2, 128},
		{85, 128},  // 85+42 = 127 → 128
		{86, 256},  // 86+43 = 129 → 256
		{100, 256}, // 150 → 256
		{171, 256}, // 171+85 = 256, already a power of two
		{172, 512}, // 172+86 = 258 → 512
		{1000, 2048},
		{1365, 2048}, // 1365+682 = 2047 → 2048
		{1366, 4096}, // 1366+683 = 2049 → 4096
		{21845, 32768},
		{21846, 32768}, // 32769 → 65536, capped
		{32768, 32768},
		{100000, 32768},
	}
	for _, tt := range tests {
		if got := DefaultMaxParallelism(tt.p); got != tt.want {
			t.Errorf("DefaultMaxParallelism(%d) = %d, want %d", tt.p, got, tt.want)
		}
	}
}

func TestMaxParallelismFor(t *testing.T) {
	auto, err := with(t, KeyParallelism, "200").Pipeline()
	if err != nil {
		t.Fatal(err)
	}
	if auto.MaxParallelism != -1 {
		t.Errorf("MaxParallelism = %d, want -1", auto.MaxParallelism)
	}
	for p, want := range map[int]int{1: 128, 200: 512, 1000: 2048} {
		if got := auto.MaxParallelismFor(p); got != want {
			t.Errorf("auto MaxParallelismFor(%d) = %d, want %d", p, got, want)
		}
	}
	fixed, err := with(t, KeyMaxParallelism, "720").Pipeline()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{1, 200, 720} {
		if got := fixed.MaxParallelismFor(p); got != 720 {
			t.Errorf("fixed MaxParallelismFor(%d) = %d, want 720", p, got)
		}
	}
}

func TestCheckpointingView(t *testing.T) {
	tests := []struct {
		name  string
		kv    []string
		check func(cp Checkpointing) bool
	}{
		{"interval enables", []string{KeyCheckpointingInterval, "30 s"},
			func(cp Checkpointing) bool { return cp.Enabled && cp.Interval == 30*time.Second }},
		{"dir implies filesystem", []string{KeyCheckpointingDir, "file:///tmp/chk"},
			func(cp Checkpointing) bool { return cp.Storage == StorageFilesystem && cp.Dir == "file:///tmp/chk" }},
		{"dir through deprecated key implies filesystem", []string{"state.checkpoints.dir", "/chk"},
			func(cp Checkpointing) bool { return cp.Storage == StorageFilesystem }},
		{"explicit jobmanager without dir", []string{KeyCheckpointingStorage, "jobmanager"},
			func(cp Checkpointing) bool { return cp.Storage == StorageJobManager && cp.Dir == "" }},
		{"min-pause limits concurrency", []string{KeyCheckpointingMaxConcurrent, "4", KeyCheckpointingMinPause, "1 s"},
			func(cp Checkpointing) bool { return cp.MaxConcurrent == 1 && cp.MinPause == time.Second }},
		{"concurrency without min-pause", []string{KeyCheckpointingMaxConcurrent, "4"},
			func(cp Checkpointing) bool { return cp.MaxConcurrent == 4 }},
		{"everything else", []string{
			KeyCheckpointingTimeout, "1 h", KeyCheckpointingTolerableFailures, "3",
			KeyCheckpointingNumRetained, "5", KeyCheckpointingExternalizedRetention, "retain_on_cancellation",
			KeyCheckpointingIncremental, "true",
			KeyCheckpointingCreateSubdir, "true", KeyStateRecoveryPath, "/sp/savepoint-1"},
			func(cp Checkpointing) bool {
				return cp.Timeout == time.Hour && cp.TolerableFailures == 3 && cp.NumRetained == 5 &&
					cp.ExternalizedRetention == RetainOnCancellation && cp.Incremental &&
					cp.CreateSubdir && cp.RecoveryPath == "/sp/savepoint-1"
			}},
	}
	for _, tt := range tests {
		cp, err := with(t, tt.kv...).Checkpointing()
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !tt.check(cp) {
			t.Errorf("%s: %+v", tt.name, cp)
		}
	}
}

// TestConflicts checks every cross-key rule: the view and Validate both
// return a *ConflictError naming every key involved.
func TestConflicts(t *testing.T) {
	tests := []struct {
		name      string
		kv        []string
		view      func(c *Configuration) error
		wantKeys  []string
		wantInMsg []string
	}{
		{
			name:      "jobmanager storage with dir",
			kv:        []string{KeyCheckpointingStorage, "jobmanager", KeyCheckpointingDir, "/chk"},
			view:      func(c *Configuration) error { _, err := c.Checkpointing(); return err },
			wantKeys:  []string{KeyCheckpointingStorage, KeyCheckpointingDir},
			wantInMsg: []string{"execution.checkpointing.storage=jobmanager keeps checkpoints in memory"},
		},
		{
			name:      "filesystem storage without dir",
			kv:        []string{KeyCheckpointingStorage, "filesystem"},
			view:      func(c *Configuration) error { _, err := c.Checkpointing(); return err },
			wantKeys:  []string{KeyCheckpointingStorage, KeyCheckpointingDir},
			wantInMsg: []string{"execution.checkpointing.storage=filesystem requires execution.checkpointing.dir"},
		},
		{
			name: "initial backoff above max",
			kv: []string{KeyCheckpointingInterval, "10 s",
				KeyExponentialDelayInitialBackoff, "2 min", KeyExponentialDelayMaxBackoff, "1 min"},
			view:      func(c *Configuration) error { _, err := c.Restart(); return err },
			wantKeys:  []string{KeyExponentialDelayInitialBackoff, KeyExponentialDelayMaxBackoff},
			wantInMsg: []string{"(2 min) must not exceed", "(1 min)"},
		},
		{
			name:      "parallelism above max parallelism",
			kv:        []string{KeyParallelism, "200", KeyMaxParallelism, "128"},
			view:      func(c *Configuration) error { _, err := c.Pipeline(); return err },
			wantKeys:  []string{KeyParallelism, KeyMaxParallelism},
			wantInMsg: []string{"parallelism.default (200) must not exceed pipeline.max-parallelism (128)"},
		},
		{
			name:      "from-local with local backup off",
			kv:        []string{KeyCheckpointingDir, "/chk", KeyStateRecoveryFromLocal, "true", KeyCheckpointingLocalBackup, "false"},
			view:      func(c *Configuration) error { _, err := c.Checkpointing(); return err },
			wantKeys:  []string{KeyStateRecoveryFromLocal, KeyCheckpointingLocalBackup},
			wantInMsg: []string{"keeps none"},
		},
		{
			name:      "deprecated local recovery without a checkpoint dir",
			kv:        []string{"state.backend.local-recovery", "true"},
			view:      func(c *Configuration) error { _, err := c.Checkpointing(); return err },
			wantKeys:  []string{KeyCheckpointingLocalBackup, KeyCheckpointingDir},
			wantInMsg: []string{"no files to copy"},
		},
		{
			name:      "local backup dirs without local backup",
			kv:        []string{KeyCheckpointingDir, "/chk", "taskmanager.state.local.root-dirs", "/local"},
			view:      func(c *Configuration) error { _, err := c.Checkpointing(); return err },
			wantKeys:  []string{KeyCheckpointingLocalBackupDirs, KeyCheckpointingLocalBackup},
			wantInMsg: []string{"no local copies are kept"},
		},
		{
			name:      "pebble memory with fixed-per-slot",
			kv:        []string{KeyPebbleMemory, "32 mb", KeyRocksDBMemoryFixedPerSlot, "256 mb"},
			view:      func(c *Configuration) error { _, err := c.Pipeline(); return err },
			wantKeys:  []string{KeyPebbleMemory, KeyRocksDBMemoryFixedPerSlot},
			wantInMsg: []string{"set one of them"},
		},
		{
			name:      "managed size under fixed-per-slot",
			kv:        []string{KeyManagedMemorySize, "1 gb", KeyRocksDBMemoryFixedPerSlot, "256 mb"},
			view:      func(c *Configuration) error { _, err := c.Pipeline(); return err },
			wantKeys:  []string{KeyManagedMemorySize, KeyRocksDBMemoryFixedPerSlot},
			wantInMsg: []string{"would have no effect"},
		},
		{
			name:      "managed size with managed false",
			kv:        []string{KeyManagedMemorySize, "1 gb", KeyRocksDBMemoryManaged, "false"},
			view:      func(c *Configuration) error { _, err := c.Pipeline(); return err },
			wantKeys:  []string{KeyManagedMemorySize, KeyRocksDBMemoryManaged},
			wantInMsg: []string{"would have no effect"},
		},
		{
			name:      "managed size with pebble memory",
			kv:        []string{KeyManagedMemorySize, "1 gb", KeyPebbleMemory, "32 mb"},
			view:      func(c *Configuration) error { _, err := c.Pipeline(); return err },
			wantKeys:  []string{KeyPebbleMemory, KeyManagedMemorySize},
			wantInMsg: []string{"set one of them"},
		},
		{
			name:      "managed true without a size",
			kv:        []string{KeyRocksDBMemoryManaged, "true"},
			view:      func(c *Configuration) error { _, err := c.Pipeline(); return err },
			wantKeys:  []string{KeyRocksDBMemoryManaged, KeyManagedMemorySize},
			wantInMsg: []string{"no managed memory", KeyRocksDBMemoryFixedPerSlot, KeyPebbleMemory},
		},
		{
			name:     "unaligned with two concurrent checkpoints",
			kv:       []string{KeyCheckpointingUnaligned, "true", KeyCheckpointingMaxConcurrent, "2"},
			view:     func(c *Configuration) error { _, err := c.Checkpointing(); return err },
			wantKeys: []string{KeyCheckpointingUnaligned, KeyCheckpointingMaxConcurrent},
			wantInMsg: []string{"one unaligned checkpoint at a time", "a newer barrier would subsume the older checkpoint",
				"set execution.checkpointing.max-concurrent-checkpoints to 1 (it is 2)"},
		},
		{
			name:      "heartbeat timeout below interval",
			kv:        []string{KeyHeartbeatInterval, "10 s", KeyHeartbeatTimeout, "5 s"},
			view:      func(c *Configuration) error { _, err := c.Cluster(); return err },
			wantKeys:  []string{KeyHeartbeatTimeout, KeyHeartbeatInterval},
			wantInMsg: []string{"heartbeat.timeout (5 s) must not be below heartbeat.interval (10 s)"},
		},
	}
	for _, tt := range tests {
		c := with(t, tt.kv...)
		for which, err := range map[string]error{"view": tt.view(c), "Validate": c.Validate()} {
			var ce *ConflictError
			if !errors.As(err, &ce) {
				t.Errorf("%s: %s returned %v, want *ConflictError", tt.name, which, err)
				continue
			}
			if !slices.Equal(ce.Keys, tt.wantKeys) {
				t.Errorf("%s: %s: Keys %q, want %q", tt.name, which, ce.Keys, tt.wantKeys)
			}
			for _, w := range append(slices.Clone(tt.wantKeys), tt.wantInMsg...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %s: error %q does not mention %q", tt.name, which, err, w)
				}
			}
		}
	}
}

// TestLocalRecoveryKeys checks Flink's resolution of the local recovery
// keys: local-backup.enabled follows from-local (and so the deprecated
// state.backend.local-recovery) unless it is set itself.
func TestLocalRecoveryKeys(t *testing.T) {
	tests := []struct {
		kv                    []string
		wantBackup, wantLocal bool
		wantDirs              []string
	}{
		{nil, false, false, nil},
		{[]string{KeyStateRecoveryFromLocal, "true"}, true, true, nil},
		{[]string{"state.backend.local-recovery", "true"}, true, true, nil},
		{[]string{KeyCheckpointingLocalBackup, "true"}, true, false, nil},
		{[]string{KeyCheckpointingLocalBackup, "true", KeyStateRecoveryFromLocal, "true",
			"taskmanager.state.local.root-dirs", "/a, /b,,"}, true, true, []string{"/a", "/b"}},
		{[]string{KeyCheckpointingLocalBackup, "false", KeyStateRecoveryFromLocal, "false"}, false, false, nil},
	}
	for _, tt := range tests {
		c := with(t, append([]string{KeyCheckpointingDir, "/chk"}, tt.kv...)...)
		cp, err := c.Checkpointing()
		if err != nil {
			t.Errorf("%q: %v", tt.kv, err)
			continue
		}
		if cp.LocalBackup != tt.wantBackup || cp.FromLocal != tt.wantLocal || !slices.Equal(cp.LocalBackupDirs, tt.wantDirs) {
			t.Errorf("%q: LocalBackup %v FromLocal %v dirs %q, want %v %v %q", tt.kv, cp.LocalBackup, cp.FromLocal, cp.LocalBackupDirs, tt.wantBackup, tt.wantLocal, tt.wantDirs)
		}
	}
}

func TestConflictsNotRaised(t *testing.T) {
	tests := []struct {
		name string
		kv   []string
	}{
		// Flink checks the exponential-delay bounds only when that strategy
		// is the one in use.
		{"backoff bounds with another strategy", []string{KeyRestartStrategy, "fixed-delay",
			KeyExponentialDelayInitialBackoff, "2 min", KeyExponentialDelayMaxBackoff, "1 min"}},
		{"backoff bounds without checkpointing", []string{
			KeyExponentialDelayInitialBackoff, "2 min", KeyExponentialDelayMaxBackoff, "1 min"}},
		{"parallelism equal to max parallelism", []string{KeyParallelism, "128", KeyMaxParallelism, "128"}},
		{"large parallelism with derived max parallelism", []string{KeyParallelism, "32768"}},
		{"heartbeat timeout equal to interval", []string{KeyHeartbeatInterval, "10 s", KeyHeartbeatTimeout, "10 s"}},
		{"at-least-once without unaligned", []string{KeyCheckpointingMode, "AT_LEAST_ONCE", KeyCheckpointingMaxConcurrent, "3"}},
	}
	for _, tt := range tests {
		if err := with(t, tt.kv...).Validate(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestValidateReportsEveryConflict(t *testing.T) {
	c := with(t,
		KeyCheckpointingStorage, "filesystem",
		KeyParallelism, "10", KeyMaxParallelism, "5",
		KeyHeartbeatTimeout, "1 s",
	)
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, k := range []string{KeyCheckpointingStorage, KeyMaxParallelism, KeyHeartbeatTimeout} {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("Validate() error %q does not mention %s", err, k)
		}
	}
}

// TestPebbleMemoryPrecedence checks which key bounds the pebble stores'
// memory, and that the ratios weir does not implement are refused naming
// the key.
func TestPebbleMemoryPrecedence(t *testing.T) {
	for _, tt := range []struct {
		kv                      []string
		perSubtask, slot, total int64
	}{
		{nil, 64 << 20, 0, 0},
		{[]string{KeyRocksDBMemoryManaged, "false"}, 64 << 20, 0, 0},
		{[]string{KeyPebbleMemory, "32 mb"}, 32 << 20, 0, 0},
		{[]string{KeyRocksDBMemoryFixedPerSlot, "256 mb"}, 64 << 20, 256 << 20, 0},
		{[]string{KeyRocksDBMemoryFixedPerSlot, "256 mb", KeyRocksDBMemoryManaged, "true"}, 64 << 20, 256 << 20, 0},
		{[]string{KeyManagedMemorySize, "1 gb"}, 64 << 20, 0, 1 << 30},
		{[]string{KeyManagedMemorySize, "1 gb", KeyRocksDBMemoryManaged, "true"}, 64 << 20, 0, 1 << 30},
		// The process size alone: managed memory is 0.4 of it.
		{[]string{KeyTaskManagerProcessSize, "1000 mb"}, 64 << 20, 0, 400 << 20},
		{[]string{KeyTaskManagerProcessSize, "1000 mb", KeyManagedMemoryFraction, "0.25"}, 64 << 20, 0, 250 << 20},
		{[]string{KeyTaskManagerProcessSize, "1000 mb", KeyRocksDBMemoryManaged, "true"}, 64 << 20, 0, 400 << 20},
		// A managed size or fixed-per-slot wins over the fraction.
		{[]string{KeyTaskManagerProcessSize, "1 gb", KeyManagedMemorySize, "256 mb"}, 64 << 20, 0, 256 << 20},
		{[]string{KeyTaskManagerProcessSize, "1 gb", KeyRocksDBMemoryFixedPerSlot, "128 mb"}, 64 << 20, 128 << 20, 0},
		// Per-subtask memory, or managed memory off, keeps it per subtask.
		{[]string{KeyTaskManagerProcessSize, "1 gb", KeyPebbleMemory, "32 mb"}, 32 << 20, 0, 0},
		{[]string{KeyTaskManagerProcessSize, "1 gb", KeyRocksDBMemoryManaged, "false"}, 64 << 20, 0, 0},
	} {
		p, err := with(t, tt.kv...).Pipeline()
		if err != nil {
			t.Errorf("%q: %v", tt.kv, err)
			continue
		}
		if p.PebbleMemory != tt.perSubtask || p.PebbleSlotMemory != tt.slot || p.ManagedMemory != tt.total {
			t.Errorf("%q: per subtask %d, per slot %d, managed %d; want %d, %d, %d", tt.kv, p.PebbleMemory, p.PebbleSlotMemory, p.ManagedMemory, tt.perSubtask, tt.slot, tt.total)
		}
	}
	for _, key := range []string{KeyRocksDBWriteBufferRatio, KeyRocksDBHighPrioPoolRatio} {
		c := New()
		err := c.Set(key, "0.5")
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "not implemented") && !strings.Contains(err.Error(), "no total") {
			t.Errorf("setting %s: %v, want a refusal naming the key and why", key, err)
		}
	}
	if err := New().Set(KeyRocksDBMemoryFixedPerSlot, "1 mb"); err == nil || !strings.Contains(err.Error(), KeyRocksDBMemoryFixedPerSlot) {
		t.Errorf("fixed-per-slot of 1 mb: %v", err)
	}
}

// TestProcessSize checks taskmanager.memory.process.size and
// jobmanager.memory.process.size: parsed as Flink's memory sizes into the
// cluster view, invalid values refused naming the key and the syntax, and
// the managed fraction refused where it would have no effect.
func TestProcessSize(t *testing.T) {
	cl, err := with(t, KeyTaskManagerProcessSize, "1536m", KeyJobManagerProcessSize, "1 gb").Cluster()
	if err != nil {
		t.Fatal(err)
	}
	if cl.TaskManagerProcessMemory != 1536<<20 || cl.JobManagerProcessMemory != 1<<30 {
		t.Errorf("process sizes %d and %d, want %d and %d", cl.TaskManagerProcessMemory, cl.JobManagerProcessMemory, 1536<<20, 1<<30)
	}
	if cl, _ := New().Cluster(); cl.TaskManagerProcessMemory != 0 || cl.JobManagerProcessMemory != 0 {
		t.Errorf("unset process sizes are %d and %d, want 0", cl.TaskManagerProcessMemory, cl.JobManagerProcessMemory)
	}
	for _, key := range []string{KeyTaskManagerProcessSize, KeyJobManagerProcessSize} {
		for _, v := range []string{"1.5 gb", "lots", "-1 gb", "1 gib", "16 mb"} {
			err := New().Set(key, v)
			var iv *InvalidValueError
			if !errors.As(err, &iv) || !strings.Contains(err.Error(), key) {
				t.Errorf("%s=%q: %v, want an InvalidValueError naming the key", key, v, err)
				continue
			}
			if v != "16 mb" && !strings.Contains(err.Error(), "whole number") {
				t.Errorf("%s=%q: %v, want the syntax of a memory size", key, v, err)
			}
		}
	}
	for _, v := range []string{"0", "1", "1.5", "-0.1"} {
		if err := New().Set(KeyManagedMemoryFraction, v); err == nil || !strings.Contains(err.Error(), KeyManagedMemoryFraction) {
			t.Errorf("%s=%s: %v, want a refusal naming the key", KeyManagedMemoryFraction, v, err)
		}
	}
	for _, tt := range []struct {
		kv   []string
		want []string // keys the conflict names
	}{
		{[]string{KeyManagedMemoryFraction, "0.4"}, []string{KeyManagedMemoryFraction, KeyTaskManagerProcessSize}},
		{[]string{KeyTaskManagerProcessSize, "1 gb", KeyManagedMemorySize, "256 mb", KeyManagedMemoryFraction, "0.3"}, []string{KeyManagedMemoryFraction, KeyManagedMemorySize}},
		{[]string{KeyTaskManagerProcessSize, "1 gb", KeyRocksDBMemoryFixedPerSlot, "256 mb", KeyManagedMemoryFraction, "0.3"}, []string{KeyManagedMemoryFraction, KeyRocksDBMemoryFixedPerSlot}},
		{[]string{KeyTaskManagerProcessSize, "1 gb", KeyRocksDBMemoryManaged, "false", KeyManagedMemoryFraction, "0.3"}, []string{KeyManagedMemoryFraction, KeyRocksDBMemoryManaged}},
		{[]string{KeyTaskManagerProcessSize, "1 gb", KeyPebbleMemory, "32 mb", KeyManagedMemoryFraction, "0.3"}, []string{KeyPebbleMemory, KeyManagedMemoryFraction}},
		{[]string{KeyTaskManagerProcessSize, "1 gb", KeyPebbleMemory, "32 mb", KeyRocksDBMemoryManaged, "true"}, []string{KeyPebbleMemory, KeyRocksDBMemoryManaged}},
		{[]string{KeyTaskManagerProcessSize, "1 gb", KeyManagedMemorySize, "1 gb"}, []string{KeyManagedMemorySize, KeyTaskManagerProcessSize}},
		{[]string{KeyRocksDBMemoryManaged, "true"}, []string{KeyRocksDBMemoryManaged, KeyTaskManagerProcessSize}},
	} {
		_, err := with(t, tt.kv...).Pipeline()
		var ce *ConflictError
		if !errors.As(err, &ce) {
			t.Errorf("%q: %v, want a ConflictError", tt.kv, err)
			continue
		}
		for _, k := range tt.want {
			if !strings.Contains(err.Error(), k) {
				t.Errorf("%q: %v, want it to name %s", tt.kv, err, k)
			}
		}
	}
}
