package coordinator

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

var (
	randomSeed = flag.Uint64("coordinator.seed", 0, "first seed of TestRandomized (0: pick one)")
	randomRuns = flag.Int("coordinator.runs", 150, "number of runs of TestRandomized")
)

// TestRandomized drives the coordinator with random inputs, the way a
// wrapper with unreliable tasks and storage would, and checks every output
// against a model kept by the test:
//
//   - checkpoint ids are strictly increasing, across failovers and restores;
//   - no id completes twice, and an aborted id never completes;
//   - WriteMetadata comes only once every task of the checkpoint's plan
//     (those running at its trigger) acknowledged, and a checkpoint
//     completes only after its metadata was written;
//   - at most MaxConcurrent checkpoints are pending, savepoints aside;
//   - a periodic trigger respects the min-pause after the last completion;
//   - FailJob comes exactly when the counted failures exceed the tolerated;
//   - only retained checkpoints are discarded, never a savepoint, and at
//     most NumRetained are kept;
//   - ignored inputs are ignored for the right reason;
//   - the statistics' counts agree with the model.
//
// After the random phase the tasks and storage behave, and a checkpoint
// must complete. A failure prints the seed; rerun it with
// -coordinator.seed=N -coordinator.runs=1.
func TestRandomized(t *testing.T) {
	seed := *randomSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	runs := *randomRuns
	if testing.Short() {
		runs = min(runs, 30)
	}
	t.Logf("seeds %d to %d", seed, seed+uint64(runs)-1)
	for i := range runs {
		s := seed + uint64(i)
		if msg := runRandom(s); msg != "" {
			t.Fatalf("seed %d: %s\nreproduce: go test ./internal/checkpoint/coordinator -run TestRandomized -coordinator.seed=%d -coordinator.runs=1", s, msg, s)
		}
	}
}

type simCheckpoint struct {
	id        int64
	kind      checkpoint.Kind
	trigger   time.Time
	plan      []checkpoint.TaskID
	acked     map[checkpoint.TaskID]bool
	size      int64
	metadata  bool // WriteMetadata seen
	completed bool
	aborted   bool
}

type sim struct {
	rng   *rand.Rand
	cfg   Config
	tasks Tasks
	c     *Coordinator
	t0    time.Time
	now   time.Time
	log   []string

	finished  map[checkpoint.TaskID]bool
	lastID    int64
	cps       map[int64]*simCheckpoint
	pending   []int64 // ascending
	triggered int64
	nComplete int64
	nFailed   int64

	lastCompletion time.Time
	completedOnce  bool
	lastSucceeded  int64
	counted        map[int64]bool
	retained       []int64
	running        bool // started and not suspended or stopped
	stopped        bool
	pendingFailJob bool // the next output must be FailJob
}

type violation struct{ msg string }

func (s *sim) failf(format string, args ...any) {
	panic(violation{fmt.Sprintf(format, args...)})
}

func (s *sim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("%8s ", s.now.Sub(s.t0))+fmt.Sprintf(format, args...))
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func runRandom(seed uint64) (msg string) {
	s := &sim{
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		t0:       time.Unix(1_700_000_000, 0),
		finished: map[checkpoint.TaskID]bool{},
		cps:      map[int64]*simCheckpoint{},
		counted:  map[int64]bool{},
	}
	s.now = s.t0
	defer func() {
		if r := recover(); r != nil {
			v, ok := r.(violation)
			if !ok {
				panic(r)
			}
			tail := s.log[max(0, len(s.log)-40):]
			msg = fmt.Sprintf("%s\nconfig %+v\nlast events:\n%s", v.msg, s.cfg, strings.Join(tail, "\n"))
		}
	}()
	s.setup()
	steps := 100 + s.rng.IntN(400)
	for range steps {
		if s.stopped {
			break
		}
		s.step()
	}
	if !s.stopped {
		s.liveness()
	}
	return ""
}

