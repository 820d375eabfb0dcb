package stream_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// stateful wraps a source's readers with split state: "opened" when a
// split is first opened, then each fetch's Next in decimal. A reader
// opened from a checkpoint must get back the state recorded with the
// offset it starts at; it records what it got in opens.
type stateful[T any] struct {
	connector.Source[T]
	mu    sync.Mutex
	opens []connector.SplitStart
}

func (s *stateful[T]) NewReader(ctx context.Context, info connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[T], error) {
	s.mu.Lock()
	s.opens = append(s.opens, splits...)
	s.mu.Unlock()
	r, err := s.Source.NewReader(ctx, info, splits)
	if err != nil {
		return nil, err
	}
	states := make(map[string][]byte, len(splits))
	for _, sp := range splits {
		states[sp.Split] = sp.State
		if sp.State == nil {
			states[sp.Split] = []byte("opened")
		}
	}
	return &statefulReader[T]{Reader: r, states: states}, nil
}

type statefulReader[T any] struct {
	connector.Reader[T]
	states map[string][]byte
}

func (r *statefulReader[T]) SplitStates() map[string][]byte { return r.states }

func (r *statefulReader[T]) Fetch(ctx context.Context) (connector.Fetch[T], error) {
	f, err := r.Reader.Fetch(ctx)
	if err == nil {
		f.State = strconv.AppendInt(nil, f.Next, 10)
	}
	return f, err
}

// TestSplitStateRestoredWithOffset: a reader's split state, reported when
// it opens and replaced by its fetches, is restored after a failure
// together with the offset it was checkpointed with.
func TestSplitStateRestoredWithOffset(t *testing.T) {
	const n = 6000
	var ev streamtest.Events
	faults := streamtest.NewFaults()
	failure := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("count"), streamtest.AfterRecords(n/3),
		streamtest.When(func(stream.FaultSite) bool { return ev.Count(stream.EventCheckpointCompleted) > 0 }))
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=10 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=3", "restart-strategy.fixed-delay.delay=0 ms")),
		stream.WithLogger(quiet),
		ev.Option(),
		faults.Option())
	if err != nil {
		t.Fatal(err)
	}
	gen, _ := datagen.New(func(int, int64) int64 { return 1 }, datagen.Partitions(2), datagen.Count(n/2), datagen.BatchSize(10), datagen.RatePerSecond(20_000))
	src := &stateful[int64]{Source: gen}
	in := stream.FromSource[int64](env, src, "src", stream.NoWatermarks[int64]())
	sums := stream.Process(stream.KeyBy(in, func(int64) int { return 0 }), stream.KeyedProcessFunction[int, int64, int64](&counter{}), stream.Uid("count"), stream.Parallelism(1))
	sink := streamtest.NewCollector[int64](true)
	stream.SinkTo(sums, sink, stream.Uid("sink"), stream.Parallelism(1))
	if err := executeWithin(t, env, "split-state"); err != nil {
		t.Fatal(err)
	}
	if !failure.Fired() {
		t.Fatal("the failure did not strike")
	}
	restored := 0
	for _, sp := range src.opens {
		var want []byte
		switch {
		case sp.Offset >= 0:
			want = strconv.AppendInt(nil, sp.Offset, 10)
		case sp.State != nil:
			want = []byte("opened") // checkpointed before its first fetch
		}
		if string(sp.State) != string(want) {
			t.Fatalf("split %s opened at offset %d with state %q, want %q", sp.Split, sp.Offset, sp.State, want)
		}
		if sp.State != nil {
			restored++
		}
	}
	if restored == 0 {
		t.Fatalf("no reader opened with a restored state: %+v", src.opens)
	}
	if out := sink.Results(); len(out) != n || out[n-1] != n {
		t.Fatalf("%d outputs, want %d", len(out), n)
	}
}
