package stream

import (
	"context"

	"github.com/weirstream/weir/internal/launch"
)

// RestoreInfo describes the checkpoint or savepoint a job resumes from.
type RestoreInfo struct {
	// CheckpointID is the checkpoint's id; Path is where it was found.
	CheckpointID int64
	Path         string
	// JobID is the id of the job that took it.
	JobID string
	// SinkLocations maps the uid of each sink asked about to where the
	// checkpoint's job wrote its output (connector.Located); a sink
	// without a recorded location is absent.
	SinkLocations map[string]string
}

// InspectRestore resolves execution.state-recovery.path the way Execute
// will, and reads from the checkpoint where the sinks with the given uids
// wrote, so that a program resuming a job can write to the same place. It
// returns nil when the configuration sets no recovery path.
func (e *Environment) InspectRestore(ctx context.Context, sinkUIDs ...string) (*RestoreInfo, error) {
	r, err := launch.InspectRestore(ctx, e.settings(), sinkUIDs...)
	if r == nil || err != nil {
		return nil, err
	}
	return &RestoreInfo{CheckpointID: r.CheckpointID, Path: r.Path, JobID: r.JobID, SinkLocations: r.SinkLocations}, nil
}
