package stream_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

type tsRec struct {
	Key   string
	Value int64
	Ts    int64
}

type WindowSum struct {
	Key        string
	Start, End int64
	Sum, Count int64
}

type sumAgg struct{}

func (sumAgg) CreateAccumulator() [2]int64        { return [2]int64{} }
func (sumAgg) Add(v tsRec, acc [2]int64) [2]int64 { return [2]int64{acc[0] + v.Value, acc[1] + 1} }
func (sumAgg) GetResult(acc [2]int64) [2]int64    { return acc }
func (sumAgg) Merge(a, b [2]int64) [2]int64       { return [2]int64{a[0] + b[0], a[1] + b[1]} }
func windowSum(k string, w stream.Window, r [2]int64) WindowSum {
	return WindowSum{Key: k, Start: w.Start, End: w.End, Sum: r[0], Count: r[1]}
}

// windowOracle computes the expected window sums in batch.
func windowOracle(recs []tsRec, kind string, size, slide, gap int64) map[WindowSum]int {
	type kw struct {
		key        string
		start, end int64
	}
	acc := map[kw][2]int64{}
	switch kind {
	case "tumbling", "sliding":
		for _, r := range recs {
			last := r.Ts - ((r.Ts%slide)+slide)%slide
			for s := last; s > r.Ts-size; s -= slide {
				k := kw{r.Key, s, s + size}
				a := acc[k]
				acc[k] = [2]int64{a[0] + r.Value, a[1] + 1}
			}
		}
	case "session":
		byKey := map[string][]tsRec{}
		for _, r := range recs {
			byKey[r.Key] = append(byKey[r.Key], r)
		}
		for key, rs := range byKey {
			slices.SortFunc(rs, func(a, b tsRec) int { return int(a.Ts - b.Ts) })
			cur := kw{key, rs[0].Ts, rs[0].Ts + gap}
			a := [2]int64{}
			for _, r := range rs {
				if r.Ts > cur.end { // a gap: the session closed
					acc[cur] = a
					cur, a = kw{key, r.Ts, r.Ts + gap}, [2]int64{}
				}
				cur.end = max(cur.end, r.Ts+gap)
				a = [2]int64{a[0] + r.Value, a[1] + 1}
			}
			acc[cur] = a
		}
	}
	out := map[WindowSum]int{}
	for k, a := range acc {
		out[WindowSum{k.key, k.start, k.end, a[0], a[1]}]++
	}
	return out
}

// windowKinds are the faults the window suites draw: all but damaged
// checkpoints. A damaged checkpoint needs an older completed one to fall
// back to, and the window jobs rarely complete two before their restore:
// their checkpoints stall under backpressure (a window firing into a full
// channel holds up a barrier that an aligned subtask downstream waits
// for) until the checkpoint timeout. The keyed-sum suite draws them.
var windowKinds = slices.DeleteFunc(slices.Clone(faultKinds), func(k string) bool { return k == kindStorageCorrupt })

