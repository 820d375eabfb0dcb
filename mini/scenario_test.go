package mini

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/weirstream/weir/config"
)

// TestAlignmentScenarios runs the transcripts under testdata/align. Each
// file scripts arrivals on a task's input channels and lists, under each
// command, the steps the task takes. Commands:
//
//	task inputs=(a,b) mode=exactly-once|at-least-once
//	recv <input> <element>     element as ParseElement reads it
//	abort <id> [reason=...]    the coordinator aborts checkpoint id
//	fail                       the task fails and restores its newest snapshot
//	state                      the operator's current sums
//
// Run with -rewrite to regenerate the expectations, then review the diff.
func TestAlignmentScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/align", func(t *testing.T, path string) {
		var task *Task
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "task" && task == nil {
				d.Fatalf(t, "%s: the file must start with a task command", d.Pos)
			}
			switch d.Cmd {
			case "task":
				var inputs []string
				d.ScanArgs(t, "inputs", &inputs)
				mode := config.ExactlyOnce
				if d.HasArg("mode") {
					var m string
					d.ScanArgs(t, "mode", &m)
					switch m {
					case "exactly-once":
					case "at-least-once":
						mode = config.AtLeastOnce
					default:
						d.Fatalf(t, "unknown mode %q", m)
					}
				}
				task = NewTask(inputs, mode, ByKey)
				return "ok"
			case "recv":
				if len(d.CmdArgs) < 2 {
					d.Fatalf(t, "recv needs an input and an element")
				}
				in, ok := task.Input(d.CmdArgs[0].Key)
				if !ok {
					d.Fatalf(t, "unknown input %q", d.CmdArgs[0].Key)
				}
				fields := make([]string, 0, len(d.CmdArgs)-1)
				for _, a := range d.CmdArgs[1:] {
					fields = append(fields, a.String())
				}
				e, err := ParseElement(fields)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				return lines(task.Receive(in, e))
			case "abort":
				id, err := strconv.ParseInt(d.CmdArgs[0].Key, 10, 64)
				if err != nil {
					d.Fatalf(t, "abort: %v", err)
				}
				reason := "cancelled by the coordinator"
				if d.HasArg("reason") {
					d.ScanArgs(t, "reason", &reason)
				}
				return lines(task.Abort(id, reason))
			case "fail":
				return lines(task.Fail())
			case "state":
				return FormatState(task.State())
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func lines(ls []string) string {
	if len(ls) == 0 {
		return "(nothing)"
	}
	return strings.Join(ls, "\n")
}
