package stream

import (
	"fmt"
	"slices"
	"time"
)

// Window is a time window: the half-open event-time interval [Start, End)
// in Unix milliseconds.
type Window struct {
	Start, End int64
}

// MaxTimestamp is the last timestamp that belongs to the window; the
// window fires when the watermark reaches it.
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

// Intersects reports whether w and o overlap or touch, which is when two
// session windows merge.
func (w Window) Intersects(o Window) bool { return w.Start <= o.End && o.Start <= w.End }

// Cover returns the smallest window containing w and o.
func (w Window) Cover(o Window) Window {
	return Window{Start: min(w.Start, o.Start), End: max(w.End, o.End)}
}

func (w Window) String() string { return fmt.Sprintf("[%d, %d)", w.Start, w.End) }

// WindowAssigner places a record's timestamp into windows.
type WindowAssigner struct {
	err    error
	kind   windowKind
	size   int64
	slide  int64
	offset int64
	gap    int64
}

type windowKind uint8

const (
	tumbling windowKind = iota
	sliding
	session
)

// TumblingEventTimeWindows returns fixed, non-overlapping windows of the
// given size, aligned to the epoch.
func TumblingEventTimeWindows(size time.Duration) WindowAssigner {
	return mustAssigner(Tumbling(size, 0))
}

// SlidingEventTimeWindows returns windows of the given size starting
// every slide.
func SlidingEventTimeWindows(size, slide time.Duration) WindowAssigner {
	return mustAssigner(Sliding(size, slide, 0))
}

// EventTimeSessionWindows returns per-key sessions that close after gap
// without records.
func EventTimeSessionWindows(gap time.Duration) WindowAssigner {
	return mustAssigner(Session(gap))
}

// mustAssigner keeps an invalid assigner's error for Window to report.
func mustAssigner(a WindowAssigner, err error) WindowAssigner {
	if err != nil {
		return WindowAssigner{err: err}
	}
	return a
}

// Tumbling returns fixed, non-overlapping windows of the given size,
// aligned to the epoch plus offset.
func Tumbling(size, offset time.Duration) (WindowAssigner, error) {
	if size <= 0 || offset < 0 || offset >= size {
		return WindowAssigner{}, fmt.Errorf("tumbling window: need 0 <= offset < size, got size %v offset %v", size, offset)
	}
	return WindowAssigner{kind: tumbling, size: size.Milliseconds(), slide: size.Milliseconds(), offset: offset.Milliseconds()}, nil
}

// Sliding returns windows of the given size starting every slide.
func Sliding(size, slide, offset time.Duration) (WindowAssigner, error) {
	if size <= 0 || slide <= 0 || offset < 0 || offset >= slide {
		return WindowAssigner{}, fmt.Errorf("sliding window: need size > 0, slide > 0 and 0 <= offset < slide, got size %v slide %v offset %v", size, slide, offset)
	}
	return WindowAssigner{kind: sliding, size: size.Milliseconds(), slide: slide.Milliseconds(), offset: offset.Milliseconds()}, nil
}

// Session returns windows that grow with each record and close after gap
// without records for the key; overlapping sessions merge.
func Session(gap time.Duration) (WindowAssigner, error) {
	if gap <= 0 {
		return WindowAssigner{}, fmt.Errorf("session window: gap must be positive, got %v", gap)
	}
	return WindowAssigner{kind: session, gap: gap.Milliseconds()}, nil
}

// Merging reports whether windows of this assigner merge (sessions).
func (a WindowAssigner) Merging() bool { return a.kind == session }

// windowStart is Flink's Window.getWindowStartWithOffset.
func windowStart(ts, offset, size int64) int64 {
	r := (ts - offset) % size
	if r < 0 {
		r += size
	}
	return ts - r
}

// Assign appends the windows ts belongs to and returns the slice.
func (a WindowAssigner) Assign(dst []Window, ts int64) []Window {
	switch a.kind {
	case tumbling:
		start := windowStart(ts, a.offset, a.size)
		return append(dst, Window{start, start + a.size})
	case sliding:
		last := windowStart(ts, a.offset, a.slide)
		for start := last; start > ts-a.size; start -= a.slide {
			dst = append(dst, Window{start, start + a.size})
		}
		return dst
	}
	return append(dst, Window{ts, ts + a.gap})
}

// MergeWindows merges a sorted-or-not set of session windows: each result
// is the cover of windows that intersect (transitively), with the windows
// it absorbed. Results are sorted by start.
func MergeWindows(ws []Window) []MergeResult {
	s := slices.Clone(ws)
	slices.SortFunc(s, func(a, b Window) int {
		if a.Start != b.Start {
			return int(a.Start - b.Start)
		}
		return int(a.End - b.End)
	})
	var out []MergeResult
	for _, w := range s {
		if n := len(out); n > 0 && out[n-1].Window.Intersects(w) {
			out[n-1].Window = out[n-1].Window.Cover(w)
			out[n-1].Merged = append(out[n-1].Merged, w)
			continue
		}
		out = append(out, MergeResult{Window: w, Merged: []Window{w}})
	}
	return out
}

// MergeResult is one window after merging and the windows it covers.
type MergeResult struct {
	Window Window
	Merged []Window
}