// TestDifferentialWindows runs tumbling, sliding and session window sums
// under a seeded schedule of faults of every kind and seeded engine
// options (see TestDifferentialKeyedSum), and compares the transactional
// sink's output with a batch oracle: every window exactly once, with
// exactly its records. Records are out of order within the watermark's
// bound; TestLateDataAcrossRestores covers records beyond it.
func TestDifferentialWindows(t *testing.T) {
	seeds := diffSeedList(300)
	var tally kindTally
	var onPebble, onHeapIncremental atomic.Int64
	forEachSeed(t, seeds, func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 7))
		kind := []string{"tumbling", "sliding", "session"}[r.IntN(3)]
		partitions := 1 + r.IntN(4)
		perPartition := int64(200 + r.IntN(1000))
		keys := 1 + r.IntN(12)
		par := 1 + r.IntN(3)
		const size, slide, gap = 1000, 250, 150
		// Per partition, time advances 0-40 ms per record, with up to
		// 100 ms of disorder; the watermark allows 200 ms.
		gen := func(p int, seq int64) tsRec {
			m := datagen.Mix(seed, p, seq)
			base := seq * 20
			return tsRec{Key: fmt.Sprintf("k%d", m%uint64(keys)), Value: int64(m>>20%100) + 1, Ts: 1_700_000_000_000 + base + int64(m>>40%100)}
		}
		eng := drawEngine(r)
		eng.drawHeapIncremental(seed)
		if eng.pebble {
			onPebble.Add(1)
		} else if eng.incremental {
			onHeapIncremental.Add(1)
		}
		eng.drawAlignment(seed)
		eng.drawDebloat(seed)
		kinds := drawKinds(r, 3, windowKinds)
		needsEngine(&eng, kinds)
		if eng.corruptible {
			eng.dir = t.TempDir()
		}
		eng.ev = &streamtest.Events{}
		faults := streamtest.NewFaults()
		env, err := stream.NewEnvironment(append(eng.options(),
			stream.WithConfig(mustConfig(t, eng.config(fmt.Sprintf("parallelism.default=%d", par))...)),
			stream.WithLogger(quiet), faults.Option())...)
		if err != nil {
			t.Fatal(err)
		}
		src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(32), datagen.RatePerSecond(40_000))
		wm := stream.BoundedOutOfOrderness[tsRec](200 * time.Millisecond).WithTimestamps(func(v tsRec, _ int64) int64 { return v.Ts })
		events := stream.FromSource(env, src, "events", wm)
		var assigner stream.WindowAssigner
		switch kind {
		case "tumbling":
			assigner = stream.TumblingEventTimeWindows(size * time.Millisecond)
		case "sliding":
			assigner = stream.SlidingEventTimeWindows(size*time.Millisecond, slide*time.Millisecond)
		case "session":
			assigner = stream.EventTimeSessionWindows(gap * time.Millisecond)
		}
		ws := stream.Windowed(stream.KeyBy(events, func(v tsRec) string { return v.Key }), assigner)
		sums := stream.Aggregate(ws, stream.AggregateFunction[tsRec, [2]int64, [2]int64](sumAgg{}), windowSum, eng.op(stream.Uid("windows"))...)
		sink := newSink[WindowSum](eng)
		stream.SinkTo(sums, sink, eng.op(stream.Uid("sink"), stream.Parallelism(1))...)
		shape := jobShape(t, env, []string{"events"}, []string{"events", "windows", "sink"}, []string{"sink"}, max(int64(partitions)*perPartition/int64(par), 1))
		shape.ev, shape.keyed = eng.ev, []string{"windows"}
		sched := drawSchedule(r, faults, shape, drawStateStore(r, eng, kinds))
		name := fmt.Sprintf("seed=%d kind=%s partitions=%d records=%d keys=%d parallelism=%d engine: %s", seed, kind, partitions, perPartition, keys, par, eng)
		runErr := executeJob(t, env, "windows", func() string { return name + "; faults: " + sched.String() })
		tally.add(sched)
		name += "; faults: " + sched.String()
		if runErr != nil {
			t.Fatalf("%s: %v", name, runErr)
		}
		var recs []tsRec
		for p := range partitions {
			for seq := range perPartition {
				recs = append(recs, gen(p, seq))
			}
		}
		want := windowOracle(recs, kind, size, map[string]int64{"tumbling": size, "sliding": slide, "session": size}[kind], gap)
		if got := counts(sink.Results()); !maps.Equal(got, want) {
			t.Fatalf("%s: windows: %s", name, diffMaps(got, want))
		}
	})
	tally.check(t, len(seeds), windowKinds)
	checkPebbleSeeds(t, len(seeds), onPebble.Load(), onHeapIncremental.Load())
}

// checkPebbleSeeds logs how many of a suite's seeds kept their keyed state
// in the pebble backend, and fails a suite of 30 seeds or more where none
// did: it would prove nothing about it.
func checkPebbleSeeds(t *testing.T, seeds int, onPebble, onHeapIncremental int64) {
	t.Logf("%d of %d seeds kept their keyed state in the pebble backend, %d on the heap with incremental checkpoints", onPebble, seeds, onHeapIncremental)
	if seeds >= 30 && onPebble == 0 {
		t.Error("no seed kept its keyed state in the pebble backend: the suite proves nothing about it")
	}
	if seeds >= 30 && onHeapIncremental == 0 {
		t.Error("no seed took incremental checkpoints of the heap backend: the suite proves nothing about them")
	}
}

