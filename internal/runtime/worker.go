package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/netio"
	"github.com/weirstream/weir/state"
)

// TaskRef names one deployment of a subtask: its id and the attempt (the
// job master's restart count) that deployed it. Reports about an earlier
// attempt are stale and ignored.
type TaskRef struct {
	ID      checkpoint.TaskID
	Attempt int
}

func (r TaskRef) String() string { return fmt.Sprintf("%s#%d", r.ID, r.Attempt) }

// ChannelKey names the channel from subtask From to subtask To of edge
// Edge.
type ChannelKey struct{ Edge, From, To int }

// RemoteChannel is a channel whose other end runs in another process:
// network channel ID on the connection to Peer, which listens at Addr.
type RemoteChannel struct {
	ID   uint32
	Peer string
	Addr string
}

// Deployment is a set of subtasks to start, all of one attempt.
type Deployment struct {
	Attempt int
	Tasks   []checkpoint.TaskID
	// Restore is the checkpoint to restore the subtasks' state from; nil
	// starts them empty.
	Restore *Restore
	// Remote lists the channels of the subtasks whose other end is in
	// another process. Every other channel must have both ends among
	// Tasks.
	Remote map[ChannelKey]RemoteChannel
	// Splits holds the splits of each source subtask among Tasks whose
	// vertex lists its splits on the job master (Vertex.ListSplits).
	Splits map[checkpoint.TaskID]*SplitAssignment
}

// SplitAssignment is what the job master assigns a source subtask when it
// deploys it: the splits it reads, or why they could not be listed.
type SplitAssignment struct {
	Splits []string `json:"splits"`
	// Late are the splits of Splits the source's first listing did not
	// have (see SplitEnumerator): the reader starts those without a
	// checkpointed position at their beginning.
	Late []string `json:"late,omitempty"`
	// Err, if not empty, is why the job master could not list the
	// source's splits: the subtask fails with it when it opens, and the
	// restart strategy decides what happens next.
	Err string `json:"err,omitempty"`
	// err is that error itself, for subtasks in the job master's process
	// (a connector.Permanent error stays permanent).
	err error
}

// ListErr returns why the splits could not be listed, or nil.
func (a *SplitAssignment) ListErr() error {
	switch {
	case a.err != nil:
		return a.err
	case a.Err != "":
		return errors.New(a.Err)
	}
	return nil
}

// CheckpointPublisher is implemented by an Executor whose job manager
// records each completed checkpoint elsewhere (high availability's
// completed-checkpoint store) before the subtasks are notified of it, so
// that no sink commits the transactions of a checkpoint that a successor
// job manager would not restore. PublishCheckpoint returns once
// checkpoint id, whose metadata is at path, is recorded; an error aborts
// the checkpoint.
type CheckpointPublisher interface {
	PublishCheckpoint(ctx context.Context, id int64, path string) error
}

// RetentionGate is implemented by an Executor whose job manager may have
// lost the job to a successor (high availability): when the job ends,
// MayDiscard reports whether the job's checkpoints are still its own to
// keep or discard as the retention policy says. A deposed job manager's
// are its successor's.
type RetentionGate interface {
	MayDiscard(runErr error) bool
}

// Executor runs subtasks on behalf of a JobMaster: a Worker in the same
// process, or task managers over the network. Its methods do not block on
// the subtasks; what they report comes back through a Listener.
type Executor interface {
	// Deploy starts the subtasks of d. A subtask that cannot start reports
	// Exited with the reason.
	Deploy(ctx context.Context, d Deployment)
	// Cancel cancels running subtasks with cause; each reports Exited
	// once it has stopped.
	Cancel(refs []TaskRef, cause error)
	// Trigger injects barrier b at a source subtask.
	Trigger(ref TaskRef, b Barrier)
	NotifyComplete(ref TaskRef, checkpointID int64)
	NotifyAbort(ref TaskRef, checkpointID int64, reason string)
	// AssignSplits gives a running source subtask more splits to read:
	// splits the job master discovered after it deployed the subtask,
	// late those of them the source's first listing did not have.
	// Messages to one subtask keep their order: a split assigned before
	// a checkpoint's trigger reaches the subtask before the trigger.
	AssignSplits(ref TaskRef, splits, late []string)
	// AlignWatermarks tells a running source subtask the maximal
	// watermark of its alignment group (see WatermarkAlignment).
	AlignWatermarks(ref TaskRef, maxAllowed int64)
	// SubtaskMetrics returns the counters of the latest deployment of
	// every subtask it runs.
	SubtaskMetrics() []SubtaskMetrics
	// SourcePositions returns the current split offsets of its source
	// subtasks.
	SourcePositions() map[checkpoint.TaskID]map[string]int64
}

