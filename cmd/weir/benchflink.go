package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/bench"
)

// defaultFlinkJar is where `mvn package` in bench/flink puts the Flink
// side of the side-by-side benchmarks, relative to the repository.
const defaultFlinkJar = "bench/flink/target/weir-flink-bench.jar"

func newBenchGatewayMeterCmd() *cobra.Command {
	c := bench.DefaultGatewayMeterBench()
	var vsFlink, ckptCost bool
	var rounds int
	var work, write, note string
	c.FlinkJar = defaultFlinkJar
	cmd := &cobra.Command{
		Use:   "gatewaymeter",
		Short: "GatewayMeter over a generated trace, on weir and (--vs-flink) on Apache Flink, interleaved",
		Long: `gatewaymeter generates a seeded trace of about --lines lines (or reuses one in
--trace-dir), then runs GatewayMeter over it --rounds times, each run a fresh
child process: weir (weir run gatewaymeter) and, with --vs-flink, the same job
as a Flink DataStream job in a local MiniCluster (bench/flink, Java 17), in
turn: weir, Flink, weir, Flink, … Both sides run with the same parallelism,
checkpoints every --checkpoint to files, and the --backend: hashmap (state
on the heap) or rocksdb (weir's pebble and Flink's RocksDB, both with
incremental checkpoints). Every round, each side's outputs must equal the
oracle's exactly, or the command fails.

Per side it prints: events per second and per CPU-second of processing (the
run less the side's start-up), CPU-seconds and peak RSS of the child process
as the kernel accounts it (rusage), wall time, start-up (the wall and CPU
time of a run over a trace with no events: process, job and shut-down),
and checkpoint durations p50/p99 from each side's REST API
(/jobs/:id/checkpoints). With --vs-flink it prints the ratios weir/Flink,
taken within each round, median and min–max over the rounds. Last, the limit
next to both: the same computation as a hand-written loop on one goroutine
over the same trace (the oracle's single pass, run once per round), and
each side's events per CPU-second as a fraction of the loop's. Then, with
--checkpoint-cost (the default), what checkpointing costs weir: its side
runs --rounds times more with checkpoints every --checkpoint and as many
without a checkpoint during the run (only the one at the end of the input
that commits the outputs, which every run takes), in turn, and the command
prints the throughput lost and the CPU time added, per round's pair,
median and min–max.

--write FILE (with --vs-flink) writes all that as the GatewayMeter section
of FILE (BENCHMARKS.md) of the --backend (hashmap and rocksdb have a
section each), keeping its other sections, with SVG charts drawn here in
FILE's directory under bench/charts (gatewaymeter-*.svg, with rocksdb
gatewaymeter-rocksdb-*.svg): events per CPU-second, the ratio, and
checkpoint duration against state size. With rocksdb both sides have the
same managed memory (taskmanager.memory.managed.size 128mb), which each
slot's stores share.

The Flink side is bench/flink/target/weir-flink-bench.jar; if it is missing
and Maven is on the PATH, the command builds it (mvn package in bench/flink).`,
		Example: `  weir bench gatewaymeter --vs-flink --lines 4000000 --rounds 3
  weir bench gatewaymeter --vs-flink --backend rocksdb
  weir bench gatewaymeter --vs-flink --lines 4000000 --rounds 3 --write BENCHMARKS.md
  weir bench gatewaymeter --vs-flink --backend rocksdb --rounds 3 --write BENCHMARKS.md`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Lines < 2 || rounds < 1 || c.Parallelism < 1 || c.Checkpoint <= 0 {
				return fmt.Errorf("--lines must be at least 2, --rounds and --parallelism at least 1, --checkpoint positive")
			}
			if !slices.Contains(bench.SideBackends(), c.Backend) {
				return fmt.Errorf("--backend %q: want one of %v", c.Backend, bench.SideBackends())
			}
			if (write != "" || note != "") && !vsFlink {
				return fmt.Errorf("--write and --note go with --vs-flink")
			}
			if note != "" && write == "" {
				return fmt.Errorf("--note goes with --write")
			}
			// What the command prints goes to the terminal and, for the
			// report, into a buffer.
			var printed bytes.Buffer
			out := io.MultiWriter(cmd.OutOrStdout(), &printed)
			var err error
			if c.Weir, err = os.Executable(); err != nil {
				return err
			}
			if !vsFlink {
				c.FlinkJar = ""
			} else if err := ensureFlinkJar(cmd, c.FlinkJar); err != nil {
				return err
			}
			w, err := c.Workload(out)
			if err != nil {
				return err
			}
			if work == "" {
				if work, err = os.MkdirTemp("", "weir-bench-gatewaymeter-"); err != nil {
					return err
				}
				defer os.RemoveAll(work)
			}
			loadBefore, start := loadAvg(), time.Now()
			fmt.Fprintf(out, "gatewaymeter: %d events in %s, parallelism %d, checkpoints every %v to files, backend %s, %d rounds, load %s\n",
				w.Events, w.Input, c.Parallelism, c.Checkpoint, c.Backend, rounds, loadBefore)
			r, err := bench.RunSideBySide(cmd.Context(), w, rounds, work, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "outputs equal to the oracle's on every side in every round\n")
			var loops []bench.LoopResult
			for range rounds {
				l, err := bench.RunGatewayMeterLoop(w.Input, w.Events)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "  hand-written loop (1 goroutine) %.2f CPU-s\n", l.CPU.Seconds())
				loops = append(loops, l)
			}
			var cost *bench.CheckpointCost
			if ckptCost {
				fmt.Fprintf(out, "weir with checkpoints every %v and without, in turn:\n", c.Checkpoint)
				cc, err := c.CheckpointCost(cmd.Context(), w, rounds, filepath.Join(work, "checkpoint-cost"), out)
				if err != nil {
					return err
				}
				cost = &cc
			}
			bench.FormatSideBySide(out, r)
			bench.FormatLoop(out, r, loops)
			if cost != nil {
				bench.FormatCheckpointCost(out, *cost)
			}
			loadAfter := loadAvg()
			fmt.Fprintf(out, "took %v, load %s\n", time.Since(start).Round(time.Second), loadAfter)
			if write == "" {
				return nil
			}
			return writeGatewayMeterReport(cmd, c, w, write, note, r, loops, cost, printed.String(), start, loadBefore, loadAfter)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&vsFlink, "vs-flink", false, "run the same job on Apache Flink too, interleaved with weir")
	f.BoolVar(&ckptCost, "checkpoint-cost", true, "run weir again without checkpoints during the run, interleaved with runs checkpointing every --checkpoint, and report what checkpointing costs")
	f.IntVar(&rounds, "rounds", 3, "rounds: each runs every side once")
	f.Int64Var(&c.Lines, "lines", c.Lines, "about how many lines the trace has (half as many requests)")
	f.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the trace")
	f.StringVar(&c.Backend, "backend", c.Backend, "state backend of both sides: hashmap or rocksdb (weir: pebble), incremental checkpoints with rocksdb")
	f.IntVar(&c.Parallelism, "parallelism", c.Parallelism, "parallelism of both jobs")
	f.DurationVar(&c.Checkpoint, "checkpoint", c.Checkpoint, "checkpoint interval of both jobs")
	f.StringVar(&c.TraceDir, "trace-dir", c.TraceDir, "where traces are generated and reused")
	f.StringVar(&work, "work-dir", "", "where the runs write outputs and checkpoints (default: a temporary directory, removed)")
	f.StringVar(&c.FlinkJar, "flink-jar", c.FlinkJar, "the Flink side's jar (bench/flink)")
	f.StringVar(&c.Java, "java", c.Java, "the java binary that runs the Flink side")
	f.StringVar(&write, "write", "", "with --vs-flink: write the results as the --backend's GatewayMeter section of this Markdown file (BENCHMARKS.md), charts in its directory's bench/charts")
	f.StringVar(&note, "note", "", "with --write: a sentence for the section's header (e.g. what else ran on the machine)")
	return cmd
}

