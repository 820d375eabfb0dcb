package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/netio"
)

// Clock gives processing time; tests inject a manual one.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// WallClock is the real clock.
var WallClock Clock = wallClock{}

type taskOptions struct {
	jobID         string
	batchSize     int
	checkpointing bool
	mode          config.CheckpointingMode
	unaligned     bool
	faults        FaultInjector
	attempt       int
	keyedState    KeyedStateOptions
	// debloat, if enabled, limits the records in flight on the subtask's
	// input channels; ceiling is a channel's bound without it (capacity
	// × batch size).
	debloat DebloatOptions
	ceiling int64
}

type restoreInfo struct {
	Metadata *checkpoint.Metadata
	Store    StateReader
}

// taskMaster is the job master as a task sees it.
type taskMaster interface {
	acknowledge(task checkpoint.TaskID, id int64, ack checkpoint.TaskAck)
	decline(task checkpoint.TaskID, id int64, why DeclineReason, err error)
	reachedEndOfData(task checkpoint.TaskID)
	reportWatermark(task checkpoint.TaskID, wm int64)
}

// Task is one subtask: a goroutine that runs a chain of operators.
type Task struct {
	id     checkpoint.TaskID
	vertex *Vertex
	opts   taskOptions
	// snapshotting is the barrier whose synchronous snapshot the chain is
	// taking (OperatorContext.Snapshotting).
	snapshotting Barrier
	ctx          context.Context
	logger       *slog.Logger
	clock        Clock
	master       taskMaster
	store        StateStore
	// local keeps local copies of the checkpoint state the subtask
	// writes; nil without local backup.
	local   *storage.LocalStore
	restore *restoreInfo
	splits  *SplitAssignment // a source's, from its deployment
	mailbox *mailbox
	// urgent is the work that runs even while an output waits for space
	// (see unaligned.go).
	urgent       *mailbox
	urgentQueued atomic.Bool
	gate         *inputGate
	outChans     map[*Edge][]*channel
	writers      []writer
	chain        *Chain
	handler      *BarrierHandler
	valve        *WatermarkValve

	endOfData, ended   []bool
	endOfDataN, endedN int
	finished           bool  // operators finished: end of data
	finalCheckpoint    int64 // first checkpoint snapshotted after finishing
	// stopAt is the stop-with-savepoint the subtask has snapshotted: it
	// takes no more input until the savepoint completes (then it commits
	// and ends) or is aborted (then it goes on).
	stopAt int64
	// stopped is set when the subtask ended with its stop's savepoint:
	// its outputs carry nothing more, and the subtasks they fed have
	// ended already.
	stopped     bool
	heldTimers  []func() error // processing-time timers due while stopping
	completed   int64          // highest checkpoint notified complete
	inputsEnded bool
	done        bool
	idle        bool // announced idle downstream (sources)

	timers    []*pendingTimer // processing-time timers, to stop on exit
	snapshots sync.WaitGroup  // asynchronous snapshot writes

	idleTime  atomic.Int64 // nanoseconds spent waiting for input or mail
	idleSince atomic.Int64 // Unix nanoseconds the current wait began, 0 if none

	// positions reports a source subtask's current split offsets.
	positions atomic.Pointer[PositionReporter]

	// startWatermark is the event time the operators open at: the
	// restored checkpoint's, or MinWatermark.
	startWatermark int64

	// restoredLocal and restoredRemote are the bytes of state files the
	// subtask restored from local copies and from checkpoint storage
	// (with local recovery).
	restoredLocal, restoredRemote atomic.Int64

	// netIn and netOut are the network ends of the subtask's channels to
	// and from other processes, for their byte counts; remoteIn and
	// remoteOut count those channels (set before the subtask starts).
	netMu               sync.Mutex
	netIn               []*netio.Receiver
	netOut              []*netio.Sender
	remoteIn, remoteOut int

	recordsIn  atomic.Int64
	watermark  atomic.Int64
	lastCkptAt atomic.Int64
	deployedAt int64 // Unix ms, set before the subtask starts

	// asyncFault is an injected failure of an asynchronous snapshot
	// write, which fails the subtask even if it has ended meanwhile.
	asyncFault atomic.Pointer[error]
	// exiting is closed when the subtask stops processing, before it
	// waits for its snapshot writers.
	exiting chan struct{}

	// Unaligned checkpoints (unaligned.go).
	deferred     *deferredSnapshot    // snapshot to take when the unit of work returns
	interrupt    bool                 // a deferred snapshot waits: deliver no further record
	uc           *unalignedCheckpoint // channel state being collected
	codecs       []BatchCodec         // by input channel, resolved when needed
	forwarding   int64                // newest aligned barrier with a timeout forwarded
	promotedID   int64                // newest such barrier that timed out
	timeoutArmed int64                // newest checkpoint whose timeout is scheduled
	started      int64                // newest checkpoint triggered here
	trigger      Barrier              // newest trigger with a timeout, maybe still waiting
	// firing is set while a snapshot is taken in the middle of a burst of
	// event-time timers: some of those up to the valve's watermark have
	// not fired yet.
	firing bool
	// resumeTimers says the restored checkpoint was taken in the middle
	// of such a burst: the restored subtask fires the rest first.
	resumeTimers bool

	// Processed data (Flink's processed_data): the bytes of the records
	// the subtask processed while it aligned on checkpoint alignID (from
	// its first barrier to its snapshot; 0: not aligning), as the input
	// channel's codec encodes them.
	alignID    int64
	alignBytes int64
	sizeBuf    []byte

	// Buffer debloating (debloat.go): the limit's computation, and when
	// it last sampled the subtask's records and idle time.
	debloater              *Debloater
	debloatAt              time.Time
	debloatIdle, debloatIn int64
}

