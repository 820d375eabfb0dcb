package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"time"

	gm "github.com/weirstream/weir/examples/gatewaymeter"
)

// SideManagedMemory is the managed memory of each side's one task
// manager with the rocksdb backend, which the embedded LSM stores of a
// slot share (a slot's share is it divided by the slots, one per
// subtask index, so by the parallelism): the size a Flink MiniCluster
// gives itself when none is set, set explicitly on both sides so that
// weir's pebble stores and Flink's RocksDB instances have the same
// budget.
const SideManagedMemory = "128mb"

// Backends of the side-by-side benchmarks: each names weir's options and
// Flink's for the same kind of state backend.
var sideBackends = map[string]struct{ weir, flink []string }{
	// State on the heap, full copy-on-write snapshots.
	"hashmap": {weir: []string{"state.backend.type=hashmap"}, flink: []string{"--backend", "hashmap"}},
	// An embedded LSM store with incremental checkpoints: weir's pebble,
	// Flink's RocksDB, both bounded by SideManagedMemory.
	"rocksdb": {
		weir: []string{"state.backend.type=pebble", "execution.checkpointing.incremental=true",
			"taskmanager.memory.managed.size=" + SideManagedMemory},
		flink: []string{"--backend", "rocksdb", "--managed-memory", SideManagedMemory},
	},
}

// SideBackends returns the backends the side-by-side benchmarks know.
func SideBackends() []string { return []string{"hashmap", "rocksdb"} }

// GatewayMeterBench configures `weir bench gatewaymeter`.
type GatewayMeterBench struct {
	// Lines is about how many lines the trace has: Lines/2 requests, each a
	// request and (but for 0.1 %) a response.
	Lines       int64
	Seed        uint64
	Parallelism int
	Checkpoint  time.Duration
	Backend     string // one of SideBackends
	// TraceDir holds generated traces, reused by later runs with the same
	// flags.
	TraceDir string
	// Weir is the weir binary that runs weir's side.
	Weir string
	// Java and FlinkJar run Flink's side; FlinkJar "" leaves it out.
	Java, FlinkJar string
}

// DefaultGatewayMeterBench is the configuration `weir bench gatewaymeter`
// starts from.
func DefaultGatewayMeterBench() GatewayMeterBench {
	return GatewayMeterBench{Lines: 2_000_000, Seed: 1, Parallelism: 2, Checkpoint: time.Second, Backend: "hashmap",
		TraceDir: filepath.Join(os.TempDir(), "weir-bench"), Java: "java"}
}

// Trace returns the trace of c in c.TraceDir, generating it unless a
// trace of the same flags is there, and the number of lines in it.
func (c GatewayMeterBench) Trace(requests int64, log io.Writer) (string, int64, error) {
	cfg := gm.DefaultGenConfig()
	cfg.Seed, cfg.Requests = c.Seed, requests
	dir := filepath.Join(c.TraceDir, fmt.Sprintf("gatewaymeter-seed%d-requests%d-partitions%d", cfg.Seed, cfg.Requests, cfg.Partitions))
	m, err := gm.ReadManifest(dir)
	if err != nil || !reflect.DeepEqual(m.Config, cfg) { // Progress is nil on both
		if err := os.RemoveAll(dir); err != nil {
			return "", 0, err
		}
		if log != nil {
			fmt.Fprintf(log, "generating %d requests into %s\n", requests, dir)
		}
		if m, err = gm.GenerateFiles(cfg, dir); err != nil {
			os.RemoveAll(dir)
			return "", 0, fmt.Errorf("generating the trace: %w", err)
		}
	}
	var lines int64
	for _, p := range m.Partitions {
		lines += p.Lines
	}
	return dir, lines, nil
}

// Workload returns GatewayMeter as a side-by-side workload over a trace of
// c: weir's side, and Flink's if c.FlinkJar is set. Every round, each
// side's outputs must equal the oracle's exactly.
func (c GatewayMeterBench) Workload(log io.Writer) (Workload, error) {
	be, ok := sideBackends[c.Backend]
	if !ok {
		return Workload{}, fmt.Errorf("backend %q: want one of %v", c.Backend, SideBackends())
	}
	input, events, err := c.Trace(c.Lines/2, log)
	if err != nil {
		return Workload{}, err
	}
	empty, _, err := c.Trace(0, log)
	if err != nil {
		return Workload{}, err
	}
	w := Workload{Name: "gatewaymeter", Input: input, Events: events, Empty: empty}
	w.Sides = append(w.Sides, Side{Name: "weir", Command: func(ctx context.Context, r SideRun) *exec.Cmd {
		args := []string{"run", "gatewaymeter", "--input", r.Input, "--output", r.Output, "--checkpoint-dir", r.Checkpoints,
			"--status-interval", "0"}
		for _, kv := range append([]string{
			"parallelism.default=" + strconv.Itoa(c.Parallelism),
			"execution.checkpointing.interval=" + strconv.FormatInt(c.Checkpoint.Milliseconds(), 10) + " ms",
			"execution.checkpointing.num-retained=1",
			"rest.port=" + strconv.Itoa(r.RESTPort),
			"web.checkpoints.history=10000",
		}, be.weir...) {
			args = append(args, "-D", kv)
		}
		return exec.CommandContext(ctx, c.Weir, args...)
	}})
	if c.FlinkJar != "" {
		w.Sides = append(w.Sides, Side{Name: "flink", Command: func(ctx context.Context, r SideRun) *exec.Cmd {
			args := append([]string{"-jar", c.FlinkJar, "--input", r.Input, "--output", r.Output, "--checkpoint-dir", r.Checkpoints,
				"--parallelism", strconv.Itoa(c.Parallelism), "--checkpoint-interval-ms", strconv.FormatInt(c.Checkpoint.Milliseconds(), 10),
				"--rest-port", strconv.Itoa(r.RESTPort)}, be.flink...)
			return exec.CommandContext(ctx, c.Java, args...)
		}})
	}
	oracle := sync.OnceValues(func() (gm.Outputs, error) { return gm.OracleFiles(input) })
	w.Same = func(dirs []string) error {
		want, err := oracle()
		if err != nil {
			return fmt.Errorf("the oracle: %w", err)
		}
		var errs []error
		for i, d := range dirs {
			got, err := gm.ReadOutputs(d)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", w.Sides[i].Name, err))
				continue
			}
			if rep := gm.Diff(want, got); !rep.OK() {
				errs = append(errs, fmt.Errorf("%s's outputs are not the oracle's:\n%s", w.Sides[i].Name, rep.Format(5)))
			}
		}
		return errors.Join(errs...)
	}
	return w, nil
}

