package stream_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestStateStoreDiskFails makes the local disk of a keyed subtask's
// embedded LSM store fail for good, as a full or broken disk does: from a
// seeded operation on, every read or every write of its files fails, for
// the rest of that subtask's attempt. Pebble retries a failed flush
// without end, so a store that waited for it would hang the subtask and
// the job with it; instead the subtask fails, the job restores its
// checkpoint (on a disk that works: the fault strikes the first attempt
// only), and every record's sum is in the output exactly once.
func TestStateStoreDiskFails(t *testing.T) {
	const partitions, perPartition = 2, 4000
	for _, seed := range diffSeedList(4) {
		for _, step := range []int{0, 1} {
			what := []string{"reads", "writes"}[step]
			name := fmt.Sprintf("seed=%d %s fail", seed, what)
			gen := func(p int, seq int64) rec {
				// Long keys over many of them: a few MiB of rows, so the
				// 4 MiB store flushes to disk.
				k := datagen.Mix(seed, p, seq) % 3000
				return rec{Key: fmt.Sprintf("k%04d-%s", k, strings.Repeat("x", 300)), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
			}
			faults := streamtest.NewFaults()
			from := 1 + int(seed*13%30)
			disk := faults.Add(stream.FaultStateStore, streamtest.Fail(nil), streamtest.OnOperator("sum"), streamtest.OnSubtask(0), streamtest.InAttempt(0),
				streamtest.When(func(s stream.FaultSite) bool { return s.Step == step }),
				streamtest.OnCall(from), streamtest.Always())
			var ev streamtest.Events
			env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t,
				"parallelism.default=2", "execution.checkpointing.interval=20 ms",
				"state.backend.type=pebble", "state.backend.pebble.memory=4 mb", "state.backend.pebble.localdir="+t.TempDir(),
				"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms")),
				stream.WithLogger(quiet), faults.Option(), ev.Option())
			if err != nil {
				t.Fatal(err)
			}
			src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(50), datagen.RatePerSecond(20000))
			in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
			sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
			sink := streamtest.NewCollector[KeyedSum](true)
			stream.SinkTo(sums, sink, stream.Uid("sink"))
			if err := executeJob(t, env, "disk", func() string { return name }); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !disk.Fired() {
				t.Fatalf("%s: the disk never failed (from operation %d): the store did no I/O to fail", name, from)
			}
			if ev.Count(stream.EventRestarting) == 0 {
				t.Fatalf("%s: the disk failed %d times and the job never restarted", name, disk.Count())
			}
			if err := checkRunningSums(sink.Results(), recordsByKey(gen, partitions, perPartition)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			t.Logf("%s: the disk failed %d times from operation %d; %d restarts; exact", name, disk.Count(), from, ev.Count(stream.EventRestarting))
		}
	}
}
