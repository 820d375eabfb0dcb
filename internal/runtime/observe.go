package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
)

// SubtaskMetrics are one subtask's counters, read while it runs.
type SubtaskMetrics struct {
	Task checkpoint.TaskID
	// RecordsIn counts records received (sources: records emitted).
	RecordsIn int64
	// Watermark is the subtask's event time (MinWatermark before any).
	Watermark int64
	// BackpressuredNanos is how long the subtask's producers waited on
	// its input channels (time its upstream was backpressured by it).
	BackpressuredNanos int64
	// OutBackpressuredNanos is how long this subtask waited on its output
	// channels: its own backpressured time.
	OutBackpressuredNanos int64
	// IdleNanos is how long the subtask waited for input (or, for a
	// source, for its fetcher): the rest of its time it was busy or
	// backpressured.
	IdleNanos int64
	// NetBytesIn and NetBytesOut are the bytes the subtask received and
	// sent on channels to and from other processes (frame headers
	// included). Channels within a process carry records in memory,
	// unserialized, and count no bytes: the counts are all of the
	// subtask's traffic only when NetInAll (NetOutAll) says every one of
	// its input (output) channels crosses processes, which holds
	// trivially for a subtask without any.
	NetBytesIn, NetBytesOut int64
	NetInAll, NetOutAll     bool
	// LastCheckpoint is the newest checkpoint the subtask snapshotted.
	LastCheckpoint int64
	Attempt        int
	// RestoredLocalBytes and RestoredRemoteBytes are, for a deployment
	// restored with local recovery (execution.state-recovery.from-local),
	// the bytes of state files read from the task manager's local copies
	// and from checkpoint storage.
	RestoredLocalBytes, RestoredRemoteBytes int64
	// Deployed is when this attempt of the subtask was deployed, in Unix
	// milliseconds: it runs from then on.
	Deployed int64
	// TaskManager is the id of the task manager the subtask runs in, ""
	// when it runs in the job's own process.
	TaskManager string
	// InFlightLimit is, with buffer debloating, the most records each of
	// the subtask's input channels holds (0: debloating is off, or the
	// subtask has no inputs).
	InFlightLimit int64
	// BarrierInFlightMax is the most records queued ahead of an aligned
	// barrier on one of the subtask's input channels when the barrier was
	// queued there: records the subtask processed before it could take
	// that barrier.
	BarrierInFlightMax int64
}

// Graph returns the job graph (not to be modified).
func (jm *JobMaster) Graph() *JobGraph { return jm.graph }

// JobID returns the job's id.
func (jm *JobMaster) JobID() string { return jm.opts.JobID }

// SubtaskMetrics returns every current subtask's counters. It may be
// called from any goroutine.
func (jm *JobMaster) SubtaskMetrics() []SubtaskMetrics { return jm.exec.SubtaskMetrics() }

// ErrNotRunning is returned by queries to a job master that has stopped.
var ErrNotRunning = errors.New("runtime: the job is not running")

// query runs f on the job master's goroutine and waits for it.
func (jm *JobMaster) query(ctx context.Context, f func()) error {
	done := make(chan struct{})
	jm.post(func() error { f(); close(done); return nil })
	select {
	case <-done:
		return nil
	case <-jm.stopped:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CheckpointStats returns the coordinator's statistics: counts, summary,
// latest and history with per-subtask details, in Flink's REST terms. It
// is nil-safe: a job without checkpointing returns ok=false.
func (jm *JobMaster) CheckpointStats(ctx context.Context) (s coordinator.Snapshot, ok bool, err error) {
	if jm.coord == nil {
		return s, false, nil
	}
	if jm.final.Load() != nil {
		return *jm.final.Load(), true, nil
	}
	err = jm.query(ctx, func() { s = jm.coord.Stats() })
	return s, err == nil, err
}

// keepFinalStats keeps the last statistics once the job master stops, so
// that they can still be read.
func (jm *JobMaster) keepFinalStats() {
	if jm.coord != nil {
		s := jm.coord.Stats()
		jm.final.Store(&s)
	}
}

// Started returns when the job started running (the zero time before).
func (jm *JobMaster) Started() time.Time {
	if n := jm.startedAt.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// PositionReporter is implemented by source drivers that can tell, from
// any goroutine, the offset of the next record of each split.
type PositionReporter interface {
	Positions() map[string]int64
}

// SourcePositions returns the current position of every split of every
// running source subtask: vertex uid → split → offset of the next record.
func (jm *JobMaster) SourcePositions() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for id, ps := range jm.exec.SourcePositions() {
		m := out[id.Vertex]
		if m == nil {
			m = map[string]int64{}
			out[id.Vertex] = m
		}
		for split, off := range ps {
			m[split] = off
		}
	}
	return out
}
