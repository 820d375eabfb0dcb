package web

import (
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/weirstream/weir/internal/runtime"
)

// Flink's task metrics that weir has, per subtask, in the order they are
// listed. The counts are those of the vertex details' IO metrics (see
// ioMetrics); the per-second rates and times cover the last sampling
// interval, and a subtask has them once it has two samples of one
// attempt.
//
//   - numRecordsIn, numRecordsOut: records received and sent (a source
//     receives 0 and sends what it emits; numRecordsOut is absent where
//     ioMetrics omits write-records).
//   - numRecordsInPerSecond, numRecordsOutPerSecond: their rates
//     (numRecordsOutPerSecond is absent where a subtask's sent records are
//     not counted).
//   - busyTimeMsPerSecond, backPressuredTimeMsPerSecond,
//     idleTimeMsPerSecond: the backpressure endpoint's ratios, in
//     milliseconds per second.
//   - numBytesIn, numBytesOut, numBytesInPerSecond, numBytesOutPerSecond:
//     the bytes received and sent on channels that cross processes, and
//     their rates (channels within a process count none; see ioMetrics).
//   - currentInputWatermark: the subtask's watermark, Long.MIN_VALUE before
//     its first, as Flink's.
const (
	mRecordsIn        = "numRecordsIn"
	mRecordsOut       = "numRecordsOut"
	mRecordsInRate    = "numRecordsInPerSecond"
	mRecordsOutRate   = "numRecordsOutPerSecond"
	mBusy             = "busyTimeMsPerSecond"
	mBackPressured    = "backPressuredTimeMsPerSecond"
	mIdle             = "idleTimeMsPerSecond"
	mCurrentWatermark = "currentInputWatermark"
	mBytesIn          = "numBytesIn"
	mBytesOut         = "numBytesOut"
	mBytesInRate      = "numBytesInPerSecond"
	mBytesOutRate     = "numBytesOutPerSecond"
)

var taskMetricNames = []string{mRecordsIn, mRecordsOut, mRecordsInRate, mRecordsOutRate, mBytesIn, mBytesOut, mBytesInRate, mBytesOutRate, mBusy, mBackPressured, mIdle, mCurrentWatermark}

// subtaskMetricValues are one subtask's metrics by name.
type subtaskMetricValues struct {
	subtask int
	values  map[string]float64
}

// taskMetrics returns the metrics of v's subtasks, by subtask.
func (s *Server) taskMetrics(v *runtime.Vertex) []subtaskMetricValues {
	recs := records{by: subtaskIndex(s.jm.SubtaskMetrics())}
	rates := func(u *runtime.Vertex) map[int]subtaskRatio {
		rs, _ := s.sampler.ratios(u.UID, u.Parallelism)
		out := map[int]subtaskRatio{}
		for _, r := range rs {
			out[r.task.Subtask] = r
		}
		return out
	}
	own := rates(v)
	// Where a subtask's sent records are counted at its consumers (forward
	// edges), so is their rate.
	var down []map[int]subtaskRatio
	forward := !v.Source() && len(v.Outputs) > 0
	for _, e := range v.Outputs {
		if e.Partitioner != runtime.Forward || len(e.To.Inputs) != 1 {
			forward = false
			break
		}
		down = append(down, rates(e.To))
	}
	var out []subtaskMetricValues
	for _, m := range recs.by[v.UID] {
		i := m.Task.Subtask
		vals := map[string]float64{mRecordsIn: float64(recs.read(v, i)), mCurrentWatermark: float64(m.Watermark),
			mBytesIn: float64(m.NetBytesIn), mBytesOut: float64(m.NetBytesOut)}
		if n, ok := recs.write(v, i); ok {
			vals[mRecordsOut] = float64(n)
		}
		if r, ok := own[i]; ok && r.attempt == m.Attempt {
			vals[mBusy] = r.busy * 1000
			vals[mBackPressured] = r.ratio * 1000
			vals[mIdle] = r.idle * 1000
			vals[mBytesInRate], vals[mBytesOutRate] = r.bytesInRate, r.bytesOutRate
			switch {
			case v.Source():
				vals[mRecordsInRate] = 0
				vals[mRecordsOutRate] = r.inRate
			default:
				vals[mRecordsInRate] = r.inRate
				if len(v.Outputs) == 0 {
					vals[mRecordsOutRate] = 0
				}
			}
		}
		if forward {
			sum, ok := 0.0, true
			for _, d := range down {
				r, has := d[i]
				ok = ok && has
				sum += r.inRate
			}
			if ok {
				vals[mRecordsOutRate] = sum
			}
		}
		out = append(out, subtaskMetricValues{subtask: i, values: vals})
	}
	return out
}

