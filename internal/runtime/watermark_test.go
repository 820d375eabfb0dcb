package runtime

import (
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/checkpoint"
)

func wmPtr(v int64) *int64 { return &v }

func TestRestoredWatermark(t *testing.T) {
	keyed := func(kg checkpoint.KeyGroupRange, wm *int64) checkpoint.SubtaskState {
		return checkpoint.SubtaskState{Keyed: []checkpoint.StateHandle{{Inline: []byte{}, KeyGroups: &kg}}, Watermark: wm}
	}
	// Two old keyed subtasks, key groups 0-63 at 100 and 64-127 at 50.
	twoKeyed := &checkpoint.OperatorState{UID: "w", Parallelism: 2, MaxParallelism: 128, Subtasks: []checkpoint.SubtaskState{
		keyed(checkpoint.KeyGroupRange{Start: 0, End: 63}, wmPtr(100)),
		keyed(checkpoint.KeyGroupRange{Start: 64, End: 127}, wmPtr(50)),
	}}
	withInputs := &checkpoint.OperatorState{UID: "w", Parallelism: 2, MaxParallelism: 128, Subtasks: []checkpoint.SubtaskState{
		{Watermark: wmPtr(7), InputWatermarks: []int64{7, 9}},
		{Watermark: wmPtr(8), InputWatermarks: []int64{8, 9}},
	}}
	unrecorded := &checkpoint.OperatorState{UID: "w", Parallelism: 2, MaxParallelism: 128, Subtasks: []checkpoint.SubtaskState{
		{Watermark: wmPtr(7)}, {},
	}}
	for _, tc := range []struct {
		name       string
		st         *checkpoint.OperatorState
		index, par int
		want       int64
		inputs     []int64
	}{
		{"same parallelism takes its own", withInputs, 1, 2, 8, []int64{8, 9}},
		{"same parallelism keyed", twoKeyed, 0, 2, 100, nil},
		{"scale up: only old subtask 0's key groups", twoKeyed, 0, 3, 100, nil},
		{"scale up: key groups of both", twoKeyed, 1, 3, 50, nil},
		{"scale up: only old subtask 1's key groups", twoKeyed, 2, 3, 50, nil},
		{"scale down: both", twoKeyed, 0, 1, 50, nil},
		{"rescaled operator state: every old subtask", withInputs, 0, 3, 7, nil},
		{"not recorded for the subtask", unrecorded, 1, 2, MinWatermark, nil},
		{"not recorded for a subtask it takes", unrecorded, 0, 1, MinWatermark, nil},
	} {
		got, inputs := restoredWatermark(tc.st, tc.index, tc.par, 128)
		if got != tc.want || !slices.Equal(inputs, tc.inputs) {
			t.Errorf("%s: restoredWatermark = %d, %v; want %d, %v", tc.name, got, inputs, tc.want, tc.inputs)
		}
	}
}

func TestWatermarkValveRestore(t *testing.T) {
	// With the inputs' watermarks restored, the first new watermark on an
	// input moves event time on as it would have without the restore.
	v := NewWatermarkValve(2)
	v.Restore(100, []int64{100, 120})
	if wm, ok := v.OnWatermark(0, 110); !ok || wm != 110 {
		t.Fatalf("OnWatermark(0, 110) = %d, %v; want 110, true", wm, ok)
	}
	// Without them, event time stays at the restored watermark until every
	// input has passed it, and never goes back.
	v = NewWatermarkValve(2)
	v.Restore(100, nil)
	if wm, ok := v.OnWatermark(0, 110); ok || wm != 100 {
		t.Fatalf("OnWatermark(0, 110) = %d, %v; want 100, false", wm, ok)
	}
	if wm, ok := v.OnWatermark(1, 90); ok || wm != 100 {
		t.Fatalf("OnWatermark(1, 90) = %d, %v; want 100, false", wm, ok)
	}
	if wm, ok := v.OnWatermark(1, 105); !ok || wm != 105 {
		t.Fatalf("OnWatermark(1, 105) = %d, %v; want 105, true", wm, ok)
	}
	if got := v.Inputs(); !slices.Equal(got, []int64{110, 105}) {
		t.Fatalf("Inputs() = %v", got)
	}
}
