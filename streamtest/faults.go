package streamtest

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/stream"
)

// ErrInjected is what a fault whose Fail action has no error of its own
// returns, wrapped.
var ErrInjected = errors.New("streamtest: injected fault")

// Action is what a fault does when it strikes.
type Action struct {
	kind  actionKind
	err   error
	delay time.Duration
	call  func(ctx context.Context, site stream.FaultSite) error
}

type actionKind uint8

const (
	actFail actionKind = iota
	actHang
	actDelay
	actCall
)

// Fail fails the subtask (or storage operation) with an error wrapping
// err, or ErrInjected if err is nil.
func Fail(err error) Action {
	if err == nil {
		err = ErrInjected
	}
	return Action{kind: actFail, err: err}
}

// Hang blocks the subtask (or storage operation) until its context is
// done, as a stuck call would: a hung subtask holds its checkpoints back
// until they time out (execution.checkpointing.timeout) and the job fails
// over, which cancels it. A hang in a write of _metadata holds up that
// checkpoint and every storage operation queued behind it (the job
// master writes metadata and discards checkpoints one at a time, in
// order, off its own loop), until the job is canceled.
func Hang() Action { return Action{kind: actHang} }

// Delay holds the subtask (or storage operation) for d, or until its
// context is done, and then lets it go on: a slow subtask, a slow store.
func Delay(d time.Duration) Action { return Action{kind: actDelay, delay: d} }

// Call runs f where the fault strikes, and fails the subtask (or storage
// operation) with f's error, or lets it go on if f returns nil: a test
// damages a checkpoint's files, or stops an external system, at exactly
// that point of the job. f runs on the goroutine that reached the fault,
// concurrently with the job's other goroutines and with other calls of f
// (see the package documentation): what it shares, it must guard.
func Call(f func(ctx context.Context, site stream.FaultSite) error) Action {
	return Action{kind: actCall, call: f}
}

func (a Action) String() string {
	switch a.kind {
	case actCall:
		return "call"
	case actHang:
		return "hang"
	case actDelay:
		return "delay " + a.delay.String()
	}
	if errors.Is(a.err, ErrInjected) {
		return "fail"
	}
	return fmt.Sprintf("fail (%v)", a.err)
}

// Faults is a set of declarative faults, in the manner of kfake's control
// functions and pebble's errorfs: each says where it strikes (a point, and
// which vertex, subtask, operator or storage path), when (after some
// records, at a checkpoint or step, in an attempt, after a restore, from
// the k-th matching call), what it does (Fail, Hang, Delay, Call) and how many
// times. Install them in a job with Option; Add returns a handle that says
// whether, how often and where the fault struck. Faults may be added
// while the job runs, and outlive its restarts: a fault that struck once
// does not strike again in the restored run unless Times allows it.
//
// The job calls the faults concurrently, from every subtask's goroutine,
// from the goroutines that write snapshots, and from the job master for
// storage: the predicates given to When run there, concurrently, and must
// be safe for that. A Faults is safe for concurrent use.
type Faults struct {
	mu     sync.Mutex
	faults []*Fault
}

// NewFaults returns an empty set of faults.
func NewFaults() *Faults { return &Faults{} }

// Option installs the faults in a job: pass it to stream.NewEnvironment.
// Storage faults reach the job only when it checkpoints to a directory
// (execution.checkpointing.dir; mem:// keeps one in memory).
func (fs *Faults) Option() stream.Option { return stream.WithFaults(fs.Inject) }

// Fault is one declared fault, and its handle: it says whether, how
// often and where the fault struck.
type Fault struct {
	owner  *Faults // whose mutex guards calls and sites
	n      int     // 1-based position in its Faults, for messages
	at     stream.FaultPoint
	action Action
	desc   []string

	vertex, operator, path string
	subtask, step, attempt int // -1: any
	records, checkpoint    int64
	afterRestore           bool
	onCall, times          int
	when                   func(stream.FaultSite) bool

	// guarded by the Faults' mutex
	calls int
	sites []stream.FaultSite
}

// A FaultOption narrows where, when and how often a fault strikes.
type FaultOption func(*Fault)

// OnVertex strikes only in subtasks of the vertex whose head operator has
// uid (stream.VertexInfo.UID).
func OnVertex(uid string) FaultOption {
	return func(f *Fault) { f.vertex = uid; f.note("vertex " + uid) }
}

// OnSubtask strikes only in subtask i of its vertex.
func OnSubtask(i int) FaultOption {
	return func(f *Fault) { f.subtask = i; f.note(fmt.Sprintf("subtask %d", i)) }
}

