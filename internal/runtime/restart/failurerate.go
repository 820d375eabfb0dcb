package restart

import (
	"errors"
	"fmt"
	"time"
)

// FailureRate configures the failure-rate strategy: the job is restarted,
// Delay after each failure, as long as no more than MaxFailuresPerInterval
// failures fall within any FailureRateInterval; the failure that exceeds the
// rate fails the job. The window slides: it is measured back from each new
// failure.
//
// The zero value is not valid; start from DefaultFailureRate.
type FailureRate struct {
	// MaxFailuresPerInterval is how many failures (and so restarts) an
	// interval may hold (restart-strategy.failure-rate.max-failures-per-interval).
	// At least 1. Default 1.
	MaxFailuresPerInterval int

	// FailureRateInterval is the length of the sliding window
	// (restart-strategy.failure-rate.failure-rate-interval). Failures
	// exactly this far apart count as within it. More than 0.
	// Default 1 min.
	FailureRateInterval time.Duration

	// Delay is the wait between a failure and the restart
	// (restart-strategy.failure-rate.delay). At least 0. Default 1 s.
	Delay time.Duration
}

// DefaultFailureRate returns Flink's defaults: 1 failure per 1 min, restarts
// 1 s after the failure.
func DefaultFailureRate() FailureRate {
	return FailureRate{MaxFailuresPerInterval: 1, FailureRateInterval: time.Minute, Delay: time.Second}
}

// Kind returns "failure-rate".
func (FailureRate) Kind() string { return KindFailureRate }

// Validate reports fields out of range.
func (c FailureRate) Validate() error {
	var errs []error
	if c.MaxFailuresPerInterval < 1 {
		errs = append(errs, fmt.Errorf("%s must be at least 1, got %d",
			KeyFailureRateMaxFailuresPerInterval, c.MaxFailuresPerInterval))
	}
	if c.FailureRateInterval <= 0 {
		errs = append(errs, fmt.Errorf("%s must be more than 0, got %v", KeyFailureRateInterval, c.FailureRateInterval))
	}
	if c.Delay < 0 {
		errs = append(errs, fmt.Errorf("%s must be at least 0, got %v", KeyFailureRateDelay, c.Delay))
	}
	return errors.Join(errs...)
}

func (c FailureRate) build() Strategy {
	return &failureRate{cfg: c, times: make([]time.Time, 0, c.MaxFailuresPerInterval+1)}
}

// failureRate keeps the times of the last MaxFailuresPerInterval+1 failures,
// oldest first. With that many on record the newest failure exceeds the rate
// unless the oldest lies strictly more than the interval before it.
type failureRate struct {
	cfg   FailureRate
	times []time.Time
}

func (s *failureRate) OnFailure(now time.Time, _ error) Decision {
	limit := s.cfg.MaxFailuresPerInterval
	if len(s.times) > limit {
		s.times = append(s.times[:0], s.times[1:]...)
	}
	s.times = append(s.times, now)
	if len(s.times) > limit {
		if span := now.Sub(s.times[0]); span <= s.cfg.FailureRateInterval {
			return refuse(fmt.Sprintf("failure-rate: %d failures within %v, more than the %d allowed per %v (%s)",
				len(s.times), span, limit, s.cfg.FailureRateInterval, KeyFailureRateMaxFailuresPerInterval))
		}
	}
	return restartAfter(s.cfg.Delay, fmt.Sprintf("failure-rate: %d of at most %d failures in the last %v",
		s.inWindow(now), limit, s.cfg.FailureRateInterval))
}

// inWindow counts the recorded failures no more than the interval before now.
func (s *failureRate) inWindow(now time.Time) int {
	n := 0
	for _, t := range s.times {
		if now.Sub(t) <= s.cfg.FailureRateInterval {
			n++
		}
	}
	return n
}

func (s *failureRate) String() string {
	return fmt.Sprintf("failure-rate(max-failures-per-interval=%d, failure-rate-interval=%v, delay=%v)",
		s.cfg.MaxFailuresPerInterval, s.cfg.FailureRateInterval, s.cfg.Delay)
}
