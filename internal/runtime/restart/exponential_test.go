package restart

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// noJitter is Flink's default exponential-delay without jitter, so that
// delays can be written down.
func noJitter() ExponentialDelay {
	c := DefaultExponentialDelay()
	c.JitterFactor = 0
	return c
}

// TestExponentialDelayGrowthAndCap restarts the job after every failure and
// lets it fail again a second after each restart, well inside the reset
// threshold: the backoff grows by the multiplier until max-backoff caps it.
func TestExponentialDelayGrowthAndCap(t *testing.T) {
	want := []string{ // the delay of each restart attempt
		"1s", // initial-backoff
		"1.5s",
		"2.25s",
		"3.375s",
		"5.0625s",
		"7.59375s",
		"11.390625s",
		"17.0859375s",
		"25.62890625s",
		"38.443359375s",
		"57.665039062s", // 1 s × 1.5^10, truncated to the nanosecond
		"1m0s",          // 1 s × 1.5^11 = 86.5 s, capped at max-backoff
		"1m0s",
		"1m0s",
	}
	s := mustNew(t, noJitter())
	now := t0
	for i, w := range want {
		d := s.OnFailure(now, errTask)
		if !d.Restart || d.Merged || d.Delay.String() != w {
			t.Fatalf("attempt %d: got %s, want restart in %s", i+1, d, w)
		}
		now = now.Add(d.Delay + time.Second)
	}
}

// TestExponentialDelayLongRunNoOverflow keeps failing far past the point
// where the backoff overflows int64 nanoseconds: once backoff×(1−jitter)
// exceeds max-backoff (attempt 13 here) the delay is max-backoff exactly.
func TestExponentialDelayLongRunNoOverflow(t *testing.T) {
	c := DefaultExponentialDelay()
	c.JitterFactor = 0.5
	c.Rand = rand.New(rand.NewPCG(7, 7))
	s := mustNew(t, c)
	now := t0
	for i := range 2000 {
		d := s.OnFailure(now, errTask)
		if !d.Restart || d.Delay < c.InitialBackoff || d.Delay > c.MaxBackoff {
			t.Fatalf("attempt %d: %s, want a delay within [%v, %v]", i+1, d, c.InitialBackoff, c.MaxBackoff)
		}
		if i >= 12 && d.Delay != c.MaxBackoff {
			t.Fatalf("attempt %d: %s, want the max-backoff", i+1, d)
		}
		now = now.Add(d.Delay + time.Millisecond)
	}
}

func TestExponentialDelay(t *testing.T) {
	// Flink's own merging scenario: 2 s initial, ×2, at most 6 s, at most
	// 3 attempts before a reset.
	merging := ExponentialDelay{
		InitialBackoff:             2 * time.Second,
		MaxBackoff:                 6 * time.Second,
		BackoffMultiplier:          2,
		ResetBackoffThreshold:      80 * time.Second,
		AttemptsBeforeResetBackoff: 3,
	}
	exhausted := func(n int, threshold string) string {
		return "fail: exponential-delay: " + strconv.Itoa(n) + " of " + strconv.Itoa(n) +
			" restart attempts used; the count resets only after the job runs " + threshold +
			" without failing (restart-strategy.exponential-delay.attempts-before-reset-backoff)"
	}
	for _, tc := range []struct {
		name  string
		cfg   ExponentialDelay
		steps []step
	}{
		{
			// A task manager's loss fails its tasks one after another;
			// every failure until the pending restart joins it.
			name: "failures while a restart is pending join it",
			cfg:  merging,
			steps: []step{
				{"0s", "restart in 2s"}, // attempt 1, due at 2s
				{"0s", "restart in 2s (merged)"},
				{"1s", "restart in 1s (merged)"},
				{"2s", "restart in 0s (merged)"}, // at the due time: still merged
				{"2.001s", "restart in 4s"},      // attempt 2, due at 6.001s
				{"3s", "restart in 3.001s (merged)"},
				{"6.001s", "restart in 0s (merged)"},
				{"6.002s", "restart in 6s"}, // attempt 3: 8s capped at 6s, due at 12.002s
				{"12.002s", "restart in 0s (merged)"},
				{"12.003s", exhausted(3, "1m20s")}, // attempt 4 of 3
				{"12.5s", exhausted(3, "1m20s")},   // merged into the refused attempt
			},
		},
		{
			name: "the backoff resets after the threshold measured from the last restart",
			cfg:  ExponentialDelay{InitialBackoff: time.Second, MaxBackoff: time.Minute, BackoffMultiplier: 2, ResetBackoffThreshold: time.Hour, AttemptsBeforeResetBackoff: Unlimited},
			steps: []step{
				{"0s", "restart in 1s"},          // restart at 1s
				{"10s", "restart in 2s"},         // restart at 12s
				{"1h0m11.999s", "restart in 4s"}, // 1 ms short of an hour after 12s: keeps growing; restart at 1h0m15.999s
				{"2h0m15.999s", "restart in 1s"}, // exactly an hour after the restart: reset
				{"2h0m20s", "restart in 2s"},
			},
		},
		{
			name: "attempts before reset count restarts between resets",
			cfg:  ExponentialDelay{InitialBackoff: time.Second, MaxBackoff: time.Minute, BackoffMultiplier: 2, ResetBackoffThreshold: time.Minute, AttemptsBeforeResetBackoff: 2},
			steps: []step{
				{"0s", "restart in 1s"}, // restart at 1s
				{"5s", "restart in 2s"}, // restart at 7s
				{"10s", exhausted(2, "1m0s")},
				// Had the job been kept, a failure a threshold after the
				// refused attempt's due time (14s) would start afresh.
				{"1m14s", "restart in 1s"},
			},
		},
		{
			name: "a failure a threshold after a merged-away restart still resets",
			cfg:  merging,
			steps: []step{
				{"0s", "restart in 2s"},
				{"1s", "restart in 1s (merged)"},
				{"1m22s", "restart in 2s"}, // 80 s after the restart at 2s
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replay(t, mustNew(t, tc.cfg), tc.steps)
		})
	}
}