// writeGatewayMeterReport writes the GatewayMeter section of the report
// file path and its charts.
func writeGatewayMeterReport(cmd *cobra.Command, c bench.GatewayMeterBench, w bench.Workload, path, note string,
	r bench.SideBySide, loops []bench.LoopResult, cost *bench.CheckpointCost, printed string, start time.Time, loadBefore, loadAfter string) error {
	sec := bench.SectionOf("weir bench gatewaymeter", "GatewayMeter", "gatewaymeter", c.Backend, nil)
	rep := bench.Report{
		Heading: sec.Heading, Command: sec.Command, Row: "job", When: start, Note: note,
		LoadBefore: loadBefore, LoadAfter: loadAfter, Output: printed, Machine: machineLines(cmd, c.Java, c.FlinkJar),
	}
	rep.Commands = append(rep.Commands, "go build -o weir ./cmd/weir", "mvn -q -f bench/flink/pom.xml package", shellJoin(append([]string{"./weir"}, os.Args[1:]...)))
	rep.Commands = append(rep.Commands, "", "# each timed run, a child process (RUN and PORT vary):")
	rep.Commands = append(rep.Commands, childCommands(cmd, w, w.Input, "TRACE")...)
	rep.Config = []string{
		fmt.Sprintf("Trace: %d lines (events) generated by examples/gatewaymeter (seed %d), one JSON-lines file per partition in TRACE; both sides read and parse the same files.", w.Events, c.Seed),
		fmt.Sprintf("Both sides: parallelism %d, checkpoints every %v to a local directory, backend %s (weir: %s%s), outputs as exactly-once files.",
			c.Parallelism, c.Checkpoint, c.Backend, backendText(c.Backend), flinkIncrementalText(c.Backend, nil)),
		"Flink: bench/flink's GatewayMeter DataStream job (a source with a split per trace file and per-split watermarks, one parse per line, Kryo off), local MiniCluster, OpenJDK defaults (G1, heap a quarter of RAM); docs/bench-flink.md says where it differs from weir's job.",
		memoryText(c.Backend, nil, c.Parallelism),
		"Results: every round, each side's outputs were diffed against examples/gatewaymeter's oracle and had to equal it exactly, or the command failed.",
	}
	res := []bench.WorkloadResult{{Query: "gatewaymeter", SideBySide: r, Loop: loops, Equal: true, CheckpointCost: cost,
		Check: "equal to the oracle's on both sides in every round"}}
	return writeReportSection(cmd, path, sec, rep, res)
}

// ensureFlinkJar builds the Flink side's jar with Maven if it is missing
// and is the default one.
func ensureFlinkJar(cmd *cobra.Command, jar string) error {
	if _, err := os.Stat(jar); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--flink-jar: %w", err)
	}
	pom := filepath.Join(filepath.Dir(filepath.Dir(jar)), "pom.xml")
	if _, err := os.Stat(pom); jar != defaultFlinkJar || err != nil {
		return fmt.Errorf("--flink-jar %s does not exist: build it with mvn -q -f bench/flink/pom.xml package (Java 17, Maven), from the repository's root", jar)
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("--flink-jar %s does not exist and mvn is not on the PATH: install Java 17 and Maven, then run mvn -q -f %s package", jar, pom)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "building %s (mvn -q -B -f %s package)\n", jar, pom)
	start := time.Now()
	b := exec.CommandContext(cmd.Context(), mvn, "-q", "-B", "-f", pom, "package")
	b.Stdout, b.Stderr = cmd.ErrOrStderr(), cmd.ErrOrStderr()
	if err := b.Run(); err != nil {
		return fmt.Errorf("building the Flink side: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "built in %v\n", time.Since(start).Round(time.Second))
	return nil
}