func (t *Task) head() Operator { return t.chain.Operators[0].Op }

type pendingTimer struct {
	stop  func() bool
	fired atomic.Bool
}

// schedule runs f on the task's goroutine at or after at, unless the
// operators have finished by then (processing-time timers do not fire
// after the end of input); while the subtask stops with a savepoint it
// holds f back, and runs it if the stop fails. Timers still pending when the subtask exits are
// stopped.
func (t *Task) schedule(at time.Time, f func() error) {
	pt := &pendingTimer{}
	pt.stop = t.clock.AfterFunc(max(at.Sub(t.clock.Now()), 0), func() {
		pt.fired.Store(true)
		t.mailbox.post(func() error {
			if t.finished {
				return nil
			}
			if t.stopAt != 0 {
				// Stopping with a savepoint: nothing after it runs
				// unless the stop fails (the savepoint holds the timer).
				t.heldTimers = append(t.heldTimers, f)
				return nil
			}
			return f()
		})
	})
	if len(t.timers) >= 64 {
		live := t.timers[:0]
		for _, p := range t.timers {
			if !p.fired.Load() {
				live = append(live, p)
			}
		}
		t.timers = live
	}
	t.timers = append(t.timers, pt)
}

// run executes the subtask until it finishes, fails or ctx is done.
func (t *Task) run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				// An error stays one (a state store's failure, say), for
				// errors.Is and errors.As of those who handle the failure.
				err = fmt.Errorf("%s panicked: %w\n%s", t.id, e, debug.Stack())
			} else {
				err = fmt.Errorf("%s panicked: %v\n%s", t.id, r, debug.Stack())
			}
		}
		for _, pt := range t.timers {
			pt.stop()
		}
		// A snapshot writer waiting for channel state the subtask will
		// no longer collect gives up.
		close(t.exiting)
		t.snapshots.Wait()
		if f := t.asyncFault.Load(); f != nil && err == nil {
			err = *f
		}
		for _, op := range t.chainOps() {
			if cerr := op.Op.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("closing %s: %w", op.UID, cerr)
			}
		}
	}()
	tc := &TaskContext{ID: t.id, Subtask: t.id.Subtask, Parallelism: t.vertex.Parallelism, MaxParallelism: t.vertex.MaxParallelism, task: t}
	chain, err := t.vertex.Build(tc)
	if err != nil {
		return fmt.Errorf("building %s: %w", t.id, err)
	}
	t.chain = chain
	t.restoreEventTime()
	if t.gate != nil {
		t.codecs = make([]BatchCodec, len(t.gate.chans))
		if t.opts.unaligned {
			// Resolved here, on the subtask's goroutine, before any
			// snapshot writer reads them.
			for i := range t.gate.chans {
				if _, err := t.channelCodec(i); err != nil {
					return connector.Permanent(fmt.Errorf("unaligned checkpoints (execution.checkpointing.unaligned.enabled): %w", err))
				}
			}
		}
		if err := t.restoreChannelState(); err != nil {
			return err
		}
		t.startDebloat()
	}
	// Open tail first, so every operator's output is ready when it opens.
	for i := len(chain.Operators) - 1; i >= 0; i-- {
		op := chain.Operators[i]
		if err := t.fault(t.ctx, FaultSite{Point: FaultOpen, Operator: op.UID}); err != nil {
			return fmt.Errorf("opening %s: %w", op.UID, err)
		}
		if err := op.Op.Open(tc.OperatorContext(op.UID, op.Name)); err != nil {
			return fmt.Errorf("opening %s: %w", op.UID, err)
		}
		if err := t.fault(t.ctx, FaultSite{Point: FaultOpen, Operator: op.UID, Step: 1}); err != nil {
			return fmt.Errorf("after opening %s: %w", op.UID, err)
		}
	}
	t.reportRestore()
	if t.resumeTimers && chain.Source == nil {
		// The checkpoint came in the middle of a burst of timers: the
		// rest fire now, as they did after the snapshot, before the
		// channel state and anything new.
		if err := t.advanceWatermark(t.startWatermark); err != nil {
			return err
		}
		if err := t.afterUnit(); err != nil {
			return err
		}
	}
	if chain.Source != nil {
		if pr, ok := chain.Source.(PositionReporter); ok {
			t.positions.Store(&pr)
		}
		return t.runSource(chain.Source)
	}
	return t.runGate()
}

