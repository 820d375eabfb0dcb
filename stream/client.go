package stream

import (
	"context"

	"github.com/weirstream/weir/internal/runtime"
)

// JobClient is a handle on a job started with ExecuteAsync.
type JobClient struct {
	jm   *runtime.JobMaster
	done chan struct{}
	err  error
}

// JobMetrics is a point-in-time view of a running job.
type JobMetrics = runtime.Metrics

// ExecuteAsync starts the job and returns at once; Wait returns its end.
func (e *Environment) ExecuteAsync(ctx context.Context, name string) (*JobClient, error) {
	jm, closer, err := e.prepare(ctx, name)
	if err != nil {
		return nil, err
	}
	c := &JobClient{jm: jm, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer closer()
		c.err = jm.Run(ctx)
		if e.storage != nil {
			retain(ctx, e.ckpt, e.storage, c.err, ctx.Err() != nil, e.logger)
		}
	}()
	return c, nil
}

// Wait blocks until the job ends and returns why it ended (nil when a
// bounded job finished).
func (c *JobClient) Wait() error {
	<-c.done
	return c.err
}

// Done is closed when the job has ended.
func (c *JobClient) Done() <-chan struct{} { return c.done }

// Metrics returns the job's current metrics.
func (c *JobClient) Metrics() JobMetrics { return c.jm.Metrics() }

// Master returns the job's job master, for weir's own tools (the REST API
// and the web UI); its type is internal to weir.
func (c *JobClient) Master() *runtime.JobMaster { return c.jm }