func (s *sim) setup() {
	r := s.rng
	cfg := DefaultConfig()
	cfg.JobID = "sim"
	cfg.Interval = pick(r, 0, time.Second, 5*time.Second, 10*time.Second, 10*time.Second)
	cfg.MinPause = pick(r, 0, 0, time.Second, 3*time.Second, 12*time.Second)
	cfg.Timeout = pick(r, 2*time.Second, 5*time.Second, 20*time.Second)
	cfg.MaxConcurrent = pick(r, 1, 1, 2, 3)
	cfg.TolerableFailed = pick(r, 0, 1, 3, 1000)
	cfg.NumRetained = pick(r, 1, 2, 3)
	cfg.HistorySize = pick(r, 0, 3, 10)
	cfg.Unaligned = cfg.MaxConcurrent == 1 && r.IntN(4) == 0
	if cfg.Interval > 0 && r.IntN(2) == 0 {
		cfg.InitialDelay = time.Duration(1 + r.Int64N(int64(cfg.Interval)))
	}
	s.cfg = cfg

	ns, nm := 1+r.IntN(3), 1+r.IntN(3)
	var tasks Tasks
	for i := range ns {
		tasks.Sources = append(tasks.Sources, checkpoint.TaskID{Vertex: "src", Subtask: i})
	}
	tasks.All = slices.Clone(tasks.Sources)
	for i := range nm {
		tasks.All = append(tasks.All, checkpoint.TaskID{Vertex: "map", Subtask: i})
	}
	sink := checkpoint.TaskID{Vertex: "sink"}
	tasks.All = append(tasks.All, sink)
	if r.IntN(2) == 0 {
		tasks.Inputs = map[checkpoint.TaskID][]checkpoint.TaskID{}
		for i := range nm {
			m := checkpoint.TaskID{Vertex: "map", Subtask: i}
			tasks.Inputs[m] = slices.Clone(tasks.Sources)
			tasks.Inputs[sink] = append(tasks.Inputs[sink], m)
		}
	}
	s.tasks = tasks
	c, err := New(cfg, tasks)
	if err != nil {
		s.failf("New: %v", err)
	}
	s.c = c
	s.logf("start")
	s.apply(c.Start(s.now), "start", 0)
	s.running = true
}

// advance moves time forward by d, ticking at every deadline on the way,
// as a wrapper with a timer would.
func (s *sim) advance(d time.Duration) {
	target := s.now.Add(d)
	for {
		dl, ok := s.c.NextDeadline()
		if !ok || dl.After(target) {
			break
		}
		if dl.Before(s.now) {
			s.failf("deadline %v is in the past (now %v)", dl.Sub(s.t0), s.now.Sub(s.t0))
		}
		s.now = dl
		s.logf("tick (deadline)")
		s.apply(s.c.Tick(s.now), "tick", 0)
	}
	s.now = target
}

func (s *sim) step() {
	r := s.rng
	s.advance(pick(r, 0, 10*time.Millisecond, 300*time.Millisecond, time.Second, 4*time.Second))
	if !s.running && !s.stopped && r.IntN(3) > 0 {
		s.logf("restart (after fail-job)")
		s.restart()
		return
	}
	switch n := r.IntN(100); {
	case n < 30:
		s.randomAck()
	case n < 45:
		// Every task acknowledges one pending checkpoint.
		if len(s.pending) > 0 {
			cp := s.cps[pick(r, s.pending...)]
			for _, t := range cp.plan {
				if !cp.acked[t] {
					s.ack(cp.id, t)
				}
			}
		}
	case n < 62:
		s.randomWrite()
	case n < 67:
		s.randomDecline()
	case n < 73:
		s.manualTrigger(pick(r, checkpoint.KindCheckpoint, checkpoint.KindSavepoint))
	case n < 76:
		s.finishRandomTask()
	case n < 78:
		s.logf("restart")
		s.restart()
	case n < 80:
		id := 1 + r.Int64N(s.lastID+5)
		s.logf("restored %d", id)
		s.apply(s.c.Restored(s.now, id, "x"), "restored", 0)
		s.lastID = max(s.lastID, id)
	case n < 81 && r.IntN(4) == 0:
		s.logf("stop")
		s.apply(s.c.Stop(s.now), "stop", 0)
		s.stopped = true
		s.running = false
		if _, ok := s.c.NextDeadline(); ok {
			s.failf("deadline after stop")
		}
	default:
		s.logf("tick (random)")
		s.apply(s.c.Tick(s.now), "tick", 0)
	}
	s.checkStats()
}

