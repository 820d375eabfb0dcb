package bench

import (
	"context"
	"flag"
	"testing"
	"time"
)

// keyedSumKeys and keyedSumRecords size BenchmarkKeyedSumEngine
// (-bench.keyedsum.keys, -bench.keyedsum.records), so that a profile of a
// checkpointing run can be taken at the scale of `weir bench keyed-sum`.
var keyedSumKeys, keyedSumRecords = DefaultKeyedSum().Keys, int64(2_000_000)

func init() {
	flag.Int64Var(&keyedSumKeys, "bench.keyedsum.keys", keyedSumKeys, "keys of BenchmarkKeyedSumEngine")
	flag.Int64Var(&keyedSumRecords, "bench.keyedsum.records", keyedSumRecords, "records of BenchmarkKeyedSumEngine")
}

func BenchmarkKeyedSumEngine(b *testing.B) {
	for _, interval := range []time.Duration{0, time.Second} {
		name := "checkpoints-off"
		if interval > 0 {
			name = "checkpoints-1s"
		}
		b.Run(name, func(b *testing.B) {
			c := DefaultKeyedSum()
			c.Records, c.Keys = keyedSumRecords, keyedSumKeys
			c.Checkpoint = interval
			var total Result
			for range b.N {
				r, err := RunEngine(context.Background(), c)
				if err != nil {
					b.Fatal(err)
				}
				total.Records += r.Records
				total.Elapsed += r.Elapsed
			}
			b.ReportMetric(total.PerSecond(), "records/s")
		})
	}
}

func BenchmarkKeyedSumLoop(b *testing.B) {
	c := DefaultKeyedSum()
	c.Records = 2_000_000
	var total Result
	for range b.N {
		r := RunLoop(c)
		total.Records += r.Records
		total.Elapsed += r.Elapsed
	}
	b.ReportMetric(total.PerSecond(), "records/s")
}

// TestKeyedSumRuns keeps the benchmark code working in the default suite.
func TestKeyedSumRuns(t *testing.T) {
	c := DefaultKeyedSum()
	c.Records = 20_000
	c.Checkpoint = 10 * time.Millisecond
	r, err := RunEngine(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != c.Records {
		t.Fatalf("processed %d records, want %d", r.Records, c.Records)
	}
}

// TestActiveKeys checks the generator of a run with an active fraction:
// the first Keys records, over the partitions, write every key once, and
// the rest only the active keys.
func TestActiveKeys(t *testing.T) {
	c := KeyedSumConfig{Records: 30_000, Keys: 10_000, Partitions: 3, Active: 0.01}
	gen := c.gen()
	per := c.Records / int64(c.Partitions)
	first := map[int64]int{}
	for seq := range per {
		for p := range c.Partitions {
			r := gen(p, seq)
			if i := seq*int64(c.Partitions) + int64(p); i < c.Keys {
				first[r.Key]++
			} else if r.Key < 0 || r.Key >= 100 {
				t.Fatalf("record %d of partition %d has key %d, want one of the 100 active keys", seq, p, r.Key)
			}
		}
	}
	if len(first) != int(c.Keys) {
		t.Fatalf("the first %d records wrote %d distinct keys, want every key once", c.Keys, len(first))
	}
	for k, n := range first {
		if n != 1 || k < 0 || k >= c.Keys {
			t.Fatalf("key %d written %d times by the first records", k, n)
		}
	}
}

// TestStateRescaleRuns keeps `weir bench state --rescale-to` working: a
// run at parallelism 2 resumed at 1 and at 3 opens every subtask of the sum
// from the checkpoint, on the heap with full and with incremental
// checkpoints.
func TestStateRescaleRuns(t *testing.T) {
	for _, be := range StateBackends[:2] {
		for _, to := range []int{1, 3} {
			c := DefaultState()
			c.Records, c.Keys, c.Checkpoint, c.RescaleTo = 400_000, 1_000, 10*time.Millisecond, to
			r, err := RunState(t.Context(), c, be.Config)
			if err != nil {
				t.Fatalf("%s: rescale to %d: %v", be.Name, to, err)
			}
			if r.Rescale <= 0 {
				t.Errorf("%s: rescale to %d: no rescale time (%v)", be.Name, to, r.Rescale)
			}
			if residentBytes() > 0 && r.RescalePeakRSS <= 0 {
				t.Errorf("%s: rescale to %d: no resident memory sampled during it", be.Name, to)
			}
		}
	}
}

// BenchmarkStateBackends runs `weir bench state`'s keyed sum on each
// backend, for profiles (-cpuprofile) of a backend's record path.
func BenchmarkStateBackends(b *testing.B) {
	for _, be := range StateBackends {
		b.Run(be.Name, func(b *testing.B) {
			c := DefaultState()
			var total Result
			for range b.N {
				r, err := RunState(b.Context(), c, be.Config)
				if err != nil {
					b.Fatal(err)
				}
				total.Records += r.Records
				total.Elapsed += r.Elapsed
			}
			b.ReportMetric(total.PerSecond(), "records/s")
		})
	}
}
