package mini

import (
	"fmt"
	"maps"
)

// InjectBarriers returns a new slice holding elems with a Barrier inserted
// after every every-th Event, with ids startID, startID+1, ... . Markers
// already present (watermarks, barriers) are copied through in place and do
// not advance the count. elems is not modified. A barrier that would follow
// the last event is still inserted: the cut after the whole input is a cut
// like any other.
//
// InjectBarriers panics if every < 1.
func InjectBarriers(elems []Element, every int, startID int64) []Element {
	if every < 1 {
		panic(fmt.Sprintf("mini.InjectBarriers: every must be >= 1, got %d", every))
	}
	out := make([]Element, 0, len(elems)+len(elems)/every+1)
	id := startID
	events := 0
	for _, e := range elems {
		out = append(out, e)
		if _, ok := e.(Event); !ok {
			continue
		}
		events++
		if events%every == 0 {
			out = append(out, Barrier{ID: id})
			id++
		}
	}
	return out
}

// StatefulSumOperator keeps a running sum of Event.Value per key and
// snapshots its state at every barrier.
//
// For an Event it adds the value to the sum of key(event) and emits
// KeyedSum{key, sum}. For a Barrier it stores a copy of the state in
// Checkpoints[id] and forwards the barrier. A Watermark is forwarded
// unchanged. Events processed after a barrier never change that barrier's
// snapshot.
type StatefulSumOperator struct {
	// Checkpoints maps a barrier id to a snapshot of the per-key sums taken
	// at that barrier.
	Checkpoints map[int64]map[string]int64

	key  KeyFunc
	sums map[string]int64
}

// NewStatefulSumOperator returns an operator with empty state that sums
// events under key(event).
func NewStatefulSumOperator(key KeyFunc) *StatefulSumOperator {
	return &StatefulSumOperator{
		Checkpoints: make(map[int64]map[string]int64),
		key:         key,
		sums:        make(map[string]int64),
	}
}

// Process applies one input element and returns what the operator emits for
// it, in order.
func (o *StatefulSumOperator) Process(e Element) []Element {
	switch e := e.(type) {
	case Event:
		return []Element{o.apply(e)}
	case Barrier:
		o.Checkpoints[e.ID] = o.Snapshot()
		return []Element{e}
	case Watermark:
		return []Element{e}
	case EndOfInput:
		return []Element{e}
	case KeyedSum:
		panic("mini: StatefulSumOperator cannot consume its own output KeyedSum")
	}
	panic(fmt.Sprintf("mini: unknown element %T", e))
}

func (o *StatefulSumOperator) apply(e Event) KeyedSum {
	k := o.key(e)
	o.sums[k] += e.Value
	return KeyedSum{Key: k, Sum: o.sums[k]}
}

// Snapshot returns a copy of the current per-key sums. The copy shares
// nothing with the operator: later events do not change it.
func (o *StatefulSumOperator) Snapshot() map[string]int64 {
	return maps.Clone(o.sums)
}

// Checkpoint is one completed checkpoint of a single-source job: the state
// of every operator at the barrier and the source's position S_n.
type Checkpoint struct {
	ID int64
	// OperatorStates maps an operator's uid to its snapshot; the sum
	// operator's uid is "sum".
	OperatorStates map[string]map[string]int64
	// SourceOffset is the number of data events the source had emitted
	// before barrier ID: replay after a restore starts at this event.
	SourceOffset int
}

// SumUID is the uid under which RunWithCheckpoints records the sum
// operator's state in Checkpoint.OperatorStates.
const SumUID = "sum"

// RunWithCheckpoints injects a barrier after every barrierEvery events (ids
// from 1), runs a fresh StatefulSumOperator over the result and returns
// everything it emitted (sums, barriers and watermarks, in order) and one
// Checkpoint per barrier, in barrier order.
func RunWithCheckpoints(elems []Element, key KeyFunc, barrierEvery int) (outputs []Element, checkpoints []Checkpoint) {
	return runFrom(NewStatefulSumOperator(key), elems, barrierEvery, 1, 0)
}

// runFrom runs op over elems (a source's records starting at source position
// offset) with barriers injected every barrierEvery events from id firstID.
func runFrom(op *StatefulSumOperator, elems []Element, barrierEvery int, firstID int64, offset int) ([]Element, []Checkpoint) {
	var outputs []Element
	var checkpoints []Checkpoint
	consumed := offset
	for _, e := range InjectBarriers(elems, barrierEvery, firstID) {
		if _, ok := e.(Event); ok {
			consumed++
		}
		outputs = append(outputs, op.Process(e)...)
		if b, ok := e.(Barrier); ok {
			checkpoints = append(checkpoints, Checkpoint{
				ID:             b.ID,
				OperatorStates: map[string]map[string]int64{SumUID: op.Checkpoints[b.ID]},
				SourceOffset:   consumed,
			})
		}
	}
	return outputs, checkpoints
}

// Fold is the batch oracle: the per-key sums of the first n events of elems
// (markers are skipped and do not count). n larger than the number of events
// folds them all.
func Fold(elems []Element, key KeyFunc, n int) map[string]int64 {
	sums := make(map[string]int64)
	for _, e := range elems {
		if n <= 0 {
			break
		}
		if ev, ok := e.(Event); ok {
			sums[key(ev)] += ev.Value
			n--
		}
	}
	return sums
}
