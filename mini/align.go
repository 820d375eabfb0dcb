package mini

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weirstream/weir/config"
)

// Action is one instruction from a Handler to the task that owns it. The
// concrete types are Deliver, Hold, Block, BarrierSeen, Snapshot, Abort,
// Unblock, Ignore and Drop.
type Action interface{ action() }

// Deliver hands Elem, which arrived on Input, to the operator.
type Deliver struct {
	Input int
	Elem  Element
}

// Hold keeps Elem back because Input is blocked; Held is how many elements
// the handler now holds in all.
type Hold struct {
	Input int
	Elem  Element
	Held  int
}

// Block says that Input delivered the barrier of Checkpoint and is blocked
// until the inputs in Waiting deliver it too.
type Block struct {
	Input      int
	Checkpoint int64
	Have       []int
	Waiting    []int
}

// BarrierSeen is Block's at-least-once counterpart: the barrier is counted
// but Input keeps flowing.
type BarrierSeen struct {
	Input      int
	Checkpoint int64
	Have       []int
	Waiting    []int
}

// Snapshot says the barrier of Checkpoint has arrived on every input that
// has not ended. The task emits its pending output, forwards the barrier on
// every output and snapshots its state, in that order, before it takes any
// further action.
type Snapshot struct {
	Checkpoint int64
}

// Abort says the handler gave up Checkpoint: it was subsumed by a newer
// barrier, cancelled by the coordinator, or the task failed. No snapshot is
// taken for it.
type Abort struct {
	Checkpoint int64
	Reason     string
}

// Unblock releases Input; the elements held for it are delivered next, in
// the order they arrived.
type Unblock struct {
	Input int
}

// Ignore says a barrier for a checkpoint that is no longer pending (already
// completed, aborted or subsumed) arrived on Input and was dropped.
type Ignore struct {
	Input   int
	Barrier int64
	Reason  string
}

// Drop says a held element was discarded because the task failed; the
// source replays it after the restore.
type Drop struct {
	Input int
	Elem  Element
}

func (Deliver) action()     {}
func (Hold) action()        {}
func (Block) action()       {}
func (BarrierSeen) action() {}
func (Snapshot) action()    {}
func (Abort) action()       {}
func (Unblock) action()     {}
func (Ignore) action()      {}
func (Drop) action()        {}

type heldElem struct {
	input int
	elem  Element
}

// Handler is the barrier handler of a task with several input channels: a
// deterministic state machine between the input gate and the operator. It
// receives every element with the input it arrived on and says, as Actions,
// what the task must do. It has no goroutines, clocks or I/O.
//
// Its mode is Flink's execution.checkpointing.mode, as config spells it;
// the zero value means EXACTLY_ONCE.
//
// In EXACTLY_ONCE mode it follows the four rules of aligned checkpoints:
//
//  1. When barrier n arrives on an input, that input is blocked: what it
//     delivers next is held back, because it belongs to checkpoint n+1.
//  2. When barrier n has arrived on the last input, the task emits its
//     pending output and forwards barrier n on all its outputs,
//  3. snapshots its state,
//  4. and resumes, delivering the held-back input first.
//
// The cases naive implementations get wrong are handled as Flink does: a
// newer barrier m arriving while n is aligning aborts n (subsumed) and starts
// aligning m; a barrier for a checkpoint no longer pending is ignored; an
// input that ends during alignment stops being waited for; an abort from the
// coordinator releases all held input in order; a failure drops held input,
// which the sources replay.
//
// In AT_LEAST_ONCE mode it counts barriers without blocking, as Flink's
// barrier tracker does: several checkpoints may be counted at once, and the
// one completed last subsumes the older ones still open.
type Handler struct {
	mode  config.CheckpointingMode
	last  int64 // highest checkpoint id started, completed or aborted
	ended []bool

	// EXACTLY_ONCE: the checkpoint being aligned (0 if none), which inputs
	// delivered its barrier, which are blocked, and what they hold.
	pending int64
	arrived []bool
	blocked []bool
	held    []heldElem

	// AT_LEAST_ONCE: the checkpoints whose barriers are being counted, in id
	// order. Several may be open at once, since a fast input runs ahead.
	tracked []tracked
}

type tracked struct {
	id      int64
	arrived []bool
}

// NewHandler returns a handler for inputs input channels, numbered from 0.
func NewHandler(inputs int, mode config.CheckpointingMode) *Handler {
	if inputs < 1 {
		panic(fmt.Sprintf("mini.NewHandler: inputs must be >= 1, got %d", inputs))
	}
	return &Handler{
		mode:    mode,
		arrived: make([]bool, inputs),
		blocked: make([]bool, inputs),
		ended:   make([]bool, inputs),
	}
}

