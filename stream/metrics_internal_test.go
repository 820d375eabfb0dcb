package stream

import (
	"testing"

	"github.com/weirstream/weir/internal/runtime"
)

// TestJobStatusesMatchTheRuntime: stream's JobStatus mirrors the
// runtime's, converted by name (see jobMetrics), so the two lists must say
// the same states and agree on which end a job.
func TestJobStatusesMatchTheRuntime(t *testing.T) {
	pairs := []struct {
		s JobStatus
		r runtime.JobStatus
	}{
		{StatusCreated, runtime.StatusCreated}, {StatusRunning, runtime.StatusRunning},
		{StatusRestarting, runtime.StatusRestarting}, {StatusFailing, runtime.StatusFailing},
		{StatusFailed, runtime.StatusFailed}, {StatusCanceled, runtime.StatusCanceled},
		{StatusFinished, runtime.StatusFinished},
	}
	for _, p := range pairs {
		if string(p.s) != string(p.r) {
			t.Errorf("stream status %q, runtime status %q", p.s, p.r)
		}
		if p.s.Terminal() != p.r.Terminal() {
			t.Errorf("%s: Terminal %v in stream, %v in the runtime", p.s, p.s.Terminal(), p.r.Terminal())
		}
	}
}
