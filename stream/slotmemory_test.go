package stream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

type keyedNum struct {
	Key string
	N   int64
}

type countedSum struct {
	Key        string
	Count, Sum int64
}

// slotSum emits each key's running sum.
type slotSum struct{ sum state.ValueState[int64] }

func (s *slotSum) Open(rc *stream.RuntimeContext[string]) (err error) {
	s.sum, err = stream.ValueState[int64](rc, "sum")
	return err
}

func (s *slotSum) ProcessElement(ctx *stream.Context[string, keyedNum], e keyedNum) error {
	n, _ := s.sum.Value()
	s.sum.Update(n + e.N)
	return ctx.Emit(keyedNum{e.Key, n + e.N})
}

// sumCounter counts the sums each key receives.
type sumCounter struct{ count state.ValueState[int64] }

func (c *sumCounter) Open(rc *stream.RuntimeContext[string]) (err error) {
	c.count, err = stream.ValueState[int64](rc, "count")
	return err
}

func (c *sumCounter) ProcessElement(ctx *stream.Context[string, countedSum], e keyedNum) error {
	n, _ := c.count.Value()
	c.count.Update(n + 1)
	return ctx.Emit(countedSum{e.Key, n + 1, e.N})
}

// TestFixedPerSlotMemory runs two keyed operators at parallelism 2 on the
// pebble backend with state.backend.rocksdb.memory.fixed-per-slot (each
// slot's two keyed subtasks share 16 MiB), with a failure, and checks
// the output exactly: every key's sums counted 1..n once each, the n-th
// its total. A budget that leaves a slot's keyed subtasks under 4 MiB
// each fails the job, naming the key.
func TestFixedPerSlotMemory(t *testing.T) {
	const n, keys = 20_000, 300
	job := func(t *testing.T, perSlot string, faults *streamtest.Faults) (*streamtest.Collector[countedSum], error) {
		opts := []stream.Option{stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=10 ms",
			"state.backend.type=pebble", "state.backend.pebble.localdir="+t.TempDir(),
			"state.backend.rocksdb.memory.fixed-per-slot="+perSlot,
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms")),
			stream.WithLogger(quiet)}
		if faults != nil {
			opts = append(opts, faults.Option())
		}
		env, err := stream.NewEnvironment(opts...)
		if err != nil {
			t.Fatal(err)
		}
		src, _ := datagen.New(func(_ int, seq int64) keyedNum { return keyedNum{fmt.Sprintf("k%d", seq%keys), seq + 1} },
			datagen.Count(n), datagen.BatchSize(64), datagen.RatePerSecond(100_000))
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[keyedNum]())
		sums := stream.Process(stream.KeyBy(in, func(e keyedNum) string { return e.Key }),
			stream.KeyedProcessFunction[string, keyedNum, keyedNum](&slotSum{}), stream.Uid("sum"))
		counted := stream.Process(stream.KeyBy(sums, func(e keyedNum) string { return e.Key }),
			stream.KeyedProcessFunction[string, keyedNum, countedSum](&sumCounter{}), stream.Uid("count"))
		sink := streamtest.NewCollector[countedSum](true)
		stream.SinkTo(counted, sink, stream.Uid("sink"))
		return sink, env.Execute(context.Background(), "per-slot")
	}

	t.Run("exact", func(t *testing.T) {
		faults := streamtest.NewFaults()
		fault := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("count"), streamtest.OnSubtask(1), streamtest.AfterRecords(3000), streamtest.InAttempt(0))
		sink, err := job(t, "16 mb", faults)
		if err != nil {
			t.Fatal(err)
		}
		if !fault.Fired() {
			t.Fatalf("the failure did not strike: %s", faults)
		}
		// The oracle: each key's records and total.
		count, total := map[string]int64{}, map[string]int64{}
		for seq := range int64(n) {
			k := fmt.Sprintf("k%d", seq%keys)
			count[k]++
			total[k] += seq + 1
		}
		seen := map[string]map[int64]int64{}
		for _, r := range sink.Results() {
			if seen[r.Key] == nil {
				seen[r.Key] = map[int64]int64{}
			}
			if _, dup := seen[r.Key][r.Count]; dup {
				t.Fatalf("key %s: count %d emitted twice", r.Key, r.Count)
			}
			seen[r.Key][r.Count] = r.Sum
		}
		if len(seen) != keys {
			t.Fatalf("%d keys in the output, want %d", len(seen), keys)
		}
		for k, c := range count {
			got := seen[k]
			if int64(len(got)) != c {
				t.Fatalf("key %s: %d sums counted, want %d", k, len(got), c)
			}
			prev := int64(0)
			for i := int64(1); i <= c; i++ {
				s, ok := got[i]
				if !ok || s <= prev {
					t.Fatalf("key %s: sum number %d is %d (present %v), after %d", k, i, s, ok, prev)
				}
				prev = s
			}
			if prev != total[k] {
				t.Fatalf("key %s: last sum %d, want %d", k, prev, total[k])
			}
		}
	})
	t.Run("too small", func(t *testing.T) {
		_, err := job(t, "6 mb", nil)
		if err == nil || !strings.Contains(err.Error(), "state.backend.rocksdb.memory.fixed-per-slot") || !strings.Contains(err.Error(), "2 keyed subtasks") {
			t.Fatalf("6 MiB for a slot of two keyed subtasks: %v, want an error naming the key", err)
		}
	})
}
