package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
)

type runState int

const (
	created   runState = iota // before Start
	running                   // the job runs; checkpoints are triggered
	suspended                 // FailJob was emitted; waiting for Restart
	stopped                   // Stop was called; everything is ignored
)

// Coordinator is the checkpoint coordinator. It is not safe for concurrent
// use: one goroutine owns it, feeds it inputs and performs its outputs in
// order.
type Coordinator struct {
	cfg          Config
	interval     time.Duration // effective periodic interval; 0 when off
	initialDelay time.Duration
	g            *graph
	finished     []bool // by task index
	numFinished  int

	state  runState
	nextID int64

	pending []*pending // ascending by id

	// nextPeriodic is when the periodic trigger fires next (zero: not
	// scheduled). When it fires the request is queued; a queued request
	// waits for a free slot (max-concurrent) and is deferred to the end of
	// the min-pause.
	nextPeriodic   time.Time
	periodicQueued bool
	// periodicPaused holds periodic requests back (PausePeriodic).
	periodicPaused bool

	lastCompletion time.Time
	completedOnce  bool

	failures   failureCounter
	retained   []retained     // completed checkpoints, oldest first
	sharedRefs map[string]int // state paths referenced by retained checkpoints

	stats *tracker
	out   []Output
}

// pending is a checkpoint between its trigger and its completion or abort.
type pending struct {
	id       int64
	kind     checkpoint.Kind
	trigger  time.Time
	deadline time.Time
	// plan are the tasks that must acknowledge: those running at the
	// trigger, in the order of Tasks.All.
	plan    []checkpoint.TaskID
	waiting map[checkpoint.TaskID]struct{}
	acks    map[checkpoint.TaskID]checkpoint.TaskAck
	lastAck time.Time
	// finalizing is set once every task acknowledged and WriteMetadata was
	// emitted.
	finalizing bool
	rec        *record
}

type retained struct {
	id    int64
	paths []string
}

// New returns a coordinator for a job with the given tasks. It does
// nothing until Start.
func New(cfg Config, tasks Tasks) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g, err := tasks.validate()
	if err != nil {
		return nil, err
	}
	c := &Coordinator{
		cfg:        cfg,
		g:          g,
		finished:   make([]bool, len(g.all)),
		nextID:     1,
		failures:   newFailureCounter(cfg.TolerableFailed),
		sharedRefs: map[string]int{},
		stats:      newTracker(cfg),
	}
	if cfg.Interval > 0 {
		c.interval = max(cfg.Interval, cfg.MinPause)
		c.initialDelay = cfg.InitialDelay
		if c.initialDelay == 0 {
			c.initialDelay = c.interval
		}
	}
	return c, nil
}

// Start tells the coordinator the job is running: the first periodic
// checkpoint is due InitialDelay later. If checkpoints are pending (Start
// on a running coordinator) they are aborted as suspended first, as
// Flink's checkpoint scheduler does when it is restarted.
func (c *Coordinator) Start(now time.Time) []Output {
	if c.state == stopped {
		return nil
	}
	c.abortAll(now, ReasonSuspended)
	c.state = running
	c.schedule(now)
	return c.take()
}

// Restart tells the coordinator the job failed over: every pending
// checkpoint is aborted (not counted as a failure), all tasks are running
// again (call TaskFinished anew for tasks that finish on restore), and
// periodic checkpoints start again InitialDelay later. Checkpoint ids keep
// increasing.
func (c *Coordinator) Restart(now time.Time) []Output {
	if c.state == stopped {
		return nil
	}
	c.abortAll(now, ReasonJobFailover)
	clear(c.finished)
	c.numFinished = 0
	c.state = running
	c.schedule(now)
	return c.take()
}

// Stop shuts the coordinator down: pending checkpoints are aborted and
// nothing is triggered again. Later inputs are ignored.
func (c *Coordinator) Stop(now time.Time) []Output {
	if c.state == stopped {
		return nil
	}
	c.abortAll(now, ReasonShutdown)
	c.state = stopped
	c.nextPeriodic = time.Time{}
	c.periodicQueued = false
	return c.take()
}

