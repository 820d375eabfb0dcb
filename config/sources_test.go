package config

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func load(t *testing.T, text string) *Configuration {
	t.Helper()
	c, err := LoadYAML(strings.NewReader(text))
	if err != nil {
		t.Fatalf("LoadYAML: %v\n%s", err, text)
	}
	return c
}

// values returns every value set in c.
func values(c *Configuration) map[string]string {
	m := map[string]string{}
	for _, k := range c.Keys() {
		m[k], _ = c.Get(k)
	}
	return m
}

func TestLoadYAMLFlatAndNestedAreEquivalent(t *testing.T) {
	flat := `
# Flink 1.x style: one flat key per line.
execution.checkpointing.interval: 10 s
execution.checkpointing.mode: at_least_once
execution.checkpointing.dir: s3://bucket/checkpoints
execution.checkpointing.max-concurrent-checkpoints: 2
execution.checkpointing.unaligned.enabled: false
restart-strategy.type: exponential-delay
restart-strategy.exponential-delay.backoff-multiplier: 2
restart-strategy.exponential-delay.jitter-factor: 0.5
parallelism.default: 4
pipeline.max-parallelism: 256
state.backend.type: hashmap
taskmanager.numberOfTaskSlots: 2
rest.port: 9091
`
	nested := `
# Flink 2 standard YAML.
execution:
  checkpointing:
    interval: 10 s
    mode: AT_LEAST_ONCE
    dir: "s3://bucket/checkpoints"
    max-concurrent-checkpoints: 2
    unaligned:
      enabled: false
restart-strategy:
  type: exponential-delay
  exponential-delay:
    backoff-multiplier: 2.0
    jitter-factor: 0.5
parallelism:
  default: 4
pipeline:
  max-parallelism: 256
state:
  backend:
    type: HashMap
taskmanager:
  numberOfTaskSlots: 2
rest:
  port: 9091
`
	mixed := `
execution.checkpointing:
  interval: 10000
  mode: AT_LEAST_ONCE
  dir: s3://bucket/checkpoints
  max-concurrent-checkpoints: 2
  unaligned.enabled: false
restart-strategy: {type: exponential-delay, exponential-delay: {backoff-multiplier: 2, jitter-factor: 0.5}}
parallelism.default: 4
pipeline: {max-parallelism: 256}
state.backend: {type: hashmap}
taskmanager.numberOfTaskSlots: 2
rest.port: 9091
`
	want := map[string]string{
		KeyCheckpointingInterval:             "10 s",
		KeyCheckpointingMode:                 "AT_LEAST_ONCE",
		KeyCheckpointingDir:                  "s3://bucket/checkpoints",
		KeyCheckpointingMaxConcurrent:        "2",
		KeyCheckpointingUnaligned:            "false",
		KeyRestartStrategy:                   "exponential-delay",
		KeyExponentialDelayBackoffMultiplier: "2",
		KeyExponentialDelayJitterFactor:      "0.5",
		KeyParallelism:                       "4",
		KeyMaxParallelism:                    "256",
		KeyStateBackend:                      "hashmap",
		KeyTaskSlots:                         "2",
		KeyRESTPort:                          "9091",
	}
	for name, text := range map[string]string{"flat": flat, "nested": nested, "mixed": mixed} {
		c := load(t, text)
		if got := values(c); !maps.Equal(got, want) {
			t.Errorf("%s: got %v\nwant %v", name, got, want)
		}
		if d := c.Deprecations(); len(d) != 0 {
			t.Errorf("%s: unexpected deprecations %v", name, d)
		}
	}
}