func (s *sim) restart() {
	s.apply(s.c.Restart(s.now), "restart", 0)
	clear(s.finished)
	s.running = true
	if len(s.pending) != 0 {
		s.failf("checkpoints %v still pending after restart", s.pending)
	}
}

func (s *sim) plan() []checkpoint.TaskID {
	var p []checkpoint.TaskID
	for _, t := range s.tasks.All {
		if !s.finished[t] {
			p = append(p, t)
		}
	}
	return p
}

func (s *sim) randomAck() {
	r := s.rng
	var id int64
	switch {
	case len(s.pending) > 0 && r.IntN(10) < 8:
		id = pick(r, s.pending...)
	case s.lastID > 0:
		id = 1 + r.Int64N(s.lastID+2)
	default:
		id = 1
	}
	task := pick(r, s.tasks.All...)
	if cp := s.cps[id]; cp != nil && r.IntN(10) < 8 {
		var waiting []checkpoint.TaskID
		for _, t := range cp.plan {
			if !cp.acked[t] {
				waiting = append(waiting, t)
			}
		}
		if len(waiting) > 0 {
			task = pick(r, waiting...)
		}
	}
	if r.IntN(50) == 0 {
		task = checkpoint.TaskID{Vertex: "ghost"}
	}
	s.ack(id, task)
}

func (s *sim) ack(id int64, task checkpoint.TaskID) {
	size := s.rng.Int64N(1000)
	ack := checkpoint.TaskAck{
		States: map[string]checkpoint.SubtaskState{task.Vertex: {Keyed: []checkpoint.StateHandle{{
			Path: fmt.Sprintf("chk-%d/%v", id, task), Size: size,
		}}}},
		Stats: checkpoint.SubtaskStats{SyncDuration: time.Millisecond, AsyncDuration: time.Duration(size) * time.Millisecond},
	}
	s.logf("ack %d %v", id, task)
	out, err := s.c.Ack(s.now, task, id, ack)
	cp := s.cps[id]
	switch {
	case s.stopped:
		s.expectErr(err, ErrStopped)
	case cp == nil && id > s.lastID:
		s.expectErr(err, ErrUnknownCheckpoint)
	case cp == nil || cp.completed || cp.aborted:
		s.expectErr(err, ErrLate)
	case cp.acked[task]:
		s.expectErr(err, ErrDuplicateAck)
	case !slices.Contains(cp.plan, task):
		s.expectErr(err, ErrUnknownTask)
	default:
		if err != nil {
			s.failf("ack %d from %v refused: %v", id, task, err)
		}
		cp.acked[task] = true
		cp.size += size
	}
	s.apply(out, "ack", 0)
}

func (s *sim) expectErr(err, want error) {
	if !errors.Is(err, want) {
		s.failf("got error %v, want %v", err, want)
	}
}

func (s *sim) randomWrite() {
	var ready []int64
	for _, id := range s.pending {
		if s.cps[id].metadata {
			ready = append(ready, id)
		}
	}
	if len(ready) == 0 {
		if len(s.pending) > 0 && s.rng.IntN(5) == 0 {
			// Metadata reported for a checkpoint still collecting acks.
			id := pick(s.rng, s.pending...)
			s.logf("written %d (not requested)", id)
			out, err := s.c.MetadataWritten(s.now, id, nil)
			s.expectErr(err, ErrUnknownCheckpoint)
			s.apply(out, "written", 0)
		}
		return
	}
	id := pick(s.rng, ready...)
	var werr error
	if s.rng.IntN(8) == 0 {
		werr = errors.New("storage unavailable")
	}
	s.write(id, werr)
}

func (s *sim) write(id int64, werr error) {
	s.logf("written %d err=%v", id, werr)
	out, err := s.c.MetadataWritten(s.now, id, werr)
	if err != nil {
		s.failf("metadata of pending checkpoint %d refused: %v", id, err)
	}
	if werr == nil {
		s.complete(s.cps[id])
	}
	s.apply(out, "written", id)
	if werr == nil && s.cps[id].kind == checkpoint.KindCheckpoint {
		for _, p := range s.pending {
			if p < id && s.cps[p].kind == checkpoint.KindCheckpoint {
				s.failf("checkpoint %d completed but older checkpoint %d was not subsumed", id, p)
			}
		}
	}
}