// Pending returns the checkpoint being aligned (in AT_LEAST_ONCE mode the
// oldest one being counted), or 0.
func (h *Handler) Pending() int64 {
	if len(h.tracked) > 0 {
		return h.tracked[0].id
	}
	return h.pending
}

// Held returns the number of elements held back.
func (h *Handler) Held() int { return len(h.held) }

// Receive takes elem, arrived on input, and returns the actions it causes,
// in order. An element after EndOfInput on the same input is a protocol
// violation and panics.
func (h *Handler) Receive(input int, elem Element) []Action {
	if h.ended[input] {
		panic(fmt.Sprintf("mini.Handler: %v arrived on input %d after its end", elem, input))
	}
	if h.blocked[input] {
		h.held = append(h.held, heldElem{input, elem})
		return []Action{Hold{Input: input, Elem: elem, Held: len(h.held)}}
	}
	switch e := elem.(type) {
	case Barrier:
		if h.mode == config.AtLeastOnce {
			return h.countBarrier(input, e.ID)
		}
		return h.onBarrier(input, e.ID)
	case EndOfInput:
		h.ended[input] = true
		acts := []Action{Deliver{Input: input, Elem: elem}}
		if h.mode == config.AtLeastOnce {
			return append(acts, h.completeCounted()...)
		}
		if h.pending != 0 && h.allArrived(h.arrived) {
			acts = append(acts, h.complete()...)
		}
		return acts
	}
	return []Action{Deliver{Input: input, Elem: elem}}
}

func (h *Handler) onBarrier(input int, id int64) []Action {
	var acts []Action
	switch {
	case id == h.pending && h.arrived[input]:
		return []Action{Ignore{Input: input, Barrier: id, Reason: "duplicate barrier"}}
	case id != h.pending && id <= h.last:
		return []Action{Ignore{Input: input, Barrier: id, Reason: fmt.Sprintf("checkpoint %d is not pending", id)}}
	case h.pending != 0 && id > h.pending:
		acts = h.release(h.pending, fmt.Sprintf("subsumed by checkpoint %d", id))
	}
	if h.pending == 0 {
		h.pending, h.last = id, id
	}
	h.arrived[input] = true
	if h.allArrived(h.arrived) {
		return append(acts, h.complete()...)
	}
	have, waiting := h.progress(h.arrived)
	h.blocked[input] = true
	acts = append(acts, Block{Input: input, Checkpoint: id, Have: have, Waiting: waiting})
	return append(acts, h.drain()...)
}

// countBarrier is the at-least-once path, after Flink's barrier tracker:
// count barrier id on input without blocking; when every open input has
// delivered it, snapshot, and drop the older checkpoints still being
// counted (they can no longer complete before a newer one).
func (h *Handler) countBarrier(input int, id int64) []Action {
	i := slices.IndexFunc(h.tracked, func(t tracked) bool { return t.id == id })
	switch {
	case i >= 0 && h.tracked[i].arrived[input]:
		return []Action{Ignore{Input: input, Barrier: id, Reason: "duplicate barrier"}}
	case i < 0 && id <= h.last:
		return []Action{Ignore{Input: input, Barrier: id, Reason: fmt.Sprintf("checkpoint %d is not pending", id)}}
	case i < 0:
		h.last = id
		h.tracked = append(h.tracked, tracked{id: id, arrived: make([]bool, len(h.ended))})
		i = len(h.tracked) - 1
	}
	h.tracked[i].arrived[input] = true
	if acts := h.completeCounted(); len(acts) > 0 {
		return acts
	}
	have, waiting := h.progress(h.tracked[i].arrived)
	return []Action{BarrierSeen{Input: input, Checkpoint: id, Have: have, Waiting: waiting}}
}

// completeCounted snapshots the newest counted checkpoint whose barrier
// every open input has delivered, if any, aborting the older ones.
func (h *Handler) completeCounted() []Action {
	for i := len(h.tracked) - 1; i >= 0; i-- {
		if !h.allArrived(h.tracked[i].arrived) {
			continue
		}
		var acts []Action
		for _, old := range h.tracked[:i] {
			acts = append(acts, Abort{Checkpoint: old.id, Reason: fmt.Sprintf("subsumed by checkpoint %d", h.tracked[i].id)})
		}
		acts = append(acts, Snapshot{Checkpoint: h.tracked[i].id})
		h.tracked = slices.Delete(h.tracked, 0, i+1)
		return acts
	}
	return nil
}

