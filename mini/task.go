package mini

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/weirstream/weir/config"
)

// Task is an operator task with several input channels: a Handler in front
// of a StatefulSumOperator, plus the watermark valve that combines the
// inputs' watermarks (an operator's event time is the minimum over its
// inputs that have not ended). It is the executable form of the alignment
// rules, and the engine's barrier handler is checked against its
// transcripts.
type Task struct {
	names   []string
	handler *Handler
	op      *StatefulSumOperator
	wm      []int64
	outWM   int64
	live    int

	// Output is everything the task emitted downstream, in order: sums,
	// barriers, watermarks and, once every input has ended, EndOfInput.
	Output []Element
	// Completed lists the checkpoint ids the task snapshotted, in order;
	// the snapshots are in the operator's Checkpoints.
	Completed []int64
}

// NewTask returns a task whose inputs are called names (used in
// transcripts), in the given mode, summing under key.
func NewTask(names []string, mode config.CheckpointingMode, key KeyFunc) *Task {
	t := &Task{
		names:   slices.Clone(names),
		handler: NewHandler(len(names), mode),
		op:      NewStatefulSumOperator(key),
		wm:      make([]int64, len(names)),
		outWM:   math.MinInt64,
		live:    len(names),
	}
	for i := range t.wm {
		t.wm[i] = math.MinInt64
	}
	return t
}

// Input returns the index of the input called name.
func (t *Task) Input(name string) (int, bool) {
	i := slices.Index(t.names, name)
	return i, i >= 0
}

// State returns a copy of the operator's current sums.
func (t *Task) State() map[string]int64 { return t.op.Snapshot() }

// SnapshotOf returns the snapshot taken for checkpoint id.
func (t *Task) SnapshotOf(id int64) (map[string]int64, bool) {
	s, ok := t.op.Checkpoints[id]
	return s, ok
}

// Receive takes elem arriving on input and returns the transcript of what
// the task did, one line per step.
func (t *Task) Receive(input int, elem Element) []string {
	return t.run(t.handler.Receive(input, elem))
}

// Abort applies the coordinator's abort of checkpoint id.
func (t *Task) Abort(id int64, reason string) []string {
	return t.run(t.handler.Abort(id, reason))
}

// Fail loses the task: the pending checkpoint is abandoned, held input is
// dropped, and the operator is restored from its newest snapshot (or empty
// state if it has none), as a redeployed task would be if that snapshot was
// the latest completed checkpoint. Watermarks restart from the minimum.
func (t *Task) Fail() []string {
	lines := t.run(t.handler.Fail())
	cp := Checkpoint{OperatorStates: map[string]map[string]int64{SumUID: {}}}
	if n := len(t.Completed); n > 0 {
		cp.ID = t.Completed[n-1]
		cp.OperatorStates[SumUID] = t.op.Checkpoints[cp.ID]
	}
	checkpoints := t.op.Checkpoints
	t.op = Restore(t.op.key, cp)
	t.op.Checkpoints = checkpoints
	for i := range t.wm {
		t.wm[i] = math.MinInt64
	}
	t.outWM = math.MinInt64
	t.live = len(t.names)
	return append(lines, fmt.Sprintf("restore %d %s", cp.ID, FormatState(t.op.sums)))
}

func (t *Task) run(acts []Action) []string {
	var lines []string
	for _, a := range acts {
		switch a := a.(type) {
		case Deliver:
			lines = append(lines, t.deliver(a.Input, a.Elem)...)
		case Snapshot:
			// Nothing is pending in the output: the operator emits
			// synchronously. Forward the barrier, then snapshot.
			t.Output = append(t.Output, t.op.Process(Barrier{ID: a.Checkpoint})...)
			t.Completed = append(t.Completed, a.Checkpoint)
			lines = append(lines,
				fmt.Sprintf("forward barrier=%d", a.Checkpoint),
				fmt.Sprintf("snapshot %d %s", a.Checkpoint, FormatState(t.op.Checkpoints[a.Checkpoint])))
		default:
			lines = append(lines, FormatAction(a, t.names))
		}
	}
	return lines
}

func (t *Task) deliver(input int, elem Element) []string {
	name := t.names[input]
	switch e := elem.(type) {
	case Event:
		out := t.op.Process(e)
		t.Output = append(t.Output, out...)
		return []string{fmt.Sprintf("process %s %v -> %v", name, e, out[0])}
	case Watermark:
		t.wm[input] = max(t.wm[input], e.Timestamp)
		lines := []string{fmt.Sprintf("watermark %s=%s", name, formatTime(e.Timestamp))}
		return append(lines, t.advanceWatermark()...)
	case EndOfInput:
		t.wm[input] = math.MaxInt64
		t.live--
		lines := []string{"end " + name}
		if t.live == 0 {
			t.Output = append(t.Output, EndOfInput{})
			return append(lines, "forward end")
		}
		return append(lines, t.advanceWatermark()...)
	}
	panic(fmt.Sprintf("mini: task cannot process %T", elem))
}

// advanceWatermark forwards the minimum watermark over the inputs when it
// has risen. Ended inputs count as +inf, so they never hold event time
// back.
func (t *Task) advanceWatermark() []string {
	m := slices.Min(t.wm)
	if m <= t.outWM || m == math.MaxInt64 {
		return nil
	}
	t.outWM = m
	t.Output = append(t.Output, Watermark{Timestamp: m})
	return []string{fmt.Sprintf("forward watermark=%d", m)}
}

// FormatState renders per-key sums as {k1=v1 k2=v2}, keys sorted.
func FormatState(s map[string]int64) string {
	keys := slices.Sorted(maps.Keys(s))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, s[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}
