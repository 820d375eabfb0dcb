package streamtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/weirstream/weir/stream"
)

// Events records a job's events (stream.JobEvent), in the order the job
// reported them. Install it with Option; the zero value is ready to use.
// It is safe for concurrent use: the job reports events from its own
// goroutines while a test reads them or waits for them with WaitFor.
type Events struct {
	mu  sync.Mutex
	all []stream.JobEvent
	// changed is closed, and replaced, at every event: WaitFor sleeps on
	// it rather than polling.
	changed chan struct{}
}

// NewEvents returns an empty recorder.
func NewEvents() *Events { return &Events{} }

// Option installs the recorder in a job: pass it to stream.NewEnvironment.
// A job has one event callback (stream.WithEvents); a test that needs its
// own as well calls Record from it.
func (e *Events) Option() stream.Option { return stream.WithEvents(e.Record) }

// Record adds ev: it is the recorder's stream.WithEvents callback.
func (e *Events) Record(ev stream.JobEvent) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
	e.mu.Unlock()
}

// All returns every event so far.
func (e *Events) All() []stream.JobEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.all)
}

// Of returns the events of kind so far.
func (e *Events) Of(kind stream.EventKind) []stream.JobEvent {
	return Of(e.All(), kind)
}

// Count returns how many events of kind there have been.
func (e *Events) Count(kind stream.EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return count(e.all, kind)
}

// Restores returns the EventRestored events that restored a checkpoint,
// leaving out the redeployments from the beginning (Checkpoint 0).
func (e *Events) Restores() []stream.JobEvent {
	var out []stream.JobEvent
	for _, ev := range e.Of(stream.EventRestored) {
		if ev.Checkpoint > 0 {
			out = append(out, ev)
		}
	}
	return out
}

// Last returns the latest event of kind, if there has been one.
func (e *Events) Last(kind stream.EventKind) (stream.JobEvent, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.all) - 1; i >= 0; i-- {
		if e.all[i].Kind == kind {
			return e.all[i], true
		}
	}
	return stream.JobEvent{}, false
}

// Of returns the events of kind among events: for the conditions given to
// WaitFor and Until.
func Of(events []stream.JobEvent, kind stream.EventKind) []stream.JobEvent {
	var out []stream.JobEvent
	for _, ev := range events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func count(events []stream.JobEvent, kind stream.EventKind) int {
	n := 0
	for _, ev := range events {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// WaitFor waits until cond holds for the events so far, checking it now
// and after every new event, and returns nil; or, if ctx is done first,
// an error that says what ctx ended with and which events there were.
// cond runs on the caller's goroutine, without the recorder's lock held
// (it may call the recorder), and is given a copy of the events, which it
// may keep.
//
//	ctx, cancel := context.WithTimeout(ctx, time.Minute)
//	defer cancel()
//	if err := ev.WaitFor(ctx, func(evs []stream.JobEvent) bool {
//		return len(streamtest.Of(evs, stream.EventRestored)) > 0
//	}); err != nil {
//		t.Fatal(err)
//	}
func (e *Events) WaitFor(ctx context.Context, cond func(events []stream.JobEvent) bool) error {
	for {
		e.mu.Lock()
		all := slices.Clone(e.all)
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		changed := e.changed
		e.mu.Unlock()
		if cond(all) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("streamtest: the job's events never met the condition: %w; events: %s", context.Cause(ctx), summarize(all))
		}
	}
}

// WaitCount waits until there have been at least n events of kind (see
// WaitFor).
func (e *Events) WaitCount(ctx context.Context, kind stream.EventKind, n int) error {
	err := e.WaitFor(ctx, func(evs []stream.JobEvent) bool { return count(evs, kind) >= n })
	if err != nil {
		return fmt.Errorf("waiting for %d %v events: %w", n, kind, err)
	}
	return nil
}

// String summarizes the events, for a test's failure message: how many of
// each kind, and the failures, restarts and restores in full.
func (e *Events) String() string { return summarize(e.All()) }

func summarize(all []stream.JobEvent) string {
	if len(all) == 0 {
		return "none"
	}
	var counts []string
	for k := stream.EventRunning; k <= stream.EventFailed; k++ {
		if n := count(all, k); n > 0 {
			counts = append(counts, fmt.Sprintf("%d %v", n, k))
		}
	}
	var b strings.Builder
	b.WriteString(strings.Join(counts, ", "))
	notable := 0
	for _, ev := range all {
		switch ev.Kind {
		case stream.EventRunning, stream.EventCheckpointCompleted:
			continue
		}
		if notable++; notable > 20 {
			b.WriteString("; …")
			break
		}
		b.WriteString("; ")
		b.WriteString(describeEvent(ev))
	}
	return b.String()
}

func describeEvent(ev stream.JobEvent) string {
	s := ev.Kind.String()
	if ev.Checkpoint > 0 {
		s += fmt.Sprintf(" checkpoint %d", ev.Checkpoint)
	}
	if ev.Task.Vertex != "" {
		s += " " + ev.Task.String()
	}
	if ev.Err != nil {
		s += fmt.Sprintf(": %v", ev.Err)
	}
	if ev.Message != "" {
		s += " (" + ev.Message + ")"
	}
	return s
}
