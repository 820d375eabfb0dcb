package config

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDefaults checks the effective value of every registered option in an
// empty configuration against Flink's defaults (and weir's for its own keys).
func TestDefaults(t *testing.T) {
	want := map[string]string{
		KeyCheckpointingInterval:              "",
		KeyCheckpointingMode:                  "EXACTLY_ONCE",
		KeyCheckpointingTimeout:               "10 min",
		KeyCheckpointingMinPause:              "0 ms",
		KeyCheckpointingMaxConcurrent:         "1",
		KeyCheckpointingTolerableFailures:     "0",
		KeyCheckpointingDir:                   "",
		KeyCheckpointingStorage:               "",
		KeyCheckpointingNumRetained:           "1",
		KeyCheckpointingExternalizedRetention: "NO_EXTERNALIZED_CHECKPOINTS",
		KeyCheckpointingIncremental:           "false",
		KeyCheckpointingUnaligned:             "false",
		KeyCheckpointingAlignedTimeout:        "0 ms",
		KeyCheckpointingSavepointDir:          "",
		KeyCheckpointingCreateSubdir:          "true",
		KeyStateRecoveryPath:                  "",
		KeyStateRecoveryAllowDuplicateOutput:  "false",
		KeyStateRecoveryIgnoreUnclaimedState:  "false",
		KeyCheckpointingInlineThreshold:       "20 kb",
		KeyCheckpointingLocalBackup:           "",
		KeyCheckpointingLocalBackupDirs:       "",
		KeyStateRecoveryFromLocal:             "false",

		KeyRestartStrategy:                       "",
		KeyFixedDelayAttempts:                    "1",
		KeyFixedDelayDelay:                       "1 s",
		KeyExponentialDelayInitialBackoff:        "1 s",
		KeyExponentialDelayMaxBackoff:            "1 min",
		KeyExponentialDelayBackoffMultiplier:     "1.5",
		KeyExponentialDelayResetBackoffThreshold: "1 h",
		KeyExponentialDelayJitterFactor:          "0.1",
		KeyExponentialDelayAttemptsBeforeReset:   "2147483647",
		KeyFailureRateMaxFailures:                "1",
		KeyFailureRateInterval:                   "1 min",
		KeyFailureRateDelay:                      "1 s",
		KeyFailoverStrategy:                      "region",

		KeyParallelism:            "1",
		KeyMaxParallelism:         "-1",
		KeyAutoWatermarkInterval:  "200 ms",
		KeyBufferTimeout:          "100 ms",
		KeyBufferDebloatEnabled:   "false",
		KeyBufferDebloatTarget:    "1 s",
		KeyBufferDebloatPeriod:    "200 ms",
		KeyBufferDebloatSamples:   "20",
		KeyBufferDebloatThreshold: "25",
		KeyMinSegmentSize:         "",
		KeyStateBackend:           "hashmap",
		KeyPebbleLocalDir:         "",
		KeyPebbleMemory:           "64 mb",
		KeyTimerService:           "ROCKSDB",
		KeyStateRecoveryClaimMode: "NO_CLAIM",
		KeySavepointFormat:        "CANONICAL",

		KeyRocksDBMemoryFixedPerSlot: "",
		KeyRocksDBMemoryManaged:      "true",
		KeyRocksDBWriteBufferRatio:   "",
		KeyRocksDBHighPrioPoolRatio:  "",
		KeyManagedMemorySize:         "",
		KeyManagedMemoryFraction:     "0.4",
		KeyTaskManagerProcessSize:    "",
		KeyJobManagerProcessSize:     "",

		KeyHeartbeatInterval:      "10 s",
		KeyHeartbeatTimeout:       "50 s",
		KeyTaskSlots:              "1",
		KeyTaskManagerHost:        "",
		KeyRESTAddress:            "",
		KeyRESTBindAddress:        "localhost",
		KeyRESTPort:               "8081",
		KeyRESTAuthToken:          "",
		KeyRESTFlinkDashboardDir:  "",
		KeyMetricsPrometheusNames: "weir",
		KeyCheckpointHistory:      "10",
		KeyClusterAuthToken:       "",

		KeySSLInternalEnabled:        "false",
		KeySSLRESTEnabled:            "false",
		KeyHAType:                    "none",
		KeyHAEtcdEndpoints:           "",
		KeyHAStorageDir:              "",
		KeyHAClusterID:               "default",
		KeyHAEtcdLeaseTTL:            "15 s",
		KeyHAKubernetesLeaseDuration: "15 s",
		KeyHAKubernetesRenewDeadline: "15 s",
		KeyHAKubernetesRetryPeriod:   "5 s",
		KeyKubernetesClusterID:       "",
		KeyKubernetesNamespace:       "",
		KeyKubernetesConfigFile:      "",

		KeyS3Endpoint:        "",
		KeyS3AccessKey:       "",
		KeyS3SecretKey:       "",
		KeyS3PathStyleAccess: "false",

		KeyGSStorageRootURL:        "",
		KeyGSServiceAccountKeyFile: "",
	}
	opts := Options()
	if len(opts) != len(want) {
		t.Errorf("registry has %d options, test knows %d", len(opts), len(want))
	}
	c := New()
	for _, o := range opts {
		w, ok := want[o.Key]
		if !ok {
			t.Errorf("option %s has no expected default in this test", o.Key)
			continue
		}
		if got := c.String(o.Key); got != w {
			t.Errorf("default of %s = %q, want %q", o.Key, got, w)
		}
		if o.Default != w || o.HasDefault != (w != "") {
			t.Errorf("Options() lists %s with default %q (has %v), want %q", o.Key, o.Default, o.HasDefault, w)
		}
	}
}

