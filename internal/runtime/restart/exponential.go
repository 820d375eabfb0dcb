package restart

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Unlimited is the value of ExponentialDelay.AttemptsBeforeResetBackoff that
// Flink documents as "infinite" (Java's Integer.MAX_VALUE).
const Unlimited = math.MaxInt32

// ExponentialDelay configures the exponential-delay strategy, Flink's
// recommendation for production: retry a one-off failure quickly, back off
// from a persistent one, and spread the restarts of many jobs with jitter so
// that they do not hammer a recovering dependency in lockstep.
//
// The n-th restart attempt since the last reset (n = 0, 1, ...) waits
//
//	backoff = InitialBackoff × BackoffMultiplier^n
//	delay   = clamp(backoff + jitter, InitialBackoff, MaxBackoff)
//
// where jitter is drawn uniformly from [-JitterFactor×backoff,
// +JitterFactor×backoff]. The jitter is applied to the uncapped backoff and the
// sum is then clamped, so the delay never leaves [InitialBackoff, MaxBackoff]
// and, once backoff×(1−JitterFactor) reaches MaxBackoff, is MaxBackoff exactly.
//
// A failure at or before the time of the pending restart (now ≤ last failure
// + its delay) joins that restart: it does not count as an attempt, does not
// grow the backoff, and is answered with the time left (Decision.Merged).
// This keeps one task manager's loss, which fails many tasks at once, from
// using up several attempts.
//
// A failure ResetBackoffThreshold or more after the time of the previous
// restart resets the backoff to InitialBackoff and the attempt count to zero.
// Between resets at most AttemptsBeforeResetBackoff restarts are made; the
// next new failure fails the job.
//
// The zero value is not valid; start from DefaultExponentialDelay.
type ExponentialDelay struct {
	// InitialBackoff is the delay of the first restart after a reset, and
	// the smallest delay ever chosen
	// (restart-strategy.exponential-delay.initial-backoff). More than 0 and
	// at most MaxBackoff. Default 1 s.
	InitialBackoff time.Duration

	// MaxBackoff caps the delay
	// (restart-strategy.exponential-delay.max-backoff). Default 1 min.
	MaxBackoff time.Duration

	// BackoffMultiplier multiplies the backoff after every attempt
	// (restart-strategy.exponential-delay.backoff-multiplier). At least 1,
	// as in Flink (1 keeps the delay at InitialBackoff). Default 1.5.
	BackoffMultiplier float64

	// ResetBackoffThreshold is how long the job must run, from the time of
	// its last restart, without failing for the backoff and the attempt
	// count to reset
	// (restart-strategy.exponential-delay.reset-backoff-threshold). More
	// than 0. Default 1 h.
	ResetBackoffThreshold time.Duration

	// JitterFactor is the largest jitter as a fraction of the backoff
	// (restart-strategy.exponential-delay.jitter-factor). From 0 (no
	// jitter) to 1. Default 0.1.
	JitterFactor float64

	// AttemptsBeforeResetBackoff is how many restarts are made between
	// resets before a failure fails the job
	// (restart-strategy.exponential-delay.attempts-before-reset-backoff).
	// At least 1. Default Unlimited.
	AttemptsBeforeResetBackoff int

	// Rand is the source of jitter. Nil means a generator seeded at random
	// when the strategy is built; tests and the simulator pass a seeded one.
	// A *rand.Rand is not safe for concurrent use: give every strategy its
	// own.
	Rand *rand.Rand
}

// DefaultExponentialDelay returns Flink 2.x's defaults: 1 s initial backoff,
// 1 min maximum, multiplier 1.5, reset after 1 h, jitter 0.1, unlimited
// attempts.
func DefaultExponentialDelay() ExponentialDelay {
	return ExponentialDelay{
		InitialBackoff:             time.Second,
		MaxBackoff:                 time.Minute,
		BackoffMultiplier:          1.5,
		ResetBackoffThreshold:      time.Hour,
		JitterFactor:               0.1,
		AttemptsBeforeResetBackoff: Unlimited,
	}
}

// Kind returns "exponential-delay".
func (ExponentialDelay) Kind() string { return KindExponentialDelay }

