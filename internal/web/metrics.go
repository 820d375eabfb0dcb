package web

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/runtime"
)

// The metrics at /metrics, in Prometheus' conventions: names start with
// weir_, counters end in _total, times are in seconds and sizes in bytes.
// Every sample carries job_id; per-vertex samples add vertex (the vertex's
// uid), per-subtask samples add subtask. Subtask counters start again from
// zero when a subtask is redeployed after a failure, which Prometheus
// reads as a counter reset.
//
// The checkpoint duration and size summaries come from the checkpoint
// statistics over all completed checkpoints: exact quantiles of the most
// recent 10,000, and a count. Their _sum is the count times the mean,
// which the statistics keep in whole milliseconds and bytes, so it may be
// short by up to a millisecond or a byte per checkpoint.

// quantiles are the summary quantiles, from the statistics' p50 to p999.
var quantiles = []struct {
	q   string
	get func(coordinator.StatsSummary) float64
}{
	{"0.5", func(s coordinator.StatsSummary) float64 { return s.P50 }},
	{"0.9", func(s coordinator.StatsSummary) float64 { return s.P90 }},
	{"0.95", func(s coordinator.StatsSummary) float64 { return s.P95 }},
	{"0.99", func(s coordinator.StatsSummary) float64 { return s.P99 }},
	{"0.999", func(s coordinator.StatsSummary) float64 { return s.P999 }},
}

func seconds(ms int64) float64       { return float64(ms) / 1e3 }
func nanosToSeconds(n int64) float64 { return float64(n) / 1e9 }

// collect reads the job's metrics as Prometheus families.
func (s *Server) collect(ctx context.Context, now time.Time) []family {
	if s.opts.flinkNames {
		return s.collectFlink(ctx, !s.opts.inDirectory)
	}
	jobID := s.jm.JobID()
	g := s.jm.Graph()
	job := []label{{"job_id", jobID}}
	vl := func(v string) []label { return []label{{"job_id", jobID}, {"vertex", v}} }
	sl := func(v string, i int) []label {
		return []label{{"job_id", jobID}, {"vertex", v}, {"subtask", strconv.Itoa(i)}}
	}
	gauge := func(name, help string) *family { return &family{name: name, help: help, typ: typeGauge} }
	counter := func(name, help string) *family { return &family{name: name, help: help, typ: typeCounter} }
	add := func(f *family, ls []label, v float64) { f.samples = append(f.samples, sample{labels: ls, value: v}) }

	m := s.jm.Metrics()
	info := gauge("weir_job_info", "The job, with its id and name as labels; always 1.")
	add(info, []label{{"job_id", jobID}, {"job_name", g.Name}}, 1)
	start := gauge("weir_job_start_time_seconds", "When the job started running, in seconds since the Unix epoch.")
	add(start, job, float64(s.startTime().UnixMilli())/1e3)
	restarts := counter("weir_job_restarts_total", "Restarts of the job or of some of its subtasks after failures.")
	add(restarts, job, float64(m.Restarts))

	vin := counter("weir_vertex_records_in_total", "Records a vertex received on its input channels; for a source, records it read from its splits.")
	vout := counter("weir_vertex_records_out_total", "Records a vertex sent on its output channels, where known (a source's emitted records; otherwise counted where single-input consumers receive them).")
	lag := gauge("weir_vertex_watermark_lag_seconds", "Processing time minus the vertex's watermark (the lowest of its subtasks'), when every subtask has one.")
	sin := counter("weir_subtask_records_in_total", "Records a subtask received on its input channels; for a source subtask, records it read from its splits.")
	sout := counter("weir_subtask_records_out_total", "Records a subtask sent on its output channels, where known.")
	wm := gauge("weir_subtask_watermark_seconds", "A subtask's watermark (event time), in seconds since the Unix epoch, once it has one.")
	bp := counter("weir_subtask_backpressured_seconds_total", "Time a subtask waited for room in its output channels: its backpressured time.")
	ibp := counter("weir_subtask_input_backpressure_seconds_total", "Time the producers of a subtask's input channels waited for room in them: the backpressure the subtask exerted.")
	idle := counter("weir_subtask_idle_seconds_total", "Time a subtask waited for input (sources: for their fetcher); the rest it was busy or backpressured.")
	nin := counter("weir_subtask_network_bytes_in_total", "Bytes a subtask received on input channels from other processes (channels within a process carry records unserialized and count none).")
	nout := counter("weir_subtask_network_bytes_out_total", "Bytes a subtask sent on output channels to other processes (channels within a process carry records unserialized and count none).")
	attempt := gauge("weir_subtask_attempt", "Attempt number of a subtask's current deployment: 0 at the job's start, higher after each restart that redeployed it.")

	by := subtaskIndex(s.jm.SubtaskMetrics())
	recs := records{by: by}
	for _, v := range g.Vertices {
		add(vin, vl(v.UID), float64(recs.sum(v, -1)))
		if n, ok := recs.write(v, -1); ok && len(v.Outputs) > 0 {
			add(vout, vl(v.UID), float64(n))
		}
		low, known := int64(runtime.MaxWatermark), len(by[v.UID]) > 0
		for _, sm := range by[v.UID] {
			i := sm.Task.Subtask
			add(sin, sl(v.UID, i), float64(sm.RecordsIn))
			if n, ok := recs.write(v, i); ok && len(v.Outputs) > 0 {
				add(sout, sl(v.UID, i), float64(n))
			}
			if sm.Watermark == runtime.MinWatermark {
				known = false
			} else if sm.Watermark != runtime.MaxWatermark {
				add(wm, sl(v.UID, i), seconds(sm.Watermark))
			}
			low = min(low, sm.Watermark)
			add(bp, sl(v.UID, i), nanosToSeconds(sm.OutBackpressuredNanos))
			add(ibp, sl(v.UID, i), nanosToSeconds(sm.BackpressuredNanos))
			add(idle, sl(v.UID, i), nanosToSeconds(sm.IdleNanos))
			add(attempt, sl(v.UID, i), float64(sm.Attempt))
			add(nin, sl(v.UID, i), float64(sm.NetBytesIn))
			add(nout, sl(v.UID, i), float64(sm.NetBytesOut))
		}
		if known && low != runtime.MaxWatermark {
			add(lag, vl(v.UID), seconds(now.UnixMilli()-low))
		}
	}
	fams := []*family{info, start, restarts, vin, vout, lag, sin, sout, wm, bp, ibp, idle, attempt, nin, nout}

	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	snap, ok, err := s.jm.CheckpointStats(qctx)
	if err != nil {
		s.opts.logger.Debug("reading checkpoint statistics for /metrics", "err", err)
	}
	if ok && err == nil {
		fams = append(fams, checkpointFamilies(snap, job, sl)...)
	}
	out := make([]family, 0, len(fams))
	for _, f := range fams {
		out = append(out, *f)
	}
	return out
}