// reportRestore logs, for a subtask restored with local recovery, how
// many bytes of state files its operators read from local copies and how
// many from checkpoint storage, and keeps them for its metrics.
func (t *Task) reportRestore() {
	if t.restore == nil {
		return
	}
	lr, ok := t.restore.Store.(*storage.LocalReader)
	if !ok {
		return
	}
	local, remote, unverified := lr.RestoreStats()
	t.restoredLocal.Store(local)
	t.restoredRemote.Store(remote)
	t.logger.Info("restored state", "checkpoint", t.restore.Metadata.CheckpointID, "attempt", t.opts.attempt,
		"local_bytes", local, "remote_bytes", remote, "local_copies_not_verified", unverified)
}

// restoreEventTime starts a subtask with inputs at the event time the
// restored checkpoint recorded for it, so that it drops as late exactly
// what it would have dropped without the failure, and fires no timer a
// second time: the minimum over its chain's operators found in the
// checkpoint (see restoredWatermark), and its input channels' watermarks
// when it and every upstream vertex kept their parallelism. A source
// subtask restores its splits' highest timestamps instead.
func (t *Task) restoreEventTime() {
	t.startWatermark = MinWatermark
	if t.restore == nil || t.valve == nil {
		return
	}
	md := t.restore.Metadata
	wm, found := MaxWatermark, false
	var inputs []int64
	for i, op := range t.chain.Operators {
		st, ok := md.Operator(op.UID)
		if !ok {
			continue
		}
		w, in := restoredWatermark(st, t.id.Subtask, t.vertex.Parallelism, t.vertex.MaxParallelism)
		wm, found = min(wm, w), true
		if i == 0 && t.sameUpstream(md) {
			inputs = in
		}
	}
	if !found {
		return
	}
	t.resumeTimers = restoredTimersPending(md, t.chain.Operators, t.id.Subtask, t.vertex.Parallelism, t.vertex.MaxParallelism)
	t.valve.Restore(wm, inputs)
	t.watermark.Store(wm)
	t.startWatermark = wm
}

// sameUpstream reports whether every vertex feeding the subtask had the
// parallelism it has now in md, so the subtask's input channels are the
// ones md recorded.
func (t *Task) sameUpstream(md *checkpoint.Metadata) bool {
	for _, e := range t.vertex.Inputs {
		st, ok := md.Operator(e.From.UID)
		if !ok || st.Parallelism != e.From.Parallelism {
			return false
		}
	}
	return true
}

func (t *Task) chainOps() []ChainedOperator {
	if t.chain == nil {
		return nil
	}
	return t.chain.Operators
}

// waitStart and waitEnd bracket the time the subtask waits for input or
// mail: its idle time.
func (t *Task) waitStart() { t.idleSince.Store(time.Now().UnixNano()) }

func (t *Task) waitEnd() {
	if since := t.idleSince.Swap(0); since != 0 {
		t.idleTime.Add(max(time.Now().UnixNano()-since, 0))
	}
}

// idleNanos returns the idle time, including a wait in progress.
func (t *Task) idleNanos() int64 {
	n := t.idleTime.Load()
	if since := t.idleSince.Load(); since != 0 {
		n += max(time.Now().UnixNano()-since, 0)
	}
	return n
}

// runMails runs the queued urgent work and mails if they were signalled.
func (t *Task) runMails() error {
	select {
	case <-t.urgent.signal:
		if err := t.drainUrgent(); err != nil {
			return err
		}
	default:
	}
	select {
	case <-t.mailbox.signal:
		return t.drainMails()
	default:
		return nil
	}
}

// drainUrgent runs the queued urgent work and then any snapshot it
// deferred.
func (t *Task) drainUrgent() error {
	if err := t.runUrgent(); err != nil {
		return err
	}
	return t.afterUnit()
}

// drainMails runs the queued mails, oldest first, each a unit of work.
func (t *Task) drainMails() error {
	for _, m := range t.mailbox.take() {
		if err := m(); err != nil {
			return err
		}
		if err := t.afterUnit(); err != nil {
			return err
		}
	}
	return nil
}

// waitMails waits for and runs the next urgent work or mails.
func (t *Task) waitMails() error {
	if err := t.flushAll(); err != nil {
		return err
	}
	t.waitStart()
	select {
	case <-t.urgent.signal:
		t.waitEnd()
		return t.drainUrgent()
	case <-t.mailbox.signal:
		t.waitEnd()
		return t.drainMails()
	case <-t.ctx.Done():
		t.waitEnd()
		return context.Cause(t.ctx)
	}
}

