package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/checkpoint"
)

// Unaligned checkpoints, the task's part.
//
// An unaligned barrier goes to the front of each output channel at once,
// passing the records queued there (channel.overtake). What it passes
// travels with it as its channel state, and so does whatever the subtask
// sends until its own snapshot: the consumer, and only the consumer,
// persists a channel's state, so nothing in flight is persisted twice or
// not at all. A consumer persists, per input channel, what it read on the
// channel after its snapshot and before the channel's barrier, followed by
// the state the barrier brought. On restore that state is read before
// anything new the channel brings, records and watermarks in the order
// they were sent, so event time advances as it did before the failure.
//
// Urgent work is what must happen even while the subtask waits for space
// on a full output: an unaligned barrier at the front of an input, an
// unaligned trigger at a source, an aligned-checkpoint timeout. It never
// calls an operator; the snapshot it asks for is deferred until the unit of
// work in progress (a batch, a fetched item, a watermark, a mail) returns,
// and until then the output channels take what the subtask sends without
// waiting, as channel state. A record that emits many others, a burst of
// timers or a window's large result does not hold the barrier up. A batch
// stops between two records (the rest is channel state, read after the
// snapshot); a burst of event-time timers stops between two timers
// (ErrInterrupted): the snapshot records that timers up to the watermark
// are still due, they fire right after it, and a subtask restored from it
// fires them before reading anything. One record's or one timer's output
// is never split: it goes out without waiting, as channel state.

// deferredSnapshot is an unaligned snapshot whose barrier has gone out,
// to take when the unit of work in progress returns.
type deferredSnapshot struct {
	ev        TakeSnapshot
	uc        *unalignedCheckpoint
	processed int64 // bytes processed while aligning before it switched
}

// unalignedCheckpoint is a consumer's channel state for one unaligned
// checkpoint while it collects it.
type unalignedCheckpoint struct {
	id    int64
	chans []*inputCapture // by input channel; nil for none
	done  chan struct{}   // closed when every input's state is complete
	abort chan struct{}   // closed when the checkpoint is given up
}

// inputCapture is one input channel's state: what was read after the
// snapshot (msgs, while open) and then what its barrier brought (att).
type inputCapture struct {
	msgs []message
	open bool
	att  *inflight
}

func (t *Task) urgentSignal() <-chan struct{} { return t.urgent.signal }

// runUrgent runs the queued urgent work.
func (t *Task) runUrgent() error {
	for _, m := range t.urgent.take() {
		if err := m(); err != nil {
			return err
		}
	}
	return nil
}

func (t *Task) promoted(id int64) bool { return id != 0 && id == t.promotedID }

func (t *Task) beforeMarker() error { return t.afterUnit() }

// inputUrgent is an input channel's news that an unaligned barrier is at
// its front.
func (t *Task) inputUrgent() {
	if t.urgentQueued.CompareAndSwap(false, true) {
		t.urgent.post(t.takeUrgentBarriers)
	}
}

// takeUrgentBarriers takes the unaligned barriers at the front of the
// input channels that may be read, ahead of whatever else they hold.
func (t *Task) takeUrgentBarriers() error {
	t.urgentQueued.Store(false)
	for ch := range t.gate.chans {
		if t.handler.Blocked(ch) {
			continue
		}
		m, ok := t.gate.recvUrgent(ch)
		if !ok {
			continue
		}
		if err := t.onBarrier(ch, m); err != nil {
			return err
		}
	}
	return nil
}

// onBarrier hands barrier message m read from input ch to the handler.
func (t *Task) onBarrier(ch int, m message) error {
	b := m.barrier
	t.startAlignment(b.ID)
	if b.AlignedTimeout > 0 && b.ID > t.timeoutArmed {
		t.armAlignedTimeout(b)
	}
	return t.onBarrierEvents(t.handler.OnBarrier(ch, b, t.clock.Now()), ch, m.inflight)
}

