package runtime

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/internal/checkpoint"
)

// TestSplitEnumeratorScenarios runs the transcripts in
// testdata/enumerator against a SplitEnumerator.
//
//	init parallelism=
//	restore id= parallelism= [splits=(split:subtask, ...)]
//	discover split...              a listing of the source's splits
//	checkpoint id=                 checkpoint id is triggered
//	state id=                      the assignment checkpoint id records
//	restart subtask= [from=]       the subtask is redeployed from checkpoint from
//	owned                          every subtask's splits, and which are late
//
// After every command the harness checks that each discovered split is
// owned by exactly one subtask.
func TestSplitEnumeratorScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/enumerator", func(t *testing.T, path string) {
		var e *SplitEnumerator
		var par int
		seen := map[string]bool{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "init" && e == nil {
				d.Fatalf(t, "%s before init", d.Cmd)
			}
			out := run(t, d, &e, &par, seen)
			owners := map[string]int{}
			for k := range par {
				for _, s := range e.Owned(k) {
					if prev, dup := owners[s]; dup {
						d.Fatalf(t, "split %s is owned by subtasks %d and %d", s, prev, k)
					}
					owners[s] = k
				}
			}
			for s := range seen {
				if _, ok := owners[s]; !ok && e.Listed() {
					d.Fatalf(t, "split %s was discovered but nobody owns it", s)
				}
			}
			return out
		})
	})
}

func run(t *testing.T, d *datadriven.TestData, e **SplitEnumerator, par *int, seen map[string]bool) string {
	switch d.Cmd {
	case "init":
		d.ScanArgs(t, "parallelism", par)
		*e = NewSplitEnumerator(*par)
		clear(seen)
		return "ok"
	case "restore":
		var id int64
		var p int
		d.ScanArgs(t, "id", &id)
		d.ScanArgs(t, "parallelism", &p)
		var as []checkpoint.AssignedSplit
		if d.HasArg("splits") {
			var pairs []string
			d.ScanArgs(t, "splits", &pairs)
			for _, pair := range pairs {
				split, sub, ok := strings.Cut(pair, ":")
				n, err := strconv.Atoi(sub)
				if !ok || err != nil {
					d.Fatalf(t, "bad split %q, want split:subtask", pair)
				}
				as = append(as, checkpoint.AssignedSplit{Split: split, Subtask: n})
			}
		}
		(*e).Restore(id, p, as)
		return "ok"
	case "discover":
		var ids []string
		for _, a := range d.CmdArgs {
			ids = append(ids, a.Key)
			seen[a.Key] = true
		}
		return formatAssigned((*e).Discovered(ids))
	case "checkpoint":
		var id int64
		d.ScanArgs(t, "id", &id)
		(*e).Snapshot(id)
		return formatState((*e).State(id))
	case "state":
		var id int64
		d.ScanArgs(t, "id", &id)
		return formatState((*e).State(id))
	case "restart":
		var k int
		var from int64
		d.ScanArgs(t, "subtask", &k)
		if d.HasArg("from") {
			d.ScanArgs(t, "from", &from)
		}
		restored, fresh := (*e).Restart(k, from)
		return fmt.Sprintf("subtask %d: restore [%s] from checkpoint %d; read [%s] from their start",
			k, strings.Join(restored, " "), from, strings.Join(fresh, " "))
	case "owned":
		var lines []string
		for k := range *par {
			line := fmt.Sprintf("subtask %d: [%s]", k, strings.Join((*e).Owned(k), " "))
			if late := (*e).Late(k); len(late) > 0 {
				line += fmt.Sprintf(", late [%s]", strings.Join(late, " "))
			}
			lines = append(lines, line)
		}
		return strings.Join(lines, "\n")
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func formatAssigned(as []SplitsAssigned) string {
	if len(as) == 0 {
		return "(nothing)"
	}
	lines := make([]string, len(as))
	for i, a := range as {
		lines[i] = fmt.Sprintf("assign [%s] to subtask %d", strings.Join(a.Splits, " "), a.Subtask)
		if len(a.Late) > 0 {
			lines[i] += fmt.Sprintf(", late [%s]", strings.Join(a.Late, " "))
		}
	}
	return strings.Join(lines, "\n")
}

func formatState(st []checkpoint.AssignedSplit) string {
	if len(st) == 0 {
		return "(no splits)"
	}
	parts := make([]string, len(st))
	for i, a := range st {
		parts[i] = fmt.Sprintf("%s:%d", a.Split, a.Subtask)
	}
	return strings.Join(parts, " ")
}