// complete records a completion the coordinator accepted.
func (s *sim) complete(cp *simCheckpoint) {
	if cp.completed || cp.aborted {
		s.failf("checkpoint %d completes twice or after its abort", cp.id)
	}
	for _, t := range cp.plan {
		if !cp.acked[t] {
			s.failf("checkpoint %d completes without the ack of %v", cp.id, t)
		}
	}
	cp.completed = true
	s.removePending(cp.id)
	s.nComplete++
	s.lastCompletion = s.now
	s.completedOnce = true
	if cp.id > s.lastSucceeded {
		s.lastSucceeded = cp.id
		clear(s.counted)
	}
	if cp.kind == checkpoint.KindCheckpoint {
		s.retained = append(s.retained, cp.id)
	}
}

func (s *sim) removePending(id int64) {
	i := slices.Index(s.pending, id)
	if i < 0 {
		s.failf("checkpoint %d is not pending", id)
	}
	s.pending = slices.Delete(s.pending, i, i+1)
}

var declineReasons = []error{
	ReasonTaskNotReady, ReasonTaskClosing, ReasonAsyncFailure, ReasonNewerBarrier,
	errors.New("snapshot failed"), fmt.Errorf("upload: %w", ReasonAsyncFailure),
}

func (s *sim) randomDecline() {
	if len(s.pending) == 0 {
		return
	}
	id := pick(s.rng, s.pending...)
	task := pick(s.rng, s.cps[id].plan...)
	reason := pick(s.rng, declineReasons...)
	s.logf("decline %d %v: %v", id, task, reason)
	out, err := s.c.Decline(s.now, task, id, reason)
	if err != nil {
		s.failf("decline of pending %d refused: %v", id, err)
	}
	s.apply(out, "decline", id)
}

func (s *sim) manualTrigger(kind checkpoint.Kind) {
	forced := kind == checkpoint.KindSavepoint && !s.cfg.Unaligned
	trig := s.roots()
	s.logf("trigger %v", kind)
	id, out, err := s.c.TriggerManual(s.now, kind)
	switch {
	case s.stopped:
		s.expectErr(err, ReasonShutdown)
	case !s.running:
		s.expectErr(err, ReasonNotAllTasksRunning)
	case !forced && len(s.pending) >= s.cfg.MaxConcurrent:
		s.expectErr(err, ReasonTooManyConcurrent)
	case len(trig) == 0:
		s.expectErr(err, ReasonNotAllTasksRunning)
	default:
		if err != nil {
			s.failf("manual %v refused: %v", kind, err)
		}
		if len(out) == 0 {
			s.failf("manual %v gave no trigger", kind)
		}
		if tr, ok := out[0].(Trigger); !ok || tr.ID != id {
			s.failf("manual %v returned id %d but output %v", kind, id, out)
		}
	}
	s.apply(out, "manual", 0)
}

// roots are the tasks a checkpoint is triggered at: running sources and,
// when inputs are known, running tasks whose inputs all finished.
func (s *sim) roots() []checkpoint.TaskID {
	var roots []checkpoint.TaskID
	for _, t := range s.tasks.All {
		if s.finished[t] {
			continue
		}
		if slices.Contains(s.tasks.Sources, t) {
			roots = append(roots, t)
			continue
		}
		if s.tasks.Inputs == nil {
			continue
		}
		all := true
		for _, in := range s.tasks.Inputs[t] {
			all = all && s.finished[in]
		}
		if all {
			roots = append(roots, t)
		}
	}
	return roots
}

func (s *sim) finishRandomTask() {
	if s.rng.IntN(3) > 0 {
		return
	}
	task := pick(s.rng, s.tasks.All...)
	s.logf("finish %v", task)
	out, err := s.c.TaskFinished(s.now, task)
	if s.stopped {
		s.expectErr(err, ErrStopped)
	} else if err != nil {
		s.failf("finish %v: %v", task, err)
	}
	s.finished[task] = true
	s.apply(out, "finish", 0)
}

