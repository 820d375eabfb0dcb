package restart

import (
	"testing"
	"time"
)

func TestFailureRate(t *testing.T) {
	two := FailureRate{MaxFailuresPerInterval: 2, FailureRateInterval: 10 * time.Second, Delay: time.Second}
	for _, tc := range []struct {
		name  string
		cfg   FailureRate
		steps []step
	}{
		{
			name: "third failure just inside the interval fails the job",
			cfg:  two,
			steps: []step{
				{"0s", "restart in 1s"},
				{"5s", "restart in 1s"},
				// 0s, 5s, 10s: the first and the third are exactly 10s
				// apart, which counts as within the interval.
				{"10s", "fail: failure-rate: 3 failures within 10s, more than the 2 allowed per 10s " +
					"(restart-strategy.failure-rate.max-failures-per-interval)"},
			},
		},
		{
			name: "third failure just outside the interval restarts",
			cfg:  two,
			steps: []step{
				{"0s", "restart in 1s"},
				{"5s", "restart in 1s"},
				{"10.001s", "restart in 1s"}, // 0s has left the window
			},
		},
		{
			name: "the window slides with every failure",
			cfg:  two,
			steps: []step{
				{"0s", "restart in 1s"},
				{"5s", "restart in 1s"},
				{"10.001s", "restart in 1s"}, // window 0s..10.001s: 5s, 10.001s
				{"15.002s", "restart in 1s"}, // 5s is 10.002s back: out
				{"20.002s", "restart in 1s"}, // 10.001s is 10.001s back: out
				{"25.002s", "fail: failure-rate: 3 failures within 10s, more than the 2 allowed per 10s " +
					"(restart-strategy.failure-rate.max-failures-per-interval)"}, // 15.002s, 20.002s, 25.002s
			},
		},
		{
			name: "a burst inside the interval",
			cfg:  two,
			steps: []step{
				{"1m", "restart in 1s"},
				{"1m", "restart in 1s"},
				{"1m", "fail: failure-rate: 3 failures within 0s, more than the 2 allowed per 10s " +
					"(restart-strategy.failure-rate.max-failures-per-interval)"},
			},
		},
		{
			name: "defaults: one failure per minute",
			cfg:  DefaultFailureRate(),
			steps: []step{
				{"0s", "restart in 1s"},
				{"1m0.001s", "restart in 1s"},
				{"2m0.001s", "fail: failure-rate: 2 failures within 1m0s, more than the 1 allowed per 1m0s " +
					"(restart-strategy.failure-rate.max-failures-per-interval)"},
			},
		},
		{
			name: "zero delay",
			cfg:  FailureRate{MaxFailuresPerInterval: 1, FailureRateInterval: time.Second},
			steps: []step{
				{"0s", "restart in 0s"},
				{"2s", "restart in 0s"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replay(t, mustNew(t, tc.cfg), tc.steps)
		})
	}
}

func TestFailureRateReasonOnRestart(t *testing.T) {
	s := mustNew(t, FailureRate{MaxFailuresPerInterval: 3, FailureRateInterval: 10 * time.Second, Delay: time.Second})
	s.OnFailure(t0, errTask)
	s.OnFailure(t0.Add(8*time.Second), errTask)
	got := s.OnFailure(t0.Add(15*time.Second), errTask).Reason
	if want := "failure-rate: 2 of at most 3 failures in the last 10s"; got != want {
		t.Errorf("reason = %q, want %q", got, want)
	}
}
