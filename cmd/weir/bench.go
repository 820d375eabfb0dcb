package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirstream/weir/internal/bench"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure weir's throughput"}
	c := bench.DefaultKeyedSum()
	var snapshotKeys int
	rounds := 1
	ks := &cobra.Command{
		Use:   "keyed-sum",
		Short: "datagen → keyBy → running sum → discard, against a hand-written loop",
		Long: `keyed-sum runs datagen → keyBy → running sum in keyed value state →
discarding sink on the engine, once with checkpoints every --checkpoint and
once with checkpoints off, and times a single-goroutine Go loop folding the
same records into a map: the practical limit. It prints the throughputs,
the engine's share of the loop's, the cost of checkpointing in throughput
and in CPU time per record (the figure to trust on a machine busy with
other work), the last checkpoint's duration and the size of the state it
names, and the synchronous part of a snapshot of --snapshot-keys keys.
With --rounds N the two engine runs alternate N times (off, on, off, on,
…) and the cost is summarized as the median [min–max] of each round's
pair, which a machine busy with other work disturbs less than one pair.
With --incremental the checkpoints are incremental
(execution.checkpointing.incremental): on the heap, deltas over the
earlier checkpoints' keyed state.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Records < 1 || c.Keys < 1 || c.Parallelism < 1 || c.Partitions < 1 || rounds < 1 {
				return fmt.Errorf("--records, --keys, --parallelism, --partitions and --rounds must be at least 1")
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "keyed-sum: %d records, %d keys, parallelism %d, %d partitions\n", c.Records, c.Keys, c.Parallelism, c.Partitions)
			loop := bench.RunLoop(c)
			fmt.Fprintf(out, "  hand-written loop (1 goroutine)   %12.0f records/s\n", loop.PerSecond())
			off := c
			off.Checkpoint = 0
			var loss, extra []float64
			for round := range rounds {
				if rounds > 1 {
					fmt.Fprintf(out, "  round %d of %d\n", round+1, rounds)
				}
				noCkpt, err := bench.RunEngine(cmd.Context(), off)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "  engine, checkpoints off           %12.0f records/s  (%.2f of the loop)  %.3f CPU s/M records\n",
					noCkpt.PerSecond(), noCkpt.PerSecond()/loop.PerSecond(), noCkpt.CPUPerMillion())
				ckpt, err := bench.RunEngine(cmd.Context(), c)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "  engine, checkpoints every %-7v %12.0f records/s  (%.2f of the loop, %d checkpoints, %+.1f%% vs off)  %.3f CPU s/M records (%+.1f%% vs off), last checkpoint %v naming %s\n",
					c.Checkpoint, ckpt.PerSecond(), ckpt.PerSecond()/loop.PerSecond(), ckpt.Checkpoints, 100*(ckpt.PerSecond()/noCkpt.PerSecond()-1),
					ckpt.CPUPerMillion(), 100*(ckpt.CPUPerMillion()/noCkpt.CPUPerMillion()-1), ckpt.LastCheckpoint.Round(time.Millisecond), mib(ckpt.LastCheckpointSize))
				loss = append(loss, 100*(1-ckpt.PerSecond()/noCkpt.PerSecond()))
				extra = append(extra, 100*(ckpt.CPUPerMillion()/noCkpt.CPUPerMillion()-1))
			}
			if rounds > 1 {
				l, e := bench.SpreadOf(loss), bench.SpreadOf(extra)
				fmt.Fprintf(out, "  cost of checkpoints every %v over %d rounds, median [min–max] of each round's pair: throughput %.1f%% [%.1f–%.1f] lower, CPU per record %.1f%% [%.1f–%.1f] higher\n",
					c.Checkpoint, rounds, l.Median, l.Min, l.Max, e.Median, e.Min, e.Max)
			}
			d, err := bench.SnapshotSync(snapshotKeys)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "  synchronous snapshot of %d keys: %v\n", snapshotKeys, d.Round(time.Microsecond))
			return nil
		},
	}
	keyedSumFlags(ks.Flags(), &c)
	f := ks.Flags()
	f.IntVar(&snapshotKeys, "snapshot-keys", 1_000_000, "keys in the snapshot measured")
	f.IntVar(&rounds, "rounds", rounds, "pairs of engine runs, checkpoints off then on, whose cost of checkpoints is summarized")
	f.BoolVar(&c.Incremental, "incremental", false, "incremental checkpoints (execution.checkpointing.incremental)")
	cmd.AddCommand(ks, newBenchBackpressureCmd(), newBenchStateCmd(), newBenchNexmarkCmd(), newBenchGatewayMeterCmd())
	return cmd
}

func newBenchStateCmd() *cobra.Command {
	c := bench.DefaultState()
	backends := []string{"hashmap", "pebble", "pebble-incremental"}
	var suite bool
	cmd := &cobra.Command{
		Use:   "state",
		Short: "The keyed sum over many keys on each state backend: heap, pebble, pebble with incremental checkpoints",
		Long: `state runs datagen → keyBy → running sum in keyed value state → discarding
sink over --keys distinct keys, checkpointing every --checkpoint to a
temporary directory, once on each state backend: hashmap (the heap), pebble
with full checkpoints, and pebble with incremental ones
(execution.checkpointing.incremental). It prints each run's throughput, its
CPU time per million records, and its last checkpoint: duration, the full
size of the state it names, what it wrote itself, and the time a restore
takes to read and verify its state files from checkpoint storage (a local
directory here) and from local copies (local recovery,
execution.state-recovery.from-local). With --active, the first --keys
records write every key once and the rest change only that fraction of
them, so an incremental checkpoint has only the change to write. With
--rescale-to N, each backend's last checkpoint is then resumed at
parallelism N, and "rescale" is the time until every keyed subtask has
opened with its key groups' state, "rescale RSS" the most resident memory
during it (after the run's memory is returned to the system). "steady
written" is the median, over the later half of the run's checkpoints
(how many in brackets), of what each wrote itself as a share of the
state it names: with --active and an incremental backend, give the run
enough records after the first --keys for that half to come after every
key was written.

--value-bytes N makes each key's state a value of N incompressible bytes
(the sum in its first eight) instead of an int64, so that --keys × N is the
size of the state: with --active, the first --keys records write every key
once, and state far larger than --memory can be built and kept running.
--backends picks some of the backends (hashmap, pebble,
pebble-incremental). "peak RSS" is the most resident memory the process
had during the run (sampled every 50 ms), "RSS before" what it had when
the run started. --process-size sets taskmanager.memory.process.size, the
Go runtime's soft memory limit while each run lasts; without --memory,
the pebble stores then share managed memory, 0.4 of it
(taskmanager.memory.managed.fraction), rather than --memory each.

--suite runs three fixed scenarios one after the other and prints a table
for each: state within memory on each backend (500,000 keys, 80 M records),
a rescale from parallelism 4 to 2 on each (1 M keys), and 10 GiB of state in
pebble with incremental checkpoints under a 1 GiB process size (10 M keys
of 1,000 bytes, then 1 % of them changing, 300 M records, checkpoints every
10 s). It takes about 15 minutes and 25 GB of temporary disk.`,
		Example: `  weir bench state --suite
  weir bench state --keys 1000000 --records 8000000
  weir bench state --backends pebble-incremental --memory 512mb --value-bytes 1000 \
      --keys 8000000 --active 0.1 --records 10000000 --checkpoint 10s
  weir bench state --backends pebble-incremental --process-size 1gb --value-bytes 1000 \
      --keys 5000000 --active 0.1 --records 7000000 --checkpoint 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !suite {
				return runStateBench(cmd, c, backends, cmd.Flags().Changed("memory"))
			}
			var given []string
			cmd.Flags().Visit(func(f *pflag.Flag) {
				if f.Name != "suite" {
					given = append(given, "--"+f.Name)
				}
			})
			if len(given) > 0 {
				return fmt.Errorf("--suite runs fixed scenarios; it takes no %s", strings.Join(given, ", "))
			}
			for i, sc := range bench.StateSuite() {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d. %s\n", i+1, sc.Title)
				if err := runStateBench(cmd, sc.Config, sc.Backends, sc.Config.Memory != ""); err != nil {
					return fmt.Errorf("%s: %w", sc.Title, err)
				}
			}
			return nil
		},
	}
	keyedSumFlags(cmd.Flags(), &c.KeyedSumConfig)
	cmd.Flags().StringVar(&c.Memory, "memory", c.Memory, "pebble memory per keyed subtask (state.backend.pebble.memory); with --process-size and no --memory, managed memory instead")
	cmd.Flags().StringVar(&c.ProcessSize, "process-size", "", "taskmanager.memory.process.size: the run's soft memory limit and, without --memory, what pebble's managed memory is 0.4 of")
	cmd.Flags().Float64Var(&c.Active, "active", c.Active, "fraction of the keys that change once each key is written (0: all of them)")
	cmd.Flags().IntVar(&c.RescaleTo, "rescale-to", c.RescaleTo, "resume the last checkpoint at this parallelism and time the rescale (0: no rescale)")
	cmd.Flags().IntVar(&c.ValueBytes, "value-bytes", c.ValueBytes, "bytes of each key's value (the sum and incompressible padding); 0: an int64")
	cmd.Flags().StringSliceVar(&backends, "backends", backends, "backends to run, of hashmap, pebble, pebble-incremental")
	cmd.Flags().BoolVar(&suite, "suite", false, "run the fixed scenarios of state at scale one after the other (about 15 minutes, 25 GB of disk): the backends with state in memory, a rescale 4 → 2, 10 GiB of state under a 1 GiB process with 1 % of the keys changing")
	return cmd
}

