package web

import (
	"fmt"
	"strconv"

	"github.com/weirstream/weir/config"
)

// jobConfigInfo is Flink's JobConfigInfo, GET /jobs/:jobid/config.
type jobConfigInfo struct {
	JID             string              `json:"jid"`
	Name            string              `json:"name"`
	ExecutionConfig executionConfigInfo `json:"execution-config"`
}

// executionConfigInfo is Flink's ExecutionConfigInfo.
//
//   - execution-mode is Flink 1.x's, which Flink 2 dropped: PIPELINED, the
//     only way weir exchanges records.
//   - restart-strategy describes the job's restart strategy in the words
//     of Flink 1.x's RestartStrategies.
//   - job-parallelism is parallelism.default.
//   - object-reuse-mode is false: weir hands each operator a record of its
//     own, never one reused for the next.
//   - user-config is empty: weir has no global job parameters.
type executionConfigInfo struct {
	ExecutionMode   string            `json:"execution-mode"`
	RestartStrategy string            `json:"restart-strategy"`
	JobParallelism  int               `json:"job-parallelism"`
	ObjectReuseMode bool              `json:"object-reuse-mode"`
	UserConfig      map[string]string `json:"user-config"`
}

func (s *Server) jobConfig() (jobConfigInfo, error) {
	rs, err := s.cfg.Restart()
	if err != nil {
		return jobConfigInfo{}, fmt.Errorf("restart configuration: %w", err)
	}
	return jobConfigInfo{
		JID:  s.jm.JobID(),
		Name: s.jm.Graph().Name,
		ExecutionConfig: executionConfigInfo{
			ExecutionMode:   "PIPELINED",
			RestartStrategy: restartDescription(rs),
			JobParallelism:  s.cfg.Int(config.KeyParallelism),
			UserConfig:      map[string]string{},
		},
	}, nil
}

// restartDescription describes r as Flink 1.x's
// RestartStrategyConfiguration.getDescription does.
func restartDescription(r config.Restart) string {
	ms := func(d interface{ Milliseconds() int64 }) int64 { return d.Milliseconds() }
	switch r.Strategy {
	case config.RestartFixedDelay:
		return fmt.Sprintf("Restart with fixed delay (%d ms). #%d restart attempts.", ms(r.FixedDelay.Delay), r.FixedDelay.Attempts)
	case config.RestartFailureRate:
		f := r.FailureRate
		return fmt.Sprintf("Failure rate restart with maximum of %d failures within interval %d ms and fixed delay %d ms.",
			f.MaxFailuresPerInterval, ms(f.Interval), ms(f.Delay))
	case config.RestartExponentialDelay:
		e := r.ExponentialDelay
		return fmt.Sprintf("Restart with exponential delay: starting at %d ms, increases %s times, capped at %d ms, reset after %d ms without failures, jitter factor %s.",
			ms(e.InitialBackoff), strconv.FormatFloat(e.BackoffMultiplier, 'f', -1, 64), ms(e.MaxBackoff), ms(e.ResetBackoffThreshold),
			strconv.FormatFloat(e.JitterFactor, 'f', -1, 64))
	}
	return "Restart deactivated."
}