// Tick tells the coordinator that time has passed: pending checkpoints
// whose timeout has run out expire, and a periodic checkpoint that is due
// is triggered if max-concurrent and min-pause allow it, or else deferred.
// Call it no later than NextDeadline.
func (c *Coordinator) Tick(now time.Time) []Output {
	if c.state == stopped {
		return nil
	}
	for _, p := range slices.Clone(c.pending) {
		if c.isPending(p) && !now.Before(p.deadline) {
			c.abort(now, p, ReasonExpired, nil, false)
		}
	}
	if c.state == running && !c.nextPeriodic.IsZero() && !now.Before(c.nextPeriodic) {
		// One request however many intervals have passed: a late tick
		// does not cause a burst of checkpoints.
		c.periodicQueued = true
		n := now.Sub(c.nextPeriodic)/c.interval + 1
		c.nextPeriodic = c.nextPeriodic.Add(n * c.interval)
	}
	c.runQueued(now)
	return c.take()
}

// NextDeadline returns the time by which Tick must be called next: the
// next periodic trigger or the earliest timeout of a pending checkpoint.
// It returns false when nothing is scheduled.
func (c *Coordinator) NextDeadline() (time.Time, bool) {
	var d time.Time
	if c.state == running {
		d = c.nextPeriodic
	}
	for _, p := range c.pending {
		if d.IsZero() || p.deadline.Before(d) {
			d = p.deadline
		}
	}
	return d, !d.IsZero()
}

// PausePeriodic holds periodic checkpoints back while paused is true (a
// request that falls due meanwhile waits), and lets them run again when
// it is false: a stop-with-savepoint pauses them, since no checkpoint may
// complete after its savepoint. The returned outputs trigger a request
// that fell due while paused.
func (c *Coordinator) PausePeriodic(now time.Time, paused bool) []Output {
	c.periodicPaused = paused
	if !paused {
		c.runQueued(now)
	}
	return c.take()
}

// TriggerManual starts a checkpoint or savepoint now and returns its id. A
// checkpoint is refused with ReasonTooManyConcurrent while MaxConcurrent
// checkpoints are pending; a savepoint is not (unless Unaligned is set).
// Neither waits for the min-pause. A refusal is not a checkpoint failure.
func (c *Coordinator) TriggerManual(now time.Time, kind checkpoint.Kind) (int64, []Output, error) {
	switch c.state {
	case stopped:
		return 0, nil, ReasonShutdown
	case created, suspended:
		return 0, nil, ReasonNotAllTasksRunning
	}
	if kind != checkpoint.KindCheckpoint && kind != checkpoint.KindSavepoint {
		return 0, nil, fmt.Errorf("checkpoint coordinator: unknown kind %d", int(kind))
	}
	forced := kind == checkpoint.KindSavepoint && !c.cfg.Unaligned
	if !forced && len(c.pending) >= c.cfg.MaxConcurrent {
		return 0, nil, ReasonTooManyConcurrent
	}
	p, err := c.trigger(now, kind)
	if err != nil {
		return 0, c.take(), err
	}
	return p.id, c.take(), nil
}

// Ack records a task's acknowledgement of checkpoint id with its state.
// When the last task the checkpoint waits for acknowledges, it returns
// WriteMetadata; the checkpoint completes only with MetadataWritten.
//
// An acknowledgement that cannot count is ignored and the returned error
// says why: ErrUnknownCheckpoint, ErrLate (the checkpoint completed or
// was aborted; the measurements of a late ack still go into the failed
// checkpoint's statistics, marked aborted), ErrDuplicateAck or
// ErrUnknownTask. The coordinator keeps the state handles of ack and hands
// them on in WriteMetadata; the caller must not modify them afterwards.
func (c *Coordinator) Ack(now time.Time, task checkpoint.TaskID, id int64, ack checkpoint.TaskAck) ([]Output, error) {
	if c.state == stopped {
		return nil, ErrStopped
	}
	p := c.find(id)
	if p == nil {
		return nil, c.notPending(now, id, task, &ack)
	}
	if _, ok := p.waiting[task]; !ok {
		if _, acked := p.acks[task]; acked {
			return nil, fmt.Errorf("%w: %v for checkpoint %d", ErrDuplicateAck, task, id)
		}
		return nil, fmt.Errorf("%w: %v for checkpoint %d", ErrUnknownTask, task, id)
	}
	delete(p.waiting, task)
	p.acks[task] = ack
	p.lastAck = now
	p.rec.ack(task, now, ack, c.checkpointedSize(ack), false)
	if len(p.waiting) == 0 {
		p.finalizing = true
		c.emit(WriteMetadata{Metadata: c.metadata(p)})
	}
	return c.take(), nil
}

