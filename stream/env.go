// Package stream is weir's job API: a job is written as transformations of
// typed streams, from sources to sinks, and run by Environment.Execute.
//
//	env, _ := stream.NewEnvironment(stream.WithConfig(cfg))
//	events := stream.FromSource(env, src, "events", stream.BoundedOutOfOrderness[Event](5*time.Second))
//	sums := stream.Process(stream.KeyBy(events, Event.Key), sumFn{}, stream.Uid("sum"))
//	stream.SinkTo(sums, sink, stream.Uid("sink"))
//	err := env.Execute(ctx, "sums")
//
// Go has no type parameters on methods, so transformations are generic
// functions that take a stream and return a new one. Configuration uses
// Flink's option names (package config). Every stateful operator should
// get a stable Uid: its state in a checkpoint is addressed by it.
package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirstream/weir/config"
)

// Environment collects a job's transformations and executes them.
type Environment struct {
	cfg    *config.Configuration
	logger *slog.Logger
	nodes  []*node
	faults FaultFunc
	clock  Clock
	// batchSize and channelCapacity tune the data plane; 0 keeps the
	// runtime's defaults.
	batchSize, channelCapacity int
	events                     func(JobEvent)
	jobID                      string
	err                        error // first error from building the graph
	// noPanes keeps sliding windows whole (see Aggregate), as weir did
	// before it cut them into panes: tests restore such a job's
	// checkpoints into one that cuts them.
	noPanes bool
}

// Option configures an Environment.
type Option func(*Environment)

// WithConfig sets the job's configuration (Flink option names). Later
// WithConfig options are merged over earlier ones.
func WithConfig(c *config.Configuration) Option {
	return func(e *Environment) { e.cfg.Merge(c) }
}

// WithLogger sets the logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(e *Environment) { e.logger = l } }

// WithJobID sets the job's id (default: random). Checkpoints are stored
// under it.
func WithJobID(id string) Option { return func(e *Environment) { e.jobID = id } }

// TaskInfo names a subtask.
type TaskInfo struct {
	// Vertex is the uid of the chain's head operator.
	Vertex  string
	Subtask int
}

// WithBatchSize sets how many records a subtask sends downstream in one
// batch (default 1024). Smaller batches lower latency and raise the
// per-record cost; tests use 1 to interleave records, barriers and
// watermarks as finely as possible.
func WithBatchSize(n int) Option { return func(e *Environment) { e.batchSize = n } }

// WithChannelCapacity sets how many batches a channel between two
// subtasks buffers, and the credit of a network channel (default 4).
// With 1, a slow consumer backpressures its producers at once.
func WithChannelCapacity(n int) Option { return func(e *Environment) { e.channelCapacity = n } }

// WithEvents receives the job's events: running, checkpoint completed or
// failed, task failed, restarting, restored, finished.
func WithEvents(f func(JobEvent)) Option { return func(e *Environment) { e.events = f } }

// Clock is the processing-time clock (streamtest.ManualClock in tests).
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// WithClock replaces the processing-time clock (default: the wall clock).
func WithClock(c Clock) Option { return func(e *Environment) { e.clock = c } }

// NewEnvironment returns an environment with the given options.
func NewEnvironment(opts ...Option) (*Environment, error) {
	e := &Environment{cfg: config.New(), logger: slog.Default()}
	for _, o := range opts {
		o(e)
	}
	if err := e.cfg.Validate(); err != nil {
		return nil, err
	}
	if e.batchSize < 0 || e.channelCapacity < 0 {
		return nil, errorf("batch size %d and channel capacity %d must not be negative", e.batchSize, e.channelCapacity)
	}
	if e.jobID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		e.jobID = hex.EncodeToString(b[:])
	}
	return e, nil
}

// Config returns the environment's configuration.
func (e *Environment) Config() *config.Configuration { return e.cfg }

// JobID returns the job's id.
func (e *Environment) JobID() string { return e.jobID }

func (e *Environment) setErr(err error) {
	if e.err == nil {
		e.err = err
	}
}

// Execute runs the job until it finishes (bounded sources), fails beyond
// what the restart strategy allows, or ctx is done.
func (e *Environment) Execute(ctx context.Context, name string) error {
	c, err := e.ExecuteAsync(ctx, name)
	if err != nil {
		return err
	}
	return c.Wait()
}

func errorf(format string, args ...any) error { return fmt.Errorf("stream: "+format, args...) }
