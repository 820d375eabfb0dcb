package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/examples/nexmark"
)

// NexmarkVsFlink configures `weir bench nexmark --vs-flink`: each query
// on weir (the job of examples/nexmark, over events generated in the
// process) and as Flink SQL (bench/flink's NexmarkSql, the reference
// suite's SQL over the same events written to JSON-lines files), in turn,
// over several rounds.
type NexmarkVsFlink struct {
	Nexmark NexmarkConfig // Query is unused: Queries says which
	Queries []string
	Backend string // weir's, one of SideBackends
	// FlinkBackends are Flink's backends, a side each (named flink if it
	// is one, else flink-BACKEND); nil: Backend.
	FlinkBackends []string
	Rounds        int
	// StartupRounds is in how many of the first rounds start-up is
	// measured (Workload.StartupRounds); 0: every round.
	StartupRounds int
	// EventsDir holds the generated event files, reused by later runs of
	// the same generator configuration.
	EventsDir string
	// Latency configures the latency phase.
	Latency LatencyPhase
	// Weir is the weir binary; Java and FlinkJar run Flink's side.
	Weir, Java, FlinkJar string
}

// WorkloadResult is one query's rows of the side-by-side table.
type WorkloadResult struct {
	Query string
	// Check says whether the two sides' results agreed: "equal (N rows)",
	// how they differ, or why they are not compared.
	Check string
	Equal bool
	SideBySide
	// Loop are the runs of the query's hand-written loop (RunLoopQuery),
	// one per round, if it has one.
	Loop []LoopResult
	// Latency is the query's latency phase, nil if it had none.
	Latency *LatencyResult
	// CheckpointCost is what checkpointing cost weir's side, nil if it
	// was not measured.
	CheckpointCost *CheckpointCost
}

// LoopPerCPU is the median events per CPU-second of r's loop runs, 0
// without any that was charged CPU time.
func (r WorkloadResult) LoopPerCPU() float64 {
	return loopPerCPU(r.Loop)
}

func loopPerCPU(runs []LoopResult) float64 {
	v := make([]float64, len(runs))
	for i, l := range runs {
		v[i] = l.PerCPUSecond()
	}
	if m := median(v); !math.IsNaN(m) {
		return m
	}
	return 0
}

// EventFiles returns the directory of c's events as JSON lines (one file
// per split), writing them unless a directory of the same configuration
// is there, and an empty directory of the same shape beside it.
func (c NexmarkVsFlink) EventFiles(log io.Writer) (dir, empty string, err error) {
	return c.eventFiles(c.Nexmark.Gen, log)
}

func (c NexmarkVsFlink) eventFiles(g nexmark.GenConfig, log io.Writer) (dir, empty string, err error) {
	dir = filepath.Join(c.EventsDir, fmt.Sprintf("nexmark-seed%d-events%d-splits%d-rate%g", g.Seed, g.Events, g.Splits, g.Rate))
	empty = filepath.Join(c.EventsDir, "nexmark-empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		return "", "", err
	}
	manifest := filepath.Join(dir, "_config.json")
	var have nexmark.GenConfig
	if b, err := os.ReadFile(manifest); err == nil && json.Unmarshal(b, &have) == nil && reflect.DeepEqual(have, g) {
		return dir, empty, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", "", err
	}
	if log != nil {
		fmt.Fprintf(log, "writing %d events into %s\n", g.Events, dir)
	}
	gen, err := nexmark.NewGenerator(g)
	if err != nil {
		return "", "", err
	}
	if _, err := gen.WriteFiles(dir); err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	// The manifest's name starts with '_', which Flink's file source
	// skips, as it does hidden files.
	b, err := json.Marshal(g)
	if err != nil {
		return "", "", err
	}
	return dir, empty, os.WriteFile(manifest, b, 0o644)
}