func (t *Task) runGate() error {
	blocked := t.handler.Blocked
	for {
		if err := t.runMails(); err != nil {
			return err
		}
		if t.done {
			return nil
		}
		if t.stopAt != 0 {
			// Stopping with a savepoint: no input, only mails.
			if err := t.waitMails(); err != nil {
				return err
			}
			continue
		}
		ch, m, ok := t.gate.poll(blocked)
		if !ok {
			if err := t.flushAll(); err != nil {
				return err
			}
			if err := t.afterUnit(); err != nil {
				return err
			}
			t.waitStart()
			select {
			case <-t.gate.notify:
				t.waitEnd()
			case <-t.urgent.signal:
				t.waitEnd()
				if err := t.drainUrgent(); err != nil {
					return err
				}
			case <-t.mailbox.signal:
				t.waitEnd()
				if err := t.drainMails(); err != nil {
					return err
				}
			case <-t.ctx.Done():
				t.waitEnd()
				return context.Cause(t.ctx)
			}
			continue
		}
		if err := t.onMessage(ch, m); err != nil {
			return err
		}
		if err := t.afterUnit(); err != nil {
			return err
		}
	}
}

func (t *Task) onMessage(ch int, m message) error {
	t.captureInput(ch, &m)
	switch m.kind {
	case msgData:
		t.recordsIn.Add(int64(m.n))
		if t.alignID != 0 {
			t.countProcessed(ch, &m)
		}
		if err := t.fault(t.ctx, FaultSite{Point: FaultBatch}); err != nil {
			return err
		}
		for from := 0; ; {
			next, err := t.chain.Deliver(t.gate.logical[ch], m.data, from, &t.interrupt)
			if err != nil {
				return err
			}
			if next >= m.n {
				break
			}
			// An unaligned barrier went out during record next-1: the
			// snapshot comes now, and the rest of the batch is channel
			// state, read after it.
			m.pool = nil
			t.captureRest(ch, m, next)
			if err := t.completeDeferred(); err != nil {
				return err
			}
			from = next
		}
		if m.pool != nil {
			m.pool.Put(m.data) // operators copy what they keep
		}
		return nil
	case msgWatermark:
		if wm, ok := t.valve.OnWatermark(ch, m.wm); ok {
			return t.advanceWatermark(wm)
		}
	case msgIdle, msgActive:
		wasIdle := t.valve.Idle()
		wm, ok := t.valve.SetIdle(ch, m.kind == msgIdle)
		if ok {
			if err := t.advanceWatermark(wm); err != nil {
				return err
			}
		}
		if idle := t.valve.Idle(); idle != wasIdle {
			kind := msgActive
			if idle {
				kind = msgIdle
			}
			return t.broadcast(message{kind: kind})
		}
	case msgBarrier:
		return t.onBarrier(ch, m)
	case msgEndOfData:
		if !t.endOfData[ch] {
			t.endOfData[ch] = true
			t.endOfDataN++
		}
		if t.endOfDataN == len(t.endOfData) {
			if err := t.finish(); err != nil {
				return err
			}
			if t.opts.checkpointing && t.opts.unaligned {
				// An unaligned barrier may have overtaken this end of
				// data: the checkpoint under way then snapshotted the
				// subtask before it finished, and it needs another.
				t.master.reachedEndOfData(t.id)
			}
		}
	case msgEnd:
		t.ended[ch] = true
		t.endedN++
		if wm, ok := t.valve.OnEnd(ch); ok {
			if err := t.advanceWatermark(wm); err != nil {
				return err
			}
		}
		if err := t.onBarrierEvents(t.handler.OnEndOfInput(ch, t.clock.Now()), ch, nil); err != nil {
			return err
		}
		if t.endedN == len(t.ended) {
			t.inputsEnded = true
			return t.maybeEnd()
		}
	}
	return nil
}

// advanceWatermark advances the chain's event time to wm. An operator
// that stops firing its timers because an unaligned snapshot waits
// (ErrInterrupted) gets the snapshot now, recorded with its timers up to
// wm still to fire, and then the same watermark again, which goes on
// where it stopped.
func (t *Task) advanceWatermark(wm int64) error {
	t.watermark.Store(wm)
	for {
		err := t.head().ProcessWatermark(wm)
		if !errors.Is(err, ErrInterrupted) {
			return err
		}
		if t.deferred == nil {
			return fmt.Errorf("%s: an operator stopped firing timers at watermark %d with no snapshot waiting", t.id, wm)
		}
		t.firing = true
		err = t.completeDeferred()
		t.firing = false
		if err != nil {
			return err
		}
	}
}