// OnOperator strikes only at sites about the operator with uid (Open,
// Restore, NewReader, Commit, Committed, and Sync's operator steps), or,
// for Batch and other per-subtask points, in subtasks whose chain starts
// with it.
func OnOperator(uid string) FaultOption {
	return func(f *Fault) { f.operator = uid; f.note("operator " + uid) }
}

// OnPath strikes only at storage operations on an object whose key ends
// in elements that match pattern (path.Match): "_metadata" every metadata
// file, "chk-7/*" every file of checkpoint 7, "*-keyed" every keyed state
// file.
func OnPath(pattern string) FaultOption {
	return func(f *Fault) { f.path = pattern; f.note("path " + pattern) }
}

// AfterRecords strikes only once the subtask has taken in at least n
// records since it was deployed.
func AfterRecords(n int64) FaultOption {
	return func(f *Fault) { f.records = n; f.note(fmt.Sprintf("after %d records", n)) }
}

// AtCheckpoint strikes only at sites about checkpoint id: its sync or
// async phase, the commit of its transactions, a restore from it, its
// files in storage.
func AtCheckpoint(id int64) FaultOption {
	return func(f *Fault) { f.checkpoint = id; f.note(fmt.Sprintf("checkpoint %d", id)) }
}

// AtStep strikes only at step k of its point (stream.FaultSite.Step): a
// point within a checkpoint's sync or async phase, before (0) or after
// (1) an operator opened, the k-th read of a restore.
func AtStep(k int) FaultOption {
	return func(f *Fault) { f.step = k; f.note(fmt.Sprintf("step %d", k)) }
}

// InAttempt strikes only in subtasks deployed by the job's n-th restart
// (0: the first deployment).
func InAttempt(n int) FaultOption {
	return func(f *Fault) { f.attempt = n; f.note(fmt.Sprintf("attempt %d", n)) }
}

// AfterRestore strikes only in subtasks deployed from a checkpoint.
func AfterRestore() FaultOption {
	return func(f *Fault) { f.afterRestore = true; f.note("after a restore") }
}

// OnCall lets the first k-1 matching calls through and strikes from the
// k-th on.
func OnCall(k int) FaultOption {
	return func(f *Fault) { f.onCall = k; f.note(fmt.Sprintf("from call %d", k)) }
}

// Times is how many times the fault strikes (default 1).
func Times(n int) FaultOption {
	return func(f *Fault) { f.times = max(n, 1); f.note(fmt.Sprintf("%d times", f.times)) }
}

// Always makes the fault strike at every matching call.
func Always() FaultOption { return func(f *Fault) { f.times = 0; f.note("always") } }

// When strikes only where pred returns true. pred runs on the job's
// goroutines, concurrently (see Faults), and must not block.
func When(pred func(stream.FaultSite) bool) FaultOption {
	return func(f *Fault) { f.when = pred; f.note("when a condition holds") }
}

// CompletedSinceDeploy strikes only once a checkpoint has completed since
// the job's latest deployment (its start or its latest restore), as ev
// records the job's events: the restore the fault causes then takes a
// checkpoint the running attempt wrote. ev must be the job's (WithEvents,
// or Events.Option).
func CompletedSinceDeploy(ev *Events) FaultOption {
	return func(f *Fault) {
		f.when = func(stream.FaultSite) bool { return CheckpointSinceDeploy(ev.All()) }
		f.note("once a checkpoint has completed since the latest deployment")
	}
}

// CheckpointSinceDeploy reports whether a job's events (in order) hold a
// completed checkpoint since the job's latest deployment (its start or
// its latest restore); Events.WaitFor takes it as a condition.
func CheckpointSinceDeploy(events []stream.JobEvent) bool {
	for i := len(events) - 1; i >= 0; i-- {
		switch events[i].Kind {
		case stream.EventCheckpointCompleted:
			return true
		case stream.EventRestored, stream.EventRunning:
			return false
		}
	}
	return false
}

func (f *Fault) note(s string) { f.desc = append(f.desc, s) }

