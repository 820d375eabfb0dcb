package runtime

import (
	"fmt"
	"slices"
	"time"

	"github.com/weirstream/weir/config"
)

// Barrier is the checkpoint barrier as it travels on a channel.
type Barrier struct {
	ID int64
	// Timestamp is when the coordinator triggered the checkpoint, in Unix
	// nanoseconds; a task's start delay is measured from it.
	Timestamp int64
	// Savepoint marks a savepoint, which is always aligned; Target is the
	// directory (a path or URL) its state goes to, a Savepoint's Path.
	Savepoint bool
	Target    string
	// Stop marks the savepoint of a stop-with-savepoint: a subtask that
	// has taken it reads no more input, and once it completes commits
	// and ends. Drain, on a stop's barrier, ends event time at the
	// sources before it (Flink's stop --drain).
	Stop, Drain bool
	// Native, on a savepoint's barrier, asks for the backends' own format
	// (checkpoint.FormatNative).
	Native bool
	// Unaligned marks an unaligned barrier: it overtakes the records
	// queued before it, which become channel state, and no task aligns on
	// it.
	Unaligned bool
	// AlignedTimeout, on an aligned barrier of a job with unaligned
	// checkpoints, is how long after the trigger the checkpoint stays
	// aligned; then it switches to unaligned wherever it is. 0: no switch.
	AlignedTimeout time.Duration
	// Base is the latest checkpoint completed when this one was
	// triggered, which an incremental snapshot may build on (0: none).
	Base int64
}

// timedOut reports whether the aligned barrier b has outlived its
// aligned-checkpoint timeout at now.
func (b Barrier) timedOut(now time.Time) bool {
	return !b.Unaligned && b.AlignedTimeout > 0 && b.Timestamp != 0 && now.Sub(time.Unix(0, b.Timestamp)) >= b.AlignedTimeout
}

// BarrierEvent is one outcome of the barrier handler, what package mini
// calls an Action (runtime keeps the longer name: its job master has
// CheckpointActions too). The concrete types are Block, Unblock,
// BarrierSeen, TakeSnapshot, Abort and Ignore, named as mini's actions;
// TakeSnapshot is mini's Snapshot, a name runtime gives to an operator's
// snapshot. Unaligned checkpoints, which mini does not model, add
// EndCapture and CaptureComplete.
type BarrierEvent interface{ barrierEvent() }

// Block says that Input delivered the barrier of Checkpoint and is not to
// be read until the alignment ends. Have and Waiting list the inputs that have
// and have not delivered it.
type Block struct {
	Input      int
	Checkpoint int64
	Have       []int
	Waiting    []int
}

// Unblock says that Input may be read again.
type Unblock struct{ Input int }

// BarrierSeen is Block's at-least-once counterpart: the barrier is counted
// but Input keeps flowing.
type BarrierSeen struct {
	Input      int
	Checkpoint int64
	Have       []int
	Waiting    []int
}

// TakeSnapshot says the barrier of Checkpoint has arrived on every open input.
// The task flushes its output, forwards the barrier, snapshots its
// operators, and only then reads input again.
type TakeSnapshot struct {
	Barrier Barrier
	// StartDelay is the time from the trigger to the first barrier.
	StartDelay time.Duration
	// Alignment is the time from the first barrier to the last, or to
	// the switch to unaligned.
	Alignment time.Duration
	// Unaligned says the snapshot is unaligned: the task forwards the
	// barrier (marked unaligned) ahead of its queued output, snapshots
	// now, and records what Capture's inputs deliver until their barrier
	// as channel state. Inputs that delivered the barrier already are not
	// blocked any more (an Unblock for each precedes TakeSnapshot).
	Unaligned bool
	// Capture lists the open inputs whose barrier has not arrived.
	Capture []int
}

// EndCapture says that Input delivered the barrier of the unaligned
// Checkpoint, or ended: its channel state is complete.
type EndCapture struct {
	Input      int
	Checkpoint int64
}

// CaptureComplete says every input's channel state of the unaligned
// Checkpoint is complete: the task may acknowledge it.
type CaptureComplete struct {
	Checkpoint int64
}