// Workload returns query q as a side-by-side workload over the event
// files: weir's side (a child `weir bench nexmark --child`) and Flink's.
// Same is nil: timed runs discard their rows and CheckQuery compares them.
func (c NexmarkVsFlink) Workload(q, input, empty string) (Workload, error) {
	_, ok := sideBackends[c.Backend]
	if !ok {
		return Workload{}, fmt.Errorf("backend %q: want one of %v", c.Backend, SideBackends())
	}
	g := c.Nexmark.Gen
	w := Workload{Name: q, Input: input, Events: g.Events, Empty: empty, StartupRounds: c.StartupRounds}
	result := func(r SideRun) string { return filepath.Join(r.Dir, "result.json") }
	w.Sides = append(w.Sides, Side{Name: "weir", Command: func(ctx context.Context, r SideRun) *exec.Cmd {
		events, splits := g.Events, g.Splits
		if r.Input == empty {
			events, splits = 1, 1 // the generator makes at least one event
		}
		args := []string{"bench", "nexmark", "--child", "--query", q, "--result", result(r),
			"--events", strconv.FormatInt(events, 10), "--splits", strconv.Itoa(splits),
			"--rate", strconv.FormatFloat(g.Rate, 'g', -1, 64), "--seed", strconv.FormatUint(g.Seed, 10),
			"--parallelism", strconv.Itoa(c.Nexmark.Parallelism), "--checkpoint", c.Nexmark.Checkpoint.String(),
			"--checkpoint-dir", r.Checkpoints, "--backend", c.Backend}
		if r.Latency != nil {
			args = append(args, "--latency-dir", r.LatencyDir, "--latency-from", strconv.FormatInt(r.Latency.From, 10),
				"--latency-until", strconv.FormatInt(r.Latency.Until, 10))
		} else if !r.Discard {
			args = append(args, "--output", r.Output)
		}
		return exec.CommandContext(ctx, c.Weir, args...)
	}, Checkpoints: func(r SideRun) ([]CheckpointStat, error) {
		b, err := os.ReadFile(result(r))
		if err != nil {
			return nil, err
		}
		var res NexmarkResult
		if err := json.Unmarshal(b, &res); err != nil {
			return nil, err
		}
		if len(res.CheckpointSizes) != len(res.Checkpoints) {
			return nil, fmt.Errorf("%s: %d checkpoint durations and %d sizes", result(r), len(res.Checkpoints), len(res.CheckpointSizes))
		}
		stats := make([]CheckpointStat, len(res.Checkpoints))
		for i, d := range res.Checkpoints {
			stats[i] = CheckpointStat{Duration: d, Size: res.CheckpointSizes[i]}
		}
		return stats, nil
	}})
	for _, fb := range c.flinkBackends() {
		if c.FlinkJar == "" {
			break
		}
		be, ok := sideBackends[fb]
		if !ok {
			return Workload{}, fmt.Errorf("flink backend %q: want one of %v", fb, SideBackends())
		}
		name := "flink"
		if len(c.flinkBackends()) > 1 {
			name += "-" + fb
		}
		w.Sides = append(w.Sides, Side{Name: name, Command: func(ctx context.Context, r SideRun) *exec.Cmd {
			args := append([]string{"-cp", c.FlinkJar, "org.weirstream.flinkbench.NexmarkSql", "--query", q,
				"--input", r.Input, "--checkpoint-dir", r.Checkpoints,
				"--parallelism", strconv.Itoa(c.Nexmark.Parallelism), "--checkpoint-interval-ms", strconv.FormatInt(c.Nexmark.Checkpoint.Milliseconds(), 10),
				"--rest-port", strconv.Itoa(r.RESTPort)}, be.flink...)
			if l := r.Latency; l != nil {
				args = append(args, "--latency-dir", r.LatencyDir, "--base-time", strconv.FormatInt(g.BaseTime, 10),
					"--latency-column", l.Spec.Column, "--latency-round-ms", strconv.FormatInt(l.Spec.RoundMs, 10),
					"--latency-offset-ms", strconv.FormatInt(l.Spec.OffsetMs, 10),
					"--latency-from", strconv.FormatInt(l.From, 10), "--latency-until", strconv.FormatInt(l.Until, 10))
			} else if !r.Discard {
				args = append(args, "--output", r.Output)
			}
			return exec.CommandContext(ctx, c.Java, args...)
		}})
	}
	return w, nil
}

// flinkBackends are c's Flink backends: FlinkBackends, or Backend.
func (c NexmarkVsFlink) flinkBackends() []string {
	if len(c.FlinkBackends) > 0 {
		return c.FlinkBackends
	}
	return []string{c.Backend}
}

// WeirBackendOptions returns weir's options for a side-by-side backend.
func WeirBackendOptions(backend string) ([]string, error) {
	be, ok := sideBackends[backend]
	if !ok {
		return nil, fmt.Errorf("backend %q: want one of %v", backend, SideBackends())
	}
	return be.weir, nil
}

