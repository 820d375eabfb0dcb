package coordinator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
)

// TestScenarios runs the transcripts in testdata. Times are written as
// offsets from the start of the scenario (t=10.2s).
//
//	init [interval=] [initial-delay=] [min-pause=] [timeout=] [max-concurrent=]
//	     [tolerable=] [retained=] [history=] [mode=at-least-once] [unaligned]
//	     tasks=(...) sources=(...) [inputs=(task<in+in, ...)] [max-parallelism=(vertex:n, ...)]
//	start|restart|stop|tick t=
//	trigger t= [savepoint]
//	ack t= task= id= [size=] [shared=(name:size, ...)] [op=] [sync=] [async=]
//	    [align=] [delay=] [processed=] [persisted=] [unaligned]
//	decline t= task= id= [reason=] [msg=]
//	written t= id= [err=]
//	finish t= task=
//	restored t= id= [path=]
//	claimed id= [paths=(...)]
//	deadline | state | stats | details id= [vertex=] | json | json-task id= vertex=
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{t0: time.Unix(1_700_000_000, 0)}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

type harness struct {
	c  *Coordinator
	t0 time.Time
}

func (h *harness) at(t *testing.T, d *datadriven.TestData) time.Time {
	var s string
	d.ScanArgs(t, "t", &s)
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "t=%s: %v", s, err)
	}
	return h.t0.Add(dur)
}

func (h *harness) rel(ts time.Time) string { return ts.Sub(h.t0).String() }

func parseTask(t *testing.T, d *datadriven.TestData, s string) checkpoint.TaskID {
	i := strings.IndexByte(s, '[')
	if i < 0 || !strings.HasSuffix(s, "]") {
		d.Fatalf(t, "bad task %q, want vertex[subtask]", s)
	}
	n, err := strconv.Atoi(s[i+1 : len(s)-1])
	if err != nil {
		d.Fatalf(t, "bad task %q: %v", s, err)
	}
	return checkpoint.TaskID{Vertex: s[:i], Subtask: n}
}

func taskArg(t *testing.T, d *datadriven.TestData, key string) checkpoint.TaskID {
	var s string
	d.ScanArgs(t, key, &s)
	return parseTask(t, d, s)
}

func durArg(t *testing.T, d *datadriven.TestData, key string) (time.Duration, bool) {
	if !d.HasArg(key) {
		return 0, false
	}
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	return v, true
}

