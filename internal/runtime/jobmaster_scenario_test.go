package runtime

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/manualclock"
	"github.com/weirstream/weir/internal/runtime/restart"
)

// TestJobMasterScenarios runs the transcripts in testdata/jobmaster: a job
// master drives a fake executor, and the transcript plays the subtasks'
// reports through the job master's Listener. The job is src → sink, two
// subtasks each, joined by a forward edge (two pipelined regions) or a hash
// edge (one). The clock is manual, so restart delays and checkpoint
// intervals pass only with advance. Each command waits until the job
// master has done everything it caused, then lists what the executor was
// asked to do, the job's events, and its status.
//
//	init [edge=forward|hash] [failover=region|full]
//	     [restart=none|fixed-delay] [attempts=] [delay=]
//	     [interval=10s] [timeout=1m] [tolerable=0] [storage=gated]
//	     [align=<max drift in ms>]
//	run
//	advance <duration>
//	ack task= id= [state=] [attempt=]
//	decline task= id= [reason=async-failure|subsumed|closing|not-ready] [msg=] [attempt=]
//	end-of-data task= [attempt=]
//	watermark task= wm= [attempt=]
//	exit task= [err=] [permanent] [canceled] [attempt=]
//	release id= [err=]
//	cancel [exits]
//	status
//
// With align, the source aligns its watermarks (group "g", the drift in
// milliseconds), and watermark plays a source subtask's report of its
// watermark (wm=max for MaxWatermark).
// With storage=gated the checkpoint storage holds every write of a
// checkpoint's metadata until release lets it complete (or fail with
// err), so that a transcript shows what the job master does while a
// store is slow; each command then waits only for what it caused besides
// the held writes. A cancel with exits cancels Run's context from the job
// master's own goroutine and reports every live subtask Exited with
// context.Canceled right behind it, as a worker's subtasks, which run
// under the job's context, do; it waits for nothing else.
// An init ends the job master of the previous one. A report's attempt
// defaults to the subtask's latest deployment. The fake's subtasks stop as
// soon as they are canceled: each reports Exited with the cancel's cause.
func TestJobMasterScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/jobmaster", func(t *testing.T, path string) {
		h := &jmHarness{t0: time.Unix(1_700_000_000, 0)}
		defer h.close(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

type jmHarness struct {
	t0     time.Time
	clock  *manualclock.Clock
	exec   *fakeExecutor
	store  *gatedStorage // nil without storage=gated
	jm     *JobMaster
	cancel context.CancelFunc
	// result receives Run's error; ended is set once it has.
	result chan error
	ended  bool
}

// gatedStorage is checkpoint storage whose metadata writes wait to be
// released; state stays inline in the handles. It logs what it is asked
// to do in order, on a log of its own: its goroutine runs beside the job
// master's, so its lines follow the executor's in a command's output.
type gatedStorage struct {
	memoryStore
	log []string // guarded by mu

	mu       sync.Mutex
	gates    map[int64]chan error
	blocked  int            // writes waiting for their release
	returned map[int64]bool // writes that have returned
}

func (g *gatedStorage) hasReturned(id int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.returned[id]
}

func (g *gatedStorage) gate(id int64) chan error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.gates[id]
	if !ok {
		c = make(chan error, 1)
		g.gates[id] = c
	}
	return c
}

func (g *gatedStorage) CreateSavepoint(context.Context, string) (SavepointWriter, error) {
	return nil, errors.New("the scenario storage takes no savepoints")
}