func TestLoadYAMLScalarsAsText(t *testing.T) {
	c := load(t, `
execution.checkpointing.interval: 5000        # an int: milliseconds
execution.checkpointing.incremental: True     # a bool
restart-strategy.exponential-delay.jitter-factor: .25
execution.checkpointing.dir: '/data/checkpoints'
rest.bind-address: 10.0.0.1
rest.auth-token: "12345"
`)
	want := map[string]string{
		KeyCheckpointingInterval:        "5 s",
		KeyCheckpointingIncremental:     "true",
		KeyExponentialDelayJitterFactor: "0.25",
		KeyCheckpointingDir:             "/data/checkpoints",
		KeyRESTBindAddress:              "10.0.0.1",
		KeyRESTAuthToken:                "12345",
	}
	if got := values(c); !maps.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestLoadYAMLDeprecatedKeys(t *testing.T) {
	c := load(t, `
state.checkpoints.dir: /old
execution:
  checkpointing:
    dir: /new
state:
  checkpoints:
    num-retained: 3
  backend: hashmap
restart-strategy: none
`)
	want := map[string]string{
		KeyCheckpointingDir:         "/new",
		KeyCheckpointingNumRetained: "3",
		KeyStateBackend:             "hashmap",
		KeyRestartStrategy:          "none",
	}
	if got := values(c); !maps.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	wantDep := []Deprecation{
		{Key: "state.checkpoints.dir", Replacement: KeyCheckpointingDir, Ignored: true},
		{Key: "state.checkpoints.num-retained", Replacement: KeyCheckpointingNumRetained},
		{Key: "state.backend", Replacement: KeyStateBackend},
		{Key: "restart-strategy", Replacement: KeyRestartStrategy},
	}
	if got := c.Deprecations(); !slices.Equal(got, wantDep) {
		t.Errorf("Deprecations() = %+v\nwant %+v", got, wantDep)
	}
}

func TestLoadYAMLAnchorsAndEmptySections(t *testing.T) {
	c := load(t, `
restart-strategy:
  fixed-delay:
    attempts: 5
    delay: &d 3 s
  failure-rate:
    delay: *d
execution:
  checkpointing:
    # interval: 10 s
rest:
state.checkpoints:  # a section only deprecated keys live in
restart-strategy.type: off  # YAML 1.1 would read a bool; the text is what counts
`)
	want := map[string]string{
		KeyFixedDelayAttempts: "5",
		KeyFixedDelayDelay:    "3 s",
		KeyFailureRateDelay:   "3 s",
		KeyRestartStrategy:    "none",
	}
	if got := values(c); !maps.Equal(got, want) {
		t.Errorf("anchors: got %v\nwant %v", got, want)
	}

	c = load(t, `
restart-strategy:
  fixed-delay: &fd
    delay: 2 s
  failure-rate:
    <<: *fd
    max-failures-per-interval: 3
`)
	want = map[string]string{
		KeyFixedDelayDelay:        "2 s",
		KeyFailureRateDelay:       "2 s",
		KeyFailureRateMaxFailures: "3",
	}
	if got := values(c); !maps.Equal(got, want) {
		t.Errorf("merge key: got %v\nwant %v", got, want)
	}
}

func TestLoadYAMLEmpty(t *testing.T) {
	for _, text := range []string{"", "\n\n", "# only a comment\n", "---\n", "~\n"} {
		c := load(t, text)
		if len(c.Keys()) != 0 {
			t.Errorf("%q: keys %q", text, c.Keys())
		}
	}
}

func TestLoadYAMLErrors(t *testing.T) {
	tests := []struct {
		name, text string
		wantLine   int
		wantType   any
		wantInMsg  []string
	}{
		{
			name:     "unknown flat key",
			text:     "parallelism.default: 2\nexecution.checkpointing.intervall: 10 s\n",
			wantLine: 2, wantType: &UnknownKeyError{},
			wantInMsg: []string{`"execution.checkpointing.intervall"`, `did you mean "execution.checkpointing.interval"`},
		},
		{
			name:     "unknown nested key",
			text:     "execution:\n  checkpointing:\n    mode: EXACTLY_ONCE\n    intervall: 10 s\n",
			wantLine: 4, wantType: &UnknownKeyError{},
			wantInMsg: []string{`"execution.checkpointing.intervall"`, `"execution.checkpointing.interval"`},
		},
		{
			name:     "bad enum value",
			text:     "execution:\n  checkpointing:\n    mode: sometimes\n",
			wantLine: 3, wantType: &InvalidValueError{},
			wantInMsg: []string{`"sometimes"`, KeyCheckpointingMode, "EXACTLY_ONCE, AT_LEAST_ONCE"},
		},
		{
			name:     "bad duration on its own line",
			text:     "execution.checkpointing.timeout:\n  10 minits\n",
			wantLine: 2, wantType: &InvalidValueError{},
			wantInMsg: []string{`"10 minits"`, KeyCheckpointingTimeout, `unknown unit "minits"`},
		},
		{
			name:     "int out of range",
			text:     "\n\nexecution.checkpointing.max-concurrent-checkpoints: 0\n",
			wantLine: 3, wantType: &InvalidValueError{},
			wantInMsg: []string{KeyCheckpointingMaxConcurrent, "at least 1"},
		},
		{
			name:     "list value",
			text:     "parallelism.default:\n  - 1\n  - 2\n",
			wantLine: 2, wantType: &InvalidValueError{},
			wantInMsg: []string{KeyParallelism, "a YAML list is not a single value", "an integer"},
		},
		{
			name:     "list for unknown key",
			text:     "pipeline.jars: [a.jar]\n",
			wantLine: 1, wantType: &UnknownKeyError{},
			wantInMsg: []string{`"pipeline.jars"`},
		},
		{
			name:     "option without value",
			text:     "execution:\n  checkpointing:\n    interval:\n",
			wantLine: 3, wantType: &InvalidValueError{},
			wantInMsg: []string{KeyCheckpointingInterval, "no value"},
		},
		{
			name:     "unknown section without value",
			text:     "kafka:\n",
			wantLine: 1, wantType: &UnknownKeyError{},
			wantInMsg: []string{`"kafka"`},
		},
		{
			name:      "flat and nested duplicate",
			text:      "execution.checkpointing.interval: 10 s\nexecution:\n  checkpointing:\n    interval: 20 s\n",
			wantLine:  4,
			wantInMsg: []string{KeyCheckpointingInterval, "key given twice, first on line 1"},
		},
		{
			name:      "syntax error",
			text:      "execution.checkpointing.interval: 10 s\n  mode: [unclosed\n",
			wantLine:  2,
			wantInMsg: []string{"yaml line 2"},
		},
		{
			name:      "top level is a list",
			text:      "- execution.checkpointing.interval: 10 s\n",
			wantLine:  1,
			wantInMsg: []string{"top level must be a mapping"},
		},
		{
			name:      "second document",
			text:      "parallelism.default: 1\n---\nparallelism.default: 2\n",
			wantLine:  2, // the "---" that opens it
			wantInMsg: []string{"one YAML document"},
		},
		{
			name:      "non-scalar key",
			text:      "? [a, b]\n: 1\n",
			wantLine:  1,
			wantInMsg: []string{"key must be a plain string"},
		},
	}
	for _, tt := range tests {
		c, err := LoadYAML(strings.NewReader(tt.text))
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		if c != nil {
			t.Errorf("%s: configuration returned with error", tt.name)
		}
		var ye *YAMLError
		if !errors.As(err, &ye) {
			t.Errorf("%s: error %v is not a *YAMLError", tt.name, err)
			continue
		}
		if ye.Line != tt.wantLine {
			t.Errorf("%s: line %d, want %d (%v)", tt.name, ye.Line, tt.wantLine, err)
		}
		switch tt.wantType.(type) {
		case *UnknownKeyError:
			var e *UnknownKeyError
			if !errors.As(err, &e) {
				t.Errorf("%s: %v does not wrap *UnknownKeyError", tt.name, err)
			}
		case *InvalidValueError:
			var e *InvalidValueError
			if !errors.As(err, &e) {
				t.Errorf("%s: %v does not wrap *InvalidValueError", tt.name, err)
			}
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "config: yaml line ") {
			t.Errorf("%s: message %q does not start with the line", tt.name, msg)
		}
		for _, w := range tt.wantInMsg {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q does not mention %q", tt.name, msg, w)
			}
		}
	}
}