// Abort says the handler gave up Checkpoint (subsumed by a newer
// barrier, aborted by the coordinator, or the task failed).
type Abort struct {
	Checkpoint int64
	Reason     string
}

// Ignore says a barrier of a checkpoint that is no longer pending arrived
// on Input and was dropped.
type Ignore struct {
	Input   int
	Barrier int64
	Reason  string
}

func (Block) barrierEvent()           {}
func (Unblock) barrierEvent()         {}
func (BarrierSeen) barrierEvent()     {}
func (TakeSnapshot) barrierEvent()    {}
func (Abort) barrierEvent()           {}
func (Ignore) barrierEvent()          {}
func (EndCapture) barrierEvent()      {}
func (CaptureComplete) barrierEvent() {}

// BarrierHandler decides, for a task with several input channels, when a
// checkpoint's barriers are aligned and which inputs may be read meanwhile.
// It is an I/O-free state machine that the task's goroutine owns: the task
// reports barriers and ended inputs, and reads no input for which Blocked
// is true. Nothing is held inside: a blocked input's data stays in its
// channel, which, being bounded, backpressures the producer.
//
// Its mode is a config.CheckpointingMode; the zero value means
// EXACTLY_ONCE. EXACTLY_ONCE (aligned) follows the rules of package mini's
// Handler (the reference it is tested against, with the same transcripts):
// block an input once it delivered barrier n; when the last open input
// delivers it, snapshot and unblock everything. A newer barrier aborts an
// older alignment (subsumed); a barrier of a checkpoint no longer pending is
// ignored; an ended input is not waited for; the coordinator's abort
// releases the inputs. AT_LEAST_ONCE (tracked) counts barriers of several
// checkpoints at once without blocking, as Flink's
// CheckpointBarrierTracker.
//
// An unaligned barrier (EXACTLY_ONCE only) takes the snapshot on its first
// arrival, without blocking anything, and the inputs whose barrier is still
// to come are captured until it does (EndCapture, then CaptureComplete). An
// aligned barrier with an aligned-checkpoint timeout aligns until the
// timeout has passed since the trigger (seen on a later arrival or reported
// by Timeout), or until an unaligned barrier of the same checkpoint
// arrives, and then switches: the blocked inputs are released and the
// snapshot is taken unaligned from where the alignment stands.
type BarrierHandler struct {
	mode  config.CheckpointingMode
	last  int64
	ended []bool

	pending  int64
	barrier  Barrier
	arrived  []bool
	blocked  []bool
	firstAt  time.Time
	blockedN int
	// unaligned says the pending checkpoint's snapshot was taken
	// unaligned: arrivals end captures instead of blocking.
	unaligned bool

	tracked []trackedCheckpoint

	out []BarrierEvent
}

type trackedCheckpoint struct {
	barrier Barrier
	arrived []bool
	firstAt time.Time
}

// NewBarrierHandler returns a handler for a task with inputs input channels.
func NewBarrierHandler(inputs int, mode config.CheckpointingMode) *BarrierHandler {
	if inputs < 1 {
		panic(fmt.Sprintf("runtime.NewBarrierHandler: inputs must be >= 1, got %d", inputs))
	}
	return &BarrierHandler{
		mode:    mode,
		ended:   make([]bool, inputs),
		arrived: make([]bool, inputs),
		blocked: make([]bool, inputs),
	}
}

// Blocked reports whether input must not be read.
func (h *BarrierHandler) Blocked(input int) bool { return h.blocked[input] }

// AnyBlocked reports whether some input is blocked.
func (h *BarrierHandler) AnyBlocked() bool { return h.blockedN > 0 }

// Pending returns the checkpoint being aligned (in AT_LEAST_ONCE mode the oldest
// one being counted), or 0.
func (h *BarrierHandler) Pending() int64 {
	if len(h.tracked) > 0 {
		return h.tracked[0].barrier.ID
	}
	return h.pending
}

