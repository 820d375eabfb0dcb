package restart

import (
	"testing"
	"time"
)

func TestFixedDelay(t *testing.T) {
	const exhausted3 = "fail: fixed-delay: 3 of 3 restart attempts used (restart-strategy.fixed-delay.attempts)"
	for _, tc := range []struct {
		name  string
		cfg   FixedDelay
		steps []step
	}{
		{
			name: "three attempts ten seconds apart, then the job fails",
			cfg:  FixedDelay{Attempts: 3, Delay: 10 * time.Second},
			steps: []step{
				{"0s", "restart in 10s"},
				{"1m", "restart in 10s"},
				{"10h", "restart in 10s"}, // attempts never come back, however long the job ran
				{"10h1m", exhausted3},
				{"10h2m", exhausted3},
			},
		},
		{
			name: "defaults: one attempt after one second",
			cfg:  DefaultFixedDelay(),
			steps: []step{
				{"0s", "restart in 1s"},
				{"5s", "fail: fixed-delay: 1 of 1 restart attempts used (restart-strategy.fixed-delay.attempts)"},
			},
		},
		{
			name: "zero attempts fails the first failure",
			cfg:  FixedDelay{Attempts: 0, Delay: time.Second},
			steps: []step{
				{"0s", "fail: fixed-delay: 0 of 0 restart attempts used (restart-strategy.fixed-delay.attempts)"},
			},
		},
		{
			name: "zero delay restarts at once",
			cfg:  FixedDelay{Attempts: 2},
			steps: []step{
				{"0s", "restart in 0s"},
				{"1s", "restart in 0s"},
			},
		},
		{
			// Like Flink, fixed-delay does not merge failures: three tasks
			// lost with one task manager use three attempts.
			name: "simultaneous failures each use an attempt",
			cfg:  FixedDelay{Attempts: 3, Delay: 10 * time.Second},
			steps: []step{
				{"0s", "restart in 10s"},
				{"0s", "restart in 10s"},
				{"0s", "restart in 10s"},
				{"0s", exhausted3},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replay(t, mustNew(t, tc.cfg), tc.steps)
		})
	}
}

func TestFixedDelayReasonOnRestart(t *testing.T) {
	s := mustNew(t, FixedDelay{Attempts: 3, Delay: time.Second})
	s.OnFailure(t0, errTask)
	if got, want := s.OnFailure(t0.Add(time.Minute), errTask).Reason, "fixed-delay: restart attempt 2 of 3"; got != want {
		t.Errorf("reason = %q, want %q", got, want)
	}
	if got, want := s.String(), "fixed-delay(attempts=3, delay=1s)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