func first[T any](s []T) any {
	if len(s) == 0 {
		return nil
	}
	return s[0]
}

// lateRec is a record of orderedSource: its split and sequence number
// identify it.
type lateRec struct {
	Key   string
	Value int64
	Ts    int64
	P     int
	Seq   int64
}

// Tagged says whether a record was behind the keyed process function's
// event time when it arrived.
type Tagged struct {
	P    int
	Seq  int64
	Late bool
}

type lateSumAgg struct{}

func (lateSumAgg) CreateAccumulator() [2]int64 { return [2]int64{} }
func (lateSumAgg) Add(v lateRec, acc [2]int64) [2]int64 {
	return [2]int64{acc[0] + v.Value, acc[1] + 1}
}
func (lateSumAgg) GetResult(acc [2]int64) [2]int64 { return acc }
func (lateSumAgg) Merge(a, b [2]int64) [2]int64    { return [2]int64{a[0] + b[0], a[1] + b[1]} }

// orderedSource is a bounded source of several splits whose records come
// in one order that depends neither on timing nor on where a restore
// resumes: by sequence number, then split. Each fetch holds one record, so
// the source's watermark follows every record and a run's watermarks, and
// so which records are late, are the same in every run. pace sleeps a
// millisecond every that many records, so that checkpoints and failures
// land all along the input.
type orderedSource struct {
	splits int
	count  int64
	pace   int
	gen    func(p int, seq int64) lateRec
}

func (s *orderedSource) Splits(context.Context) ([]string, error) {
	ids := make([]string, s.splits)
	for p := range ids {
		ids[p] = fmt.Sprintf("ordered-%d", p)
	}
	return ids, nil
}

func (s *orderedSource) Bounded() bool { return true }

func (s *orderedSource) NewReader(_ context.Context, _ connector.ReaderInfo, splits []connector.SplitStart) (connector.Reader[lateRec], error) {
	r := &orderedReader{src: s, next: map[int]int64{}}
	for _, sp := range splits {
		var p int
		if _, err := fmt.Sscanf(sp.Split, "ordered-%d", &p); err != nil {
			return nil, err
		}
		r.next[p] = max(sp.Offset, 0)
	}
	return r, nil
}

type orderedReader struct {
	src  *orderedSource
	next map[int]int64
	n    int
}

func (r *orderedReader) Fetch(ctx context.Context) (connector.Fetch[lateRec], error) {
	if err := ctx.Err(); err != nil {
		return connector.Fetch[lateRec]{}, err
	}
	p, seq := -1, int64(0)
	for q, n := range r.next {
		if n < r.src.count && (p < 0 || n < seq || n == seq && q < p) {
			p, seq = q, n
		}
	}
	if p < 0 {
		return connector.Fetch[lateRec]{}, connector.ErrEndOfInput
	}
	if r.n++; r.n%r.src.pace == 0 {
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return connector.Fetch[lateRec]{}, ctx.Err()
		case <-t.C:
		}
	}
	r.next[p] = seq + 1
	return connector.Fetch[lateRec]{
		Split: fmt.Sprintf("ordered-%d", p), Records: []lateRec{r.src.gen(p, seq)},
		Next: seq + 1, EndOfSplit: seq+1 == r.src.count,
	}, nil
}

func (r *orderedReader) Close() error { return nil }

