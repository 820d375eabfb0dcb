package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/examples/nexmark"
	"github.com/weirstream/weir/internal/bench"
)

// vsFlinkFlags are the flags of `weir bench nexmark --vs-flink`.
type vsFlinkFlags struct {
	on                        bool
	rounds, startupRounds     int
	flinkJar, java, eventsDir string
	work, write, note         string
	latency                   bench.LatencyPhase
	latencyQueries            string
	flinkBackends             string
}

// vsFlinkOnly are the flags that mean something only with --vs-flink.
var vsFlinkOnly = []string{"rounds", "startup-rounds", "flink-jar", "java", "events-dir", "work-dir", "write", "note",
	"latency-rate", "latency-duration", "latency-warmup", "latency-query", "flink-backend"}

func (v *vsFlinkFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&v.on, "vs-flink", false, "run each query on weir and as Flink SQL, interleaved, and compare their results")
	f.IntVar(&v.rounds, "rounds", v.rounds, "with --vs-flink: rounds, each running every side once per query")
	f.IntVar(&v.startupRounds, "startup-rounds", 0, "with --vs-flink: measure each side's start-up (a run over no events) in this many of the first rounds; 0: every round")
	f.StringVar(&v.flinkJar, "flink-jar", v.flinkJar, "with --vs-flink: the Flink side's jar (bench/flink)")
	f.StringVar(&v.java, "java", v.java, "with --vs-flink: the java binary that runs the Flink side")
	f.StringVar(&v.eventsDir, "events-dir", v.eventsDir, "with --vs-flink: where the events are written as files and reused")
	f.StringVar(&v.work, "work-dir", "", "with --vs-flink: where the runs write rows and checkpoints (default: a temporary directory, removed)")
	f.StringVar(&v.write, "write", "", "with --vs-flink: write the results as Markdown to this file (BENCHMARKS.md), charts in its directory's bench/charts")
	f.StringVar(&v.note, "note", "", "with --write: a sentence for the report's header (e.g. what else ran on the machine)")
	f.StringVar(&v.flinkBackends, "flink-backend", "", "with --vs-flink: Flink's backends, a comma-separated list of hashmap and rocksdb (incremental checkpoints), a side each (default: --backend)")
	f.Float64Var(&v.latency.Rate, "latency-rate", 0, "with --vs-flink: events per second of the latency runs, over all splits (0: half the slower side's events/s)")
	f.DurationVar(&v.latency.Duration, "latency-duration", 30*time.Second, "with --vs-flink: the span of due times whose rows' latencies are counted (0: no latency runs)")
	f.DurationVar(&v.latency.Warmup, "latency-warmup", 5*time.Second, "with --vs-flink: the span of due times before it, not counted")
	f.StringVar(&v.latencyQueries, "latency-query", "", "with --vs-flink: the queries that have latency runs, a comma-separated list (default: every query run whose rows have a due time)")
}

