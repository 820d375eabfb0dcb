package stream_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

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

// TestDifferentialWindows runs tumbling, sliding and session window sums
// under seeded failures and compares the transactional sink's output with
// a batch oracle: every window exactly once, with exactly its records.
func TestDifferentialWindows(t *testing.T) {
	struck := 0
	for _, seed := range diffSeedList() {
		for _, kind := range []string{"tumbling", "sliding", "session"} {
			r := rand.New(rand.NewPCG(seed, 7))
			partitions := 1 + r.IntN(4)
			perPartition := int64(300 + r.IntN(1500))
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
			fp := &plan{}
			for range 1 + r.IntN(2) {
				fp.failures = append(fp.failures, failure{vertex: []string{"events", "windows"}[r.IntN(2)], subtask: r.IntN(par), records: int64(r.IntN(int(perPartition)))})
			}
			name := fmt.Sprintf("seed=%d kind=%s partitions=%d records=%d keys=%d parallelism=%d failures=%v", seed, kind, partitions, perPartition, keys, par, fp.failures)
			env, err := stream.NewEnvironment(
				stream.WithConfig(mustConfig(t, fmt.Sprintf("parallelism.default=%d", par), "execution.checkpointing.interval=10 ms",
					"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms")),
				stream.WithLogger(quiet), stream.WithFaults(fp.fault))
			if err != nil {
				t.Fatal(err)
			}
			src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(32), datagen.RatePerSecond(30_000))
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
			sums := stream.Aggregate(ws, stream.AggregateFunction[tsRec, [2]int64, [2]int64](sumAgg{}), windowSum, stream.Uid("windows"))
			sink := streamtest.NewCollector[WindowSum](true)
			stream.SinkTo(sums, sink, stream.Uid("sink"), stream.Parallelism(1))
			if err := env.Execute(context.Background(), "windows"); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			struck += fp.struck
			var recs []tsRec
			for p := range partitions {
				for seq := range perPartition {
					recs = append(recs, gen(p, seq))
				}
			}
			want := windowOracle(recs, kind, size, map[string]int64{"tumbling": size, "sliding": slide, "session": size}[kind], gap)
			got := map[WindowSum]int{}
			for _, s := range sink.Results() {
				got[s]++
			}
			if !maps.Equal(got, want) {
				var missing, extra []WindowSum
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
				t.Fatalf("%s: %d windows, oracle %d; missing or wrong %d (e.g. %v), extra or duplicated %d (e.g. %v)",
					name, len(got), len(want), len(missing), first(missing), len(extra), first(extra))
			}
		}
	}
	if struck == 0 {
		t.Fatal("no injected failure struck")
	}
}

func first[T any](s []T) any {
	if len(s) == 0 {
		return nil
	}
	return s[0]
}
