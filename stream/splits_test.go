package stream_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// listedInOrder is a generated source listed in the order order says,
// whose readers record which subtask opened which splits.
type listedInOrder struct {
	*datagen.Source[int64]
	order []string

	mu      sync.Mutex
	readers map[int][]string
}

func (l *listedInOrder) Splits(context.Context) ([]string, error) { return l.order, nil }

func (l *listedInOrder) NewReader(ctx context.Context, info connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[int64], error) {
	l.mu.Lock()
	for _, s := range splits {
		l.readers[info.Subtask] = append(l.readers[info.Subtask], s.Split)
	}
	l.mu.Unlock()
	return l.Source.NewReader(ctx, info, splits)
}

func (l *listedInOrder) read() map[int][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int][]string{}
	for k, v := range l.readers {
		out[k] = slices.Sorted(slices.Values(v))
	}
	return out
}

// TestResumeKeepsSplitAssignment stops a job after a few checkpoints and
// resumes it from the newest with the source now listing its splits in
// another order: at the same parallelism each split stays with the
// subtask the checkpoint recorded (where the new listing's "split i to
// subtask i mod parallelism" would swap them), and the output of both
// runs holds every record exactly once. At another parallelism the new
// listing is assigned anew.
func TestResumeKeepsSplitAssignment(t *testing.T) {
	const perPartition = 3000
	// run runs the job with the source listing its splits in order and
	// returns which splits each subtask read.
	run := func(order []string, sink *streamtest.Collector[int64], opts ...streamtest.RunOption) (map[int][]string, *streamtest.Result) {
		t.Helper()
		var src *listedInOrder
		res := streamtest.Run(t, func(env *stream.Environment) {
			// Most of a second of input, so that three checkpoints
			// complete before its splits end, even on a loaded machine.
			gen, _ := datagen.New(func(p int, seq int64) int64 { return int64(p)<<32 | seq },
				datagen.Partitions(2), datagen.Count(perPartition), datagen.BatchSize(20), datagen.RatePerSecond(4_000))
			src = &listedInOrder{Source: gen, order: order, readers: map[int][]string{}}
			stream.SinkTo(stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]()), sink, stream.Uid("sink"))
		}, append([]streamtest.RunOption{streamtest.Config("execution.checkpointing.interval=10 ms")}, opts...)...)
		return src.read(), res
	}

	sink := streamtest.NewCollector[int64](true)
	first, res := run([]string{"datagen-0", "datagen-1"}, sink, streamtest.Config("parallelism.default=2"), streamtest.UntilCheckpoints(3))
	if !res.Canceled {
		t.Fatalf("the first run ended before it was canceled (%v): make the input longer", res.Err)
	}
	if want := map[int][]string{0: {"datagen-0"}, 1: {"datagen-1"}}; !mapsEqual(first, want) {
		t.Fatalf("the first run's readers: %v, want %v", first, want)
	}

	resume := streamtest.ResumeFrom(res)
	second, res2 := run([]string{"datagen-1", "datagen-0"}, sink, streamtest.Config("parallelism.default=2"), resume)
	if res2.Err != nil {
		t.Fatal(res2.Err)
	}
	if r, ok := res2.Events.Last(stream.EventRestored); !ok || r.Checkpoint == 0 {
		t.Fatal("the second run did not restore a checkpoint")
	}
	if want := map[int][]string{0: {"datagen-0"}, 1: {"datagen-1"}}; !mapsEqual(second, want) {
		t.Fatalf("the resumed run's readers: %v, want the checkpoint's assignment %v", second, want)
	}
	count := map[int64]int{}
	for _, v := range sink.Results() {
		count[v]++
	}
	for p := range int64(2) {
		for seq := range int64(perPartition) {
			if n := count[p<<32|seq]; n != 1 {
				t.Fatalf("record %d of datagen-%d committed %d times over both runs", seq, p, n)
			}
		}
	}
	if len(count) != 2*perPartition {
		t.Fatalf("%d distinct records committed, want %d", len(count), 2*perPartition)
	}

	// The sink holds the transactions the checkpoint commits again.
	third, res3 := run([]string{"datagen-1", "datagen-0"}, sink, streamtest.Config("parallelism.default=3"), resume)
	if res3.Err != nil {
		t.Fatal(res3.Err)
	}
	if want := map[int][]string{0: {"datagen-1"}, 1: {"datagen-0"}}; !mapsEqual(third, want) {
		t.Fatalf("readers when resumed at parallelism 3: %v, want the new listing's %v", third, want)
	}
}

func mapsEqual(a, b map[int][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
