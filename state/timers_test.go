package state

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

func popAll(tm *Timers[string, window], upTo int64) []Timer[string, window] {
	var out []Timer[string, window]
	for t := range tm.PopUntil(upTo) {
		out = append(out, t)
	}
	return out
}

func TestTimers(t *testing.T) {
	b := newBackend(t)
	tm := must(NewTimers[string, window](b, "event", nil))
	w := window{0, 10}
	if _, ok := tm.Peek(); ok {
		t.Fatal("empty queue has a timer")
	}
	b.SetCurrentKey("a")
	tm.Register(w, 10)
	tm.Register(w, 10) // duplicate
	tm.Register(w, 5)
	tm.Register(window{10, 20}, 5)
	b.SetCurrentKey("b")
	tm.Register(w, 7)
	tm.Register(w, 3)
	tm.Delete(w, 3)
	tm.Delete(w, 99) // absent
	if tm.Len() != 4 {
		t.Fatalf("Len = %d, want 4", tm.Len())
	}
	if !tm.Contains(w, 7) || tm.Contains(w, 3) {
		t.Fatal("Contains disagrees with Register/Delete")
	}
	if p, _ := tm.Peek(); p.Timestamp != 5 {
		t.Fatalf("Peek = %+v", p)
	}
	if _, ok := tm.Pop(4); ok {
		t.Fatal("popped a timer after its time")
	}
	got := popAll(tm, 7)
	if len(got) != 3 || got[0].Timestamp != 5 || got[1].Timestamp != 5 || got[2] != (Timer[string, window]{7, "b", w}) {
		t.Fatalf("popped %+v", got)
	}
	if b.CurrentKey() != "b" {
		t.Fatalf("current key after pop = %q", b.CurrentKey())
	}
	// A timer registered while firing fires in the same pass if due.
	var fired []int64
	for tm1 := range tm.PopUntil(100) {
		fired = append(fired, tm1.Timestamp)
		if tm1.Timestamp == 10 {
			tm.Register(w, 50)
		}
	}
	if !slices.Equal(fired, []int64{10, 50}) {
		t.Fatalf("fired %v", fired)
	}
	if tm.Len() != 0 {
		t.Fatalf("%d timers left", tm.Len())
	}
	// Stopping early leaves the rest.
	b.SetCurrentKey("c")
	tm.Register(w, 1)
	tm.Register(w, 2)
	for range tm.PopUntil(10) {
		break
	}
	if tm.Len() != 1 {
		t.Fatalf("%d timers left after stopping early", tm.Len())
	}
}

// TestTimerOrder registers many timers with colliding timestamps in a
// random order, and checks that they fire in the same order every time,
// including after a snapshot and restore.
func TestTimerOrder(t *testing.T) {
	seed := testSeed(t)
	fire := func(perm []int, viaSnapshot bool) []Timer[string, window] {
		b := newBackend(t)
		tm := must(NewTimers[string, window](b, "event", nil))
		for _, i := range perm {
			b.SetCurrentKey("k" + strconv.Itoa(i%50))
			tm.Register(window{int64(i % 3), 0}, int64(i%4))
		}
		if viaSnapshot {
			blob := serialize(t, b, 1)
			b = newBackend(t)
			if err := b.Restore(bytes.NewReader(blob)); err != nil {
				t.Fatal(err)
			}
			tm = must(NewTimers[string, window](b, "event", nil))
		}
		return popAll(tm, 100)
	}
	r := rand.New(rand.NewPCG(seed, 2))
	perm := r.Perm(600)
	want := fire(perm, false)
	if len(want) != 300 { // distinct (i%50, i%3, i%4)
		t.Fatalf("%d timers fired, want 300", len(want))
	}
	for i := 1; i < len(want); i++ {
		if want[i].Timestamp < want[i-1].Timestamp || want[i] == want[i-1] {
			t.Fatalf("seed %d: fired %+v after %+v", seed, want[i], want[i-1])
		}
	}
	for trial := range 3 {
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		if got := fire(perm, trial%2 == 1); !slices.Equal(got, want) {
			t.Fatalf("seed %d, trial %d: timers fired in a different order", seed, trial)
		}
	}
}

func TestTimersSteadyStateAllocs(t *testing.T) {
	b := newBackend(t)
	tm := must(NewTimers[string, VoidNamespace](b, "proc", nil))
	keys := benchKeys(1000)
	ts := int64(0)
	cycle := func() {
		for _, k := range keys[:100] {
			b.SetCurrentKey(k)
			tm.Register(VoidNamespace{}, ts+100)
		}
		ts += 10
		for range tm.PopUntil(ts) {
		}
	}
	for range 50 {
		cycle() // warm up: grow slabs, heaps and indexes
	}
	// PopUntil's closure is the only allocation per cycle, not per timer.
	if n := testing.AllocsPerRun(50, cycle); n > 2 {
		t.Errorf("%v allocations per 100 timers registered and fired", n)
	}
}

func BenchmarkTimers(b *testing.B) {
	be, _, keys := benchBackend(b, 100_000, false)
	tm := must(NewTimers[string, VoidNamespace](be, "proc", nil))
	// A standing population of 100k timers; each op registers one and
	// fires one.
	for i, k := range keys {
		be.SetCurrentKey(k)
		tm.Register(VoidNamespace{}, int64(i))
	}
	i := len(keys)
	b.ReportAllocs()
	for b.Loop() {
		be.SetCurrentKey(keys[i%len(keys)])
		tm.Register(VoidNamespace{}, int64(i))
		if _, ok := tm.Pop(int64(i)); !ok {
			b.Fatal("nothing to pop")
		}
		i++
	}
}
