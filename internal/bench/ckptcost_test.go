package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestCheckpointCostFigures: the cost is taken within each round's pair,
// start-up left out, and reported as lost throughput and added CPU time.
func TestCheckpointCostFigures(t *testing.T) {
	run := func(wall, cpu time.Duration, ckpts int) ProcessRun {
		return ProcessRun{Wall: wall, CPU: cpu, Checkpoints: make([]CheckpointStat, ckpts)}
	}
	startup := []ProcessRun{run(time.Second, time.Second, 0)}
	c := CheckpointCost{Interval: time.Second, Runs: SideBySide{Events: 1000, Sides: []SideResult{
		// Processing: 10 s, 20 s of CPU; then 11 s, 22 s.
		{Name: "weir-ckpt", Startup: startup, Runs: []ProcessRun{run(11*time.Second, 21*time.Second, 9), run(12*time.Second, 23*time.Second, 11)}},
		// Processing: 8 s, 16 s of CPU; then 11 s, 22 s.
		{Name: "weir-none", Startup: startup, Runs: []ProcessRun{run(9*time.Second, 17*time.Second, 0), run(12*time.Second, 23*time.Second, 0)}},
	}}}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	// Rates with/without: 100/125 = 0.8 (20 % lost), then 1 (0 % lost).
	if s := c.Throughput(); !near(s.Median, 10) || !near(s.Min, 0) || !near(s.Max, 20) {
		t.Errorf("throughput lost %+v, want 10 [0–20]", s)
	}
	// CPU with/without: 20/16 = 1.25 (25 % added), then 1.
	if s := c.CPU(); !near(s.Median, 12.5) || !near(s.Min, 0) || !near(s.Max, 25) {
		t.Errorf("CPU added %+v, want 12.5 [0–25]", s)
	}
	if n := c.Checkpoints(); n != 10 {
		t.Errorf("%d checkpoints per run, want 10", n)
	}
	var b strings.Builder
	FormatCheckpointCost(&b, c)
	for _, want := range []string{"every 1s", "2 rounds", "throughput lost 10.0 % [0.0–20.0]", "CPU time added 12.5 % [0.0–25.0]", "10 checkpoints per run"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("%q does not say %q", b.String(), want)
		}
	}
}