// apply checks a batch of outputs against the model and updates it.
// declined is the checkpoint a Decline input named, whose abort is the
// task's; written is the checkpoint whose metadata was just written.
func (s *sim) apply(out []Output, input string, declined int64) {
	for _, o := range out {
		if _, ok := o.(FailJob); s.pendingFailJob && !ok {
			s.failf("expected FailJob after a failure beyond the tolerated, got %#v", o)
		}
		switch o := o.(type) {
		case Trigger:
			s.logf("  -> trigger %d %v to %v", o.ID, o.Kind, o.Tasks)
			s.onTrigger(o, input)
		case WriteMetadata:
			id := o.Metadata.CheckpointID
			s.logf("  -> write-metadata %d", id)
			cp := s.cps[id]
			if cp == nil || cp.completed || cp.aborted || cp.metadata {
				s.failf("WriteMetadata for checkpoint %d that is not collecting acks", id)
			}
			for _, t := range cp.plan {
				if !cp.acked[t] {
					s.failf("WriteMetadata for %d before the ack of %v", id, t)
				}
			}
			if o.Metadata.Kind != cp.kind || o.Metadata.Size() != cp.size {
				s.failf("metadata of %d: kind %v size %d, want %v %d", id, o.Metadata.Kind, o.Metadata.Size(), cp.kind, cp.size)
			}
			cp.metadata = true
		case NotifyComplete:
			s.logf("  -> notify-complete %d", o.ID)
			cp := s.cps[o.ID]
			if cp == nil || !cp.completed || input != "written" || cp.kind != checkpoint.KindCheckpoint {
				s.failf("NotifyComplete %d without its metadata written", o.ID)
			}
			if !slices.Equal(o.Tasks, cp.plan) {
				s.failf("NotifyComplete %d to %v, want %v", o.ID, o.Tasks, cp.plan)
			}
		case NotifyAbort:
			ae := o.Reason.(*AbortError)
			s.logf("  -> notify-abort %d %v", o.ID, ae.Reason.String())
			cp := s.cps[o.ID]
			if cp == nil || cp.completed || cp.aborted {
				s.failf("NotifyAbort %d for a checkpoint that is not pending", o.ID)
			}
			cp.aborted = true
			s.removePending(o.ID)
			s.nFailed++
			s.countFailure(cp, ae.Reason, o.ID == declined && input == "decline")
		case Discard:
			s.logf("  -> discard %d", o.ID)
			if len(s.retained) == 0 || s.retained[0] != o.ID {
				s.failf("Discard %d, but the oldest retained is %v", o.ID, s.retained)
			}
			s.retained = s.retained[1:]
		case FailJob:
			s.logf("  -> fail-job %v", o.Reason)
			if !s.pendingFailJob {
				s.failf("FailJob the model did not expect: %v", o.Reason)
			}
			if !errors.Is(o.Reason, ErrTolerableFailuresExceeded) {
				s.failf("FailJob reason %v", o.Reason)
			}
			s.pendingFailJob = false
			s.running = false
		}
	}
	if s.pendingFailJob {
		s.failf("a failure beyond the tolerated did not fail the job")
	}
	if len(s.retained) > s.cfg.NumRetained {
		s.failf("%d checkpoints retained, NumRetained is %d", len(s.retained), s.cfg.NumRetained)
	}
	if got := s.c.Retained(); !slices.Equal(got, s.retained) && !(len(got) == 0 && len(s.retained) == 0) {
		s.failf("retained %v, model has %v", got, s.retained)
	}
	nonForced := 0
	for _, id := range s.pending {
		if s.cps[id].kind == checkpoint.KindCheckpoint || s.cfg.Unaligned {
			nonForced++
		}
	}
	if nonForced > s.cfg.MaxConcurrent {
		s.failf("%d checkpoints pending, MaxConcurrent is %d", nonForced, s.cfg.MaxConcurrent)
	}
}

// countFailure mirrors the failure counter; when the job must fail, the
// next output must be FailJob.
func (s *sim) countFailure(cp *simCheckpoint, r Reason, taskSide bool) {
	if !taskSide && cp.kind == checkpoint.KindSavepoint {
		return
	}
	if cp.id <= s.lastSucceeded || !r.Counted() {
		return
	}
	s.counted[cp.id] = true
	if len(s.counted) > s.cfg.TolerableFailed {
		clear(s.counted)
		s.pendingFailJob = true
	}
}