// Listener receives what subtasks report. Its methods may be called from
// any goroutine.
type Listener interface {
	Acknowledge(ref TaskRef, checkpointID int64, ack checkpoint.TaskAck)
	Decline(ref TaskRef, checkpointID int64, why DeclineReason, err error)
	EndOfData(ref TaskRef)
	// SourceWatermark reports the watermark of a source subtask that
	// aligns its watermarks (see WatermarkAlignment): MaxWatermark once
	// none of its splits holds event time back.
	SourceWatermark(ref TaskRef, wm int64)
	// Exited reports that a subtask stopped: finished (err == nil),
	// failed, or canceled.
	Exited(ref TaskRef, err error)
}

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	JobID  string
	Logger *slog.Logger
	Clock  Clock
	// Checkpointing says whether the job takes checkpoints, and Mode how.
	Checkpointing bool
	Mode          config.CheckpointingMode
	// Unaligned says checkpoints may be unaligned: channel state is
	// persisted, so every channel's records need a codec.
	Unaligned bool
	// Store is where subtasks write their snapshots; nil keeps them inline
	// in the acknowledgements.
	Store StateStore
	// Faults, if set, can fail subtasks (tests).
	Faults FaultInjector
	// BatchSize is the number of records per batch (default 1024).
	BatchSize int
	// ChannelCapacity is the number of batches a channel buffers, and the
	// credit of a network channel (default 4).
	ChannelCapacity int
	// Peers connects to other processes for remote channels; nil allows
	// only local ones.
	Peers Peers
	// KeyedState says where keyed operators keep their state.
	KeyedState KeyedStateOptions
	// Debloat limits the records in flight on each subtask's input
	// channels to what it consumes within a target time (buffer
	// debloating), if enabled.
	Debloat DebloatOptions
	// Local, if set, keeps a copy on local disk of every state file the
	// subtasks write for a checkpoint (task-local state,
	// execution.checkpointing.local-backup.enabled); the Worker tells it
	// of completed and aborted checkpoints. Its owner closes it.
	Local *storage.LocalStore
	// FromLocal restores a subtask from Local's copies of the job's own
	// checkpoint where they verify (execution.state-recovery.from-local).
	FromLocal bool
}

// Peers gives the connection to another process (a *netio.Peers).
type Peers interface {
	Conn(ctx context.Context, peer, addr string) (*netio.Conn, error)
}

// Worker runs subtasks of one job in this process: the embedded mode's
// executor, and what a task manager runs for each job it hosts.
type Worker struct {
	graph *JobGraph
	opts  WorkerOptions
	l     Listener
	log   *slog.Logger

	mu     sync.Mutex
	live   map[TaskRef]*workerTask
	latest map[checkpoint.TaskID]*Task // newest deployment of each subtask
	// slots holds the shared memory of each slot (by subtask index) whose
	// keyed subtasks run here, when it is bounded per slot.
	slots map[int]*state.SlotMemory
	// running counts the subtask goroutines, for Shutdown.
	running sync.WaitGroup
}

type workerTask struct {
	t      *Task
	cancel context.CancelCauseFunc
}

// NewWorker returns a Worker for g that reports to l.
func NewWorker(g *JobGraph, opts WorkerOptions, l Listener) *Worker {
	if opts.Clock == nil {
		opts.Clock = WallClock
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1024
	}
	if opts.ChannelCapacity <= 0 {
		opts.ChannelCapacity = 4
	}
	if opts.Store == nil {
		opts.Store = memoryStore{}
	}
	return &Worker{
		graph:  g,
		opts:   opts,
		l:      l,
		log:    opts.Logger,
		live:   make(map[TaskRef]*workerTask),
		latest: make(map[checkpoint.TaskID]*Task),
	}
}

