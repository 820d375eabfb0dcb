// Package restart decides whether and when a failed job restarts: Flink's
// restart strategies (restart-strategy.type) as I/O-free state machines.
//
// The scheduler tells a Strategy about every task failure, together with the
// time it happened, and gets back a Decision: restart after a delay, or give
// up and fail the job. A Strategy holds no clock, timer or goroutine: time is
// an argument and the only randomness (the jitter of exponential-delay) comes
// from an injected generator, so tests and the simulator drive strategies with
// a manual clock and a seed. Which tasks restart is decided separately, by a
// failover strategy (package failover).
//
// The strategies and their defaults follow Flink 2.x:
//
//	fixed-delay        at most Attempts restarts, each after Delay
//	exponential-delay  delays growing from InitialBackoff by BackoffMultiplier
//	                   up to MaxBackoff, with jitter; failures that arrive while
//	                   a restart is pending join it; the backoff and the attempt
//	                   count reset after ResetBackoffThreshold without failure
//	failure-rate       restart after Delay unless more than
//	                   MaxFailuresPerInterval failures fall in FailureRateInterval
//	none               never restart
//
// When restart-strategy.type is not set, Flink uses exponential-delay with its
// defaults if checkpointing is enabled and none otherwise (see DefaultKind).
//
// A Strategy is not safe for concurrent use; its owner (the job manager's
// scheduler) serialises calls. Once a Strategy has refused a restart the job
// is failed for good; asking it again gives answers but no new meaning.
package restart

import (
	"fmt"
	"strings"
	"time"
)

// Strategy decides, failure by failure, whether and after how long the job
// restarts. Implementations are the Config types' products; see New.
type Strategy interface {
	// OnFailure records a failure that happened at now and decides what to
	// do about it. Successive calls must not go back in time (use readings
	// of one monotonic clock). cause is the failure; the built-in
	// strategies count failures and do not look at it.
	OnFailure(now time.Time, cause error) Decision

	// String names the strategy and its configuration, for logs and for the
	// message of a job that is not restarted.
	String() string
}

// Decision is a Strategy's answer to one failure.
type Decision struct {
	// Restart reports whether the job (the tasks the failover strategy
	// selects) is to be restarted. When false the job fails.
	Restart bool

	// Delay is how long after the failure the restart is to happen. It is
	// zero when Restart is false.
	Delay time.Duration

	// Merged reports that the failure arrived while an earlier failure's
	// restart was still pending and was folded into that restart attempt
	// instead of starting a new one; Delay is then the time left until the
	// pending restart. Only exponential-delay merges (Flink 1.19+, FLIP-364).
	Merged bool

	// Reason says in words why the job is, or is not, restarted, naming the
	// configuration that decided it: "fixed-delay: 3 of 3 restart attempts
	// used".
	Reason string
}

// String renders the decision for logs and test transcripts, e.g.
// "restart in 1.5s", "restart in 500ms (merged)" or
// "fail: fixed-delay: 3 of 3 restart attempts used".
func (d Decision) String() string {
	switch {
	case !d.Restart:
		return "fail: " + d.Reason
	case d.Merged:
		return fmt.Sprintf("restart in %v (merged)", d.Delay)
	default:
		return fmt.Sprintf("restart in %v", d.Delay)
	}
}

func restartAfter(delay time.Duration, reason string) Decision {
	return Decision{Restart: true, Delay: delay, Reason: reason}
}

func refuse(reason string) Decision {
	return Decision{Reason: reason}
}

// Values of restart-strategy.type. Kind returns these canonical names; New
// and Default also accept Flink's aliases (see Default).
const (
	KindFixedDelay       = "fixed-delay"
	KindExponentialDelay = "exponential-delay"
	KindFailureRate      = "failure-rate"
	KindNone             = "none"
)

// Flink's configuration keys for the restart strategies. Validate errors name
// the key of the offending field.
const (
	KeyType = "restart-strategy.type"

	KeyFixedDelayAttempts = "restart-strategy.fixed-delay.attempts"
	KeyFixedDelayDelay    = "restart-strategy.fixed-delay.delay"

	KeyExponentialDelayInitialBackoff             = "restart-strategy.exponential-delay.initial-backoff"
	KeyExponentialDelayMaxBackoff                 = "restart-strategy.exponential-delay.max-backoff"
	KeyExponentialDelayBackoffMultiplier          = "restart-strategy.exponential-delay.backoff-multiplier"
	KeyExponentialDelayResetBackoffThreshold      = "restart-strategy.exponential-delay.reset-backoff-threshold"
	KeyExponentialDelayJitterFactor               = "restart-strategy.exponential-delay.jitter-factor"
	KeyExponentialDelayAttemptsBeforeResetBackoff = "restart-strategy.exponential-delay.attempts-before-reset-backoff"

	KeyFailureRateMaxFailuresPerInterval = "restart-strategy.failure-rate.max-failures-per-interval"
	KeyFailureRateInterval               = "restart-strategy.failure-rate.failure-rate-interval"
	KeyFailureRateDelay                  = "restart-strategy.failure-rate.delay"
)

// Config is the configuration of one kind of restart strategy: FixedDelay,
// ExponentialDelay, FailureRate or None. New turns it into a Strategy.
type Config interface {
	// Kind is the restart-strategy.type value of this configuration.
	Kind() string
	// Validate reports every invalid field, naming its Flink key.
	Validate() error

	build() Strategy
}

// New validates c and returns a fresh Strategy configured by it, with no
// failures recorded.
func New(c Config) (Strategy, error) {
	if c == nil {
		return nil, fmt.Errorf("restart: no configuration")
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c.build(), nil
}

// Default returns the default configuration of the strategy that kind names.
// kind is a restart-strategy.type value, matched without regard to case, with
// Flink's aliases: "fixeddelay", "exponentialdelay", "failurerate", and
// "disable" and "off" for none.
func Default(kind string) (Config, error) {
	switch strings.ToLower(strings.TrimSpace(kind)) {
	case KindFixedDelay, "fixeddelay":
		return DefaultFixedDelay(), nil
	case KindExponentialDelay, "exponentialdelay":
		return DefaultExponentialDelay(), nil
	case KindFailureRate, "failurerate":
		return DefaultFailureRate(), nil
	case KindNone, "disable", "off":
		return None{}, nil
	}
	return nil, fmt.Errorf("%s: unknown restart strategy %q (want %s, %s, %s or %s)",
		KeyType, kind, KindFixedDelay, KindExponentialDelay, KindFailureRate, KindNone)
}

// DefaultKind is the restart strategy Flink uses when restart-strategy.type is
// not set: exponential-delay when checkpointing is enabled (a job that can
// recover its state should), none when it is not.
func DefaultKind(checkpointing bool) string {
	if checkpointing {
		return KindExponentialDelay
	}
	return KindNone
}