func (g *gatedStorage) WriteMetadata(ctx context.Context, md *checkpoint.Metadata) (string, error) {
	g.printf("storage: writing metadata of checkpoint %d", md.CheckpointID)
	gate := g.gate(md.CheckpointID)
	g.mu.Lock()
	g.blocked++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.blocked--
		g.returned[md.CheckpointID] = true
		g.mu.Unlock()
	}()
	select {
	case err := <-gate:
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("chk-%d", md.CheckpointID), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (g *gatedStorage) Discard(_ context.Context, ids ...int64) error {
	g.printf("storage: discard checkpoints %v", ids)
	return nil
}

func (g *gatedStorage) printf(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.log = append(g.log, fmt.Sprintf(format, args...))
}

func (g *gatedStorage) flush() []string {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.log
	g.log = nil
	return l
}

func (g *gatedStorage) waiting() int64 {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return int64(g.blocked)
}

// fakeExecutor records what the job master asks of it, and the job's
// events, in order.
type fakeExecutor struct {
	l Listener

	mu      sync.Mutex
	log     []logEntry
	live    map[TaskRef]bool
	attempt map[checkpoint.TaskID]int // latest deployment
}

// logEntry is one line of a command's output. Consecutive calls that
// differ only in their subtask are merged into one line: pre {refs}post.
type logEntry struct {
	pre  string
	refs []TaskRef
	post string
}

func (e *fakeExecutor) Deploy(_ context.Context, d Deployment) { e.deployed(d) }
func (e *fakeExecutor) Cancel(refs []TaskRef, cause error)     { e.canceled(refs, cause) }
func (e *fakeExecutor) Trigger(ref TaskRef, b Barrier) {
	e.call(ref, fmt.Sprintf("trigger %d at", b.ID), "")
}
func (e *fakeExecutor) NotifyComplete(ref TaskRef, id int64) {
	e.call(ref, fmt.Sprintf("notify-complete %d to", id), "")
}
func (e *fakeExecutor) NotifyAbort(ref TaskRef, id int64, reason string) {
	e.call(ref, fmt.Sprintf("notify-abort %d to", id), ": "+reason)
}
func (e *fakeExecutor) AssignSplits(ref TaskRef, splits, late []string) {
	what := fmt.Sprintf("assign %v", splits)
	if len(late) > 0 {
		what += fmt.Sprintf(" (late %v)", late)
	}
	e.call(ref, what+" to", "")
}
func (e *fakeExecutor) AlignWatermarks(ref TaskRef, maxAllowed int64) {
	e.call(ref, fmt.Sprintf("align %d to", maxAllowed), "")
}
func (e *fakeExecutor) SubtaskMetrics() []SubtaskMetrics                        { return nil }
func (e *fakeExecutor) SourcePositions() map[checkpoint.TaskID]map[string]int64 { return nil }

func (e *fakeExecutor) printf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, logEntry{pre: fmt.Sprintf(format, args...)})
}

// call records a call about one subtask: pre {ref}post.
func (e *fakeExecutor) call(ref TaskRef, pre, post string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.log); n > 0 && e.log[n-1].refs != nil && e.log[n-1].pre == pre && e.log[n-1].post == post {
		e.log[n-1].refs = append(e.log[n-1].refs, ref)
		return
	}
	e.log = append(e.log, logEntry{pre: pre, refs: []TaskRef{ref}, post: post})
}

func (e *fakeExecutor) deployed(d Deployment) {
	e.mu.Lock()
	for _, id := range d.Tasks {
		e.live[TaskRef{ID: id, Attempt: d.Attempt}] = true
		e.attempt[id] = d.Attempt
	}
	e.mu.Unlock()
	from := "from nothing"
	if d.Restore != nil {
		from = fmt.Sprintf("from checkpoint %d", d.Restore.Metadata.CheckpointID)
		var states []string
		for _, id := range d.Tasks {
			if s := inlineState(d.Restore.Metadata, id); s != "" {
				states = append(states, id.String()+"="+s)
			}
		}
		if len(states) > 0 {
			from += ": " + strings.Join(states, " ")
		}
	}
	e.printf("deploy attempt %d %s %s", d.Attempt, tasksString(d.Tasks), from)
}

// canceled records a Cancel and stops the live subtasks among refs. A
// Cancel of no subtask is not recorded.
func (e *fakeExecutor) canceled(refs []TaskRef, cause error) {
	if len(refs) == 0 {
		return
	}
	e.mu.Lock()
	e.log = append(e.log, logEntry{pre: "cancel", refs: slices.Clone(refs), post: ": " + cause.Error()})
	var stopped []TaskRef
	for _, ref := range refs {
		if e.live[ref] {
			delete(e.live, ref)
			stopped = append(stopped, ref)
		}
	}
	e.mu.Unlock()
	for _, ref := range stopped {
		e.l.Exited(ref, cause)
	}
}

