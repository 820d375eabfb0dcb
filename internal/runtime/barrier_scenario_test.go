package runtime

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/mini"
)

// TestAlignmentScenariosAgainstMini runs the reference processor's
// alignment transcripts (mini/testdata/align) against the engine's
// BarrierHandler and WatermarkValve: the same arrivals must lead to the same
// steps. The harness plays the input gate: an arrival on a blocked input
// stays queued in its channel, and once inputs unblock, the queued
// elements are read in arrival order.
//
// The transcripts are mini's, the oracle's: this test reads them and never
// writes them, so -rewrite here is refused (rewrite them in ./mini).
func TestAlignmentScenariosAgainstMini(t *testing.T) {
	if f := flag.Lookup("rewrite"); f != nil && f.Value.String() == "true" {
		t.Fatal("the alignment transcripts belong to mini, the oracle: regenerate them with go test ./mini -rewrite, never from the engine")
	}
	datadriven.Walk(t, "../../mini/testdata/align", func(t *testing.T, path string) {
		var g *gateHarness
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		datadriven.RunTestFromString(t, string(b), func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "task":
				var inputs []string
				d.ScanArgs(t, "inputs", &inputs)
				mode := config.ExactlyOnce
				if d.HasArg("mode") {
					var m string
					d.ScanArgs(t, "mode", &m)
					if m == "at-least-once" {
						mode = config.AtLeastOnce
					}
				}
				g = newGateHarness(inputs, mode)
				return "ok"
			case "recv":
				in := slices.Index(g.names, d.CmdArgs[0].Key)
				fields := make([]string, 0, len(d.CmdArgs)-1)
				for _, a := range d.CmdArgs[1:] {
					fields = append(fields, a.String())
				}
				e, err := mini.ParseElement(fields)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				return g.recv(in, e)
			case "abort":
				id, _ := strconv.ParseInt(d.CmdArgs[0].Key, 10, 64)
				reason := "cancelled by the coordinator"
				if d.HasArg("reason") {
					d.ScanArgs(t, "reason", &reason)
				}
				g.handle(g.h.Abort(id, reason))
				g.drain()
				return g.flush()
			case "fail":
				return g.fail()
			case "state":
				return mini.FormatState(g.sums)
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

type queued struct {
	seq   int
	input int
	elem  mini.Element
}

type gateHarness struct {
	names     []string
	h         *BarrierHandler
	valve     *WatermarkValve
	queue     []queued
	seq       int
	live      int
	sums      map[string]int64
	snapshots map[int64]map[string]int64
	lastSnap  int64
	lines     []string
	now       time.Time
}

func newGateHarness(names []string, mode config.CheckpointingMode) *gateHarness {
	return &gateHarness{
		names:     names,
		h:         NewBarrierHandler(len(names), mode),
		valve:     NewWatermarkValve(len(names)),
		live:      len(names),
		sums:      map[string]int64{},
		snapshots: map[int64]map[string]int64{},
		now:       time.Unix(1000, 0),
	}
}

func (g *gateHarness) printf(format string, args ...any) {
	g.lines = append(g.lines, fmt.Sprintf(format, args...))
}

func (g *gateHarness) flush() string {
	if len(g.lines) == 0 {
		return "(nothing)"
	}
	s := strings.Join(g.lines, "\n")
	g.lines = nil
	return s
}

func (g *gateHarness) recv(in int, e mini.Element) string {
	g.seq++
	if g.h.Blocked(in) || slices.ContainsFunc(g.queue, func(q queued) bool { return q.input == in }) {
		g.queue = append(g.queue, queued{g.seq, in, e})
		g.printf("hold %s %v (%d held)", g.names[in], e, len(g.queue))
		return g.flush()
	}
	g.process(in, e)
	g.drain()
	return g.flush()
}

// drain reads queued elements of unblocked inputs, earliest first.
func (g *gateHarness) drain() {
	for {
		i := slices.IndexFunc(g.queue, func(q queued) bool { return !g.h.Blocked(q.input) })
		if i < 0 {
			return
		}
		q := g.queue[i]
		g.queue = slices.Delete(g.queue, i, i+1)
		g.process(q.input, q.elem)
	}
}

func (g *gateHarness) process(in int, e mini.Element) {
	g.now = g.now.Add(time.Millisecond)
	name := g.names[in]
	switch e := e.(type) {
	case mini.Event:
		g.sums[e.Key] += e.Value
		g.printf("process %s %v -> %s=%d", name, e, e.Key, g.sums[e.Key])
	case mini.Watermark:
		g.printf("watermark %s=%d", name, e.Timestamp)
		if wm, ok := g.valve.OnWatermark(in, e.Timestamp); ok {
			g.printf("forward watermark=%d", wm)
		}
	case mini.Barrier:
		g.handle(g.h.OnBarrier(in, Barrier{ID: e.ID}, g.now))
	case mini.EndOfInput:
		g.printf("end %s", name)
		g.live--
		if g.live == 0 {
			g.printf("forward end")
		} else if wm, ok := g.valve.OnEnd(in); ok {
			g.printf("forward watermark=%d", wm)
		}
		g.handle(g.h.OnEndOfInput(in, g.now))
	}
}

func (g *gateHarness) set(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = g.names[id]
	}
	return "{" + strings.Join(s, ",") + "}"
}

func (g *gateHarness) handle(events []BarrierEvent) {
	for _, ev := range events {
		switch ev := ev.(type) {
		case Block:
			g.printf("block %s (checkpoint %d: have %s, waiting for %s)", g.names[ev.Input], ev.Checkpoint, g.set(ev.Have), g.set(ev.Waiting))
		case BarrierSeen:
			g.printf("barrier %s (checkpoint %d: have %s, waiting for %s)", g.names[ev.Input], ev.Checkpoint, g.set(ev.Have), g.set(ev.Waiting))
		case TakeSnapshot:
			id := ev.Barrier.ID
			g.snapshots[id] = maps.Clone(g.sums)
			g.lastSnap = id
			g.printf("forward barrier=%d", id)
			g.printf("snapshot %d %s", id, mini.FormatState(g.sums))
		case Unblock:
			g.printf("unblock %s", g.names[ev.Input])
		case Abort:
			g.printf("abort %d (%s)", ev.Checkpoint, ev.Reason)
		case Ignore:
			g.printf("ignore %s barrier=%d (%s)", g.names[ev.Input], ev.Barrier, ev.Reason)
		}
	}
}

func (g *gateHarness) fail() string {
	for _, ev := range g.h.Fail("task failed") {
		if a, ok := ev.(Abort); ok {
			g.printf("abort %d (%s)", a.Checkpoint, a.Reason)
		}
	}
	for _, q := range g.queue {
		g.printf("drop %s %v (replayed after restore)", g.names[q.input], q.elem)
	}
	mode := g.h.mode
	snaps, last, lines := g.snapshots, g.lastSnap, g.lines
	*g = *newGateHarness(g.names, mode)
	g.snapshots, g.lastSnap, g.lines = snaps, last, lines
	g.sums = maps.Clone(snaps[last])
	if g.sums == nil {
		g.sums = map[string]int64{}
	}
	g.printf("restore %d %s", last, mini.FormatState(g.sums))
	return g.flush()
}