// onBarrierEvents acts on the handler's events; ch is the input whose
// barrier (which brought the channel state att) or end caused them, -1
// for none.
func (t *Task) onBarrierEvents(events []BarrierEvent, ch int, att *inflight) error {
	// Copy: checkpointing may not call the handler, but a decline could.
	for _, ev := range append([]BarrierEvent(nil), events...) {
		switch ev := ev.(type) {
		case TakeSnapshot:
			var err error
			if ev.Unaligned {
				err = t.startUnaligned(ev, ch, att)
			} else {
				err = t.checkpoint(ev.Barrier, ev.StartDelay, ev.Alignment)
			}
			if err != nil {
				return err
			}
		case EndCapture, CaptureComplete:
			t.uc = t.uc.onEvent(ev, ch, att)
		case Abort:
			if t.alignID == ev.Checkpoint {
				t.alignID = 0
			}
			t.uc = t.uc.onEvent(ev, ch, att)
			t.master.decline(t.id, ev.Checkpoint, DeclineSubsumed, errors.New(ev.Reason))
		}
	}
	return nil
}

// finish runs at the end of data: the operators emit what they hold, head
// first, and downstream learns that no records follow.
func (t *Task) finish() error {
	if t.finished {
		return nil
	}
	for _, op := range t.chain.Operators {
		if err := op.Op.Finish(); err != nil {
			return fmt.Errorf("finishing %s: %w", op.UID, err)
		}
	}
	t.finished = true
	return t.broadcast(message{kind: msgEndOfData})
}

// maybeEnd closes the subtask's outputs once its inputs have ended and, if
// the job checkpoints, a checkpoint taken after the operators finished has
// completed (so transactional sinks have committed everything).
func (t *Task) maybeEnd() error {
	if !t.inputsEnded || t.done {
		return nil
	}
	if t.opts.checkpointing && (t.finalCheckpoint == 0 || t.completed < t.finalCheckpoint) {
		return nil
	}
	if err := t.broadcast(message{kind: msgEnd}); err != nil {
		return err
	}
	t.done = true
	return nil
}

func (t *Task) flushAll() error {
	for _, w := range t.writers {
		if err := w.flush(); err != nil {
			return err
		}
	}
	return nil
}

func (t *Task) broadcast(m message) error {
	if !m.overtakable() {
		// The end of data goes out behind the channel state, never in it.
		if err := t.afterUnit(); err != nil {
			return err
		}
	}
	for _, w := range t.writers {
		if err := w.broadcast(m); err != nil {
			return err
		}
	}
	return nil
}

// triggerCheckpoint is a source's part: the coordinator's trigger arrives
// as a mail, and the barrier goes out right behind the last record emitted.
func (t *Task) triggerCheckpoint(b Barrier) error {
	if b.ID <= t.started {
		return nil // started unaligned when its timeout passed
	}
	t.started = b.ID
	if t.done {
		t.master.decline(t.id, b.ID, DeclineTaskClosing, errors.New("the subtask has finished"))
		return nil
	}
	if b.Drain && t.chain.Source != nil && !t.finished {
		// Stop with drain: event time ends before the savepoint, so
		// every timer and window fires and its output precedes the
		// barrier.
		if err := t.advanceWatermark(MaxWatermark); err != nil {
			return err
		}
	}
	delay := max(0, t.clock.Now().Sub(time.Unix(0, b.Timestamp)))
	if b.Unaligned {
		return t.startUnaligned(TakeSnapshot{Barrier: b, StartDelay: delay, Unaligned: true}, -1, nil)
	}
	if b.AlignedTimeout > 0 && b.ID > t.timeoutArmed {
		t.armAlignedTimeout(b)
	}
	return t.checkpoint(b, delay, 0)
}

// checkpoint forwards the aligned barrier b, takes the synchronous
// snapshot of every operator, and starts the asynchronous write, which
// acknowledges the checkpoint when done. A barrier that may still switch to
// unaligned (it has an aligned-checkpoint timeout) goes out after the
// snapshot, so that it can overtake its queued output once the timeout
// passes, even while the broadcast waits for space.
func (t *Task) checkpoint(b Barrier, startDelay, alignment time.Duration) error {
	start := t.clock.Now()
	steps := len(t.chain.Operators) + 2
	if err := t.fault(t.ctx, FaultSite{Point: FaultSync, Checkpoint: b.ID, Steps: steps}); err != nil {
		return fmt.Errorf("checkpoint %d: %w", b.ID, err)
	}
	late := b.AlignedTimeout > 0
	if !late {
		if err := t.broadcast(message{kind: msgBarrier, barrier: b}); err != nil {
			return err
		}
	}
	snaps, err := t.snapshotOperators(b)
	if err != nil {
		return err
	}
	stats := checkpoint.SubtaskStats{
		SyncDuration:      t.clock.Now().Sub(start),
		AlignmentDuration: alignment,
		StartDelay:        startDelay,
		ProcessedBytes:    t.endAlignment(b.ID),
	}
	if err := t.startWrite(b, snaps, stats, nil); err != nil {
		return err
	}
	if late {
		t.forwarding = b.ID
		if err := t.broadcast(message{kind: msgBarrier, barrier: b}); err != nil {
			return err
		}
	}
	return nil
}

