package mini

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/weirstream/weir/config"
)

// newRandomJob draws a job of 1–4 sources, a delivery schedule and up to
// three failures from r.
func newRandomJob(r *rand.Rand, mode config.CheckpointingMode, positive bool) JobConfig {
	cfg := JobConfig{Mode: mode, BarrierEvery: 1 + r.IntN(5)}
	total := 0
	for range 1 + r.IntN(4) {
		src := randomInput(r)
		if positive {
			for i, e := range src {
				if ev, ok := e.(Event); ok {
					ev.Value = 1 + r.Int64N(5)
					src[i] = ev
				}
			}
		}
		cfg.Sources = append(cfg.Sources, src)
		total += len(src) + len(src)/cfg.BarrierEvery + 1
	}
	for range 2 * total {
		cfg.Schedule = append(cfg.Schedule, r.IntN(len(cfg.Sources)))
	}
	for range r.IntN(4) {
		cfg.FailAt = append(cfg.FailAt, 1+r.IntN(total+1))
	}
	return cfg
}

// foldPrefixes folds the first offsets[i] events of every source i.
func foldPrefixes(sources [][]Element, offsets []int) map[string]int64 {
	sum := map[string]int64{}
	for i, src := range sources {
		for k, v := range Fold(src, ByKey, offsets[i]) {
			sum[k] += v
		}
	}
	return sum
}

func foldAll(sources [][]Element) map[string]int64 {
	offsets := make([]int, len(sources))
	for i, src := range sources {
		offsets[i] = len(src)
	}
	return foldPrefixes(sources, offsets)
}

func describe(cfg JobConfig) string {
	return fmt.Sprintf("mode=%v sources=%d every=%d failAt=%v", cfg.Mode, len(cfg.Sources), cfg.BarrierEvery, cfg.FailAt)
}

// TestJobExactlyOnce: with aligned checkpoints, every checkpoint of a
// multi-source job is the fold over exactly the source prefixes it
// records, and the final state equals the fold over all input, whatever the
// delivery order and wherever the failures fall.
func TestJobExactlyOnce(t *testing.T) {
	failures := 0
	for _, seed := range seeds() {
		r := rand.New(rand.NewPCG(seed, 2))
		cfg := newRandomJob(r, config.ExactlyOnce, false)
		res := RunJob(cfg)
		failures += len(res.Restores)
		for _, cp := range res.Checkpoints {
			if want := foldPrefixes(cfg.Sources, cp.SourceOffsets); !maps.Equal(cp.State, want) {
				t.Fatalf("seed=%d %s: checkpoint %d at %v holds %v, fold %v", seed, describe(cfg), cp.ID, cp.SourceOffsets, cp.State, want)
			}
		}
		if want := foldAll(cfg.Sources); !maps.Equal(res.Final, want) {
			t.Fatalf("seed=%d %s: final %v, failure-free %v", seed, describe(cfg), res.Final, want)
		}
	}
	if failures == 0 {
		t.Fatal("no seed injected a failure: the test proves nothing about recovery")
	}
}

// TestJobAtLeastOnce: without alignment a snapshot may hold records from
// after the barrier, so it covers at least the recorded prefixes, and
// after a restore those records count twice. Without failures the result
// is still exact.
func TestJobAtLeastOnce(t *testing.T) {
	overcounted := 0
	for _, seed := range seeds() {
		r := rand.New(rand.NewPCG(seed, 3))
		cfg := newRandomJob(r, config.AtLeastOnce, true)
		res := RunJob(cfg)
		for _, cp := range res.Checkpoints {
			prefix := foldPrefixes(cfg.Sources, cp.SourceOffsets)
			for k, v := range prefix {
				if cp.State[k] < v {
					t.Fatalf("seed=%d %s: checkpoint %d misses records of its prefix: %s=%d < %d", seed, describe(cfg), cp.ID, k, cp.State[k], v)
				}
			}
		}
		want := foldAll(cfg.Sources)
		if len(res.Restores) == 0 && !maps.Equal(res.Final, want) {
			t.Fatalf("seed=%d %s: no failure, yet final %v != %v", seed, describe(cfg), res.Final, want)
		}
		for k, v := range want {
			if res.Final[k] < v {
				t.Fatalf("seed=%d %s: at-least-once lost records: %s=%d < %d", seed, describe(cfg), k, res.Final[k], v)
			}
		}
		if !maps.Equal(res.Final, want) {
			overcounted++
		}
	}
	if overcounted == 0 {
		t.Fatal("no seed showed at-least-once counting a record twice")
	}
}

// TestAtLeastOnceVersusExactlyOnce is the smallest job where the modes
// differ: source 0 delivers a record after its barrier 1 before source 1's
// barrier arrives, then the task fails right after checkpoint 1.
func TestAtLeastOnceVersusExactlyOnce(t *testing.T) {
	sources := [][]Element{{ev("x", 1), ev("x", 1)}, {ev("y", 1), ev("y", 1)}}
	//            x1 b1 x1 y1 b1 -> checkpoint 1, then fail
	schedule := []int{0, 0, 0, 1, 1}
	for _, tc := range []struct {
		mode     config.CheckpointingMode
		snapshot map[string]int64
		final    map[string]int64
	}{
		{config.ExactlyOnce, map[string]int64{"x": 1, "y": 1}, map[string]int64{"x": 2, "y": 2}},
		{config.AtLeastOnce, map[string]int64{"x": 2, "y": 1}, map[string]int64{"x": 3, "y": 2}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			res := RunJob(JobConfig{Sources: sources, BarrierEvery: 1, Schedule: schedule, Mode: tc.mode, FailAt: []int{5}})
			if len(res.Restores) != 1 || res.Restores[0].ID != 1 {
				t.Fatalf("restores %+v, want checkpoint 1", res.Restores)
			}
			if got := res.Restores[0]; !reflect.DeepEqual(got.State, tc.snapshot) || !reflect.DeepEqual(got.SourceOffsets, []int{1, 1}) {
				t.Fatalf("checkpoint 1 = %+v, want state %v at offsets [1 1]", got, tc.snapshot)
			}
			if !maps.Equal(res.Final, tc.final) {
				t.Fatalf("final %v, want %v", res.Final, tc.final)
			}
		})
	}
}
