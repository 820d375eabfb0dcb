package web

import (
	"context"
	"net/url"
	"strconv"
)

// jobMetrics is Flink's /jobs/:jobid/metrics: the job's checkpointing
// metrics (from the checkpoint statistics, Flink's names and units:
// milliseconds and bytes) and its uptime and restarts.
//
//   - lastCheckpointDuration, lastCheckpointSize (the data it wrote, as
//     Flink's checkpointed size), lastCheckpointFullSize (the state it
//     references) and lastCompletedCheckpointId are -1 before the first
//     completed checkpoint, as Flink's.
//   - lastCheckpointRestoreTimestamp is -1 without a restore.
//   - numberOfCompletedCheckpoints, numberOfFailedCheckpoints,
//     numberOfInProgressCheckpoints, totalNumberOfCheckpoints count since
//     the job (or its job manager) started.
//   - uptime is the milliseconds since the job started running (0 once it
//     has ended, as Flink's), numRestarts its restarts.
//
// Without checkpointing the checkpoint metrics are absent.
func (s *Server) jobMetrics(ctx context.Context, q url.Values) ([]metricEntry, error) {
	ids, vals, err := s.jobMetricValues(ctx)
	if err != nil {
		return nil, err
	}
	strs := make(map[string]string, len(vals))
	for id, v := range vals {
		strs[id] = strconv.FormatInt(v, 10)
	}
	return metricListOf(q, ids, strs), nil
}

// jobMetricValues are jobMetrics' values by name, the names in order.
func (s *Server) jobMetricValues(ctx context.Context) ([]string, map[string]int64, error) {
	var ids []string
	vals := map[string]int64{}
	put := func(id string, v int64) {
		ids = append(ids, id)
		vals[id] = v
	}
	_, end, dur, _ := s.times()
	up := dur
	if end >= 0 {
		up = 0
	}
	put("uptime", up)
	put("numRestarts", int64(s.jm.Metrics().Restarts))
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	snap, ok, err := s.jm.CheckpointStats(qctx)
	if err != nil {
		return nil, nil, err
	}
	if ok {
		c := snap.Counts
		put("numberOfCompletedCheckpoints", c.Completed)
		put("numberOfFailedCheckpoints", c.Failed)
		put("numberOfInProgressCheckpoints", int64(c.InProgress))
		put("totalNumberOfCheckpoints", c.Total)
		dur, size, full, id := int64(-1), int64(-1), int64(-1), int64(-1)
		if l := snap.Latest.Completed; l != nil {
			dur, size, full, id = l.EndToEndDuration, l.CheckpointedSize, l.StateSize, l.ID
		}
		put("lastCheckpointDuration", dur)
		put("lastCheckpointSize", size)
		put("lastCheckpointFullSize", full)
		put("lastCompletedCheckpointId", id)
		restore := int64(-1)
		if r := snap.Latest.Restored; r != nil {
			restore = r.RestoreTimestamp
		}
		put("lastCheckpointRestoreTimestamp", restore)
	}
	return ids, vals, nil
}