// FormatSideBySide writes r as a table: per side, the medians over the
// rounds, and with two sides the ratio of the first to the second, median
// and min–max over the rounds, each round's ratio taken within its pair.
func FormatSideBySide(out io.Writer, r SideBySide) {
	fmt.Fprintf(out, "  %-10s %14s %14s %10s %12s %10s %16s %10s %10s %6s\n",
		"", "events/s", "events/CPU-s", "CPU s", "peak RSS", "wall s", "start-up wall,CPU", "ckpt p50", "ckpt p99", "ckpts")
	type fig struct{ rate, perCPU, rss []float64 }
	figs := make([]fig, len(r.Sides))
	for si, s := range r.Sides {
		f := &figs[si]
		var cpu, wall []float64
		for i, run := range s.Runs {
			f.rate = append(f.rate, float64(r.Events)/s.ProcessingWall(i).Seconds())
			f.perCPU = append(f.perCPU, float64(r.Events)/s.ProcessingCPU(i).Seconds())
			f.rss = append(f.rss, float64(run.MaxRSS))
			cpu = append(cpu, run.CPU.Seconds())
			wall = append(wall, run.Wall.Seconds())
		}
		ck := s.Checkpoints()
		fmt.Fprintf(out, "  %-10s %14.0f %14.0f %10.2f %8.0f MiB %10.2f %8.2fs,%5.2fs %10v %10v %6d\n", s.Name,
			SpreadOf(f.rate).Median, SpreadOf(f.perCPU).Median, SpreadOf(cpu).Median, SpreadOf(f.rss).Median/(1<<20), SpreadOf(wall).Median,
			medianOf(s.Startup, func(p ProcessRun) time.Duration { return p.Wall }).Seconds(),
			medianOf(s.Startup, func(p ProcessRun) time.Duration { return p.CPU }).Seconds(),
			Quantile(ck, 0.5).Round(time.Millisecond), Quantile(ck, 0.99).Round(time.Millisecond), len(ck))
	}
	if len(figs) != 2 || len(figs[0].rate) == 0 {
		return
	}
	ratio := func(a, b []float64) Spread {
		v := make([]float64, len(a))
		for i := range a {
			v[i] = a[i] / b[i]
		}
		return SpreadOf(v)
	}
	x := func(s Spread) string { return fmt.Sprintf("%.2f× [%.2f–%.2f]", s.Median, s.Min, s.Max) }
	a, b := r.Sides[0].Name, r.Sides[1].Name
	fmt.Fprintf(out, "  %s/%s per round, median [min–max]: events/s %s, events per CPU-second %s; peak RSS %s/%s %s\n",
		a, b, x(ratio(figs[0].rate, figs[1].rate)), x(ratio(figs[0].perCPU, figs[1].perCPU)),
		b, a, x(ratio(figs[1].rss, figs[0].rss)))
}

// RunGatewayMeterLoop is GatewayMeter's hand-written loop: the job's
// computation on one goroutine over the trace in dir, which holds events
// events, as the oracle does it (examples/gatewaymeter's OracleFiles:
// the partitions read merged by time, each line parsed by the job's
// parser, requests paired with their responses in a map, costs and
// latencies folded per window) with its output built and discarded.
// CPU is the goroutine's thread's.
func RunGatewayMeterLoop(dir string, events int64) (LoopResult, error) {
	runtime.GC()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	start := time.Now()
	out, err := gm.OracleFiles(dir)
	if err != nil {
		return LoopResult{}, err
	}
	return LoopResult{Query: "gatewaymeter", Events: events, Rows: int64(len(out.TenantCost) + len(out.ModelLatency) + len(out.Alerts) + len(out.Orphans) + len(out.DeadLetters)),
		CPU: threadCPU() - cpu0, Elapsed: time.Since(start)}, nil
}

// FormatLoop writes the line comparing each side's median events per
// CPU-second of processing with the loop's.
func FormatLoop(out io.Writer, r SideBySide, loops []LoopResult) {
	l := loopPerCPU(loops)
	if l == 0 {
		fmt.Fprintf(out, "  hand-written loop (1 goroutine): too short to be charged CPU time\n")
		return
	}
	fmt.Fprintf(out, "  hand-written loop (1 goroutine): %.0f events per CPU-second;", l)
	for _, f := range FiguresOf(r) {
		fmt.Fprintf(out, " %s %.2f of it", f.Name, median(f.PerCPU)/l)
	}
	fmt.Fprintln(out)
}