// Decline aborts checkpoint id because task could not take it. Whether
// the failure counts towards the tolerable failures depends on the Reason
// err wraps (see Reason); an err that wraps none is ReasonDeclined, which
// counts. A decline for a checkpoint that is not pending is ignored with
// ErrUnknownCheckpoint or ErrLate.
func (c *Coordinator) Decline(now time.Time, task checkpoint.TaskID, id int64, err error) ([]Output, error) {
	if c.state == stopped {
		return nil, ErrStopped
	}
	p := c.find(id)
	if p == nil {
		return nil, c.notPending(now, id, task, nil)
	}
	if err == nil {
		err = ReasonDeclined
	}
	c.abort(now, p, ReasonOf(err), err, true)
	c.runQueued(now)
	return c.take(), nil
}

// MetadataWritten reports the outcome of WriteMetadata for checkpoint id.
// On success the checkpoint completes: for a checkpoint (not a savepoint)
// older pending checkpoints are subsumed, completed checkpoints beyond
// NumRetained are discarded, and the tasks are notified, in that order. A
// failed write aborts the checkpoint with ReasonIO.
//
// For a checkpoint that is no longer pending (it expired or the job failed
// over while the write was in flight) the report is ignored with ErrLate:
// the checkpoint was aborted and its _metadata must not be used.
func (c *Coordinator) MetadataWritten(now time.Time, id int64, err error) ([]Output, error) {
	if c.state == stopped {
		return nil, ErrStopped
	}
	p := c.find(id)
	if p == nil {
		return nil, c.notPending(now, id, checkpoint.TaskID{}, nil)
	}
	if !p.finalizing {
		return nil, fmt.Errorf("%w: checkpoint %d is still waiting for acknowledgements", ErrUnknownCheckpoint, id)
	}
	if err != nil {
		c.abort(now, p, ReasonIO, err, false)
	} else {
		c.complete(now, p)
	}
	c.runQueued(now)
	return c.take(), nil
}

// TaskFinished records that task reached the end of its input and
// terminated. Checkpoints triggered from now on neither trigger it nor wait
// for it; the statistics show it as finished. A task's acknowledgements
// arrive before its finish, so a pending checkpoint it has not
// acknowledged never will be: it is aborted for task-closing, which does
// not count as a failure, and the next checkpoint leaves the task out (a
// task can finish without seeing a barrier that is on its way, or without
// the trigger that was sent to it). Once every task has finished no
// checkpoint is triggered.
func (c *Coordinator) TaskFinished(now time.Time, task checkpoint.TaskID) ([]Output, error) {
	if c.state == stopped {
		return nil, ErrStopped
	}
	i, ok := c.g.index[task]
	if !ok {
		return nil, fmt.Errorf("%w: %v", ErrUnknownTask, task)
	}
	if c.finished[i] {
		return nil, nil
	}
	c.finished[i] = true
	c.numFinished++
	// A task that finished can no longer acknowledge: a pending checkpoint
	// still waiting for it would wait until it expires. Abort it (it does
	// not count as a failure); the next one leaves the task out.
	for _, p := range slices.Clone(c.pending) {
		if _, waiting := p.waiting[task]; waiting && !p.finalizing {
			c.abort(now, p, ReasonTaskClosing, fmt.Errorf("%v finished without acknowledging checkpoint %d", task, p.id), false)
		}
	}
	if c.allFinished() {
		c.nextPeriodic = time.Time{}
		c.periodicQueued = false
	} else {
		c.runQueued(now)
	}
	return c.take(), nil
}