func TestDefaultViews(t *testing.T) {
	c := New()
	cp, err := c.Checkpointing()
	if err != nil {
		t.Fatal(err)
	}
	wantCP := Checkpointing{
		Enabled:               false,
		Interval:              0,
		Mode:                  ExactlyOnce,
		Timeout:               10 * time.Minute,
		MinPause:              0,
		MaxConcurrent:         1,
		TolerableFailures:     0,
		Storage:               StorageJobManager,
		NumRetained:           1,
		ExternalizedRetention: NoExternalizedCheckpoints,
		CreateSubdir:          true,
		ClaimMode:             NoClaim,
		SavepointFormat:       SavepointCanonical,
		InlineThreshold:       20 << 10,
	}
	if !reflect.DeepEqual(cp, wantCP) {
		t.Errorf("default Checkpointing() =\n %+v\nwant\n %+v", cp, wantCP)
	}

	r, err := c.Restart()
	if err != nil {
		t.Fatal(err)
	}
	wantR := Restart{
		Strategy:   RestartNone,
		Failover:   FailoverRegion,
		FixedDelay: FixedDelay{Attempts: 1, Delay: time.Second},
		ExponentialDelay: ExponentialDelay{
			InitialBackoff:             time.Second,
			MaxBackoff:                 time.Minute,
			BackoffMultiplier:          1.5,
			ResetBackoffThreshold:      time.Hour,
			JitterFactor:               0.1,
			AttemptsBeforeResetBackoff: math.MaxInt32,
		},
		FailureRate: FailureRate{MaxFailuresPerInterval: 1, Interval: time.Minute, Delay: time.Second},
	}
	if r != wantR {
		t.Errorf("default Restart() =\n %+v\nwant\n %+v", r, wantR)
	}

	p, err := c.Pipeline()
	if err != nil {
		t.Fatal(err)
	}
	wantP := Pipeline{
		Parallelism:           1,
		MaxParallelism:        -1,
		AutoWatermarkInterval: 200 * time.Millisecond,
		BufferTimeout:         100 * time.Millisecond,
		StateBackend:          BackendHashMap,
		PebbleMemory:          64 << 20,
		TimerService:          TimersInStore,
		RocksDBMemoryManaged:  true,
	}
	if p != wantP {
		t.Errorf("default Pipeline() = %+v, want %+v", p, wantP)
	}

	cl, err := c.Cluster()
	if err != nil {
		t.Fatal(err)
	}
	wantCl := Cluster{
		HeartbeatInterval: 10 * time.Second,
		HeartbeatTimeout:  50 * time.Second,
		TaskSlots:         1,
		RESTBindAddress:   "localhost",
		RESTPort:          8081,
		CheckpointHistory: 10,
	}
	if cl != wantCl {
		t.Errorf("default Cluster() = %+v, want %+v", cl, wantCl)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() on defaults: %v", err)
	}
	// The zero value behaves as New().
	var zero Configuration
	if err := zero.Validate(); err != nil {
		t.Errorf("Validate() on zero Configuration: %v", err)
	}
}

func TestSetCanonicalForm(t *testing.T) {
	tests := []struct {
		key, value, want string
	}{
		{KeyCheckpointingInterval, "10000", "10 s"},
		{KeyCheckpointingInterval, "10s", "10 s"},
		{KeyCheckpointingInterval, "60 seconds", "1 min"},
		{KeyCheckpointingTimeout, " 5 MIN ", "5 min"},
		{KeyCheckpointingMode, "at_least_once", "AT_LEAST_ONCE"},
		{KeyCheckpointingMode, "Exactly_Once", "EXACTLY_ONCE"},
		{KeyCheckpointingExternalizedRetention, "retain_on_cancellation", "RETAIN_ON_CANCELLATION"},
		{KeyCheckpointingStorage, "FileSystem", "filesystem"},
		{KeyCheckpointingIncremental, "TRUE", "true"},
		{KeyCheckpointingCreateSubdir, "TRUE", "true"},
		{KeyCheckpointingMaxConcurrent, "+3", "3"},
		{KeyMaxParallelism, "-1", "-1"},
		{KeyMaxParallelism, "32768", "32768"},
		{KeyExponentialDelayBackoffMultiplier, "2.0", "2"},
		{KeyExponentialDelayJitterFactor, "0", "0"},
		{KeyExponentialDelayJitterFactor, "1", "1"},
		{KeyRestartStrategy, "off", "none"},
		{KeyRestartStrategy, "disable", "none"},
		{KeyRestartStrategy, "NONE", "none"},
		{KeyRestartStrategy, "fixeddelay", "fixed-delay"},
		{KeyRestartStrategy, "Fixed-Delay", "fixed-delay"},
		{KeyRestartStrategy, "exponentialdelay", "exponential-delay"},
		{KeyRestartStrategy, "failurerate", "failure-rate"},
		{KeyFailoverStrategy, "FULL", "full"},
		{KeyStateBackend, "HashMap", "hashmap"},
		{KeyStateBackend, "RocksDB", "rocksdb"},
		{KeyPebbleMemory, "1 gb", "1 gb"},
		{KeyTimerService, "heap", "HEAP"},
		{KeyStateRecoveryClaimMode, "no-claim", "NO_CLAIM"},
		{KeyStateRecoveryClaimMode, "claim", "CLAIM"},
		{KeySavepointFormat, "native", "NATIVE"},
		{KeyCheckpointingDir, "  s3://bucket/chk ", "s3://bucket/chk"},
		{KeyRESTPort, "0", "0"},
	}
	for _, tt := range tests {
		c := New()
		if err := c.Set(tt.key, tt.value); err != nil {
			t.Errorf("Set(%s, %q): %v", tt.key, tt.value, err)
			continue
		}
		if got, ok := c.Get(tt.key); !ok || got != tt.want {
			t.Errorf("Set(%s, %q) stored %q (set %v), want %q", tt.key, tt.value, got, ok, tt.want)
		}
	}
}