func checkpointFamilies(snap coordinator.Snapshot, job []label, sl func(string, int) []label) []*family {
	var fams []*family
	one := func(name, help, typ string, v float64) {
		fams = append(fams, &family{name: name, help: help, typ: typ, samples: []sample{{labels: job, value: v}}})
	}
	c := snap.Counts
	one("weir_checkpoints_total", "Checkpoints triggered: in progress, completed and failed.", typeCounter, float64(c.Total))
	one("weir_checkpoints_completed_total", "Checkpoints (and savepoints) completed.", typeCounter, float64(c.Completed))
	one("weir_checkpoints_failed_total", "Checkpoints failed or aborted.", typeCounter, float64(c.Failed))
	one("weir_checkpoints_in_progress", "Checkpoints triggered and not yet completed or failed.", typeGauge, float64(c.InProgress))
	one("weir_checkpoints_restored_total", "Restores from a checkpoint recorded in the checkpoint statistics.", typeCounter, float64(c.Restored))

	summary := func(name, help string, st coordinator.StatsSummary, scale float64) {
		f := &family{name: name, help: help, typ: typeSummary}
		if c.Completed > 0 {
			for _, q := range quantiles {
				ls := append(slices.Clone(job), label{"quantile", q.q})
				f.samples = append(f.samples, sample{labels: ls, value: q.get(st) * scale})
			}
		}
		f.samples = append(f.samples,
			sample{suffix: "_sum", labels: job, value: float64(st.Avg) * float64(c.Completed) * scale},
			sample{suffix: "_count", labels: job, value: float64(c.Completed)})
		fams = append(fams, f)
	}
	summary("weir_checkpoint_duration_seconds", "End-to-end duration of completed checkpoints, from the trigger to the last acknowledgement.", snap.Summary.EndToEndDuration, 1e-3)
	summary("weir_checkpoint_size_bytes", "Size of the state completed checkpoints reference.", snap.Summary.StateSize, 1)

	if r := snap.Latest.Restored; r != nil {
		one("weir_checkpoint_restore_timestamp_seconds", "When the job last restored from a checkpoint, in seconds since the Unix epoch.", typeGauge, seconds(r.RestoreTimestamp))
	}
	last := snap.Latest.Completed
	if last == nil {
		return fams
	}
	one("weir_last_checkpoint_id", "Id of the latest completed checkpoint.", typeGauge, float64(last.ID))
	one("weir_last_checkpoint_duration_seconds", "End-to-end duration of the latest completed checkpoint.", typeGauge, seconds(last.EndToEndDuration))
	one("weir_last_checkpoint_size_bytes", "Size of the state the latest completed checkpoint references.", typeGauge, float64(last.StateSize))
	one("weir_last_checkpoint_checkpointed_size_bytes", "Data the latest completed checkpoint wrote.", typeGauge, float64(last.CheckpointedSize))
	one("weir_last_checkpoint_completion_timestamp_seconds", "When the latest completed checkpoint was acknowledged by its last subtask, in seconds since the Unix epoch.", typeGauge, seconds(last.LatestAckTimestamp))

	align := &family{name: "weir_last_checkpoint_alignment_seconds", typ: typeGauge,
		help: "Alignment time of each subtask in the latest completed checkpoint: from its first barrier to its last."}
	delay := &family{name: "weir_last_checkpoint_start_delay_seconds", typ: typeGauge,
		help: "Start delay of each subtask in the latest completed checkpoint: from the trigger to its first barrier."}
	uids := make([]string, 0, len(last.Tasks))
	for uid := range last.Tasks {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		for _, st := range last.Tasks[uid].Subtasks {
			if st.Status != coordinator.SubtaskCompleted || st.Finished {
				continue
			}
			align.samples = append(align.samples, sample{labels: sl(uid, st.Index), value: seconds(st.Alignment.Duration)})
			delay.samples = append(delay.samples, sample{labels: sl(uid, st.Index), value: seconds(st.StartDelay)})
		}
	}
	return append(fams, align, delay)
}
