package web

import (
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Backpressure levels and their bounds, Flink's: a subtask is OK up to a
// ratio of 0.10, LOW up to 0.5, HIGH above.
const (
	levelOK   = "ok"
	levelLow  = "low"
	levelHigh = "high"

	lowRatio  = 0.10
	highRatio = 0.5
)

func level(ratio float64) string {
	switch {
	case ratio > highRatio:
		return levelHigh
	case ratio > lowRatio:
		return levelLow
	}
	return levelOK
}

// sampler keeps the last two readings of each subtask's backpressured
// time, so that a ratio covers the last sampling interval. A reading of
// another attempt than the one before starts the subtask over: the
// counters of a redeployed subtask begin at zero.
type sampler struct {
	jm Master

	mu   sync.Mutex
	last map[checkpoint.TaskID]*samplePair
	at   time.Time // time of the newest sample
}

type sampleReading struct {
	at      time.Time
	attempt int
	// out is the subtask's own backpressured time: the nanoseconds it
	// waited for room in its output channels.
	out int64
	// idle is the nanoseconds it waited for input.
	idle int64
	// in is the records it received (a source: emitted).
	in int64
	// bytesIn and bytesOut are the bytes it received and sent on
	// channels to and from other processes.
	bytesIn, bytesOut int64
}

type samplePair struct {
	prev, cur *sampleReading
}

func newSampler(jm Master) *sampler {
	return &sampler{jm: jm, last: map[checkpoint.TaskID]*samplePair{}}
}

func (s *sampler) sample(now time.Time) {
	ms := s.jm.SubtaskMetrics()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = now
	for _, m := range ms {
		r := &sampleReading{at: now, attempt: m.Attempt, out: m.OutBackpressuredNanos, idle: m.IdleNanos, in: m.RecordsIn, bytesIn: m.NetBytesIn, bytesOut: m.NetBytesOut}
		p := s.last[m.Task]
		if p == nil {
			s.last[m.Task] = &samplePair{cur: r}
			continue
		}
		if p.cur.attempt == m.Attempt && r.out >= p.cur.out && r.in >= p.cur.in {
			p.prev = p.cur
		} else {
			p.prev = nil
		}
		p.cur = r
	}
}

// subtaskRatio is a subtask's backpressured, idle and busy ratios over
// the last interval, and the records it received and the network bytes
// it received and sent per second.
type subtaskRatio struct {
	task                      checkpoint.TaskID
	attempt                   int
	ratio, idle, busy         float64
	inRate                    float64
	bytesInRate, bytesOutRate float64
}

// ratios returns the ratios of the subtasks of vertex uid that have two
// readings of one attempt, and the time of the newest sample.
func (s *sampler) ratios(uid string, parallelism int) ([]subtaskRatio, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []subtaskRatio
	for i := range parallelism {
		id := checkpoint.TaskID{Vertex: uid, Subtask: i}
		p := s.last[id]
		if p == nil || p.prev == nil {
			continue
		}
		dt := p.cur.at.Sub(p.prev.at)
		if dt <= 0 {
			continue
		}
		r := min(max(float64(p.cur.out-p.prev.out)/float64(dt), 0), 1)
		idle := min(max(float64(p.cur.idle-p.prev.idle)/float64(dt), 0), 1-r)
		secs := dt.Seconds()
		out = append(out, subtaskRatio{task: id, attempt: p.cur.attempt, ratio: r, idle: idle, busy: max(1-r-idle, 0),
			inRate:      float64(p.cur.in-p.prev.in) / secs,
			bytesInRate: float64(p.cur.bytesIn-p.prev.bytesIn) / secs, bytesOutRate: float64(p.cur.bytesOut-p.prev.bytesOut) / secs})
	}
	return out, s.at
}

// backpressureInfo is Flink's JobVertexBackPressureInfo. Status is
// "deprecated" (and nothing else is set) until two samples exist, "ok"
// after. The level is given twice, under Flink's old and new names.
type backpressureInfo struct {
	Status            string                `json:"status"`
	BackpressureLevel string                `json:"backpressure-level,omitempty"`
	Level             string                `json:"backpressureLevel,omitempty"`
	EndTimestamp      int64                 `json:"end-timestamp,omitempty"`
	Subtasks          []subtaskBackpressure `json:"subtasks,omitempty"`
}

// subtaskBackpressure is Flink's SubtaskBackPressureInfo. Over the last
// sampling interval, Ratio is the fraction the subtask spent waiting for
// room in its output channels (backpressured), IdleRatio the fraction it
// waited for input, and BusyRatio the rest: processing.
type subtaskBackpressure struct {
	Subtask           int     `json:"subtask"`
	AttemptNumber     int     `json:"attempt-number"`
	BackpressureLevel string  `json:"backpressure-level"`
	Level             string  `json:"backpressureLevel"`
	Ratio             float64 `json:"ratio"`
	IdleRatio         float64 `json:"idleRatio"`
	BusyRatio         float64 `json:"busyRatio"`
}

func (s *Server) backpressure(vid string) (backpressureInfo, error) {
	v, err := s.vertex(vid)
	if err != nil {
		return backpressureInfo{}, err
	}
	rs, at := s.sampler.ratios(v.UID, v.Parallelism)
	if len(rs) == 0 {
		return backpressureInfo{Status: "deprecated"}, nil
	}
	info := backpressureInfo{Status: "ok", EndTimestamp: at.UnixMilli()}
	worst := 0.0
	for _, r := range rs {
		l := level(r.ratio)
		info.Subtasks = append(info.Subtasks, subtaskBackpressure{
			Subtask: r.task.Subtask, AttemptNumber: r.attempt, BackpressureLevel: l, Level: l, Ratio: r.ratio,
			IdleRatio: r.idle, BusyRatio: r.busy,
		})
		worst = max(worst, r.ratio)
	}
	info.BackpressureLevel = level(worst)
	info.Level = info.BackpressureLevel
	return info, nil
}