func intArg(t *testing.T, d *datadriven.TestData, key string) (int64, bool) {
	if !d.HasArg(key) {
		return 0, false
	}
	var v int64
	d.ScanArgs(t, key, &v)
	return v, true
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "init" && h.c == nil {
		d.Fatalf(t, "init first")
	}
	switch d.Cmd {
	case "init":
		return h.init(t, d)
	case "start":
		return h.outputs(h.c.Start(h.at(t, d)), nil)
	case "restart":
		return h.outputs(h.c.Restart(h.at(t, d)), nil)
	case "stop":
		return h.outputs(h.c.Stop(h.at(t, d)), nil)
	case "tick":
		return h.outputs(h.c.Tick(h.at(t, d)), nil)
	case "trigger":
		kind := checkpoint.KindCheckpoint
		if d.HasArg("savepoint") {
			kind = checkpoint.KindSavepoint
		}
		id, out, err := h.c.TriggerManual(h.at(t, d), kind)
		if err != nil {
			return h.outputs(out, fmt.Errorf("refused: %w", err))
		}
		return fmt.Sprintf("id %d\n%s", id, h.outputs(out, nil))
	case "ack":
		id, _ := intArg(t, d, "id")
		task := taskArg(t, d, "task")
		out, err := h.c.Ack(h.at(t, d), task, id, h.ack(t, d, task, id))
		return h.outputs(out, err)
	case "decline":
		id, _ := intArg(t, d, "id")
		var err error = ReasonDeclined
		if d.HasArg("reason") {
			var name string
			d.ScanArgs(t, "reason", &name)
			r, ok := ParseReason(name)
			if !ok {
				d.Fatalf(t, "unknown reason %q", name)
			}
			err = r
		}
		if d.HasArg("msg") {
			var msg string
			d.ScanArgs(t, "msg", &msg)
			if d.HasArg("reason") {
				err = fmt.Errorf("%s: %w", msg, err)
			} else {
				err = fmt.Errorf("%s", msg)
			}
		}
		out, ierr := h.c.Decline(h.at(t, d), taskArg(t, d, "task"), id, err)
		return h.outputs(out, ierr)
	case "written":
		id, _ := intArg(t, d, "id")
		var werr error
		if d.HasArg("err") {
			var msg string
			d.ScanArgs(t, "err", &msg)
			werr = fmt.Errorf("%s", msg)
		}
		out, err := h.c.MetadataWritten(h.at(t, d), id, werr)
		return h.outputs(out, err)
	case "finish":
		out, err := h.c.TaskFinished(h.at(t, d), taskArg(t, d, "task"))
		return h.outputs(out, err)
	case "restored":
		id, _ := intArg(t, d, "id")
		var path string
		if d.HasArg("path") {
			d.ScanArgs(t, "path", &path)
		}
		return h.outputs(h.c.Restored(h.at(t, d), id, path), nil)
	case "claimed":
		id, _ := intArg(t, d, "id")
		var paths []string
		if d.HasArg("paths") {
			d.ScanArgs(t, "paths", &paths)
		}
		h.c.Claimed(id, paths)
		return h.state()
	case "invalid":
		id, _ := intArg(t, d, "id")
		return h.outputs(h.c.Invalid(h.at(t, d), id), nil)
	case "deadline":
		if dl, ok := h.c.NextDeadline(); ok {
			return "next deadline " + h.rel(dl)
		}
		return "no deadline"
	case "state":
		return h.state()
	case "stats":
		return h.stats()
	case "details":
		id, _ := intArg(t, d, "id")
		var vertex string
		if d.HasArg("vertex") {
			d.ScanArgs(t, "vertex", &vertex)
		}
		return h.details(t, d, id, vertex)
	case "json":
		// The checkpoint list as GET /jobs/:jobid/checkpoints serves it:
		// Flink leaves the entries' tasks empty there.
		s := h.c.Stats()
		for i := range s.History {
			s.History[i].Tasks = map[string]TaskStats{}
		}
		for _, cs := range []*CheckpointStats{s.Latest.Completed, s.Latest.Savepoint, s.Latest.Failed} {
			if cs != nil {
				cs.Tasks = map[string]TaskStats{}
			}
		}
		return marshal(t, d, s)
	case "json-task":
		// One vertex of one checkpoint, as the subtask details endpoint
		// serves it.
		id, _ := intArg(t, d, "id")
		var vertex string
		d.ScanArgs(t, "vertex", &vertex)
		for _, cs := range h.c.Stats().History {
			if cs.ID == id {
				return marshal(t, d, cs.Tasks[vertex])
			}
		}
		return fmt.Sprintf("checkpoint %d is not in the history", id)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func marshal(t *testing.T, d *datadriven.TestData, v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return string(b)
}

func (h *harness) init(t *testing.T, d *datadriven.TestData) string {
	cfg := DefaultConfig()
	cfg.JobID = "job"
	if v, ok := durArg(t, d, "interval"); ok {
		cfg.Interval = v
	}
	if v, ok := durArg(t, d, "initial-delay"); ok {
		cfg.InitialDelay = v
	}
	if v, ok := durArg(t, d, "min-pause"); ok {
		cfg.MinPause = v
	}
	if v, ok := durArg(t, d, "timeout"); ok {
		cfg.Timeout = v
	}
	if v, ok := intArg(t, d, "max-concurrent"); ok {
		cfg.MaxConcurrent = int(v)
	}
	if v, ok := intArg(t, d, "tolerable"); ok {
		cfg.TolerableFailed = int(v)
	}
	if v, ok := intArg(t, d, "retained"); ok {
		cfg.NumRetained = int(v)
	}
	if v, ok := intArg(t, d, "history"); ok {
		cfg.HistorySize = int(v)
	}
	if d.HasArg("mode") {
		var m string
		d.ScanArgs(t, "mode", &m)
		if m == "at-least-once" {
			cfg.Mode = config.AtLeastOnce
		}
	}
	cfg.Unaligned = d.HasArg("unaligned")
	var tasks Tasks
	var all, sources []string
	d.ScanArgs(t, "tasks", &all)
	d.ScanArgs(t, "sources", &sources)
	for _, s := range all {
		tasks.All = append(tasks.All, parseTask(t, d, s))
	}
	for _, s := range sources {
		tasks.Sources = append(tasks.Sources, parseTask(t, d, s))
	}
	if d.HasArg("inputs") {
		var ins []string
		d.ScanArgs(t, "inputs", &ins)
		tasks.Inputs = map[checkpoint.TaskID][]checkpoint.TaskID{}
		for _, in := range ins {
			task, from, ok := strings.Cut(in, "<")
			if !ok {
				d.Fatalf(t, "bad input %q, want task<in+in", in)
			}
			id := parseTask(t, d, task)
			for _, f := range strings.Split(from, "+") {
				tasks.Inputs[id] = append(tasks.Inputs[id], parseTask(t, d, f))
			}
		}
	}
	if d.HasArg("max-parallelism") {
		var mps []string
		d.ScanArgs(t, "max-parallelism", &mps)
		tasks.MaxParallelism = map[string]int{}
		for _, mp := range mps {
			v, n, _ := strings.Cut(mp, ":")
			tasks.MaxParallelism[v], _ = strconv.Atoi(n)
		}
	}
	c, err := New(cfg, tasks)
	if err != nil {
		return "error: " + err.Error()
	}
	h.c = c
	return "ok"
}

func (h *harness) ack(t *testing.T, d *datadriven.TestData, task checkpoint.TaskID, id int64) checkpoint.TaskAck {
	op := task.Vertex
	if d.HasArg("op") {
		d.ScanArgs(t, "op", &op)
	}
	var st checkpoint.SubtaskState
	if size, ok := intArg(t, d, "size"); ok {
		st.Keyed = append(st.Keyed, checkpoint.StateHandle{
			Path: fmt.Sprintf("chk-%d/%s-%d", id, task.Vertex, task.Subtask),
			Size: size,
		})
	}
	if d.HasArg("shared") {
		var files []string
		d.ScanArgs(t, "shared", &files)
		for _, f := range files {
			name, n, _ := strings.Cut(f, ":")
			size, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				d.Fatalf(t, "bad shared file %q", f)
			}
			st.Keyed = append(st.Keyed, checkpoint.StateHandle{Path: "shared/" + name, Size: size})
		}
	}
	ack := checkpoint.TaskAck{}
	if len(st.Keyed) > 0 {
		ack.States = map[string]checkpoint.SubtaskState{op: st}
	}
	s := &ack.Stats
	s.SyncDuration, _ = durArg(t, d, "sync")
	s.AsyncDuration, _ = durArg(t, d, "async")
	s.AlignmentDuration, _ = durArg(t, d, "align")
	s.StartDelay, _ = durArg(t, d, "delay")
	s.ProcessedBytes, _ = intArg(t, d, "processed")
	s.PersistedBytes, _ = intArg(t, d, "persisted")
	s.Unaligned = d.HasArg("unaligned")
	return ack
}

func tasksString(ts []checkpoint.TaskID) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return "{" + strings.Join(s, ",") + "}"
}