// TestSetInvalidValue checks that every kind of bad value is refused with an
// *InvalidValueError whose message names the key, the value and what is
// allowed.
func TestSetInvalidValue(t *testing.T) {
	tests := []struct {
		key, value string
		wantInMsg  []string
	}{
		{KeyCheckpointingMode, "fast", []string{"EXACTLY_ONCE, AT_LEAST_ONCE", "case-insensitive"}},
		{KeyCheckpointingMode, "", []string{"EXACTLY_ONCE, AT_LEAST_ONCE"}},
		{KeyCheckpointingExternalizedRetention, "keep", []string{
			"NO_EXTERNALIZED_CHECKPOINTS, DELETE_ON_CANCELLATION, RETAIN_ON_CANCELLATION"}},
		{KeyCheckpointingStorage, "s3", []string{"jobmanager, filesystem"}},
		{KeyRestartStrategy, "always", []string{
			"none, fixed-delay, exponential-delay, failure-rate",
			"also accepted: off, disable, fixeddelay, exponentialdelay, failurerate"}},
		{KeyFailoverStrategy, "individual", []string{"region, full"}},
		{KeyStateBackend, "memory", []string{"one of hashmap, pebble, rocksdb, forst"}},
		{KeyPebbleMemory, "1 mb", []string{"from 4 mb"}},
		{KeyTimerService, "memory", []string{"ROCKSDB", "HEAP"}},
		{KeyStateRecoveryClaimMode, "LEGACY", []string{KeyStateRecoveryClaimMode, "NO_CLAIM, CLAIM"}},
		{KeySavepointFormat, "SST", []string{KeySavepointFormat, "CANONICAL, NATIVE"}},
		{KeyMetricsPrometheusNames, "prometheus", []string{KeyMetricsPrometheusNames, "one of weir, flink"}},
		{KeyCheckpointingIncremental, "yes", []string{"true or false"}},
		{KeyCheckpointingUnaligned, "maybe", []string{"true or false"}},
		{KeyCheckpointingAlignedTimeout, "-1 s", []string{"at least 0"}},
		{KeyBufferTimeout, "5 ms", []string{"allowed: 100 ms"}},
		{KeyBufferDebloatTarget, "0 ms", []string{"at least 1 ms"}},
		{KeyBufferDebloatSamples, "0", []string{"from 1 to 1000"}},
		{KeyBufferDebloatThreshold, "101", []string{"from 0 to 100"}},
		{KeyMinSegmentSize, "256 b", []string{"not implemented", "64 records"}},
		{KeyAutoWatermarkInterval, "1 s", []string{"after every batch"}},
		{KeyCheckpointingCreateSubdir, "false", []string{"allowed: true"}},
		{KeyCheckpointingIncremental, "1", []string{"true or false"}},
		{KeyCheckpointingInterval, "10 sex", []string{`unknown unit "sex"`, "a duration such as", "a bare number is milliseconds"}},
		{KeyCheckpointingInterval, "1.5 s", []string{"fractions are not supported", "a duration"}},
		{KeyCheckpointingInterval, "5 ms", []string{"at least 10 ms"}},
		{KeyCheckpointingInterval, "0", []string{"at least 10 ms"}},
		{KeyCheckpointingTimeout, "0 s", []string{"at least 1 ms"}},
		{KeyCheckpointingMinPause, "-1 s", []string{"starts with a whole number", "a duration"}},
		{KeyCheckpointingMaxConcurrent, "0", []string{"an integer at least 1"}},
		{KeyCheckpointingMaxConcurrent, "two", []string{"not a number", "an integer at least 1"}},
		{KeyCheckpointingMaxConcurrent, "1.0", []string{"not a number", "an integer"}},
		{KeyCheckpointingTolerableFailures, "-1", []string{"an integer at least 0"}},
		{KeyCheckpointingNumRetained, "0", []string{"an integer at least 1"}},
		{KeyCheckpointingNumRetained, "3000000000", []string{"number out of range", "an integer"}},
		{KeyParallelism, "0", []string{"an integer from 1 to 32768"}},
		{KeyParallelism, "40000", []string{"an integer from 1 to 32768"}},
		{KeyMaxParallelism, "0", []string{"-1 (derive from the parallelism) or from 1 to 32768"}},
		{KeyMaxParallelism, "-2", []string{"-1 (derive from the parallelism) or from 1 to 32768"}},
		{KeyMaxParallelism, "32769", []string{"-1 (derive from the parallelism) or from 1 to 32768"}},
		{KeyFixedDelayAttempts, "-1", []string{"an integer at least 0"}},
		{KeyExponentialDelayBackoffMultiplier, "0.5", []string{"a number at least 1"}},
		{KeyExponentialDelayBackoffMultiplier, "NaN", []string{"not a finite number"}},
		{KeyExponentialDelayJitterFactor, "1.1", []string{"a number from 0 to 1"}},
		{KeyExponentialDelayJitterFactor, "-0.1", []string{"a number from 0 to 1"}},
		{KeyExponentialDelayJitterFactor, "lots", []string{"not a number"}},
		{KeyExponentialDelayAttemptsBeforeReset, "0", []string{"an integer at least 1"}},
		{KeyFailureRateMaxFailures, "0", []string{"an integer at least 1"}},
		{KeyFailureRateInterval, "0 ms", []string{"at least 1 ms"}},
		{KeyTaskSlots, "0", []string{"an integer at least 1"}},
		{KeyRESTPort, "65536", []string{"an integer from 0 to 65535"}},
		{KeyCheckpointHistory, "-1", []string{"an integer at least 0"}},
		{KeyCheckpointingDir, "  ", []string{"empty value", "a non-empty string"}},
		{KeyHeartbeatInterval, "0", []string{"at least 1 ms"}},
	}
	for _, tt := range tests {
		c := New()
		err := c.Set(tt.key, tt.value)
		var ive *InvalidValueError
		if !errors.As(err, &ive) {
			t.Errorf("Set(%s, %q) = %v, want *InvalidValueError", tt.key, tt.value, err)
			continue
		}
		if ive.Key != tt.key || ive.Value != tt.value {
			t.Errorf("Set(%s, %q): error has Key %q, Value %q", tt.key, tt.value, ive.Key, ive.Value)
		}
		msg := err.Error()
		for _, w := range append([]string{tt.key, `"` + tt.value + `"`, "allowed: "}, tt.wantInMsg...) {
			if !strings.Contains(msg, w) {
				t.Errorf("Set(%s, %q) error %q does not mention %q", tt.key, tt.value, msg, w)
			}
		}
		if _, ok := c.Get(tt.key); ok {
			t.Errorf("Set(%s, %q) failed but stored a value", tt.key, tt.value)
		}
	}
}

