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
// barrier=N, "overtake id=N [sealed]", "promote id=N", "recv", "queue".
func TestUnalignedScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/unaligned", func(t *testing.T, path string) {
		var h *BarrierHandler
		var c *channel
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
		return fmt.Sprintf("rec=%d", m.data.([]Rec[int])[0].V)
	case msgWatermark:
		return fmt.Sprintf("wm=%d", m.wm)
	case msgBarrier:
		if m.barrier.Unaligned {
			return fmt.Sprintf("unaligned-barrier=%d", m.barrier.ID)
		}
		return fmt.Sprintf("barrier=%d", m.barrier.ID)
	case msgEndOfData:
		return "end-of-data"
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
