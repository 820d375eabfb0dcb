package runtime

import (
	"github.com/weirstream/weir/internal/checkpoint"
)

// SplitEnumerator decides which subtask of one source vertex reads each of
// the source's splits: the job master's side of a source, Flink's
// SplitEnumerator. It is an I/O-free state machine: the job master lists
// the splits and feeds the listings in (Discovered), and tells it when a
// checkpoint is triggered (Snapshot); it answers with the splits to assign
// and with what each subtask owns.
//
// A split is assigned once, when it is first discovered, and keeps its
// subtask for as long as the job master runs: a subtask that restarts,
// alone or with its failover region, gets back exactly the splits it
// owned, the ones that were in the checkpoint it restores from with their
// checkpointed offsets and the ones assigned since from their start
// (Restart). Splits are assigned in the order they are discovered, each
// to the subtask that has the fewest (the lowest of those), which on the
// first listing is the static assignment "split i to subtask i mod
// parallelism".
//
// The assignment of checkpoint n is every split discovered before n was
// triggered (State). The job master triggers a source subtask and sends it
// its assignments in one order, so a subtask's snapshot for n holds
// exactly the splits the assignment of n gives it. A job that starts from
// a checkpoint at the parallelism it was taken with keeps its assignment
// (Restore); at another parallelism the first listing is assigned anew.
//
// A split is late if the source's first listing did not have it: it was
// discovered by a later listing, or by the first listing of a job that
// restored an assignment without it (a partition added to a topic while
// the job was down). A reader starts a late split at its beginning,
// whatever the source's starting position says (Flink's KafkaSource does
// the same): its records were written after the job chose where to
// start, so they are all the job's to read.
type SplitEnumerator struct {
	parallelism int
	splits      []enumeratedSplit // in discovery order
	index       map[string]int
	count       []int // splits per subtask
	listed      bool

	// restored is the assignment of the checkpoint the job started from.
	restored    []checkpoint.AssignedSplit
	restoredPar int
	restoredID  int64
}

type enumeratedSplit struct {
	id      string
	subtask int
	// first is the first checkpoint whose assignment holds the split: the
	// split is in every checkpoint from first on (0: none yet).
	first int64
	// late: the source's first listing did not have the split.
	late bool
}

// SplitsAssigned is an enumerator's output: Splits, in discovery order,
// go to Subtask; Late are those of them that are late.
type SplitsAssigned struct {
	Subtask int
	Splits  []string
	Late    []string
}

// NewSplitEnumerator returns the enumerator of a source vertex of the
// given parallelism.
func NewSplitEnumerator(parallelism int) *SplitEnumerator {
	return &SplitEnumerator{parallelism: parallelism, index: map[string]int{}, count: make([]int, parallelism)}
}

// Restore starts the enumerator from the assignment recorded in checkpoint
// id, taken at parallelism: the first listing keeps it if the parallelism
// is the enumerator's. Only splits of that listing are assigned.
func (e *SplitEnumerator) Restore(id int64, parallelism int, assignment []checkpoint.AssignedSplit) {
	e.restored, e.restoredPar, e.restoredID = assignment, parallelism, id
}

// Listed reports whether the enumerator has had its first listing: only
// then can subtasks be given their splits.
func (e *SplitEnumerator) Listed() bool { return e.listed }

// Discovered takes a listing of the source's splits and returns the
// assignments of the splits it had not seen, by subtask. Splits it knows
// keep their subtask; splits missing from a later listing stay assigned.
func (e *SplitEnumerator) Discovered(ids []string) []SplitsAssigned {
	start := len(e.splits)
	if !e.listed {
		e.listed = true
		listed := make(map[string]bool, len(ids))
		for _, id := range ids {
			listed[id] = true
		}
		inRestored := make(map[string]bool, len(e.restored))
		for _, a := range e.restored {
			inRestored[a.Split] = true
		}
		if e.restoredPar == e.parallelism {
			for _, a := range e.restored {
				if listed[a.Split] && a.Subtask >= 0 && a.Subtask < e.parallelism {
					e.add(a.Split, a.Subtask, e.restoredID, false)
				}
			}
		}
		for _, id := range ids {
			if _, ok := e.index[id]; ok {
				continue
			}
			first := int64(0)
			if inRestored[id] {
				first = e.restoredID
			}
			// A restored assignment is the first listing of the job
			// the checkpoint was taken in: what it lacks came later.
			e.add(id, e.next(), first, len(e.restored) > 0 && !inRestored[id])
		}
		e.restored = nil
	} else {
		for _, id := range ids {
			if _, ok := e.index[id]; !ok {
				e.add(id, e.next(), 0, true)
			}
		}
	}
	return e.group(e.splits[start:])
}

func (e *SplitEnumerator) add(id string, subtask int, first int64, late bool) {
	if _, ok := e.index[id]; ok {
		return
	}
	e.index[id] = len(e.splits)
	e.splits = append(e.splits, enumeratedSplit{id: id, subtask: subtask, first: first, late: late})
	e.count[subtask]++
}

// next returns the subtask a new split goes to: the one with the fewest
// splits, the lowest of those.
func (e *SplitEnumerator) next() int {
	best := 0
	for k, n := range e.count {
		if n < e.count[best] {
			best = k
		}
	}
	return best
}

// group returns splits by subtask, subtasks in order.
func (e *SplitEnumerator) group(splits []enumeratedSplit) []SplitsAssigned {
	by := make([]SplitsAssigned, e.parallelism)
	for _, s := range splits {
		a := &by[s.subtask]
		a.Splits = append(a.Splits, s.id)
		if s.late {
			a.Late = append(a.Late, s.id)
		}
	}
	var out []SplitsAssigned
	for k, a := range by {
		if len(a.Splits) > 0 {
			a.Subtask = k
			out = append(out, a)
		}
	}
	return out
}

// Late returns the splits of subtask k that are late, in discovery order.
func (e *SplitEnumerator) Late(k int) []string {
	var out []string
	for _, s := range e.splits {
		if s.subtask == k && s.late {
			out = append(out, s.id)
		}
	}
	return out
}

// Owned returns the splits subtask k reads, in discovery order: what its
// deployment carries.
func (e *SplitEnumerator) Owned(k int) []string {
	out := []string{}
	for _, s := range e.splits {
		if s.subtask == k {
			out = append(out, s.id)
		}
	}
	return out
}

// Restart returns the splits of subtask k when it is redeployed from
// checkpoint from (0: from no checkpoint): those the checkpoint's
// assignment gives it, which it restores, and those assigned since, which
// it reads again from their start. Together they are Owned(k).
func (e *SplitEnumerator) Restart(k int, from int64) (restored, fresh []string) {
	for _, s := range e.splits {
		if s.subtask != k {
			continue
		}
		if from > 0 && s.first > 0 && s.first <= from {
			restored = append(restored, s.id)
		} else {
			fresh = append(fresh, s.id)
		}
	}
	return restored, fresh
}

// Snapshot records that checkpoint id was triggered: its assignment is
// every split discovered so far.
func (e *SplitEnumerator) Snapshot(id int64) {
	for i := range e.splits {
		if e.splits[i].first == 0 {
			e.splits[i].first = id
		}
	}
}

// State returns the assignment of checkpoint id, for its metadata: nil if
// the checkpoint holds no split.
func (e *SplitEnumerator) State(id int64) []checkpoint.AssignedSplit {
	var out []checkpoint.AssignedSplit
	for _, s := range e.splits {
		if s.first > 0 && s.first <= id {
			out = append(out, checkpoint.AssignedSplit{Split: s.id, Subtask: s.subtask})
		}
	}
	return out
}