// Restored records that the job restored checkpoint id from external (its
// metadata's location), for the statistics. Checkpoint ids continue after
// the highest id seen, so none is ever reused.
func (c *Coordinator) Restored(now time.Time, id int64, external string) []Output {
	c.stats.restore(id, now, external)
	if id >= c.nextID {
		c.nextID = id + 1
	}
	return nil
}

// Claimed records that the job owns checkpoint id, which it restored
// (CLAIM): it is retained as if the job had completed it, oldest of all,
// counts among the NumRetained, and is discarded (a Discard output) once
// newer checkpoints push it out; paths are the state files it references,
// which the checkpointed size of later checkpoints leaves out. Call it
// before the job's first checkpoint completes, once; a second call, or
// one for a checkpoint already retained, does nothing.
func (c *Coordinator) Claimed(id int64, paths []string) {
	if slices.ContainsFunc(c.retained, func(r retained) bool { return r.id == id }) {
		return
	}
	seen := map[string]bool{}
	var own []string
	for _, p := range paths {
		if p != "" && !seen[p] {
			seen[p] = true
			own = append(own, p)
			c.sharedRefs[p]++
		}
	}
	c.retained = slices.Insert(c.retained, 0, retained{id: id, paths: own})
	if id >= c.nextID {
		c.nextID = id + 1
	}
}

// SkipTo makes the next checkpoint's id at least id: a job recovered by a
// new leading job manager starts above every id its predecessor may have
// used, so that no two checkpoints share a directory.
func (c *Coordinator) SkipTo(id int64) {
	if id > c.nextID {
		c.nextID = id
	}
}

// Invalid records that retained checkpoint id was found damaged (a state
// file does not verify) when the job tried to restore it: it is no longer
// retained, nor counted among the num-retained, and its files are
// discarded. The job restores an older retained checkpoint instead.
func (c *Coordinator) Invalid(now time.Time, id int64) []Output {
	i := slices.IndexFunc(c.retained, func(r retained) bool { return r.id == id })
	if i < 0 {
		return nil
	}
	for _, path := range c.retained[i].paths {
		if c.sharedRefs[path]--; c.sharedRefs[path] <= 0 {
			delete(c.sharedRefs, path)
		}
	}
	c.retained = slices.Delete(c.retained, i, i+1)
	c.stats.discarded(id)
	c.emit(Discard{ID: id})
	return c.take()
}

// Stats returns a copy of the statistics.
func (c *Coordinator) Stats() Snapshot { return c.stats.snapshot() }

// IsPending reports whether checkpoint id is pending: triggered, and
// neither completed nor aborted yet.
func (c *Coordinator) IsPending(id int64) bool { return c.find(id) != nil }

// Retained returns the ids of the retained completed checkpoints, oldest
// first; the last is the one to recover from.
func (c *Coordinator) Retained() []int64 {
	ids := make([]int64, len(c.retained))
	for i, r := range c.retained {
		ids[i] = r.id
	}
	return ids
}

func (c *Coordinator) emit(o Output) { c.out = append(c.out, o) }

func (c *Coordinator) take() []Output {
	out := c.out
	c.out = nil
	return out
}

func (c *Coordinator) allFinished() bool { return c.numFinished == len(c.g.all) }

func (c *Coordinator) schedule(now time.Time) {
	c.periodicQueued = false
	c.nextPeriodic = time.Time{}
	if c.interval > 0 && !c.allFinished() {
		c.nextPeriodic = now.Add(c.initialDelay)
	}
}

func (c *Coordinator) find(id int64) *pending {
	for _, p := range c.pending {
		if p.id == id {
			return p
		}
	}
	return nil
}

func (c *Coordinator) isPending(p *pending) bool { return c.find(p.id) == p }

func (c *Coordinator) remove(p *pending) {
	c.pending = slices.DeleteFunc(c.pending, func(q *pending) bool { return q == p })
}