// lateOracle replays orderedSource's records in their order, with the
// watermark a bounded-out-of-orderness source emits after each one (the
// minimum, over the splits that have not ended, of the split's highest
// timestamp minus the bound minus 1 ms, never moving back; no watermark
// while a split has none), and returns the tumbling windows' sums of the
// records that were not late (a record is late for a window whose last
// millisecond is at or before the watermark it arrives at), and which
// records were at or before the watermark. Windows are size long and
// start every slide (tumbling if slide is size); the count is of records
// late for at least one window.
func lateOracle(splits int, count int64, gen func(int, int64) lateRec, bound, size, slide int64) (map[WindowSum]int, map[Tagged]int, int) {
	type kw struct {
		key   string
		start int64
	}
	acc := map[kw][2]int64{}
	tags := map[Tagged]int{}
	wm := int64(math.MinInt64)
	maxTs := make([]int64, splits)
	for p := range maxTs {
		maxTs[p] = math.MinInt64
	}
	ended := make([]bool, splits)
	late := 0
	for seq := range count {
		for p := range splits {
			r := gen(p, seq)
			wasLate := false
			for start := r.Ts - ((r.Ts%slide)+slide)%slide; start > r.Ts-size; start -= slide {
				if start+size-1 <= wm {
					wasLate = true
					continue
				}
				a := acc[kw{r.Key, start}]
				acc[kw{r.Key, start}] = [2]int64{a[0] + r.Value, a[1] + 1}
			}
			if wasLate {
				late++
			}
			tags[Tagged{P: p, Seq: seq, Late: r.Ts <= wm}]++
			maxTs[p] = max(maxTs[p], r.Ts)
			ended[p] = seq == count-1
			lowest, active := int64(math.MaxInt64), false
			for q := range splits {
				if ended[q] {
					continue
				}
				active = true
				if maxTs[q] == math.MinInt64 {
					lowest = math.MinInt64
				} else {
					lowest = min(lowest, maxTs[q]-bound-1)
				}
			}
			if active && lowest > wm {
				wm = lowest
			}
		}
	}
	out := map[WindowSum]int{}
	for k, a := range acc {
		out[WindowSum{k.key, k.start, k.start + size, a[0], a[1]}]++
	}
	return out, tags, late
}

// lateJob builds a job over an orderedSource with late data: event-time
// window sums (windows size long every slide, tumbling if slide is size), and a keyed process function that tags each
// record with whether it was behind its event time, into the exactly-once
// sinks windows and tags.
func lateJob(env *stream.Environment, src *orderedSource, windowPar int, bound, size, slide int64, windows *streamtest.Collector[WindowSum], tags *streamtest.Collector[Tagged], opts ...stream.OpOption) {
	wm := stream.BoundedOutOfOrderness[lateRec](time.Duration(bound) * time.Millisecond).WithTimestamps(func(v lateRec, _ int64) int64 { return v.Ts })
	events := stream.FromSource(env, src, "events", wm, stream.Parallelism(1))
	keyed := stream.KeyBy(events, func(v lateRec) string { return v.Key })
	a := stream.TumblingEventTimeWindows(time.Duration(size) * time.Millisecond)
	if slide != size {
		a = stream.SlidingEventTimeWindows(time.Duration(size)*time.Millisecond, time.Duration(slide)*time.Millisecond)
	}
	ws := stream.Windowed(keyed, a)
	with := func(o ...stream.OpOption) []stream.OpOption { return append(o, opts...) }
	sums := stream.Aggregate(ws, stream.AggregateFunction[lateRec, [2]int64, [2]int64](lateSumAgg{}), windowSum, with(stream.Uid("windows"), stream.Parallelism(windowPar))...)
	stream.SinkTo(sums, windows, with(stream.Uid("window-sink"), stream.Parallelism(1))...)
	tag := stream.ProcessFunc[string, lateRec, Tagged](func(ctx *stream.Context[string, Tagged], v lateRec) error {
		return ctx.Emit(Tagged{P: v.P, Seq: v.Seq, Late: v.Ts <= ctx.CurrentWatermark()})
	})
	tagged := stream.Process(keyed, stream.KeyedProcessFunction[string, lateRec, Tagged](tag), with(stream.Uid("tagger"), stream.Parallelism(windowPar))...)
	stream.SinkTo(tagged, tags, with(stream.Uid("tag-sink"), stream.Parallelism(1))...)
}

// lateGen returns a seeded generator of records whose timestamps advance
// 20 ms per sequence number with up to 150 ms of disorder, within the
// 200 ms bound, except for one record in 12 that is up to 2.5 s behind
// (late, or on the edge of it) and one in 30 that is up to 1.5 s ahead,
// which makes the records after it late until time catches up.
func lateGen(seed uint64, keys int) func(int, int64) lateRec {
	return func(p int, seq int64) lateRec {
		m := datagen.Mix(seed, p, seq)
		ts := 1_700_000_000_000 + seq*20 + int64(m>>40%150)
		switch {
		case m>>8%12 == 0:
			ts -= int64(m >> 20 % 2500)
		case m>>8%30 == 1:
			ts += int64(m >> 20 % 1500)
		}
		return lateRec{Key: fmt.Sprintf("k%d", m%uint64(keys)), Value: int64(m>>52%100) + 1, Ts: ts, P: p, Seq: seq}
	}
}