// ref is the deployment of id that a report names: attempt, or else the
// latest.
func (e *fakeExecutor) ref(id checkpoint.TaskID, attempt int) TaskRef {
	e.mu.Lock()
	defer e.mu.Unlock()
	if attempt < 0 {
		attempt = e.attempt[id]
	}
	return TaskRef{ID: id, Attempt: attempt}
}

func (e *fakeExecutor) exited(ref TaskRef) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.live, ref)
}

func (e *fakeExecutor) event(ev Event) {
	switch ev.Kind {
	case EventRunning:
		e.printf("event running")
	case EventCheckpointCompleted:
		e.printf("event checkpoint %d completed", ev.Checkpoint)
	case EventCheckpointFailed:
		e.printf("event checkpoint %d failed: %s", ev.Checkpoint, ev.Message)
	case EventTaskFailed:
		if ev.Task == (checkpoint.TaskID{}) {
			e.printf("event job failed: %v", ev.Err)
		} else {
			e.printf("event %s failed: %v", ev.Task, ev.Err)
		}
	case EventRestarting:
		e.printf("event restarting %s: %s", tasksString(ev.Tasks), ev.Message)
	case EventRestored:
		if ev.Checkpoint == 0 {
			e.printf("event restored from the beginning")
		} else {
			e.printf("event restored from checkpoint %d", ev.Checkpoint)
		}
	case EventFinished:
		e.printf("event finished")
	case EventFailed:
		e.printf("event failed: %v", ev.Err)
	default:
		e.printf("event %d", ev.Kind)
	}
}

// flush returns the lines recorded since the last flush.
func (e *fakeExecutor) flush() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	lines := make([]string, len(e.log))
	for i, le := range e.log {
		if le.refs == nil {
			lines[i] = le.pre
			continue
		}
		refs := make([]string, len(le.refs))
		for j, r := range le.refs {
			refs[j] = r.String()
		}
		lines[i] = fmt.Sprintf("%s {%s}%s", le.pre, strings.Join(refs, ","), le.post)
	}
	e.log = nil
	return lines
}

func tasksString(ids []checkpoint.TaskID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return "{" + strings.Join(s, ",") + "}"
}

// inlineState is the state the harness's acknowledgement of id put in md,
// or "".
func inlineState(md *checkpoint.Metadata, id checkpoint.TaskID) string {
	op, ok := md.Operator(id.Vertex)
	if !ok || id.Subtask >= len(op.Subtasks) {
		return ""
	}
	var parts []string
	for _, h := range op.Subtasks[id.Subtask].Operator {
		parts = append(parts, string(h.Inline))
	}
	return strings.Join(parts, "+")
}

// permanentError is a failure a restart cannot cure.
type permanentError struct{ msg string }

func (e permanentError) Error() string { return e.msg }
func (permanentError) Permanent() bool { return true }

func (h *jmHarness) rel(ts time.Time) string { return ts.Sub(h.t0).String() }