// OnBarrier reports barrier b on input at time now. The returned slice is
// valid until the next call.
func (h *BarrierHandler) OnBarrier(input int, b Barrier, now time.Time) []BarrierEvent {
	h.out = h.out[:0]
	if h.blocked[input] {
		panic(fmt.Sprintf("runtime.BarrierHandler: barrier %d read from blocked input %d", b.ID, input))
	}
	if h.mode == config.AtLeastOnce && !b.Savepoint {
		h.count(input, b, now)
		return h.out
	}
	id := b.ID
	switch {
	case id == h.pending && h.arrived[input]:
		h.out = append(h.out, Ignore{Input: input, Barrier: id, Reason: "duplicate barrier"})
		return h.out
	case id != h.pending && id <= h.last:
		h.out = append(h.out, Ignore{Input: input, Barrier: id, Reason: fmt.Sprintf("checkpoint %d is not pending", id)})
		return h.out
	case h.pending != 0 && id > h.pending:
		h.release(fmt.Sprintf("subsumed by checkpoint %d", id))
	}
	if h.pending == 0 {
		h.pending, h.last, h.barrier, h.firstAt = id, id, b, now
	}
	h.arrived[input] = true
	if h.unaligned {
		h.out = append(h.out, EndCapture{Input: input, Checkpoint: id})
		if h.allArrived(h.arrived) {
			h.completeCapture()
		}
		return h.out
	}
	if b.Unaligned || h.barrier.timedOut(now) {
		h.switchUnaligned(now)
		return h.out
	}
	if h.allArrived(h.arrived) {
		h.complete(now)
		return h.out
	}
	have, waiting := h.progress(h.arrived)
	h.blocked[input] = true
	h.blockedN++
	h.out = append(h.out, Block{Input: input, Checkpoint: id, Have: have, Waiting: waiting})
	return h.out
}

// OnEndOfInput reports that input has ended: it delivers nothing more, not
// even barriers, and is no longer waited for.
func (h *BarrierHandler) OnEndOfInput(input int, now time.Time) []BarrierEvent {
	h.out = h.out[:0]
	h.ended[input] = true
	switch {
	case h.mode == config.AtLeastOnce:
		h.completeCounted(now)
	case h.pending != 0 && h.unaligned:
		if !h.arrived[input] {
			h.out = append(h.out, EndCapture{Input: input, Checkpoint: h.pending})
		}
		if h.allArrived(h.arrived) {
			h.completeCapture()
		}
	case h.pending != 0 && h.allArrived(h.arrived):
		h.complete(now)
	}
	return h.out
}

// Timeout reports that the aligned-checkpoint timeout of checkpoint id
// may have passed at now: if its alignment is still going on, the
// checkpoint switches to unaligned.
func (h *BarrierHandler) Timeout(id int64, now time.Time) []BarrierEvent {
	h.out = h.out[:0]
	if h.pending == id && !h.unaligned && h.barrier.timedOut(now) {
		h.switchUnaligned(now)
	}
	return h.out
}

// switchUnaligned takes the pending checkpoint's snapshot unaligned: the
// blocked inputs flow again, the others are captured until their barrier.
func (h *BarrierHandler) switchUnaligned(now time.Time) {
	for i := range h.blocked {
		if h.blocked[i] {
			h.out = append(h.out, Unblock{Input: i})
			h.blocked[i] = false
		}
	}
	h.blockedN = 0
	b := h.barrier
	b.Unaligned, b.AlignedTimeout = true, 0
	_, waiting := h.progress(h.arrived)
	h.out = append(h.out, TakeSnapshot{Barrier: b, StartDelay: startDelay(b, h.firstAt), Alignment: now.Sub(h.firstAt), Unaligned: true, Capture: waiting})
	h.unaligned = true
	if len(waiting) == 0 {
		h.completeCapture()
	}
}

func (h *BarrierHandler) completeCapture() {
	h.out = append(h.out, CaptureComplete{Checkpoint: h.pending})
	h.pending, h.unaligned = 0, false
	for i := range h.arrived {
		h.arrived[i] = false
	}
}

// Abort applies the coordinator's abort of checkpoint id. Barriers of id
// that arrive later are ignored.
func (h *BarrierHandler) Abort(id int64, reason string) []BarrierEvent {
	h.out = h.out[:0]
	h.last = max(h.last, id)
	if i := slices.IndexFunc(h.tracked, func(t trackedCheckpoint) bool { return t.barrier.ID == id }); i >= 0 {
		h.tracked = slices.Delete(h.tracked, i, i+1)
		h.out = append(h.out, Abort{Checkpoint: id, Reason: reason})
		return h.out
	}
	if id == h.pending {
		h.release(reason)
	}
	return h.out
}

