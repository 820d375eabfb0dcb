package coordinator

import (
	"math"

	"github.com/weirstream/weir/internal/checkpoint"
)

// failureCounter decides when checkpoint failures fail the job, as Flink's
// CheckpointFailureManager does:
//
//   - only reasons that are Counted count, each checkpoint at most once;
//   - a failure on the coordinator's side (expiry, a failed metadata
//     write) does not count for a savepoint: a manual action that a
//     failover would not help; a task's decline of a savepoint counts;
//   - a failure of a checkpoint older than the newest completed one does
//     not count;
//   - a completed checkpoint or savepoint newer than the last resets the
//     count;
//   - when the count exceeds the tolerable number, the job fails and the
//     count starts again from zero.
type failureCounter struct {
	tolerable     int
	count         int
	counted       map[int64]bool
	lastSucceeded int64
}

func newFailureCounter(tolerable int) failureCounter {
	return failureCounter{tolerable: tolerable, counted: map[int64]bool{}, lastSucceeded: math.MinInt64}
}

// failure records the failure of checkpoint id and reports whether the job
// must fail. taskSide is true for a task's decline.
func (f *failureCounter) failure(id int64, kind checkpoint.Kind, r Reason, taskSide bool) (fail bool) {
	if !taskSide && kind == checkpoint.KindSavepoint {
		return false
	}
	if id <= f.lastSucceeded || !r.Counted() {
		return false
	}
	if !f.counted[id] {
		f.counted[id] = true
		f.count++
	}
	if f.count > f.tolerable {
		f.reset()
		return true
	}
	return false
}

func (f *failureCounter) success(id int64) {
	if id > f.lastSucceeded {
		f.lastSucceeded = id
		f.reset()
	}
}

func (f *failureCounter) reset() {
	f.count = 0
	clear(f.counted)
}