// TestExponentialDelayJitterBounds draws many delays from many seeds and
// checks each against Flink's bounds: with b = initial × multiplier^n the
// delay is b - jitter×b ... b + jitter×b clamped to initial ... max.
// It also checks that the jitter goes both ways.
func TestExponentialDelayJitterBounds(t *testing.T) {
	for _, cfg := range []ExponentialDelay{
		DefaultExponentialDelay(),
		{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second, BackoffMultiplier: 2, ResetBackoffThreshold: time.Hour, JitterFactor: 1, AttemptsBeforeResetBackoff: Unlimited},
		{InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, BackoffMultiplier: 3, ResetBackoffThreshold: time.Hour, JitterFactor: 0.5, AttemptsBeforeResetBackoff: Unlimited},
	} {
		below, above := 0, 0
		for seed := uint64(1); seed <= 300; seed++ {
			c := cfg
			c.Rand = rand.New(rand.NewPCG(seed, 0x5eed))
			s := mustNew(t, c)
			now := t0
			for n := range 20 {
				d := s.OnFailure(now, errTask)
				b := float64(c.InitialBackoff) * math.Pow(c.BackoffMultiplier, float64(n))
				lo := time.Duration(min(float64(c.MaxBackoff), max(float64(c.InitialBackoff), b-c.JitterFactor*b)))
				hi := time.Duration(max(float64(c.InitialBackoff), min(float64(c.MaxBackoff), b+c.JitterFactor*b)))
				if !d.Restart || d.Merged || d.Delay < lo || d.Delay > hi {
					t.Fatalf("seed %d, %s, attempt %d: %s, want a delay within [%v, %v]",
						seed, s, n+1, d, lo, hi)
				}
				if float64(c.InitialBackoff) < b && b < float64(c.MaxBackoff) {
					switch {
					case d.Delay < time.Duration(b):
						below++
					case d.Delay > time.Duration(b):
						above++
					}
				}
				now = now.Add(d.Delay + time.Millisecond)
			}
		}
		if below == 0 || above == 0 {
			t.Errorf("%+v: jitter went below the backoff %d times and above it %d times; want both",
				cfg, below, above)
		}
	}
}

// TestExponentialDelaySeeded checks that a seed fixes the delays, so that a
// simulator run can be reproduced from its seed.
func TestExponentialDelaySeeded(t *testing.T) {
	run := func(seed uint64) []time.Duration {
		c := DefaultExponentialDelay()
		c.Rand = rand.New(rand.NewPCG(seed, seed))
		s := mustNew(t, c)
		var out []time.Duration
		now := t0
		for range 10 {
			d := s.OnFailure(now, errTask)
			out = append(out, d.Delay)
			now = now.Add(d.Delay + time.Second)
		}
		return out
	}
	a, b := run(42), run(42)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 42 gave %v, then %v", a, b)
		}
	}
}

func TestExponentialDelayString(t *testing.T) {
	s := mustNew(t, DefaultExponentialDelay())
	want := "exponential-delay(initial-backoff=1s, max-backoff=1m0s, backoff-multiplier=1.5, " +
		"reset-backoff-threshold=1h0m0s, jitter-factor=0.1, attempts-before-reset-backoff=infinite)"
	if got := s.String(); got != want {
		t.Errorf("String() =\n %s\nwant\n %s", got, want)
	}
}
