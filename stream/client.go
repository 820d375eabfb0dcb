package stream

import (
	"context"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/launch"
)

// JobClient is a handle on a job started with ExecuteAsync.
type JobClient struct {
	h *launch.Handle
}

// ExecuteAsync starts the job and returns at once; Wait returns its end.
func (e *Environment) ExecuteAsync(ctx context.Context, name string) (*JobClient, error) {
	j, err := e.describe(name)
	if err != nil {
		return nil, err
	}
	h, err := launch.Start(ctx, j)
	if err != nil {
		return nil, err
	}
	return &JobClient{h: h}, nil
}

// Wait blocks until the job ends and returns why it ended (nil when a
// bounded job finished).
func (c *JobClient) Wait() error { return c.h.Wait() }

// Done is closed when the job has ended.
func (c *JobClient) Done() <-chan struct{} { return c.h.Done() }

// Metrics returns the job's current metrics.
func (c *JobClient) Metrics() JobMetrics { return jobMetrics(c.h.Master().Metrics()) }

// TriggerSavepoint takes a savepoint of the job in a new directory under
// dir ("" means execution.checkpointing.savepoint-dir) and returns its
// path once it is complete. A savepoint is always aligned, is never
// deleted by weir, and commits no sink transaction: resuming from it
// (execution.state-recovery.path) does. The job goes on running.
func (c *JobClient) TriggerSavepoint(ctx context.Context, dir string, opts ...SavepointOption) (string, error) {
	return c.h.Master().TriggerSavepoint(ctx, dir, savepointFormat(opts))
}

// SavepointOption configures a savepoint.
type SavepointOption func(*savepointOptions)

type savepointOptions struct{ format checkpoint.SavepointFormat }

// NativeFormat takes the savepoint in the state backends' own format
// (Flink's NATIVE savepoint format type) rather than the canonical one:
// with the embedded LSM backend (pebble, rocksdb), every file of each
// keyed subtask's store, quick to take and to restore into that backend.
// A native savepoint is self-contained, like any savepoint, and restores
// into the other backend too.
func NativeFormat() SavepointOption {
	return func(o *savepointOptions) { o.format = checkpoint.FormatNative }
}

// CanonicalFormat takes the savepoint in weir's backend-independent
// format, which restores into either state backend, whatever the job's
// execution.savepoint.format says.
func CanonicalFormat() SavepointOption {
	return func(o *savepointOptions) { o.format = checkpoint.FormatCanonical }
}

// savepointFormat returns the format opts ask for; without one, the
// job's execution.savepoint.format (CANONICAL unless set).
func savepointFormat(opts []SavepointOption) checkpoint.SavepointFormat {
	o := savepointOptions{format: checkpoint.FormatDefault}
	for _, f := range opts {
		f(&o)
	}
	return o.format
}

// StopWithSavepoint stops the job with a savepoint, as Flink's stop does:
// it takes a savepoint in a new directory under dir ("" means
// execution.checkpointing.savepoint-dir) with no checkpoint after it,
// the sinks commit what it holds, and the job finishes. With drain the
// sources first end event time (Flink's --drain): every timer and window
// fires and its output is committed with the savepoint, which a job then
// resumes with its event time ended. It
// returns the savepoint's path once the job has ended; a job resumed
// from it goes on exactly where this one stopped. If the savepoint
// fails, the job keeps running.
func (c *JobClient) StopWithSavepoint(ctx context.Context, dir string, drain bool, opts ...SavepointOption) (string, error) {
	return c.h.Master().StopWithSavepoint(ctx, dir, drain, savepointFormat(opts))
}

// StoppedWith returns the path of the savepoint the job stopped with
// (StopWithSavepoint, or a stop through the REST API or CLI), or "" if it
// did not stop with one.
func (c *JobClient) StoppedWith() string { return c.h.Master().StoppedWith() }

// TriggerCheckpoint takes a checkpoint now, whatever the interval, and
// returns its id once it has completed (Flink's manual checkpoint).
func (c *JobClient) TriggerCheckpoint(ctx context.Context) (int64, error) {
	return c.h.Master().TriggerCheckpoint(ctx)
}
