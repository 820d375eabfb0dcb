package stream

import (
	"reflect"
	"testing"
	"time"
)

func TestAssign(t *testing.T) {
	tum, _ := Tumbling(time.Minute, 0)
	tumOff, _ := Tumbling(10*time.Millisecond, 3*time.Millisecond)
	sl, _ := Sliding(30*time.Millisecond, 10*time.Millisecond, 0)
	ses, _ := Session(5 * time.Millisecond)
	for _, tc := range []struct {
		name string
		a    WindowAssigner
		ts   int64
		want []Window
	}{
		{"tumbling start", tum, 60_000, []Window{{60_000, 120_000}}},
		{"tumbling end", tum, 119_999, []Window{{60_000, 120_000}}},
		{"tumbling negative", tum, -1, []Window{{-60_000, 0}}},
		{"tumbling offset", tumOff, 12, []Window{{3, 13}}},
		{"tumbling offset below", tumOff, 2, []Window{{-7, 3}}},
		{"sliding", sl, 25, []Window{{20, 50}, {10, 40}, {0, 30}}},
		{"sliding on boundary", sl, 30, []Window{{30, 60}, {20, 50}, {10, 40}}},
		{"session", ses, 7, []Window{{7, 12}}},
	} {
		if got := tc.a.Assign(nil, tc.ts); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Assign(%d) = %v, want %v", tc.name, tc.ts, got, tc.want)
		}
	}
}

func TestAssignerValidation(t *testing.T) {
	if _, err := Tumbling(0, 0); err == nil {
		t.Error("Tumbling(0) accepted")
	}
	if _, err := Tumbling(time.Second, time.Second); err == nil {
		t.Error("Tumbling with offset == size accepted")
	}
	if _, err := Sliding(time.Second, 0, 0); err == nil {
		t.Error("Sliding with slide 0 accepted")
	}
	if _, err := Session(-time.Second); err == nil {
		t.Error("Session with a negative gap accepted")
	}
}

func TestMergeWindows(t *testing.T) {
	got := MergeWindows([]Window{{10, 15}, {1, 6}, {5, 9}, {20, 25}, {15, 18}})
	want := []MergeResult{
		{Window{1, 9}, []Window{{1, 6}, {5, 9}}},
		{Window{10, 18}, []Window{{10, 15}, {15, 18}}},
		{Window{20, 25}, []Window{{20, 25}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MergeWindows = %v, want %v", got, want)
	}
}
