package stream_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// windowed is one record of a window's result: a record of the window's
// input, the window's start and how many records the window held.
type windowed struct {
	Key   string
	Start int64
	P     int
	Seq   int64
	N     int
}

// burstOracle computes, from the generator alone, what the windowed job
// of TestUnalignedBarrierInterruptsTimerBurst writes: for every key and
// tumbling window of size ms, every record of the window, with the
// window's start and size.
func burstOracle(partitions int, count int64, gen func(p int, seq int64) rec, ts func(p int, seq int64) int64, size int64) map[windowed]int {
	type kw struct {
		key   string
		start int64
	}
	groups := map[kw][][2]int64{}
	for p := range partitions {
		for seq := range count {
			r := gen(p, seq)
			t := ts(p, seq)
			k := kw{r.Key, t - t%size}
			groups[k] = append(groups[k], [2]int64{int64(p), seq})
		}
	}
	out := map[windowed]int{}
	for k, recs := range groups {
		for _, r := range recs {
			out[windowed{Key: k.key, Start: k.start, P: int(r[0]), Seq: r[1], N: len(recs)}]++
		}
	}
	return out
}

// windowList is ProcessWindow's job as a keyed process function: it
// lists a key's records per tumbling window until the event-time timer at
// the window's end, which emits them all. It also checks what a process
// function may count on: once its event time has reached a timer's, the
// timer has fired before the next record comes. A record that finds a
// window whose end is at or before the current watermark still listed is
// reported with Start -1 and the window's end as Seq, which no oracle
// writes.
type windowList struct {
	size int64
	open state.MapState[int64, []rec] // by window end
}

func (f *windowList) Open(rc *stream.RuntimeContext[string]) error {
	var err error
	f.open, err = stream.MapState[int64, []rec](rc, "open")
	return err
}

func (f *windowList) ProcessElement(ctx *stream.Context[string, windowed], r rec) error {
	for end := range f.open.All() {
		if end <= ctx.CurrentWatermark() {
			if err := ctx.Emit(windowed{Key: ctx.Key(), Start: -1, P: r.P, Seq: end}); err != nil {
				return err
			}
		}
	}
	ts := ctx.Timestamp()
	end := ts - ts%f.size + f.size - 1
	recs, _ := f.open.Get(end)
	f.open.Put(end, append(slices.Clone(recs), r))
	ctx.RegisterEventTimeTimer(end)
	return nil
}

func (f *windowList) OnTimer(ctx *stream.Context[string, windowed], t stream.Timer) error {
	recs, _ := f.open.Get(t.Timestamp)
	f.open.Remove(t.Timestamp)
	for _, r := range recs {
		if err := ctx.Emit(windowed{Key: ctx.Key(), Start: t.Timestamp + 1 - f.size, P: r.P, Seq: r.Seq, N: len(recs)}); err != nil {
			return err
		}
	}
	return nil
}

// timersPending reports whether checkpoint md recorded a subtask of uid in
// the middle of firing its timers.
func timersPending(md *checkpoint.Metadata, uid string) bool {
	st, ok := md.Operator(uid)
	if !ok {
		return false
	}
	return slices.ContainsFunc(st.Subtasks, func(s checkpoint.SubtaskState) bool { return s.TimersPending })
}