// runNexmarkVsFlink is `weir bench nexmark --vs-flink`.
func runNexmarkVsFlink(cmd *cobra.Command, c bench.NexmarkConfig, v vsFlinkFlags) error {
	if v.rounds < 1 || v.startupRounds < 0 || c.Checkpoint <= 0 {
		return fmt.Errorf("--vs-flink needs --rounds of at least 1, --startup-rounds not negative and a positive --checkpoint")
	}
	if v.note != "" && v.write == "" {
		return fmt.Errorf("--note goes with --write")
	}
	queries, err := nexmarkQueries(c.Query)
	if err != nil {
		return err
	}
	v.latency.Fraction = 0.5
	if v.latency.Rate < 0 || v.latency.Duration < 0 || v.latency.Warmup < 0 {
		return fmt.Errorf("--latency-rate, --latency-duration and --latency-warmup must not be negative")
	}
	if v.latencyQueries != "" {
		for _, q := range strings.Split(v.latencyQueries, ",") {
			q = strings.TrimSpace(q)
			if !slices.Contains(queries, q) {
				return fmt.Errorf("--latency-query %s: not one of the queries run (--query)", q)
			}
			if _, err := nexmark.LatencyOf(q); err != nil {
				return fmt.Errorf("--latency-query: %w", err)
			}
			v.latency.Queries = append(v.latency.Queries, q)
		}
	}
	if err := ensureFlinkJar(cmd, v.flinkJar); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	backend := c.Backend
	if backend == "" {
		backend = "hashmap"
	}
	var flinkBackends []string
	if v.flinkBackends != "" {
		for _, b := range strings.Split(v.flinkBackends, ",") {
			b = strings.TrimSpace(b)
			if !slices.Contains(bench.SideBackends(), b) || slices.Contains(flinkBackends, b) {
				return fmt.Errorf("--flink-backend %q: want a list of distinct backends of %v", v.flinkBackends, bench.SideBackends())
			}
			flinkBackends = append(flinkBackends, b)
		}
	}
	cfg := bench.NexmarkVsFlink{Nexmark: c, Queries: queries, Backend: backend, FlinkBackends: flinkBackends, Rounds: v.rounds, StartupRounds: v.startupRounds, EventsDir: v.eventsDir,
		Weir: self, Java: v.java, FlinkJar: v.flinkJar, Latency: v.latency}
	work := v.work
	if work == "" {
		if work, err = os.MkdirTemp("", "weir-bench-nexmark-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	// What the command prints goes to the terminal and, for the report,
	// into a buffer.
	var printed bytes.Buffer
	out := io.MultiWriter(cmd.OutOrStdout(), &printed)
	loadBefore := loadAvg()
	start := time.Now()
	fmt.Fprintf(out, "nexmark --vs-flink: %d events on %d splits at %.0f events/s of event time, seed %d, parallelism %d, checkpoints every %v to files, backend %s, %d rounds, load %s\n",
		c.Gen.Events, c.Gen.Splits, c.Gen.Rate, c.Gen.Seed, c.Parallelism, c.Checkpoint, backendsText(backend, flinkBackends), v.rounds, loadBefore)
	results, err := bench.RunNexmarkVsFlink(cmd.Context(), cfg, work, out)
	if err != nil {
		return err
	}
	bench.FormatNexmarkVsFlink(out, results)
	loadAfter := loadAvg()
	fmt.Fprintf(out, "took %v, load %s\n", time.Since(start).Round(time.Second), loadAfter)
	var differ []string
	for _, r := range results {
		if !r.Equal && !strings.HasPrefix(r.Check, "not compared") {
			differ = append(differ, r.Query)
		}
	}
	var mismatch error
	if len(differ) > 0 {
		fmt.Fprintf(out, "results differ on %s (see above)\n", strings.Join(differ, ", "))
		mismatch = fmt.Errorf("weir's and Flink's results differ on %s", strings.Join(differ, ", "))
	} else {
		fmt.Fprintf(out, "results equal on every query compared\n")
	}
	// A report is written even when results differ (it shows where), but
	// the command then fails: figures of runs that disagree are no
	// comparison.
	if v.write != "" {
		if err := writeNexmarkReport(cmd, cfg, v, results, printed.String(), start, loadBefore, loadAfter); err != nil {
			return errors.Join(mismatch, err)
		}
	}
	return mismatch
}

// writeNexmarkReport writes the Nexmark section of v.write and its charts.
func writeNexmarkReport(cmd *cobra.Command, cfg bench.NexmarkVsFlink, v vsFlinkFlags, results []bench.WorkloadResult,
	printed string, start time.Time, loadBefore, loadAfter string) error {
	sec := bench.SectionOf("weir bench nexmark", "Nexmark", "nexmark", cfg.Backend, cfg.FlinkBackends)
	rep := bench.Report{
		Heading: sec.Heading, Command: sec.Command, Row: "query", When: start, Note: v.note,
		LoadBefore: loadBefore, LoadAfter: loadAfter, Output: printed,
		Machine: machineLines(cmd, v.java, v.flinkJar),
	}
	rep.Commands = append(rep.Commands, "go build -o weir ./cmd/weir", "mvn -q -f bench/flink/pom.xml package", shellJoin(append([]string{"./weir"}, os.Args[1:]...)))
	input, empty, err := cfg.EventFiles(nil)
	if err != nil {
		return err
	}
	w, err := cfg.Workload("QUERY", input, empty)
	if err != nil {
		return err
	}
	rep.Commands = append(rep.Commands, "", "# each timed run, a child process (QUERY, RUN and PORT vary):")
	rep.Commands = append(rep.Commands, childCommands(cmd, w, input, "EVENTS")...)
	g := cfg.Nexmark.Gen
	rep.Config = []string{
		fmt.Sprintf("Events: %d from weir's port of the reference generator (seed %d, %d splits at %.0f events/s of event time each, persons/auctions/bids 1/3/46); EVENTS is a directory of one JSON-lines file per split in the row type of nexmark-flink's datagen table.", g.Events, g.Seed, g.Splits, g.Rate),
		"weir generates the same events in its process (the generator's cost is in weir's CPU time); Flink reads and parses the files (the JSON format's cost is in Flink's).",
		fmt.Sprintf("Both sides: parallelism %d, checkpoints every %v to a local directory, backend %s (weir: %s%s).",
			cfg.Nexmark.Parallelism, cfg.Nexmark.Checkpoint, backendsText(cfg.Backend, cfg.FlinkBackends), backendText(cfg.Backend),
			flinkIncrementalText(cfg.Backend, cfg.FlinkBackends)),
		"Flink: the reference suite's table options (mini-batch 50,000 rows or 2 s, split distinct aggregates), local MiniCluster, OpenJDK defaults (G1, heap a quarter of RAM).",
		memoryText(cfg.Backend, cfg.FlinkBackends, cfg.Nexmark.Parallelism),
		"Results: before its timed rounds each query ran once per side writing its rows (weir: exactly-once files; Flink: the filesystem sink in Debezium JSON, a changelog), and the final contents of its table were compared as multisets of rows; an updating query's final content is, for weir, each key's latest version and, for Flink, its inserts less its retractions.",
	}
	return writeReportSection(cmd, v.write, sec, rep, results)
}

// childCommands are the command lines of w's sides' timed runs, the
// input's path shown as inputName.
func childCommands(cmd *cobra.Command, w bench.Workload, input, inputName string) []string {
	var lines []string
	for _, s := range w.Sides {
		c := s.Command(cmd.Context(), bench.SideRun{Input: input, Output: "RUN/out", Checkpoints: "RUN/checkpoints", RESTPort: 0, Dir: "RUN", Discard: true})
		name := filepath.Base(c.Path)
		if s.Name == "weir" {
			name = "./weir"
		}
		line := shellJoin(append([]string{name}, c.Args[1:]...))
		lines = append(lines, strings.ReplaceAll(strings.ReplaceAll(line, "rest.port=0", "rest.port=PORT"), "--rest-port 0", "--rest-port PORT"))
	}
	for i := range lines {
		lines[i] = strings.ReplaceAll(lines[i], input, inputName)
	}
	return lines
}

// writeReportSection draws the charts of results into bench/charts next
// to the report file path (their names start with sec.ChartPrefix) and
// writes rep as the report's section sec.
func writeReportSection(cmd *cobra.Command, path string, sec bench.Section, rep bench.Report, results []bench.WorkloadResult) error {
	prefix := sec.ChartPrefix
	charts := filepath.Join(filepath.Dir(path), "bench", "charts")
	if err := os.MkdirAll(charts, 0o755); err != nil {
		return err
	}
	var ckpts []bench.CheckpointSeries
	for _, r := range results {
		ckpts = append(ckpts, bench.CheckpointSeriesOf(r.SideBySide)...)
	}
	for _, c := range []struct {
		svg, file string
		ref       *string
	}{
		{bench.PerCPUChartSVG(results), prefix + "-events-per-cpu-second.svg", &rep.ChartPerCPU},
		{bench.RatioChartSVG(results), prefix + "-ratio.svg", &rep.ChartRatio},
		{bench.CheckpointSizeChartSVG(ckpts), prefix + "-checkpoint-duration-vs-state-size.svg", &rep.ChartCheckpoints},
	} {
		if c.svg == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(charts, c.file), []byte(c.svg), 0o644); err != nil {
			return err
		}
		*c.ref = "bench/charts/" + c.file
	}
	var md bytes.Buffer
	bench.WriteMarkdown(&md, rep, results)
	if err := bench.WriteSection(path, sec.Name, md.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote the section %q of %s and its charts in %s\n", sec.Name, path, charts)
	return nil
}

// shellJoin joins args as a shell would read them back, quoting those
// with spaces or quotes.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$;&|<>()*?`\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// flinkIncrementalText says, when Flink runs rocksdb (flink, or weir's
// backend when flink is nil), that its checkpoints are incremental.
func flinkIncrementalText(weir string, flink []string) string {
	if len(flink) == 0 {
		flink = []string{weir}
	}
	if slices.Contains(flink, "rocksdb") {
		return "; Flink's rocksdb checkpoints incrementally"
	}
	return ""
}

// backendsText names weir's backend and Flink's, if they differ.
func backendsText(weir string, flink []string) string {
	if len(flink) == 0 || (len(flink) == 1 && flink[0] == weir) {
		return weir
	}
	return fmt.Sprintf("%s for weir, %s for Flink (a side each)", weir, strings.Join(flink, " and "))
}

// memoryText says what bounds the state's memory on each side: the heap
// with hashmap; with rocksdb, the same managed memory on both, shared per
// slot by the slot's embedded stores. flink are Flink's backends (nil:
// weir's).
func memoryText(weir string, flink []string, parallelism int) string {
	if len(flink) == 0 {
		flink = []string{weir}
	}
	if weir != "rocksdb" && !slices.Contains(flink, "rocksdb") {
		return "Memory of the state: the heap on both sides (weir: the Go heap, GOGC 100 and no memory limit; Flink: the JVM heap, a quarter of RAM), no managed memory."
	}
	size, err := config.ParseMemorySize(bench.SideManagedMemory)
	if err != nil {
		return "Memory of the state: " + err.Error()
	}
	share := config.FormatMemorySize(size / int64(max(parallelism, 1)))
	var s strings.Builder
	fmt.Fprintf(&s, "Memory of the state with rocksdb: taskmanager.memory.managed.size %s, set explicitly on both sides (it is what a Flink MiniCluster takes when none is set), "+
		"and a slot's share of it (%s, one slot per subtask index: %d slots) bounds the embedded stores of that slot's keyed subtasks together: ",
		config.FormatMemorySize(size), share, max(parallelism, 1))
	var sides []string
	if weir == "rocksdb" {
		sides = append(sides, "weir's pebble stores (state.backend.rocksdb.memory.managed, true by default) share one block cache per slot, and split the rest evenly among the slot's keyed subtasks, each for its write-back caches of rows and its memtables (state.SlotMemory)")
	}
	if slices.Contains(flink, "rocksdb") {
		sides = append(sides, "Flink's RocksDB instances (state.backend.rocksdb.memory.managed, true by default) share one cache per slot for block cache and write buffers (Flink's default ratios)")
	}
	s.WriteString(strings.Join(sides, "; "))
	s.WriteString(". Beside it, weir's Go heap (GOGC 100, no memory limit) and Flink's JVM heap (a quarter of RAM) hold what is not state; peak RSS counts all of it.")
	return s.String()
}

func backendText(b string) string {
	if o, err := bench.WeirBackendOptions(b); err == nil {
		return strings.Join(o, ", ")
	}
	return b
}

// loadAvg is /proc/loadavg's three load averages, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// machineLines describes the machine and the versions of both sides.
func machineLines(cmd *cobra.Command, java, flinkJar string) []string {
	var lines []string
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, val, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(val)
				break
			}
		}
	}
	lines = append(lines, fmt.Sprintf("CPU: %d × %s (runtime.NumCPU)", runtime.NumCPU(), cpu))
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		l, _, _ := strings.Cut(string(b), "\n")
		lines = append(lines, "Memory: "+strings.Join(strings.Fields(l)[1:], " "))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		lines = append(lines, "Linux "+strings.TrimSpace(string(b)))
	}
	rev := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified {
			rev += " (with uncommitted changes)"
		}
	}
	if rev == "unknown" {
		// Built without VCS stamps (-buildvcs=false): ask git about the
		// working directory, which is the repository's when the command
		// runs from its root as documented.
		if out, err := exec.CommandContext(cmd.Context(), "git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
			rev = strings.TrimSpace(string(out)) + " (the working directory's, by git)"
			// What the bench commands write themselves (this file and its
			// charts) does not make the build's source differ.
			if st, err := exec.CommandContext(cmd.Context(), "git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!BENCHMARKS.md", ":!bench/charts").Output(); err == nil && len(st) > 0 {
				rev += " with uncommitted changes"
			}
		}
	}
	lines = append(lines, fmt.Sprintf("weir: commit %s, built with %s", rev, runtime.Version()))
	if out, err := exec.CommandContext(cmd.Context(), java, "-version").CombinedOutput(); err == nil {
		l, _, _ := strings.Cut(string(out), "\n")
		lines = append(lines, "Java: "+strings.TrimSpace(l))
	}
	if out, err := exec.CommandContext(cmd.Context(), java, "-cp", flinkJar, "org.weirstream.flinkbench.NexmarkSql", "--version").Output(); err == nil {
		lines = append(lines, "Apache Flink: "+strings.TrimSpace(string(out))+" (bench/flink, local MiniCluster)")
	}
	return lines
}