// CheckQuery runs every side of w once over its input writing its rows,
// and compares the final contents of the query's table (for an updating
// query, what remains once every update and retraction applied). A
// difference is reported in the result, not as an error; an error is a
// run that failed or rows that do not read.
func CheckQuery(ctx context.Context, w Workload, work string) (equal bool, verdict string, err error) {
	t, err := nexmark.TableOf(w.Name)
	if err != nil {
		return false, "", err
	}
	dir := filepath.Join(work, "check-"+w.Name)
	rows := make([][]string, len(w.Sides))
	for i, s := range w.Sides {
		d := filepath.Join(dir, s.Name)
		if _, err := RunSide(ctx, s, w.Input, d, false); err != nil {
			return false, "", fmt.Errorf("%s, %s: %w", w.Name, s.Name, err)
		}
		if rows[i], err = readRows(s.Name, t, filepath.Join(d, "out")); err != nil {
			return false, "", fmt.Errorf("%s, %s: %w", w.Name, s.Name, err)
		}
	}
	if !t.Comparable {
		os.RemoveAll(dir)
		return false, "not compared (processing-time windows)", nil
	}
	if len(rows) < 2 {
		os.RemoveAll(dir)
		return true, fmt.Sprintf("%d rows (one side)", len(rows[0])), nil
	}
	var b strings.Builder
	var ties []string
	for j := 1; j < len(rows); j++ {
		d := nexmark.DiffRows(rows[0], rows[j])
		if d.OK() {
			continue
		}
		if t.Determined != nil {
			// A ROW_NUMBER query: rows tied on its ORDER BY may be
			// numbered in either order, so compare what it decides.
			pa, err := t.Project(rows[0])
			if err != nil {
				return false, "", err
			}
			pb, err := t.Project(rows[j])
			if err != nil {
				return false, "", err
			}
			if pd := nexmark.DiffRows(pa, pb); pd.OK() {
				ties = append(ties, fmt.Sprintf("%d rows of %s's differ from %s's only among rows tied on the ORDER BY", len(d.OnlyA), w.Sides[0].Name, w.Sides[j].Name))
				continue
			}
		}
		if b.Len() > 0 {
			b.WriteString("\n      ")
		}
		fmt.Fprintf(&b, "DIFFER: %d rows, %d only in %s's, %d only in %s's (of %d and %d; kept in %s)",
			len(d.OnlyA)+len(d.OnlyB), len(d.OnlyA), w.Sides[0].Name, len(d.OnlyB), w.Sides[j].Name, len(rows[0]), len(rows[j]), dir)
		for i, r := range d.OnlyA[:min(len(d.OnlyA), 2)] {
			fmt.Fprintf(&b, "\n      only %s's #%d: %s", w.Sides[0].Name, i+1, r)
		}
		for i, r := range d.OnlyB[:min(len(d.OnlyB), 2)] {
			fmt.Fprintf(&b, "\n      only %s's #%d: %s", w.Sides[j].Name, i+1, r)
		}
	}
	if b.Len() == 0 {
		os.RemoveAll(dir)
		if ties != nil {
			return true, fmt.Sprintf("equal on the columns the query decides, %s (%d rows; %s, whose numbering ROW_NUMBER leaves to arrival order)",
				strings.Join(t.Determined, ", "), len(rows[0]), strings.Join(ties, "; ")), nil
		}
		return true, fmt.Sprintf("equal (%d rows)", len(rows[0])), nil
	}
	return false, b.String(), nil
}

// readRows reads a side's rows: weir's lines (nexmark.Lines) from its
// committed files, Flink's Debezium-JSON changelog from its part files
// (not the in-progress ones, which are hidden).
func readRows(side string, t nexmark.Table, dir string) ([]string, error) {
	if side == "weir" {
		lines, err := file.ReadLines(dir)
		if err != nil {
			return nil, err
		}
		text := make([]string, len(lines))
		for i, l := range lines {
			text[i] = string(l.Text)
		}
		return nexmark.FinalRows(t, text)
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var all []byte
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		all = append(append(all, b...), '\n')
	}
	return nexmark.ChangelogRows(t, all)
}

