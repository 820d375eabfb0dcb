package stream_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

func newEnv(t *testing.T, kv ...string) *stream.Environment {
	t.Helper()
	cfg, err := config.ParseDynamic(kv)
	if err != nil {
		t.Fatal(err)
	}
	env, err := stream.NewEnvironment(stream.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestMapFilterPipeline(t *testing.T) {
	env := newEnv(t, "parallelism.default=3")
	src, err := datagen.New(func(p int, seq int64) int64 { return int64(p)*1_000_000 + seq }, datagen.Partitions(4), datagen.Count(1000), datagen.BatchSize(100))
	if err != nil {
		t.Fatal(err)
	}
	nums := stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]())
	even := stream.Filter(nums, func(v int64) bool { return v%2 == 0 })
	strs := stream.Map(even, func(v int64) string { return strconv.FormatInt(v, 10) }, stream.Parallelism(2))
	sink := streamtest.NewCollector[string](false)
	stream.SinkTo(strs, sink)
	if err := env.Execute(context.Background(), "pipeline"); err != nil {
		t.Fatal(err)
	}
	got := sink.Results()
	var want []string
	for p := range 4 {
		for seq := int64(0); seq < 1000; seq++ {
			if v := int64(p)*1_000_000 + seq; v%2 == 0 {
				want = append(want, strconv.FormatInt(v, 10))
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
}

// TestExactlyOnceSinkAcrossFailures: a bounded job with checkpoints and a
// transactional sink, failed twice, writes every record exactly once.
func TestExactlyOnceSinkAcrossFailures(t *testing.T) {
	for _, dir := range []string{"", "file://" + t.TempDir()} {
		kv := []string{"parallelism.default=2", "execution.checkpointing.interval=20 ms",
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms"}
		if dir != "" {
			kv = append(kv, "execution.checkpointing.dir="+dir)
		}
		var ev streamtest.Events
		faults := streamtest.NewFaults()
		var injected []*streamtest.Fault
		// Each failure waits for a checkpoint of its attempt to complete,
		// so that the restore it causes is from a checkpoint whatever the
		// machine's load.
		for attempt := range 2 {
			injected = append(injected, faults.Add(stream.FaultBatch, streamtest.Fail(nil),
				streamtest.OnVertex("numbers"), streamtest.AfterRecords(3001), streamtest.InAttempt(attempt),
				streamtest.When(func(stream.FaultSite) bool { return ev.Count(stream.EventCheckpointCompleted) > attempt })))
		}
		env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, kv...)), stream.WithLogger(quiet), stream.WithEvents(ev.Record), faults.Option())
		if err != nil {
			t.Fatal(err)
		}
		src, _ := datagen.New(func(p int, seq int64) int64 { return int64(p)*1_000_000 + seq },
			datagen.Partitions(4), datagen.Count(5000), datagen.BatchSize(50), datagen.RatePerSecond(20_000))
		nums := stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]())
		sink := streamtest.NewCollector[int64](true)
		stream.SinkTo(stream.Rebalance(nums), sink, stream.Uid("sink"))
		if err := env.Execute(context.Background(), "eo"); err != nil {
			t.Fatal(err)
		}
		if !injected[0].Fired() || !injected[1].Fired() {
			t.Fatalf("dir %q: not every failure struck: %s", dir, faults)
		}
		restored := len(ev.Restores())
		if restored == 0 || sink.Writes() <= 20000 {
			t.Fatalf("dir %q: %d restores from a checkpoint, %d writes: the failures did not exercise recovery", dir, restored, sink.Writes())
		}
		got := sink.Results()
		slices.Sort(got)
		if len(got) != 20000 {
			t.Fatalf("dir %q: %d records, want 20000 (written %d)", dir, len(got), sink.Writes())
		}
		for i, v := range got {
			if want := int64(i/5000)*1_000_000 + int64(i%5000); v != want {
				t.Fatalf("dir %q: record %d is %d, want %d", dir, i, v, want)
			}
		}
	}
}
