package stream

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/internal/runtime"
)

// EventKind names a JobEvent.
type EventKind int

// The kinds of JobEvent.
const (
	// EventRunning: the job's subtasks are deployed.
	EventRunning EventKind = iota
	// EventCheckpointCompleted: Checkpoint completed (its metadata is
	// written).
	EventCheckpointCompleted
	// EventCheckpointFailed: Checkpoint was aborted; Message says why.
	EventCheckpointFailed
	// EventTaskFailed: Task failed with Err.
	EventTaskFailed
	// EventRestarting: the restart strategy allowed a restart of Tasks;
	// Message is its decision.
	EventRestarting
	// EventRestored: subtasks were redeployed from Checkpoint (0: from the
	// beginning); Message is the checkpoint's path.
	EventRestored
	// EventFinished: every subtask finished.
	EventFinished
	// EventFailed: the job failed for good with Err.
	EventFailed
)

var eventNames = [...]string{"RUNNING", "CHECKPOINT_COMPLETED", "CHECKPOINT_FAILED", "TASK_FAILED", "RESTARTING", "RESTORED", "FINISHED", "FAILED"}

func (k EventKind) String() string {
	if k >= 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// JobEvent is something that happened to a running job.
type JobEvent struct {
	Time       time.Time
	Kind       EventKind
	Checkpoint int64
	// Task is the subtask concerned (EventTaskFailed, EventRestarting).
	Task TaskInfo
	// Tasks are the subtasks a restart redeploys (EventRestarting).
	Tasks []TaskInfo
	Err   error
	// Message says more, in words (the restart decision, the abort
	// reason, the restored checkpoint's path).
	Message string
}

func (t TaskInfo) String() string { return fmt.Sprintf("%s[%d]", t.Vertex, t.Subtask) }

// jobEvent converts the runtime's event.
func jobEvent(e runtime.Event) JobEvent {
	out := JobEvent{Time: e.Time, Kind: EventKind(e.Kind), Checkpoint: e.Checkpoint,
		Task: TaskInfo{Vertex: e.Task.Vertex, Subtask: e.Task.Subtask}, Err: e.Err, Message: e.Message}
	for _, t := range e.Tasks {
		out.Tasks = append(out.Tasks, TaskInfo{Vertex: t.Vertex, Subtask: t.Subtask})
	}
	return out
}
