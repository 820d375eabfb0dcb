package runtime

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// WatermarkAlignment keeps the source subtasks of a group within MaxDrift
// of event time of each other: Flink's watermark alignment
// (WatermarkStrategy.withWatermarkAlignment). Each source subtask of the
// group reports its watermark to the job master every UpdateInterval; the
// job master tells them the group's maximal watermark, the lowest
// reported one plus MaxDrift; a subtask stops reading a split whose
// watermark is past it (or, if its reader cannot pause single splits,
// stops reading while its own watermark is), until the maximum rises.
//
// Without it, a subtask that reads faster than another runs ahead in
// event time for as long as the job lets it, and every operator that joins
// or windows records of both holds in its state what the slower one has
// not caught up with.
type WatermarkAlignment struct {
	Group          string
	MaxDrift       time.Duration
	UpdateInterval time.Duration
}

// Validate reports a setting alignment cannot run with.
func (a *WatermarkAlignment) Validate() error {
	switch {
	case a.Group == "":
		return fmt.Errorf("watermark alignment: the group is empty")
	case a.MaxDrift <= 0:
		return fmt.Errorf("watermark alignment of group %q: the maximal drift %v is not positive", a.Group, a.MaxDrift)
	case a.UpdateInterval <= 0:
		return fmt.Errorf("watermark alignment of group %q: the update interval %v is not positive", a.Group, a.UpdateInterval)
	}
	return nil
}

// WatermarkAligner is the job master's side of watermark alignment: an
// I/O-free state machine. The job master declares each group's subtasks
// (Join), feeds it the watermarks they report (Report), and tells it
// which have finished (Finished) and which failed or were canceled
// (Remove); it answers with each group's maximal watermark.
//
// A group's maximal watermark is its lowest reported watermark plus its
// drift (MaxWatermark once that overflows). It is known once every
// subtask of the group has reported since it was deployed: until then
// none is announced, and the subtasks keep the maximum they were told
// last (a subtask that has never been told one reads no further than the
// drift past the lowest possible watermark). So a subtask that is slow to
// start, or restarts from a checkpoint with a watermark lower than it
// reported before, is never left behind by the others. A subtask whose
// splits have all ended, or are all idle, reports MaxWatermark, and one
// that finished counts as MaxWatermark: neither holds its group back.
type WatermarkAligner struct {
	groups  map[string]*alignGroup
	members map[checkpoint.TaskID]*alignGroup
}

type alignGroup struct {
	drift int64 // milliseconds
	// wm holds every member's report; reported says which have one.
	wm       map[checkpoint.TaskID]int64
	reported map[checkpoint.TaskID]bool
}

// NewWatermarkAligner returns an aligner of no groups.
func NewWatermarkAligner() *WatermarkAligner {
	return &WatermarkAligner{groups: map[string]*alignGroup{}, members: map[checkpoint.TaskID]*alignGroup{}}
}

// Join makes ids members of group, whose drift is maxDrift. The sources of
// one group must agree on its drift.
func (a *WatermarkAligner) Join(group string, maxDrift time.Duration, ids ...checkpoint.TaskID) error {
	g := a.groups[group]
	if g == nil {
		g = &alignGroup{drift: maxDrift.Milliseconds(), wm: map[checkpoint.TaskID]int64{}, reported: map[checkpoint.TaskID]bool{}}
		a.groups[group] = g
	} else if g.drift != maxDrift.Milliseconds() {
		return fmt.Errorf("watermark alignment group %q: sources with drifts %v and %v", group, time.Duration(g.drift)*time.Millisecond, maxDrift)
	}
	for _, id := range ids {
		g.wm[id] = MinWatermark
		g.reported[id] = false
		a.members[id] = g
	}
	return nil
}

// Report records that subtask id reported watermark wm, and returns its
// group's maximal watermark, and false if it is not known yet (or id is
// no member).
func (a *WatermarkAligner) Report(id checkpoint.TaskID, wm int64) (int64, bool) {
	g := a.members[id]
	if g == nil {
		return 0, false
	}
	g.wm[id], g.reported[id] = wm, true
	return g.maxAllowed()
}

// Finished records that subtask id finished: it no longer holds its group
// back. It returns its group's maximal watermark, as Report does.
func (a *WatermarkAligner) Finished(id checkpoint.TaskID) (int64, bool) {
	return a.Report(id, MaxWatermark)
}