// snapshotOperators takes the synchronous snapshot of every operator of
// the chain for checkpoint b.
func (t *Task) snapshotOperators(b Barrier) ([]Snapshot, error) {
	ops := t.chain.Operators
	steps := len(ops) + 2
	snaps := make([]Snapshot, len(ops))
	t.snapshotting = b
	defer func() { t.snapshotting = Barrier{} }()
	for i, op := range ops {
		if err := t.fault(t.ctx, FaultSite{Point: FaultSync, Checkpoint: b.ID, Operator: op.UID, Step: i + 1, Steps: steps}); err != nil {
			return nil, fmt.Errorf("snapshot of %s for checkpoint %d: %w", op.UID, b.ID, err)
		}
		s, err := op.Op.Snapshot(b.ID)
		if err != nil {
			// A failure in the synchronous part fails the task.
			return nil, fmt.Errorf("snapshot of %s for checkpoint %d: %w", op.UID, b.ID, err)
		}
		snaps[i] = s
	}
	if err := t.fault(t.ctx, FaultSite{Point: FaultSync, Checkpoint: b.ID, Step: steps - 1, Steps: steps}); err != nil {
		return nil, fmt.Errorf("checkpoint %d: %w", b.ID, err)
	}
	return snaps, nil
}

// startWrite starts the asynchronous part of checkpoint b: writing snaps
// and, for an unaligned checkpoint of a subtask with inputs, the channel
// state uc collects.
func (t *Task) startWrite(b Barrier, snaps []Snapshot, stats checkpoint.SubtaskStats, uc *unalignedCheckpoint) error {
	if b.Stop {
		t.stopAt = b.ID
	}
	// A savepoint commits nothing: the final checkpoint is a checkpoint.
	if t.finished && t.finalCheckpoint == 0 && !b.Savepoint {
		t.finalCheckpoint = b.ID
	}
	// The event time of a subtask with inputs goes into the checkpoint
	// with its state; a source's splits record their own.
	var et *eventTime
	if t.valve != nil {
		et = &eventTime{wm: t.valve.Current(), inputs: t.valve.Inputs(), firing: t.firing}
	}
	t.lastCkptAt.Store(b.ID)
	ops := t.chain.Operators
	// The state of a subtask that has finished is carried into every
	// later checkpoint (the job master's addFinished): it is shared.
	finished := t.finished
	t.snapshots.Add(1)
	go func() {
		defer t.snapshots.Done()
		t.writeSnapshot(b.ID, b.Target, ops, snaps, stats, et, uc, finished)
	}()
	return nil
}

// writeState writes a piece of checkpoint id's state, into the savepoint
// directory target if it is not ""; in a checkpoint, with shared, into
// the job's shared/ directory, for later checkpoints to name too.
func (t *Task) writeState(id int64, target, name string, shared bool, write func(io.Writer) error) (checkpoint.StateHandle, error) {
	if target != "" {
		return t.store.WriteSavepointState(t.ctx, target, name, write)
	}
	store := t.store.WriteState
	if shared {
		store = t.store.WriteSharedState
	}
	if t.local == nil {
		return store(t.ctx, id, name, write)
	}
	// Local backup: the same bytes go to a local copy on the way.
	lw := t.local.Create(id, name)
	h, err := store(t.ctx, id, name, func(w io.Writer) error {
		return write(io.MultiWriter(w, lw))
	})
	if err != nil {
		lw.Abort()
		return h, err
	}
	lw.Commit(h)
	return h, nil
}

// writeFile writes the file at path, an embedded store's, as a piece of
// checkpoint id's state (shared as writeState says); with local backup
// its local copy is a hard link of the file.
func (t *Task) writeFile(id int64, target, name string, shared bool, path string) (checkpoint.StateHandle, error) {
	if target != "" || t.local == nil {
		return t.writeState(id, target, name, shared, copyFile(path))
	}
	store := t.store.WriteState
	if shared {
		store = t.store.WriteSharedState
	}
	h, err := store(t.ctx, id, name, copyFile(path))
	if err != nil {
		return h, err
	}
	if lerr := t.local.Link(id, h, path); lerr != nil {
		t.logger.Warn("no local copy of a checkpoint file", "checkpoint", id, "file", path, "err", lerr)
	}
	return h, nil
}

// copyFile returns a state writer that copies the file at path.
func copyFile(path string) func(io.Writer) error {
	return func(w io.Writer) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	}
}

// eventTime is a subtask's event time when it took a snapshot: its
// watermark, its input channels' watermarks, and whether the snapshot
// came in the middle of firing the timers up to the watermark.
type eventTime struct {
	wm     int64
	inputs []int64
	firing bool
}

