package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/internal/ha"
)

// WithStandby makes the job manager start as a standby of a highly
// available cluster: until Lead it refuses every call and session with
// codes.Unavailable and a message naming the leader, which leader
// returns ("" while none is known).
func WithStandby(leader func() string) JobManagerOption {
	return func(m *JobManager) { m.standby = leader }
}

// WithCheckpointRecorded calls f after each completed checkpoint is
// recorded in the completed-checkpoint store and before any subtask is
// notified of it (tests stop the process there).
func WithCheckpointRecorded(f func(jobID string, id int64)) JobManagerOption {
	return func(m *JobManager) { m.recorded = f }
}

// leading is the job manager's leadership.
type leading struct {
	l ha.Leadership
	// lost is called once the leadership is found lost.
	lost func(error)
	once sync.Once
}

// epoch returns the leader epoch (0: not highly available).
func (m *JobManager) epoch() int64 {
	if ld := m.lead.Load(); ld != nil {
		return ld.l.Epoch()
	}
	return 0
}

// ErrStandby is the refusal of a standby job manager; its message names
// the leader.
var ErrStandby = errors.New("this job manager is a standby")

func (m *JobManager) refuseStandby() error {
	if m.lead.Load() != nil {
		return nil
	}
	leader := m.standby()
	if leader == "" {
		return status.Errorf(codes.Unavailable, "%v; no leader is elected yet", ErrStandby)
	}
	return status.Errorf(codes.Unavailable, "%v; the leader is at %s", ErrStandby, leader)
}

func (m *JobManager) leaderOnlyUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := m.refuseStandby(); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (m *JobManager) leaderOnlyStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := m.refuseStandby(); err != nil {
		return err
	}
	return h(srv, ss)
}

// Lead makes the job manager the cluster's leader under l: it serves
// calls from now on, stamps l's epoch on every message to task managers,
// records jobs and completed checkpoints in l's stores before acting on
// them, and recovers every job of the job graph store from its latest
// completed checkpoint. It waits for Serve to start. lost is called, once, when a write finds the
// leadership lost; the job manager must then do nothing more (its
// process exits), for a successor owns the jobs and their checkpoints.
func (m *JobManager) Lead(ctx context.Context, l ha.Leadership, lost func(error)) error {
	select {
	case <-m.serving:
	case <-ctx.Done():
		return ctx.Err()
	}
	if m.lead.Load() != nil {
		return errors.New("cluster: the job manager already leads")
	}
	m.lead.Store(&leading{l: l, lost: lost})
	m.log.Info("leading the cluster", "epoch", l.Epoch())
	jobs, err := l.Jobs().List(ctx)
	if err != nil {
		return fmt.Errorf("cluster: reading the jobs to recover: %w", err)
	}
	for id, b := range jobs {
		var sub Submission
		if err := json.Unmarshal(b, &sub); err != nil {
			m.log.Error("cannot recover a job: its record does not decode", "job_id", id, "err", err)
			continue
		}
		cp, ok, err := l.Checkpoints().Latest(ctx, id)
		if err != nil {
			return fmt.Errorf("cluster: reading the latest checkpoint of job %s: %w", id, err)
		}
		sub.RecoverFrom = ""
		if ok {
			sub.RecoverFrom = cp.Path
		}
		reserved, err := l.Checkpoints().Reserved(ctx, id)
		if err != nil {
			return fmt.Errorf("cluster: reading the checkpoint ids of job %s: %w", id, err)
		}
		// Above every id the predecessor reserved: a checkpoint it
		// completes late never shares a directory with a new one.
		sub.FirstCheckpointID = max(cp.ID, reserved) + 1
		m.log.Info("recovering job", "job_id", id, "job", sub.Job, "checkpoint", cp.ID, "path", cp.Path)
		if _, err := m.start(ctx, &sub, false); err != nil {
			m.log.Error("recovering job", "job_id", id, "err", err)
		}
	}
	return nil
}

// recordJob records sub in the job graph store, if highly available.
func (m *JobManager) recordJob(ctx context.Context, sub *Submission) error {
	ld := m.lead.Load()
	if ld == nil {
		return nil
	}
	b, err := json.Marshal(sub)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "job %s: %v", sub.JobID, err)
	}
	if err := ld.l.Jobs().Put(ctx, sub.JobID, b); err != nil {
		if errors.Is(err, ha.ErrNotLeader) {
			m.leadershipLost(err)
		}
		return status.Errorf(codes.Unavailable, "recording job %s for high availability: %v", sub.JobID, err)
	}
	return nil
}