// armAlignedTimeout schedules the switch of checkpoint b to unaligned once
// its aligned-checkpoint timeout has passed since the trigger.
func (t *Task) armAlignedTimeout(b Barrier) {
	t.timeoutArmed = b.ID
	at := time.Unix(0, b.Timestamp).Add(b.AlignedTimeout)
	pt := &pendingTimer{}
	pt.stop = t.clock.AfterFunc(max(at.Sub(t.clock.Now()), 0), func() {
		pt.fired.Store(true)
		t.urgent.post(func() error { return t.alignedTimedOut(b.ID) })
	})
	t.timers = append(t.timers, pt)
}

// armTrigger schedules the timeout of the aligned trigger b, whose mail
// may wait behind a unit of work blocked on a full output.
func (t *Task) armTrigger(b Barrier) {
	t.trigger = b
	if b.ID > t.timeoutArmed {
		t.armAlignedTimeout(b)
	}
}

// alignedTimedOut switches checkpoint id to unaligned where the subtask
// still aligns on it, moves its barrier to the front of the output and
// input channels (and of the network channels into them) where it is
// still queued behind records, and starts it unaligned if its trigger is
// still waiting.
func (t *Task) alignedTimedOut(id int64) error {
	if t.trigger.ID == id && t.started < id && !t.done {
		t.started = id
		b := t.trigger
		b.Unaligned, b.AlignedTimeout = true, 0
		delay := max(0, t.clock.Now().Sub(time.Unix(0, b.Timestamp)))
		return t.startUnaligned(TakeSnapshot{Barrier: b, StartDelay: delay, Unaligned: true}, -1, nil)
	}
	if t.handler != nil {
		if err := t.onBarrierEvents(t.handler.Timeout(id, t.clock.Now()), -1, nil); err != nil {
			return err
		}
	}
	if t.forwarding == id {
		t.promotedID = id
		for _, w := range t.writers {
			for _, c := range w.channels() {
				c.promote(id)
			}
		}
	}
	if t.gate != nil {
		// The barrier may also be on its way into this subtask: queued
		// in an input channel behind records, or, from another process,
		// received but not yet in the channel. It overtakes there too;
		// its producer snapshotted before sending it, so what it passes
		// is its channel state, as if the producer had promoted it.
		for _, c := range t.gate.chans {
			promoteInput(c, id)
		}
	}
	return nil
}

// promoteInput promotes the aligned barrier of checkpoint id on input
// channel c and on the network channel that feeds it, if any.
func promoteInput(c *channel, id int64) {
	if r := c.remote.Load(); r != nil {
		r.Promote(id)
	}
	c.promote(id)
}

// startUnaligned forwards the unaligned barrier of ev ahead of the
// subtask's output and starts collecting its input channels' state; the
// operators' snapshot follows when the unit of work in progress returns.
// ch is the input whose barrier started it (-1 for none) and att the
// channel state that barrier brought.
func (t *Task) startUnaligned(ev TakeSnapshot, ch int, att *inflight) error {
	b := ev.Barrier
	steps := len(t.chain.Operators) + 2
	if err := t.fault(t.ctx, FaultSite{Point: FaultSync, Checkpoint: b.ID, Steps: steps}); err != nil {
		return fmt.Errorf("checkpoint %d: %w", b.ID, err)
	}
	if t.deferred != nil {
		// A newer checkpoint subsumed the deferred one before its unit
		// ended: its barrier is out, its state never will be.
		if err := t.sealOutputs(); err != nil {
			return err
		}
	}
	for _, w := range t.writers {
		w.overtake(b)
	}
	var uc *unalignedCheckpoint
	if t.gate != nil {
		uc = newUnalignedCheckpoint(b.ID, len(t.gate.chans), ev.Capture, ch, att)
		if uc.capturing() {
			t.uc = uc
		}
	}
	t.deferred = &deferredSnapshot{ev: ev, uc: uc, processed: t.endAlignment(b.ID)}
	t.interrupt = true
	return nil
}