// Abort is the coordinator's abort of checkpoint id (declined or timed out
// elsewhere). If id is being aligned, all held input is released in order.
// Barriers of id that arrive later are ignored.
func (h *Handler) Abort(id int64, reason string) []Action {
	h.last = max(h.last, id)
	if i := slices.IndexFunc(h.tracked, func(t tracked) bool { return t.id == id }); i >= 0 {
		h.tracked = slices.Delete(h.tracked, i, i+1)
		return []Action{Abort{Checkpoint: id, Reason: reason}}
	}
	if id != h.pending {
		return nil
	}
	return append(h.release(id, reason), h.drain()...)
}

// Fail models the task failing: the pending checkpoint is abandoned and the
// held elements are dropped (the sources replay them after the restore). The
// handler is then as new.
func (h *Handler) Fail() []Action {
	var acts []Action
	if h.pending != 0 {
		acts = append(acts, Abort{Checkpoint: h.pending, Reason: "task failed"})
	}
	for _, t := range h.tracked {
		acts = append(acts, Abort{Checkpoint: t.id, Reason: "task failed"})
	}
	for _, he := range h.held {
		acts = append(acts, Drop{Input: he.input, Elem: he.elem})
	}
	*h = *NewHandler(len(h.arrived), h.mode)
	return acts
}

// allArrived reports whether every input has delivered a barrier (arrived)
// or ended.
func (h *Handler) allArrived(arrived []bool) bool {
	for i := range arrived {
		if !arrived[i] && !h.ended[i] {
			return false
		}
	}
	return true
}

func (h *Handler) progress(arrived []bool) (have, waiting []int) {
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

// complete finishes the alignment of the pending checkpoint.
func (h *Handler) complete() []Action {
	acts := []Action{Snapshot{Checkpoint: h.pending}}
	h.pending = 0
	acts = append(acts, h.unblockAll()...)
	return append(acts, h.drain()...)
}

// release abandons the pending checkpoint and unblocks every input; the
// caller drains the held elements when it is ready.
func (h *Handler) release(id int64, reason string) []Action {
	acts := []Action{Abort{Checkpoint: id, Reason: reason}}
	h.pending = 0
	return append(acts, h.unblockAll()...)
}

func (h *Handler) unblockAll() []Action {
	var acts []Action
	for i := range h.blocked {
		if h.blocked[i] {
			acts = append(acts, Unblock{Input: i})
		}
		h.blocked[i] = false
		h.arrived[i] = false
	}
	return acts
}

// drain delivers held elements of unblocked inputs, earliest arrival first,
// until none is left that may flow. Delivering one may block its input again
// (a held barrier of the next checkpoint) or complete an alignment.
func (h *Handler) drain() []Action {
	var acts []Action
	for {
		i := slices.IndexFunc(h.held, func(he heldElem) bool { return !h.blocked[he.input] })
		if i < 0 {
			return acts
		}
		he := h.held[i]
		h.held = slices.Delete(h.held, i, i+1)
		acts = append(acts, h.Receive(he.input, he.elem)...)
	}
}

// FormatAction renders a as one transcript line, naming inputs by names.
func FormatAction(a Action, names []string) string {
	set := func(ids []int) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = names[id]
		}
		return "{" + strings.Join(s, ",") + "}"
	}
	switch a := a.(type) {
	case Deliver:
		return fmt.Sprintf("deliver %s %v", names[a.Input], a.Elem)
	case Hold:
		return fmt.Sprintf("hold %s %v (%d held)", names[a.Input], a.Elem, a.Held)
	case Block:
		return fmt.Sprintf("block %s (checkpoint %d: have %s, waiting for %s)", names[a.Input], a.Checkpoint, set(a.Have), set(a.Waiting))
	case BarrierSeen:
		return fmt.Sprintf("barrier %s (checkpoint %d: have %s, waiting for %s)", names[a.Input], a.Checkpoint, set(a.Have), set(a.Waiting))
	case Snapshot:
		return fmt.Sprintf("aligned %d", a.Checkpoint)
	case Abort:
		return fmt.Sprintf("abort %d (%s)", a.Checkpoint, a.Reason)
	case Unblock:
		return "unblock " + names[a.Input]
	case Ignore:
		return fmt.Sprintf("ignore %s barrier=%d (%s)", names[a.Input], a.Barrier, a.Reason)
	case Drop:
		return fmt.Sprintf("drop %s %v (replayed after restore)", names[a.Input], a.Elem)
	}
	panic(fmt.Sprintf("mini: unknown action %T", a))
}