func (h *jmHarness) run(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "init" && h.jm == nil {
		d.Fatalf(t, "init first")
	}
	switch d.Cmd {
	case "init":
		return h.init(t, d)
	case "run":
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.result = cancel, make(chan error, 1)
		go func() { h.result <- h.jm.Run(ctx) }()
	case "advance":
		if len(d.CmdArgs) != 1 {
			d.Fatalf(t, "advance <duration>")
		}
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			d.Fatalf(t, "advance: %v", err)
		}
		h.clock.Advance(dur)
	case "ack":
		ref, id := h.ref(t, d), h.checkpointID(t, d)
		ack := checkpoint.TaskAck{}
		if d.HasArg("state") {
			var s string
			d.ScanArgs(t, "state", &s)
			b := []byte(s)
			ack.States = map[string]checkpoint.SubtaskState{ref.ID.Vertex: {Operator: []checkpoint.StateHandle{
				{Inline: b, Size: int64(len(b)), CRC32C: crc32.Checksum(b, castagnoli)},
			}}}
		}
		h.jm.Acknowledge(ref, id, ack)
	case "decline":
		ref, id := h.ref(t, d), h.checkpointID(t, d)
		why := DeclineAsyncFailure
		if d.HasArg("reason") {
			var r string
			d.ScanArgs(t, "reason", &r)
			switch r {
			case "async-failure":
			case "subsumed":
				why = DeclineSubsumed
			case "closing":
				why = DeclineTaskClosing
			case "not-ready":
				why = DeclineTaskNotReady
			default:
				d.Fatalf(t, "unknown decline reason %q", r)
			}
		}
		msg := "snapshot failed"
		if d.HasArg("msg") {
			d.ScanArgs(t, "msg", &msg)
		}
		h.jm.Decline(ref, id, why, errors.New(msg))
	case "end-of-data":
		h.jm.EndOfData(h.ref(t, d))
	case "watermark":
		ref := h.ref(t, d)
		var s string
		d.ScanArgs(t, "wm", &s)
		wm := int64(MaxWatermark)
		if s != "max" {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				d.Fatalf(t, "wm=%s: %v", s, err)
			}
			wm = v
		}
		h.jm.SourceWatermark(ref, wm)
	case "exit":
		ref := h.ref(t, d)
		var err error
		switch {
		case d.HasArg("err"):
			var msg string
			d.ScanArgs(t, "err", &msg)
			err = errors.New(msg)
		case d.HasArg("permanent"):
			var msg string
			d.ScanArgs(t, "permanent", &msg)
			err = fmt.Errorf("sink write: %w", permanentError{msg})
		case d.HasArg("canceled"):
			err = context.Canceled
		}
		h.exec.exited(ref)
		h.jm.Exited(ref, err)
	case "release":
		if h.store == nil {
			d.Fatalf(t, "release needs init storage=gated")
		}
		id := h.checkpointID(t, d)
		var err error
		if d.HasArg("err") {
			var msg string
			d.ScanArgs(t, "err", &msg)
			err = errors.New(msg)
		}
		h.store.gate(id) <- err
		// Wait until the write has returned; settle then waits for what
		// its completion causes.
		for deadline := time.Now().Add(time.Minute); !h.store.hasReturned(id); {
			if time.Now().After(deadline) {
				d.Fatalf(t, "the write of checkpoint %d's metadata never took its release", id)
			}
			time.Sleep(100 * time.Microsecond)
		}
	case "cancel":
		if !d.HasArg("exits") {
			h.cancel()
			h.wait(t, d)
			break
		}
		// As a worker's subtasks do, which run under the job's context:
		// they end with it, and their exits are posted behind the
		// cancellation, before the job master has seen it. The job
		// master may be held by a metadata write (storage=gated), so
		// nothing is awaited but the posting.
		posted := make(chan struct{})
		h.jm.post(func() error {
			h.cancel()
			h.exec.mu.Lock()
			refs := slices.Collect(maps.Keys(h.exec.live))
			clear(h.exec.live)
			h.exec.mu.Unlock()
			slices.SortFunc(refs, func(a, b TaskRef) int { return strings.Compare(a.ID.String(), b.ID.String()) })
			for _, ref := range refs {
				h.jm.Exited(ref, context.Canceled)
			}
			close(posted)
			return nil
		})
		<-posted
		return "(nothing)"
	case "status":
		h.settle(t, d)
		return h.status(t, d)
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return h.output(t, d)
}

