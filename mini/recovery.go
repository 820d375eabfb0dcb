package mini

import (
	"fmt"
	"maps"
)

// Restore returns an operator whose state is a copy of cp's "sum" snapshot,
// as a task redeployed after a failure receives it. Its Checkpoints map
// starts empty: snapshots belong to the run that took them.
func Restore(key KeyFunc, cp Checkpoint) *StatefulSumOperator {
	op := NewStatefulSumOperator(key)
	maps.Copy(op.sums, cp.OperatorStates[SumUID])
	return op
}

// ReplayFrom returns what a source replays when it is reset to position
// offset: the elements of elems that come after the offset-th event, in
// order. Markers that preceded that event are not replayed. The result
// shares no backing array with elems.
func ReplayFrom(elems []Element, offset int) []Element {
	if offset <= 0 {
		return append([]Element(nil), elems...)
	}
	events := 0
	for i, e := range elems {
		if _, ok := e.(Event); ok {
			events++
			if events == offset {
				return append([]Element(nil), elems[i+1:]...)
			}
		}
	}
	return nil
}

// Recovery is the record of a run that failed once and recovered.
type Recovery struct {
	// Before is what the operator emitted before the failure.
	Before []Element
	// Restored is the checkpoint recovery started from: the latest one
	// completed before the failure, or the empty checkpoint (ID 0, offset
	// 0) when none had completed.
	Restored Checkpoint
	// After is what the restored operator emitted while the source replayed
	// from Restored.SourceOffset to the end of the input.
	After []Element
	// Checkpoints are the checkpoints completed before the failure followed
	// by those completed after it.
	Checkpoints []Checkpoint
	// Final is the operator's state at the end of the input.
	Final map[string]int64
}

// Duplicates returns the outputs the outside world saw twice: the sums
// emitted after the restored barrier and before the failure. A sink that is
// not transactional writes them again after recovery; the state does not
// count them twice.
func (r Recovery) Duplicates() []Element {
	var dup []Element
	seen := r.Restored.ID == 0
	for _, e := range r.Before {
		if b, ok := e.(Barrier); ok && b.ID == r.Restored.ID {
			seen = true
			continue
		}
		if _, ok := e.(KeyedSum); ok && seen {
			dup = append(dup, e)
		}
	}
	return dup
}

// RunWithFailure runs the job of RunWithCheckpoints but loses the operator,
// with all its in-memory state, just before it would process event
// failAfter+1 (a barrier right behind event failAfter is still processed). It then recovers as Flink does: it takes the latest completed
// checkpoint k, restores the operator's state from it, resets the source to
// S_k and replays the rest of the input, injecting barriers again from id
// k+1 at the same positions as before. The failure-free run and the
// recovered one end in the same state and, from S_k on, emit the same sums.
//
// failAfter must be in [0, number of events]; otherwise RunWithFailure
// panics.
func RunWithFailure(elems []Element, key KeyFunc, barrierEvery int, failAfter int) Recovery {
	n := countEvents(elems)
	if failAfter < 0 || failAfter > n {
		panic(fmt.Sprintf("mini.RunWithFailure: failAfter must be in [0, %d], got %d", n, failAfter))
	}
	var r Recovery

	// The first attempt processes everything up to and including the
	// failAfter-th event, and the barrier right behind it if there is one:
	// the failure strikes just before the next event.
	op := NewStatefulSumOperator(key)
	r.Before, r.Checkpoints = runFrom(op, prefixEvents(elems, failAfter), barrierEvery, 1, 0)
	r.Restored = Checkpoint{OperatorStates: map[string]map[string]int64{SumUID: {}}}
	if len(r.Checkpoints) > 0 {
		r.Restored = r.Checkpoints[len(r.Checkpoints)-1]
	}

	// The second attempt starts from the restored cut.
	op = Restore(key, r.Restored)
	var after []Checkpoint
	r.After, after = runFrom(op, ReplayFrom(elems, r.Restored.SourceOffset), barrierEvery, r.Restored.ID+1, r.Restored.SourceOffset)
	r.Checkpoints = append(r.Checkpoints, after...)
	r.Final = op.Snapshot()
	return r
}

func countEvents(elems []Element) int {
	n := 0
	for _, e := range elems {
		if _, ok := e.(Event); ok {
			n++
		}
	}
	return n
}

// prefixEvents returns the elements of elems up to and including the n-th
// event, with the markers between them.
func prefixEvents(elems []Element, n int) []Element {
	if n == 0 {
		return nil
	}
	events := 0
	for i, e := range elems {
		if _, ok := e.(Event); ok {
			events++
			if events == n {
				return elems[: i+1 : i+1]
			}
		}
	}
	return elems
}
