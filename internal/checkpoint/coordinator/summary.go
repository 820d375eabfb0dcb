package coordinator

import (
	"math"
	"slices"
)

// StatsSummary summarizes a measurement over many checkpoints or subtasks:
// Flink's StatsSummaryDto. Min, Max and Avg (integer division, as in
// Flink) cover every value; the percentiles cover the values in the
// summarizer's window.
type StatsSummary struct {
	Min  int64   `json:"min"`
	Max  int64   `json:"max"`
	Avg  int64   `json:"avg"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

// summaryWindow is how many recent completed checkpoints the percentiles of
// the job-wide summary are computed over (min, max and avg cover all).
const summaryWindow = 10_000

// summarizer accumulates values for a StatsSummary. Negative values mean
// "unknown" and are skipped, as in Flink's StatsSummary.
type summarizer struct {
	n, sum, min, max int64
	window           []int64 // ring of the most recent values
	next             int
	limit            int
}

func newSummarizer(limit int) summarizer { return summarizer{limit: limit} }

func (s *summarizer) add(v int64) {
	if v < 0 {
		return
	}
	if s.n == 0 {
		s.min, s.max = v, v
	} else {
		s.min, s.max = min(s.min, v), max(s.max, v)
	}
	s.n++
	s.sum += v
	if len(s.window) < s.limit {
		s.window = append(s.window, v)
		return
	}
	s.window[s.next] = v
	s.next = (s.next + 1) % s.limit
}

func (s *summarizer) summary() StatsSummary {
	if s.n == 0 {
		return StatsSummary{}
	}
	sorted := slices.Clone(s.window)
	slices.Sort(sorted)
	return StatsSummary{
		Min:  s.min,
		Max:  s.max,
		Avg:  s.sum / s.n,
		P50:  quantile(sorted, 0.50),
		P90:  quantile(sorted, 0.90),
		P95:  quantile(sorted, 0.95),
		P99:  quantile(sorted, 0.99),
		P999: quantile(sorted, 0.999),
	}
}

// summarize summarizes a small set of values exactly.
func summarize(values []int64) StatsSummary {
	s := newSummarizer(len(values))
	for _, v := range values {
		s.add(v)
	}
	return s.summary()
}

// quantile estimates the q-quantile (0 < q < 1) of sorted values the way
// Flink's DescriptiveStatisticsHistogram does (Apache Commons Math's
// default Percentile estimation): position q·(n+1), linear interpolation
// between the neighbouring values, clamped to the smallest and largest.
func quantile(sorted []int64, q float64) float64 {
	n := len(sorted)
	switch n {
	case 0:
		return 0
	case 1:
		return float64(sorted[0])
	}
	pos := q * float64(n+1)
	if pos < 1 {
		return float64(sorted[0])
	}
	if pos >= float64(n) {
		return float64(sorted[n-1])
	}
	fpos := math.Floor(pos)
	lower := float64(sorted[int(fpos)-1])
	upper := float64(sorted[int(fpos)])
	return lower + (pos-fpos)*(upper-lower)
}