// keyedState returns the keyed-state options of the subtasks of index i:
// with the memory of their slot, when it is bounded per slot. A slot's
// budget is made once and kept for redeployments, so that its members'
// shares stay what they were.
func (w *Worker) keyedState(i int) KeyedStateOptions {
	ks := w.opts.KeyedState
	if ks.SlotMemory == 0 || !ks.Backend.EmbeddedLSM() {
		return ks
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.slots[i]; ok {
		ks.Slot = s
		return ks
	}
	members := SlotKeyedOperators(w.graph, i)
	if members == 0 {
		return ks
	}
	s, err := state.NewSlotMemory(ks.SlotMemory, members)
	if err != nil {
		ks.SlotErr = err
		return ks
	}
	if w.slots == nil {
		w.slots = map[int]*state.SlotMemory{}
	}
	w.slots[i] = s
	ks.Slot = s
	return ks
}

// SlotKeyedOperators returns the number of keyed operators whose subtasks
// run in slot i: subtask i of every vertex of parallelism above i.
func SlotKeyedOperators(g *JobGraph, i int) int {
	n := 0
	for _, v := range g.Vertices {
		if v.Parallelism > i {
			n += v.KeyedOperators
		}
	}
	return n
}

// taskReport is the taskMaster of one deployed subtask.
type taskReport struct {
	ref TaskRef
	l   Listener
}

func (r taskReport) acknowledge(_ checkpoint.TaskID, id int64, ack checkpoint.TaskAck) {
	r.l.Acknowledge(r.ref, id, ack)
}

func (r taskReport) decline(_ checkpoint.TaskID, id int64, why DeclineReason, err error) {
	r.l.Decline(r.ref, id, why, err)
}

func (r taskReport) reachedEndOfData(checkpoint.TaskID) { r.l.EndOfData(r.ref) }

func (r taskReport) reportWatermark(_ checkpoint.TaskID, wm int64) { r.l.SourceWatermark(r.ref, wm) }

// bridge is a goroutine that moves one channel across the network.
type bridge struct {
	out  bool // towards another process
	key  ChannelKey
	rc   RemoteChannel
	c    *channel
	code BatchCodec
}

// Deploy implements Executor.
func (w *Worker) Deploy(ctx context.Context, d Deployment) {
	set := make(map[checkpoint.TaskID]bool, len(d.Tasks))
	for _, id := range d.Tasks {
		set[id] = true
	}
	var restore *restoreInfo
	if d.Restore != nil {
		restore = &restoreInfo{Metadata: d.Restore.Metadata, Store: d.Restore.Store}
	}
	tasks := make(map[checkpoint.TaskID]*Task)
	cancels := make(map[checkpoint.TaskID]context.CancelCauseFunc)
	for _, v := range w.graph.Vertices {
		for i := range v.Parallelism {
			id := checkpoint.TaskID{Vertex: v.UID, Subtask: i}
			if !set[id] {
				continue
			}
			ref := TaskRef{ID: id, Attempt: d.Attempt}
			tctx, cancel := context.WithCancelCause(ctx)
			t := &Task{
				id:       id,
				vertex:   v,
				ctx:      tctx,
				logger:   w.log.With("vertex", v.Name, "subtask", i),
				clock:    w.opts.Clock,
				master:   taskReport{ref: ref, l: w.l},
				store:    w.opts.Store,
				restore:  restore,
				splits:   d.Splits[id],
				mailbox:  newMailbox(),
				urgent:   newMailbox(),
				exiting:  make(chan struct{}),
				outChans: make(map[*Edge][]*channel),
				opts: taskOptions{
					jobID:         w.opts.JobID,
					batchSize:     w.opts.BatchSize,
					checkpointing: w.opts.Checkpointing,
					mode:          w.opts.Mode,
					unaligned:     w.opts.Unaligned,
					faults:        w.opts.Faults,
					attempt:       d.Attempt,
					keyedState:    w.keyedState(i),
					debloat:       w.opts.Debloat,
					ceiling:       int64(w.opts.ChannelCapacity) * int64(w.opts.BatchSize),
				},
			}
			if !v.Source() {
				t.gate = &inputGate{notify: make(chan struct{}, 1)}
			}
			if w.opts.Local != nil && w.opts.Checkpointing {
				t.local = w.opts.Local
				if restore != nil && w.opts.FromLocal && restore.Metadata.JobID == w.opts.JobID && restore.Metadata.Kind == checkpoint.KindCheckpoint {
					// The job's own checkpoint: this process may have
					// written copies of its files.
					t.restore = &restoreInfo{Metadata: restore.Metadata, Store: w.opts.Local.Reader(restore.Store, t.logger)}
				}
			}
			tasks[id] = t
			cancels[id] = cancel
		}
	}
	// Channels in the order the gates and writers index them (see
	// JobGraph.Channels). A channel with one end here and the other in
	// another process gets a bridge.
	bridges := make(map[checkpoint.TaskID][]bridge)
	var bad error
	for gc := range w.graph.Channels() {
		e := gc.Edge
		key := ChannelKey{Edge: e.ID, From: gc.From, To: gc.To}
		src := tasks[checkpoint.TaskID{Vertex: e.From.UID, Subtask: gc.From}]
		dst := tasks[checkpoint.TaskID{Vertex: e.To.UID, Subtask: gc.To}]
		rc, remote := d.Remote[key]
		switch {
		case src == nil && dst == nil:
			continue
		case src != nil && dst != nil:
			c := newChannel(w.opts.ChannelCapacity, dst.gate.notify)
			c.urgent = dst.inputUrgent
			dst.gate.chans = append(dst.gate.chans, c)
			dst.gate.logical = append(dst.gate.logical, e.Input)
			dst.gate.edges = append(dst.gate.edges, e)
			dst.gate.froms = append(dst.gate.froms, gc.From)
			src.outChans[e] = append(src.outChans[e], c)
			continue
		case !remote || w.opts.Peers == nil:
			bad = fmt.Errorf("runtime: channel %v of edge %s→%s has no end in this deployment", key, e.From.Name, e.To.Name)
			continue
		case e.Codec == nil:
			bad = fmt.Errorf("runtime: edge %s→%s has no codec to cross processes", e.From.Name, e.To.Name)
			continue
		}
		bc, err := e.Codec()
		if err != nil {
			bad = fmt.Errorf("runtime: records of edge %s→%s cannot cross processes: %w", e.From.Name, e.To.Name, err)
			continue
		}
		if dst != nil {
			c := newChannel(w.opts.ChannelCapacity, dst.gate.notify)
			dst.gate.chans = append(dst.gate.chans, c)
			dst.gate.logical = append(dst.gate.logical, e.Input)
			dst.gate.edges = append(dst.gate.edges, e)
			dst.gate.froms = append(dst.gate.froms, gc.From)
			dst.remoteIn++
			bridges[dst.id] = append(bridges[dst.id], bridge{key: key, rc: rc, c: c, code: bc})
		} else {
			c := newChannel(w.opts.ChannelCapacity, make(chan struct{}, 1))
			c.overtaken = make(chan struct{}, 1)
			if w.opts.Debloat.Enabled {
				// The consumer's starting limit, until it announces
				// another (see forwardOut).
				c.setLimit(debloatStart(int64(w.opts.ChannelCapacity) * int64(w.opts.BatchSize)))
			}
			src.outChans[e] = append(src.outChans[e], c)
			src.remoteOut++
			bridges[src.id] = append(bridges[src.id], bridge{out: true, key: key, rc: rc, c: c, code: bc})
		}
	}
	deployed := w.opts.Clock.Now().UnixMilli()
	for _, t := range tasks {
		t.deployedAt = deployed
	}
	w.mu.Lock()
	for id, t := range tasks {
		w.live[TaskRef{ID: id, Attempt: d.Attempt}] = &workerTask{t: t, cancel: cancels[id]}
		w.latest[id] = t
	}
	w.mu.Unlock()
	for id, t := range tasks {
		t.watermark.Store(MinWatermark)
		if t.gate != nil {
			n := len(t.gate.chans)
			t.handler = NewBarrierHandler(n, t.opts.mode)
			t.valve = NewWatermarkValve(n)
			t.endOfData, t.ended = make([]bool, n), make([]bool, n)
			// Before any producer starts: no record enters a channel
			// beyond its limit.
			t.initDebloat()
		}
		ref := TaskRef{ID: id, Attempt: d.Attempt}
		w.running.Add(1)
		go func() {
			defer w.running.Done()
			w.run(ref, t, cancels[id], bridges[id], bad)
		}()
	}
}

// run runs one subtask and its network channels, and reports its exit.
func (w *Worker) run(ref TaskRef, t *Task, cancel context.CancelCauseFunc, bridges []bridge, bad error) {
	var err error
	defer func() {
		cancel(errTaskExited)
		w.mu.Lock()
		delete(w.live, ref)
		w.mu.Unlock()
		w.l.Exited(ref, err)
	}()
	if bad != nil {
		err = bad
		return
	}
	var in, out sync.WaitGroup
	var conns []*netio.Conn
	var chans []uint32
	defer func() {
		for i, conn := range conns {
			conn.Release(chans[i])
		}
	}()
	for _, b := range bridges {
		conn, cerr := w.opts.Peers.Conn(t.ctx, b.rc.Peer, b.rc.Addr)
		if cerr != nil {
			cancel(cerr)
			err = fmt.Errorf("connecting to %s at %s for channel %v: %w", b.rc.Peer, b.rc.Addr, b.key, cerr)
			break
		}
		conns, chans = append(conns, conn), append(chans, b.rc.ID)
		wg := &in
		if b.out {
			wg = &out
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ferr error
			if b.out {
				s := conn.OpenSender(b.rc.ID)
				t.netMu.Lock()
				t.netOut = append(t.netOut, s)
				t.netMu.Unlock()
				ferr = forwardOut(t.ctx, b.c, s, b.code)
			} else {
				r := conn.OpenReceiver(b.rc.ID, w.opts.ChannelCapacity)
				b.c.remote.Store(r)
				if w.opts.Debloat.Enabled {
					b.c.announceLimit()
				}
				t.netMu.Lock()
				t.netIn = append(t.netIn, r)
				t.netMu.Unlock()
				ferr = forwardIn(t.ctx, r, b.c, b.code)
			}
			if ferr != nil && t.ctx.Err() == nil {
				cancel(fmt.Errorf("channel %v to %s: %w", b.key, b.rc.Peer, ferr))
			}
		}()
	}
	if err == nil {
		err = t.run()
	}
	if err != nil {
		cancel(err)
	}
	// A finished subtask's last markers are still on their way out: let
	// the output channels drain before their connections forget them.
	// One that ended with its stop's savepoint sent none, and the
	// subtasks downstream have ended.
	if t.stopped {
		cancel(errTaskExited)
	}
	out.Wait()
	cancel(errTaskExited)
	in.Wait()
}

// errTaskExited stops the network channels of a subtask that has exited.
var errTaskExited = errors.New("runtime: the subtask exited")

// Cancel implements Executor.
func (w *Worker) Cancel(refs []TaskRef, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ref := range refs {
		if wt := w.live[ref]; wt != nil {
			wt.cancel(cause)
		}
	}
}

// Shutdown cancels every running subtask with cause and waits until all
// have exited.
func (w *Worker) Shutdown(cause error) {
	w.mu.Lock()
	for _, wt := range w.live {
		wt.cancel(cause)
	}
	w.mu.Unlock()
	w.running.Wait()
}

func (w *Worker) post(ref TaskRef, f func(t *Task) error) {
	w.mu.Lock()
	wt := w.live[ref]
	w.mu.Unlock()
	if wt != nil {
		t := wt.t
		t.mailbox.post(func() error { return f(t) })
	}
}

// Trigger implements Executor.
func (w *Worker) Trigger(ref TaskRef, b Barrier) {
	w.mu.Lock()
	wt := w.live[ref]
	w.mu.Unlock()
	if wt == nil {
		return
	}
	t := wt.t
	switch {
	case b.Unaligned:
		// Urgent: it goes out even while the source waits for space.
		t.urgent.post(func() error { return t.triggerCheckpoint(b) })
	case b.AlignedTimeout > 0:
		// Aligned, between two units of work; but the timeout runs from
		// now, and if the trigger is still waiting when it passes, the
		// checkpoint starts unaligned (see Task.alignedTimedOut).
		t.urgent.post(func() error { t.armTrigger(b); return nil })
		t.mailbox.post(func() error { return t.triggerCheckpoint(b) })
	default:
		t.mailbox.post(func() error { return t.triggerCheckpoint(b) })
	}
}

// NotifyComplete implements Executor. The local copies of the
// checkpoints id subsumes go.
func (w *Worker) NotifyComplete(ref TaskRef, id int64) {
	if w.opts.Local != nil {
		w.opts.Local.Confirm(id)
	}
	w.post(ref, func(t *Task) error { return t.notifyComplete(id) })
}

// NotifyAbort implements Executor. The local copies of checkpoint id go.
func (w *Worker) NotifyAbort(ref TaskRef, id int64, reason string) {
	if w.opts.Local != nil {
		w.opts.Local.Abort(id)
	}
	w.post(ref, func(t *Task) error { return t.notifyAbort(id, reason) })
}

// AssignSplits implements Executor.
func (w *Worker) AssignSplits(ref TaskRef, splits, late []string) {
	w.post(ref, func(t *Task) error { return t.assignSplits(splits, late) })
}

// AlignWatermarks implements Executor.
func (w *Worker) AlignWatermarks(ref TaskRef, maxAllowed int64) {
	w.post(ref, func(t *Task) error { return t.alignWatermarks(maxAllowed) })
}

func (w *Worker) latestTasks() []*Task {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*Task, 0, len(w.latest))
	for _, t := range w.latest {
		out = append(out, t)
	}
	return out
}