// RunNexmarkVsFlink runs every query: first once per side writing its
// rows, compared (CheckQuery), then c.Rounds interleaved timed rounds
// (RunSideBySide). log gets a line per run.
func RunNexmarkVsFlink(ctx context.Context, c NexmarkVsFlink, work string, log io.Writer) ([]WorkloadResult, error) {
	if log == nil {
		log = io.Discard
	}
	input, empty, err := c.EventFiles(log)
	if err != nil {
		return nil, err
	}
	var out []WorkloadResult
	for _, q := range c.Queries {
		w, err := c.Workload(q, input, empty)
		if err != nil {
			return out, err
		}
		fmt.Fprintf(log, "%s: checking the results\n", q)
		equal, verdict, err := CheckQuery(ctx, w, work)
		if err != nil {
			return out, err
		}
		fmt.Fprintf(log, "  %s: %s\n", q, verdict)
		r, err := RunSideBySide(ctx, w, c.Rounds, filepath.Join(work, q), log)
		if err != nil {
			return out, err
		}
		res := WorkloadResult{Query: q, Check: verdict, Equal: equal, SideBySide: r}
		if c.Latency.Duration > 0 && (c.Latency.Queries == nil || slices.Contains(c.Latency.Queries, q)) {
			if res.Latency, err = c.runLatency(ctx, q, r, work, log); err != nil {
				return out, err
			}
		}
		if slices.Contains(LoopQueries(), q) {
			for range c.Rounds {
				l, err := RunLoopQuery(q, c.Nexmark.Gen)
				if err != nil {
					return out, err
				}
				fmt.Fprintf(log, "  hand-written loop (1 goroutine) %.2f CPU-s, %.0f events per CPU-second\n", l.CPU.Seconds(), l.PerCPUSecond())
				res.Loop = append(res.Loop, l)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// LatencyPhase configures the latency runs of a side-by-side Nexmark run:
// after its timed rounds, each query runs once per side over events
// released at a fixed rate (LatencyRun), and its rows' latencies are
// counted.
type LatencyPhase struct {
	// Rate is the events per second over all splits; 0: Fraction of the
	// slower side's median events per second in the timed rounds.
	Rate, Fraction float64
	// Duration is the span of due times counted, after Warmup; 0: no
	// latency phase.
	Duration, Warmup time.Duration
	// Queries are the queries that have a latency phase; nil: every one
	// that has a due time (nexmark.LatencyQueries).
	Queries []string
}

// LatencyWindow is what a latency run counts: rows of Spec due in
// [From, Until).
type LatencyWindow struct {
	Spec        nexmark.LatencySpec
	From, Until int64
}

// LatencyResult is a query's latency phase.
type LatencyResult struct {
	// Rate is the events per second over all splits; Events how many.
	Rate   float64
	Events int64
	Sides  []LatencySide
	// Skipped says why the query has no figures, if it has none.
	Skipped string
}

// LatencySide is one side's latencies.
type LatencySide struct {
	Name string
	Hist *LatencyHistogram
}

// latencyTail is how long the source goes on after the last due time
// counted: long enough for the watermark (four seconds behind) to pass
// it, so that no counted row is one that the end of the input fired.
const latencyTail = nexmark.WatermarkDelay + time.Second

// runLatency runs query q's latency phase: each side once over events at
// the phase's rate, r being the query's timed rounds.
func (c NexmarkVsFlink) runLatency(ctx context.Context, q string, r SideBySide, work string, log io.Writer) (*LatencyResult, error) {
	spec, err := nexmark.LatencyOf(q)
	if err != nil {
		return &LatencyResult{Skipped: "its rows have no due time"}, nil
	}
	rate := c.Latency.Rate
	if rate == 0 {
		capacity := math.Inf(1)
		for _, f := range FiguresOf(r) {
			capacity = min(capacity, median(f.Rate))
		}
		if math.IsNaN(capacity) || math.IsInf(capacity, 0) {
			return &LatencyResult{Skipped: "no events/s measured (runs no longer than start-up): give a rate"}, nil
		}
		rate = capacity * c.Latency.Fraction
	}
	g := c.Nexmark.Gen
	g.Rate = rate / float64(g.Splits)
	span := c.Latency.Warmup + c.Latency.Duration + latencyTail
	g.Events = max(int64(rate*span.Seconds()), int64(g.Splits))
	from := g.BaseTime + c.Latency.Warmup.Milliseconds()
	win := &LatencyWindow{Spec: spec, From: from, Until: from + c.Latency.Duration.Milliseconds()}
	lc := c
	lc.Nexmark.Gen = g
	input, empty, err := lc.eventFiles(g, log)
	if err != nil {
		return nil, err
	}
	w, err := lc.Workload(q, input, empty)
	if err != nil {
		return nil, err
	}
	res := &LatencyResult{Rate: rate, Events: g.Events}
	dir := filepath.Join(work, "latency-"+q)
	for _, s := range w.Sides {
		d := filepath.Join(dir, s.Name)
		run, err := runSide(ctx, s, input, d, true, win)
		if err != nil {
			return nil, fmt.Errorf("%s, latency run, %s: %w", q, s.Name, err)
		}
		h, err := ReadLatencyDir(filepath.Join(d, "latency"))
		if err != nil {
			return nil, fmt.Errorf("%s, latency run, %s: %w", q, s.Name, err)
		}
		fmt.Fprintf(log, "  latency at %.0f events/s  %-6s wall %8.2fs  rows counted %d  p50 %v  p99 %v\n", rate, s.Name, run.Wall.Seconds(),
			h.Count(), h.Quantile(0.5), h.Quantile(0.99))
		res.Sides = append(res.Sides, LatencySide{Name: s.Name, Hist: h})
	}
	return res, os.RemoveAll(dir)
}