// Validate reports fields out of range.
func (c ExponentialDelay) Validate() error {
	var errs []error
	if c.InitialBackoff <= 0 {
		errs = append(errs, fmt.Errorf("%s must be more than 0, got %v", KeyExponentialDelayInitialBackoff, c.InitialBackoff))
	}
	if c.MaxBackoff <= 0 {
		errs = append(errs, fmt.Errorf("%s must be more than 0, got %v", KeyExponentialDelayMaxBackoff, c.MaxBackoff))
	} else if c.InitialBackoff > c.MaxBackoff {
		errs = append(errs, fmt.Errorf("%s (%v) must not be less than %s (%v)",
			KeyExponentialDelayMaxBackoff, c.MaxBackoff, KeyExponentialDelayInitialBackoff, c.InitialBackoff))
	}
	if !(c.BackoffMultiplier >= 1) || math.IsInf(c.BackoffMultiplier, 0) {
		errs = append(errs, fmt.Errorf("%s must be at least 1, got %v", KeyExponentialDelayBackoffMultiplier, c.BackoffMultiplier))
	}
	if c.ResetBackoffThreshold <= 0 {
		errs = append(errs, fmt.Errorf("%s must be more than 0, got %v",
			KeyExponentialDelayResetBackoffThreshold, c.ResetBackoffThreshold))
	}
	if !(c.JitterFactor >= 0 && c.JitterFactor <= 1) {
		errs = append(errs, fmt.Errorf("%s must be from 0 to 1, got %v", KeyExponentialDelayJitterFactor, c.JitterFactor))
	}
	if c.AttemptsBeforeResetBackoff < 1 {
		errs = append(errs, fmt.Errorf("%s must be at least 1, got %d",
			KeyExponentialDelayAttemptsBeforeResetBackoff, c.AttemptsBeforeResetBackoff))
	}
	return errors.Join(errs...)
}

func (c ExponentialDelay) build() Strategy {
	rng := c.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	c.Rand = nil
	return &exponentialDelay{cfg: c, rng: rng}
}

type exponentialDelay struct {
	cfg ExponentialDelay
	rng *rand.Rand

	// failed is false until the first failure.
	failed bool
	// attempts counts the restart attempts since the last reset, including
	// a refused one.
	attempts int
	// next is when the latest attempt's restart is (or was) due.
	next time.Time
}

func (s *exponentialDelay) OnFailure(now time.Time, _ error) Decision {
	if s.failed && !now.After(s.next) {
		left := s.next.Sub(now)
		if s.exhausted() {
			return refuse(s.exhaustedReason())
		}
		return Decision{Restart: true, Delay: left, Merged: true, Reason: fmt.Sprintf(
			"exponential-delay: failure joins restart attempt %d, due in %v", s.attempts, left)}
	}
	if !s.failed || now.Sub(s.next) >= s.cfg.ResetBackoffThreshold {
		s.attempts = 0
	}
	s.failed = true
	delay := s.delay(s.attempts)
	s.next = now.Add(delay)
	s.attempts++
	if s.exhausted() {
		return refuse(s.exhaustedReason())
	}
	return restartAfter(delay, fmt.Sprintf("exponential-delay: restart attempt %d since the backoff was reset",
		s.attempts))
}

func (s *exponentialDelay) exhausted() bool {
	return s.attempts > s.cfg.AttemptsBeforeResetBackoff
}

func (s *exponentialDelay) exhaustedReason() string {
	n := s.cfg.AttemptsBeforeResetBackoff
	return fmt.Sprintf("exponential-delay: %d of %d restart attempts used; the count resets only after the job runs %v without failing (%s)",
		n, n, s.cfg.ResetBackoffThreshold, KeyExponentialDelayAttemptsBeforeResetBackoff)
}

// backoffCeiling bounds the un-jittered backoff so that adding jitter (at most
// the backoff itself) cannot overflow a Duration. It is about 73 years, far
// beyond any MaxBackoff, so clamping to it never changes a delay.
const backoffCeiling = time.Duration(math.MaxInt64 / 4)

// delay computes the delay of the attempt-th restart since the last reset.
func (s *exponentialDelay) delay(attempt int) time.Duration {
	b := float64(s.cfg.InitialBackoff) * math.Pow(s.cfg.BackoffMultiplier, float64(attempt))
	backoff := backoffCeiling
	if b < float64(backoffCeiling) {
		backoff = time.Duration(b)
	}
	d := backoff + s.jitter(backoff)
	return max(s.cfg.InitialBackoff, min(d, s.cfg.MaxBackoff))
}

// jitter draws uniformly from [-j, j] where j = JitterFactor × backoff.
func (s *exponentialDelay) jitter(backoff time.Duration) time.Duration {
	if s.cfg.JitterFactor == 0 {
		return 0
	}
	j := int64(float64(backoff) * s.cfg.JitterFactor)
	if j <= 0 {
		return 0
	}
	return time.Duration(s.rng.Int64N(2*j+1) - j)
}

func (s *exponentialDelay) String() string {
	attempts := fmt.Sprint(s.cfg.AttemptsBeforeResetBackoff)
	if s.cfg.AttemptsBeforeResetBackoff == Unlimited {
		attempts = "infinite"
	}
	return fmt.Sprintf("exponential-delay(initial-backoff=%v, max-backoff=%v, backoff-multiplier=%v, "+
		"reset-backoff-threshold=%v, jitter-factor=%v, attempts-before-reset-backoff=%s)",
		s.cfg.InitialBackoff, s.cfg.MaxBackoff, s.cfg.BackoffMultiplier,
		s.cfg.ResetBackoffThreshold, s.cfg.JitterFactor, attempts)
}