func TestInvalidValueWrapsCause(t *testing.T) {
	err := New().Set(KeyCheckpointingInterval, "10 sex")
	var ive *InvalidValueError
	if !errors.As(err, &ive) || ive.Err == nil || errors.Unwrap(err) != ive.Err {
		t.Fatalf("want an *InvalidValueError wrapping its cause, got %#v", err)
	}
	// A value that is merely out of range has no further cause.
	err = New().Set(KeyCheckpointingMaxConcurrent, "0")
	if !errors.As(err, &ive) || ive.Err != nil {
		t.Fatalf("want an *InvalidValueError without cause, got %#v", err)
	}
}

func TestSensitiveValueNotEchoed(t *testing.T) {
	err := New().Set(KeyRESTAuthToken, "   ")
	var ive *InvalidValueError
	if !errors.As(err, &ive) {
		t.Fatalf("want *InvalidValueError, got %v", err)
	}
	if ive.Value != "<redacted>" {
		t.Errorf("Value = %q, want <redacted>", ive.Value)
	}
	if !strings.Contains(err.Error(), KeyRESTAuthToken) {
		t.Errorf("error %q does not name the key", err)
	}
}

// TestTLSSwitchesRefuseTrue: Flink's TLS switches are accepted only as
// false, and true is refused with the reason and the option to use
// instead.
func TestTLSSwitchesRefuseTrue(t *testing.T) {
	for key, instead := range map[string]string{KeySSLInternalEnabled: KeyClusterAuthToken, KeySSLRESTEnabled: KeyRESTAuthToken} {
		if err := New().Set(key, "false"); err != nil {
			t.Errorf("%s=false: %v", key, err)
		}
		err := New().Set(key, "TRUE")
		var ive *InvalidValueError
		if !errors.As(err, &ive) || !strings.Contains(err.Error(), "TLS is not implemented yet") ||
			!strings.Contains(err.Error(), instead) || !strings.HasSuffix(err.Error(), "allowed: false") {
			t.Errorf("%s=true: %v, want an *InvalidValueError saying TLS is not implemented and naming %s", key, err, instead)
		}
	}
	cfg, err := ParseDynamic([]string{KeyClusterAuthToken + "=s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if cl, err := cfg.Cluster(); err != nil || cl.AuthToken != "s3cret" {
		t.Errorf("Cluster().AuthToken = %q, %v", cl.AuthToken, err)
	}
}

func TestUnknownKeySuggestions(t *testing.T) {
	tests := []struct {
		key  string
		want []string
	}{
		{"execution.checkpointing.intervall", []string{KeyCheckpointingInterval}},
		{"execution.checkpointing.interva", []string{KeyCheckpointingInterval}},
		{"execution.checkpoint.interval", []string{KeyCheckpointingInterval}},
		{"Execution.Checkpointing.Mode", []string{KeyCheckpointingMode}},
		{"taskmanager.numberoftaskslots", []string{KeyTaskSlots}},
		{"restart-strategy.fixed-delay.attempt", []string{KeyFixedDelayAttempts}},
		{"restart-strategy.tpye", []string{KeyRestartStrategy}},
		// Close to a deprecated key: the current key is suggested.
		{"state.checkpoint.dir", []string{KeyCheckpointingDir}},
		{"state.savepoint.dir", []string{KeyCheckpointingSavepointDir}},
		// Missing prefix or truncated key.
		{"checkpointing.interval", []string{KeyCheckpointingInterval}},
		{"max-concurrent-checkpoints", []string{KeyCheckpointingMaxConcurrent}},
		{"execution.checkpointing.max-concurrent", []string{KeyCheckpointingMaxConcurrent}},
		{"heartbeat", []string{KeyHeartbeatInterval, KeyHeartbeatTimeout}},
		// Nothing close.
		{"kafka.bootstrap.servers", nil},
		{"", nil},
	}
	for _, tt := range tests {
		err := New().Set(tt.key, "1")
		var uke *UnknownKeyError
		if !errors.As(err, &uke) {
			t.Errorf("Set(%q) = %v, want *UnknownKeyError", tt.key, err)
			continue
		}
		if uke.Key != tt.key || !slices.Equal(uke.Suggestions, tt.want) {
			t.Errorf("Set(%q): Key %q, Suggestions %q; want %q", tt.key, uke.Key, uke.Suggestions, tt.want)
		}
		msg := err.Error()
		if !strings.Contains(msg, `"`+tt.key+`"`) {
			t.Errorf("error %q does not name the key %q", msg, tt.key)
		}
		for _, s := range tt.want {
			if !strings.Contains(msg, `"`+s+`"`) || !strings.Contains(msg, "did you mean") {
				t.Errorf("error %q does not suggest %q", msg, s)
			}
		}
	}
}

func TestDeprecatedKeys(t *testing.T) {
	tests := []struct {
		old, current, value, want string
	}{
		{"state.checkpoints.dir", KeyCheckpointingDir, "file:///tmp/chk", "file:///tmp/chk"},
		{"state.backend.fs.checkpointdir", KeyCheckpointingDir, "/data/chk", "/data/chk"},
		{"state.checkpoint-storage", KeyCheckpointingStorage, "filesystem", "filesystem"},
		{"state.checkpoints.num-retained", KeyCheckpointingNumRetained, "3", "3"},
		{"state.backend.incremental", KeyCheckpointingIncremental, "true", "true"},
		{"state.backend.local-recovery", KeyStateRecoveryFromLocal, "true", "true"},
		{"taskmanager.state.local.root-dirs", KeyCheckpointingLocalBackupDirs, "/local", "/local"},
		{"state.checkpoints.create-subdir", KeyCheckpointingCreateSubdir, "true", "true"},
		{"execution.savepoint.path", KeyStateRecoveryPath, "/sp/savepoint-1", "/sp/savepoint-1"},
		{"execution.savepoint-restore-mode", KeyStateRecoveryClaimMode, "claim", "CLAIM"},
		{"execution.checkpointing.unaligned", KeyCheckpointingUnaligned, "false", "false"},
		{"execution.checkpointing.alignment-timeout", KeyCheckpointingAlignedTimeout, "0", "0 ms"},
		{"state.backend", KeyStateBackend, "hashmap", "hashmap"},
		{"restart-strategy", KeyRestartStrategy, "fixeddelay", "fixed-delay"},
		{"execution.buffer-timeout", KeyBufferTimeout, "100ms", "100 ms"},
	}
	for _, tt := range tests {
		c := New()
		if err := c.Set(tt.old, tt.value); err != nil {
			t.Errorf("Set(%s): %v", tt.old, err)
			continue
		}
		if got, _ := c.Get(tt.current); got != tt.want {
			t.Errorf("Set(%s, %q): %s = %q, want %q", tt.old, tt.value, tt.current, got, tt.want)
		}
		if got, _ := c.Get(tt.old); got != tt.want {
			t.Errorf("Get(%s) through the old key = %q, want %q", tt.old, got, tt.want)
		}
		if !slices.Equal(c.Keys(), []string{tt.current}) {
			t.Errorf("Set(%s): Keys() = %q, want [%s]", tt.old, c.Keys(), tt.current)
		}
		want := []Deprecation{{Key: tt.old, Replacement: tt.current}}
		if got := c.Deprecations(); !slices.Equal(got, want) {
			t.Errorf("Set(%s): Deprecations() = %+v, want %+v", tt.old, got, want)
		}
	}
	// Every deprecated key of section 0 of the Flink reference that weir
	// registers is listed by Options.
	listed := map[string]string{}
	for _, o := range Options() {
		for _, d := range o.DeprecatedKeys {
			listed[d] = o.Key
		}
	}
	for _, tt := range tests {
		if listed[tt.old] != tt.current {
			t.Errorf("Options() lists %s as deprecated for %q, want %q", tt.old, listed[tt.old], tt.current)
		}
	}
}

func TestDeprecatedKeyInvalidValueNamesCurrentKey(t *testing.T) {
	err := New().Set("state.checkpoints.num-retained", "0")
	var ive *InvalidValueError
	if !errors.As(err, &ive) || ive.Key != KeyCheckpointingNumRetained {
		t.Fatalf("want *InvalidValueError for %s, got %v", KeyCheckpointingNumRetained, err)
	}
}

// TestCurrentKeyWinsOverDeprecated checks Flink's rule that within one
// source the current key wins whatever the order, and that the shadowed
// deprecated value is reported as ignored.
func TestCurrentKeyWinsOverDeprecated(t *testing.T) {
	for _, order := range [][2][2]string{
		{{KeyCheckpointingDir, "/new"}, {"state.checkpoints.dir", "/old"}},
		{{"state.checkpoints.dir", "/old"}, {KeyCheckpointingDir, "/new"}},
	} {
		c := New()
		for _, kv := range order {
			if err := c.Set(kv[0], kv[1]); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.String(KeyCheckpointingDir); got != "/new" {
			t.Errorf("order %v: dir = %q, want /new", order, got)
		}
		want := []Deprecation{{Key: "state.checkpoints.dir", Replacement: KeyCheckpointingDir, Ignored: true}}
		if got := c.Deprecations(); !slices.Equal(got, want) {
			t.Errorf("order %v: Deprecations() = %+v, want %+v", order, got, want)
		}
	}
	// Between two deprecated names of one key the later wins.
	c := New()
	_ = c.Set("state.checkpoints.dir", "/a")
	_ = c.Set("state.backend.fs.checkpointdir", "/b")
	if got := c.String(KeyCheckpointingDir); got != "/b" {
		t.Errorf("dir = %q, want /b", got)
	}
	want := []Deprecation{
		{Key: "state.checkpoints.dir", Replacement: KeyCheckpointingDir, Ignored: true},
		{Key: "state.backend.fs.checkpointdir", Replacement: KeyCheckpointingDir},
	}
	if got := c.Deprecations(); !slices.Equal(got, want) {
		t.Errorf("Deprecations() = %+v, want %+v", got, want)
	}
}

func TestDeprecationLogging(t *testing.T) {
	d := Deprecation{Key: "state.backend", Replacement: KeyStateBackend}
	if got, want := d.String(), "configuration key state.backend is deprecated; use state.backend.type"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	d.Ignored = true
	if !strings.Contains(d.String(), "ignored because state.backend.type is also set") {
		t.Errorf("String() = %q, want it to say the value was ignored", d.String())
	}
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	logger.Warn("deprecated configuration key", "deprecation", d)
	want := `level=WARN msg="deprecated configuration key" deprecation.key=state.backend deprecation.replacement=state.backend.type deprecation.ignored=true` + "\n"
	if buf.String() != want {
		t.Errorf("slog output\n %q\nwant\n %q", buf.String(), want)
	}
}

func TestTypedSetters(t *testing.T) {
	c := New()
	if err := c.SetDuration(KeyCheckpointingInterval, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.SetInt(KeyParallelism, 4); err != nil {
		t.Fatal(err)
	}
	if err := c.SetFloat(KeyExponentialDelayJitterFactor, 0.25); err != nil {
		t.Fatal(err)
	}
	if err := c.SetBool(KeyCheckpointingIncremental, true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetDuration("state.checkpoints.dir", time.Second); err == nil {
		t.Error("SetDuration on a string option succeeded")
	}
	if got := c.String(KeyCheckpointingInterval); got != "10 s" {
		t.Errorf("interval = %q", got)
	}
	if c.Duration(KeyCheckpointingInterval) != 10*time.Second || c.Int(KeyParallelism) != 4 ||
		c.Float(KeyExponentialDelayJitterFactor) != 0.25 || !c.Bool(KeyCheckpointingIncremental) {
		t.Errorf("typed getters disagree with typed setters: %v %v %v %v",
			c.Duration(KeyCheckpointingInterval), c.Int(KeyParallelism),
			c.Float(KeyExponentialDelayJitterFactor), c.Bool(KeyCheckpointingIncremental))
	}
	// Sub-millisecond durations survive the round trip through text.
	if err := c.SetDuration(KeyHeartbeatInterval, 1500*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if got := c.Duration(KeyHeartbeatInterval); got != 1500*time.Microsecond {
		t.Errorf("heartbeat interval = %v", got)
	}
}

func TestTypedSetterErrors(t *testing.T) {
	c := New()
	tests := []struct {
		name string
		err  error
		want any
		msg  []string
	}{
		{"SetInt on duration", c.SetInt(KeyCheckpointingInterval, 5000), &KindError{},
			[]string{KeyCheckpointingInterval, "duration option, not int"}},
		{"SetDuration on int", c.SetDuration(KeyParallelism, time.Second), &KindError{},
			[]string{KeyParallelism, "int option, not duration"}},
		{"SetBool on enum", c.SetBool(KeyCheckpointingMode, true), &KindError{},
			[]string{KeyCheckpointingMode, "enum option, not bool"}},
		{"SetFloat on int", c.SetFloat(KeyTaskSlots, 2), &KindError{}, []string{KeyTaskSlots}},
		{"negative duration", c.SetDuration(KeyCheckpointingMinPause, -time.Second), &InvalidValueError{},
			[]string{KeyCheckpointingMinPause, "negative duration", `"-1s"`}},
		{"duration below minimum", c.SetDuration(KeyCheckpointingInterval, time.Millisecond), &InvalidValueError{},
			[]string{KeyCheckpointingInterval, "at least 10 ms"}},
		{"int out of range", c.SetInt(KeyParallelism, 0), &InvalidValueError{},
			[]string{KeyParallelism, "from 1 to 32768"}},
		{"int beyond 32 bits", c.SetInt(KeyTaskSlots, math.MaxInt32+1), &InvalidValueError{},
			[]string{KeyTaskSlots, "out of range"}},
		{"float out of range", c.SetFloat(KeyExponentialDelayJitterFactor, 2), &InvalidValueError{},
			[]string{KeyExponentialDelayJitterFactor, "from 0 to 1"}},
		{"unknown key", c.SetInt("parallelism", 2), &UnknownKeyError{},
			[]string{`"parallelism"`, KeyParallelism}},
	}
	for _, tt := range tests {
		if tt.err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		if reflect.TypeOf(tt.err) != reflect.TypeOf(tt.want) {
			t.Errorf("%s: error %T (%v), want %T", tt.name, tt.err, tt.err, tt.want)
		}
		for _, m := range tt.msg {
			if !strings.Contains(tt.err.Error(), m) {
				t.Errorf("%s: error %q does not mention %q", tt.name, tt.err, m)
			}
		}
	}
	if len(c.Keys()) != 0 {
		t.Errorf("failed setters stored values: %q", c.Keys())
	}
}

func TestGetterPanics(t *testing.T) {
	for name, f := range map[string]func(c *Configuration){
		"String unknown":     func(c *Configuration) { c.String("no.such.key") },
		"Duration unknown":   func(c *Configuration) { c.Duration("no.such.key") },
		"Duration on int":    func(c *Configuration) { c.Duration(KeyParallelism) },
		"Int on duration":    func(c *Configuration) { c.Int(KeyCheckpointingInterval) },
		"Float on int":       func(c *Configuration) { c.Float(KeyTaskSlots) },
		"Bool on enum":       func(c *Configuration) { c.Bool(KeyCheckpointingMode) },
		"Bool on deprecated": func(c *Configuration) { c.Bool("state.checkpoints.dir") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f(New())
		}()
	}
	// Deprecated keys are accepted by the getters.
	c := New()
	_ = c.Set(KeyCheckpointingIncremental, "true")
	if !c.Bool("state.backend.incremental") {
		t.Error("Bool through a deprecated key did not see the value")
	}
	if _, ok := c.Get("no.such.key"); ok {
		t.Error("Get of an unknown key reported a value")
	}
}

func TestCloneIsIndependent(t *testing.T) {
	c := New()
	_ = c.Set("state.backend", "hashmap")
	d := c.Clone()
	_ = d.Set(KeyParallelism, "8")
	_ = d.Set("restart-strategy", "none")
	if _, ok := c.Get(KeyParallelism); ok {
		t.Error("Set on a clone changed the original")
	}
	if len(c.Deprecations()) != 1 || len(d.Deprecations()) != 2 {
		t.Errorf("deprecations: original %v, clone %v", c.Deprecations(), d.Deprecations())
	}
	if !slices.Equal(d.Keys(), []string{KeyParallelism, KeyRestartStrategy, KeyStateBackend}) {
		t.Errorf("clone Keys() = %q", d.Keys())
	}
}

func TestMerge(t *testing.T) {
	base := New()
	_ = base.Set(KeyParallelism, "2")
	_ = base.Set(KeyCheckpointingInterval, "1 min")
	_ = base.Set("state.checkpoints.dir", "/from-file")
	over := New()
	_ = over.Set(KeyParallelism, "8")
	_ = over.Set(KeyCheckpointingDir, "/from-flag")
	_ = over.Set("restart-strategy", "fixed-delay")

	base.Merge(over)
	base.Merge(nil)
	want := map[string]string{
		KeyParallelism:           "8",
		KeyCheckpointingInterval: "1 min",
		KeyCheckpointingDir:      "/from-flag",
		KeyRestartStrategy:       "fixed-delay",
	}
	if !slices.Equal(base.Keys(), []string{KeyCheckpointingDir, KeyCheckpointingInterval, KeyParallelism, KeyRestartStrategy}) {
		t.Errorf("Keys() = %q", base.Keys())
	}
	for k, v := range want {
		if got := base.String(k); got != v {
			t.Errorf("after Merge, %s = %q, want %q", k, got, v)
		}
	}
	wantDep := []Deprecation{
		{Key: "state.checkpoints.dir", Replacement: KeyCheckpointingDir, Ignored: true},
		{Key: "restart-strategy", Replacement: KeyRestartStrategy},
	}
	if got := base.Deprecations(); !slices.Equal(got, wantDep) {
		t.Errorf("Deprecations() = %+v, want %+v", got, wantDep)
	}
	// A higher-precedence source wins even when it uses the deprecated key.
	file := New()
	_ = file.Set(KeyCheckpointingDir, "/from-file")
	flags := New()
	_ = flags.Set("state.checkpoints.dir", "/from-flag")
	file.Merge(flags)
	if got := file.String(KeyCheckpointingDir); got != "/from-flag" {
		t.Errorf("dir = %q, want /from-flag", got)
	}
	// Merging into the zero value works.
	var zero Configuration
	zero.Merge(over)
	if zero.String(KeyParallelism) != "8" {
		t.Errorf("Merge into zero value lost values")
	}
}

func TestOptionsListing(t *testing.T) {
	opts := Options()
	if !slices.IsSortedFunc(opts, func(a, b OptionInfo) int { return strings.Compare(a.Key, b.Key) }) {
		t.Error("Options() is not sorted by key")
	}
	for _, o := range opts {
		if o.Description == "" || o.Allowed == "" {
			t.Errorf("%s: missing description or allowed text", o.Key)
		}
		if (o.Kind == KindEnum) != (len(o.Values) > 0) {
			t.Errorf("%s: kind %v with values %q", o.Key, o.Kind, o.Values)
		}
		if o.HasDefault && o.Kind == KindEnum && o.Values[0] != o.Default {
			t.Errorf("%s: default %q is not the first value of %q", o.Key, o.Default, o.Values)
		}
		// The listed default is accepted by Set and stored unchanged.
		if o.HasDefault {
			c := New()
			if err := c.Set(o.Key, o.Default); err != nil {
				t.Errorf("%s: default %q refused: %v", o.Key, o.Default, err)
			} else if got, _ := c.Get(o.Key); got != o.Default {
				t.Errorf("%s: default %q stored as %q", o.Key, o.Default, got)
			}
		}
	}
	// The listing is a copy.
	opts[0].Key = "changed"
	if len(opts[0].DeprecatedKeys) > 0 {
		opts[0].DeprecatedKeys[0] = "changed"
	}
	for _, o := range Options() {
		if o.Key == "changed" || slices.Contains(o.DeprecatedKeys, "changed") {
			t.Fatal("modifying the result of Options() changed the registry")
		}
	}
	var secret []string
	for _, o := range Options() {
		if o.Sensitive {
			secret = append(secret, o.Key)
		}
	}
	if !slices.Equal(secret, []string{KeyClusterAuthToken, KeyRESTAuthToken, KeyS3AccessKey, KeyS3SecretKey}) {
		t.Errorf("sensitive options = %q", secret)
	}
}

func TestRegistryRejectsMalformedTables(t *testing.T) {
	tests := map[string][]option{
		"duplicate key": {
			{key: "a", kind: KindInt, desc: "x"},
			{key: "a", kind: KindInt, desc: "x"},
		},
		"alias is a key": {
			{key: "a", kind: KindInt, desc: "x"},
			{key: "b", kind: KindInt, deprecated: []string{"a"}, desc: "x"},
		},
		"alias twice": {
			{key: "a", kind: KindInt, deprecated: []string{"c"}, desc: "x"},
			{key: "b", kind: KindInt, deprecated: []string{"c"}, desc: "x"},
		},
		"non-canonical default": {{key: "a", kind: KindDuration, def: "10s", desc: "x"}},
		"default out of range":  {{key: "a", kind: KindInt, def: "0", check: intAtLeast(1), desc: "x"}},
		"enum without values":   {{key: "a", kind: KindEnum, desc: "x"}},
		"values on non-enum":    {{key: "a", kind: KindInt, values: []enumValue{{name: "x"}}, desc: "x"}},
	}
	for name, table := range tests {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: newRegistry did not panic", name)
				}
			}()
			newRegistry(table)
		}()
	}
}

func TestHighAvailability(t *testing.T) {
	for _, v := range []string{"zookeeper", "consul"} {
		_, err := ParseDynamic([]string{KeyHAType + "=" + v})
		if err == nil || !strings.Contains(err.Error(), KeyHAType) || !strings.Contains(err.Error(), "etcd") {
			t.Errorf("%s=%s: %v, want an error naming the key and the allowed values", KeyHAType, v, err)
		}
	}
	cfg, err := ParseDynamic([]string{KeyHAType + "=etcd"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.HighAvailability(); err == nil || !strings.Contains(err.Error(), KeyHAEtcdEndpoints) {
		t.Errorf("etcd without endpoints: %v, want an error naming %s", err, KeyHAEtcdEndpoints)
	}
	cfg, err = ParseDynamic([]string{KeyHAType + "=ETCD", KeyHAEtcdEndpoints + "=a:1, b:2", KeyHAEtcdLeaseTTL + "=3s"})
	if err != nil {
		t.Fatal(err)
	}
	ha, err := cfg.HighAvailability()
	if err != nil || ha.Type != HAEtcd || !slices.Equal(ha.EtcdEndpoints, []string{"a:1", "b:2"}) || ha.LeaseTTL != 3*time.Second || ha.ClusterID != "default" {
		t.Errorf("HighAvailability() = %+v, %v", ha, err)
	}
	cfg, err = ParseDynamic([]string{KeyHAType + "=kubernetes", KeyHAKubernetesRetryPeriod + "=2s"})
	if err != nil {
		t.Fatal(err)
	}
	ha, err = cfg.HighAvailability()
	if want := (KubernetesHA{ClusterID: "default", LeaseDuration: 15 * time.Second, RenewDeadline: 15 * time.Second, RetryPeriod: 2 * time.Second}); err != nil || ha.Type != HAKubernetes || ha.Kubernetes != want || !ha.Enabled() {
		t.Errorf("kubernetes: HighAvailability() = %+v, %v; want %+v", ha, err, want)
	}
	for _, bad := range [][]string{
		{KeyHAKubernetesRenewDeadline + "=20s"},                                        // above the lease duration
		{KeyHAKubernetesRetryPeriod + "=13s"},                                          // 13 s * 1.2 is not below 15 s
		{KeyHAClusterID + "=Prod_1"},                                                   // not a DNS label, and no kubernetes.cluster-id
		{KeyHAClusterID + "=a-cluster-id-that-is-far-too-long-for-the-names-it-makes"}, // above 40
	} {
		cfg, err := ParseDynamic(append([]string{KeyHAType + "=kubernetes"}, bad...))
		if err != nil {
			t.Fatal(err)
		}
		var ce *ConflictError
		if _, err := cfg.HighAvailability(); !errors.As(err, &ce) || !strings.Contains(err.Error(), strings.SplitN(bad[0], "=", 2)[0]) {
			t.Errorf("%s kubernetes with %s: %v, want a conflict naming the key", KeyHAType, bad, err)
		}
	}
	if cfg, err := ParseDynamic([]string{KeyHAType + "=kubernetes", KeyHAClusterID + "=Prod_1", KeyKubernetesClusterID + "=prod-1"}); err != nil {
		t.Fatal(err)
	} else if ha, err := cfg.HighAvailability(); err != nil || ha.Kubernetes.ClusterID != "prod-1" {
		t.Errorf("kubernetes.cluster-id over high-availability.cluster-id: %+v, %v", ha.Kubernetes, err)
	}
	for _, v := range []string{KeyKubernetesClusterID + "=Prod", KeyKubernetesNamespace + "=a_b", KeyKubernetesClusterID + "=" + strings.Repeat("a", 41)} {
		if _, err := ParseDynamic([]string{v}); err == nil || !strings.Contains(err.Error(), "DNS label") {
			t.Errorf("%s: %v, want a refusal naming a DNS label", v, err)
		}
	}
	if _, err := ParseDynamic([]string{KeyHAEtcdLeaseTTL + "=500ms"}); err == nil {
		t.Errorf("a lease below 1 s was accepted")
	}
}