// notPending explains why a message for checkpoint id is ignored, and
// files a late acknowledgement's measurements.
func (c *Coordinator) notPending(now time.Time, id int64, task checkpoint.TaskID, ack *checkpoint.TaskAck) error {
	if id <= 0 || id >= c.nextID {
		return fmt.Errorf("%w %d", ErrUnknownCheckpoint, id)
	}
	if ack != nil {
		c.stats.late(id, task, now, *ack)
	}
	if r := c.stats.find(id); r != nil {
		return fmt.Errorf("%w: checkpoint %d %s", ErrLate, id, strings.ToLower(string(r.status)))
	}
	return fmt.Errorf("%w: checkpoint %d", ErrLate, id)
}

// runQueued triggers the queued periodic checkpoint if it may run now
// (Flink's CheckpointRequestDecider): it waits while MaxConcurrent
// checkpoints are pending, and if the min-pause since the last completion
// has not passed, the periodic trigger is rescheduled to its end.
func (c *Coordinator) runQueued(now time.Time) {
	if !c.periodicQueued || c.periodicPaused {
		return
	}
	if c.state != running || c.allFinished() {
		c.periodicQueued = false
		return
	}
	if len(c.pending) >= c.cfg.MaxConcurrent {
		return
	}
	if c.completedOnce && c.cfg.MinPause > 0 {
		if earliest := c.lastCompletion.Add(c.cfg.MinPause); now.Before(earliest) {
			c.periodicQueued = false
			c.nextPeriodic = earliest
			return
		}
	}
	c.periodicQueued = false
	// A periodic trigger with no task to trigger (every source finished
	// and the inputs of the others unknown) is skipped; the next interval
	// tries again.
	_, _ = c.trigger(now, checkpoint.KindCheckpoint)
}

func (c *Coordinator) trigger(now time.Time, kind checkpoint.Kind) (*pending, error) {
	trig, wait := c.g.plan(c.finished)
	if len(trig) == 0 || len(wait) == 0 {
		return nil, ReasonNotAllTasksRunning
	}
	p := &pending{
		id:       c.nextID,
		kind:     kind,
		trigger:  now,
		deadline: now.Add(c.cfg.Timeout),
		plan:     wait,
		waiting:  make(map[checkpoint.TaskID]struct{}, len(wait)),
		acks:     make(map[checkpoint.TaskID]checkpoint.TaskAck, len(wait)),
	}
	c.nextID++
	for _, t := range wait {
		p.waiting[t] = struct{}{}
	}
	p.rec = c.stats.pending(p.id, kind, now, c.g, c.finished)
	c.pending = append(c.pending, p)
	c.emit(Trigger{
		ID:        p.id,
		Kind:      kind,
		Timestamp: now,
		Tasks:     trig,
		Mode:      c.cfg.Mode,
		Unaligned: c.cfg.Unaligned && kind == checkpoint.KindCheckpoint,
	})
	return p, nil
}

// abort ends a pending checkpoint as failed, tells its tasks, and fails the
// job if that was one counted failure too many. taskSide is true for a
// task's decline.
func (c *Coordinator) abort(now time.Time, p *pending, reason Reason, cause error, taskSide bool) {
	c.remove(p)
	err := &AbortError{ID: p.id, Reason: reason, Cause: cause}
	c.stats.failedAt(p.rec, now, err.Message())
	c.emit(NotifyAbort{ID: p.id, Reason: err, Tasks: p.plan})
	if c.failures.failure(p.id, p.kind, reason, taskSide) {
		c.emit(FailJob{Reason: fmt.Errorf("%w (%d tolerated): %w", ErrTolerableFailuresExceeded, c.cfg.TolerableFailed, err)})
		c.suspend(now)
	}
}

// suspend stops checkpointing after FailJob until Restart or Start.
func (c *Coordinator) suspend(now time.Time) {
	c.state = suspended
	c.nextPeriodic = time.Time{}
	c.periodicQueued = false
	c.abortAll(now, ReasonSuspended)
}