func (h *jmHarness) init(t *testing.T, d *datadriven.TestData) string {
	h.close(t)
	h.result, h.ended = nil, false
	const parallelism = 2
	edge := Forward
	if d.HasArg("edge") {
		var s string
		d.ScanArgs(t, "edge", &s)
		switch s {
		case "forward":
		case "hash":
			edge = Hash
		default:
			d.Fatalf(t, "unknown edge %q", s)
		}
	}
	src := &Vertex{ID: 1, Name: "src", UID: "src", Parallelism: parallelism, MaxParallelism: 128}
	sink := &Vertex{ID: 2, Name: "sink", UID: "sink", Parallelism: parallelism, MaxParallelism: 128}
	e := &Edge{ID: 1, From: src, To: sink, Partitioner: edge}
	src.Outputs, sink.Inputs = []*Edge{e}, []*Edge{e}
	g := &JobGraph{Name: "scenario", Vertices: []*Vertex{src, sink}, Edges: []*Edge{e}}
	if d.HasArg("align") {
		var ms int
		d.ScanArgs(t, "align", &ms)
		src.Alignment = &WatermarkAlignment{Group: "g", MaxDrift: time.Duration(ms) * time.Millisecond, UpdateInterval: time.Second}
	}

	var rc restart.Config = restart.None{}
	if d.HasArg("restart") {
		var kind string
		d.ScanArgs(t, "restart", &kind)
		switch kind {
		case restart.KindNone:
		case restart.KindFixedDelay:
			fd := restart.DefaultFixedDelay()
			if d.HasArg("attempts") {
				d.ScanArgs(t, "attempts", &fd.Attempts)
			}
			fd.Delay = h.dur(t, d, "delay", fd.Delay)
			rc = fd
		default:
			d.Fatalf(t, "unknown restart strategy %q", kind)
		}
	}
	strategy, err := restart.New(rc)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	cp := config.Checkpointing{
		Enabled:       true,
		Interval:      h.dur(t, d, "interval", 10*time.Second),
		Timeout:       h.dur(t, d, "timeout", time.Minute),
		MaxConcurrent: 1,
		NumRetained:   1,
	}
	if d.HasArg("tolerable") {
		d.ScanArgs(t, "tolerable", &cp.TolerableFailures)
	}
	failover := "region"
	if d.HasArg("failover") {
		d.ScanArgs(t, "failover", &failover)
	}

	h.clock = manualclock.New(h.t0)
	h.exec = &fakeExecutor{live: map[TaskRef]bool{}, attempt: map[checkpoint.TaskID]int{}}
	h.store = nil
	var store CheckpointStorage
	if d.HasArg("storage") {
		var kind string
		d.ScanArgs(t, "storage", &kind)
		if kind != "gated" {
			d.Fatalf(t, "unknown storage %q", kind)
		}
		h.store = &gatedStorage{gates: map[int64]chan error{}, returned: map[int64]bool{}}
		store = h.store
	}
	jm, err := NewJobMaster(g, Options{
		JobID:    "job",
		Logger:   slog.New(slog.DiscardHandler),
		Clock:    h.clock,
		Restart:  strategy,
		Failover: failover,
		Checkpointing: &CheckpointingOptions{
			NewCoordinator: func(g *JobGraph, sources, all []checkpoint.TaskID) (*coordinator.Coordinator, error) {
				return NewCoordinator(cp, "job", 10, g, sources, all)
			},
			Storage: store,
		},
		Events: h.exec.event,
		NewExecutor: func(_ *JobGraph, l Listener) (Executor, error) {
			h.exec.l = l
			return h.exec, nil
		},
	})
	if err != nil {
		return "error: " + err.Error()
	}
	h.jm = jm
	return fmt.Sprintf("regions %s", jm.regions)
}

func (h *jmHarness) dur(t *testing.T, d *datadriven.TestData, key string, def time.Duration) time.Duration {
	if !d.HasArg(key) {
		return def
	}
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	return v
}

func (h *jmHarness) checkpointID(t *testing.T, d *datadriven.TestData) int64 {
	var id int64
	d.ScanArgs(t, "id", &id)
	return id
}

func (h *jmHarness) ref(t *testing.T, d *datadriven.TestData) TaskRef {
	var s string
	d.ScanArgs(t, "task", &s)
	i := strings.IndexByte(s, '[')
	if i < 0 || !strings.HasSuffix(s, "]") {
		d.Fatalf(t, "bad task %q, want vertex[subtask]", s)
	}
	n, err := strconv.Atoi(s[i+1 : len(s)-1])
	if err != nil {
		d.Fatalf(t, "bad task %q: %v", s, err)
	}
	attempt := -1
	if d.HasArg("attempt") {
		d.ScanArgs(t, "attempt", &attempt)
	}
	return h.exec.ref(checkpoint.TaskID{Vertex: s[:i], Subtask: n}, attempt)
}