// runStateBench runs the keyed sum of c on each of backends and prints a
// row per backend; memoryGiven says whether c.Memory was asked for (else,
// with a process size, the stores share managed memory).
func runStateBench(cmd *cobra.Command, c bench.StateConfig, backends []string, memoryGiven bool) error {
	if c.Records < 1 || c.Keys < 1 || c.Parallelism < 1 || c.Partitions < 1 || c.Checkpoint <= 0 {
		return fmt.Errorf("--records, --keys, --parallelism and --partitions must be at least 1, --checkpoint positive")
	}
	if c.RescaleTo < 0 {
		return fmt.Errorf("--rescale-to %d: want a parallelism of at least 1, or 0 for no rescale", c.RescaleTo)
	}
	if c.Active < 0 || c.Active >= 1 {
		return fmt.Errorf("--active %v: want a fraction of the keys in [0, 1), 0 for all of them", c.Active)
	}
	if c.ValueBytes != 0 && c.ValueBytes < 8 {
		return fmt.Errorf("--value-bytes %d: want at least 8 (the sum), or 0 for an int64", c.ValueBytes)
	}
	var runs []int
	for _, name := range backends {
		i := slices.IndexFunc(bench.StateBackends, func(b struct {
			Key, Name string
			Config    []string
		}) bool {
			return b.Key == name
		})
		if i < 0 {
			return fmt.Errorf("--backends: unknown backend %q (backends: hashmap, pebble, pebble-incremental)", name)
		}
		if slices.Contains(runs, i) {
			return fmt.Errorf("--backends: %s named twice", name)
		}
		runs = append(runs, i)
	}
	out := cmd.OutOrStdout()
	memory := "pebble memory " + c.Memory + " per subtask"
	if c.ProcessSize != "" {
		if !memoryGiven {
			c.Memory = ""
			memory = "pebble memory 0.4 of the process size (taskmanager.memory.managed.fraction), shared by a slot's subtasks"
		}
		memory += ", process size " + c.ProcessSize + " (the Go runtime's soft memory limit)"
	}
	fmt.Fprintf(out, "state: %d records, %d keys, parallelism %d, checkpoints every %v, %s, load %s\n",
		c.Records, c.Keys, c.Parallelism, c.Checkpoint, memory, loadAvg())
	if c.ValueBytes > 0 {
		fmt.Fprintf(out, "  values of %d bytes: %.1f MiB of state once every key is written\n", c.ValueBytes, float64(c.Keys)*float64(c.ValueBytes)/(1<<20))
	}
	if c.Active > 0 {
		fmt.Fprintf(out, "  after every key is written once, %.2f%% of the keys change\n", 100*c.Active)
	}
	if c.RescaleTo > 0 {
		fmt.Fprintf(out, "  rescale: the last checkpoint resumed at parallelism %d\n", c.RescaleTo)
	}
	fmt.Fprintf(out, "  %-26s %12s %12s %6s %10s %12s %12s %14s %14s %10s %12s %12s %12s %15s\n", "backend", "records/s", "CPU s/M rec", "ckpts", "last ckpt", "full", "written", "restore remote", "restore local", "rescale", "RSS before", "peak RSS", "rescale RSS", "steady written")
	for _, i := range runs {
		b := bench.StateBackends[i]
		r, err := bench.RunState(cmd.Context(), c, b.Config)
		if err != nil {
			return fmt.Errorf("%s: %w", b.Name, err)
		}
		rescale, rescaleRSS := "-", "-"
		if c.RescaleTo > 0 {
			rescale, rescaleRSS = r.Rescale.Round(time.Millisecond).String(), mib(r.RescalePeakRSS)
		}
		steady := "-"
		if r.SharesMeasured > 0 {
			steady = fmt.Sprintf("%.1f%% (%d)", 100*r.WrittenShare, r.SharesMeasured)
		}
		fmt.Fprintf(out, "  %-26s %12.0f %12.3f %6d %10v %12s %12s %14v %14v %10s %12s %12s %12s %15s\n", b.Name, r.PerSecond(),
			r.CPU.Seconds()/(float64(r.Records)/1e6), r.Checkpoints, r.LastDuration.Round(time.Millisecond), mib(r.LastFull), mib(r.LastWritten),
			r.RestoreRemote.Round(time.Microsecond), r.RestoreLocal.Round(time.Microsecond), rescale, mib(r.StartRSS), mib(r.PeakRSS), rescaleRSS, steady)
	}
	return nil
}