func (h *harness) outputs(out []Output, err error) string {
	var b strings.Builder
	for _, o := range out {
		switch o := o.(type) {
		case Trigger:
			fmt.Fprintf(&b, "trigger %d %v at %s to %s", o.ID, o.Kind, h.rel(o.Timestamp), tasksString(o.Tasks))
			if o.Mode != config.ExactlyOnce {
				fmt.Fprintf(&b, " %v", o.Mode)
			}
			if o.Unaligned {
				b.WriteString(" unaligned")
			}
		case WriteMetadata:
			md := o.Metadata
			fmt.Fprintf(&b, "write-metadata %d %v job=%s triggered=%s completed=%s size=%d",
				md.CheckpointID, md.Kind, md.JobID, h.rel(md.TriggerTime), h.rel(md.CompletionTime), md.Size())
			for _, op := range md.Operators {
				sizes := make([]string, len(op.Subtasks))
				for i, s := range op.Subtasks {
					sizes[i] = strconv.FormatInt(s.Size(), 10)
				}
				fmt.Fprintf(&b, "\n  operator %s parallelism=%d max-parallelism=%d subtask-sizes=[%s]",
					op.UID, op.Parallelism, op.MaxParallelism, strings.Join(sizes, " "))
			}
		case NotifyComplete:
			fmt.Fprintf(&b, "notify-complete %d to %s", o.ID, tasksString(o.Tasks))
		case NotifyAbort:
			ae := o.Reason.(*AbortError)
			fmt.Fprintf(&b, "notify-abort %d to %s: %v (%s)", o.ID, tasksString(o.Tasks), ae.Reason.String(), ae.Message())
		case Discard:
			fmt.Fprintf(&b, "discard %d", o.ID)
		case FailJob:
			fmt.Fprintf(&b, "fail-job: %v", o.Reason)
		default:
			fmt.Fprintf(&b, "unknown output %T", o)
		}
		b.WriteByte('\n')
	}
	if err != nil {
		fmt.Fprintf(&b, "ignored: %v\n", err)
	}
	if b.Len() == 0 {
		return "(nothing)"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (h *harness) state() string {
	var b strings.Builder
	c := h.c
	for _, p := range c.pending {
		var waiting []checkpoint.TaskID
		for _, t := range p.plan {
			if _, ok := p.waiting[t]; ok {
				waiting = append(waiting, t)
			}
		}
		phase := "waiting for " + tasksString(waiting)
		if p.finalizing {
			phase = "writing metadata"
		}
		fmt.Fprintf(&b, "pending %d %v triggered %s expires %s: %s\n", p.id, p.kind, h.rel(p.trigger), h.rel(p.deadline), phase)
	}
	if len(c.pending) == 0 {
		b.WriteString("no pending checkpoints\n")
	}
	if !c.nextPeriodic.IsZero() {
		fmt.Fprintf(&b, "next periodic trigger %s\n", h.rel(c.nextPeriodic))
	}
	if c.periodicQueued {
		b.WriteString("periodic trigger queued\n")
	}
	fmt.Fprintf(&b, "consecutive counted failures %d of %d tolerated\n", c.failures.count, c.cfg.TolerableFailed)
	fmt.Fprintf(&b, "retained %v\n", c.Retained())
	fmt.Fprintf(&b, "next id %d", c.nextID)
	return b.String()
}

func fmtSummary(s StatsSummary) string {
	return fmt.Sprintf("min=%d max=%d avg=%d p50=%g p90=%g p95=%g p99=%g p999=%g", s.Min, s.Max, s.Avg, s.P50, s.P90, s.P95, s.P99, s.P999)
}

func (h *harness) ts(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return h.rel(time.UnixMilli(ms))
}

func (h *harness) cpLine(cs CheckpointStats) string {
	s := fmt.Sprintf("%d %s %s trigger=%s latest-ack=%s e2e=%dms checkpointed=%d state=%d processed=%d persisted=%d acked=%d/%d",
		cs.ID, cs.Status, cs.CheckpointType, h.ts(cs.TriggerTimestamp), h.ts(cs.LatestAckTimestamp), cs.EndToEndDuration,
		cs.CheckpointedSize, cs.StateSize, cs.ProcessedData, cs.PersistedData, cs.NumAcknowledgedSubtasks, cs.NumSubtasks)
	if cs.Discarded {
		s += " discarded"
	}
	if cs.Status == StatusFailed {
		s += fmt.Sprintf(" failed=%s %q", h.ts(cs.FailureTimestamp), cs.FailureMessage)
	}
	return s
}

func (h *harness) stats() string {
	s := h.c.Stats()
	var b strings.Builder
	c := s.Counts
	fmt.Fprintf(&b, "counts: restored=%d total=%d in_progress=%d completed=%d failed=%d\n", c.Restored, c.Total, c.InProgress, c.Completed, c.Failed)
	fmt.Fprintf(&b, "summary:\n")
	fmt.Fprintf(&b, "  checkpointed_size   %s\n", fmtSummary(s.Summary.CheckpointedSize))
	fmt.Fprintf(&b, "  state_size          %s\n", fmtSummary(s.Summary.StateSize))
	fmt.Fprintf(&b, "  end_to_end_duration %s\n", fmtSummary(s.Summary.EndToEndDuration))
	fmt.Fprintf(&b, "  processed_data      %s\n", fmtSummary(s.Summary.ProcessedData))
	fmt.Fprintf(&b, "  persisted_data      %s\n", fmtSummary(s.Summary.PersistedData))
	latest := func(name string, cs *CheckpointStats) {
		if cs != nil {
			fmt.Fprintf(&b, "latest %s: %s\n", name, h.cpLine(*cs))
		}
	}
	latest("completed", s.Latest.Completed)
	latest("savepoint", s.Latest.Savepoint)
	latest("failed", s.Latest.Failed)
	if r := s.Latest.Restored; r != nil {
		fmt.Fprintf(&b, "latest restored: %d at %s from %q\n", r.ID, h.ts(r.RestoreTimestamp), r.ExternalPath)
	}
	b.WriteString("history:")
	for _, cs := range s.History {
		fmt.Fprintf(&b, "\n  %s", h.cpLine(cs))
	}
	return b.String()
}

func (h *harness) details(t *testing.T, d *datadriven.TestData, id int64, vertex string) string {
	s := h.c.Stats()
	i := slices.IndexFunc(s.History, func(cs CheckpointStats) bool { return cs.ID == id })
	if i < 0 {
		return fmt.Sprintf("checkpoint %d is not in the history", id)
	}
	cs := s.History[i]
	var b strings.Builder
	b.WriteString(h.cpLine(cs))
	vertices := make([]string, 0, len(cs.Tasks))
	for v := range cs.Tasks {
		if vertex == "" || v == vertex {
			vertices = append(vertices, v)
		}
	}
	slices.Sort(vertices)
	for _, v := range vertices {
		ts := cs.Tasks[v]
		fmt.Fprintf(&b, "\n  vertex %s %s latest-ack=%s e2e=%dms checkpointed=%d state=%d processed=%d persisted=%d acked=%d/%d",
			v, ts.Status, h.ts(ts.LatestAckTimestamp), ts.EndToEndDuration, ts.CheckpointedSize, ts.StateSize,
			ts.ProcessedData, ts.PersistedData, ts.NumAcknowledgedSubtasks, ts.NumSubtasks)
		if vertex != "" {
			sm := ts.Summary
			fmt.Fprintf(&b, "\n    summary end_to_end_duration %s", fmtSummary(sm.EndToEndDuration))
			fmt.Fprintf(&b, "\n    summary state_size          %s", fmtSummary(sm.StateSize))
			fmt.Fprintf(&b, "\n    summary sync                %s", fmtSummary(sm.CheckpointDuration.Sync))
			fmt.Fprintf(&b, "\n    summary async               %s", fmtSummary(sm.CheckpointDuration.Async))
			fmt.Fprintf(&b, "\n    summary alignment           %s", fmtSummary(sm.Alignment.Duration))
			fmt.Fprintf(&b, "\n    summary start_delay         %s", fmtSummary(sm.StartDelay))
		}
		for _, st := range ts.Subtasks {
			if st.Status == SubtaskPending {
				fmt.Fprintf(&b, "\n    subtask %d %s", st.Index, st.Status)
				continue
			}
			fmt.Fprintf(&b, "\n    subtask %d %s ack=%s e2e=%dms state=%d checkpointed=%d sync=%dms async=%dms align=%dms delay=%dms processed=%d persisted=%d",
				st.Index, st.Status, h.ts(st.AckTimestamp), st.EndToEndDuration, st.StateSize, st.CheckpointedSize,
				st.Checkpoint.Sync, st.Checkpoint.Async, st.Alignment.Duration, st.StartDelay, st.Alignment.Processed, st.Alignment.Persisted)
			if st.UnalignedCheckpoint {
				b.WriteString(" unaligned")
			}
			if st.Finished {
				b.WriteString(" finished")
			}
			if st.Aborted {
				b.WriteString(" aborted")
			}
		}
	}
	return b.String()
}
