package bench

import (
	"context"
	"testing"
	"time"
)

// TestBackpressureRuns keeps the backpressure benchmark working in the
// default suite: each mode, with the data plane's sizes set, counts the
// sink's records after its warm-up and completes checkpoints. It asserts
// no time.
func TestBackpressureRuns(t *testing.T) {
	c := DefaultBackpressure()
	c.Duration, c.Warmup, c.Checkpoint, c.Cost = 600*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond, 20*time.Microsecond
	c.BatchSize, c.ChannelCapacity = 64, 2
	for _, mode := range BackpressureModes {
		r, err := RunBackpressure(context.Background(), c, mode)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if (r.InFlightLimit > 0) != (mode == ModeAlignedDebloat) {
			t.Errorf("%s: in-flight limit %d, want one with debloating only", mode, r.InFlightLimit)
		}
		if r.Records <= 0 || len(r.Durations) == 0 || len(r.Durations) != len(r.Alignments) || len(r.Durations) != len(r.Persisted) {
			t.Errorf("%s: %d records, %d checkpoints (%d alignments, %d persisted): want records and checkpoints, one figure of each kind per checkpoint",
				mode, r.Records, len(r.Durations), len(r.Alignments), len(r.Persisted))
		}
	}
}
