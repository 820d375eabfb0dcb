package mini

import (
	"fmt"
	"slices"

	"github.com/weirstream/weir/config"
)

// JobConfig describes a job of several sources feeding one keyed-sum Task,
// delivered in a deterministic order, with failures at chosen steps.
type JobConfig struct {
	// Sources holds each source's records (events and, optionally,
	// watermarks), without barriers: the sources inject those.
	Sources [][]Element
	// BarrierEvery is the distance between barriers in events: source i
	// injects barrier n right behind its (n·BarrierEvery)-th event, so
	// S_n = n·BarrierEvery at every source that has that many events.
	BarrierEvery int
	// Schedule lists, step by step, which source delivers its next element
	// (a record, a barrier, or its end) to the task. A step naming a source
	// that has ended delivers nothing. After the schedule the sources
	// deliver round-robin until all have ended.
	Schedule []int
	// Mode is the task's checkpointing mode; the zero value means
	// EXACTLY_ONCE.
	Mode config.CheckpointingMode
	// Key selects the sum's key; nil means ByKey.
	Key KeyFunc
	// FailAt lists delivery steps (counted from 1 over the whole run,
	// recovery included) after which the task fails and the job recovers
	// from its latest completed checkpoint.
	FailAt []int
}

// JobCheckpoint is a completed checkpoint of a multi-source job.
type JobCheckpoint struct {
	ID int64
	// Attempt is the run that completed it: 0 before the first failure, n
	// after the n-th.
	Attempt int
	State   map[string]int64
	// SourceOffsets holds S_ID for each source: the number of its events
	// in front of barrier ID (all of them if it ended first).
	SourceOffsets []int
}

// JobResult is what a run of RunJob observed.
type JobResult struct {
	// Output is everything the task emitted over all attempts: what a sink
	// that is not transactional would have written.
	Output []Element
	// Checkpoints are the completed checkpoints, in completion order.
	Checkpoints []JobCheckpoint
	// Restores holds, per failure, the checkpoint the job restored (ID 0
	// with zero offsets when none had completed).
	Restores []JobCheckpoint
	// Final is the task's state after every source ended.
	Final map[string]int64
}

type jobSource struct {
	elems      []Element
	cur        int  // index of the next element
	events     int  // events emitted so far: the source position
	barrierDue bool // a barrier goes out before the next element
	done       bool
	offsets    map[int64]int // barrier id -> position when it was injected
}

func (s *jobSource) seek(offset int) {
	s.cur, s.events, s.barrierDue, s.done = 0, 0, false, false
	for s.events < offset {
		if _, ok := s.elems[s.cur].(Event); ok {
			s.events++
		}
		s.cur++
	}
}

func (s *jobSource) next(every int) Element {
	switch {
	case s.barrierDue:
		s.barrierDue = false
		id := int64(s.events / every)
		s.offsets[id] = s.events
		return Barrier{ID: id}
	case s.cur < len(s.elems):
		e := s.elems[s.cur]
		s.cur++
		if _, ok := e.(Event); ok {
			s.events++
			s.barrierDue = s.events%every == 0
		}
		return e
	}
	s.done = true
	return EndOfInput{}
}

// RunJob runs cfg and returns what happened. With EXACTLY_ONCE, every
// checkpoint's state is the fold over exactly the first SourceOffsets[i]
// events of each source i, and Final equals the fold over all input, however
// the failures fall. With AT_LEAST_ONCE, records that arrived on an input after
// its barrier may be in a snapshot and are counted again when replayed.
func RunJob(cfg JobConfig) JobResult {
	if cfg.BarrierEvery < 1 {
		panic(fmt.Sprintf("mini.RunJob: BarrierEvery must be >= 1, got %d", cfg.BarrierEvery))
	}
	key := cfg.Key
	if key == nil {
		key = ByKey
	}
	names := make([]string, len(cfg.Sources))
	srcs := make([]*jobSource, len(cfg.Sources))
	for i, elems := range cfg.Sources {
		names[i] = fmt.Sprintf("s%d", i)
		srcs[i] = &jobSource{elems: elems, offsets: make(map[int64]int)}
	}
	var res JobResult
	task := NewTask(names, cfg.Mode, key)
	fails := slices.Clone(cfg.FailAt)
	slices.Sort(fails)

	step, rr := 0, 0
	pick := func() int {
		for step < len(cfg.Schedule) {
			i := cfg.Schedule[step]
			step++
			if !srcs[i].done {
				return i
			}
		}
		for range srcs {
			i := rr % len(srcs)
			rr++
			if !srcs[i].done {
				return i
			}
		}
		return -1
	}
	completed := 0
	for deliveries := 1; ; deliveries++ {
		i := pick()
		if i < 0 {
			break
		}
		task.Receive(i, srcs[i].next(cfg.BarrierEvery))
		for ; completed < len(task.Completed); completed++ {
			id := task.Completed[completed]
			cp := JobCheckpoint{ID: id, Attempt: len(res.Restores), State: task.op.Checkpoints[id], SourceOffsets: make([]int, len(srcs))}
			for j, s := range srcs {
				off, ok := s.offsets[id]
				if !ok { // the source ended before injecting barrier id
					off = s.events
				}
				cp.SourceOffsets[j] = off
			}
			res.Checkpoints = append(res.Checkpoints, cp)
		}
		if len(fails) > 0 && fails[0] == deliveries {
			fails = fails[1:]
			res.Output = append(res.Output, task.Output...)
			restored := JobCheckpoint{State: map[string]int64{}, SourceOffsets: make([]int, len(srcs))}
			if n := len(res.Checkpoints); n > 0 {
				restored = res.Checkpoints[n-1]
			}
			res.Restores = append(res.Restores, restored)
			task = NewTask(names, cfg.Mode, key)
			task.op = Restore(key, Checkpoint{ID: restored.ID, OperatorStates: map[string]map[string]int64{SumUID: restored.State}})
			completed = 0
			for j, s := range srcs {
				s.seek(restored.SourceOffsets[j])
			}
		}
	}
	res.Output = append(res.Output, task.Output...)
	res.Final = task.State()
	return res
}
