package coordinator

import (
	"errors"
	"fmt"
)

// Reason says why a checkpoint failed or could not be triggered. It mirrors
// the part of Flink's CheckpointFailureReason that weir can produce, and it
// is an error itself, so a task declines with a Reason, or with an error
// that wraps one:
//
//	c.Decline(now, task, id, coordinator.ReasonTaskNotReady)
//	c.Decline(now, task, id, fmt.Errorf("upload chk-7/x: %w", coordinator.ReasonAsyncFailure))
//
// A decline whose error wraps no Reason is ReasonDeclined.
//
// Counted reports whether a failure for this reason counts towards
// execution.checkpointing.tolerable-failed-checkpoints, as in Flink's
// CheckpointFailureManager: expiry, a decline, an asynchronous snapshot
// failure and an I/O failure on the coordinator side count; everything that
// says the job or the task was busy, finishing, failing over or shutting
// down does not, and neither does subsumption.
type Reason int

const (
	// ReasonExpired: the checkpoint did not complete within
	// execution.checkpointing.timeout (Flink's CHECKPOINT_EXPIRED). Counted.
	ReasonExpired Reason = iota + 1
	// ReasonDeclined: a task declined without a more specific reason
	// (CHECKPOINT_DECLINED). Counted.
	ReasonDeclined
	// ReasonAsyncFailure: a task failed to write its snapshot in the
	// asynchronous phase (CHECKPOINT_ASYNC_EXCEPTION). Counted.
	ReasonAsyncFailure
	// ReasonIO: the coordinator could not write the checkpoint's metadata
	// (IO_EXCEPTION). Counted for checkpoints, not for savepoints.
	ReasonIO
	// ReasonTaskNotReady: a task was not ready to snapshot, for example
	// still restoring (CHECKPOINT_DECLINED_TASK_NOT_READY). Not counted.
	ReasonTaskNotReady
	// ReasonTaskClosing: a task was closing or had finished when the
	// barrier or trigger reached it (CHECKPOINT_DECLINED_TASK_CLOSING). Not
	// counted.
	ReasonTaskClosing
	// ReasonInputEndOfStream: an input of the task ended before the
	// barrier arrived on it (CHECKPOINT_DECLINED_INPUT_END_OF_STREAM). Not
	// counted.
	ReasonInputEndOfStream
	// ReasonNewerBarrier: a task saw the barrier of a newer checkpoint
	// before finishing this one (CHECKPOINT_DECLINED_SUBSUMED). Not counted.
	ReasonNewerBarrier
	// ReasonCancellationBarrier: a task received a cancellation barrier
	// from an input (CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER). Not
	// counted.
	ReasonCancellationBarrier
	// ReasonTaskFailure: the task failed while taking its synchronous
	// snapshot (TASK_CHECKPOINT_FAILURE). Not counted: the task failure
	// itself fails the job over.
	ReasonTaskFailure
	// ReasonSubsumed: a newer checkpoint completed first
	// (CHECKPOINT_SUBSUMED). Not counted.
	ReasonSubsumed
	// ReasonJobFailover: the job failed over (JOB_FAILOVER_REGION). Not
	// counted.
	ReasonJobFailover
	// ReasonSuspended: checkpointing was suspended because the job is
	// failing (CHECKPOINT_COORDINATOR_SUSPEND). Not counted.
	ReasonSuspended
	// ReasonShutdown: the coordinator was stopped
	// (CHECKPOINT_COORDINATOR_SHUTDOWN). Not counted.
	ReasonShutdown
	// ReasonTooManyConcurrent: a manual checkpoint was requested while
	// execution.checkpointing.max-concurrent-checkpoints were in progress
	// (TOO_MANY_CONCURRENT_CHECKPOINTS). Returned by TriggerManual only.
	ReasonTooManyConcurrent
	// ReasonNotAllTasksRunning: the job is not running, or no task that
	// could receive the trigger is left (NOT_ALL_REQUIRED_TASKS_RUNNING).
	// Returned by TriggerManual only.
	ReasonNotAllTasksRunning
)

var reasonText = map[Reason]string{
	ReasonExpired:             "checkpoint expired before completing",
	ReasonDeclined:            "checkpoint was declined",
	ReasonAsyncFailure:        "asynchronous task checkpoint failed",
	ReasonIO:                  "writing the checkpoint metadata failed",
	ReasonTaskNotReady:        "checkpoint was declined (task not ready)",
	ReasonTaskClosing:         "checkpoint was declined (task is closing)",
	ReasonInputEndOfStream:    "checkpoint was declined because an input stream ended",
	ReasonNewerBarrier:        "checkpoint was canceled because a barrier of a newer checkpoint arrived",
	ReasonCancellationBarrier: "task received a cancellation barrier from an input",
	ReasonTaskFailure:         "task failed taking its snapshot",
	ReasonSubsumed:            "checkpoint has been subsumed",
	ReasonJobFailover:         "the job failed over",
	ReasonSuspended:           "checkpointing is suspended",
	ReasonShutdown:            "checkpoint coordinator is shut down",
	ReasonTooManyConcurrent:   "the maximum number of concurrent checkpoints is exceeded",
	ReasonNotAllTasksRunning:  "not all required tasks are currently running",
}

