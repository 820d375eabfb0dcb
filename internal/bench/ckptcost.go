package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"
)

// noCheckpoints is the checkpoint interval of a run "without checkpoints":
// longer than any benchmark run, so that the only checkpoint is the one
// every bounded run takes at the end of its input to commit its
// exactly-once outputs, as a run with checkpoints takes too.
const noCheckpoints = time.Hour

// CheckpointCost is what periodic checkpoints cost weir: the same job run
// with a checkpoint every Interval and without checkpoints during the
// run, interleaved (with, without, with, without, …), each run's outputs
// equal to the oracle's.
type CheckpointCost struct {
	Interval time.Duration
	// Runs holds the two variants as sides: with checkpoints first.
	Runs SideBySide
}

// Throughput is the throughput that checkpointing loses, in percent of
// the runs' without it: 100 × (1 − events/s with ÷ events/s without),
// each round's within its pair, median [min–max]; NaN if the runs were
// too short to give a rate (see FiguresOf).
func (c CheckpointCost) Throughput() Spread {
	f := FiguresOf(c.Runs)
	if len(f) != 2 {
		return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	r := RatioOf(f[0].Rate, f[1].Rate)
	return Spread{Median: 100 * (1 - r.Median), Min: 100 * (1 - r.Max), Max: 100 * (1 - r.Min)}
}

// CPU is the CPU time that checkpointing adds, in percent of the runs'
// without it: 100 × (CPU-s with ÷ CPU-s without − 1), processing only
// (start-up left out), each round's within its pair, median [min–max].
func (c CheckpointCost) CPU() Spread {
	f := FiguresOf(c.Runs)
	if len(f) != 2 {
		return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	r := RatioOf(f[1].PerCPU, f[0].PerCPU)
	return Spread{Median: 100 * (r.Median - 1), Min: 100 * (r.Min - 1), Max: 100 * (r.Max - 1)}
}

// Checkpoints is the median number of checkpoints a run with them
// completed.
func (c CheckpointCost) Checkpoints() int {
	if len(c.Runs.Sides) == 0 {
		return 0
	}
	var n []float64
	for _, r := range c.Runs.Sides[0].Runs {
		n = append(n, float64(len(r.Checkpoints)))
	}
	if len(n) == 0 {
		return 0
	}
	return int(SpreadOf(n).Median)
}

// CheckpointCost runs weir's side of w (a Workload of c) over w's trace
// rounds times with checkpoints every c.Checkpoint and as many times
// without checkpoints during the run, interleaved, each run's outputs
// checked against the oracle (w.Same). Each run's files go under work;
// log, if not nil, gets a line per run.
func (c GatewayMeterBench) CheckpointCost(ctx context.Context, w Workload, rounds int, work string, log io.Writer) (CheckpointCost, error) {
	none := c
	none.Checkpoint, none.FlinkJar = noCheckpoints, ""
	nw, err := none.Workload(nil)
	if err != nil {
		return CheckpointCost{}, err
	}
	with, without := w.Sides[0], nw.Sides[0]
	with.Name, without.Name = "weir-ckpt", "weir-none"
	cw := Workload{Name: "gatewaymeter checkpoint cost", Input: w.Input, Events: w.Events, Empty: w.Empty,
		Sides: []Side{with, without},
		Same: func(dirs []string) error {
			for i, d := range dirs {
				if err := w.Same([]string{d}); err != nil {
					return fmt.Errorf("%s: %w", []string{with.Name, without.Name}[i], err)
				}
			}
			return nil
		}}
	r, err := RunSideBySide(ctx, cw, rounds, work, log)
	return CheckpointCost{Interval: c.Checkpoint, Runs: r}, err
}

// FormatCheckpointCost writes the line that reports c.
func FormatCheckpointCost(out io.Writer, c CheckpointCost) {
	fmt.Fprintf(out, "  checkpoints every %v against none during the run (weir, %d rounds interleaved, median [min–max]): ", c.Interval, len(c.Runs.Sides[0].Runs))
	if t := c.Throughput(); !math.IsNaN(t.Median) {
		fmt.Fprintf(out, "throughput lost %s, ", percent(t))
	} else {
		fmt.Fprintf(out, "throughput lost: runs too short to give a rate, ")
	}
	fmt.Fprintf(out, "CPU time added %s; %d checkpoints per run\n", percent(c.CPU()), c.Checkpoints())
}

func percent(s Spread) string {
	return fmt.Sprintf("%.1f %% [%.1f–%.1f]", s.Median, s.Min, s.Max)
}
