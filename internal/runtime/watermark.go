package runtime

import (
	"math"
	"slices"

	"github.com/weirstream/weir/internal/checkpoint"
)

// MinWatermark is the watermark before any was received; MaxWatermark is
// the watermark of an input that has ended: event time is complete.
const (
	MinWatermark int64 = math.MinInt64
	MaxWatermark int64 = math.MaxInt64
)

// WatermarkValve combines the watermarks of a task's inputs into the task's
// own: the minimum over the inputs that are active. An idle input (its
// source has no data for a while) is excluded so it does not hold event
// time back; when it becomes active again it rejoins once its watermark has
// caught up with the combined one. An ended input is excluded too; sources
// send MaxWatermark before they end when event time is complete. The valve
// only ever moves the combined watermark forward.
// It is an I/O-free state machine owned by the task's goroutine.
type WatermarkValve struct {
	wm      []int64
	idle    []bool
	ended   []bool
	aligned []bool // takes part in the minimum
	out     int64
	outIdle bool
}

// NewWatermarkValve returns a valve for inputs inputs, all active, at
// MinWatermark.
func NewWatermarkValve(inputs int) *WatermarkValve {
	v := &WatermarkValve{
		wm:      make([]int64, inputs),
		idle:    make([]bool, inputs),
		ended:   make([]bool, inputs),
		aligned: make([]bool, inputs),
		out:     MinWatermark,
	}
	for i := range v.wm {
		v.wm[i] = MinWatermark
		v.aligned[i] = true
	}
	return v
}

// Current returns the combined watermark.
func (v *WatermarkValve) Current() int64 { return v.out }

// Inputs returns a copy of each input's watermark, for a checkpoint.
func (v *WatermarkValve) Inputs() []int64 { return slices.Clone(v.wm) }

// Restore starts the valve at a checkpointed event time: the combined
// watermark at out and, when inputs has one watermark per input (the
// subtask has the channels it had when they were recorded), each input's.
// Otherwise the inputs start at MinWatermark and the combined watermark
// stays at out until every input has passed it.
func (v *WatermarkValve) Restore(out int64, inputs []int64) {
	v.out = out
	if len(inputs) == len(v.wm) {
		copy(v.wm, inputs)
	}
}

// Idle reports whether every input is idle or ended, so the task itself is
// idle downstream.
func (v *WatermarkValve) Idle() bool { return v.outIdle }

// OnWatermark records watermark ts on input and returns the new combined
// watermark and true if it advanced. A watermark lower than one already
// seen on the input is ignored.
func (v *WatermarkValve) OnWatermark(input int, ts int64) (int64, bool) {
	if ts <= v.wm[input] {
		return v.out, false
	}
	v.wm[input] = ts
	if v.idle[input] {
		v.idle[input] = false
	}
	if !v.aligned[input] && ts >= v.out {
		v.aligned[input] = true
	}
	return v.advance()
}

// OnEnd records that input has ended.
func (v *WatermarkValve) OnEnd(input int) (int64, bool) {
	v.ended[input] = true
	return v.advance()
}

// SetIdle marks input idle or active again. It returns the combined
// watermark and whether it advanced: an input going idle can release event
// time held back by it.
func (v *WatermarkValve) SetIdle(input int, idle bool) (int64, bool) {
	if v.idle[input] == idle {
		return v.out, false
	}
	v.idle[input] = idle
	if idle {
		v.aligned[input] = false
	} else if v.wm[input] >= v.out {
		v.aligned[input] = true
	}
	return v.advance()
}

func (v *WatermarkValve) advance() (int64, bool) {
	lowest, included := MaxWatermark, false
	v.outIdle = true
	for i, w := range v.wm {
		if v.ended[i] || v.idle[i] {
			continue
		}
		v.outIdle = false
		if !v.aligned[i] {
			continue
		}
		included = true
		lowest = min(lowest, w)
	}
	if v.outIdle && !slices.Contains(v.idle, true) {
		v.outIdle = false // every input ended: finished, not idle
	}
	if !included || lowest <= v.out {
		return v.out, false
	}
	v.out = lowest
	return v.out, true
}

// restoredWatermark returns the event time a subtask starts at when it
// restores st, one operator's state in a checkpoint taken at
// st.Parallelism, as subtask index of parallelism, and the watermarks of
// its input channels if they were recorded with the same channels.
//
// Without rescaling the subtask takes its own recorded watermark. With
// rescaling it takes the minimum over the old subtasks whose state it
// takes: those whose key groups overlap its own for keyed state, every
// old subtask otherwise. The minimum is never ahead of the event time any
// of that state had reached, so no record the old subtasks would have
// accepted is dropped as late. Behind an input that feeds every subtask
// (hash, rebalance, broadcast), which an aligned checkpoint records at the
// same watermark in every subtask, it is also exact. A checkpoint that
// did not record a watermark for a subtask it takes gives MinWatermark.
func restoredWatermark(st *checkpoint.OperatorState, index, parallelism, maxParallelism int) (int64, []int64) {
	if st.Parallelism == parallelism {
		if index >= len(st.Subtasks) || st.Subtasks[index].Watermark == nil {
			return MinWatermark, nil
		}
		s := st.Subtasks[index]
		return *s.Watermark, s.InputWatermarks
	}
	keyed := false
	for _, s := range st.Subtasks {
		keyed = keyed || len(s.Keyed) > 0
	}
	own := KeyGroupsFor(maxParallelism, parallelism, index)
	wm, taken := MaxWatermark, false
	for i, s := range st.Subtasks {
		if keyed {
			old := KeyGroupsFor(st.MaxParallelism, st.Parallelism, i)
			if old.End < own.Start || old.Start > own.End {
				continue
			}
		}
		if s.Watermark == nil {
			return MinWatermark, nil
		}
		wm, taken = min(wm, *s.Watermark), true
	}
	if !taken {
		return MinWatermark, nil
	}
	return wm, nil
}

// restoredTimersPending reports whether the checkpoint md was taken while
// a subtask whose state subtask index of the chain ops restores was in the
// middle of firing its event-time timers (SubtaskState.TimersPending): at
// the same parallelism that subtask's, at another any old subtask whose
// key groups overlap index's (or any, for operators without keyed state).
func restoredTimersPending(md *checkpoint.Metadata, ops []ChainedOperator, index, parallelism, maxParallelism int) bool {
	own := KeyGroupsFor(maxParallelism, parallelism, index)
	for _, op := range ops {
		st, ok := md.Operator(op.UID)
		if !ok {
			continue
		}
		if st.Parallelism == parallelism {
			if index < len(st.Subtasks) && st.Subtasks[index].TimersPending {
				return true
			}
			continue
		}
		for i, s := range st.Subtasks {
			if !s.TimersPending {
				continue
			}
			if len(s.Keyed) > 0 {
				old := KeyGroupsFor(st.MaxParallelism, st.Parallelism, i)
				if old.End < own.Start || old.Start > own.End {
					continue
				}
			}
			return true
		}
	}
	return false
}
