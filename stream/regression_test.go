package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// uneven is a bounded source of ones: split "a" has na records and ends
// fast, split "b" has nb and is slow.
type uneven struct{ na, nb int64 }

func (u uneven) Splits(context.Context) ([]string, error) { return []string{"a", "b"}, nil }
func (u uneven) Bounded() bool                            { return true }
func (u uneven) NewReader(_ context.Context, _ connector.ReaderInfo, ss []connector.SplitStart) (connector.Reader[int64], error) {
	r := &unevenReader{u: u, next: map[string]int64{}}
	for _, s := range ss {
		r.splits = append(r.splits, s.Split)
		r.next[s.Split] = max(s.Offset, 0)
	}
	return r, nil
}

type unevenReader struct {
	u      uneven
	splits []string
	next   map[string]int64
	tick   *time.Ticker
}

func (r *unevenReader) Fetch(ctx context.Context) (connector.Fetch[int64], error) {
	for _, s := range r.splits {
		n := r.u.na
		if s == "b" {
			n = r.u.nb
			if r.tick == nil {
				r.tick = time.NewTicker(time.Millisecond)
			}
			select {
			case <-ctx.Done():
				return connector.Fetch[int64]{}, ctx.Err()
			case <-r.tick.C:
			}
		}
		if r.next[s] >= n {
			continue
		}
		k := min(10, n-r.next[s])
		f := connector.Fetch[int64]{Split: s, Records: make([]int64, k)}
		for i := range f.Records {
			f.Records[i] = 1
		}
		r.next[s] += k
		f.Next, f.EndOfSplit = r.next[s], r.next[s] >= n
		return f, nil
	}
	return connector.Fetch[int64]{}, connector.ErrEndOfInput
}

func (r *unevenReader) Close() error {
	if r.tick != nil {
		r.tick.Stop()
	}
	return nil
}

type counter struct{ n state.ValueState[int64] }

func (c *counter) Open(rc *stream.RuntimeContext[int]) error {
	var err error
	c.n, err = stream.ValueState[int64](rc, "n")
	return err
}

func (c *counter) ProcessElement(ctx *stream.Context[int, int64], v int64) error {
	n, _ := c.n.Value()
	c.n.Update(n + v)
	return ctx.Emit(n + v)
}

// once fails subtask vertex[subtask] of the first attempt after records;
// it returns the option that installs the fault, and the fault.
func once(vertex string, subtask int, records int64) (stream.Option, *streamtest.Fault) {
	fs := streamtest.NewFaults()
	f := fs.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex(vertex), streamtest.OnSubtask(subtask),
		streamtest.AfterRecords(records), streamtest.InAttempt(0))
	return fs.Option(), f
}

// TestFinishedSourceIsNotReplayed: a source subtask that finished before
// the checkpoint a restore uses must not read its splits again.
func TestFinishedSourceIsNotReplayed(t *testing.T) {
	fault, failed := once("count", 0, 1500)
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=10 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=3", "restart-strategy.fixed-delay.delay=0 ms")),
		stream.WithLogger(quiet), fault)
	if err != nil {
		t.Fatal(err)
	}
	in := stream.FromSource[int64](env, uneven{na: 1000, nb: 3000}, "src", stream.NoWatermarks[int64]())
	sums := stream.Process(stream.KeyBy(in, func(int64) int { return 0 }), stream.KeyedProcessFunction[int, int64, int64](&counter{}), stream.Uid("count"), stream.Parallelism(1))
	sink := streamtest.NewCollector[int64](true)
	stream.SinkTo(sums, sink, stream.Uid("sink"), stream.Parallelism(1))
	if err := env.Execute(context.Background(), "finished"); err != nil {
		t.Fatal(err)
	}
	if !failed.Fired() {
		t.Fatal("the failure did not strike")
	}
	out := sink.Results()
	if len(out) != 4000 || out[len(out)-1] != 4000 {
		t.Fatalf("%d outputs, last %d; want 4000 and 4000", len(out), out[len(out)-1])
	}
}

// TestRegionFailoverAfterOtherRegionFinished: a region that restarts
// after another region finished still completes checkpoints and ends.
func TestRegionFailoverAfterOtherRegionFinished(t *testing.T) {
	for _, strategy := range []string{"region", "full"} {
		t.Run(strategy, func(t *testing.T) {
			fault, failed := once("a-source", 0, 2000)
			env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=1", "execution.checkpointing.interval=10 ms",
				"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=3", "restart-strategy.fixed-delay.delay=0 ms",
				"jobmanager.execution.failover-strategy="+strategy)), stream.WithLogger(quiet), fault)
			if err != nil {
				t.Fatal(err)
			}
			sinks := map[string]*streamtest.Collector[int64]{}
			for _, p := range []struct {
				name string
				n    int64
				rate float64
			}{{"a", 4000, 10000}, {"b", 10, 0}} {
				opts := []datagen.Option{datagen.Count(p.n), datagen.BatchSize(10)}
				if p.rate > 0 {
					opts = append(opts, datagen.RatePerSecond(p.rate))
				}
				src, _ := datagen.New(func(_ int, seq int64) int64 { return seq }, opts...)
				s := stream.Rebalance(stream.FromSource(env, src, p.name+"-source", stream.NoWatermarks[int64]()), stream.Uid(p.name+"-rebalance"))
				sinks[p.name] = streamtest.NewCollector[int64](true)
				stream.SinkTo(s, sinks[p.name], stream.Uid(p.name+"-sink"))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := env.Execute(ctx, "regions"); err != nil {
				t.Fatal(err)
			}
			if !failed.Fired() {
				t.Fatal("the failure did not strike")
			}
			for name, want := range map[string]int{"a": 4000, "b": 10} {
				if got := len(sinks[name].Results()); got != want {
					t.Fatalf("pipeline %s: %d records, want %d exactly once", name, got, want)
				}
			}
		})
	}
}

// TestDelayedRestart: while a restart waits out its delay, no checkpoint
// is triggered at the canceled subtasks (it would expire and fail the job
// over again), and the job recovers exactly once.
func TestDelayedRestart(t *testing.T) {
	fault, failed := once("src", 0, 2000)
	var ev streamtest.Events
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=1", "execution.checkpointing.interval=10 ms",
		"execution.checkpointing.timeout=100 ms", "restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=1",
		"restart-strategy.fixed-delay.delay=300 ms")), stream.WithLogger(quiet), fault, stream.WithEvents(ev.Record))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := datagen.New(func(int, int64) int64 { return 1 }, datagen.Count(6000), datagen.BatchSize(10), datagen.RatePerSecond(20000))
	in := stream.FromSource(env, src, "src", stream.NoWatermarks[int64]())
	sums := stream.Process(stream.KeyBy(in, func(int64) int { return 0 }), stream.KeyedProcessFunction[int, int64, int64](&counter{}), stream.Uid("count"))
	sink := streamtest.NewCollector[int64](true)
	stream.SinkTo(sums, sink, stream.Uid("sink"))
	if err := env.Execute(context.Background(), "delayed"); err != nil {
		t.Fatal(err)
	}
	if !failed.Fired() {
		t.Fatal("the failure did not strike")
	}
	if n := ev.Count(stream.EventRestarting); n != 1 {
		t.Fatalf("%d restarts, want 1", n)
	}
	out := sink.Results()
	if len(out) != 6000 || out[len(out)-1] != 6000 {
		t.Fatalf("%d outputs, last %d; want 6000 and 6000", len(out), out[len(out)-1])
	}
}
