package runtime

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/config"
)

// TestUnalignedScenarios runs the transcripts of testdata/unaligned: the
// barrier handler's unaligned and timed-out alignments, and a channel's
// overtaking by an unaligned barrier.
//
// Handler commands: "handler inputs=N" (EXACTLY_ONCE), "barrier in=I id=N
// [unaligned] [timeout=MS]" (triggered at time 0), "at ms=T" (the time of
// what follows), "timeout id=N", "end in=I", "abort id=N". Channel
// commands: "channel cap=N", "send" with rec=V, wm=T, end-of-data or
// barrier=N, "overtake id=N [sealed]", "seal", "promote id=N", "recv".
// Consumer commands (a subtask's input side: its gate, barrier handler
// and the channel state it collects; see consumerScenario) start with
// "consumer inputs=N".
func TestUnalignedScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/unaligned", func(t *testing.T, path string) {
		var h *BarrierHandler
		var c *channel
		var cs *consumerScenario
		now := time.Unix(1000, 0)
		start := now
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			arg := func(k string) int {
				var v int
				d.ScanArgs(t, k, &v)
				return v
			}
			switch d.Cmd {
			case "handler":
				h = NewBarrierHandler(arg("inputs"), config.ExactlyOnce)
				return "ok"
			case "at":
				now = start.Add(time.Duration(arg("ms")) * time.Millisecond)
				return "ok"
			case "barrier":
				b := Barrier{ID: int64(arg("id")), Timestamp: start.UnixNano(), Unaligned: d.HasArg("unaligned")}
				if d.HasArg("timeout") {
					b.AlignedTimeout = time.Duration(arg("timeout")) * time.Millisecond
				}
				return formatEvents(h.OnBarrier(arg("in"), b, now))
			case "timeout":
				return formatEvents(h.Timeout(int64(arg("id")), now))
			case "end":
				return formatEvents(h.OnEndOfInput(arg("in"), now))
			case "abort":
				return formatEvents(h.Abort(int64(arg("id")), "aborted by the coordinator"))
			case "channel":
				c = newChannel(arg("cap"), make(chan struct{}, 1))
				return "ok"
			case "send":
				var m message
				switch {
				case d.HasArg("rec"):
					v := arg("rec")
					m = message{kind: msgData, data: []Rec[int]{{V: v}}, n: 1}
				case d.HasArg("wm"):
					m = message{kind: msgWatermark, wm: int64(arg("wm"))}
				case d.HasArg("barrier"):
					m = message{kind: msgBarrier, barrier: Barrier{ID: int64(arg("barrier")), AlignedTimeout: time.Second}}
				case d.HasArg("end-of-data"):
					m = message{kind: msgEndOfData}
				}
				if c.capture == nil && c.n >= c.capacity {
					return "full: the producer would wait"
				}
				if err := c.send(t.Context(), m, nil); err != nil {
					return err.Error()
				}
				return formatQueue(c)
			case "overtake":
				att := c.overtake(message{kind: msgBarrier, barrier: Barrier{ID: int64(arg("id")), Unaligned: true}}, d.HasArg("sealed"))
				return fmt.Sprintf("%s\nchannel state: %s", formatQueue(c), formatMessages(att.msgs))
			case "seal":
				att := c.capture
				c.seal()
				return "channel state: " + formatMessages(att.msgs)
			case "promote":
				if !c.promote(int64(arg("id"))) {
					return "not queued"
				}
				return formatQueue(c)
			case "recv":
				m, ok := c.tryRecv()
				if !ok {
					return "empty"
				}
				s := formatMessage(m)
				if m.inflight != nil {
					select {
					case <-m.inflight.sealed:
						s += " carrying " + formatMessages(m.inflight.msgs)
					default:
						s += " carrying (still capturing)"
					}
				}
				return s
			}
			if cs == nil || d.Cmd == "consumer" {
				cs = &consumerScenario{}
			}
			if out, ok := cs.run(t, d, now); ok {
				return out
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func formatEvents(evs []BarrierEvent) string {
	if len(evs) == 0 {
		return "(nothing)"
	}
	var lines []string
	for _, ev := range evs {
		switch ev := ev.(type) {
		case Block:
			lines = append(lines, fmt.Sprintf("block in=%d ckpt=%d waiting=%v", ev.Input, ev.Checkpoint, ev.Waiting))
		case Unblock:
			lines = append(lines, fmt.Sprintf("unblock in=%d", ev.Input))
		case TakeSnapshot:
			s := fmt.Sprintf("snapshot ckpt=%d", ev.Barrier.ID)
			if ev.Unaligned {
				s += fmt.Sprintf(" unaligned capture=%v alignment=%s", ev.Capture, ev.Alignment)
			}
			lines = append(lines, s)
		case EndCapture:
			lines = append(lines, fmt.Sprintf("end-capture in=%d ckpt=%d", ev.Input, ev.Checkpoint))
		case CaptureComplete:
			lines = append(lines, fmt.Sprintf("capture-complete ckpt=%d", ev.Checkpoint))
		case Abort:
			lines = append(lines, fmt.Sprintf("abort ckpt=%d: %s", ev.Checkpoint, ev.Reason))
		case Ignore:
			lines = append(lines, fmt.Sprintf("ignore in=%d barrier=%d: %s", ev.Input, ev.Barrier, ev.Reason))
		default:
			lines = append(lines, fmt.Sprintf("%T", ev))
		}
	}
	return strings.Join(lines, "\n")
}

func formatMessage(m message) string {
	switch m.kind {
	case msgData:
		recs := m.data.([]Rec[int])[m.from:m.n]
		vs := make([]string, len(recs))
		for i, r := range recs {
			vs[i] = fmt.Sprint(r.V)
		}
		return "rec=" + strings.Join(vs, ",")
	case msgWatermark:
		return fmt.Sprintf("wm=%d", m.wm)
	case msgBarrier:
		if m.barrier.Unaligned {
			return fmt.Sprintf("unaligned-barrier=%d", m.barrier.ID)
		}
		return fmt.Sprintf("barrier=%d", m.barrier.ID)
	case msgEndOfData:
		return "end-of-data"
	case msgEnd:
		return "end"
	}
	return fmt.Sprintf("kind=%d", m.kind)
}

func formatMessages(ms []message) string {
	if len(ms) == 0 {
		return "[]"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = formatMessage(m)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func formatQueue(c *channel) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := make([]string, c.n)
	for i := range c.n {
		parts[i] = formatMessage(*c.at(i))
	}
	return "queue: [" + strings.Join(parts, " ") + "]"
}

// consumerScenario is a consuming subtask's input side as the task runs
// it: an input gate (channels of ample capacity, and the channel state
// restored for them), a barrier handler (EXACTLY_ONCE), and the channel
// state of the unaligned checkpoint it collects, fed the handler's events
// as Task.onBarrierEvents feeds them.
//
// Commands: "consumer inputs=N"; "restored in=I" with rec=V or wm=T (the
// restored channel state of input I, read before anything it brings);
// "deliver in=I" with rec=V, recs=(V,...), wm=T, barrier=N [timeout=MS]
// or end (the producer queues it); "producer-overtake in=I id=N
// [capturing]" (the
// producer's unaligned barrier overtakes input I's queue; with capturing
// the producer has not snapshotted yet); "producer-seal in=I" (it has);
// "urgent" (the task's urgent path: unaligned barriers at the front of
// the readable inputs); "poll" (the next message the task reads; a batch
// is held as the unit of work in progress); "process [stop-at=K]" (the
// batch in progress returns, with stop-at interrupted before record K by
// the snapshot an unaligned barrier deferred: the rest is that snapshot's
// channel state); "alignment-timeout id=N" (the aligned-checkpoint
// timeout of checkpoint N may have passed); "coordinator-abort id=N";
// "fail"; "state" (the channel
// state of the
// latest unaligned checkpoint).
type consumerScenario struct {
	h    *BarrierHandler
	g    *inputGate
	cur  *unalignedCheckpoint // capturing
	last *unalignedCheckpoint // the latest unaligned checkpoint started
	// held is the batch in progress, read from input heldCh.
	held   *message
	heldCh int
}

func (s *consumerScenario) run(t *testing.T, d *datadriven.TestData, now time.Time) (string, bool) {
	arg := func(k string) int {
		var v int
		d.ScanArgs(t, k, &v)
		return v
	}
	if d.Cmd != "consumer" && s.g == nil {
		switch d.Cmd {
		case "restored", "deliver", "producer-overtake", "producer-seal", "urgent", "poll", "process", "alignment-timeout", "coordinator-abort", "fail", "state":
			d.Fatalf(t, "%s before consumer", d.Cmd)
		}
		return "", false
	}
	switch d.Cmd {
	case "consumer":
		n := arg("inputs")
		s.h = NewBarrierHandler(n, config.ExactlyOnce)
		s.g = &inputGate{notify: make(chan struct{}, 1)}
		for range n {
			s.g.chans = append(s.g.chans, newChannel(64, s.g.notify))
		}
		return "ok", true
	case "restored":
		if s.g.replay == nil {
			s.g.replay = make([][]message, len(s.g.chans))
		}
		in := arg("in")
		s.g.replay[in] = append(s.g.replay[in], s.message(t, d))
		return fmt.Sprintf("in=%d restored: %s", in, formatMessages(s.g.replay[in])), true
	case "deliver":
		in := arg("in")
		s.g.chans[in].pushAnyway(s.message(t, d))
		return formatQueue(s.g.chans[in]), true
	case "producer-overtake":
		in := arg("in")
		att := s.g.chans[in].overtake(message{kind: msgBarrier, barrier: Barrier{ID: int64(arg("id")), Unaligned: true}}, !d.HasArg("capturing"))
		return fmt.Sprintf("%s\ncarrying: %s", formatQueue(s.g.chans[in]), formatMessages(att.msgs)), true
	case "producer-seal":
		s.g.chans[arg("in")].seal()
		return "ok", true
	case "urgent":
		var lines []string
		for ch := range s.g.chans {
			if s.h.Blocked(ch) {
				continue
			}
			m, ok := s.g.recvUrgent(ch)
			if !ok {
				continue
			}
			lines = append(lines, fmt.Sprintf("in=%d %s", ch, formatMessage(m)))
			lines = append(lines, s.apply(s.h.OnBarrier(ch, m.barrier, now), ch, m.inflight))
		}
		if len(lines) == 0 {
			return "no unaligned barrier to take", true
		}
		return strings.Join(lines, "\n"), true
	case "poll":
		out := s.finishHeld(-1)
		ch, m, ok := s.g.poll(s.h.Blocked)
		if !ok {
			return out + "nothing to read", true
		}
		out += fmt.Sprintf("in=%d %s", ch, formatMessage(m))
		if s.cur.read(ch, &m) {
			out += fmt.Sprintf(" (channel state of checkpoint %d)", s.cur.id)
		}
		switch m.kind {
		case msgData:
			s.held, s.heldCh = &m, ch
			out += " (in progress)"
		case msgBarrier:
			out += "\n" + s.apply(s.h.OnBarrier(ch, m.barrier, now), ch, m.inflight)
		case msgEnd:
			out += "\n" + s.apply(s.h.OnEndOfInput(ch, now), ch, nil)
		}
		return out, true
	case "process":
		stop := -1
		if d.HasArg("stop-at") {
			stop = arg("stop-at")
		}
		if s.held == nil {
			d.Fatalf(t, "process with no batch in progress")
		}
		return strings.TrimSuffix(s.finishHeld(stop), "\n"), true
	case "alignment-timeout":
		return s.apply(s.h.Timeout(int64(arg("id")), now), -1, nil), true
	case "coordinator-abort":
		return s.apply(s.h.Abort(int64(arg("id")), "aborted by the coordinator"), -1, nil), true
	case "fail":
		return s.apply(s.h.Fail("the subtask failed"), -1, nil), true
	case "state":
		return s.state(), true
	}
	return "", false
}

// finishHeld ends the batch in progress, interrupted before record stop
// if stop >= 0.
func (s *consumerScenario) finishHeld(stop int) string {
	if s.held == nil {
		return ""
	}
	m := *s.held
	s.held = nil
	if stop < 0 || stop >= m.n {
		return fmt.Sprintf("processed %s\n", formatMessage(m))
	}
	done := m
	done.n = stop
	s.last.rest(s.heldCh, m, stop)
	m.from = stop
	return fmt.Sprintf("processed %s; %s is channel state of checkpoint %d\n", formatMessage(done), formatMessage(m), s.last.id)
}

// apply feeds the handler's events to the channel state as the task does.
func (s *consumerScenario) apply(evs []BarrierEvent, ch int, att *inflight) string {
	out := formatEvents(evs)
	for _, ev := range evs {
		if ts, ok := ev.(TakeSnapshot); ok && ts.Unaligned {
			s.last = newUnalignedCheckpoint(ts.Barrier.ID, len(s.g.chans), ts.Capture, ch, att)
			if s.last.capturing() {
				s.cur = s.last
			}
			continue
		}
		s.cur = s.cur.onEvent(ev, ch, att)
	}
	return out
}

func (s *consumerScenario) message(t *testing.T, d *datadriven.TestData) message {
	var v int
	switch {
	case d.HasArg("recs"):
		var vs []int
		d.ScanArgs(t, "recs", &vs)
		recs := make([]Rec[int], len(vs))
		for i, v := range vs {
			recs[i] = Rec[int]{V: v}
		}
		return message{kind: msgData, data: recs, n: len(recs)}
	case d.HasArg("rec"):
		d.ScanArgs(t, "rec", &v)
		return message{kind: msgData, data: []Rec[int]{{V: v}}, n: 1}
	case d.HasArg("wm"):
		d.ScanArgs(t, "wm", &v)
		return message{kind: msgWatermark, wm: int64(v)}
	case d.HasArg("barrier"):
		d.ScanArgs(t, "barrier", &v)
		b := Barrier{ID: int64(v)}
		if d.HasArg("timeout") {
			var ms int
			d.ScanArgs(t, "timeout", &ms)
			b.AlignedTimeout = time.Duration(ms) * time.Millisecond
			b.Timestamp = time.Unix(1000, 0).UnixNano()
		}
		return message{kind: msgBarrier, barrier: b}
	case d.HasArg("end"):
		return message{kind: msgEnd}
	}
	d.Fatalf(t, "%s: no message", d.Cmd)
	return message{}
}

func (s *consumerScenario) state() string {
	uc := s.last
	if uc == nil {
		return "no unaligned checkpoint"
	}
	status := "complete"
	select {
	case <-uc.abort:
		status = "given up: nothing is persisted"
	default:
		if uc.capturing() {
			status = "capturing"
		}
	}
	lines := []string{fmt.Sprintf("checkpoint %d: %s", uc.id, status)}
	for ch, ic := range uc.chans {
		if ic == nil {
			continue
		}
		l := fmt.Sprintf("in=%d: %s", ch, formatMessages(uc.state(ch)))
		if ic.open {
			l += " (open)"
		}
		if ic.att != nil {
			select {
			case <-ic.att.sealed:
			default:
				l += " (the producer has not sealed what its barrier carries)"
			}
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}
