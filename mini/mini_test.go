package mini

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var (
	seedFlag = flag.Uint64("mini.seed", 0, "run the property tests for this one seed only")
	seedsN   = flag.Int("mini.seeds", 300, "number of seeds the property tests run")
)

// seeds returns the seeds a property test runs: 1..mini.seeds, or just
// mini.seed when it is set to reproduce a failure.
func seeds() []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	s := make([]uint64, *seedsN)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}

func ev(k string, v int64) Event { return Event{Key: k, Value: v} }

// randomInput returns up to 60 events over a few keys, with watermarks in
// between.
func randomInput(r *rand.Rand) []Element {
	keys := []string{"a", "b", "c", "d", "e"}[:1+r.IntN(5)]
	n := r.IntN(61)
	var out []Element
	ts := int64(0)
	for range n {
		ts += r.Int64N(10)
		out = append(out, Event{Key: keys[r.IntN(len(keys))], Value: r.Int64N(41) - 10, Timestamp: ts})
		if r.IntN(6) == 0 {
			out = append(out, Watermark{Timestamp: ts - 5})
		}
	}
	return out
}

func TestInjectBarriers(t *testing.T) {
	wm := Watermark{Timestamp: 9}
	for _, tc := range []struct {
		name  string
		in    []Element
		every int
		start int64
		want  []Element
	}{
		{"empty input", nil, 2, 1, []Element{}},
		{"every larger than input", []Element{ev("a", 1), ev("b", 2)}, 3, 1, []Element{ev("a", 1), ev("b", 2)}},
		{"barrier at the very end", []Element{ev("a", 1), ev("b", 2)}, 2, 1, []Element{ev("a", 1), ev("b", 2), Barrier{1}}},
		{"every event", []Element{ev("a", 1), ev("b", 2)}, 1, 1, []Element{ev("a", 1), Barrier{1}, ev("b", 2), Barrier{2}}},
		{"ids from startID", []Element{ev("a", 1), ev("b", 2), ev("c", 3)}, 1, 7, []Element{ev("a", 1), Barrier{7}, ev("b", 2), Barrier{8}, ev("c", 3), Barrier{9}}},
		{"markers copied through and not counted",
			[]Element{wm, ev("a", 1), wm, Barrier{100}, ev("b", 2), wm, ev("c", 3)}, 2, 1,
			[]Element{wm, ev("a", 1), wm, Barrier{100}, ev("b", 2), Barrier{1}, wm, ev("c", 3)}},
		{"only markers", []Element{wm, Barrier{3}}, 1, 1, []Element{wm, Barrier{3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.in)
			got := InjectBarriers(tc.in, tc.every, tc.start)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("InjectBarriers(%v, %d, %d)\n got %v\nwant %v", tc.in, tc.every, tc.start, got, tc.want)
			}
			if !reflect.DeepEqual(tc.in, orig) {
				t.Errorf("input modified: %v, was %v", tc.in, orig)
			}
		})
	}
}

func TestInjectBarriersRejectsEveryBelowOne(t *testing.T) {
	for _, every := range []int{0, -1} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "every") {
					t.Errorf("every=%d: recovered %v, want a panic naming the argument", every, r)
				}
			}()
			InjectBarriers([]Element{ev("a", 1)}, every, 1)
		}()
	}
}

func TestInjectBarriersDoesNotAliasInput(t *testing.T) {
	in := make([]Element, 2, 10)
	in[0], in[1] = ev("a", 1), ev("b", 2)
	out := InjectBarriers(in, 5, 1)
	out[0] = Watermark{}
	if in[0] != ev("a", 1) {
		t.Fatal("result shares its backing array with the input")
	}
}

func TestOperatorProcess(t *testing.T) {
	op := NewStatefulSumOperator(ByKey)
	steps := []struct {
		in   Element
		want []Element
	}{
		{ev("a", 3), []Element{KeyedSum{"a", 3}}},
		{Watermark{Timestamp: 10}, []Element{Watermark{Timestamp: 10}}},
		{ev("b", 4), []Element{KeyedSum{"b", 4}}},
		{ev("a", -1), []Element{KeyedSum{"a", 2}}},
		{Barrier{1}, []Element{Barrier{1}}},
		{ev("a", 5), []Element{KeyedSum{"a", 7}}},
		{Barrier{2}, []Element{Barrier{2}}},
	}
	for i, s := range steps {
		if got := op.Process(s.in); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d: Process(%v) = %v, want %v", i, s.in, got, s.want)
		}
	}
	want := map[int64]map[string]int64{1: {"a": 2, "b": 4}, 2: {"a": 7, "b": 4}}
	if !reflect.DeepEqual(op.Checkpoints, want) {
		t.Fatalf("Checkpoints = %v, want %v", op.Checkpoints, want)
	}
}