// diffMaps reports how got differs from want.
func diffMaps[K comparable](got, want map[K]int) string {
	var missing, extra []K
	for k, n := range want {
		if got[k] != n {
			missing = append(missing, k)
		}
	}
	for k, n := range got {
		if want[k] != n {
			extra = append(extra, k)
		}
	}
	return fmt.Sprintf("%d entries, oracle %d; missing or wrong %d (e.g. %v), extra or duplicated %d (e.g. %v)",
		len(got), len(want), len(missing), first(missing), len(extra), first(extra))
}

func counts[T comparable](vs []T) map[T]int {
	m := map[T]int{}
	for _, v := range vs {
		m[v]++
	}
	return m
}

// TestLateDataAcrossRestores runs tumbling event-time windows and a keyed
// process function over input with records later than the watermark's
// bound, with exactly-once sinks and seeded failures of the source or the
// keyed subtasks at random moments, and compares the output with an
// oracle of the failure-free run: a restored run must drop as late
// exactly the records the failure-free run dropped, so no window fires
// twice or with other records, and see each record at the event time the
// failure-free run saw it at.
func TestLateDataAcrossRestores(t *testing.T) {
	const bound, size = 200, 1000
	seeds := diffSeedList(200)
	var tally kindTally
	var lateTotal atomic.Int64
	var slidingLate atomic.Int64
	forEachSeed(t, seeds, func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 11))
		splits := 1 + r.IntN(4)
		count := int64(600/splits + r.IntN(1200/splits))
		keys := 1 + r.IntN(12)
		// Even seeds slide their windows, a quarter of their size: the
		// windows are cut into panes, and a record can be late for some
		// of its windows and not for the others.
		slide := int64(size)
		if seed%2 == 0 {
			slide = size / 4
		}
		par := 1 + r.IntN(3)
		gen := lateGen(seed, keys)
		eng := drawEngine(r)
		eng.drawHeapIncremental(seed)
		eng.drawAlignment(seed)
		kinds := drawKinds(r, 3, windowKinds)
		needsEngine(&eng, kinds)
		if eng.corruptible {
			eng.dir = t.TempDir()
		}
		eng.ev = &streamtest.Events{}
		faults := streamtest.NewFaults()
		env, err := stream.NewEnvironment(append(eng.options(),
			stream.WithConfig(mustConfig(t, eng.config()...)), stream.WithLogger(quiet), faults.Option())...)
		if err != nil {
			t.Fatal(err)
		}
		windows, tags := newSink[WindowSum](eng), newSink[Tagged](eng)
		lateJob(env, &orderedSource{splits: splits, count: count, pace: 8, gen: gen}, par, bound, size, slide, windows, tags, eng.op()...)
		shape := jobShape(t, env, []string{"events"}, []string{"events", "windows", "window-sink", "tagger", "tag-sink"}, []string{"window-sink", "tag-sink"},
			max(int64(splits)*count/int64(par)/2, 1))
		shape.ev, shape.keyed = eng.ev, []string{"windows"}
		sched := drawSchedule(r, faults, shape, drawStateStore(r, eng, kinds))
		name := fmt.Sprintf("seed=%d splits=%d records=%d keys=%d slide=%d parallelism=%d engine: %s", seed, splits, count, keys, slide, par, eng)
		runErr := executeJob(t, env, "late", func() string { return name + "; faults: " + sched.String() })
		tally.add(sched)
		name += "; faults: " + sched.String()
		if runErr != nil {
			t.Fatalf("%s: %v", name, runErr)
		}
		wantWindows, wantTags, late := lateOracle(splits, count, gen, bound, size, slide)
		lateTotal.Add(int64(late))
		if slide != size {
			slidingLate.Add(int64(late))
		}
		if got := counts(windows.Results()); !maps.Equal(got, wantWindows) {
			t.Fatalf("%s: windows: %s", name, diffMaps(got, wantWindows))
		}
		if got := counts(tags.Results()); !maps.Equal(got, wantTags) {
			t.Fatalf("%s: tagged records: %s", name, diffMaps(got, wantTags))
		}
	})
	tally.check(t, len(seeds), windowKinds)
	if lateTotal.Load() == 0 {
		t.Fatal("no late records: the test proves nothing about late data across restores")
	}
	if len(seeds) > 1 && slidingLate.Load() == 0 {
		t.Fatal("no late records in sliding windows: the test proves nothing about their panes")
	}
}

