package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/examples/nexmark"
	"github.com/weirstream/weir/internal/bench"
)

func newBenchNexmarkCmd() *cobra.Command {
	c := bench.DefaultNexmark()
	var inProcess, child bool
	var writeEvents, result, kafkaBrokers string
	var lat bench.LatencyRun
	vs := vsFlinkFlags{rounds: 3, flinkJar: defaultFlinkJar, java: "java",
		eventsDir: filepath.Join(os.TempDir(), "weir-bench")}
	cmd := &cobra.Command{
		Use:   "nexmark",
		Short: "The Nexmark queries over generated events, with checkpoints",
		Long: `nexmark runs Nexmark queries (--query: a comma-separated list, or all) in
weir over --events events of the reference generator, generated in-process
on --splits splits, with checkpoints every --checkpoint, and prints per
query: events per second, the CPU-seconds of the run (user plus system,
from the operating system's accounting of the process), events per
CPU-second, the peak resident set, and the checkpoints' duration p50/p99.

Each query runs in a process of its own (this binary, started again), so
that its CPU time and peak memory are its alone; --in-process runs them in
this one instead (CPU per run, peak memory of the whole process).

--write-events DIR writes the same events as JSON lines, one file per
split in nexmark-flink's row format, and runs nothing: the input another
system reads to compare.

--kafka BROKERS first produces the events into a new topic on those
brokers (weir-bench-nexmark-<time>, split i into partition i, as
weir gen nexmark --to-kafka does), then runs each query reading the
topic from its earliest to its latest offsets, and deletes the topic at
the end: the figures then include Kafka's fetches and the JSON parsing
of every event.

--vs-flink runs each query on weir and as Flink SQL (bench/flink: the
reference suite's SQL, its source table and views over the same events
written as JSON lines to --events-dir, read by Flink's filesystem
connector with the reference's watermark, in a local MiniCluster), in
turn over --rounds rounds, each run a fresh child process, with the same
parallelism, checkpoint interval and --backend on both sides
(--flink-backend hashmap,rocksdb runs Flink with each, a side each, RocksDB
with incremental checkpoints, each compared with weir). Per query it
first runs each side once writing its rows to files and compares the
final content of the query's table (for an updating query, once every
update and retraction applied): a difference is reported (and written
with --write), and the command then fails.
The timed runs write to a sink that discards the rows (Flink: blackhole).
It prints per side events/s and events per CPU-second of processing (the
run less the side's start-up: a run over no events), CPU-seconds and peak
RSS of the child as the kernel accounts them, checkpoint p50/p99 and the
start-up, and the ratios weir/Flink within each round, median and
min–max.

After its timed rounds, each query whose rows have a due time (q0, q1,
q5, q7, q8, q11, q14; --latency-query narrows them) runs once more per
side for its end-to-end latency at a fixed rate: --latency-rate events
per second over all splits (default: half the slower side's median
events/s in the timed rounds), over events generated for that rate, each
released by the source at its event time on a shifted wall clock (the
same on both sides: Flink's source and sink in bench/flink do what
weir's do). A row's latency is the time it reaches the sink less the
time it was due: its bid's time for q0, q1 and q14; its window's end for
q5, q7, q8 and q11 (so it includes the watermark's four seconds). Rows
due in the first --latency-warmup are not counted, nor those of the
last seconds, which the end of the input would fire; --latency-duration
is the span counted (0: no latency runs). It prints p50/p99 per side.

--write FILE writes that as Markdown, the section of weir's --backend in
FILE (BENCHMARKS.md: hashmap and rocksdb have a section each), keeping its
other sections, with SVG charts drawn here in FILE's directory under
bench/charts (nexmark-*.svg, with --backend rocksdb nexmark-rocksdb-*.svg).
With rocksdb both sides have the same managed memory
(taskmanager.memory.managed.size 128mb), which each slot's stores share.`,
		Example: `  weir bench nexmark --query q0,q5 --events 2000000
  weir bench nexmark --query q5 --events 1000000 --kafka localhost:9092
  weir bench nexmark --vs-flink --query q0,q1,q5,q7 --events 2000000 --rounds 3 --write BENCHMARKS.md
  weir bench nexmark --vs-flink --query q0,q1,q5,q7,q8 --backend rocksdb --events 1000000 --rounds 2 --write BENCHMARKS.md
  weir bench nexmark --vs-flink --query q5 --flink-backend hashmap,rocksdb --latency-rate 20000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.Gen.Validate(); err != nil {
				return err
			}
			if c.Parallelism < 1 || c.Checkpoint < 0 {
				return fmt.Errorf("--parallelism must be at least 1 and --checkpoint not negative")
			}
			if c.Backend != "" && !slices.Contains(bench.SideBackends(), c.Backend) {
				return fmt.Errorf("--backend %q: want one of %v", c.Backend, bench.SideBackends())
			}
			out := cmd.OutOrStdout()
			if vs.on {
				if kafkaBrokers != "" {
					return fmt.Errorf("--kafka does not go with --vs-flink: Flink's side reads the events from files")
				}
				return runNexmarkVsFlink(cmd, c, vs)
			}
			if kafkaBrokers != "" {
				if c.Kafka = brokerList(kafkaBrokers); len(c.Kafka) == 0 {
					return fmt.Errorf("--kafka: no brokers in %q", kafkaBrokers)
				}
				if writeEvents != "" || lat.Dir != "" {
					return fmt.Errorf("--kafka does not go with --write-events or --latency-dir")
				}
			}
			if c.KafkaTopic != "" && (!child || kafkaBrokers == "") {
				return fmt.Errorf("--kafka-topic goes with --child and --kafka")
			}
			if child && kafkaBrokers != "" && c.KafkaTopic == "" {
				return fmt.Errorf("--kafka with --child needs --kafka-topic, the topic holding the events")
			}
			for _, name := range vsFlinkOnly {
				if cmd.Flags().Changed(name) {
					return fmt.Errorf("--%s goes with --vs-flink", name)
				}
			}
			if !child && (result != "" || c.Output != "" || lat.Dir != "") {
				return fmt.Errorf("--result, --output and --latency-dir go with --child")
			}
			if lat.Dir != "" {
				if c.Output != "" {
					return fmt.Errorf("--output and --latency-dir exclude each other")
				}
				lat.Base = c.Gen.BaseTime
				c.Latency = &lat
			}
			if writeEvents != "" {
				g, err := nexmark.NewGenerator(c.Gen)
				if err != nil {
					return err
				}
				names, err := g.WriteFiles(writeEvents)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %d events to %s\n", c.Gen.Events, strings.Join(names, ", "))
				return nil
			}
			queries, err := nexmarkQueries(c.Query)
			if err != nil {
				return err
			}
			if child {
				if len(queries) != 1 {
					return fmt.Errorf("a child run takes one query")
				}
				r, err := bench.RunNexmark(cmd.Context(), c)
				if err != nil {
					return err
				}
				if result != "" {
					b, err := json.Marshal(r)
					if err != nil {
						return err
					}
					return os.WriteFile(result, b, 0o644)
				}
				return json.NewEncoder(out).Encode(r)
			}
			fmt.Fprintf(out, "nexmark: %d events on %d splits at %.0f events/s of event time, seed %d, parallelism %d, checkpoints every %v\n",
				c.Gen.Events, c.Gen.Splits, c.Gen.Rate, c.Gen.Seed, c.Parallelism, c.Checkpoint)
			if len(c.Kafka) > 0 {
				topic, drop, err := produceNexmarkTopic(cmd.Context(), c)
				if err != nil {
					return err
				}
				defer drop()
				c.KafkaTopic = topic
				fmt.Fprintf(out, "  read from Kafka: topic %s on %s, %d partitions\n", topic, strings.Join(c.Kafka, ","), c.Gen.Splits)
			}
			fmt.Fprintf(out, "  %-5s %12s %9s %14s %11s %6s %10s %10s\n", "query", "events/s", "CPU s", "events/CPU-s", "peak RSS", "ckpts", "ckpt p50", "ckpt p99")
			for _, q := range queries {
				qc := c
				qc.Query = q
				var r bench.NexmarkResult
				if inProcess {
					r, err = bench.RunNexmark(cmd.Context(), qc)
				} else {
					r, err = runNexmarkChild(cmd, q, c.KafkaTopic)
				}
				if err != nil {
					return fmt.Errorf("%s: %w", q, err)
				}
				fmt.Fprintf(out, "  %-5s %12.0f %9.2f %14.0f %11s %6d %10v %10v\n", q, r.PerSecond(), r.CPU.Seconds(), r.PerCPUSecond(), mib(r.PeakRSS),
					len(r.Checkpoints), r.CheckpointQuantile(0.5).Round(time.Microsecond), r.CheckpointQuantile(0.99).Round(time.Microsecond))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Query, "query", c.Query, "queries to run: a comma-separated list of q0 … q22, or all")
	f.Int64Var(&c.Gen.Events, "events", c.Gen.Events, "events to generate, over all splits")
	f.IntVar(&c.Gen.Splits, "splits", c.Gen.Splits, "source splits (each a slice of the event ids on a timeline of its own)")
	f.Float64Var(&c.Gen.Rate, "rate", c.Gen.Rate, "events per second of event time on each split (the reference's first-event.rate)")
	f.Uint64Var(&c.Gen.Seed, "seed", c.Gen.Seed, "the generator's seed")
	f.IntVar(&c.Parallelism, "parallelism", c.Parallelism, "parallelism of the job")
	f.DurationVar(&c.Checkpoint, "checkpoint", c.Checkpoint, "checkpoint interval (0: no checkpoints)")
	f.StringVar(&c.CheckpointDir, "checkpoint-dir", c.CheckpointDir, `where checkpoints go (execution.checkpointing.dir); "" keeps them in memory`)
	f.BoolVar(&inProcess, "in-process", false, "run every query in this process rather than each in its own")
	f.StringVar(&writeEvents, "write-events", "", "write the events to this directory as JSON lines and run nothing")
	f.StringVar(&c.Backend, "backend", "", "state backend: hashmap, or rocksdb (weir: pebble, incremental checkpoints); default: weir's default")
	f.StringVar(&kafkaBrokers, "kafka", "", "produce the events into a new Kafka topic on these brokers (comma-separated) and read them from there")
	f.StringVar(&c.KafkaTopic, "kafka-topic", "", "with --child and --kafka: the topic holding the events")
	f.BoolVar(&child, "child", false, "run one query and print its result as JSON (what the parent process starts)")
	f.StringVar(&result, "result", "", "with --child: write the result to this file instead")
	f.StringVar(&c.Output, "output", "", "with --child: write the query's rows as canonical lines to exactly-once files in this directory")
	f.StringVar(&lat.Dir, "latency-dir", "", "with --child: pace the source and count the rows' latencies into this directory")
	f.Int64Var(&lat.From, "latency-from", 0, "with --latency-dir: count the rows due at this event time (Unix ms) or later")
	f.Int64Var(&lat.Until, "latency-until", 0, "with --latency-dir: count the rows due before this event time (Unix ms)")
	for _, name := range []string{"child", "result", "output", "latency-dir", "latency-from", "latency-until", "kafka-topic"} {
		_ = f.MarkHidden(name)
	}
	vs.register(f)
	return cmd
}

// nexmarkQueries resolves --query.
func nexmarkQueries(list string) ([]string, error) {
	if list == "all" {
		var names []string
		for _, q := range nexmark.Queries() {
			names = append(names, q.Name)
		}
		return names, nil
	}
	var names []string
	for _, q := range strings.Split(list, ",") {
		q = strings.TrimSpace(q)
		if _, err := nexmark.QueryByName(q); err != nil {
			return nil, fmt.Errorf("--query: %w", err)
		}
		names = append(names, q)
	}
	return names, nil
}

// runNexmarkChild runs query q in a new process of this binary with the
// command's flags, and takes its CPU time from the operating system's
// accounting of that process (rusage) and its peak memory from its VmHWM
// (bench.WatchPeakRSS), as the side-by-side runs do.
func runNexmarkChild(cmd *cobra.Command, q, kafkaTopic string) (bench.NexmarkResult, error) {
	self, err := os.Executable()
	if err != nil {
		return bench.NexmarkResult{}, err
	}
	args := []string{"bench", "nexmark", "--child", "--query", q}
	for _, name := range []string{"events", "splits", "rate", "seed", "parallelism", "checkpoint", "checkpoint-dir", "backend", "kafka"} {
		args = append(args, "--"+name+"="+cmd.Flags().Lookup(name).Value.String())
	}
	if kafkaTopic != "" {
		args = append(args, "--kafka-topic="+kafkaTopic)
	}
	var stdout bytes.Buffer
	child := exec.CommandContext(cmd.Context(), self, args...)
	child.Stdout, child.Stderr = &stdout, cmd.ErrOrStderr()
	if err := child.Start(); err != nil {
		return bench.NexmarkResult{}, fmt.Errorf("the child process: %w", err)
	}
	stopHWM := bench.WatchPeakRSS(child.Process.Pid)
	err = child.Wait()
	peak := stopHWM()
	if err != nil {
		return bench.NexmarkResult{}, fmt.Errorf("the child process: %w", err)
	}
	var r bench.NexmarkResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return bench.NexmarkResult{}, fmt.Errorf("the child process's result %q: %w", stdout.String(), err)
	}
	r.PeakRSS = peak
	if ru, ok := child.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.CPU = bench.RusageCPU(ru)
		if r.PeakRSS == 0 { // it ended before the first read
			r.PeakRSS = bench.RusageMaxRSS(ru)
		}
	}
	return r, nil
}

// produceNexmarkTopic writes c's events into a new topic on c.Kafka and
// returns its name and a function that deletes it.
func produceNexmarkTopic(ctx context.Context, c bench.NexmarkConfig) (string, func(), error) {
	g, err := nexmark.NewGenerator(c.Gen)
	if err != nil {
		return "", nil, err
	}
	topic := fmt.Sprintf("weir-bench-nexmark-%d", time.Now().UnixNano())
	if _, err := g.ProduceKafka(ctx, c.Kafka, topic); err != nil {
		return "", nil, err
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := nexmark.DeleteKafkaTopic(ctx, c.Kafka, topic); err != nil {
			fmt.Fprintf(os.Stderr, "weir: deleting topic %s: %v\n", topic, err)
		}
	}
	return topic, drop, nil
}
