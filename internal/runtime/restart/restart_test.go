package restart

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// t0 is the manual clock's origin; table times are offsets from it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var errTask = errors.New("task failed")

// step is one failure in a transcript: when it happens, and the decision the
// strategy must answer with, as Decision.String renders it.
type step struct {
	at   string // offset from t0, a time.ParseDuration string
	want string
}

// replay feeds the failures of steps to s in order and checks every decision.
func replay(t *testing.T, s Strategy, steps []step) {
	t.Helper()
	for i, st := range steps {
		at, err := time.ParseDuration(st.at)
		if err != nil {
			t.Fatalf("step %d: bad time %q: %v", i, st.at, err)
		}
		got := s.OnFailure(t0.Add(at), errTask)
		if got.String() != st.want {
			t.Errorf("step %d: failure at %s:\n got  %s\n want %s", i, st.at, got, st.want)
		}
		if got.Reason == "" {
			t.Errorf("step %d: failure at %s: decision %s has no reason", i, st.at, got)
		}
	}
}

func mustNew(t *testing.T, c Config) Strategy {
	t.Helper()
	s, err := New(c)
	if err != nil {
		t.Fatalf("New(%#v): %v", c, err)
	}
	return s
}

func TestNone(t *testing.T) {
	s := mustNew(t, None{})
	d := s.OnFailure(t0, errTask)
	if d.Restart || d.Delay != 0 {
		t.Fatalf("none restarted: %+v", d)
	}
	if !strings.Contains(d.Reason, "restarts are disabled") {
		t.Errorf("reason %q does not say restarts are disabled", d.Reason)
	}
	if got := s.String(); got != "none" {
		t.Errorf("String() = %q", got)
	}
}

func TestDefault(t *testing.T) {
	for _, tc := range []struct {
		kind string
		want Config
	}{
		{"fixed-delay", DefaultFixedDelay()},
		{"fixeddelay", DefaultFixedDelay()},
		{"Fixed-Delay", DefaultFixedDelay()},
		{"exponential-delay", DefaultExponentialDelay()},
		{"exponentialdelay", DefaultExponentialDelay()},
		{"failure-rate", DefaultFailureRate()},
		{"failurerate", DefaultFailureRate()},
		{"none", None{}},
		{"disable", None{}},
		{"off", None{}},
	} {
		got, err := Default(tc.kind)
		if err != nil {
			t.Errorf("Default(%q): %v", tc.kind, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Default(%q) = %#v, want %#v", tc.kind, got, tc.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("Default(%q) does not validate: %v", tc.kind, err)
		}
	}
	if _, err := Default("exponential"); err == nil || !strings.Contains(err.Error(), KeyType) {
		t.Errorf("Default(exponential): err = %v, want an error naming %s", err, KeyType)
	}
}

func TestDefaultValues(t *testing.T) {
	if got, want := DefaultFixedDelay(), (FixedDelay{Attempts: 1, Delay: time.Second}); got != want {
		t.Errorf("DefaultFixedDelay() = %+v, want %+v", got, want)
	}
	if got, want := DefaultFailureRate(), (FailureRate{1, time.Minute, time.Second}); got != want {
		t.Errorf("DefaultFailureRate() = %+v, want %+v", got, want)
	}
	want := ExponentialDelay{
		InitialBackoff:             time.Second,
		MaxBackoff:                 time.Minute,
		BackoffMultiplier:          1.5,
		ResetBackoffThreshold:      time.Hour,
		JitterFactor:               0.1,
		AttemptsBeforeResetBackoff: 2147483647,
	}
	if got := DefaultExponentialDelay(); got != want {
		t.Errorf("DefaultExponentialDelay() = %+v, want %+v", got, want)
	}
}

func TestDefaultKind(t *testing.T) {
	if got := DefaultKind(true); got != KindExponentialDelay {
		t.Errorf("DefaultKind(checkpointing) = %q", got)
	}
	if got := DefaultKind(false); got != KindNone {
		t.Errorf("DefaultKind(no checkpointing) = %q", got)
	}
}

// TestValidate checks that every invalid field is reported by its Flink key,
// all of them at once.
func TestValidate(t *testing.T) {
	exp := func(f func(*ExponentialDelay)) ExponentialDelay {
		c := DefaultExponentialDelay()
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		keys []string // keys the error must name; none means valid
	}{
		{"fixed-delay zero attempts and delay", FixedDelay{}, nil},
		{"fixed-delay negative", FixedDelay{Attempts: -1, Delay: -time.Second},
			[]string{KeyFixedDelayAttempts, KeyFixedDelayDelay}},
		{"failure-rate zero value", FailureRate{},
			[]string{KeyFailureRateMaxFailuresPerInterval, KeyFailureRateInterval}},
		{"failure-rate negative delay", FailureRate{1, time.Minute, -1}, []string{KeyFailureRateDelay}},
		{"failure-rate zero delay", FailureRate{1, time.Minute, 0}, nil},
		{"exponential-delay zero value", ExponentialDelay{}, []string{
			KeyExponentialDelayInitialBackoff, KeyExponentialDelayMaxBackoff,
			KeyExponentialDelayBackoffMultiplier, KeyExponentialDelayResetBackoffThreshold,
			KeyExponentialDelayAttemptsBeforeResetBackoff}},
		{"exponential-delay initial above max", exp(func(c *ExponentialDelay) { c.InitialBackoff = 2 * time.Minute }),
			[]string{KeyExponentialDelayMaxBackoff, KeyExponentialDelayInitialBackoff}},
		{"exponential-delay initial equals max", exp(func(c *ExponentialDelay) { c.InitialBackoff = c.MaxBackoff }), nil},
		{"exponential-delay multiplier 1", exp(func(c *ExponentialDelay) { c.BackoffMultiplier = 1 }), nil},
		{"exponential-delay multiplier below 1", exp(func(c *ExponentialDelay) { c.BackoffMultiplier = 0.99 }),
			[]string{KeyExponentialDelayBackoffMultiplier}},
		{"exponential-delay jitter above 1", exp(func(c *ExponentialDelay) { c.JitterFactor = 1.01 }),
			[]string{KeyExponentialDelayJitterFactor}},
		{"exponential-delay jitter below 0", exp(func(c *ExponentialDelay) { c.JitterFactor = -0.1 }),
			[]string{KeyExponentialDelayJitterFactor}},
		{"exponential-delay jitter 0 and 1", exp(func(c *ExponentialDelay) { c.JitterFactor = 1 }), nil},
		{"exponential-delay zero attempts", exp(func(c *ExponentialDelay) { c.AttemptsBeforeResetBackoff = 0 }),
			[]string{KeyExponentialDelayAttemptsBeforeResetBackoff}},
		{"none", None{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.keys) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if _, err := New(tc.cfg); err != nil {
					t.Fatalf("New() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %v", tc.keys)
			}
			for _, k := range tc.keys {
				if !strings.Contains(err.Error(), k) {
					t.Errorf("Validate() = %q, does not name %s", err, k)
				}
			}
			if _, nerr := New(tc.cfg); nerr == nil {
				t.Errorf("New() accepted an invalid configuration")
			}
		})
	}
	if _, err := New(nil); err == nil {
		t.Errorf("New(nil) = nil error")
	}
}