// Fail abandons every pending checkpoint (the task is failing or
// restarting) and unblocks all inputs, as mini's Handler.Fail.
func (h *BarrierHandler) Fail(reason string) []BarrierEvent {
	h.out = h.out[:0]
	if h.pending != 0 {
		h.release(reason)
	}
	for _, t := range h.tracked {
		h.out = append(h.out, Abort{Checkpoint: t.barrier.ID, Reason: reason})
	}
	h.tracked = h.tracked[:0]
	return h.out
}

func (h *BarrierHandler) count(input int, b Barrier, now time.Time) {
	i := slices.IndexFunc(h.tracked, func(t trackedCheckpoint) bool { return t.barrier.ID == b.ID })
	switch {
	case i >= 0 && h.tracked[i].arrived[input]:
		h.out = append(h.out, Ignore{Input: input, Barrier: b.ID, Reason: "duplicate barrier"})
		return
	case i < 0 && b.ID <= h.last:
		h.out = append(h.out, Ignore{Input: input, Barrier: b.ID, Reason: fmt.Sprintf("checkpoint %d is not pending", b.ID)})
		return
	case i < 0:
		h.last = b.ID
		h.tracked = append(h.tracked, trackedCheckpoint{barrier: b, arrived: make([]bool, len(h.ended)), firstAt: now})
		i = len(h.tracked) - 1
	}
	h.tracked[i].arrived[input] = true
	if h.completeCounted(now) {
		return
	}
	have, waiting := h.progress(h.tracked[i].arrived)
	h.out = append(h.out, BarrierSeen{Input: input, Checkpoint: b.ID, Have: have, Waiting: waiting})
}

// completeCounted snapshots the newest counted checkpoint whose barrier
// every open input delivered, aborting the older ones.
func (h *BarrierHandler) completeCounted(now time.Time) bool {
	for i := len(h.tracked) - 1; i >= 0; i-- {
		t := h.tracked[i]
		if !h.allArrived(t.arrived) {
			continue
		}
		for _, old := range h.tracked[:i] {
			h.out = append(h.out, Abort{Checkpoint: old.barrier.ID, Reason: fmt.Sprintf("subsumed by checkpoint %d", t.barrier.ID)})
		}
		h.out = append(h.out, TakeSnapshot{Barrier: t.barrier, StartDelay: startDelay(t.barrier, t.firstAt), Alignment: now.Sub(t.firstAt)})
		h.tracked = slices.Delete(h.tracked, 0, i+1)
		return true
	}
	return false
}

func (h *BarrierHandler) complete(now time.Time) {
	h.out = append(h.out, TakeSnapshot{Barrier: h.barrier, StartDelay: startDelay(h.barrier, h.firstAt), Alignment: now.Sub(h.firstAt)})
	h.pending = 0
	h.unblockAll()
}

func (h *BarrierHandler) release(reason string) {
	h.out = append(h.out, Abort{Checkpoint: h.pending, Reason: reason})
	h.pending, h.unaligned = 0, false
	h.unblockAll()
}

func (h *BarrierHandler) unblockAll() {
	for i := range h.blocked {
		if h.blocked[i] {
			h.out = append(h.out, Unblock{Input: i})
		}
		h.blocked[i], h.arrived[i] = false, false
	}
	h.blockedN = 0
}

func (h *BarrierHandler) allArrived(arrived []bool) bool {
	for i := range arrived {
		if !arrived[i] && !h.ended[i] {
			return false
		}
	}
	return true
}

func (h *BarrierHandler) progress(arrived []bool) (have, waiting []int) {
	for i := range arrived {
		switch {
		case arrived[i]:
			have = append(have, i)
		case !h.ended[i]:
			waiting = append(waiting, i)
		}
	}
	return have, waiting
}

func startDelay(b Barrier, first time.Time) time.Duration {
	if b.Timestamp == 0 {
		return 0
	}
	return max(0, first.Sub(time.Unix(0, b.Timestamp)))
}