func (s *sim) onTrigger(o Trigger, input string) {
	if !s.running {
		s.failf("trigger %d while the job is not running", o.ID)
	}
	if o.ID <= s.lastID {
		s.failf("trigger id %d after id %d", o.ID, s.lastID)
	}
	s.lastID = o.ID
	manual := input == "manual"
	forced := o.Kind == checkpoint.KindSavepoint && !s.cfg.Unaligned
	if !forced && len(s.pending) >= s.cfg.MaxConcurrent {
		s.failf("trigger %d with %d pending, MaxConcurrent %d", o.ID, len(s.pending), s.cfg.MaxConcurrent)
	}
	if !manual {
		if o.Kind != checkpoint.KindCheckpoint || s.cfg.Interval == 0 {
			s.failf("unexpected periodic trigger %d (%v)", o.ID, o.Kind)
		}
		if s.completedOnce && o.Timestamp.Before(s.lastCompletion.Add(s.cfg.MinPause)) {
			s.failf("periodic trigger %d at %v violates the min-pause after the completion at %v",
				o.ID, o.Timestamp.Sub(s.t0), s.lastCompletion.Sub(s.t0))
		}
	}
	plan := s.plan()
	if len(o.Tasks) == 0 {
		s.failf("trigger %d to no task", o.ID)
	}
	if want := s.roots(); !slices.Equal(o.Tasks, want) {
		s.failf("trigger %d sent to %v, want %v", o.ID, o.Tasks, want)
	}
	s.cps[o.ID] = &simCheckpoint{
		id: o.ID, kind: o.Kind, trigger: o.Timestamp, plan: plan, acked: map[checkpoint.TaskID]bool{},
	}
	s.pending = append(s.pending, o.ID)
	s.triggered++
}

func (s *sim) checkStats() {
	st := s.c.Stats()
	c := st.Counts
	if c.InProgress != len(s.pending) || c.Total != s.triggered || c.Completed != s.nComplete || c.Failed != s.nFailed {
		s.failf("stats counts %+v, model: %d pending, %d triggered, %d completed, %d failed",
			c, len(s.pending), s.triggered, s.nComplete, s.nFailed)
	}
	if len(st.History) > s.cfg.HistorySize {
		s.failf("history of %d, HistorySize %d", len(st.History), s.cfg.HistorySize)
	}
	for i, cs := range st.History {
		if i > 0 && cs.ID >= st.History[i-1].ID {
			s.failf("history not newest first: %d after %d", cs.ID, st.History[i-1].ID)
		}
		cp := s.cps[cs.ID]
		want := StatusInProgress
		if cp.completed {
			want = StatusCompleted
		} else if cp.aborted {
			want = StatusFailed
		}
		if cs.Status != want {
			s.failf("checkpoint %d has status %s, want %s", cs.ID, cs.Status, want)
		}
		if cs.Status == StatusCompleted && cs.NumAcknowledgedSubtasks != cs.NumSubtasks {
			s.failf("completed checkpoint %d acknowledged by %d of %d subtasks", cs.ID, cs.NumAcknowledgedSubtasks, cs.NumSubtasks)
		}
	}
}

// liveness lets the job run with well-behaved tasks and storage: a
// checkpoint must complete.
func (s *sim) liveness() {
	s.logf("liveness: restart")
	s.restart()
	before := s.nComplete
	for range 200 {
		if s.cfg.Interval == 0 && len(s.pending) == 0 {
			s.manualTrigger(checkpoint.KindCheckpoint)
		}
		for _, id := range slices.Clone(s.pending) {
			cp := s.cps[id]
			for _, t := range cp.plan {
				if !cp.acked[t] && !cp.aborted {
					s.ack(id, t)
				}
			}
			if cp.metadata && !cp.completed && !cp.aborted {
				s.write(id, nil)
			}
		}
		if s.nComplete > before {
			return
		}
		s.advance(100 * time.Millisecond)
	}
	s.failf("no checkpoint completed in the liveness phase")
}
