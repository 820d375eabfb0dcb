package stream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestDebloatBoundsRecordsAheadOfBarriers runs a fast unbounded source
// into a keyed operator that spends 20 µs on each record, with aligned
// checkpoints every 20 ms and buffer debloating with a target of 1 ms. The
// operator consumes at most 50,000 records a second of busy time, 50
// within the target, less than the floor of 64 records a channel: its two
// input channels are limited to 64 records from the start, whatever the
// machine's speed. Every aligned barrier must then find at most 64 records
// queued ahead of it on a channel, where without debloating a channel
// holds 4 batches of 1024.
func TestDebloatBoundsRecordsAheadOfBarriers(t *testing.T) {
	for _, debloat := range []bool{false, true} {
		t.Run(fmt.Sprint("debloat=", debloat), func(t *testing.T) {
			kv := []string{"parallelism.default=2", "execution.checkpointing.interval=20 ms"}
			if debloat {
				kv = append(kv, "taskmanager.network.memory.buffer-debloat.enabled=true",
					"taskmanager.network.memory.buffer-debloat.target=1 ms",
					"taskmanager.network.memory.buffer-debloat.period=10 ms")
			}
			env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, kv...)), stream.WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			gen := func(p int, seq int64) rec {
				return rec{Key: fmt.Sprintf("k%02d", datagen.Mix(3, p, seq)%20), Value: 1, P: p, Seq: seq}
			}
			src, err := datagen.New(gen, datagen.Partitions(2), datagen.BatchSize(256))
			if err != nil {
				t.Fatal(err)
			}
			in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
			sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }),
				stream.KeyedProcessFunction[string, rec, KeyedSum](&slowSum{cost: 20 * time.Microsecond}), stream.Uid("sum"))
			stream.SinkTo(sums, streamtest.NewCollector[KeyedSum](false), stream.Uid("sink"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client, err := env.ExecuteAsync(ctx, "debloat")
			if err != nil {
				t.Fatal(err)
			}
			jm := launch.MasterOf(client)
			deadline := time.Now().Add(2 * time.Minute)
			for client.Metrics().LastCheckpoint.ID < 10 {
				if time.Now().After(deadline) {
					t.Fatalf("%d checkpoints completed in two minutes", client.Metrics().LastCheckpoint.ID)
				}
				time.Sleep(5 * time.Millisecond)
			}
			var metrics []runtime.SubtaskMetrics
			for _, m := range jm.SubtaskMetrics() {
				if m.Task.Vertex == "sum" {
					metrics = append(metrics, m)
				}
			}
			cancel()
			client.Wait()
			if len(metrics) != 2 {
				t.Fatalf("metrics of %d subtasks of the keyed operator, want 2", len(metrics))
			}
			for _, m := range metrics {
				t.Logf("subtask %d: in-flight limit %d, at most %d records ahead of an aligned barrier", m.Task.Subtask, m.InFlightLimit, m.BarrierInFlightMax)
				switch {
				case !debloat && m.InFlightLimit != 0:
					t.Errorf("subtask %d has an in-flight limit of %d without debloating", m.Task.Subtask, m.InFlightLimit)
				case debloat && m.InFlightLimit != runtime.DebloatFloor:
					t.Errorf("subtask %d has an in-flight limit of %d, want the floor, %d: it consumes under 50 records within the target", m.Task.Subtask, m.InFlightLimit, runtime.DebloatFloor)
				case debloat && m.BarrierInFlightMax > runtime.DebloatFloor:
					t.Errorf("subtask %d: an aligned barrier found %d records ahead of it on a channel limited to %d", m.Task.Subtask, m.BarrierInFlightMax, runtime.DebloatFloor)
				}
			}
		})
	}
}
