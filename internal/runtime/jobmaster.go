package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runtime/failover"
	"github.com/weirstream/weir/internal/runtime/restart"
)

// Options configure a JobMaster.
type Options struct {
	JobID  string
	Logger *slog.Logger
	Clock  Clock
	// Checkpointing is nil when the job takes no checkpoints.
	Checkpointing *CheckpointingOptions
	// Restart decides whether and when the job restarts after a failure.
	Restart restart.Strategy
	// Failover is "full" or "region".
	Failover string
	// Restore, if set, is the checkpoint or savepoint the job starts from,
	// and where its state is read.
	Restore *Restore
	// Faults, if set, can fail subtasks (tests).
	Faults FaultInjector
	// BatchSize is the number of records per channel batch (default 1024).
	BatchSize int
	// ChannelCapacity is the number of batches a channel buffers (default 4).
	ChannelCapacity int
	// KeyedState says where keyed operators keep their state.
	KeyedState KeyedStateOptions
	// Debloat is the in-process worker's buffer debloating (see
	// WorkerOptions); ignored with NewExecutor.
	Debloat DebloatOptions
	// Local and FromLocal are the in-process worker's local recovery
	// (see WorkerOptions); ignored with NewExecutor.
	Local     *storage.LocalStore
	FromLocal bool
	// Events, if set, receives the job's lifecycle events (restores,
	// failures, completed checkpoints) for status lines and tests.
	Events func(Event)
	// Fallback, if set, is asked before the job restores checkpoint to in
	// place of the newer retained checkpoint bad, which a subtask found
	// damaged when it restored it; it returns why not (a sink cannot undo
	// what bad's transactions committed). Without it, or if it refuses,
	// the job fails: restoring bad again would fail again.
	Fallback func(bad, to int64) error
	// NewExecutor, if set, makes the executor that runs the subtasks
	// (task managers of a cluster); by default a Worker runs them in this
	// process.
	NewExecutor func(g *JobGraph, l Listener) (Executor, error)
}

// CheckpointingOptions are the checkpoint settings the runtime needs.
type CheckpointingOptions struct {
	Mode config.CheckpointingMode
	// Unaligned enables unaligned checkpoints (EXACTLY_ONCE only);
	// AlignedTimeout, with it, starts each checkpoint aligned and switches
	// to unaligned once that long has passed since the trigger (0: start
	// unaligned).
	Unaligned      bool
	AlignedTimeout time.Duration
	// NewCoordinator builds the checkpoint coordinator for the job's
	// graph, its source subtasks and all its subtasks.
	NewCoordinator func(g *JobGraph, sources, all []checkpoint.TaskID) (*coordinator.Coordinator, error)
	// Storage persists state and metadata; nil keeps checkpoints in
	// memory (lost with the process).
	Storage CheckpointStorage
	// SavepointDir is where a savepoint goes when TriggerSavepoint names
	// no directory ("": it must name one).
	SavepointDir string
	// SavepointFormat is the format of a savepoint asked for in
	// checkpoint.FormatDefault (execution.savepoint.format); the zero
	// value is FormatCanonical.
	SavepointFormat checkpoint.SavepointFormat
}

// Restore is a completed checkpoint or savepoint to start from.
type Restore struct {
	Metadata *checkpoint.Metadata
	Store    StateReader
	// Path is where it was found, for logs.
	Path string
	// Claimed says the job owns this checkpoint (CLAIM): the coordinator
	// retains it as if the job had completed it, and it is deleted once
	// newer checkpoints subsume it. When it lies in the job's checkpoint
	// storage (Discard is nil) the job's incremental snapshots may build
	// on it, and CheckpointStorage.Discard deletes it by id; elsewhere
	// (another job's directory) Discard deletes it, and the job's first
	// checkpoint names none of its files. Unclaimed (NO_CLAIM), the job
	// never deletes it and no checkpoint of the job builds on it.
	Claimed bool
	Discard func(ctx context.Context) error
}

// CheckpointStorage persists state and completed checkpoints' metadata.
type CheckpointStorage interface {
	StateStore
	WriteMetadata(ctx context.Context, m *checkpoint.Metadata) (string, error)
	// Discard deletes the checkpoints ids (files a retained checkpoint
	// still names excepted).
	Discard(ctx context.Context, ids ...int64) error
	// CreateSavepoint starts a savepoint in a new directory under dir.
	CreateSavepoint(ctx context.Context, dir string) (SavepointWriter, error)
}