// SubtaskMetrics implements Executor.
func (w *Worker) SubtaskMetrics() []SubtaskMetrics {
	tasks := w.latestTasks()
	out := make([]SubtaskMetrics, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, t.metrics())
	}
	return out
}

// SourcePositions implements Executor.
func (w *Worker) SourcePositions() map[checkpoint.TaskID]map[string]int64 {
	out := map[checkpoint.TaskID]map[string]int64{}
	for _, t := range w.latestTasks() {
		if p := t.positions.Load(); p != nil {
			out[t.id] = (*p).Positions()
		}
	}
	return out
}

func (t *Task) metrics() SubtaskMetrics {
	m := SubtaskMetrics{Task: t.id, RecordsIn: t.recordsIn.Load(), Watermark: t.watermark.Load(), LastCheckpoint: t.lastCkptAt.Load(), Attempt: t.opts.attempt, IdleNanos: t.idleNanos(), Deployed: t.deployedAt,
		RestoredLocalBytes: t.restoredLocal.Load(), RestoredRemoteBytes: t.restoredRemote.Load()}
	ins, outs := 0, 0
	if t.gate != nil {
		ins = len(t.gate.chans)
		for _, c := range t.gate.chans {
			m.BackpressuredNanos += c.backpressuredNanos()
			m.InFlightLimit = max(m.InFlightLimit, c.limit.Load())
			m.BarrierInFlightMax = max(m.BarrierInFlightMax, c.aheadMax.Load())
		}
	}
	t.netMu.Lock()
	for _, r := range t.netIn {
		m.NetBytesIn += r.Bytes()
	}
	for _, s := range t.netOut {
		m.NetBytesOut += s.Bytes()
	}
	t.netMu.Unlock()
	for _, cs := range t.outChans {
		outs += len(cs)
		for _, c := range cs {
			m.OutBackpressuredNanos += c.backpressuredNanos()
		}
	}
	m.NetInAll, m.NetOutAll = t.remoteIn == ins, t.remoteOut == outs
	return m
}