// forgetJob removes an ended job from the stores, if highly available.
func (m *JobManager) forgetJob(id string) {
	ld := m.lead.Load()
	if ld == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, err := range []error{ld.l.Jobs().Remove(ctx, id), ld.l.Checkpoints().Remove(ctx, id)} {
		if errors.Is(err, ha.ErrNotLeader) {
			m.leadershipLost(err)
			return
		}
		if err != nil {
			m.log.Warn("forgetting an ended job in the high availability stores", "job_id", id, "err", err)
		}
	}
}

// leadershipLost reports the loss once.
func (m *JobManager) leadershipLost(err error) {
	ld := m.lead.Load()
	ld.once.Do(func() {
		m.log.Error("leadership lost: this job manager stops acting", "epoch", ld.l.Epoch(), "err", err)
		ld.lost(err)
	})
}

// idBlock is how many checkpoint ids a leader reserves at a time.
const idBlock = 1000

// fencedRetry runs write until it succeeds, retrying while the store
// does not answer. It returns ha.ErrNotLeader, having reported the loss,
// once the leadership is lost, and ctx's error when ctx ends first.
func (m *JobManager) fencedRetry(ctx context.Context, ld *leading, what string, write func() error) error {
	backoff := 100 * time.Millisecond
	for {
		err := write()
		if err == nil {
			return nil
		}
		select {
		case <-ld.l.Lost():
			err = fmt.Errorf("%w: %w", ha.ErrNotLeader, err)
		default:
		}
		if errors.Is(err, ha.ErrNotLeader) {
			m.leadershipLost(err)
			return err
		}
		m.log.Warn(what+"; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ld.l.Lost():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// reserveIDs reserves checkpoint ids up to upTo for the job, unless
// already reserved.
func (x *clusterExecutor) reserveIDs(ctx context.Context, ld *leading, upTo int64) error {
	err := x.m.fencedRetry(ctx, ld, "reserving checkpoint ids", func() error {
		return ld.l.Checkpoints().Reserve(ctx, x.sub.JobID, upTo)
	})
	if err == nil {
		for {
			cur := x.reserved.Load()
			if cur >= upTo || x.reserved.CompareAndSwap(cur, upTo) {
				break
			}
		}
	}
	return err
}

// reservedFor reports whether checkpoint id may be triggered: it is
// within the ids reserved in the store (ha.CheckpointStore.Reserve), so
// that a successor starts above it. Past half the block a reservation of
// the next goes out in the background; beyond the block the trigger
// waits for it. False means the leadership was lost: nothing may be sent.
func (x *clusterExecutor) reservedFor(id int64) bool {
	ld := x.m.lead.Load()
	if ld == nil {
		return true
	}
	ceiling := x.reserved.Load()
	switch {
	case id <= ceiling-idBlock/2:
		return true
	case id <= ceiling:
		if x.reserving.CompareAndSwap(false, true) {
			go func() {
				defer x.reserving.Store(false)
				_ = x.reserveIDs(x.m.ctx, ld, ceiling+idBlock)
			}()
		}
		return true
	}
	return x.reserveIDs(x.m.ctx, ld, id+idBlock-1) == nil
}

// PublishCheckpoint implements runtime.CheckpointPublisher: with high
// availability, the checkpoint becomes the job's latest in the
// completed-checkpoint store before any subtask hears it completed (and
// a sink commits). A store that does not answer is retried until it does
// or the leadership is lost; once lost, PublishCheckpoint never returns
// success, nor an error that would make the job master touch the
// checkpoint's files: it waits for ctx, as the process stops.
func (x *clusterExecutor) PublishCheckpoint(ctx context.Context, id int64, path string) error {
	ld := x.m.lead.Load()
	if ld == nil {
		return nil
	}
	err := x.m.fencedRetry(ctx, ld, "recording a completed checkpoint", func() error {
		return ld.l.Checkpoints().Put(ctx, x.sub.JobID, ha.CompletedCheckpoint{ID: id, Path: path})
	})
	if errors.Is(err, ha.ErrNotLeader) {
		<-ctx.Done()
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	x.m.log.Info("recorded completed checkpoint", "job_id", x.sub.JobID, "checkpoint", id, "epoch", ld.l.Epoch())
	if x.m.recorded != nil {
		x.m.recorded(x.sub.JobID, id)
	}
	return nil
}

// MayDiscard implements runtime.RetentionGate: with high availability,
// the job's end is recorded first (it leaves the stores), fenced, so that
// only the leader applies the retention policy to the job's checkpoints.
func (x *clusterExecutor) MayDiscard(error) bool {
	ld := x.m.lead.Load()
	if ld == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := x.m.fencedRetry(ctx, ld, "recording the end of a job", func() error {
		if err := ld.l.Jobs().Remove(ctx, x.sub.JobID); err != nil {
			return err
		}
		return ld.l.Checkpoints().Remove(ctx, x.sub.JobID)
	})
	return err == nil
}