// SavepointWriter is a savepoint being written: its subtasks write their
// state into Path (StateStore.WriteSavepointState), the job master the
// state it carries for finished subtasks (WriteState) and, last, the
// _metadata that completes it. Abort deletes the savepoint, its _metadata
// too if it was written: the job master aborts only a savepoint it
// reports failed.
type SavepointWriter interface {
	Path() string
	WriteState(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.StateHandle, error)
	WriteMetadata(ctx context.Context, m *checkpoint.Metadata) (string, error)
	Abort(ctx context.Context) error
	Close() error
}

// Event is something that happened to the job.
type Event struct {
	Time       time.Time
	Kind       EventKind
	Checkpoint int64
	Task       checkpoint.TaskID
	// Tasks are the subtasks a restart redeploys (EventRestarting).
	Tasks []checkpoint.TaskID
	Err   error
	// Message says more, in words (the restart decision, the abort reason).
	Message string
}

// EventKind names an Event.
type EventKind int

const (
	// EventRunning: the subtasks are deployed.
	EventRunning EventKind = iota
	// EventCheckpointCompleted: Checkpoint completed (its metadata is
	// written).
	EventCheckpointCompleted
	// EventCheckpointFailed: Checkpoint was aborted; Message says why.
	EventCheckpointFailed
	// EventTaskFailed: Task failed with Err; Task is zero when the job
	// itself failed (checkpoint failures beyond the tolerable number).
	EventTaskFailed
	// EventRestarting: the restart strategy allowed a restart of Tasks;
	// Message is its decision.
	EventRestarting
	// EventRestored: subtasks were redeployed from Checkpoint (0: from
	// the beginning); Message is the checkpoint's path.
	EventRestored
	// EventFinished: every subtask finished.
	EventFinished
	// EventFailed: the job failed for good with Err.
	EventFailed
)

// JobMaster runs a JobGraph: it deploys the subtasks, coordinates
// checkpoints, and recovers from failures.
type JobMaster struct {
	graph *JobGraph
	opts  Options
	log   *slog.Logger
	clock Clock

	stopped   chan struct{} // closed when Run returns
	final     atomic.Pointer[coordinator.Snapshot]
	startedAt atomic.Int64 // Unix nanoseconds

	regions  *failover.Regions
	failover failover.Strategy
	coord    *coordinator.Coordinator
	storage  CheckpointStorage
	// alignedTimeout is the aligned-checkpoint timeout the barriers of
	// unaligned checkpoints carry.
	alignedTimeout time.Duration
	ctx            context.Context

	// inbox carries work into the job master's loop: reports from
	// subtasks, queries, timers, completed storage operations.
	inbox *mailbox
	// store runs metadata writes and discards off the loop, in order;
	// written carries the writes' completions back into the loop.
	store   *storageQueue
	written *mailbox
	// stopping is set once the job is canceled: completions of writes
	// still in flight are recorded, and nothing else is done.
	stopping bool
	// busy counts the work given to the job master and not yet done: Run's
	// start, mails until the loop has run them and re-armed its timer, and
	// redeploys waiting for canceled subtasks to stop. Zero means the job
	// master waits for a report, a timer or its context (tests wait for it).
	busy atomic.Int64

	// hist is the job's status and its latest failures.
	hist history

	mu sync.Mutex

	exec   Executor
	tasks  map[checkpoint.TaskID]*taskRun
	latest *Restore
	// retained are the completed checkpoints the job can restore, oldest
	// first (the newest is latest, unless it was found damaged).
	retained []*Restore
	// lastCompleted is the newest checkpoint this run completed (0: none),
	// which a new checkpoint's incremental snapshots may build on; bases
	// maps each pending checkpoint to the one it builds on, and
	// deferredDiscards are retention's discards of checkpoints that a
	// pending one builds on, done once it has ended.
	lastCompleted    int64
	bases            map[int64]int64
	deferredDiscards []int64
	// claimed is the restored checkpoint the job owns and has not
	// discarded yet, when it lies outside the job's checkpoint storage
	// (its Discard deletes it); nil otherwise.
	claimed *Restore
	// runs finds a deployment's run from the listener's goroutines.
	runsMu sync.Mutex
	runs   map[TaskRef]*taskRun
	// guarded by mu, for Metrics and StoppedWith
	stoppedWith string
	restarts    int
	completed   CompletedCheckpoint
	attempt     int
	finished    map[checkpoint.TaskID]bool
	// finishedAcks are the states of finished subtasks in the newest
	// completed checkpoint, carried into later checkpoints so a restore
	// does not run them again.
	finishedAcks map[checkpoint.TaskID]checkpoint.TaskAck
	restarting   int // redeploys scheduled and not yet done
	eod          map[checkpoint.TaskID]bool
	// finalWanted is set when a subtask reported its end of data, until
	// triggerFinal triggers the checkpoint it waits for.
	finalWanted bool
	sources     []checkpoint.TaskID
	all         []checkpoint.TaskID

	// splits are the split enumerators of the source vertices that list
	// their splits on the job master, and discovery runs their periodic
	// listings; both belong to the job master's loop.
	splits    []*sourceSplits
	discovery *discoveries
	// aligner holds the watermarks of the sources that align theirs
	// (Vertex.Alignment), and alignments each such vertex's alignment by
	// uid; both belong to the job master's loop.
	aligner    *WatermarkAligner
	alignments map[string]*WatermarkAlignment

	// savepoints are the savepoints in progress by id, and
	// queuedSavepoints those waiting for a pending checkpoint to end;
	// both belong to the job master's loop.
	savepoints       map[int64]*savepointOp
	queuedSavepoints []*savepointOp
	// failedSavepoints are the writers of triggered savepoints that
	// failed, kept to delete what subtasks write after the failure.
	failedSavepoints map[int64]SavepointWriter
	// stopOp is the stop-with-savepoint in progress, and term its
	// termination once its savepoint is complete.
	stopOp *savepointOp
	term   *termination
	// manualCheckpoints are the checkpoints TriggerCheckpoint waits for
	// by id, and queuedCheckpoints those not triggered yet.
	manualCheckpoints map[int64]*checkpointOp
	queuedCheckpoints []*checkpointOp
}