// newUnalignedCheckpoint starts collecting the channel state of the
// unaligned checkpoint id for a gate of n input channels: capture lists
// the inputs whose barrier is still to come, and the barrier that started
// it, if any, came on input ch (-1: none) bringing the channel state att.
// With nothing to capture the state is complete at once (every input
// delivered the barrier, or the subtask was triggered because its inputs
// have ended).
func newUnalignedCheckpoint(id int64, n int, capture []int, ch int, att *inflight) *unalignedCheckpoint {
	uc := &unalignedCheckpoint{id: id, chans: make([]*inputCapture, n), done: make(chan struct{}), abort: make(chan struct{})}
	for _, i := range capture {
		uc.chans[i] = &inputCapture{open: true}
	}
	if ch >= 0 && att != nil {
		uc.chans[ch] = &inputCapture{att: att}
	}
	if len(capture) == 0 {
		close(uc.done)
	}
	return uc
}

// capturing reports whether some input's channel state is still open.
func (uc *unalignedCheckpoint) capturing() bool {
	select {
	case <-uc.done:
		return false
	default:
		return true
	}
}

// onEvent applies the barrier handler's event ev to uc, the checkpoint
// whose input channels the consumer captures (nil: none), and returns
// what it captures afterwards: EndCapture closes an input's state (with
// att, what the barrier read from input ch brought), CaptureComplete
// completes the state and Abort gives it up. It is nil-safe and ignores
// events of other checkpoints.
func (uc *unalignedCheckpoint) onEvent(ev BarrierEvent, ch int, att *inflight) *unalignedCheckpoint {
	if uc == nil {
		return nil
	}
	switch ev := ev.(type) {
	case EndCapture:
		if ev.Checkpoint == uc.id {
			var a *inflight
			if ev.Input == ch {
				a = att
			}
			uc.end(ev.Input, a)
		}
	case CaptureComplete:
		if ev.Checkpoint == uc.id {
			close(uc.done)
			return nil
		}
	case Abort:
		if ev.Checkpoint == uc.id {
			close(uc.abort)
			return nil
		}
	}
	return uc
}

// rest records the records of batch m from index from on, read from input
// ch but not yet processed when the snapshot is taken, as the first of the
// input's channel state.
func (uc *unalignedCheckpoint) rest(ch int, m message, from int) {
	ic := uc.chans[ch]
	if ic == nil {
		ic = &inputCapture{}
		uc.chans[ch] = ic
	}
	m.from = from
	ic.msgs = append([]message{m}, ic.msgs...)
}

// read records m, read from input ch, as channel state if the input is
// being captured, and reports whether it was. uc may be nil.
func (uc *unalignedCheckpoint) read(ch int, m *message) bool {
	if uc == nil || !m.overtakable() {
		return false
	}
	ic := uc.chans[ch]
	if ic == nil || !ic.open {
		return false
	}
	m.pool = nil // kept as read until persisted
	ic.msgs = append(ic.msgs, *m)
	return true
}

// end closes input ch's capture: its barrier brought att (nil if it
// brought none, or the input ended).
func (uc *unalignedCheckpoint) end(ch int, att *inflight) {
	ic := uc.chans[ch]
	if ic == nil {
		ic = &inputCapture{}
		uc.chans[ch] = ic
	}
	ic.open, ic.att = false, att
}

// state returns input ch's channel state in the order it is persisted
// and replayed: what was read after the snapshot, then what the barrier
// brought. It is final once the capture is complete and att is sealed.
func (uc *unalignedCheckpoint) state(ch int) []message {
	ic := uc.chans[ch]
	if ic == nil {
		return nil
	}
	msgs := ic.msgs
	if ic.att != nil {
		msgs = append(msgs[:len(msgs):len(msgs)], ic.att.msgs...)
	}
	return msgs
}

// captureRest records the rest of batch m, from index from on, as input
// ch's channel state of the deferred snapshot (see unalignedCheckpoint.rest).
func (t *Task) captureRest(ch int, m message, from int) {
	if t.deferred == nil || t.deferred.uc == nil {
		return
	}
	t.deferred.uc.rest(ch, m, from)
}

// captureInput records m, read from input ch, as channel state if the
// input is being captured.
func (t *Task) captureInput(ch int, m *message) { t.uc.read(ch, m) }