func TestOperatorKeyFunc(t *testing.T) {
	parity := func(e Event) string { return []string{"even", "odd"}[e.Value&1] }
	out, cps := RunWithCheckpoints([]Element{ev("x", 1), ev("y", 2), ev("z", 3)}, parity, 3)
	want := []Element{KeyedSum{"odd", 1}, KeyedSum{"even", 2}, KeyedSum{"odd", 4}, Barrier{1}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("outputs %v, want %v", out, want)
	}
	if got := cps[0].OperatorStates[SumUID]; !reflect.DeepEqual(got, map[string]int64{"odd": 4, "even": 2}) {
		t.Fatalf("snapshot %v", got)
	}
}

func TestSnapshotIsolation(t *testing.T) {
	op := NewStatefulSumOperator(ByKey)
	op.Process(ev("a", 1))
	op.Process(Barrier{1})
	for range 10 {
		op.Process(ev("a", 1))
		op.Process(ev("new", 1))
	}
	if got := op.Checkpoints[1]; !reflect.DeepEqual(got, map[string]int64{"a": 1}) {
		t.Fatalf("snapshot 1 changed after the barrier: %v", got)
	}
	// Mutating a snapshot must not reach the operator either.
	op.Checkpoints[1]["a"] = 1000
	if got := op.Process(ev("a", 0)); got[0] != (KeyedSum{"a", 11}) {
		t.Fatalf("operator state changed through a snapshot: %v", got)
	}
}

func TestRunWithCheckpoints(t *testing.T) {
	in := []Element{ev("a", 1), Watermark{5}, ev("b", 2), ev("a", 3), ev("b", 4), ev("a", 5)}
	out, cps := RunWithCheckpoints(in, ByKey, 2)
	wantOut := []Element{
		KeyedSum{"a", 1}, Watermark{5}, KeyedSum{"b", 2}, Barrier{1},
		KeyedSum{"a", 4}, KeyedSum{"b", 6}, Barrier{2},
		KeyedSum{"a", 9},
	}
	if !reflect.DeepEqual(out, wantOut) {
		t.Fatalf("outputs\n got %v\nwant %v", out, wantOut)
	}
	wantCps := []Checkpoint{
		{ID: 1, OperatorStates: map[string]map[string]int64{"sum": {"a": 1, "b": 2}}, SourceOffset: 2},
		{ID: 2, OperatorStates: map[string]map[string]int64{"sum": {"a": 4, "b": 6}}, SourceOffset: 4},
	}
	if !reflect.DeepEqual(cps, wantCps) {
		t.Fatalf("checkpoints\n got %v\nwant %v", cps, wantCps)
	}
}

func TestRunWithCheckpointsEmpty(t *testing.T) {
	out, cps := RunWithCheckpoints(nil, ByKey, 1)
	if len(out) != 0 || len(cps) != 0 {
		t.Fatalf("empty input gave outputs %v, checkpoints %v", out, cps)
	}
}

// TestFoldOracle: every checkpoint's state is the fold over exactly its
// first SourceOffset events, for random inputs and intervals.
func TestFoldOracle(t *testing.T) {
	for _, seed := range seeds() {
		r := rand.New(rand.NewPCG(seed, 0))
		in := randomInput(r)
		every := 1 + r.IntN(8)
		out, cps := RunWithCheckpoints(in, ByKey, every)
		n := countEvents(in)
		if len(cps) != n/every {
			t.Fatalf("seed=%d: %d checkpoints for %d events every %d", seed, len(cps), n, every)
		}
		sums := 0
		for _, e := range out {
			if _, ok := e.(KeyedSum); ok {
				sums++
			}
		}
		if sums != n {
			t.Fatalf("seed=%d: %d sums emitted for %d events", seed, sums, n)
		}
		for i, cp := range cps {
			if cp.ID != int64(i+1) || cp.SourceOffset != (i+1)*every {
				t.Fatalf("seed=%d: checkpoint %d has id %d offset %d", seed, i, cp.ID, cp.SourceOffset)
			}
			if want := Fold(in, ByKey, cp.SourceOffset); !maps.Equal(cp.OperatorStates[SumUID], want) {
				t.Fatalf("seed=%d: checkpoint %d state %v, fold over %d events %v", seed, cp.ID, cp.OperatorStates[SumUID], cp.SourceOffset, want)
			}
		}
	}
}

