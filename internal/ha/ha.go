// Package ha keeps a cluster's job managers available: they elect a
// leader, and the leader records each submitted job (the job graph store)
// and the pointer to each job's latest completed checkpoint (the
// completed-checkpoint store) before it acts on them, so that a standby
// that takes over recovers every running job from where it was.
//
// Every write of a leader is fenced: it succeeds only while the leader
// still holds its election key, and fails with ErrNotLeader once another
// has taken over. The leader's epoch, which grows with each new leader,
// is the token the task managers check on every command.
//
// Etcd implements the interfaces with go.etcd.io/etcd/client/v3 and its
// concurrency election.
package ha

import (
	"context"
	"errors"
)

// ErrNotLeader is returned by a write of a leader that another has
// replaced, or whose lease expired.
var ErrNotLeader = errors.New("ha: no longer the leader")

// LeaderInfo is what a leader publishes: where its clients reach it.
type LeaderInfo struct {
	// Addr is the job manager's RPC address (task managers, clients).
	Addr string `json:"addr"`
	// RESTAddr is its REST API's address, "" if it has none.
	RESTAddr string `json:"rest_addr,omitempty"`
	// Epoch is the leadership's fencing token: a later leader has a
	// greater epoch. It is set by the election, not by the leader.
	Epoch int64 `json:"-"`
}

// Services are a cluster's high availability services.
type Services interface {
	// Campaign waits until this process leads the cluster, publishing
	// info, and returns its leadership. It returns when ctx is done.
	Campaign(ctx context.Context, info LeaderInfo) (Leadership, error)
	// Leader returns the current leader, and false if there is none.
	Leader(ctx context.Context) (LeaderInfo, bool, error)
	// WatchLeader sends the current leader, and each new one, until ctx
	// is done. It keeps watching across connection failures.
	WatchLeader(ctx context.Context) <-chan LeaderInfo
	// Close releases the connection.
	Close() error
}

// Leadership is a leader's hold on the cluster and its fenced stores.
type Leadership interface {
	// Epoch is the leadership's fencing token.
	Epoch() int64
	// Lost is closed when the leadership is lost: the lease expired or
	// could not be renewed. Its writes fail from then on, if not before.
	Lost() <-chan struct{}
	// Jobs is the job graph store.
	Jobs() JobGraphStore
	// Checkpoints is the completed-checkpoint store.
	Checkpoints() CheckpointStore
	// Resign gives the leadership up, so that a standby takes over at
	// once rather than when the lease expires.
	Resign(ctx context.Context) error
}

// JobGraphStore holds the submitted jobs that have not ended, each as the
// bytes the job manager needs to start it again.
type JobGraphStore interface {
	// Put records job id; it fails with ErrNotLeader unless the caller
	// still leads.
	Put(ctx context.Context, id string, job []byte) error
	// Remove forgets job id (it ended).
	Remove(ctx context.Context, id string) error
	// List returns every job, by id.
	List(ctx context.Context) (map[string][]byte, error)
}

// CompletedCheckpoint points at a job's latest completed checkpoint.
type CompletedCheckpoint struct {
	ID   int64  `json:"id"`
	Path string `json:"path"`
}

// CheckpointStore holds the latest completed checkpoint of each job.
type CheckpointStore interface {
	// Put records cp as job id's latest completed checkpoint; it fails
	// with ErrNotLeader unless the caller still leads. A checkpoint
	// older than the one recorded is refused.
	Put(ctx context.Context, id string, cp CompletedCheckpoint) error
	// Latest returns job id's latest completed checkpoint, and false if
	// it has none.
	Latest(ctx context.Context, id string) (CompletedCheckpoint, bool, error)
	// Reserve records that the leader may use checkpoint ids up to upTo
	// for job id (Flink's CheckpointIDCounter, by blocks); it fails with
	// ErrNotLeader unless the caller still leads. A successor starts
	// above the reserved ids, so that a deposed leader's late writes never
	// share a checkpoint's directory with its own.
	Reserve(ctx context.Context, id string, upTo int64) error
	// Reserved returns the highest checkpoint id reserved for job id (0:
	// none).
	Reserved(ctx context.Context, id string) (int64, error)
	// Remove forgets job id's checkpoints (it ended).
	Remove(ctx context.Context, id string) error
}