// keyedSumFlags adds the flags of a keyed-sum configuration to f.
func keyedSumFlags(f *pflag.FlagSet, c *bench.KeyedSumConfig) {
	f.Int64Var(&c.Records, "records", c.Records, "records to process")
	f.Int64Var(&c.Keys, "keys", c.Keys, "distinct keys")
	f.IntVar(&c.Parallelism, "parallelism", c.Parallelism, "parallelism of the job")
	f.IntVar(&c.Partitions, "partitions", c.Partitions, "datagen partitions")
	f.DurationVar(&c.Checkpoint, "checkpoint", c.Checkpoint, "checkpoint interval")
	f.StringVar(&c.CheckpointDir, "checkpoint-dir", c.CheckpointDir, `where checkpoints go (execution.checkpointing.dir); "" keeps them in memory`)
}

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func newBenchBackpressureCmd() *cobra.Command {
	c := bench.DefaultBackpressure()
	rounds := 3
	var modeNames []string
	for _, m := range bench.BackpressureModes {
		modeNames = append(modeNames, string(m))
	}
	cmd := &cobra.Command{
		Use:   "backpressure",
		Short: "Checkpoints under backpressure: aligned, unaligned, aligned with a timeout, aligned with buffer debloating",
		Long: `backpressure runs datagen → keyBy → a slow keyed operator (--cost of
processor time per record) → discarding sink in each of four modes:
aligned checkpoints, unaligned ones, aligned ones that switch to
unaligned after --aligned-timeout, and aligned ones with buffer
debloating (taskmanager.network.memory.buffer-debloat.enabled, target
--debloat-target). Every channel into the slow operator stays full, so
aligned barriers wait behind the queued records (at most --batch-size ×
--channel-capacity per channel, or with debloating what the operator
consumes within the target) and unaligned ones overtake them. --modes
picks some of the modes.

Each of --rounds rounds runs every mode once, for --warmup and then
--duration, the modes in a rotating order (round 1: aligned, unaligned,
timeout, debloat; round 2: unaligned, timeout, debloat, aligned; …) so
that what else the machine does falls on every mode alike. It prints, per
mode, the median throughput over the rounds (records the sink received
after the warm-up), its checkpoints' duration, alignment and persisted
in-flight bytes over all rounds, the slow operator's in-flight limit per
channel at the end and the most records an aligned barrier found ahead of
it on one channel, whether every checkpoint completed within twice the
interval, and the throughput ratio to the first mode, taken within each
round, median [min–max].`,
		Example: `  weir bench backpressure
  weir bench backpressure --cost 50us --rounds 5
  weir bench backpressure --cost 50us --modes aligned,aligned-debloat --debloat-target 20ms
  weir bench backpressure --cost 50us --batch-size 256 --channel-capacity 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Duration <= 0 || c.Checkpoint <= 0 || c.Parallelism < 1 || c.Cost < 0 || c.AlignedTimeout <= 0 || rounds < 1 || c.Warmup < 0 {
				return fmt.Errorf("--duration, --checkpoint and --aligned-timeout must be positive, --parallelism and --rounds at least 1, --cost and --warmup not negative")
			}
			if c.BatchSize < 0 || c.ChannelCapacity < 0 {
				return fmt.Errorf("--batch-size and --channel-capacity must not be negative (0: the engine's defaults)")
			}
			if c.DebloatTarget < time.Millisecond {
				return fmt.Errorf("--debloat-target must be at least 1ms")
			}
			var modes []bench.BackpressureMode
			for _, name := range modeNames {
				m := bench.BackpressureMode(name)
				if !slices.Contains(bench.BackpressureModes, m) {
					return fmt.Errorf("--modes: unknown mode %q (modes: %v)", name, bench.BackpressureModes)
				}
				if slices.Contains(modes, m) {
					return fmt.Errorf("--modes: %s named twice", name)
				}
				modes = append(modes, m)
			}
			if len(modes) == 0 {
				return fmt.Errorf("--modes: name at least one of %v", bench.BackpressureModes)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "backpressure: %d rounds of %v per mode after %v of warm-up, parallelism %d, %v per record in the slow operator, checkpoints every %v, batch size %s, channel capacity %s, debloat target %v, load %s\n",
				rounds, c.Duration, c.Warmup, c.Parallelism, c.Cost, c.Checkpoint, orDefault(c.BatchSize), orDefault(c.ChannelCapacity), c.DebloatTarget, loadAvg())
			runs := make(map[bench.BackpressureMode][]bench.BackpressureResult)
			for round := range rounds {
				for i := range modes {
					mode := modes[(round+i)%len(modes)]
					r, err := bench.RunBackpressure(cmd.Context(), c, mode)
					if err != nil {
						return fmt.Errorf("%s: %w", mode, err)
					}
					fmt.Fprintf(out, "  round %d  %-16s %10.0f records/s  %3d checkpoints\n", round+1, mode, r.PerSecond(), len(r.Durations))
					runs[mode] = append(runs[mode], r)
				}
			}
			fmt.Fprintf(out, "  %-22s %12s %6s %6s %10s %10s %10s %10s %10s %12s %12s %8s %10s %8s\n",
				"mode", "records/s", "ckpts", "failed", "dur p50", "dur p99", "dur max", "align p50", "align max", "persist p50", "persist max", "≤2×intvl", "limit/ch", "ahead")
			for _, mode := range modes {
				var rate []float64
				var durs, aligns []time.Duration
				var persisted []int64
				var failed, limit, ahead int64
				for _, r := range runs[mode] {
					rate = append(rate, r.PerSecond())
					durs, aligns, persisted = append(durs, r.Durations...), append(aligns, r.Alignments...), append(persisted, r.Persisted...)
					failed += r.Failed
					limit, ahead = max(limit, r.InFlightLimit), max(ahead, r.BarrierInFlight)
				}
				name := string(mode)
				switch mode {
				case bench.ModeAlignedTimeout:
					name += "=" + c.AlignedTimeout.String()
				case bench.ModeAlignedDebloat:
					name += "=" + c.DebloatTarget.String()
				}
				rel := ""
				if mode != modes[0] {
					var ratios []float64
					for i, r := range runs[mode] {
						ratios = append(ratios, r.PerSecond()/runs[modes[0]][i].PerSecond())
					}
					sp := bench.SpreadOf(ratios)
					rel = fmt.Sprintf("  throughput vs %s %+.1f%% [%+.1f%% – %+.1f%%]", modes[0], 100*(sp.Median-1), 100*(sp.Min-1), 100*(sp.Max-1))
				}
				lim := "-"
				if limit > 0 {
					lim = strconv.FormatInt(limit, 10)
				}
				q := func(d []time.Duration, p float64) string {
					return bench.Quantile(d, p).Round(time.Millisecond).String()
				}
				within := "yes"
				if failed > 0 || len(durs) == 0 || bench.Quantile(durs, 1) > 2*c.Checkpoint {
					within = "no"
				}
				fmt.Fprintf(out, "  %-22s %12.0f %6d %6d %10s %10s %10s %10s %10s %12s %12s %8s %10s %8d%s\n", name, bench.SpreadOf(rate).Median,
					len(durs), failed, q(durs, 0.5), q(durs, 0.99), q(durs, 1),
					q(aligns, 0.5), q(aligns, 1),
					kib(bench.Quantile(persisted, 0.5)), kib(bench.Quantile(persisted, 1)), within, lim, ahead, rel)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&rounds, "rounds", rounds, "rounds: each runs every mode once")
	f.DurationVar(&c.Duration, "duration", c.Duration, "how long each mode runs after its warm-up")
	f.DurationVar(&c.Warmup, "warmup", c.Warmup, "how long each mode runs before its throughput is counted")
	f.DurationVar(&c.Checkpoint, "checkpoint", c.Checkpoint, "checkpoint interval")
	f.DurationVar(&c.Cost, "cost", c.Cost, "processor time the slow operator spends per record")
	f.IntVar(&c.Parallelism, "parallelism", c.Parallelism, "parallelism of the job")
	f.DurationVar(&c.AlignedTimeout, "aligned-timeout", c.AlignedTimeout, "aligned-checkpoint timeout of the third mode")
	f.IntVar(&c.BatchSize, "batch-size", 0, "records per batch on the job's channels (0: the engine's default, 1024)")
	f.IntVar(&c.ChannelCapacity, "channel-capacity", 0, "batches a channel buffers (0: the engine's default, 4)")
	f.DurationVar(&c.DebloatTarget, "debloat-target", c.DebloatTarget, "buffer-debloating target of the aligned-debloat mode")
	f.StringSliceVar(&modeNames, "modes", modeNames, "modes to run, in this order within the first round")
	return cmd
}

// orDefault formats a data-plane size, 0 as the engine's default.
func orDefault(n int) string {
	if n == 0 {
		return "default"
	}
	return strconv.Itoa(n)
}

// kib formats a byte count in KiB, for the benchmark's table.
func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }
