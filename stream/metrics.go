package stream

import (
	"time"

	"github.com/weirstream/weir/internal/runtime"
)

// JobMetrics is a point-in-time view of a running job.
type JobMetrics struct {
	// RecordsIn counts the records the sources emitted, RecordsOut those
	// the sinks received, over the current deployment.
	RecordsIn, RecordsOut int64
	// Watermark is the lowest event time of the subtasks that have
	// inputs, in Unix milliseconds: math.MinInt64 before any watermark,
	// math.MaxInt64 once event time is complete.
	Watermark int64
	Restarts  int
	// LastCheckpoint is the latest completed checkpoint (ID 0: none).
	LastCheckpoint CompletedCheckpoint
	// Status is the job's status; Failures counts its failures, the
	// newest of which is LastFailure (nil: none).
	Status JobStatus
	// EndedFrom is the status the job ended from ("" while it runs).
	EndedFrom   JobStatus
	Failures    int
	LastFailure *JobFailure
}

// CompletedCheckpoint is a checkpoint the job completed.
type CompletedCheckpoint struct {
	ID       int64
	Duration time.Duration // trigger to completion
	Size     int64         // bytes of state
	At       time.Time
}

// JobStatus is a job's state, by Flink's JobStatus names.
type JobStatus string

// The states a job goes through.
const (
	// StatusCreated: the job exists and has not deployed yet.
	StatusCreated JobStatus = "CREATED"
	// StatusRunning: every subtask that has not finished is deployed.
	StatusRunning JobStatus = "RUNNING"
	// StatusRestarting: a subtask failed and the restart strategy allowed
	// a restart; the failed subtasks are being canceled or are waiting
	// for the restart delay.
	StatusRestarting JobStatus = "RESTARTING"
	// StatusFailing: the job is failing for good; its subtasks are being
	// canceled.
	StatusFailing JobStatus = "FAILING"
	// StatusFailed: the job failed for good.
	StatusFailed JobStatus = "FAILED"
	// StatusCanceled: the job was canceled (its context ended).
	StatusCanceled JobStatus = "CANCELED"
	// StatusFinished: every subtask finished.
	StatusFinished JobStatus = "FINISHED"
)

// Terminal reports whether the job has ended in s.
func (s JobStatus) Terminal() bool {
	return s == StatusFailed || s == StatusCanceled || s == StatusFinished
}

// JobFailure is one failure of a job: a subtask's, or the job's own (a
// checkpoint failure beyond the tolerable number), which Task leaves zero.
type JobFailure struct {
	Time time.Time
	Task TaskInfo
	// Err is the failure's cause.
	Err error
	// Restarted says whether the restart strategy restarted the job; when
	// false the failure ended it.
	Restarted bool
}

// jobMetrics converts the runtime's metrics.
func jobMetrics(m runtime.Metrics) JobMetrics {
	out := JobMetrics{
		RecordsIn: m.RecordsIn, RecordsOut: m.RecordsOut, Watermark: m.Watermark, Restarts: m.Restarts,
		LastCheckpoint: CompletedCheckpoint{ID: m.LastCheckpoint.ID, Duration: m.LastCheckpoint.Duration, Size: m.LastCheckpoint.Size, At: m.LastCheckpoint.At},
		Status:         JobStatus(m.Status), EndedFrom: JobStatus(m.EndedFrom), Failures: m.Failures,
	}
	if f := m.LastFailure; f != nil {
		out.LastFailure = &JobFailure{Time: f.Time, Task: TaskInfo{Vertex: f.Task.Vertex, Subtask: f.Task.Subtask}, Err: f.Err, Restarted: f.Restarted}
	}
	return out
}
