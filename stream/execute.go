package stream

import (
	"math/rand/v2"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/cluster/restart"
	"github.com/weirstream/weir/internal/runtime"
)

// prepare turns the environment into a job master ready to run.
func (e *Environment) prepare(name string) (*runtime.JobMaster, error) {
	pipe, err := e.cfg.Pipeline()
	if err != nil {
		return nil, err
	}
	g, err := e.graph(name, pipe)
	if err != nil {
		return nil, err
	}
	cp, err := e.cfg.Checkpointing()
	if err != nil {
		return nil, err
	}
	rs, err := e.cfg.Restart()
	if err != nil {
		return nil, err
	}
	strategy, err := restartStrategy(rs)
	if err != nil {
		return nil, err
	}
	opts := runtime.Options{
		JobID:    e.jobID,
		Logger:   e.logger,
		Restart:  strategy,
		Failover: string(rs.Failover),
		Events:   e.events,
	}
	if e.faults != nil {
		opts.Faults = faultAdapter(e.faults)
	}
	if cp.Enabled {
		ckpt, restore, err := e.checkpointing(cp)
		if err != nil {
			return nil, err
		}
		opts.Checkpointing = ckpt
		opts.Restore = restore
	}
	return runtime.NewJobMaster(g, opts)
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