// abortAll aborts every pending checkpoint for a reason that never counts.
func (c *Coordinator) abortAll(now time.Time, reason Reason) {
	for _, p := range slices.Clone(c.pending) {
		c.abort(now, p, reason, nil, false)
	}
}

func (c *Coordinator) complete(now time.Time, p *pending) {
	c.remove(p)
	c.lastCompletion = now
	c.completedOnce = true
	c.failures.success(p.id)
	c.stats.completed(p.rec)
	if p.kind == checkpoint.KindSavepoint {
		return
	}
	c.retain(p)
	for len(c.retained) > c.cfg.NumRetained {
		old := c.retained[0]
		c.retained = c.retained[1:]
		for _, path := range old.paths {
			if c.sharedRefs[path]--; c.sharedRefs[path] <= 0 {
				delete(c.sharedRefs, path)
			}
		}
		c.stats.discarded(old.id)
		c.emit(Discard{ID: old.id})
	}
	for _, q := range slices.Clone(c.pending) {
		if q.id < p.id && q.kind != checkpoint.KindSavepoint {
			c.abort(now, q, ReasonSubsumed, nil, false)
		}
	}
	c.emit(NotifyComplete{ID: p.id, Tasks: p.plan})
}

// retain adds a completed checkpoint to the retained ones and remembers
// the state files it references.
func (c *Coordinator) retain(p *pending) {
	seen := map[string]bool{}
	var paths []string
	for _, ack := range p.acks {
		forEachHandle(ack, func(h checkpoint.StateHandle) {
			if h.Path != "" && !seen[h.Path] {
				seen[h.Path] = true
				paths = append(paths, h.Path)
				c.sharedRefs[h.Path]++
			}
		})
	}
	c.retained = append(c.retained, retained{id: p.id, paths: paths})
}

// checkpointedSize is the size of the state an acknowledgement adds: its
// handles minus the files a retained checkpoint already references
// (incremental state in shared/).
func (c *Coordinator) checkpointedSize(ack checkpoint.TaskAck) int64 {
	var n int64
	forEachHandle(ack, func(h checkpoint.StateHandle) {
		if h.Path == "" || c.sharedRefs[h.Path] == 0 {
			n += h.Size
		}
	})
	return n
}

func forEachHandle(ack checkpoint.TaskAck, f func(checkpoint.StateHandle)) {
	for _, s := range ack.States {
		for _, h := range s.Keyed {
			f(h)
		}
		for _, h := range s.Operator {
			f(h)
		}
		for _, h := range s.InputChannels {
			f(h)
		}
	}
}

// metadata assembles a fully acknowledged checkpoint's metadata: one
// OperatorState per operator uid, its subtasks indexed by subtask number
// (empty for subtasks that had finished), operators sorted by uid.
func (c *Coordinator) metadata(p *pending) checkpoint.Metadata {
	ops := map[string]*checkpoint.OperatorState{}
	for _, task := range p.plan {
		for uid, st := range p.acks[task].States {
			op, ok := ops[uid]
			if !ok {
				par := c.g.parallelism[task.Vertex]
				op = &checkpoint.OperatorState{
					UID:            uid,
					Parallelism:    par,
					MaxParallelism: c.g.maxPar[task.Vertex],
					Subtasks:       make([]checkpoint.SubtaskState, par),
				}
				ops[uid] = op
			}
			if task.Subtask < len(op.Subtasks) {
				op.Subtasks[task.Subtask] = st
			}
		}
	}
	md := checkpoint.Metadata{
		Version:        checkpoint.MetadataVersion,
		JobID:          c.cfg.JobID,
		CheckpointID:   p.id,
		Kind:           p.kind,
		TriggerTime:    p.trigger,
		CompletionTime: p.lastAck,
		Operators:      make([]checkpoint.OperatorState, 0, len(ops)),
	}
	for _, op := range ops {
		md.Operators = append(md.Operators, *op)
	}
	slices.SortFunc(md.Operators, func(a, b checkpoint.OperatorState) int { return strings.Compare(a.UID, b.UID) })
	return md
}