// settle waits until the job master has done everything the command
// caused: its loop waits with nothing to do, or Run has returned.
func (h *jmHarness) settle(t *testing.T, d *datadriven.TestData) {
	if h.result == nil || h.ended {
		return
	}
	deadline := time.Now().Add(time.Minute)
	// Done, but for storage operations queued behind a held write.
	quiet := func() bool {
		q := h.jm.store.queued.Load()
		return h.jm.busy.Load() == q && (q == 0 || h.store.waiting() > 0)
	}
	for !quiet() {
		select {
		case err := <-h.result:
			h.ended = true
			h.exec.printf("run returned: %v", err)
			return
		default:
		}
		if time.Now().After(deadline) {
			d.Fatalf(t, "the job master is still busy after a minute (busy %d, held writes %d)", h.jm.busy.Load(), h.store.waiting())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// wait waits for Run to return.
func (h *jmHarness) wait(t *testing.T, d *datadriven.TestData) {
	if h.ended {
		return
	}
	select {
	case err := <-h.result:
		h.ended = true
		h.exec.printf("run returned: %v", err)
	case <-time.After(time.Minute):
		d.Fatalf(t, "Run did not return within a minute")
	}
}

func (h *jmHarness) output(t *testing.T, d *datadriven.TestData) string {
	h.settle(t, d)
	lines := append(h.exec.flush(), h.store.flush()...)
	if h.result != nil {
		s, _ := h.jm.Status()
		lines = append(lines, "status "+string(s))
	}
	if len(lines) == 0 {
		return "(nothing)"
	}
	return strings.Join(lines, "\n")
}

func (h *jmHarness) status(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	s, since := h.jm.Status()
	fmt.Fprintf(&b, "status %s since %s", s, h.rel(since))
	if from := h.jm.EndedFrom(); from != "" {
		fmt.Fprintf(&b, " (ended from %s)", from)
	}
	m := h.jm.Metrics()
	fmt.Fprintf(&b, "\nrestarts %d", m.Restarts)
	if l := h.jm.Latest(); l != nil {
		fmt.Fprintf(&b, "\nlatest checkpoint %d", l.Metadata.CheckpointID)
		for _, id := range h.jm.all {
			if st := inlineState(l.Metadata, id); st != "" {
				fmt.Fprintf(&b, " %s=%s", id, st)
			}
		}
	} else {
		b.WriteString("\nno checkpoint")
	}
	fs, n := h.jm.Failures()
	fmt.Fprintf(&b, "\nfailures %d", n)
	for _, f := range fs {
		task := "job"
		if f.Task != (checkpoint.TaskID{}) {
			task = f.Task.String()
		}
		fmt.Fprintf(&b, "\n  %s %s: %v", h.rel(f.Time), task, f.Err)
		if f.Restarted {
			b.WriteString(" (restarted)")
		}
	}
	stats, ok, err := h.jm.CheckpointStats(context.Background())
	if err != nil || !ok {
		d.Fatalf(t, "checkpoint stats: ok=%v err=%v", ok, err)
	}
	c := stats.Counts
	fmt.Fprintf(&b, "\ncheckpoints: total=%d in-progress=%d completed=%d failed=%d", c.Total, c.InProgress, c.Completed, c.Failed)
	for _, cs := range stats.History {
		fmt.Fprintf(&b, "\n  %d %s", cs.ID, cs.Status)
		if cs.FailureMessage != "" {
			fmt.Fprintf(&b, ": %s", cs.FailureMessage)
		}
	}
	h.settle(t, d)
	return b.String()
}

// close ends the job master if the transcript left it running.
func (h *jmHarness) close(t *testing.T) {
	if h.result == nil || h.ended {
		return
	}
	h.cancel()
	select {
	case <-h.result:
	case <-time.After(time.Minute):
		t.Error("Run did not return within a minute of its context's end")
	}
}
