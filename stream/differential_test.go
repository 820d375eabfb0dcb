package stream_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/mini"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

var (
	diffSeed  = flag.Uint64("diff.seed", 0, "run the differential tests for this seed only")
	diffSeeds = flag.Int("diff.seeds", 12, "number of seeds the differential tests run (raise for a soak)")
)

func diffSeedList() []uint64 {
	if *diffSeed != 0 {
		return []uint64{*diffSeed}
	}
	s := make([]uint64, *diffSeeds)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}

// rec is a generated record: a key and a value unique within the key, so
// that an output sum identifies exactly which records it includes.
type rec struct {
	Key   string
	Value int64
	P     int
	Seq   int64
}

// KeyedSum is the process function's output.
type KeyedSum struct {
	Key string
	Sum int64
	// Last is the record that produced this sum.
	P   int
	Seq int64
}

type runningSum struct {
	sum stateValue
}

type stateValue interface {
	Value() (int64, bool)
	Update(int64)
}

func (f *runningSum) Open(rc *stream.RuntimeContext[string]) error {
	s, err := stream.ValueState[int64](rc, "sum")
	f.sum = s
	return err
}

func (f *runningSum) ProcessElement(ctx *stream.Context[string, KeyedSum], r rec) error {
	s, _ := f.sum.Value()
	s += r.Value
	f.sum.Update(s)
	return ctx.Emit(KeyedSum{Key: r.Key, Sum: s, P: r.P, Seq: r.Seq})
}

// plan is a seeded failure schedule: failure i strikes subtask (vertex,
// subtask) of attempt i once it has processed at least records records.
type plan struct {
	mu       sync.Mutex
	failures []failure
	struck   int
}

type failure struct {
	vertex  string
	subtask int
	records int64
}

func (p *plan) fault(task stream.TaskInfo, attempt int, records int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if attempt >= len(p.failures) || attempt != p.struck {
		return nil
	}
	f := p.failures[attempt]
	if task.Vertex == f.vertex && task.Subtask == f.subtask && records >= f.records {
		p.struck++
		return fmt.Errorf("injected failure %d at %s[%d] after %d records", attempt+1, f.vertex, f.subtask, records)
	}
	return nil
}

// TestDifferentialKeyedSum runs a keyed running sum over seeded random
// input with aligned exactly-once checkpoints and seeded failures of random
// subtasks at random moments, and checks the transactional sink's output
// against the mini oracle: every record's sum appears exactly once, each
// key's sums are the prefix sums of its records in an order that keeps
// every partition's order, and the last sum of each key is the fold.
func TestDifferentialKeyedSum(t *testing.T) {
	struckTotal := 0
	for _, seed := range diffSeedList() {
		r := rand.New(rand.NewPCG(seed, 99))
		partitions := 1 + r.IntN(4)
		perPartition := int64(500 + r.IntN(2500))
		keys := 1 + r.IntN(40)
		par := 1 + r.IntN(3)
		gen := func(p int, seq int64) rec {
			k := datagen.Mix(seed, p, seq) % uint64(keys)
			return rec{Key: fmt.Sprintf("k%02d", k), Value: int64(p) + int64(partitions)*seq + 1, P: p, Seq: seq}
		}
		vertices := []string{"numbers", "sum"}
		fp := &plan{}
		for range 1 + r.IntN(3) {
			fp.failures = append(fp.failures, failure{
				vertex:  vertices[r.IntN(len(vertices))],
				subtask: r.IntN(par),
				records: int64(r.IntN(int(perPartition))),
			})
		}
		name := fmt.Sprintf("seed=%d partitions=%d records=%d keys=%d parallelism=%d failures=%v", seed, partitions, perPartition, keys, par, fp.failures)

		var ev events
		env, err := stream.NewEnvironment(
			stream.WithConfig(mustConfig(t, fmt.Sprintf("parallelism.default=%d", par), "execution.checkpointing.interval=10 ms",
				"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms")),
			stream.WithLogger(quiet), stream.WithEvents(ev.add), stream.WithFaults(fp.fault))
		if err != nil {
			t.Fatal(err)
		}
		src, err := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(64), datagen.RatePerSecond(40_000))
		if err != nil {
			t.Fatal(err)
		}
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
		sink := streamtest.NewCollector[KeyedSum](true)
		stream.SinkTo(sums, sink, stream.Uid("sink"), stream.Parallelism(1))
		if err := env.Execute(context.Background(), "differential"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		struckTotal += fp.struck

		// The mini oracle: the fold over every partition's records.
		var all []mini.Element
		records := map[[2]int64]rec{}
		for p := range partitions {
			for seq := range perPartition {
				x := gen(p, seq)
				all = append(all, mini.Event{Key: x.Key, Value: x.Value})
				records[[2]int64{int64(p), seq}] = x
			}
		}
		want := mini.Fold(all, mini.ByKey, len(all))

		out := sink.Results()
		if len(out) != len(all) {
			t.Fatalf("%s: %d sums for %d records (%d written)", name, len(out), len(all), sink.Writes())
		}
		byKey := map[string][]KeyedSum{}
		for _, s := range out {
			byKey[s.Key] = append(byKey[s.Key], s)
		}
		got := map[string]int64{}
		for k, ss := range byKey {
			slices.SortFunc(ss, func(a, b KeyedSum) int { return int(a.Sum - b.Sum) })
			lastSeq := map[int]int64{}
			prev := int64(0)
			for _, s := range ss {
				x := records[[2]int64{int64(s.P), s.Seq}]
				if x.Key != k || s.Sum-prev != x.Value {
					t.Fatalf("%s: key %s: sum %d after %d does not add record %d/%d (value %d)", name, k, s.Sum, prev, s.P, s.Seq, x.Value)
				}
				if last, ok := lastSeq[s.P]; ok && s.Seq <= last {
					t.Fatalf("%s: key %s: record %d/%d summed after %d/%d", name, k, s.P, s.Seq, s.P, last)
				}
				lastSeq[s.P], prev = s.Seq, s.Sum
			}
			got[k] = prev
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: final sums %v, oracle %v", name, got, want)
		}
		if n := len(ev.of(runtime.EventRestored)); n != fp.struck {
			t.Fatalf("%s: %d failures struck but %d restores", name, fp.struck, n)
		}
	}
	if struckTotal == 0 {
		t.Fatal("no injected failure struck: the test proves nothing about recovery")
	}
}