func TestLoadYAMLReportsEveryError(t *testing.T) {
	_, err := LoadYAML(strings.NewReader(`
execution.checkpointing.mode: sometimes
parallelism.default: 0
no.such.key: 1
`))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, w := range []string{"yaml line 2:", "yaml line 3:", "yaml line 4:"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not report %q", msg, w)
		}
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestLoadYAMLReadError(t *testing.T) {
	_, err := LoadYAML(failingReader{})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("err = %v, want the read error", err)
	}
}

func TestParseDynamic(t *testing.T) {
	c, err := ParseDynamic([]string{
		"execution.checkpointing.interval=10s",
		" parallelism.default = 4 ",
		"execution.checkpointing.dir=s3://bucket/path?region=eu-west-1",
		"state.backend=hashmap",
		"parallelism.default=6",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		KeyCheckpointingInterval: "10 s",
		KeyParallelism:           "6",
		KeyCheckpointingDir:      "s3://bucket/path?region=eu-west-1",
		KeyStateBackend:          "hashmap",
	}
	if got := values(c); !maps.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if d := c.Deprecations(); len(d) != 1 || d[0].Key != "state.backend" {
		t.Errorf("Deprecations() = %v", d)
	}
	if c, err := ParseDynamic(nil); err != nil || len(c.Keys()) != 0 {
		t.Errorf("ParseDynamic(nil) = %v, %v", c, err)
	}
}

func TestParseDynamicErrors(t *testing.T) {
	tests := []struct {
		arg       string
		wantType  any
		wantInMsg []string
	}{
		{"execution.checkpointing.interval", &MalformedPairError{},
			[]string{`"execution.checkpointing.interval"`, "want key=value"}},
		{"=10s", &MalformedPairError{}, []string{`"=10s"`, "want key=value"}},
		{"  =10s", &MalformedPairError{}, []string{`"  =10s"`}},
		{"execution.checkpointing.interval=", &InvalidValueError{},
			[]string{KeyCheckpointingInterval, `""`, "empty duration"}},
		{"execution.checkpointing.mode=sometimes", &InvalidValueError{},
			[]string{KeyCheckpointingMode, `"sometimes"`, "EXACTLY_ONCE, AT_LEAST_ONCE"}},
		{"parallelism=4", &UnknownKeyError{}, []string{`"parallelism"`, `"parallelism.default"`}},
	}
	for _, tt := range tests {
		c, err := ParseDynamic([]string{"parallelism.default=2", tt.arg})
		if err == nil || c != nil {
			t.Errorf("ParseDynamic(%q) = %v, %v; want error only", tt.arg, c, err)
			continue
		}
		ok := false
		switch tt.wantType.(type) {
		case *MalformedPairError:
			var e *MalformedPairError
			ok = errors.As(err, &e) && e.Arg == tt.arg
		case *InvalidValueError:
			var e *InvalidValueError
			ok = errors.As(err, &e)
		case *UnknownKeyError:
			var e *UnknownKeyError
			ok = errors.As(err, &e)
		}
		if !ok {
			t.Errorf("ParseDynamic(%q): error %v (%T), want %T", tt.arg, err, err, tt.wantType)
		}
		for _, w := range tt.wantInMsg {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ParseDynamic(%q): error %q does not mention %q", tt.arg, err, w)
			}
		}
	}
	// Every bad argument is reported.
	_, err := ParseDynamic([]string{"a", "b=1", "parallelism.default=0"})
	for _, w := range []string{`"a"`, `"b"`, KeyParallelism} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not report %s", err, w)
		}
	}
}

