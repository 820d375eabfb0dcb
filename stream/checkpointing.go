package stream

import (
	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/runtime"
)

// checkpointing builds the runtime's checkpoint settings and finds the
// checkpoint to restore from, if any.
func (e *Environment) checkpointing(cp config.Checkpointing) (*runtime.CheckpointingOptions, *checkpoint.Metadata, error) {
	return nil, nil, errorf("checkpointing is not available yet")
}
