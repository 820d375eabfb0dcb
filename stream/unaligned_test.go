package stream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/launch"
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
			jm := launch.MasterOf(client)
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
			stats, _, err := jm.CheckpointStats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			client.Wait()
			t.Logf("%s: checkpoint durations %v, %d checkpoints failed", mode.name, durations, ev.Count(stream.EventCheckpointFailed))
			// Processed data is what the subtasks processed between their
			// first barrier and their snapshot: under backpressure aligned
			// subtasks go on reading the inputs whose barrier has not come,
			// and unaligned ones snapshot at the first barrier.
			var processed []int64
			for _, h := range stats.History {
				if h.Class == "completed" {
					processed = append(processed, h.ProcessedData)
				}
			}
			t.Logf("%s: processed data per completed checkpoint %v", mode.name, processed)
			// Whether an aligned checkpoint processes anything while it
			// aligns depends on how far apart its barriers arrive, which
			// the machine's timing decides: only the unaligned side is
			// asserted.
			if mode.name == "unaligned" && slices.ContainsFunc(processed, func(n int64) bool { return n != 0 }) {
				t.Errorf("unaligned checkpoints processed data while aligning: %v", processed)
			}

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

// slowPass passes records on, spending a fixed amount of processor time
// on each, so that the exchange into it stays full.
func slowPass(cost time.Duration) func(rec) rec {
	return func(r rec) rec {
		for start := time.Now(); time.Since(start) < cost; {
		}
		return r
	}
}

// slowKeyedPass is slowPass behind a keyBy.
type slowKeyedPass struct{ cost time.Duration }

func (f slowKeyedPass) ProcessElement(ctx *stream.Context[string, rec], r rec) error {
	return ctx.Emit(slowPass(f.cost)(r))
}

// TestUnalignedCheckpointsOnEveryExchange runs records through each kind
// of exchange (forward between unchained operators, rebalance, broadcast,
// a union of two sources, hash) into a slow operator, with unaligned
// checkpoints, fails the slow operator once two checkpoints have
// completed, and checks that a checkpoint persisted records in flight on
// the exchange and that every record reached the sink exactly once (once
// per subtask for broadcast).
func TestUnalignedCheckpointsOnEveryExchange(t *testing.T) {
	const partitions, perPartition = 2, 1500
	gen := func(p int, seq int64) rec { return rec{Key: fmt.Sprintf("k%d", seq%7), Value: 1, P: p, Seq: seq} }
	for _, exchange := range []string{"forward", "rebalance", "broadcast", "union", "hash"} {
		t.Run(exchange, func(t *testing.T) {
			ev := streamtest.NewEvents()
			faults := streamtest.NewFaults()
			crash := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("slow"), streamtest.OnSubtask(0),
				streamtest.When(func(stream.FaultSite) bool { return ev.Count(stream.EventCheckpointCompleted) >= 2 }))
			env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=10 ms",
				"execution.checkpointing.unaligned.enabled=true", "web.checkpoints.history=1000",
				"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=3", "restart-strategy.fixed-delay.delay=0 ms")),
				stream.WithLogger(quiet), stream.WithEvents(ev.Record), stream.WithBatchSize(16), faults.Option())
			if err != nil {
				t.Fatal(err)
			}
			source := func(name string, first int) stream.Stream[rec] {
				src, err := datagen.New(func(p int, seq int64) rec { return gen(first+p, seq) }, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(16))
				if err != nil {
					t.Fatal(err)
				}
				return stream.FromSource(env, src, name, stream.NoWatermarks[rec]())
			}
			in := source("numbers", 0)
			copies, sources := 1, 1
			var slow stream.Stream[rec]
			const cost = 50 * time.Microsecond
			switch exchange {
			case "rebalance":
				in = stream.Rebalance(in)
			case "broadcast":
				in, copies = stream.Broadcast(in), 2
			case "union":
				in, sources = stream.Union(in, source("more", partitions)), 2
			case "hash":
				slow = stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }),
					stream.KeyedProcessFunction[string, rec, rec](slowKeyedPass{cost}), stream.Uid("slow"), stream.DisableChaining())
			}
			if slow.Env() == nil {
				slow = stream.Map(in, slowPass(cost), stream.Uid("slow"), stream.DisableChaining())
			}
			sink := streamtest.NewCollector[rec](true)
			stream.SinkTo(slow, sink, stream.Uid("sink"))
			client, err := env.ExecuteAsync(context.Background(), "exchange")
			if err != nil {
				t.Fatal(err)
			}
			jm := launch.MasterOf(client)
			if err := client.Wait(); err != nil {
				t.Fatal(err)
			}
			if !crash.Fired() {
				t.Fatal("the slow operator never failed: the test shows nothing about restores")
			}
			stats, _, err := jm.CheckpointStats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var persisted int64
			for _, h := range stats.History {
				if h.Class == "completed" {
					persisted += h.PersistedData
				}
			}
			if persisted == 0 {
				t.Error("no checkpoint persisted records in flight on the exchange")
			}
			count := map[[2]int64]int{}
			for _, r := range sink.Results() {
				count[[2]int64{int64(r.P), r.Seq}]++
			}
			for p := range partitions * sources {
				for seq := range int64(perPartition) {
					if n := count[[2]int64{int64(p), seq}]; n != copies {
						t.Fatalf("record %d/%d reached the sink %d times, want %d", p, seq, n, copies)
					}
				}
			}
			if len(count) != partitions*sources*perPartition {
				t.Fatalf("%d distinct records at the sink, want %d", len(count), partitions*sources*perPartition)
			}
		})
	}
}

