package stream_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// failingListing is a source whose listing of its splits fails with err
// while fail says so.
type failingListing struct {
	connector.Source[int64]
	calls atomic.Int32
	fail  func(call int32) bool
	err   error
}

func (f *failingListing) Splits(ctx context.Context) ([]string, error) {
	if f.fail(f.calls.Add(1)) {
		return nil, f.err
	}
	return f.Source.Splits(ctx)
}

// TestSourceListingFailure: a listing of a source's splits that fails
// when the job starts fails the source subtasks, through the restart
// strategy: a transient failure is restarted past and the output is
// exact, and an error marked connector.Permanent fails the job at once
// with that error.
func TestSourceListingFailure(t *testing.T) {
	unreachable := errors.New("brokers briefly unreachable")
	build := func(t *testing.T, src connector.Source[int64], restarts string) (*stream.Environment, *streamtest.Collector[int64], *streamtest.Events) {
		var ev streamtest.Events
		env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=10 ms",
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts="+restarts, "restart-strategy.fixed-delay.delay=0 ms")),
			stream.WithLogger(quiet), stream.WithEvents(ev.Record))
		if err != nil {
			t.Fatal(err)
		}
		sink := streamtest.NewCollector[int64](true)
		stream.SinkTo(stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]()), sink, stream.Uid("sink"))
		return env, sink, &ev
	}
	gen, _ := datagen.New(func(p int, seq int64) int64 { return int64(p)<<32 | seq }, datagen.Partitions(3), datagen.Count(500))

	t.Run("transient", func(t *testing.T) {
		src := &failingListing{Source: gen, err: unreachable, fail: func(call int32) bool { return call <= 2 }}
		env, sink, ev := build(t, src, "5")
		if err := executeWithin(t, env, "listing"); err != nil {
			t.Fatal(err)
		}
		if n := ev.Count(stream.EventTaskFailed); n == 0 || src.calls.Load() < 3 {
			t.Fatalf("%d subtask failures, %d listings: the failed listings did not fail the source", n, src.calls.Load())
		}
		if got := len(sink.Results()); got != 3*500 {
			t.Fatalf("%d records, want %d", got, 3*500)
		}
	})
	t.Run("permanent", func(t *testing.T) {
		src := &failingListing{Source: gen, err: connector.Permanent(unreachable), fail: func(int32) bool { return true }}
		env, _, ev := build(t, src, "5")
		err := executeWithin(t, env, "listing")
		if !errors.Is(err, unreachable) || !connector.IsPermanent(err) {
			t.Fatalf("job ended with %v, want the listing's permanent error", err)
		}
		if n := ev.Count(stream.EventRestarting); n != 0 {
			t.Fatalf("%d restarts for a permanent listing failure", n)
		}
	})
}
