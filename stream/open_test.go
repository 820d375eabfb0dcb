package stream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// executeWithin runs the job and returns its result, failing the test if
// it has not ended after two minutes: a subtask that never exits keeps a
// job running, and its cancellation waiting, forever.
func executeWithin(t *testing.T, env *stream.Environment, name string) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- env.Execute(context.Background(), name) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("the job has not ended after two minutes: a subtask hangs")
		return nil
	}
}

// TestSourceThatFailsToOpenRestarts: a source whose reader fails to open,
// on the first two calls and again on the restore after a later failure,
// fails its subtask each time; the restart strategy restarts the job,
// which ends with exactly the output of a run without failures.
func TestSourceThatFailsToOpenRestarts(t *testing.T) {
	const n = 6000
	var ev streamtest.Events
	unreachable := errors.New("brokers briefly unreachable")
	faults := streamtest.NewFaults()
	atStart := faults.Add(stream.FaultNewReader, streamtest.Fail(unreachable), streamtest.Times(2))
	failure := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("count"), streamtest.AfterRecords(n/3),
		streamtest.When(func(stream.FaultSite) bool { return ev.Count(stream.EventCheckpointCompleted) > 0 }))
	onRestore := faults.Add(stream.FaultNewReader, streamtest.Fail(unreachable), streamtest.AfterRestore(),
		streamtest.When(func(stream.FaultSite) bool { return failure.Fired() }))
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=10 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms")),
		stream.WithLogger(quiet),
		ev.Option(),
		faults.Option())
	if err != nil {
		t.Fatal(err)
	}
	src, _ := datagen.New(func(int, int64) int64 { return 1 }, datagen.Partitions(2), datagen.Count(n/2), datagen.BatchSize(10), datagen.RatePerSecond(20_000))
	in := stream.FromSource[int64](env, src, "src", stream.NoWatermarks[int64]())
	sums := stream.Process(stream.KeyBy(in, func(int64) int { return 0 }), stream.KeyedProcessFunction[int, int64, int64](&counter{}), stream.Uid("count"), stream.Parallelism(1))
	sink := streamtest.NewCollector[int64](true)
	stream.SinkTo(sums, sink, stream.Uid("sink"), stream.Parallelism(1))
	if err := executeWithin(t, env, "flaky-open"); err != nil {
		t.Fatal(err)
	}
	if !failure.Fired() || atStart.Count() != 2 || onRestore.Count() != 1 {
		t.Fatalf("not every fault struck as planned: %s", faults)
	}
	// The injected failure restores a checkpoint, and so does the restart
	// after the reader fails to open on that restore.
	if fromCheckpoint := len(ev.Restores()); fromCheckpoint < 2 {
		t.Fatalf("%d restores from a checkpoint, want at least 2", fromCheckpoint)
	}
	out := sink.Results()
	for i, v := range out {
		if v != int64(i+1) {
			t.Fatalf("output %d is %d, want %d (%d outputs)", i, v, i+1, len(out))
		}
	}
	if len(out) != n {
		t.Fatalf("%d outputs, want %d", len(out), n)
	}
}
