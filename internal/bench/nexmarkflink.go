package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	Backend string // one of SideBackends
	Rounds  int
	// StartupRounds is in how many of the first rounds start-up is
	// measured (Workload.StartupRounds); 0: every round.
	StartupRounds int
	// EventsDir holds the generated event files, reused by later runs of
	// the same generator configuration.
	EventsDir string
	// Weir is the weir binary; Java and FlinkJar run Flink's side.
	Weir, Java, FlinkJar string
}

// NexmarkQueryResult is one query's rows of the side-by-side table.
type NexmarkQueryResult struct {
	Query string
	// Check says whether the two sides' results agreed: "equal (N rows)",
	// how they differ, or why they are not compared.
	Check string
	Equal bool
	SideBySide
	// Loop are the runs of the query's hand-written loop (RunLoopQuery),
	// one per round, if it has one.
	Loop []LoopResult
}

// LoopPerCPU is the median events per CPU-second of r's loop runs, 0
// without any.
func (r NexmarkQueryResult) LoopPerCPU() float64 {
	if len(r.Loop) == 0 {
		return 0
	}
	v := make([]float64, len(r.Loop))
	for i, l := range r.Loop {
		v[i] = l.PerCPUSecond()
	}
	return SpreadOf(v).Median
}

// EventFiles returns the directory of c's events as JSON lines (one file
// per split), writing them unless a directory of the same configuration
// is there, and an empty directory of the same shape beside it.
func (c NexmarkVsFlink) EventFiles(log io.Writer) (dir, empty string, err error) {
	g := c.Nexmark.Gen
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
	be, ok := sideBackends[c.Backend]
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
		if !r.Discard {
			args = append(args, "--output", r.Output)
		}
		return exec.CommandContext(ctx, c.Weir, args...)
	}, Checkpoints: func(r SideRun) ([]time.Duration, error) {
		b, err := os.ReadFile(result(r))
		if err != nil {
			return nil, err
		}
		var res NexmarkResult
		if err := json.Unmarshal(b, &res); err != nil {
			return nil, err
		}
		return res.Checkpoints, nil
	}})
	if c.FlinkJar != "" {
		w.Sides = append(w.Sides, Side{Name: "flink", Command: func(ctx context.Context, r SideRun) *exec.Cmd {
			args := append([]string{"-cp", c.FlinkJar, "org.weirstream.flinkbench.NexmarkSql", "--query", q,
				"--input", r.Input, "--checkpoint-dir", r.Checkpoints,
				"--parallelism", strconv.Itoa(c.Nexmark.Parallelism), "--checkpoint-interval-ms", strconv.FormatInt(c.Nexmark.Checkpoint.Milliseconds(), 10),
				"--rest-port", strconv.Itoa(r.RESTPort)}, be.flink...)
			if !r.Discard {
				args = append(args, "--output", r.Output)
			}
			return exec.CommandContext(ctx, c.Java, args...)
		}})
	}
	return w, nil
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
	d := nexmark.DiffRows(rows[0], rows[1])
	if d.OK() {
		os.RemoveAll(dir)
		return true, fmt.Sprintf("equal (%d rows)", len(rows[0])), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "DIFFER: %d rows, %d only in %s's, %d only in %s's (of %d and %d; kept in %s)",
		len(d.OnlyA)+len(d.OnlyB), len(d.OnlyA), w.Sides[0].Name, len(d.OnlyB), w.Sides[1].Name, len(rows[0]), len(rows[1]), dir)
	for i, r := range d.OnlyA[:min(len(d.OnlyA), 2)] {
		fmt.Fprintf(&b, "\n      only %s's #%d: %s", w.Sides[0].Name, i+1, r)
	}
	for i, r := range d.OnlyB[:min(len(d.OnlyB), 2)] {
		fmt.Fprintf(&b, "\n      only %s's #%d: %s", w.Sides[1].Name, i+1, r)
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
func RunNexmarkVsFlink(ctx context.Context, c NexmarkVsFlink, work string, log io.Writer) ([]NexmarkQueryResult, error) {
	if log == nil {
		log = io.Discard
	}
	input, empty, err := c.EventFiles(log)
	if err != nil {
		return nil, err
	}
	var out []NexmarkQueryResult
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
		res := NexmarkQueryResult{Query: q, Check: verdict, Equal: equal, SideBySide: r}
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
