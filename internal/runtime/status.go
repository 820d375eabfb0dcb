package runtime

import (
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// JobStatus is a job's state, by Flink's JobStatus names.
type JobStatus string

// The job states a JobMaster goes through.
const (
	// StatusCreated: the job master exists and has not deployed yet.
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

// Failure is one failure of a job: a subtask's, or the job's own (a
// checkpoint failure beyond the tolerable number), which Task leaves zero.
type Failure struct {
	Time time.Time
	Task checkpoint.TaskID
	// Err is the failure's cause.
	Err error
	// Restarted says whether the restart strategy restarted the job; when
	// false the failure ended it.
	Restarted bool
}

// maxFailureHistory bounds the failures a job master keeps (Flink's
// web.exception-history-size default).
const maxFailureHistory = 16

// history is a job master's status and its latest failures. Its methods
// may be called from any goroutine.
type history struct {
	mu     sync.Mutex
	status JobStatus
	since  time.Time
	before JobStatus // the status before the terminal one

	failures []Failure // oldest first, at most maxFailureHistory
	total    int
}

func (h *history) set(s JobStatus, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.status.Terminal() {
		return
	}
	if h.status != s {
		if s.Terminal() {
			h.before = h.status
		}
		h.status, h.since = s, now
	}
}

func (h *history) fail(f Failure) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total++
	h.failures = append(h.failures, f)
	if len(h.failures) > maxFailureHistory {
		h.failures = h.failures[len(h.failures)-maxFailureHistory:]
	}
}

// Status returns the job's current status and since when it has held.
func (jm *JobMaster) Status() (JobStatus, time.Time) {
	jm.hist.mu.Lock()
	defer jm.hist.mu.Unlock()
	if jm.hist.status == "" {
		return StatusCreated, time.Time{}
	}
	return jm.hist.status, jm.hist.since
}

// EndedFrom returns the status the job was in when it ended (RUNNING,
// RESTARTING, FAILING), or "" while it runs.
func (jm *JobMaster) EndedFrom() JobStatus {
	jm.hist.mu.Lock()
	defer jm.hist.mu.Unlock()
	return jm.hist.before
}

// Failures returns the job's latest failures, newest first, and how many
// there have been in all.
func (jm *JobMaster) Failures() ([]Failure, int) {
	jm.hist.mu.Lock()
	defer jm.hist.mu.Unlock()
	out := make([]Failure, len(jm.hist.failures))
	for i, f := range jm.hist.failures {
		out[len(out)-1-i] = f
	}
	return out, jm.hist.total
}
