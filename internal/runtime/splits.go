package runtime

import (
	"context"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

// sourceSplits is the job master's side of a source vertex that lists its
// splits there (Vertex.ListSplits): its enumerator, fed by the job
// master's loop.
type sourceSplits struct {
	v    *Vertex
	enum *SplitEnumerator
	// err is why the first listing failed: the subtasks deployed
	// meanwhile fail with it.
	err error
	// stop cancels the scheduled discovery; nil when none is scheduled.
	stop func() bool
}

// newSourceSplits makes the enumerators of g's source vertices that list
// their splits, restored from r's assignments if r is not nil.
func newSourceSplits(g *JobGraph, r *Restore) []*sourceSplits {
	var out []*sourceSplits
	for _, v := range g.Vertices {
		if !v.Source() || v.ListSplits == nil {
			continue
		}
		s := &sourceSplits{v: v, enum: NewSplitEnumerator(v.Parallelism)}
		if r != nil {
			if op, ok := r.Metadata.Operator(v.UID); ok && len(op.SplitAssignment) > 0 {
				s.enum.Restore(r.Metadata.CheckpointID, op.Parallelism, op.SplitAssignment)
			}
		}
		out = append(out, s)
	}
	return out
}

// assignSplits gives d's source subtasks their splits, listing first the
// splits of sources that have had no listing yet (the job's start, or a
// restart after a listing failed). A subtask restored from a checkpoint
// gets exactly the splits it owned: their offsets come from the
// checkpoint, or for the splits assigned after it, from their start.
func (jm *JobMaster) assignSplits(ctx context.Context, d *Deployment) {
	deploying := make(map[checkpoint.TaskID]bool, len(d.Tasks))
	for _, id := range d.Tasks {
		deploying[id] = true
	}
	var from int64
	if d.Restore != nil {
		from = d.Restore.Metadata.CheckpointID
	}
	for _, s := range jm.splits {
		var mine []checkpoint.TaskID
		for _, id := range d.Tasks {
			if id.Vertex == s.v.UID {
				mine = append(mine, id)
			}
		}
		if len(mine) == 0 {
			continue
		}
		if !s.enum.Listed() {
			jm.firstListing(ctx, s, deploying)
		}
		if d.Splits == nil {
			d.Splits = make(map[checkpoint.TaskID]*SplitAssignment)
		}
		for _, id := range mine {
			if !s.enum.Listed() {
				d.Splits[id] = &SplitAssignment{Err: s.err.Error(), err: s.err}
				continue
			}
			restored, fresh := s.enum.Restart(id.Subtask, from)
			jm.log.Info("source subtask splits", "task", id.String(), "checkpoint", from, "restored", restored, "from_start", fresh)
			d.Splits[id] = &SplitAssignment{Splits: s.enum.Owned(id.Subtask), Late: s.enum.Late(id.Subtask)}
		}
	}
}

// firstListing lists s's splits on the job master's loop: the subtasks
// being deployed cannot start without them.
func (jm *JobMaster) firstListing(ctx context.Context, s *sourceSplits, deploying map[checkpoint.TaskID]bool) {
	ids, err := s.v.ListSplits(ctx)
	if err != nil {
		s.err = err
		jm.log.Warn("listing source splits", "vertex", s.v.Name, "err", err)
		return
	}
	s.err = nil
	jm.splitsListed(s, ids, deploying)
}

// splitsListed assigns the splits of a listing that s had not seen: to
// the running subtasks by message, to those being deployed through their
// deployment (deploying), and to those canceled for a restart through the
// redeploy.
func (jm *JobMaster) splitsListed(s *sourceSplits, ids []string, deploying map[checkpoint.TaskID]bool) {
	for _, a := range s.enum.Discovered(ids) {
		id := checkpoint.TaskID{Vertex: s.v.UID, Subtask: a.Subtask}
		jm.log.Info("splits assigned", "task", id.String(), "splits", a.Splits)
		if deploying[id] {
			continue
		}
		r := jm.tasks[id]
		switch {
		case r == nil || r.canceled:
		case jm.finished[id]:
			jm.log.Warn("splits assigned to a finished source subtask are read when it restarts", "task", id.String(), "splits", a.Splits)
		default:
			jm.exec.AssignSplits(r.ref, a.Splits, a.Late)
		}
	}
	jm.scheduleDiscovery(s)
}

// scheduleDiscovery lists s's splits again after its discovery interval,
// off the job master's loop, and assigns the new ones on it.
func (jm *JobMaster) scheduleDiscovery(s *sourceSplits) {
	if s.v.DiscoveryInterval <= 0 || s.stop != nil {
		return
	}
	s.stop = jm.discovery.after(jm.clock, s.v.DiscoveryInterval, func(ctx context.Context) {
		ids, err := s.v.ListSplits(ctx)
		if ctx.Err() != nil {
			return
		}
		jm.post(func() error {
			s.stop = nil
			if err != nil {
				jm.log.Warn("discovering source splits; trying again in the next interval", "vertex", s.v.Name, "in", s.v.DiscoveryInterval, "err", err)
				jm.scheduleDiscovery(s)
				return nil
			}
			jm.splitsListed(s, ids, nil)
			return nil
		})
	})
}

// snapshotSplits records that checkpoint id is being triggered: its
// assignment is every split discovered so far. The triggers go out next,
// after every assignment already sent.
func (jm *JobMaster) snapshotSplits(id int64) {
	for _, s := range jm.splits {
		s.enum.Snapshot(id)
	}
}

// addSplitAssignments records in md each source's assignment of md's
// checkpoint.
func (jm *JobMaster) addSplitAssignments(md *checkpoint.Metadata) {
	for _, s := range jm.splits {
		st := s.enum.State(md.CheckpointID)
		if len(st) == 0 {
			continue
		}
		op, ok := md.Operator(s.v.UID)
		if !ok {
			md.Operators = append(md.Operators, checkpoint.OperatorState{
				UID: s.v.UID, Parallelism: s.v.Parallelism, MaxParallelism: s.v.MaxParallelism,
				Subtasks: make([]checkpoint.SubtaskState, s.v.Parallelism),
			})
			op = &md.Operators[len(md.Operators)-1]
		}
		op.SplitAssignment = st
	}
}

// discoveries runs the periodic listings of splits on timers and stops
// them when the job master returns, waiting for listings in progress.
type discoveries struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped bool
	running sync.WaitGroup
}

func newDiscoveries(ctx context.Context) *discoveries {
	ctx, cancel := context.WithCancel(ctx)
	return &discoveries{ctx: ctx, cancel: cancel}
}

// after runs f once d has passed, unless the discoveries stop first, and
// returns the function that stops the timer.
func (ds *discoveries) after(clock Clock, d time.Duration, f func(ctx context.Context)) func() bool {
	return clock.AfterFunc(d, func() {
		ds.mu.Lock()
		if ds.stopped {
			ds.mu.Unlock()
			return
		}
		ds.running.Add(1)
		ds.mu.Unlock()
		defer ds.running.Done()
		f(ds.ctx)
	})
}

// stop cancels the listings in progress and waits for them.
func (ds *discoveries) stop() {
	ds.mu.Lock()
	ds.stopped = true
	ds.mu.Unlock()
	ds.cancel()
	ds.running.Wait()
}