// completeDeferred takes the deferred unaligned snapshot: the unit of work
// that was in progress when its barrier went out has returned.
func (t *Task) completeDeferred() error {
	d := t.deferred
	if d == nil {
		return nil
	}
	t.deferred, t.interrupt = nil, false
	b := d.ev.Barrier
	start := t.clock.Now()
	snaps, err := t.snapshotOperators(b)
	if serr := t.sealOutputs(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	return t.startWrite(b, snaps, checkpoint.SubtaskStats{
		SyncDuration:      t.clock.Now().Sub(start),
		AlignmentDuration: d.ev.Alignment,
		StartDelay:        d.ev.StartDelay,
		ProcessedBytes:    d.processed,
		Unaligned:         true,
	}, d.uc)
}

// sealOutputs ends the channel state the output channels collect: the
// records still batching in the writers, emitted before the snapshot, go
// into it first (a send while capturing does not wait).
func (t *Task) sealOutputs() error {
	var err error
	for _, w := range t.writers {
		if ferr := w.flush(); ferr != nil && err == nil {
			err = ferr
		}
		for _, c := range w.channels() {
			c.seal()
		}
	}
	return err
}

// afterUnit runs when a unit of work has returned.
func (t *Task) afterUnit() error {
	if t.deferred != nil {
		return t.completeDeferred()
	}
	return nil
}

// waitChannelState waits until uc's channel state is complete and sealed.
// It reports false if the checkpoint was given up or the subtask stops.
func (t *Task) waitChannelState(uc *unalignedCheckpoint) bool {
	select {
	case <-uc.done:
	case <-uc.abort:
		return false
	case <-t.exiting:
		return false
	case <-t.ctx.Done():
		return false
	}
	for _, ic := range uc.chans {
		if ic == nil || ic.att == nil {
			continue
		}
		select {
		case <-ic.att.sealed:
		case <-uc.abort:
			return false
		case <-t.exiting:
			return false
		case <-t.ctx.Done():
			return false
		}
	}
	return true
}

// Channel state encoding: uvarint version, uvarint channel count, then
// per channel its index, (from version 2) where it comes from — the
// producing vertex's uid as a uvarint length and bytes, the logical input
// it feeds as a uvarint and the producing subtask as a uvarint — its
// message count and the messages: a kind byte, then for records their
// count, byte length and bytes, for a watermark its value as a varint.
// Version 1 files, without the origin, are read at the parallelism they
// were written with.
const channelStateVersion = 2

// channelOrigin is where a channel of a channel state file comes from.
type channelOrigin struct {
	index int // among the writing subtask's input channels
	// from, input and subtask are the producing vertex's uid, the
	// logical input the channel feeds and the producing subtask; from is
	// "" in a version 1 file.
	from           string
	input, subtask int
}

// encodeChannelState encodes uc's channel state, nil if there is none.
func (t *Task) encodeChannelState(uc *unalignedCheckpoint) ([]byte, error) {
	var chans []int
	for i, ic := range uc.chans {
		if ic != nil && (len(ic.msgs) > 0 || (ic.att != nil && len(ic.att.msgs) > 0)) {
			chans = append(chans, i)
		}
	}
	if len(chans) == 0 {
		return nil, nil
	}
	buf := binary.AppendUvarint(nil, channelStateVersion)
	buf = binary.AppendUvarint(buf, uint64(len(chans)))
	var rec []byte
	for _, i := range chans {
		msgs := uc.state(i)
		e := t.gate.edges[i]
		buf = binary.AppendUvarint(buf, uint64(i))
		buf = binary.AppendUvarint(buf, uint64(len(e.From.UID)))
		buf = append(buf, e.From.UID...)
		buf = binary.AppendUvarint(buf, uint64(e.Input))
		buf = binary.AppendUvarint(buf, uint64(t.gate.froms[i]))
		buf = binary.AppendUvarint(buf, uint64(len(msgs)))
		for _, m := range msgs {
			buf = append(buf, byte(m.kind))
			switch m.kind {
			case msgData:
				bc, err := t.channelCodec(i)
				if err != nil {
					return nil, err
				}
				rec = bc.AppendBatch(rec[:0], m.data, m.from)
				buf = binary.AppendUvarint(buf, uint64(m.n-m.from))
				buf = binary.AppendUvarint(buf, uint64(len(rec)))
				buf = append(buf, rec...)
			case msgWatermark:
				buf = binary.AppendVarint(buf, m.wm)
			}
		}
	}
	return buf, nil
}

// channelCodec returns the codec of input channel i's records.
func (t *Task) channelCodec(i int) (BatchCodec, error) {
	if t.codecs[i] != nil {
		return t.codecs[i], nil
	}
	e := t.gate.edges[i]
	if e.Codec == nil {
		return nil, fmt.Errorf("records of edge %s→%s have no codec, and unaligned checkpoints persist them", e.From.Name, e.To.Name)
	}
	bc, err := e.Codec()
	if err != nil {
		return nil, fmt.Errorf("records of edge %s→%s cannot be persisted as channel state: %w", e.From.Name, e.To.Name, err)
	}
	t.codecs[i] = bc
	return bc, nil
}

var errChannelState = errors.New("runtime: corrupt channel state")

// walkChannelState calls fn for every message of a channel state file, in
// order, with its channel and, for records, their count and encoded bytes
// (m.data unset). It refuses anything but what encodeChannelState writes
// (or wrote, as version 1).
func walkChannelState(src []byte, fn func(ch channelOrigin, m message, recs []byte) error) error {
	p := src
	uv := func() (uint64, error) {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return 0, errChannelState
		}
		p = p[k:]
		return v, nil
	}
	version, err := uv()
	if err != nil {
		return err
	}
	if version < 1 || version > channelStateVersion {
		return fmt.Errorf("%w: version %d, this build reads 1 to %d", errChannelState, version, channelStateVersion)
	}
	count, err := uv()
	if err != nil {
		return err
	}
	for range count {
		ch, err := uv()
		if err != nil {
			return err
		}
		origin := channelOrigin{index: int(ch)}
		if version >= 2 {
			n, err := uv()
			if err != nil || n == 0 || n > uint64(len(p)) {
				return errChannelState
			}
			origin.from, p = string(p[:n]), p[n:]
			input, err := uv()
			if err != nil {
				return err
			}
			sub, err := uv()
			if err != nil || input > 1<<16 || sub > 1<<24 {
				return errChannelState
			}
			origin.input, origin.subtask = int(input), int(sub)
		}
		msgs, err := uv()
		if err != nil {
			return err
		}
		for range msgs {
			if len(p) == 0 {
				return errChannelState
			}
			m := message{kind: msgKind(p[0])}
			p = p[1:]
			var recs []byte
			switch m.kind {
			case msgData:
				n, err := uv()
				if err != nil {
					return err
				}
				size, err := uv()
				if err != nil || size > uint64(len(p)) {
					return errChannelState
				}
				m.n, recs, p = int(n), p[:size], p[size:]
			case msgWatermark:
				wm, k := binary.Varint(p)
				if k <= 0 {
					return errChannelState
				}
				m.wm, p = wm, p[k:]
			case msgIdle, msgActive:
			default:
				return fmt.Errorf("%w: message kind %d", errChannelState, m.kind)
			}
			if err := fn(origin, m, recs); err != nil {
				return err
			}
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d bytes left over", errChannelState, len(p))
	}
	return nil
}

// decodeChannelState decodes what encodeChannelState wrote into per-channel
// messages for a gate of n channels.
func (t *Task) decodeChannelState(src []byte, n int, into [][]message) error {
	return walkChannelState(src, func(o channelOrigin, m message, recs []byte) error {
		ch := o.index
		if ch >= n {
			return fmt.Errorf("%w: channel %d of %d", errChannelState, ch, n)
		}
		if m.kind == msgData {
			bc, err := t.channelCodec(ch)
			if err != nil {
				return err
			}
			data, used, err := bc.DecodeBatch(recs, m.n)
			if err != nil || used != len(recs) {
				return fmt.Errorf("%w: channel %d: %v", errChannelState, ch, err)
			}
			m.data = data
		}
		into[ch] = append(into[ch], m)
		return nil
	})
}

// restoreChannelState loads the channel state of the restored checkpoint
// into the input gate's replay, to be read before anything the channels
// bring.
func (t *Task) restoreChannelState() error {
	if t.restore == nil || t.gate == nil {
		return nil
	}
	md := t.restore.Metadata
	st, ok := md.Operator(t.vertex.UID)
	if !ok {
		return nil
	}
	var handles []checkpoint.StateHandle
	for _, s := range st.Subtasks {
		handles = append(handles, s.InputChannels...)
	}
	if len(handles) == 0 {
		return nil
	}
	if st.Parallelism != t.vertex.Parallelism || !t.sameUpstream(md) {
		return t.restoreRescaledChannelState(md, st)
	}
	if t.id.Subtask >= len(st.Subtasks) {
		return nil
	}
	replay := make([][]message, len(t.gate.chans))
	for i, h := range st.Subtasks[t.id.Subtask].InputChannels {
		if err := t.fault(t.ctx, FaultSite{Point: FaultRestoreChannels, Operator: t.vertex.UID, Checkpoint: md.CheckpointID, Step: i}); err != nil {
			return fmt.Errorf("restoring the channel state of checkpoint %d: %w", md.CheckpointID, err)
		}
		b, err := t.restore.Store.ReadState(t.ctx, h)
		if err != nil {
			return fmt.Errorf("reading the channel state of checkpoint %d: %w", md.CheckpointID, err)
		}
		if err := t.decodeChannelState(b, len(t.gate.chans), replay); err != nil {
			return connector.Permanent(fmt.Errorf("the channel state of checkpoint %d for %s: %w", md.CheckpointID, t.id, err))
		}
	}
	t.gate.replay = replay
	return nil
}

// restoreRescaledChannelState loads, at a parallelism (of the subtask's
// vertex or of one upstream) other than the checkpoint's, the records that
// were in flight into the vertex and belong to this subtask now: on a hash
// edge those of its key groups, on a forward, rebalance or rescale edge
// those of the old subtasks whose index is this one's modulo the
// parallelism, so that each record is replayed once in all. They are
// replayed on a channel of the edge they came by, before anything new.
// Watermarks and idleness in flight are dropped: the sources' watermarks
// after the restore regenerate event time. Records in flight on a
// broadcast edge cannot be placed (which old subtask's copy belongs to
// which new one is not defined), and a checkpoint holding some is refused.
func (t *Task) restoreRescaledChannelState(md *checkpoint.Metadata, st *checkpoint.OperatorState) error {
	p, self := t.vertex.Parallelism, t.id.Subtask
	maxPar := t.vertex.MaxParallelism
	// The first channel of each edge into the vertex, by producer and input.
	type edgeKey struct {
		from  string
		input int
	}
	first := map[edgeKey]int{}
	for i, e := range t.gate.edges {
		k := edgeKey{e.From.UID, e.Input}
		if _, ok := first[k]; !ok {
			first[k] = i
		}
	}
	replay := make([][]message, len(t.gate.chans))
	for old, sub := range st.Subtasks {
		for i, h := range sub.InputChannels {
			if err := t.fault(t.ctx, FaultSite{Point: FaultRestoreChannels, Operator: t.vertex.UID, Checkpoint: md.CheckpointID, Step: old*len(sub.InputChannels) + i}); err != nil {
				return fmt.Errorf("restoring the channel state of checkpoint %d: %w", md.CheckpointID, err)
			}
			b, err := t.restore.Store.ReadState(t.ctx, h)
			if err != nil {
				return fmt.Errorf("reading the channel state of checkpoint %d: %w", md.CheckpointID, err)
			}
			err = walkChannelState(b, func(o channelOrigin, m message, recs []byte) error {
				if o.from == "" {
					return connector.Permanent(fmt.Errorf("checkpoint %d holds records in flight into %s in a format that does not say where they came from: restore it at the parallelism it was taken with", md.CheckpointID, t.vertex.Name))
				}
				ch, ok := first[edgeKey{o.from, o.input}]
				if !ok {
					return connector.Permanent(fmt.Errorf("checkpoint %d holds records in flight from %s into input %d of %s, which the job no longer has", md.CheckpointID, o.from, o.input, t.vertex.Name))
				}
				if m.kind != msgData {
					return nil // watermarks are regenerated after the replay
				}
				e := t.gate.edges[ch]
				if e.Partitioner == Broadcast {
					return connector.Permanent(fmt.Errorf("checkpoint %d holds records in flight on the broadcast edge %s→%s, which cannot be placed at a changed parallelism: restore it at the parallelism it was taken with, or from a savepoint", md.CheckpointID, e.From.Name, e.To.Name))
				}
				if e.Partitioner != Hash && old%p != self {
					return nil
				}
				bc, err := t.channelCodec(ch)
				if err != nil {
					return err
				}
				data, used, err := bc.DecodeBatch(recs, m.n)
				if err != nil || used != len(recs) {
					return connector.Permanent(fmt.Errorf("%w: channel state of checkpoint %d for %s[%d]: %v", errChannelState, md.CheckpointID, t.vertex.UID, old, err))
				}
				n := m.n
				if e.Partitioner == Hash {
					if e.SelectKeyGroups == nil {
						return fmt.Errorf("runtime: hash edge %s→%s cannot place its records by key group", e.From.Name, e.To.Name)
					}
					data, n = e.SelectKeyGroups(data, func(kg int) bool { return kg*p/maxPar == self })
				}
				if n > 0 {
					replay[ch] = append(replay[ch], message{kind: msgData, data: data, n: n})
				}
				return nil
			})
			if err != nil {
				if errors.Is(err, errChannelState) {
					return connector.Permanent(fmt.Errorf("the channel state of checkpoint %d for %s[%d]: %w", md.CheckpointID, t.vertex.UID, old, err))
				}
				return err
			}
		}
	}
	t.gate.replay = replay
	return nil
}

// channelStateName is the name of the channel state file of subtask of
// the chain whose head is uid.
func channelStateName(uid string, subtask int) string {
	return fmt.Sprintf("%s-%d-channels", uid, subtask)
}

// writeChannelState persists uc's channel state for checkpoint id and
// returns its handle (nil when nothing was in flight) and size.
func (t *Task) writeChannelState(id int64, uid string, uc *unalignedCheckpoint) (*checkpoint.StateHandle, error) {
	b, err := t.encodeChannelState(uc)
	if err != nil || b == nil {
		return nil, err
	}
	h, err := t.writeState(id, "", channelStateName(uid, t.id.Subtask), false, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// ChannelStateSummary is what one input channel's persisted channel state
// holds.
type ChannelStateSummary struct {
	// Channel is the index among the subtask's input channels (see
	// InputChannels).
	Channel    int
	Records    int
	Watermarks int
	Bytes      int
}

// SummarizeChannelState counts what a channel state file (an
// InputChannels handle's bytes) holds per input channel, without decoding
// the records.
func SummarizeChannelState(b []byte) ([]ChannelStateSummary, error) {
	var out []ChannelStateSummary
	err := walkChannelState(b, func(o channelOrigin, m message, recs []byte) error {
		ch := o.index
		if len(out) == 0 || out[len(out)-1].Channel != ch {
			out = append(out, ChannelStateSummary{Channel: ch})
		}
		s := &out[len(out)-1]
		switch m.kind {
		case msgData:
			s.Records += m.n
			s.Bytes += len(recs)
		case msgWatermark:
			s.Watermarks++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// InputChannels returns the input channels of subtask of vertex v in g in
// the order the subtask indexes them (its channel state's channel
// numbers).
func (g *JobGraph) InputChannels(v *Vertex, subtask int) []GraphChannel {
	var out []GraphChannel
	for gc := range g.Channels() {
		if gc.Edge.To == v && gc.To == subtask {
			out = append(out, gc)
		}
	}
	return out
}