// TestUnalignedCheckpointFailsWhileWritingChannelState fails the write of
// a sum subtask's channel state file for an unaligned checkpoint once a
// checkpoint has completed (no checkpoint failure is tolerated, so the
// job fails over at once, as when the process dies mid-write): that
// checkpoint never completes, the job restores the previous completed
// one, and every record's sum reaches the sink exactly once. Seeds draw
// the subtask and the backend.
func TestUnalignedCheckpointFailsWhileWritingChannelState(t *testing.T) {
	const partitions, perPartition = 2, 8000
	for _, seed := range diffSeedList(3) {
		r := rand.New(rand.NewPCG(seed, 17))
		sub := int(seed % 2)
		backend := []string{"hashmap", "pebble"}[r.IntN(2)]
		name := fmt.Sprintf("seed=%d subtask=%d backend=%s", seed, sub, backend)
		gen := func(p int, seq int64) rec {
			return rec{Key: fmt.Sprintf("k%d", datagen.Mix(seed, p, seq)%50), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
		}
		ev := streamtest.NewEvents()
		faults := streamtest.NewFaults()
		var failing atomic.Int64
		// The channel state file's write fails, and so does the subtask.
		torn := faults.Add(stream.FaultStorageWrite, streamtest.Fail(nil), streamtest.OnPath(fmt.Sprintf("*/sum-%d-channels", sub)),
			streamtest.When(func(site stream.FaultSite) bool {
				if ev.Count(stream.EventCheckpointCompleted) < 1 {
					return false
				}
				failing.CompareAndSwap(0, site.Checkpoint)
				return true
			}))
		env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2", "state.backend.type="+backend,
			"execution.checkpointing.interval=10 ms", "execution.checkpointing.unaligned.enabled=true",
			"execution.checkpointing.dir="+t.TempDir(), "execution.checkpointing.data-inline-threshold=0 b",
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=3", "restart-strategy.fixed-delay.delay=0 ms")),
			stream.WithLogger(quiet), stream.WithEvents(ev.Record), stream.WithBatchSize(16), faults.Option())
		if err != nil {
			t.Fatal(err)
		}
		src, err := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(16))
		if err != nil {
			t.Fatal(err)
		}
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }),
			stream.KeyedProcessFunction[string, rec, KeyedSum](&slowSum{cost: 40 * time.Microsecond}), stream.Uid("sum"))
		sink := streamtest.NewCollector[KeyedSum](true)
		stream.SinkTo(sums, sink, stream.Uid("sink"))
		if err := env.Execute(context.Background(), "torn"); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, ev)
		}
		if !torn.Fired() {
			t.Fatalf("%s: no channel state write failed\n%s", name, ev)
		}
		rs := ev.Restores()
		if len(rs) == 0 || rs[0].Checkpoint >= failing.Load() {
			t.Fatalf("%s: checkpoint %d failed while writing channel state; the job restored %v\n%s", name, failing.Load(), rs, ev)
		}
		for _, c := range ev.Of(stream.EventCheckpointCompleted) {
			if c.Checkpoint == failing.Load() {
				t.Fatalf("%s: checkpoint %d completed although its channel state was never written", name, c.Checkpoint)
			}
		}
		if err := checkRunningSums(sink.Results(), recordsByKey(gen, partitions, perPartition)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: checkpoint %d failed while writing channel state; restored %d; sums exact", name, failing.Load(), rs[0].Checkpoint)
	}
}
