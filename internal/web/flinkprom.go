package web

import (
	"context"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/internal/procstat"
	"github.com/weirstream/weir/internal/runtime"
)

// The metrics at /metrics under the names of Flink's Prometheus reporter
// (WithFlinkMetricNames, metrics.prometheus.names: flink), so that
// dashboards and alerts made for Flink read weir's. A name is "flink_",
// the metric's scope and its name joined by "_", as Flink's reporter
// writes them; every sample is a gauge, as the reporter exports counters
// and meters; the help is "<name> (scope: <scope>)", as the reporter's.
//
//   - flink_jobmanager_job_<m>{job_id, job_name}: the job's metrics of
//     /jobs/:jobid/metrics (uptime, numRestarts, lastCheckpointDuration,
//     lastCheckpointSize, lastCheckpointFullSize,
//     numberOfCompletedCheckpoints, ...).
//   - flink_taskmanager_job_task_<m>{job_id, job_name, task_id, task_name,
//     subtask_index, task_attempt_num, tm_id}: each subtask's task
//     metrics (numRecordsIn, numRecordsOut, numBytesIn, numBytesOut,
//     their PerSecond rates, busyTimeMsPerSecond, backPressuredTimeMsPerSecond,
//     idleTimeMsPerSecond), those /jobs/:jobid/vertices/:vertexid/metrics
//     lists.
//   - flink_taskmanager_job_task_operator_<m>{the task's labels,
//     operator_id, operator_name}: the records and watermark of each
//     subtask's chain, as metrics of its head operator (weir counts a
//     chain's records where they enter and leave it, not per operator):
//     numRecordsIn, numRecordsOut, their rates, currentInputWatermark.
//     operator_id and task_id are both the vertex id, operator_name and
//     task_name the vertex's name.
//   - flink_jobmanager_<m> and flink_jobmanager_Status_JVM_... : the job
//     manager's metrics of /jobmanager/metrics; flink_taskmanager_Status_JVM_...{tm_id}:
//     each task manager's of /taskmanagers/:id/metrics.
//
// Flink's host label is left out: a task manager's id is enough to tell
// them apart, and weir does not know the host name of a task manager.

// WithFlinkMetricNames makes /metrics use the names and labels of Flink's
// Prometheus reporter rather than weir's own.
func WithFlinkMetricNames() Option { return func(o *options) { o.flinkNames = true } }

// flinkGauge is a family of Flink's reporter: scope and name make its name.
func flinkGauge(scope, name string) *family {
	return &family{name: "flink_" + scope + "_" + name, help: name + " (scope: " + scope + ")", typ: typeGauge}
}

// Flink's scopes, as its reporter names them.
const (
	scopeJob      = "jobmanager_job"
	scopeTask     = "taskmanager_job_task"
	scopeOperator = "taskmanager_job_task_operator"
)

// operatorMetricNames are the task metrics also given at operator scope.
var operatorMetricNames = []string{mRecordsIn, mRecordsOut, mRecordsInRate, mRecordsOutRate, mCurrentWatermark}

// collectFlink is collect under Flink's names; with process, it also
// carries the job manager's and the task manager's metrics of the
// process the job runs in.
func (s *Server) collectFlink(ctx context.Context, process bool) []family {
	jobID, name := s.jm.JobID(), s.jm.Graph().Name
	var fams []*family
	ids, vals, err := s.jobMetricValues(ctx)
	if err != nil {
		s.opts.logger.Debug("reading the job's metrics for /metrics", "err", err)
	}
	job := []label{{"job_id", jobID}, {"job_name", name}}
	for _, id := range ids {
		f := flinkGauge(scopeJob, id)
		f.samples = []sample{{labels: job, value: float64(vals[id])}}
		fams = append(fams, f)
	}

	task := map[string]*family{}
	op := map[string]*family{}
	for _, n := range taskMetricNames {
		if n != mCurrentWatermark {
			task[n] = flinkGauge(scopeTask, n)
		}
	}
	for _, n := range operatorMetricNames {
		op[n] = flinkGauge(scopeOperator, n)
	}
	by := subtaskIndex(s.jm.SubtaskMetrics())
	for _, v := range s.jm.Graph().Vertices {
		vid := s.ids[v]
		of := map[int]runtime.SubtaskMetrics{}
		for _, m := range by[v.UID] {
			of[m.Task.Subtask] = m
		}
		for _, st := range s.taskMetrics(v) {
			m := of[st.subtask]
			tl := []label{{"job_id", jobID}, {"job_name", name}, {"task_id", vid}, {"task_name", v.Name},
				{"subtask_index", strconv.Itoa(st.subtask)}, {"task_attempt_num", strconv.Itoa(m.Attempt)}, {"tm_id", taskManagerOf(m)}}
			ol := append(slices.Clone(tl), label{"operator_id", vid}, label{"operator_name", v.Name})
			for n, x := range st.values {
				if f, ok := task[n]; ok {
					f.samples = append(f.samples, sample{labels: tl, value: x})
				}
				if f, ok := op[n]; ok {
					f.samples = append(f.samples, sample{labels: ol, value: x})
				}
			}
		}
	}
	for _, n := range taskMetricNames {
		if f, ok := task[n]; ok {
			fams = append(fams, f)
		}
	}
	for _, n := range operatorMetricNames {
		fams = append(fams, op[n])
	}
	if process {
		fams = append(fams, jobManagerFamilies(s.overviewInfo())...)
		fams = append(fams, taskManagerFamilies(processID(), procstat.Read())...)
	}
	out := make([]family, 0, len(fams))
	for _, f := range fams {
		out = append(out, *f)
	}
	return out
}

// jobManagerFamilies are the job manager's metrics (/jobmanager/metrics)
// under Flink's names.
func jobManagerFamilies(o overviewInfo) []*family {
	ids, vals := jobManagerMetrics(o)
	var fams []*family
	for _, id := range ids {
		x, err := strconv.ParseFloat(vals[id], 64)
		if err != nil {
			continue
		}
		f := flinkGauge("jobmanager", flinkMetricName(id))
		f.samples = []sample{{value: x}}
		fams = append(fams, f)
	}
	return fams
}

// taskManagerFamilies are task manager tm's process metrics under Flink's
// names.
func taskManagerFamilies(tm string, st procstat.Stats) []*family {
	ids, vals := goMetrics(st)
	var fams []*family
	for _, id := range ids {
		x, err := strconv.ParseFloat(vals[id], 64)
		if err != nil {
			continue
		}
		f := flinkGauge("taskmanager", flinkMetricName(id))
		f.samples = []sample{{labels: []label{{"tm_id", tm}}, value: x}}
		fams = append(fams, f)
	}
	return fams
}

// flinkMetricName is a metric's name as Flink's reporter writes it: dots
// become underscores.
func flinkMetricName(id string) string {
	b := []byte(id)
	for i, c := range b {
		if c == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// processCollector serves a Directory's process metrics under Flink's
// names: the job manager's, and each task manager's as its heartbeats
// report them.
type processCollector struct{ d *Directory }

// Describe sends no descriptors: the collector is unchecked.
func (processCollector) Describe(chan<- *prometheus.Desc) {}

func (c processCollector) Collect(ch chan<- prometheus.Metric) {
	fams := jobManagerFamilies(c.d.overview())
	if c.d.cluster != nil {
		for _, tm := range c.d.cluster().Registered {
			if tm.Process != nil {
				fams = append(fams, taskManagerFamilies(tm.ID, *tm.Process)...)
			}
		}
	}
	out := make([]family, 0, len(fams))
	for _, f := range fams {
		out = append(out, *f)
	}
	emit(ch, out)
}
