package cluster

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Client talks to a job manager for the CLI: submit, list and cancel jobs.
type Client struct {
	conn *grpc.ClientConn
	addr string
}

// Dial returns a client of the job manager at addr. It connects lazily:
// the first call fails if nothing listens there. A job manager that
// requires a token refuses calls without it (WithToken) with an error
// wrapping ErrAuth.
func Dial(addr string, opts ...DialOption) (*Client, error) {
	conn, err := dial(addr, opts)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, addr: addr}, nil
}

// dial makes the gRPC connection of a client or task manager.
func dial(addr string, opts []DialOption) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(jsonCodec{}), grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)),
	}, grpcDialOptions(addr, opts)...)...)
	if err != nil {
		return nil, fmt.Errorf("cluster: job manager address %q: %w", addr, err)
	}
	return conn, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Submit starts a job on the cluster and returns its id.
func (c *Client) Submit(ctx context.Context, sub Submission) (string, error) {
	var resp submitResponse
	if err := c.conn.Invoke(ctx, method("Submit"), &sub, &resp); err != nil {
		return "", authError(c.addr, err)
	}
	return resp.JobID, nil
}

// Overview is the cluster as List sees it.
type Overview struct {
	Jobs          []JobStatus
	TaskManagers  []TaskManagerInfo
	SlotsTotal    int
	SlotsOccupied int
}

// List returns the cluster's jobs and task managers.
func (c *Client) List(ctx context.Context) (Overview, error) {
	var resp listResponse
	if err := c.conn.Invoke(ctx, method("List"), &listRequest{}, &resp); err != nil {
		return Overview{}, authError(c.addr, err)
	}
	return Overview{Jobs: resp.Jobs, TaskManagers: resp.TaskManagers, SlotsTotal: resp.SlotsTotal, SlotsOccupied: resp.SlotsOccupied}, nil
}

// Savepoint takes a savepoint of a job into a new directory under dir
// ("": the job's execution.checkpointing.savepoint-dir) and returns its
// path once it is complete; with cancel, the job is then canceled.
func (c *Client) Savepoint(ctx context.Context, jobID, dir string, cancel bool, format checkpoint.SavepointFormat) (string, error) {
	var resp savepointResponse
	err := c.conn.Invoke(ctx, method("Savepoint"), &savepointRequest{JobID: jobID, Dir: dir, Cancel: cancel, Format: format.String()}, &resp)
	return resp.Path, authError(c.addr, err)
}

// StopWithSavepoint stops a job with a savepoint into a new directory
// under dir ("": the job's execution.checkpointing.savepoint-dir): no
// checkpoint after it (with drain, event time ends first), the sinks
// commit what it holds, and the job finishes. It returns the savepoint's
// path once the job has ended.
func (c *Client) StopWithSavepoint(ctx context.Context, jobID, dir string, drain bool, format checkpoint.SavepointFormat) (string, error) {
	var resp savepointResponse
	err := c.conn.Invoke(ctx, method("Savepoint"), &savepointRequest{JobID: jobID, Dir: dir, Stop: true, Drain: drain, Format: format.String()}, &resp)
	return resp.Path, authError(c.addr, err)
}

// Cancel cancels a job and returns once it has stopped.
func (c *Client) Cancel(ctx context.Context, jobID string) error {
	return authError(c.addr, c.conn.Invoke(ctx, method("Cancel"), &cancelRequest{JobID: jobID}, &cancelResponse{}))
}