// TestUnalignedBarrierInterruptsTimerBurst runs event-time windows over
// many keys whose results are large (every record of the window, with the
// window's size), as a window operator and as a process function with
// timers (whose output would change if a record reached it before a timer
// due at the restored watermark fired), into a slow operator, so that the window subtasks spend
// their time firing timers into full channels. Unaligned barriers (and
// aligned ones that time out at once) overtake that output; the window
// subtask stops its burst between two timers, takes its snapshot with the
// rest of the timers still registered, and goes on with them after it.
// Once a checkpoint taken in the middle of a burst has completed, the
// window subtask fails at the next checkpoint, so the job restores that
// one; a second failure of the slow operator lands where the seed says.
// The output is diffed against an oracle computed from the generator
// alone, for heap and embedded-store timers.
func TestUnalignedBarrierInterruptsTimerBurst(t *testing.T) {
	const partitions, perPartition, size = 2, 6000, 600
	unaligned := []string{"execution.checkpointing.unaligned.enabled=true"}
	timeout := func(d string) []string {
		return append(slices.Clone(unaligned), "execution.checkpointing.aligned-checkpoint-timeout="+d)
	}
	for _, tc := range []struct {
		seed    uint64
		op      string // window: ProcessWindow; process: windowList
		mode    []string
		backend string
	}{
		{1, "window", unaligned, "hashmap"},
		{2, "window", unaligned, "rocksdb"},
		{3, "process", timeout("0 ms"), "hashmap"},
		{4, "process", timeout("2 ms"), "rocksdb"},
		{5, "process", unaligned, "hashmap"},
		{6, "window", timeout("0 ms"), "rocksdb"},
	} {
		t.Run(fmt.Sprintf("seed=%d/%s/%s", tc.seed, tc.op, tc.backend), func(t *testing.T) {
			keys := 60 + int(tc.seed%3)*20
			gen := func(p int, seq int64) rec {
				return rec{Key: fmt.Sprintf("k%03d", datagen.Mix(tc.seed, p, seq)%uint64(keys)), Value: 1, P: p, Seq: seq}
			}
			ts := func(_ int, seq int64) int64 { return seq }
			want := burstOracle(partitions, perPartition, gen, ts, size)

			dir := t.TempDir()
			ev := streamtest.NewEvents()
			faults := streamtest.NewFaults()
			const job = "burst"
			// The window subtask fails at the first checkpoint after one
			// that recorded a burst in progress: the job restores that one.
			// When is asked by both window subtasks at once.
			var restoreFrom atomic.Int64
			crash := faults.Add(stream.FaultSync, streamtest.Fail(nil), streamtest.OnVertex("window"), streamtest.InAttempt(0),
				streamtest.When(func(site stream.FaultSite) bool {
					st, err := storage.Open(context.Background(), dir, job)
					if err != nil {
						return false
					}
					defer st.Close()
					md, _, err := st.Latest(context.Background())
					if err != nil || md == nil || md.CheckpointID >= site.Checkpoint || !timersPending(md, "window") {
						return false
					}
					restoreFrom.CompareAndSwap(0, md.CheckpointID)
					return true
				}))
			later := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("slow"), streamtest.OnSubtask(int(tc.seed%2)),
				streamtest.AfterRestore(), streamtest.AfterRecords(int64(200+tc.seed*331%900)))
			env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, append([]string{"parallelism.default=2",
				"execution.checkpointing.interval=10 ms", "execution.checkpointing.dir=" + dir,
				"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
				"state.backend.type=" + tc.backend,
				"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms"},
				tc.mode...)...)),
				stream.WithLogger(quiet), stream.WithJobID(job), stream.WithEvents(ev.Record), stream.WithBatchSize(16), faults.Option())
			if err != nil {
				t.Fatal(err)
			}
			src, err := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(64), datagen.Timestamps(ts))
			if err != nil {
				t.Fatal(err)
			}
			in := stream.FromSource(env, src, "numbers", stream.BoundedOutOfOrderness[rec](0))
			keyed := stream.KeyBy(in, func(r rec) string { return r.Key })
			var results stream.Stream[windowed]
			if tc.op == "window" {
				ws := stream.Windowed(keyed, stream.TumblingEventTimeWindows(size*time.Millisecond))
				results = stream.ProcessWindow(ws, func(key string, w stream.Window, recs []rec, emit func(windowed) error) error {
					for _, r := range recs {
						if err := emit(windowed{Key: key, Start: w.Start, P: r.P, Seq: r.Seq, N: len(recs)}); err != nil {
							return err
						}
					}
					return nil
				}, stream.Uid("window"))
			} else {
				results = stream.Process(keyed, stream.KeyedProcessFunction[string, rec, windowed](&windowList{size: size}), stream.Uid("window"))
			}
			slow := stream.Map(stream.Rebalance(results), func(w windowed) windowed {
				for start := time.Now(); time.Since(start) < 20*time.Microsecond; {
				}
				return w
			}, stream.Uid("slow"), stream.DisableChaining())
			sink := streamtest.NewCollector[windowed](true)
			stream.SinkTo(slow, sink, stream.Uid("sink"))
			if err := env.Execute(context.Background(), job); err != nil {
				t.Fatalf("seed %d: %v\n%s", tc.seed, err, ev)
			}
			if !crash.Fired() {
				t.Fatalf("seed %d: no completed checkpoint was taken in the middle of a burst of timers\n%s", tc.seed, ev)
			}
			from := restoreFrom.Load()
			if rs := ev.Restores(); len(rs) == 0 || rs[0].Checkpoint != from {
				t.Fatalf("seed %d: the job did not first restore checkpoint %d, taken in the middle of a burst\n%s", tc.seed, from, ev)
			}
			got := map[windowed]int{}
			for _, r := range sink.Results() {
				got[r]++
			}
			for w, n := range got {
				if want[w] != n {
					t.Fatalf("seed %d: %+v written %d times, the oracle writes it %d times (later failure fired: %v)", tc.seed, w, n, want[w], later.Fired())
				}
			}
			for w, n := range want {
				if got[w] != n {
					t.Fatalf("seed %d: %+v written %d times, the oracle writes it %d times (later failure fired: %v)", tc.seed, w, got[w], n, later.Fired())
				}
			}
			t.Logf("seed %d: restored checkpoint %d, taken mid-burst; %d results exact; %s", tc.seed, from, len(sink.Results()), ev)
		})
	}
}
