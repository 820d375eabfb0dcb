package bench

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir/examples/nexmark"
)

// TestRunNexmark runs every query as `weir bench nexmark` does, on a few
// thousand events with checkpoints, so that the harness cannot rot; it
// asserts that each ran over every event, never a time.
func TestRunNexmark(t *testing.T) {
	c := DefaultNexmark()
	c.Gen.Events, c.Gen.Rate, c.Checkpoint = 3000, 1000, 10*time.Millisecond
	for _, q := range nexmark.Queries() {
		c.Query = q.Name
		r, err := RunNexmark(context.Background(), c)
		if err != nil {
			t.Fatalf("%s: %v", q.Name, err)
		}
		if r.Events != 3000 || r.Elapsed <= 0 || r.PeakRSS <= 0 {
			t.Fatalf("%s: %+v", q.Name, r)
		}
	}
	if _, err := RunNexmark(context.Background(), NexmarkConfig{Query: "q6", Gen: c.Gen, Parallelism: 1}); err == nil {
		t.Fatal("q6, which the suite does not have, ran")
	}
}

func TestCheckpointQuantile(t *testing.T) {
	r := NexmarkResult{Checkpoints: []time.Duration{5, 1, 4, 2, 3}}
	if p50, p99 := r.CheckpointQuantile(0.5), r.CheckpointQuantile(0.99); p50 != 3 || p99 != 5 {
		t.Fatalf("p50 %v, p99 %v; want 3 and 5", p50, p99)
	}
	if (NexmarkResult{}).CheckpointQuantile(0.5) != 0 {
		t.Fatal("a quantile of no checkpoints")
	}
}
