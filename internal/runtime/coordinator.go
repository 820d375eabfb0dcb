package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
)

// NewCoordinator returns the checkpoint coordinator for g, configured by
// cp, as the job master drives it.
func NewCoordinator(cp config.Checkpointing, jobID string, history int, g *JobGraph, sources, all []checkpoint.TaskID) (Coordinator, error) {
	cfg := coordinator.DefaultConfig()
	cfg.JobID = jobID
	cfg.Interval = cp.Interval
	cfg.MinPause = cp.MinPause
	cfg.Timeout = cp.Timeout
	cfg.MaxConcurrent = cp.MaxConcurrent
	cfg.TolerableFailed = cp.TolerableFailures
	cfg.NumRetained = cp.NumRetained
	cfg.Unaligned = cp.Unaligned
	cfg.HistorySize = history
	if cp.Mode == config.AtLeastOnce {
		cfg.Mode = config.AtLeastOnce
	}
	tasks := coordinator.Tasks{Sources: sources, All: all, MaxParallelism: map[string]int{}}
	for _, v := range g.Vertices {
		tasks.MaxParallelism[v.UID] = v.MaxParallelism
	}
	c, err := coordinator.New(cfg, tasks)
	if err != nil {
		return nil, err
	}
	return &coordinatorAdapter{c: c}, nil
}

// coordinatorAdapter translates between the coordinator's outputs and the
// job master's actions.
type coordinatorAdapter struct {
	c *coordinator.Coordinator
}

// Stats returns the coordinator's statistics.
func (a *coordinatorAdapter) Stats() coordinator.Snapshot { return a.c.Stats() }

func (a *coordinatorAdapter) Start(now time.Time) []CheckpointAction {
	return a.actions(a.c.Start(now))
}
func (a *coordinatorAdapter) Tick(now time.Time) []CheckpointAction { return a.actions(a.c.Tick(now)) }
func (a *coordinatorAdapter) NextDeadline() (time.Time, bool)       { return a.c.NextDeadline() }

func (a *coordinatorAdapter) TriggerNow(now time.Time) []CheckpointAction {
	_, out, err := a.c.TriggerManual(now, checkpoint.KindCheckpoint)
	if err != nil {
		// Too many in flight: one of them, or the next periodic trigger,
		// serves as the final checkpoint.
		return nil
	}
	return a.actions(out)
}

func (a *coordinatorAdapter) Ack(now time.Time, task checkpoint.TaskID, id int64, ack checkpoint.TaskAck) []CheckpointAction {
	out, _ := a.c.Ack(now, task, id, ack) // late and unknown acks are dropped
	return a.actions(out)
}

func (a *coordinatorAdapter) Decline(now time.Time, task checkpoint.TaskID, id int64, why DeclineReason, err error) []CheckpointAction {
	reason := coordinator.ReasonNewerBarrier
	switch why {
	case DeclineAsyncFailure:
		reason = coordinator.ReasonAsyncFailure
	case DeclineTaskClosing:
		reason = coordinator.ReasonTaskClosing
	case DeclineTaskNotReady:
		reason = coordinator.ReasonTaskNotReady
	}
	out, _ := a.c.Decline(now, task, id, fmt.Errorf("%w: %w", reason, err))
	return a.actions(out)
}

func (a *coordinatorAdapter) MetadataWritten(now time.Time, id int64, _ string, err error) []CheckpointAction {
	out, _ := a.c.MetadataWritten(now, id, err)
	return a.actions(out)
}

func (a *coordinatorAdapter) TaskFinished(now time.Time, task checkpoint.TaskID) []CheckpointAction {
	out, _ := a.c.TaskFinished(now, task)
	return a.actions(out)
}

func (a *coordinatorAdapter) Failover(now time.Time) []CheckpointAction {
	return a.actions(a.c.Restart(now))
}

func (a *coordinatorAdapter) Restored(now time.Time, md *checkpoint.Metadata) {
	a.c.Restored(now, md.CheckpointID, fmt.Sprintf("chk-%d", md.CheckpointID))
}

func (a *coordinatorAdapter) Invalid(now time.Time, id int64) []CheckpointAction {
	return a.actions(a.c.Invalid(now, id))
}

func (a *coordinatorAdapter) Stop(now time.Time) { a.c.Stop(now) }

func (a *coordinatorAdapter) actions(out []coordinator.Output) []CheckpointAction {
	acts := make([]CheckpointAction, 0, len(out))
	for _, o := range out {
		switch o := o.(type) {
		case coordinator.Trigger:
			acts = append(acts, TriggerCheckpoint{
				Barrier: Barrier{ID: o.ID, Timestamp: o.Timestamp.UnixNano(), Savepoint: o.Kind == checkpoint.KindSavepoint},
				Tasks:   o.Tasks,
			})
		case coordinator.WriteMetadata:
			md := o.Metadata
			acts = append(acts, WriteMetadata{Metadata: &md})
		case coordinator.NotifyComplete:
			acts = append(acts, NotifyComplete{ID: o.ID, Tasks: o.Tasks})
		case coordinator.NotifyAbort:
			reason := "aborted"
			if o.Reason != nil {
				reason = o.Reason.Error()
			}
			acts = append(acts, NotifyAbort{ID: o.ID, Reason: reason, Tasks: o.Tasks})
		case coordinator.Discard:
			acts = append(acts, DiscardCheckpoint{ID: o.ID})
		case coordinator.FailJob:
			err := o.Reason
			if err == nil {
				err = errors.New("checkpoint failures exceeded the tolerable number")
			}
			acts = append(acts, FailJob{Err: err})
		}
	}
	return acts
}
