package stream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// slowSum is a running sum that spends a fixed amount of processor time on
// every record: the deliberately slow operator that backpressures every
// channel into it.
type slowSum struct {
	runningSum
	cost time.Duration
}

func (f *slowSum) ProcessElement(ctx *stream.Context[string, KeyedSum], r rec) error {
	for start := time.Now(); time.Since(start) < f.cost; {
	}
	return f.runningSum.ProcessElement(ctx, r)
}

// TestUnalignedCheckpointsUnderBackpressure runs a fast unbounded source
// into a slow keyed operator, so that every channel into it stays full, with
// aligned checkpoints, unaligned ones, and aligned ones that switch after a
// timeout of 5 ms. Aligned barriers wait behind the queued records, so a
// completed aligned checkpoint never holds channel state; unaligned barriers
// overtake them, and the records they passed are persisted with the
// checkpoint. The checkpoint durations are logged, not asserted: the
// benchmark (weir bench backpressure) measures them.
func TestUnalignedCheckpointsUnderBackpressure(t *testing.T) {
	for _, mode := range []struct {
		name  string
		extra []string
	}{
		{"aligned", nil},
		{"unaligned", []string{"execution.checkpointing.unaligned.enabled=true"}},
		{"aligned-timeout", []string{"execution.checkpointing.unaligned.enabled=true", "execution.checkpointing.aligned-checkpoint-timeout=5 ms"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			ev := streamtest.NewEvents()
			env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, append([]string{"parallelism.default=2",
				"execution.checkpointing.interval=20 ms", "execution.checkpointing.dir=" + dir,
				"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION"}, mode.extra...)...)),
				stream.WithLogger(quiet), stream.WithJobID("backpressure"), stream.WithEvents(ev.Record))
			if err != nil {
				t.Fatal(err)
			}
			gen := func(p int, seq int64) rec {
				return rec{Key: fmt.Sprintf("k%02d", datagen.Mix(9, p, seq)%20), Value: 1, P: p, Seq: seq}
			}
			src, err := datagen.New(gen, datagen.Partitions(2), datagen.BatchSize(256))
			if err != nil {
				t.Fatal(err)
			}
			in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
			sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }),
				stream.KeyedProcessFunction[string, rec, KeyedSum](&slowSum{cost: 20 * time.Microsecond}), stream.Uid("sum"))
			stream.SinkTo(sums, streamtest.NewCollector[KeyedSum](true), stream.Uid("sink"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client, err := env.ExecuteAsync(ctx, "backpressure")
			if err != nil {
				t.Fatal(err)
			}
			const want = 4
			var durations []time.Duration
			last := int64(0)
			deadline := time.Now().Add(2 * time.Minute)
			for len(durations) < want {
				if time.Now().After(deadline) {
					t.Fatalf("%d checkpoints completed in two minutes under backpressure, want %d", len(durations), want)
				}
				if c := client.Metrics().LastCheckpoint; c.ID > last {
					last = c.ID
					durations = append(durations, c.Duration)
				}
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			client.Wait()
			t.Logf("%s: checkpoint durations %v, %d checkpoints failed", mode.name, durations, ev.Count(stream.EventCheckpointFailed))

			st, err := storage.Open(context.Background(), dir, "backpressure")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			md, _, err := st.Latest(context.Background())
			if err != nil || md == nil {
				t.Fatalf("the latest retained checkpoint: %v, %v", md, err)
			}
			var persisted int64
			for _, op := range md.Operators {
				for _, s := range op.Subtasks {
					for _, h := range s.InputChannels {
						persisted += h.Size
					}
				}
			}
			t.Logf("%s: checkpoint %d holds %d bytes of channel state", mode.name, md.CheckpointID, persisted)
			switch mode.name {
			case "aligned":
				if persisted != 0 {
					t.Errorf("aligned checkpoint %d holds %d bytes of channel state", md.CheckpointID, persisted)
				}
			case "unaligned":
				if persisted == 0 {
					t.Errorf("unaligned checkpoint %d under backpressure holds no channel state: its barriers overtook nothing", md.CheckpointID)
				}
			}
		})
	}
}