// Add declares a fault at point at that does action, narrowed by opts,
// and returns its handle. By default it strikes once, at the first site
// of the point in any subtask.
func (fs *Faults) Add(at stream.FaultPoint, action Action, opts ...FaultOption) *Fault {
	f := &Fault{owner: fs, at: at, action: action, subtask: -1, step: -1, attempt: -1, onCall: 1, times: 1}
	for _, o := range opts {
		o(f)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f.n = len(fs.faults) + 1
	fs.faults = append(fs.faults, f)
	return f
}

// Inject is the faults' stream.FaultFunc: the first fault that matches
// site and is due strikes.
func (fs *Faults) Inject(ctx context.Context, site stream.FaultSite) error {
	fs.mu.Lock()
	faults := slices.Clone(fs.faults)
	fs.mu.Unlock()
	for _, f := range faults {
		if !f.matches(site) {
			continue
		}
		if f.when != nil && !f.when(site) {
			continue
		}
		if !fs.due(f, site) {
			continue
		}
		return f.do(ctx, site)
	}
	return nil
}

// due counts a matching call of f and reports whether f strikes at it.
func (fs *Faults) due(f *Fault, site stream.FaultSite) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f.calls++
	if f.calls < f.onCall || f.times > 0 && len(f.sites) >= f.times {
		return false
	}
	f.sites = append(f.sites, site)
	return true
}

func (f *Fault) matches(s stream.FaultSite) bool {
	switch {
	case s.Point != f.at,
		f.vertex != "" && s.Task.Vertex != f.vertex,
		f.subtask >= 0 && s.Task.Subtask != f.subtask,
		f.step >= 0 && s.Step != f.step,
		f.attempt >= 0 && s.Attempt != f.attempt,
		f.records > 0 && s.Records < f.records,
		f.checkpoint > 0 && s.Checkpoint != f.checkpoint,
		f.afterRestore && s.Restored == 0:
		return false
	}
	if f.operator != "" && s.Operator != f.operator && (s.Operator != "" || s.Task.Vertex != f.operator) {
		return false
	}
	return f.path == "" || matchTrailing(f.path, s.Path)
}

// matchTrailing reports whether pattern matches key or one of its
// trailing runs of elements.
func matchTrailing(pattern, key string) bool {
	key = strings.TrimSuffix(key, "/")
	for {
		if ok, _ := path.Match(pattern, key); ok {
			return true
		}
		i := strings.IndexByte(key, '/')
		if i < 0 {
			return false
		}
		key = key[i+1:]
	}
}

func (f *Fault) do(ctx context.Context, site stream.FaultSite) error {
	switch f.action.kind {
	case actHang:
		<-ctx.Done()
		return context.Cause(ctx)
	case actCall:
		if err := f.action.call(ctx, site); err != nil {
			return fmt.Errorf("fault %d (%s) at %s: %w", f.n, f, describeSite(site), err)
		}
		return nil
	case actDelay:
		t := time.NewTimer(f.action.delay)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return fmt.Errorf("fault %d (%s) at %s: %w", f.n, f, describeSite(site), f.action.err)
}

// Fired reports whether the fault has struck.
func (f *Fault) Fired() bool { return f.Count() > 0 }

// Count returns how many times the fault has struck.
func (f *Fault) Count() int {
	f.lock()
	defer f.unlock()
	return len(f.sites)
}

// Sites returns where the fault struck, in order.
func (f *Fault) Sites() []stream.FaultSite {
	f.lock()
	defer f.unlock()
	return slices.Clone(f.sites)
}

// String describes the fault: what it does, where and when.
func (f *Fault) String() string {
	s := f.action.String() + " at " + f.at.String()
	if len(f.desc) > 0 {
		s += ", " + strings.Join(f.desc, ", ")
	}
	return s
}

func (f *Fault) lock()   { f.owner.mu.Lock() }
func (f *Fault) unlock() { f.owner.mu.Unlock() }

// String lists the faults, each with how often it struck: for a test's
// failure message, so that a failing schedule can be read.
func (fs *Faults) String() string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var b strings.Builder
	for i, f := range fs.faults {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d: %s (struck %d of %d calls)", f.n, f, len(f.sites), f.calls)
	}
	return b.String()
}

func describeSite(s stream.FaultSite) string {
	var b strings.Builder
	b.WriteString(s.Point.String())
	if s.Task.Vertex != "" {
		fmt.Fprintf(&b, " of %s[%d] (attempt %d, %d records)", s.Task.Vertex, s.Task.Subtask, s.Attempt, s.Records)
	}
	if s.Operator != "" {
		fmt.Fprintf(&b, " operator %s", s.Operator)
	}
	if s.Checkpoint > 0 {
		fmt.Fprintf(&b, " checkpoint %d", s.Checkpoint)
	}
	if s.Steps > 0 {
		fmt.Fprintf(&b, " step %d of %d", s.Step, s.Steps)
	}
	if s.Path != "" {
		fmt.Fprintf(&b, " %s", s.Path)
	}
	return b.String()
}