// TestPrecedence layers defaults < YAML file < code < -D as a program does.
func TestPrecedence(t *testing.T) {
	file := load(t, `
execution:
  checkpointing:
    interval: 1 min
    timeout: 5 min
    min-pause: 1 s
parallelism.default: 2
`)
	cfg := file.Clone()
	// Code.
	if err := cfg.SetDuration(KeyCheckpointingTimeout, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cfg.SetInt(KeyParallelism, 3); err != nil {
		t.Fatal(err)
	}
	// Dynamic properties.
	dyn, err := ParseDynamic([]string{"parallelism.default=4"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Merge(dyn)

	tests := []struct {
		key, want, from string
	}{
		{KeyCheckpointingMaxConcurrent, "1", "default"},
		{KeyCheckpointingInterval, "1 min", "file"},
		{KeyCheckpointingMinPause, "1 s", "file"},
		{KeyCheckpointingTimeout, "2 min", "code over file"},
		{KeyParallelism, "4", "-D over code over file"},
	}
	for _, tt := range tests {
		if got := cfg.String(tt.key); got != tt.want {
			t.Errorf("%s = %q, want %q (%s)", tt.key, got, tt.want, tt.from)
		}
	}
	if got := file.String(KeyParallelism); got != "2" {
		t.Errorf("layering changed the file's configuration: parallelism %q", got)
	}
}
