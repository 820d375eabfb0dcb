package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/bench"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure weir's throughput"}
	c := bench.DefaultKeyedSum()
	var snapshotKeys int
	ks := &cobra.Command{
		Use:   "keyed-sum",
		Short: "datagen → keyBy → running sum → discard, against a hand-written loop",
		Long: `keyed-sum runs datagen → keyBy → running sum in keyed value state →
discarding sink on the engine, once with checkpoints every --checkpoint and
once with checkpoints off, and times a single-goroutine Go loop folding the
same records into a map: the practical limit. It prints the throughputs,
the engine's share of the loop's, the cost of checkpointing, and the
synchronous part of a snapshot of --snapshot-keys keys.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Records < 1 || c.Keys < 1 || c.Parallelism < 1 || c.Partitions < 1 {
				return fmt.Errorf("--records, --keys, --parallelism and --partitions must be at least 1")
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "keyed-sum: %d records, %d keys, parallelism %d, %d partitions\n", c.Records, c.Keys, c.Parallelism, c.Partitions)
			loop := bench.RunLoop(c)
			fmt.Fprintf(out, "  hand-written loop (1 goroutine)   %12.0f records/s\n", loop.PerSecond())
			off := c
			off.Checkpoint = 0
			noCkpt, err := bench.RunEngine(cmd.Context(), off)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "  engine, checkpoints off           %12.0f records/s  (%.2f of the loop)\n", noCkpt.PerSecond(), noCkpt.PerSecond()/loop.PerSecond())
			ckpt, err := bench.RunEngine(cmd.Context(), c)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "  engine, checkpoints every %-7v %12.0f records/s  (%.2f of the loop, %d checkpoints, %+.1f%% vs off)\n",
				c.Checkpoint, ckpt.PerSecond(), ckpt.PerSecond()/loop.PerSecond(), ckpt.Checkpoints, 100*(ckpt.PerSecond()/noCkpt.PerSecond()-1))
			d, err := bench.SnapshotSync(snapshotKeys)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "  synchronous snapshot of %d keys: %v\n", snapshotKeys, d.Round(time.Microsecond))
			return nil
		},
	}
	f := ks.Flags()
	f.Int64Var(&c.Records, "records", c.Records, "records to process")
	f.Int64Var(&c.Keys, "keys", c.Keys, "distinct keys")
	f.IntVar(&c.Parallelism, "parallelism", c.Parallelism, "parallelism of the job")
	f.IntVar(&c.Partitions, "partitions", c.Partitions, "datagen partitions")
	f.DurationVar(&c.Checkpoint, "checkpoint", c.Checkpoint, "checkpoint interval")
	f.IntVar(&snapshotKeys, "snapshot-keys", 1_000_000, "keys in the snapshot measured")
	cmd.AddCommand(ks)
	return cmd
}
