package stream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

type tsEvent struct {
	Key string
	Ts  int64
}

// liveAndQuiet is an unbounded source: split "live" emits an event every
// millisecond of event time, split "quiet" emits quietN events and then
// nothing, without ending.
type liveAndQuiet struct{ quietN int }

func (liveAndQuiet) Splits(context.Context) ([]string, error) { return []string{"live", "quiet"}, nil }
func (liveAndQuiet) Bounded() bool                            { return false }
func (s liveAndQuiet) NewReader(_ context.Context, _ connector.ReaderInfo, ss []connector.SplitStart) (connector.Reader[tsEvent], error) {
	return &lqReader{s: s, tick: time.NewTicker(time.Millisecond)}, nil
}

type lqReader struct {
	s     liveAndQuiet
	seq   int64
	quiet int
	tick  *time.Ticker
}

func (r *lqReader) Fetch(ctx context.Context) (connector.Fetch[tsEvent], error) {
	if r.quiet < r.s.quietN {
		r.quiet++
		return connector.Fetch[tsEvent]{Split: "quiet", Records: []tsEvent{{"q", 0}}, Next: int64(r.quiet)}, nil
	}
	select {
	case <-ctx.Done():
		return connector.Fetch[tsEvent]{}, ctx.Err()
	case <-r.tick.C:
	}
	r.seq++
	return connector.Fetch[tsEvent]{Split: "live", Records: []tsEvent{{"l", r.seq * 10}}, Next: r.seq}, nil
}

func (r *lqReader) Close() error { r.tick.Stop(); return nil }

// notifySink signals once it has received n records.
type notifySink[T any] struct {
	mu   sync.Mutex
	got  []T
	n    int
	done chan struct{}
}

func newNotifySink[T any](n int) *notifySink[T] {
	return &notifySink[T]{n: n, done: make(chan struct{})}
}

func (s *notifySink[T]) NewWriter(context.Context, connector.WriterInfo) (connector.SinkWriter[T], error) {
	return s, nil
}

func (s *notifySink[T]) Write(v T, _ int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, v)
	if len(s.got) == s.n {
		close(s.done)
	}
	return nil
}

func (s *notifySink[T]) PrepareCommit(context.Context, int64) ([][]byte, error) { return nil, nil }
func (s *notifySink[T]) Close() error                                           { return nil }

// TestIdleSplitDoesNotHoldEventTime: a split without records is marked
// idle after the idleness timeout, so windows fire on the other split's
// event time alone.
func TestIdleSplitDoesNotHoldEventTime(t *testing.T) {
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=1")), stream.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	wm := stream.BoundedOutOfOrderness[tsEvent](0).WithTimestamps(func(e tsEvent, _ int64) int64 { return e.Ts }).WithIdleness(50 * time.Millisecond)
	in := stream.FromSource[tsEvent](env, liveAndQuiet{quietN: 1}, "events", wm)
	counts := stream.Aggregate(stream.Windowed(stream.KeyBy(in, func(e tsEvent) string { return e.Key }), stream.TumblingEventTimeWindows(100*time.Millisecond)),
		stream.AggregateFunction[tsEvent, int64, int64](countAgg{}),
		func(k string, w stream.Window, n int64) WindowSum {
			return WindowSum{Key: k, Start: w.Start, End: w.End, Count: n}
		}, stream.Uid("counts"))
	sink := newNotifySink[WindowSum](4)
	stream.SinkTo(counts, sink, stream.Uid("sink"))
	ctx, cancel := context.WithCancel(context.Background())
	client, err := env.ExecuteAsync(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sink.done:
	case <-time.After(time.Minute):
		t.Fatal("no window fired in a minute: the quiet split holds event time back")
	}
	cancel()
	client.Wait()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	live := 0
	for _, w := range sink.got {
		if w.Key == "l" {
			live++
		}
	}
	if live == 0 {
		t.Fatalf("fired %+v: no window of the live split", sink.got)
	}
}

type countAgg struct{}

func (countAgg) CreateAccumulator() int64       { return 0 }
func (countAgg) Add(_ tsEvent, acc int64) int64 { return acc + 1 }
func (countAgg) GetResult(acc int64) int64      { return acc }
func (countAgg) Merge(a, b int64) int64         { return a + b }

// reminder registers, for every key it sees first, a processing-time
// timer at a fixed time, and emits the key when it fires.
type reminder struct {
	at   int64
	seen state.ValueState[bool]
}

func (r *reminder) Open(rc *stream.RuntimeContext[string]) error {
	var err error
	r.seen, err = stream.ValueState[bool](rc, "seen")
	return err
}

func (r *reminder) ProcessElement(ctx *stream.Context[string, string], e tsEvent) error {
	if _, ok := r.seen.Value(); !ok {
		r.seen.Update(true)
		ctx.RegisterProcessingTimeTimer(r.at)
	}
	return nil
}

func (*reminder) OnTimer(ctx *stream.Context[string, string], t stream.Timer) error {
	if !t.ProcessingTime {
		return nil
	}
	return ctx.Emit(ctx.Key())
}

// TestProcessingTimeTimersFollowTheClock: processing-time timers fire when
// the (manual) clock passes them, not before, once per key and time.
func TestProcessingTimeTimersFollowTheClock(t *testing.T) {
	clock := streamtest.NewManualClock(time.Unix(1_700_000_000, 0))
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=1")), stream.WithLogger(quiet), stream.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	in := stream.FromSource[tsEvent](env, liveAndQuiet{quietN: 5}, "events", stream.NoWatermarks[tsEvent]())
	fired := stream.Process(stream.KeyBy(in, func(e tsEvent) string { return e.Key }), stream.KeyedProcessFunction[string, tsEvent, string](&reminder{at: clock.Now().Add(time.Second).UnixMilli()}), stream.Uid("reminder"))
	sink := newNotifySink[string](2)
	stream.SinkTo(fired, sink, stream.Uid("sink"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, err := env.ExecuteAsync(ctx, "timers")
	if err != nil {
		t.Fatal(err)
	}
	// Once a timer is pending, nothing may have fired: the clock has not
	// moved. A key first seen after the clock passed its timer fires at
	// once; registering the same time again deduplicates.
	deadline := time.Now().Add(time.Minute)
	for clock.Pending() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no processing-time timer was scheduled")
		}
		time.Sleep(time.Millisecond)
	}
	sink.mu.Lock()
	early := len(sink.got)
	sink.mu.Unlock()
	if early != 0 {
		t.Fatalf("%d timers fired before the clock moved", early)
	}
	clock.Advance(2 * time.Second)
	select {
	case <-sink.done:
	case <-time.After(time.Minute):
		sink.mu.Lock()
		t.Fatalf("the timers did not fire after the clock passed them: got %v", sink.got)
	}
	cancel()
	client.Wait()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	got := map[string]int{}
	for _, k := range sink.got {
		got[k]++
	}
	if got["q"] != 1 || got["l"] != 1 {
		t.Fatalf("timers fired %v, want once for each key", got)
	}
}
