package runtime

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestDebloatScenarios runs the transcripts of testdata/debloat: the
// Debloater's limits for a sequence of samples, and a channel's admission
// under an in-flight limit.
//
// Debloater commands: "debloater channels=N target=D samples=N
// threshold=P ceiling=N" (prints the starting limit), "sample records=N
// busy=D" (one period's sample; prints the limit, and "changed" when it
// is new). Channel commands: "channel cap=N" (a channel of capacity N
// batches, no limit), "limit n=N" (the consumer sets the limit), "send"
// with recs=N (a batch of N records), barrier=N (an aligned barrier) or
// unaligned=N (an unaligned barrier overtaking the queue), "recv"; each
// prints the queue as batch sizes and barriers, the records queued and
// the most records an aligned barrier found ahead of it, or that the
// producer would wait.
func TestDebloatScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/debloat", func(t *testing.T, path string) {
		var d *Debloater
		var c *channel
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			intArg := func(k string) int {
				var v int
				td.ScanArgs(t, k, &v)
				return v
			}
			durArg := func(k string) time.Duration {
				var s string
				td.ScanArgs(t, k, &s)
				v, err := time.ParseDuration(s)
				if err != nil {
					td.Fatalf(t, "%s: %v", k, err)
				}
				return v
			}
			switch td.Cmd {
			case "debloater":
				o := DebloatOptions{Enabled: true, Target: durArg("target"), Samples: intArg("samples"), Threshold: intArg("threshold")}
				d = NewDebloater(o, intArg("channels"), int64(intArg("ceiling")))
				return fmt.Sprintf("limit=%d", d.Limit())
			case "sample":
				lim, changed := d.Observe(int64(intArg("records")), durArg("busy"))
				if changed {
					return fmt.Sprintf("limit=%d changed", lim)
				}
				return fmt.Sprintf("limit=%d", lim)
			case "channel":
				c = newChannel(intArg("cap"), make(chan struct{}, 1))
				return "ok"
			case "limit":
				c.setLimit(int64(intArg("n")))
				return formatLimited(c)
			case "send":
				var m message
				switch {
				case td.HasArg("recs"):
					m = message{kind: msgData, data: make([]Rec[int], intArg("recs")), n: intArg("recs")}
				case td.HasArg("barrier"):
					m = message{kind: msgBarrier, barrier: Barrier{ID: int64(intArg("barrier"))}}
				case td.HasArg("unaligned"):
					c.overtake(message{kind: msgBarrier, barrier: Barrier{ID: int64(intArg("unaligned")), Unaligned: true}}, true)
					return formatLimited(c)
				}
				if !c.trySend(m) {
					return "full: the producer would wait"
				}
				return formatLimited(c)
			case "recv":
				m, ok := c.tryRecv()
				if !ok {
					return "empty"
				}
				return "got " + formatSized(m) + "\n" + formatLimited(c)
			}
			td.Fatalf(t, "unknown command %q", td.Cmd)
			return ""
		})
	})
}

// formatSized formats a batch by its size, a barrier by its id.
func formatSized(m message) string {
	switch m.kind {
	case msgData:
		return fmt.Sprintf("%d", m.n)
	case msgBarrier:
		if m.barrier.Unaligned {
			return fmt.Sprintf("unaligned-barrier=%d", m.barrier.ID)
		}
		return fmt.Sprintf("barrier=%d", m.barrier.ID)
	}
	return formatMessage(m)
}

func formatLimited(c *channel) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := make([]string, c.n)
	for i := range c.n {
		parts[i] = formatSized(*c.at(i))
	}
	return fmt.Sprintf("queue: [%s] records=%d limit=%d ahead-max=%d", strings.Join(parts, " "), c.queued, c.limit.Load(), c.aheadMax.Load())
}