type taskRun struct {
	ref      TaskRef
	done     chan struct{}
	canceled bool
	// from is the checkpoint the deployment restores (0: none).
	from int64
	// triggered and acked are the newest checkpoints triggered at and
	// acknowledged by the subtask (sources).
	triggered, acked int64
	// firstTriggered is the first checkpoint triggered at the subtask (0:
	// none yet).
	firstTriggered int64
	// acks are the subtask's acknowledgements of checkpoints not yet
	// completed or aborted; completedAck is its acknowledgement of the
	// newest completed checkpoint it took part in.
	acks         map[int64]checkpoint.TaskAck
	completedAck *checkpoint.TaskAck
	// maxAllowed is the maximal watermark of its alignment group last
	// sent to the subtask, if announced; unchanged counts the subtask's
	// reports since it was last sent one (see reannounceEvery).
	maxAllowed int64
	announced  bool
	unchanged  int
}

// errRestart cancels subtasks that are being redeployed.
var errRestart = errors.New("runtime: subtask canceled for a restart")

// NewJobMaster prepares g for execution.
func NewJobMaster(g *JobGraph, opts Options) (*JobMaster, error) {
	if opts.Clock == nil {
		opts.Clock = WallClock
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Restart == nil {
		s, err := restart.New(restart.None{})
		if err != nil {
			return nil, err
		}
		opts.Restart = s
	}
	if opts.Failover == "" {
		opts.Failover = failover.Default
	}
	jm := &JobMaster{
		graph:             g,
		opts:              opts,
		log:               opts.Logger.With("job", g.Name, "job_id", opts.JobID),
		clock:             opts.Clock,
		inbox:             newMailbox(),
		stopped:           make(chan struct{}),
		tasks:             make(map[checkpoint.TaskID]*taskRun),
		finished:          make(map[checkpoint.TaskID]bool),
		finishedAcks:      make(map[checkpoint.TaskID]checkpoint.TaskAck),
		savepoints:        make(map[int64]*savepointOp),
		failedSavepoints:  make(map[int64]SavepointWriter),
		manualCheckpoints: make(map[int64]*checkpointOp),
		bases:             make(map[int64]int64),
		eod:               make(map[checkpoint.TaskID]bool),
		latest:            opts.Restore,
		runs:              make(map[TaskRef]*taskRun),
		aligner:           NewWatermarkAligner(),
		alignments:        make(map[string]*WatermarkAlignment),
	}
	if opts.Restore != nil {
		jm.retained = []*Restore{opts.Restore}
	}
	jm.store, jm.written = newStorageQueue(jm), newMailbox()
	jm.busy.Store(1) // Run's start
	var fg failover.Graph
	for _, v := range g.Vertices {
		if a := v.Alignment; a != nil {
			if !v.Source() {
				return nil, fmt.Errorf("runtime: vertex %s aligns watermarks but is not a source", v.Name)
			}
			if err := a.Validate(); err != nil {
				return nil, fmt.Errorf("runtime: source %s: %w", v.Name, err)
			}
			jm.alignments[v.UID] = a
			ids := make([]checkpoint.TaskID, v.Parallelism)
			for i := range ids {
				ids[i] = checkpoint.TaskID{Vertex: v.UID, Subtask: i}
			}
			if err := jm.aligner.Join(a.Group, a.MaxDrift, ids...); err != nil {
				return nil, fmt.Errorf("runtime: source %s: %w", v.Name, err)
			}
		}
		for i := range v.Parallelism {
			id := checkpoint.TaskID{Vertex: v.UID, Subtask: i}
			jm.all = append(jm.all, id)
			if v.Source() {
				jm.sources = append(jm.sources, id)
			}
			fg.Tasks = append(fg.Tasks, failover.TaskID{Vertex: v.UID, Subtask: i})
		}
	}
	for c := range g.Channels() {
		fg.Edges = append(fg.Edges, failover.Edge{
			From: failover.TaskID{Vertex: c.Edge.From.UID, Subtask: c.From},
			To:   failover.TaskID{Vertex: c.Edge.To.UID, Subtask: c.To},
		})
	}
	jm.splits = newSourceSplits(g, opts.Restore)
	regions, err := failover.NewRegions(fg)
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	jm.regions = regions
	if jm.failover, err = failover.New(opts.Failover, regions, nil); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	wo := WorkerOptions{
		JobID:           opts.JobID,
		Logger:          jm.log,
		Clock:           opts.Clock,
		Faults:          opts.Faults,
		BatchSize:       opts.BatchSize,
		ChannelCapacity: opts.ChannelCapacity,
		KeyedState:      opts.KeyedState,
		Debloat:         opts.Debloat,
		Local:           opts.Local,
		FromLocal:       opts.FromLocal,
	}
	if c := opts.Checkpointing; c != nil {
		jm.storage = c.Storage
		if jm.coord, err = c.NewCoordinator(g, jm.sources, jm.all); err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
		wo.Checkpointing, wo.Mode, wo.Unaligned = true, c.Mode, c.Unaligned
		jm.alignedTimeout = c.AlignedTimeout
		if c.Storage != nil {
			wo.Store = c.Storage
		}
	}
	if opts.NewExecutor != nil {
		if jm.exec, err = opts.NewExecutor(g, jm); err != nil {
			return nil, fmt.Errorf("runtime: %w", err)
		}
	} else {
		jm.exec = NewWorker(g, wo, jm)
	}
	return jm, nil
}

// CompletedCheckpoint summarises a completed checkpoint.
type CompletedCheckpoint struct {
	ID       int64
	Duration time.Duration // trigger to completion
	Size     int64         // bytes of state
	At       time.Time
}

// Metrics is a point-in-time view of a running job.
type Metrics struct {
	// RecordsIn counts the records the sources emitted, RecordsOut those
	// the sinks received, over the current deployment.
	RecordsIn, RecordsOut int64
	// Watermark is the lowest event time of the subtasks that have
	// inputs (MinWatermark before any).
	Watermark int64
	Restarts  int
	// LastCheckpoint is the latest completed checkpoint (ID 0: none).
	LastCheckpoint CompletedCheckpoint
	// Status is the job's status; Failures counts its failures, the
	// newest of which is LastFailure (nil: none).
	Status JobStatus
	// EndedFrom is the status the job ended from ("" while it runs).
	EndedFrom   JobStatus
	Failures    int
	LastFailure *Failure
}

// Metrics returns the job's current metrics. It may be called from any
// goroutine.
func (jm *JobMaster) Metrics() Metrics {
	jm.mu.Lock()
	m := Metrics{Restarts: jm.restarts, LastCheckpoint: jm.completed, Watermark: MaxWatermark}
	jm.mu.Unlock()
	m.Status, _ = jm.Status()
	m.EndedFrom = jm.EndedFrom()
	fs, n := jm.Failures()
	if m.Failures = n; len(fs) > 0 {
		m.LastFailure = &fs[0]
	}
	any := false
	for _, sm := range jm.exec.SubtaskMetrics() {
		v := jm.vertex(sm.Task.Vertex)
		switch {
		case v == nil:
		case v.Source():
			m.RecordsIn += sm.RecordsIn
		default:
			if len(v.Outputs) == 0 {
				m.RecordsOut += sm.RecordsIn
			}
			m.Watermark = min(m.Watermark, sm.Watermark)
			any = true
		}
	}
	if !any {
		m.Watermark = MinWatermark
	}
	return m
}

// Latest returns the latest completed checkpoint (or the one the job
// started from), or nil.
func (jm *JobMaster) Latest() *Restore {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return jm.latest
}

func (jm *JobMaster) post(f func() error) {
	jm.busy.Add(1)
	jm.inbox.post(f)
}

func (jm *JobMaster) emit(e Event) {
	e.Time = jm.clock.Now()
	if jm.opts.Events != nil {
		jm.opts.Events(e)
	}
}

// Run executes the job until it finishes, fails for good, or ctx is done.
// On ctx's end the subtasks are canceled and Run returns ctx's cause.
func (jm *JobMaster) Run(ctx context.Context) error {
	jm.ctx = ctx
	jm.startedAt.Store(jm.clock.Now().UnixNano())
	defer close(jm.stopped)
	defer jm.keepFinalStats()
	go jm.store.run()
	defer jm.endSavepoints() // after the storage queue's last operation
	defer jm.store.stop()
	jm.discovery = newDiscoveries(ctx)
	defer func() {
		for _, s := range jm.splits {
			if s.stop != nil {
				s.stop()
			}
		}
		jm.discovery.stop()
	}()
	jm.deploy(ctx, jm.all, jm.latest)
	if jm.latest != nil {
		jm.emitRestored(jm.latest)
	}
	jm.hist.set(StatusRunning, jm.clock.Now())
	jm.emit(Event{Kind: EventRunning})
	if jm.coord != nil {
		if jm.latest != nil {
			jm.coordRestored(jm.latest)
		}
		if r := jm.opts.Restore; r != nil && r.Claimed {
			jm.claim(r)
		}
		if err := jm.perform(ctx, jm.coord.Start(jm.clock.Now())); err != nil {
			return jm.abort(err)
		}
	}
	// The checkpoint timer runs on the job master's clock, so that a
	// manual clock drives checkpoint intervals and timeouts too; it posts
	// a tick for the coordinator's next deadline, armed.
	var armed time.Time
	stopTimer := func() bool { return false }
	defer func() { stopTimer() }()
	tick := func() error {
		armed = time.Time{}
		if jm.restarting > 0 {
			return nil // the redeploy starts checkpointing again
		}
		return jm.perform(ctx, jm.coord.Tick(jm.clock.Now()))
	}
	done := int64(1) // Run's start
	for {
		if jm.coord != nil && jm.restarting == 0 {
			if at, ok := jm.coord.NextDeadline(); ok && !at.Equal(armed) {
				stopTimer()
				armed = at
				if d := at.Sub(jm.clock.Now()); d > 0 {
					stopTimer = jm.clock.AfterFunc(d, func() { jm.post(tick) })
				} else {
					stopTimer = func() bool { return false }
					jm.post(tick)
				}
			}
		}
		jm.busy.Add(-done)
		select {
		case <-ctx.Done():
		case <-jm.inbox.signal:
		case <-jm.written.signal:
		}
		// A cancellation goes before any report: the subtasks run under
		// ctx too, and their exits, posted as it ends, are not failures.
		if ctx.Err() != nil {
			jm.cancelAll(context.Cause(ctx))
			jm.finishWrites()
			jm.hist.set(StatusCanceled, jm.clock.Now())
			jm.stopCoordinator()
			return context.Cause(ctx)
		}
		mails := append(jm.written.take(), jm.inbox.take()...)
		for _, f := range mails {
			if err := f(); err != nil {
				return jm.abort(err)
			}
		}
		done = int64(len(mails))
		if err := jm.triggerFinal(); err != nil {
			return jm.abort(err)
		}
		if len(jm.queuedCheckpoints) > 0 && jm.restarting == 0 {
			if err := jm.retryCheckpoints(); err != nil {
				return jm.abort(err)
			}
		}
		if len(jm.queuedSavepoints) > 0 && jm.restarting == 0 {
			if err := jm.retrySavepoints(); err != nil {
				return jm.abort(err)
			}
		}
		if len(jm.finished) == len(jm.all) {
			jm.hist.set(StatusFinished, jm.clock.Now())
			jm.emit(Event{Kind: EventFinished})
			jm.stopCoordinator()
			return nil
		}
	}
}

// abort cancels every subtask and reports err as the job's failure.
func (jm *JobMaster) abort(err error) error {
	jm.hist.set(StatusFailing, jm.clock.Now())
	jm.cancelAll(err)
	jm.hist.set(StatusFailed, jm.clock.Now())
	jm.emit(Event{Kind: EventFailed, Err: err})
	jm.stopCoordinator()
	return err
}

// stopCoordinator stops the checkpoint coordinator as the job ends, and
// deletes what will never complete: the checkpoints it aborts (their
// subtasks have ended) and the discards that waited for them.
func (jm *JobMaster) stopCoordinator() {
	if jm.coord == nil {
		return
	}
	ctx := context.WithoutCancel(jm.ctx)
	for _, o := range jm.coord.Stop(jm.clock.Now()) {
		if a, ok := o.(coordinator.NotifyAbort); ok && jm.savepoints[a.ID] == nil {
			jm.discard(ctx, a.ID, "discarding a checkpoint the job ended during")
		}
	}
	for _, d := range jm.deferredDiscards {
		jm.discard(ctx, d, "discarding checkpoint")
	}
	jm.deferredDiscards = nil
}

func (jm *JobMaster) cancelAll(cause error) { jm.stop(jm.all, cause) }

// deploy starts the given subtasks, with fresh channels among them,
// restoring from md if it is not nil.
func (jm *JobMaster) deploy(ctx context.Context, ids []checkpoint.TaskID, from *Restore) {
	d := Deployment{Attempt: jm.attempt, Restore: from}
	for _, v := range jm.graph.Vertices {
		for i := range v.Parallelism {
			id := checkpoint.TaskID{Vertex: v.UID, Subtask: i}
			if !slices.Contains(ids, id) {
				continue
			}
			d.Tasks = append(d.Tasks, id)
			r := &taskRun{ref: TaskRef{ID: id, Attempt: jm.attempt}, done: make(chan struct{}), acks: make(map[int64]checkpoint.TaskAck)}
			if from != nil {
				r.from = from.Metadata.CheckpointID
			}
			jm.tasks[id] = r
			jm.runsMu.Lock()
			jm.runs[r.ref] = r
			jm.runsMu.Unlock()
			delete(jm.finished, id)
			delete(jm.finishedAcks, id)
			delete(jm.eod, id)
		}
	}
	jm.assignSplits(ctx, &d)
	jm.exec.Deploy(ctx, d)
}

// Exited implements Listener.
func (jm *JobMaster) Exited(ref TaskRef, err error) {
	jm.runsMu.Lock()
	r := jm.runs[ref]
	delete(jm.runs, ref)
	jm.runsMu.Unlock()
	if r == nil {
		return
	}
	jm.post(func() error { return jm.taskExited(ref.ID, r, err) })
	close(r.done)
}

func (jm *JobMaster) taskExited(id checkpoint.TaskID, r *taskRun, err error) error {
	if jm.tasks[id] == r {
		if r.canceled {
			jm.alignmentEnded(id, errRestart)
		} else {
			jm.alignmentEnded(id, err)
		}
	}
	if err != nil || r.canceled {
		// After the failure is handled (which aborts what was pending).
		defer jm.cleanUnacked(r)
	}
	if jm.tasks[id] != r || r.canceled {
		return nil // an earlier attempt, canceled on purpose
	}
	if jm.ctx.Err() != nil {
		// The job is being canceled, and the subtask ended with it. A
		// failover now would abort the checkpoints whose metadata is
		// being written and delete them once written, though the
		// cancellation lets those writes finish and keeps what they
		// complete.
		return nil
	}
	if jm.term != nil {
		jm.terminated(id, err)
		return nil
	}
	if err == nil {
		jm.finished[id] = true
		if r.completedAck != nil {
			jm.finishedAcks[id] = *r.completedAck
		}
		if jm.coord == nil {
			return nil
		}
		acts := jm.coordFinished(id)
		if r.triggered > r.acked {
			// A trigger reached the subtask after it had finished: it will
			// never acknowledge, so the checkpoint must not wait for it.
			acts = append(acts, jm.coordDecline(id, r.triggered, DeclineTaskClosing, errors.New("the subtask finished"))...)
		}
		return jm.perform(jm.ctx, acts)
	}
	return jm.fail(id, err, false)
}

// cleanUnacked deletes, once a source subtask that failed or was
// canceled has exited (so its snapshot writers are done), what it wrote
// for the checkpoints and savepoints it was triggered for, never
// acknowledged, and that failed: their discards may have run while it
// still wrote. (Other subtasks get their barriers from their inputs, so
// the job master does not know which they took; what they leave is
// deleted on a late acknowledgement, or when the job ends.)
func (jm *JobMaster) cleanUnacked(r *taskRun) {
	if jm.coord == nil {
		return
	}
	if r.firstTriggered == 0 {
		return
	}
	for id := max(r.acked+1, r.firstTriggered); id <= r.triggered; id++ {
		if w := jm.failedSavepoints[id]; w != nil {
			jm.discardSavepoint(w, false)
			continue
		}
		if jm.coord.IsPending(id) || jm.isRetained(id) || jm.savepoints[id] != nil {
			continue
		}
		jm.discard(jm.ctx, id, "discarding what a failed subtask wrote for an aborted checkpoint")
	}
}

// fail handles a subtask's failure: restart or give up. A global failure
// (checkpoint failures beyond the tolerable number) is the job's own, with
// no subtask (id is zero), and restarts every subtask whatever the failover
// strategy.
func (jm *JobMaster) fail(id checkpoint.TaskID, cause error, global bool) error {
	now := jm.clock.Now()
	if global {
		jm.log.Warn("job failed", "err", cause)
	} else {
		jm.log.Warn("subtask failed", "task", id.String(), "err", cause)
	}
	jm.emit(Event{Kind: EventTaskFailed, Task: id, Err: cause})
	failed := func(why string) error {
		if global {
			return fmt.Errorf("job failed: %w (%s)", cause, why)
		}
		return fmt.Errorf("job failed: %s failed: %w (%s)", id, cause, why)
	}
	fellBack, err := jm.fallBack(id, cause)
	if err != nil {
		jm.hist.fail(Failure{Time: now, Task: id, Err: cause})
		return failed(err.Error())
	}
	if !fellBack && connector.IsPermanent(cause) {
		jm.hist.fail(Failure{Time: now, Task: id, Err: cause})
		return failed("a restart cannot cure this failure")
	}
	d := jm.opts.Restart.OnFailure(now, cause)
	jm.hist.fail(Failure{Time: now, Task: id, Err: cause, Restarted: d.Restart})
	if !d.Restart {
		return failed(d.Reason)
	}
	jm.hist.set(StatusRestarting, now)
	ids := jm.all
	if !global && !fellBack {
		ftasks, err := jm.failover.TasksToRestart(failover.TaskID{Vertex: id.Vertex, Subtask: id.Subtask}, cause)
		if err != nil {
			return err
		}
		ids = make([]checkpoint.TaskID, len(ftasks))
		for i, t := range ftasks {
			ids[i] = checkpoint.TaskID{Vertex: t.Vertex, Subtask: t.Subtask}
		}
	}
	jm.emit(Event{Kind: EventRestarting, Task: id, Tasks: ids, Err: cause, Message: d.String()})
	// The job master does not wait here for the canceled subtasks: on a
	// cluster that can take until a frozen task manager is declared lost,
	// and the job master must go on answering meanwhile. The redeploy
	// waits for them instead: a subtask never runs twice at once.
	stopped := jm.cancel(ids, errRestart)
	// Checkpointing stays suspended until the subtasks are back: a trigger
	// now would reach only canceled subtasks and wait for its timeout.
	jm.restarting++
	if jm.coord != nil {
		if err := jm.perform(jm.ctx, jm.coord.Restart(now)); err != nil {
			return err
		}
	}
	jm.attempt++
	jm.mu.Lock()
	jm.restarts++
	jm.mu.Unlock()
	redeploy := func() error {
		jm.restarting--
		jm.stop(ids, errRestart) // a later failure may have redeployed some already
		md := jm.Latest()
		jm.deploy(jm.ctx, ids, md)
		jm.emitRestored(md)
		if jm.restarting == 0 {
			jm.hist.set(StatusRunning, jm.clock.Now())
		}
		if jm.coord == nil || jm.restarting > 0 {
			return nil
		}
		now := jm.clock.Now()
		if md != nil {
			jm.coordRestored(md)
		}
		acts := jm.coord.Restart(now)
		// The coordinator forgets finished subtasks on a failover; those
		// that were not redeployed are still finished.
		for tid := range jm.finished {
			acts = append(acts, jm.coordFinished(tid)...)
		}
		return jm.perform(jm.ctx, acts)
	}
	whenStopped := func() {
		jm.busy.Add(1)
		go func() {
			<-stopped
			jm.post(redeploy)
			jm.busy.Add(-1)
		}()
	}
	if d.Delay <= 0 {
		whenStopped()
		return nil
	}
	jm.clock.AfterFunc(d.Delay, whenStopped)
	return nil
}

// fallBack handles a subtask that failed because the checkpoint it was
// restoring does not verify (a state file's bytes changed after it was
// written): if it is the checkpoint the job would restore again, the job
// drops it and restores the newest older retained checkpoint instead,
// every subtask of it, as a resume from the job's directory would; the
// output of the dropped checkpoint's transactions must be undone by the
// sinks on that restore, or Options.Fallback refuses. It returns whether
// the job fell back, or why it cannot.
func (jm *JobMaster) fallBack(id checkpoint.TaskID, cause error) (bool, error) {
	r := jm.tasks[id]
	if r == nil || r.from == 0 || !errors.Is(cause, storage.ErrCorrupt) {
		return false, nil
	}
	jm.mu.Lock()
	latest := jm.latest
	var older *Restore
	for _, c := range jm.retained {
		if c.Metadata.CheckpointID < r.from {
			older = c
		}
	}
	jm.mu.Unlock()
	if latest == nil || latest.Metadata.CheckpointID != r.from {
		return false, nil // a newer checkpoint completed since: restore that
	}
	if older == nil {
		return false, fmt.Errorf("checkpoint %d does not verify and no older completed checkpoint is retained (execution.checkpointing.num-retained)", r.from)
	}
	to := older.Metadata.CheckpointID
	if jm.opts.Fallback == nil {
		return false, fmt.Errorf("checkpoint %d does not verify, and the job cannot fall back to checkpoint %d", r.from, to)
	}
	if err := jm.opts.Fallback(r.from, to); err != nil {
		return false, err
	}
	jm.log.Warn("a checkpoint does not verify; discarding it and restoring an older one", "checkpoint", r.from, "restoring", to, "err", cause)
	jm.mu.Lock()
	jm.retained = slices.DeleteFunc(jm.retained, func(c *Restore) bool { return c.Metadata.CheckpointID == r.from })
	jm.latest = older
	jm.mu.Unlock()
	if jm.coord != nil {
		if err := jm.perform(jm.ctx, jm.coord.Invalid(jm.clock.Now(), r.from)); err != nil {
			return false, err
		}
	}
	return true, nil
}

// stop cancels the running subtasks among ids and waits for them to exit.
func (jm *JobMaster) stop(ids []checkpoint.TaskID, cause error) { <-jm.cancel(ids, cause) }

// cancel cancels the running subtasks among ids and returns a channel
// closed once every current deployment among ids has exited, including
// those canceled before and still stopping.
func (jm *JobMaster) cancel(ids []checkpoint.TaskID, cause error) <-chan struct{} {
	var dones []chan struct{}
	var refs []TaskRef
	for _, tid := range ids {
		r := jm.tasks[tid]
		if r == nil {
			continue
		}
		dones = append(dones, r.done)
		if !r.canceled {
			r.canceled = true
			refs = append(refs, r.ref)
		}
	}
	jm.exec.Cancel(refs, cause)
	all := make(chan struct{})
	go func() {
		for _, d := range dones {
			<-d
		}
		close(all)
	}()
	return all
}