// Remove forgets what subtask id reported: it failed or was canceled, and
// its group's maximum is not known again until its next deployment
// reports.
func (a *WatermarkAligner) Remove(id checkpoint.TaskID) {
	if g := a.members[id]; g != nil {
		g.wm[id], g.reported[id] = MinWatermark, false
	}
}

// Group returns the members of id's group, in order.
func (a *WatermarkAligner) Group(id checkpoint.TaskID) []checkpoint.TaskID {
	g := a.members[id]
	if g == nil {
		return nil
	}
	ids := make([]checkpoint.TaskID, 0, len(g.wm))
	for m := range g.wm {
		ids = append(ids, m)
	}
	slices.SortFunc(ids, func(x, y checkpoint.TaskID) int {
		if c := strings.Compare(x.Vertex, y.Vertex); c != 0 {
			return c
		}
		return x.Subtask - y.Subtask
	})
	return ids
}

func (g *alignGroup) maxAllowed() (int64, bool) {
	lowest := int64(MaxWatermark)
	for id, w := range g.wm {
		if !g.reported[id] {
			return 0, false
		}
		lowest = min(lowest, w)
	}
	if lowest > math.MaxInt64-g.drift {
		return MaxWatermark, true
	}
	return lowest + g.drift, true
}

// AlignedSource is a source operator that takes part in watermark
// alignment: the job master tells it its group's maximal watermark on the
// subtask's goroutine.
type AlignedSource interface {
	AlignWatermarks(maxAllowed int64) error
}

// alignWatermarks is the job master's announcement of the maximal
// watermark of the subtask's alignment group, as a mail.
func (t *Task) alignWatermarks(maxAllowed int64) error {
	s, ok := t.chain.Source.(AlignedSource)
	if !ok {
		return fmt.Errorf("%s does not take part in watermark alignment", t.id)
	}
	return s.AlignWatermarks(maxAllowed)
}

// reannounceEvery is how many reports of a subtask, told nothing new in
// between, make the job master tell it its group's maximum again: an
// announcement lost on its way (a connection that dropped it) is made
// good within that many update intervals, at the cost of one message per
// subtask every that many.
const reannounceEvery = 8

// SourceWatermark implements Listener: a source subtask that aligns its
// watermark reports it. Once its group's maximum is known, the job master
// announces it to every subtask of the group that it differs from what
// the subtask was last told, and to the reporting subtask again after
// reannounceEvery reports without news.
func (jm *JobMaster) SourceWatermark(ref TaskRef, wm int64) {
	jm.post(func() error {
		r := jm.current(ref)
		if r == nil {
			return nil
		}
		max, ok := jm.aligner.Report(ref.ID, wm)
		if !ok {
			return nil
		}
		if !r.announced || r.maxAllowed != max {
			jm.announceAlignment(ref.ID, max, false) // news to the reporter too
			return nil
		}
		jm.announceAlignment(ref.ID, max, false)
		if r.unchanged++; r.unchanged >= reannounceEvery && !jm.finished[ref.ID] {
			r.unchanged = 0
			jm.exec.AlignWatermarks(r.ref, max)
		}
		return nil
	})
}

// alignmentEnded updates the alignment of subtask id's group once the
// subtask has ended: finished (err nil), failed or canceled.
func (jm *JobMaster) alignmentEnded(id checkpoint.TaskID, err error) {
	if jm.alignments[id.Vertex] == nil {
		return
	}
	if err != nil {
		jm.aligner.Remove(id)
		return
	}
	if max, ok := jm.aligner.Finished(id); ok {
		jm.announceAlignment(id, max, true)
	}
}

// announceAlignment tells the running subtasks of id's group its maximal
// watermark, unless they were told it last; all but id itself if it has
// ended.
func (jm *JobMaster) announceAlignment(id checkpoint.TaskID, maxAllowed int64, ended bool) {
	for _, m := range jm.aligner.Group(id) {
		r := jm.tasks[m]
		if (ended && m == id) || r == nil || r.canceled || jm.finished[m] || (r.announced && r.maxAllowed == maxAllowed) {
			continue
		}
		r.announced, r.maxAllowed, r.unchanged = true, maxAllowed, 0
		jm.exec.AlignWatermarks(r.ref, maxAllowed)
	}
}