// TestLateDataRescaledResume stops a job with late data after a few
// checkpoints and resumes it from its checkpoint directory with the keyed
// operators at another parallelism: each new subtask starts at the event
// time of the old subtasks whose key groups it takes, so the output of
// both runs together is the failure-free run's. Half the seeds take
// incremental checkpoints of the heap backend, so the resume splits and
// merges the key groups of chains of deltas, timers included.
func TestLateDataRescaledResume(t *testing.T) {
	const bound, size = 200, 1000
	seeds := diffSeedList(6)
	for _, seed := range seeds {
		r := rand.New(rand.NewPCG(seed, 13))
		splits := 1 + r.IntN(4)
		count := int64(1200/splits + r.IntN(1000/splits))
		keys := 2 + r.IntN(12)
		before := 1 + r.IntN(3)
		after := 1 + (before+r.IntN(2))%3
		stopAt := int64(3 + r.IntN(6))
		// Odd seeds checkpoint the heap incrementally: the resume
		// rescales a chain of a full snapshot and deltas.
		incremental := seed%2 == 1
		// Seeds slide their windows by seed%3: 0 tumbling, 1 sliding
		// (cut into panes), 2 sliding, kept whole by the first run as
		// weir did before it cut them, in panes after the resume.
		slide, whole := int64(size), seed%3 == 2
		if seed%3 > 0 {
			slide = size / 4
		}
		name := fmt.Sprintf("seed=%d splits=%d records=%d keys=%d slide=%d (first run whole: %v) parallelism %d then %d, stopped after %d checkpoints, incremental=%v",
			seed, splits, count, keys, slide, whole, before, after, stopAt, incremental)
		gen := lateGen(seed, keys)
		common := streamtest.Config("execution.checkpointing.interval=10 ms", fmt.Sprintf("execution.checkpointing.incremental=%v", incremental))
		// One pair of sinks for both runs: the external system outlives
		// the job.
		windows, tags := streamtest.NewCollector[WindowSum](true), streamtest.NewCollector[Tagged](true)
		job := func(parallelism int, whole bool) func(*stream.Environment) {
			return func(env *stream.Environment) {
				if whole {
					stream.WithoutPanes(env)
				}
				lateJob(env, &orderedSource{splits: splits, count: count, pace: 8, gen: gen}, parallelism, bound, size, slide, windows, tags)
			}
		}
		first := streamtest.Run(t, job(before, whole), common, streamtest.UntilCheckpoints(int(stopAt)))
		if !first.Canceled {
			t.Fatalf("%s: the first run ended before it was stopped: %v", name, first.Err)
		}
		second := streamtest.Run(t, job(after, false), common, streamtest.ResumeFrom(first))
		if second.Err != nil {
			t.Fatalf("%s: %v", name, second.Err)
		}
		if rs := second.Events.Of(stream.EventRestored); len(rs) != 1 || rs[0].Checkpoint == 0 {
			t.Fatalf("%s: the second run restored %+v, want one checkpoint of the first", name, rs)
		}
		wantWindows, wantTags, _ := lateOracle(splits, count, gen, bound, size, slide)
		if got := counts(windows.Results()); !maps.Equal(got, wantWindows) {
			t.Fatalf("%s: windows: %s", name, diffMaps(got, wantWindows))
		}
		if got := counts(tags.Results()); !maps.Equal(got, wantTags) {
			t.Fatalf("%s: tagged records: %s", name, diffMaps(got, wantTags))
		}
	}
}