// formatMetric writes a metric value as Flink does in its metric
// listings: integers without a fraction, watermarks in full.
func formatMetric(name string, v float64) string {
	if name == mCurrentWatermark || name == mRecordsIn || name == mRecordsOut || name == mBytesIn || name == mBytesOut {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// vertexMetrics is Flink's /jobs/:jobid/vertices/:vertexid/metrics: each
// subtask's metrics, named "<subtask>.<metric>".
func (s *Server) vertexMetrics(vid string, q url.Values) ([]metricEntry, error) {
	v, err := s.vertex(vid)
	if err != nil {
		return nil, err
	}
	var ids []string
	vals := map[string]string{}
	for _, st := range s.taskMetrics(v) {
		for _, name := range taskMetricNames {
			if x, ok := st.values[name]; ok {
				id := strconv.Itoa(st.subtask) + "." + name
				ids = append(ids, id)
				vals[id] = formatMetric(name, x)
			}
		}
	}
	return metricListOf(q, ids, vals), nil
}

// aggregatedMetric is Flink's AggregatedMetric: the aggregates asked for.
type aggregatedMetric struct {
	ID  string   `json:"id"`
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	Avg *float64 `json:"avg,omitempty"`
	Sum *float64 `json:"sum,omitempty"`
	// Skew is Flink's data skew: the mean absolute deviation over the
	// mean, as a percentage (at most 100; 0 when the mean is 0).
	Skew *float64 `json:"skew,omitempty"`
}

// aggregations are the values of Flink's agg parameter weir computes.
var aggregations = []string{"min", "max", "avg", "sum", "skew"}

// subtasksMetrics is Flink's /jobs/:jobid/vertices/:vertexid/subtasks/metrics:
// without ?get= the metric names the subtasks have; with ?get=a,b the
// aggregates (?agg=min,max,avg,sum,skew; default all) of a and b over the
// subtasks (?subtasks=0,2-3; default all) that have them.
func (s *Server) subtasksMetrics(vid string, q url.Values) (any, error) {
	v, err := s.vertex(vid)
	if err != nil {
		return nil, err
	}
	aggs := aggregations
	if a := q.Get("agg"); a != "" {
		aggs = nil
		for _, x := range strings.Split(a, ",") {
			x = strings.ToLower(strings.TrimSpace(x))
			if !slices.Contains(aggregations, x) {
				return nil, badRequest("unsupported aggregation %q: want min, max, avg, sum or skew", echo(x))
			}
			aggs = append(aggs, x)
		}
	}
	want, err := subtaskSet(q.Get("subtasks"))
	if err != nil {
		return nil, err
	}
	sts := s.taskMetrics(v)
	get := q.Get("get")
	if get == "" {
		out := []metricEntry{}
		for _, name := range taskMetricNames {
			for _, st := range sts {
				if _, ok := st.values[name]; ok && (want == nil || want[st.subtask]) {
					out = append(out, metricEntry{ID: name})
					break
				}
			}
		}
		return out, nil
	}
	out := []aggregatedMetric{}
	for _, name := range strings.Split(get, ",") {
		name = strings.TrimSpace(name)
		var xs []float64
		for _, st := range sts {
			if x, ok := st.values[name]; ok && (want == nil || want[st.subtask]) {
				xs = append(xs, x)
			}
		}
		if len(xs) == 0 {
			continue
		}
		am := aggregatedMetric{ID: name}
		sum := 0.0
		for _, x := range xs {
			sum += x
		}
		for _, a := range aggs {
			switch a {
			case "min":
				x := slices.Min(xs)
				am.Min = &x
			case "max":
				x := slices.Max(xs)
				am.Max = &x
			case "avg":
				x := sum / float64(len(xs))
				am.Avg = &x
			case "sum":
				x := sum
				am.Sum = &x
			case "skew":
				x := skew(xs, sum)
				am.Skew = &x
			}
		}
		out = append(out, am)
	}
	return out, nil
}

// skew is Flink's data skew of xs, whose sum is sum: the mean absolute
// deviation over the mean, in percent, at most 100, and 0 for a mean of
// 0.
func skew(xs []float64, sum float64) float64 {
	avg := sum / float64(len(xs))
	if avg == 0 {
		return 0
	}
	dev := 0.0
	for _, x := range xs {
		dev += math.Abs(avg - x)
	}
	return min(dev/float64(len(xs))/avg*100, 100)
}

// subtaskSet parses Flink's subtasks parameter ("0,2-3"); nil: all.
func subtaskSet(p string) (map[int]bool, error) {
	if p == "" {
		return nil, nil
	}
	set := map[int]bool{}
	for _, part := range strings.Split(p, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b-a > 1<<16 {
			return nil, badRequest("malformed subtasks %q: want indexes and ranges such as 0,2-3", echo(p))
		}
		for i := a; i <= b; i++ {
			set[i] = true
		}
	}
	return set, nil
}
