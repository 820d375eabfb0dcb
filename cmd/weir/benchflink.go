package main

import (
	"errors"
	"fmt"
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
	var vsFlink bool
	var rounds int
	var work string
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
each side's events per CPU-second as a fraction of the loop's.

The Flink side is bench/flink/target/weir-flink-bench.jar; if it is missing
and Maven is on the PATH, the command builds it (mvn package in bench/flink).`,
		Example: `  weir bench gatewaymeter --vs-flink --lines 4000000 --rounds 3
  weir bench gatewaymeter --vs-flink --backend rocksdb`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Lines < 2 || rounds < 1 || c.Parallelism < 1 || c.Checkpoint <= 0 {
				return fmt.Errorf("--lines must be at least 2, --rounds and --parallelism at least 1, --checkpoint positive")
			}
			if !slices.Contains(bench.SideBackends(), c.Backend) {
				return fmt.Errorf("--backend %q: want one of %v", c.Backend, bench.SideBackends())
			}
			out := cmd.OutOrStdout()
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
			fmt.Fprintf(out, "gatewaymeter: %d events in %s, parallelism %d, checkpoints every %v to files, backend %s, %d rounds\n",
				w.Events, w.Input, c.Parallelism, c.Checkpoint, c.Backend, rounds)
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
			bench.FormatSideBySide(out, r)
			bench.FormatLoop(out, r, loops)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&vsFlink, "vs-flink", false, "run the same job on Apache Flink too, interleaved with weir")
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
	return cmd
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