// TestRecoveryEqualsFailureFree: for every failure point, the recovered run
// ends in the failure-free state and, after the restored barrier, emits
// exactly what the failure-free run emitted there.
func TestRecoveryEqualsFailureFree(t *testing.T) {
	for _, seed := range seeds() {
		r := rand.New(rand.NewPCG(seed, 1))
		in := randomInput(r)
		every := 1 + r.IntN(8)
		ref, refCps := RunWithCheckpoints(in, ByKey, every)
		final := Fold(in, ByKey, len(in))
		for failAfter := 0; failAfter <= countEvents(in); failAfter++ {
			rec := RunWithFailure(in, ByKey, every, failAfter)
			ctx := fmt.Sprintf("seed=%d every=%d failAfter=%d", seed, every, failAfter)
			if !maps.Equal(rec.Final, final) {
				t.Fatalf("%s: final state %v, failure-free %v", ctx, rec.Final, final)
			}
			if wantID := int64(failAfter / every); rec.Restored.ID != wantID {
				t.Fatalf("%s: restored checkpoint %d, want %d", ctx, rec.Restored.ID, wantID)
			}
			if want := suffixAfterBarrier(ref, rec.Restored.ID); !slices.Equal(rec.After, want) {
				t.Fatalf("%s: after recovery\n got %v\nwant %v", ctx, rec.After, want)
			}
			if !reflect.DeepEqual(rec.Checkpoints, refCps) {
				t.Fatalf("%s: checkpoints over both attempts differ from the failure-free run", ctx)
			}
		}
	}
}

// suffixAfterBarrier returns what out holds after Barrier{id} (all of it
// for id 0).
func suffixAfterBarrier(out []Element, id int64) []Element {
	if id == 0 {
		return out
	}
	i := slices.Index(out, Element(Barrier{ID: id}))
	return out[i+1:]
}

func TestRecoveryDuplicatesOutputNotState(t *testing.T) {
	in := []Element{ev("a", 1), ev("a", 1), ev("a", 1), ev("a", 1), ev("a", 1)}
	rec := RunWithFailure(in, ByKey, 2, 3)
	if rec.Restored.ID != 1 || rec.Restored.SourceOffset != 2 {
		t.Fatalf("restored %+v, want checkpoint 1 at offset 2", rec.Restored)
	}
	if want := []Element{KeyedSum{"a", 3}}; !reflect.DeepEqual(rec.Duplicates(), want) {
		t.Fatalf("duplicates %v, want %v", rec.Duplicates(), want)
	}
	if want := []Element{KeyedSum{"a", 3}, KeyedSum{"a", 4}, Barrier{2}, KeyedSum{"a", 5}}; !slices.Equal(rec.After, want) {
		t.Fatalf("after %v, want %v", rec.After, want)
	}
	if rec.Final["a"] != 5 {
		t.Fatalf("final %v: the state counted a replayed event twice", rec.Final)
	}
}

func TestRecoveryWithoutCheckpoint(t *testing.T) {
	in := []Element{ev("a", 1), ev("b", 1), ev("a", 1)}
	rec := RunWithFailure(in, ByKey, 5, 2)
	if rec.Restored.ID != 0 || rec.Restored.SourceOffset != 0 {
		t.Fatalf("restored %+v, want the empty checkpoint", rec.Restored)
	}
	if len(rec.Duplicates()) != 2 {
		t.Fatalf("duplicates %v, want both outputs before the failure", rec.Duplicates())
	}
}

func TestRunWithFailureRejectsBadFailAfter(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "failAfter") {
			t.Fatalf("recovered %v, want a panic naming failAfter", r)
		}
	}()
	RunWithFailure([]Element{ev("a", 1)}, ByKey, 1, 2)
}

func TestReplayFrom(t *testing.T) {
	in := []Element{Watermark{1}, ev("a", 1), Watermark{2}, ev("b", 2), Watermark{3}}
	for _, tc := range []struct {
		offset int
		want   []Element
	}{
		{0, in},
		{1, []Element{Watermark{2}, ev("b", 2), Watermark{3}}},
		{2, []Element{Watermark{3}}},
	} {
		if got := ReplayFrom(in, tc.offset); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ReplayFrom(%d) = %v, want %v", tc.offset, got, tc.want)
		}
	}
}