// writeSnapshot writes the state of checkpoint id (of the savepoint in
// directory target, if it is not ""), then acknowledges it. et is nil for
// a source subtask, whose splits record their event time. The files later
// checkpoints may name go to the job's shared/ directory: those the
// snapshots mark shared, and with finished (the subtask had finished when
// it took them) every one.
func (t *Task) writeSnapshot(id int64, target string, ops []ChainedOperator, snaps []Snapshot, stats checkpoint.SubtaskStats, et *eventTime, uc *unalignedCheckpoint, finished bool) {
	start := time.Now()
	release := func() error {
		for _, s := range snaps {
			if s.Release != nil {
				s.Release()
			}
		}
		return nil
	}
	writes := 0
	for _, s := range snaps {
		if s.Keyed != nil {
			writes++
		}
		if s.Operator != nil {
			writes++
		}
	}
	if uc != nil {
		writes++ // the channel state
	}
	steps, step := writes+2, 0
	// fault asks the injector about the next step of the write; path
	// names the channel state's step.
	var path string
	fault := func() error {
		step++
		return t.fault(t.ctx, FaultSite{Point: FaultAsync, Checkpoint: id, Step: step - 1, Steps: steps, Path: path})
	}
	states := make(map[string]checkpoint.SubtaskState, len(ops))
	var err, ferr error
	for i, s := range snaps {
		var st checkpoint.SubtaskState
		if et != nil {
			st.Watermark, st.TimersPending = &et.wm, et.firing
			if i == 0 {
				st.InputWatermarks = et.inputs
			}
		}
		uid := ops[i].UID
		if s.Keyed != nil {
			if ferr = fault(); ferr != nil {
				break
			}
			var h checkpoint.StateHandle
			h, err = t.writeState(id, target, fmt.Sprintf("%s-%d-keyed", uid, t.id.Subtask), finished || s.KeyedShared, func(w io.Writer) error {
				_, err := s.Keyed.WriteTo(w)
				return err
			})
			if err != nil {
				break
			}
			kg := s.KeyGroups
			h.KeyGroups = &kg
			st.Keyed = append(st.Keyed, h)
			var files []checkpoint.StateHandle
			for _, f := range s.KeyedFiles {
				var fh checkpoint.StateHandle
				if f.Reuse != nil {
					fh = *f.Reuse
					if t.local != nil && target == "" {
						t.local.Reference(id, fh)
					}
				} else if fh, err = t.writeFile(id, target, fmt.Sprintf("%s-%d-keyed-%s", uid, t.id.Subtask, f.Name), finished || f.Shared, f.Path); err != nil {
					break
				}
				fh.File, fh.KeyGroups = f.Name, &kg
				files = append(files, fh)
			}
			if err != nil {
				break
			}
			st.Keyed = append(st.Keyed, files...)
			if s.Written != nil {
				s.Written(st.Keyed[len(st.Keyed)-len(files)-1:])
			}
		}
		if s.Operator != nil {
			if ferr = fault(); ferr != nil {
				break
			}
			var h checkpoint.StateHandle
			h, err = t.writeState(id, target, fmt.Sprintf("%s-%d-op", uid, t.id.Subtask), finished, func(w io.Writer) error {
				_, err := w.Write(s.Operator)
				return err
			})
			if err != nil {
				break
			}
			st.Operator = append(st.Operator, h)
		}
		states[uid] = st
	}
	t.mailbox.post(release)
	if uc != nil && err == nil && ferr == nil {
		if !t.waitChannelState(uc) {
			return // given up (declined already) or the subtask stops
		}
		path = channelStateName(ops[0].UID, t.id.Subtask)
		ferr = fault()
		path = ""
		if ferr == nil {
			var h *checkpoint.StateHandle
			if h, err = t.writeChannelState(id, ops[0].UID, uc); err == nil && h != nil {
				st := states[ops[0].UID]
				st.InputChannels = []checkpoint.StateHandle{*h}
				states[ops[0].UID] = st
				stats.PersistedBytes = h.Size
			}
		}
	}
	if err == nil && ferr == nil {
		ferr = fault()
	}
	if ferr != nil {
		t.failAsync(id, ferr)
		return
	}
	if err != nil {
		if t.ctx.Err() == nil {
			t.master.decline(t.id, id, DeclineAsyncFailure, fmt.Errorf("asynchronous part of checkpoint %d failed: %w", id, err))
		}
		return
	}
	stats.AsyncDuration = time.Since(start)
	t.master.acknowledge(t.id, id, checkpoint.TaskAck{States: states, Stats: stats})
	if ferr = fault(); ferr != nil {
		t.failAsync(id, ferr)
	}
}

// failAsync fails the subtask with an injected failure of checkpoint id's
// asynchronous part: on its goroutine at the next mail, or when it exits
// if it has ended.
func (t *Task) failAsync(id int64, err error) {
	if t.ctx.Err() != nil {
		return // canceled already: the fault was a hang that ended
	}
	err = fmt.Errorf("asynchronous part of checkpoint %d: %w", id, err)
	t.asyncFault.CompareAndSwap(nil, &err)
	t.mailbox.post(func() error { return err })
}

