package stream

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/runtime/restart"
)

// prepare turns the environment into a job master ready to run.
// The returned function releases what the job master holds open.
func (e *Environment) prepare(ctx context.Context, name string) (*runtime.JobMaster, func() error, error) {
	nop := func() error { return nil }
	pipe, err := e.cfg.Pipeline()
	if err != nil {
		return nil, nop, err
	}
	g, err := e.graph(name, pipe)
	if err != nil {
		return nil, nop, err
	}
	cp, err := e.cfg.Checkpointing()
	if err != nil {
		return nil, nop, err
	}
	if cp.Enabled && cp.Incremental {
		// Flink accepts and ignores it with the heap backend too.
		e.logger.Warn("execution.checkpointing.incremental=true has no effect: the hashmap state backend takes full checkpoints")
	}
	rs, err := e.cfg.Restart()
	if err != nil {
		return nil, nop, err
	}
	strategy, err := restartStrategy(rs)
	if err != nil {
		return nil, nop, err
	}
	opts := runtime.Options{
		JobID:       e.jobID,
		Logger:      e.logger,
		Restart:     strategy,
		Failover:    string(rs.Failover),
		Events:      e.runtimeEvents(),
		NewExecutor: e.newExec,
	}
	if e.clock != nil {
		opts.Clock = e.clock
	}
	if e.faults != nil {
		opts.Faults = faultInjector(e.faults)
	}
	opts.BatchSize, opts.ChannelCapacity = e.batchSize, e.channelCapacity
	closer := nop
	if cp.Enabled {
		ckpt, restore, c, err := e.checkpointing(ctx, cp)
		if err != nil {
			return nil, nop, err
		}
		opts.Checkpointing, opts.Restore, closer = ckpt, restore, c
		opts.Fallback = func(bad, to int64) error { return e.refuseFallback([]string{fmt.Sprint(bad)}, to) }
	}
	jm, err := runtime.NewJobMaster(g, opts)
	if err != nil {
		closer()
		return nil, nop, err
	}
	e.ckpt, e.storage = cp, nil
	if opts.Checkpointing != nil {
		e.storage = opts.Checkpointing.Storage
	}
	return jm, closer, nil
}

// restartStrategy builds the restart strategy the configuration names.
func restartStrategy(r config.Restart) (restart.Strategy, error) {
	var c restart.Config
	switch r.Strategy {
	case config.RestartFixedDelay:
		c = restart.FixedDelay{Attempts: r.FixedDelay.Attempts, Delay: r.FixedDelay.Delay}
	case config.RestartExponentialDelay:
		ed := r.ExponentialDelay
		c = restart.ExponentialDelay{
			InitialBackoff:             ed.InitialBackoff,
			MaxBackoff:                 ed.MaxBackoff,
			BackoffMultiplier:          ed.BackoffMultiplier,
			ResetBackoffThreshold:      ed.ResetBackoffThreshold,
			JitterFactor:               ed.JitterFactor,
			AttemptsBeforeResetBackoff: ed.AttemptsBeforeResetBackoff,
			Rand:                       rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		}
	case config.RestartFailureRate:
		c = restart.FailureRate{MaxFailuresPerInterval: r.FailureRate.MaxFailuresPerInterval, FailureRateInterval: r.FailureRate.Interval, Delay: r.FailureRate.Delay}
	default:
		c = restart.None{}
	}
	return restart.New(c)
}

// runtimeEvents adapts the environment's event callback to the runtime.
func (e *Environment) runtimeEvents() func(runtime.Event) {
	if e.events == nil {
		return nil
	}
	f := e.events
	return func(ev runtime.Event) { f(jobEvent(ev)) }
}