var reasonName = map[Reason]string{
	ReasonExpired:             "expired",
	ReasonDeclined:            "declined",
	ReasonAsyncFailure:        "async-failure",
	ReasonIO:                  "io",
	ReasonTaskNotReady:        "task-not-ready",
	ReasonTaskClosing:         "task-closing",
	ReasonInputEndOfStream:    "input-end-of-stream",
	ReasonNewerBarrier:        "newer-barrier",
	ReasonCancellationBarrier: "cancellation-barrier",
	ReasonTaskFailure:         "task-failure",
	ReasonSubsumed:            "subsumed",
	ReasonJobFailover:         "job-failover",
	ReasonSuspended:           "suspended",
	ReasonShutdown:            "shutdown",
	ReasonTooManyConcurrent:   "too-many-concurrent",
	ReasonNotAllTasksRunning:  "not-all-tasks-running",
}

// Error returns the reason's message, which the REST API shows as a failed
// checkpoint's failure_message.
func (r Reason) Error() string {
	if s, ok := reasonText[r]; ok {
		return s
	}
	return fmt.Sprintf("checkpoint failure reason %d", int(r))
}

// String returns the reason's short name, such as "expired".
func (r Reason) String() string {
	if s, ok := reasonName[r]; ok {
		return s
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// ParseReason returns the Reason whose String is name.
func ParseReason(name string) (Reason, bool) {
	for r, s := range reasonName {
		if s == name {
			return r, true
		}
	}
	return 0, false
}

// Counted reports whether a checkpoint failure for this reason counts
// towards the tolerable failure threshold.
func (r Reason) Counted() bool {
	switch r {
	case ReasonExpired, ReasonDeclined, ReasonAsyncFailure, ReasonIO:
		return true
	}
	return false
}

// ReasonOf returns the Reason err wraps, or ReasonDeclined when it wraps
// none (Flink treats a decline without a specific reason as
// CHECKPOINT_DECLINED).
func ReasonOf(err error) Reason {
	var r Reason
	if errors.As(err, &r) {
		return r
	}
	return ReasonDeclined
}

// AbortError is the reason a pending checkpoint was aborted, as carried by
// NotifyAbort and recorded in the statistics.
type AbortError struct {
	ID     int64
	Reason Reason
	// Cause is the error a task declined with or the metadata write
	// failed with; nil for expiry, subsumption, failover and shutdown.
	Cause error
}

func (e *AbortError) Error() string {
	return fmt.Sprintf("checkpoint %d aborted: %s", e.ID, e.Message())
}

// Message is the failure without the checkpoint id: the reason and, when
// it adds something, the cause. The statistics show it as failure_message.
func (e *AbortError) Message() string {
	switch {
	case e.Cause == nil:
		return e.Reason.Error()
	case errors.Is(e.Cause, e.Reason):
		return e.Cause.Error()
	}
	return e.Reason.Error() + ": " + e.Cause.Error()
}

// Unwrap returns the Reason and the cause, so errors.Is(err, ReasonExpired)
// and errors.Is(err, cause) both hold.
func (e *AbortError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Cause}
}

// Errors returned when an input is ignored. None of them is a checkpoint
// failure; they say why the message had no effect, for logs and tests.
var (
	// ErrUnknownCheckpoint: the message names a checkpoint id that was
	// never triggered, or a checkpoint that is not waiting for what the
	// message reports (metadata for a checkpoint still collecting acks).
	ErrUnknownCheckpoint = errors.New("unknown checkpoint")
	// ErrLate: the checkpoint is no longer pending; it completed or was
	// aborted before the message arrived.
	ErrLate = errors.New("checkpoint is no longer pending")
	// ErrDuplicateAck: the task already acknowledged the checkpoint.
	ErrDuplicateAck = errors.New("duplicate acknowledgement")
	// ErrUnknownTask: the task is not one the checkpoint waits for (not a
	// task of the job, or one that had finished when it was triggered).
	ErrUnknownTask = errors.New("task is not part of the checkpoint")
	// ErrStopped: the coordinator was stopped.
	ErrStopped = errors.New("checkpoint coordinator is stopped")
	// ErrTolerableFailuresExceeded is the reason of FailJob: more
	// consecutive checkpoints failed than
	// execution.checkpointing.tolerable-failed-checkpoints allows (Flink:
	// "Exceeded checkpoint tolerable failure threshold.").
	ErrTolerableFailuresExceeded = errors.New("exceeded checkpoint tolerable failure threshold")
)