// notifyComplete is the coordinator's notification, as a mail.
func (t *Task) notifyComplete(id int64) error {
	if id <= t.completed {
		return nil
	}
	t.completed = id
	for _, op := range t.chain.Operators {
		if err := op.Op.NotifyCheckpointComplete(id); err != nil {
			return fmt.Errorf("%s on completion of checkpoint %d: %w", op.UID, id, err)
		}
	}
	if t.stopAt != 0 && id >= t.stopAt {
		// The job stops with this savepoint: its transactions are
		// committed, and nothing after it is.
		t.done, t.stopped = true, true
		return nil
	}
	return t.maybeEnd()
}

// notifyAbort releases an alignment the coordinator gave up.
func (t *Task) notifyAbort(id int64, reason string) error {
	if id == t.stopAt {
		t.stopAt = 0 // the stop failed: the job goes on
		for _, f := range t.heldTimers {
			t.mailbox.post(func() error {
				if t.finished {
					return nil
				}
				return f()
			})
		}
		t.heldTimers = nil
	}
	if t.handler == nil {
		return nil
	}
	t.handler.Abort(id, reason)
	return nil
}

func (t *Task) runSource(src SourceDriver) error {
	fetched := src.Fetched()
	for {
		if err := t.runMails(); err != nil {
			return err
		}
		if t.done {
			return nil
		}
		if fetched == nil || t.stopAt != 0 {
			select {
			case <-t.urgent.signal:
				if err := t.drainUrgent(); err != nil {
					return err
				}
			case <-t.mailbox.signal:
				if err := t.drainMails(); err != nil {
					return err
				}
			case <-t.ctx.Done():
				return context.Cause(t.ctx)
			}
			continue
		}
		var item any
		select {
		case item = <-fetched:
		default:
			if err := t.flushAll(); err != nil {
				return err
			}
			if err := t.afterUnit(); err != nil {
				return err
			}
			t.waitStart()
			select {
			case item = <-fetched:
				t.waitEnd()
			case <-t.urgent.signal:
				t.waitEnd()
				if err := t.drainUrgent(); err != nil {
					return err
				}
				continue
			case <-t.mailbox.signal:
				t.waitEnd()
				if err := t.drainMails(); err != nil {
					return err
				}
				continue
			case <-t.ctx.Done():
				t.waitEnd()
				return context.Cause(t.ctx)
			}
		}
		n, done, err := src.Emit(item)
		if err != nil {
			return err
		}
		if err := t.afterUnit(); err != nil {
			return err
		}
		t.recordsIn.Add(int64(n))
		if err := t.fault(t.ctx, FaultSite{Point: FaultBatch}); err != nil {
			return err
		}
		if done {
			fetched = nil
			if err := t.endSource(); err != nil {
				return err
			}
		}
	}
}

// SplitReceiver is implemented by source drivers that take splits the
// job master assigns them while they run.
type SplitReceiver interface {
	// AddSplits takes splits, late those of them the source's first
	// listing did not have (see SplitAssignment.Late).
	AddSplits(splits, late []string) error
}

// assignSplits is the job master's assignment of splits discovered since
// the subtask was deployed, as a mail.
func (t *Task) assignSplits(splits, late []string) error {
	r, ok := t.chain.Source.(SplitReceiver)
	switch {
	case !ok:
		return fmt.Errorf("%s cannot take the splits %v it was assigned", t.id, splits)
	case t.finished:
		// Its reader is gone: fail, and the redeploy reads the splits.
		return fmt.Errorf("%s was assigned the splits %v after its input ended", t.id, splits)
	}
	if err := r.AddSplits(splits, late); err != nil {
		return fmt.Errorf("adding splits %v: %w", splits, err)
	}
	return nil
}

// endSource runs when every split of a bounded source has ended: event
// time completes, the chain finishes, and the subtask waits for a final
// checkpoint before it closes its outputs.
func (t *Task) endSource() error {
	if err := t.advanceWatermark(MaxWatermark); err != nil {
		return err
	}
	if err := t.finish(); err != nil {
		return err
	}
	t.inputsEnded = true
	if t.opts.checkpointing {
		t.master.reachedEndOfData(t.id)
	}
	return t.maybeEnd()
}

// countProcessed adds the encoded size of batch m, read from input ch
// while the subtask aligns, to the checkpoint's processed data. Edges
// without a codec (records that never leave the process) count nothing.
func (t *Task) countProcessed(ch int, m *message) {
	if t.codecs[ch] == nil && t.gate.edges[ch].Codec == nil {
		return
	}
	bc, err := t.channelCodec(ch)
	if err != nil {
		return
	}
	t.sizeBuf = bc.AppendBatch(t.sizeBuf[:0], m.data, m.from)
	t.alignBytes += int64(len(t.sizeBuf))
}

// startAlignment notes the first barrier of checkpoint id on any input.
func (t *Task) startAlignment(id int64) {
	if id > t.alignID {
		t.alignID, t.alignBytes = id, 0
	}
}

// endAlignment returns the data processed while aligning on checkpoint
// id, whose snapshot is being taken, and ends the alignment.
func (t *Task) endAlignment(id int64) int64 {
	if t.alignID != id {
		return 0
	}
	t.alignID = 0
	return t.alignBytes
}
