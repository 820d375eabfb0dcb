package restart

import (
	"errors"
	"fmt"
	"time"
)

// FixedDelay configures the fixed-delay strategy: the job is restarted at most
// Attempts times over its whole life, each time Delay after the failure; the
// next failure fails it.
//
// The zero value is valid but restarts never (zero attempts); start from
// DefaultFixedDelay.
type FixedDelay struct {
	// Attempts is how many times the job may be restarted before a failure
	// fails it (restart-strategy.fixed-delay.attempts). At least 0.
	// Default 1.
	Attempts int

	// Delay is the wait between a failure and the restart
	// (restart-strategy.fixed-delay.delay). Waiting lets external systems
	// time out connections or pending transactions before re-execution.
	// At least 0. Default 1 s.
	Delay time.Duration
}

// DefaultFixedDelay returns Flink's defaults: 1 attempt, 1 s apart.
func DefaultFixedDelay() FixedDelay {
	return FixedDelay{Attempts: 1, Delay: time.Second}
}

// Kind returns "fixed-delay".
func (FixedDelay) Kind() string { return KindFixedDelay }

// Validate reports negative fields.
func (c FixedDelay) Validate() error {
	var errs []error
	if c.Attempts < 0 {
		errs = append(errs, fmt.Errorf("%s must be at least 0, got %d", KeyFixedDelayAttempts, c.Attempts))
	}
	if c.Delay < 0 {
		errs = append(errs, fmt.Errorf("%s must be at least 0, got %v", KeyFixedDelayDelay, c.Delay))
	}
	return errors.Join(errs...)
}

func (c FixedDelay) build() Strategy { return &fixedDelay{cfg: c} }

// fixedDelay counts every failure as one restart attempt (unlike
// exponential-delay, Flink's fixed-delay does not merge concurrent failures).
type fixedDelay struct {
	cfg      FixedDelay
	failures int
}

func (s *fixedDelay) OnFailure(time.Time, error) Decision {
	s.failures++
	if s.failures > s.cfg.Attempts {
		return refuse(fmt.Sprintf("fixed-delay: %d of %d restart attempts used (%s)",
			s.cfg.Attempts, s.cfg.Attempts, KeyFixedDelayAttempts))
	}
	return restartAfter(s.cfg.Delay, fmt.Sprintf("fixed-delay: restart attempt %d of %d",
		s.failures, s.cfg.Attempts))
}

func (s *fixedDelay) String() string {
	return fmt.Sprintf("fixed-delay(attempts=%d, delay=%v)", s.cfg.Attempts, s.cfg.Delay)
}
