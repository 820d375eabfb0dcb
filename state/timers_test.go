package state

import (
	"bytes"
	"fmt"
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

// timerBackends are the backends whose timer queues the tests run on:
// the heap, and the embedded LSM store.
var timerBackends = []struct {
	name string
	opts func(t testing.TB) []BackendOption
}{
	{"heap", func(testing.TB) []BackendOption { return nil }},
	{"pebble", func(t testing.TB) []BackendOption { return []BackendOption{pebbleBackend(t)} }},
}

func TestTimers(t *testing.T) {
	for _, be := range timerBackends {
		t.Run(be.name, func(t *testing.T) { testTimers(t, newBackend(t, be.opts(t)...)) })
	}
}

func testTimers(t *testing.T, b *KeyedBackend[string]) {
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
// on either backend, including after a snapshot and restore into either.
func TestTimerOrder(t *testing.T) {
	seed := testSeed(t)
	fire := func(perm []int, from, to int) []Timer[string, window] {
		b := newBackend(t, timerBackends[from].opts(t)...)
		tm := must(NewTimers[string, window](b, "event", nil))
		for _, i := range perm {
			b.SetCurrentKey("k" + strconv.Itoa(i%50))
			tm.Register(window{int64(i % 3), 0}, int64(i%4))
		}
		if to >= 0 {
			blob := serialize(t, b, 1)
			b = newBackend(t, timerBackends[to].opts(t)...)
			if err := b.Restore(bytes.NewReader(blob)); err != nil {
				t.Fatal(err)
			}
			tm = must(NewTimers[string, window](b, "event", nil))
		}
		return popAll(tm, 100)
	}
	r := rand.New(rand.NewPCG(seed, 2))
	perm := r.Perm(600)
	want := fire(perm, 0, -1)
	if len(want) != 300 { // distinct (i%50, i%3, i%4)
		t.Fatalf("%d timers fired, want 300", len(want))
	}
	for i := 1; i < len(want); i++ {
		if want[i].Timestamp < want[i-1].Timestamp || want[i] == want[i-1] {
			t.Fatalf("seed %d: fired %+v after %+v", seed, want[i], want[i-1])
		}
	}
	for trial := range 8 {
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		from, to := trial%2, trial/2%3-1 // restored into none, heap or pebble
		if got := fire(perm, from, to); !slices.Equal(got, want) {
			t.Fatalf("seed %d, trial %d (%s, restored into %d): timers fired in a different order", seed, trial, timerBackends[from].name, to)
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

// BenchmarkTimers keeps a standing population of 100,000 timers; each op
// registers one and fires one: on the heap and in the embedded LSM store.
func BenchmarkTimers(b *testing.B) {
	for _, bk := range timerBackends {
		b.Run(bk.name, func(b *testing.B) {
			be := newBackend(b, bk.opts(b)...)
			tm := must(NewTimers[string, VoidNamespace](be, "proc", nil))
			keys := benchKeys(100_000)
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
		})
	}
}

// TestTimersInStoreMatchHeap runs random registrations, deletions, peeks
// and pops on a heap queue and a queue in the embedded LSM store side by
// side, with many timers per key group (beyond what a key group caches),
// and moves the store's queue through snapshots (in weir's format and
// native) from time to time: both must answer alike at every step.
func TestTimersInStoreMatchHeap(t *testing.T) {
	seed := testSeed(t)
	// The key groups' caches of write-back rows: as large as they are,
	// and so small that most timers are beyond them.
	for _, rows := range []int{timerCacheRows, 4} {
		t.Run(fmt.Sprintf("rows-%d", rows), func(t *testing.T) { testTimersInStoreMatchHeap(t, seed, rows) })
	}
}

func testTimersInStoreMatchHeap(t *testing.T, seed uint64, rows int) {
	r := rand.New(rand.NewPCG(seed, 7))
	heap := newBackend(t)
	ht := must(NewTimers[string, window](heap, "event", nil))
	lb := newBackend(t, pebbleBackend(t))
	lt := must(NewTimers[string, window](lb, "event", nil))
	lt.l.rows = rows
	now := int64(0)
	for step := range 20000 {
		k := "k" + strconv.Itoa(r.IntN(40))
		w := window{int64(r.IntN(3)), 0}
		ts := now + int64(r.IntN(200))
		switch op := r.IntN(100); {
		case op < 50:
			heap.SetCurrentKey(k)
			lb.SetCurrentKey(k)
			ht.Register(w, ts)
			lt.Register(w, ts)
		case op < 65:
			heap.SetCurrentKey(k)
			lb.SetCurrentKey(k)
			ht.Delete(w, ts)
			lt.Delete(w, ts)
		case op < 75:
			heap.SetCurrentKey(k)
			lb.SetCurrentKey(k)
			if a, b := ht.Contains(w, ts), lt.Contains(w, ts); a != b {
				t.Fatalf("seed %d, step %d: Contains(%s, %v, %d): heap %v, store %v", seed, step, k, w, ts, a, b)
			}
		case op < 99:
			now += int64(r.IntN(20))
			for {
				a, aok := ht.Pop(now)
				b, bok := lt.Pop(now)
				if a != b || aok != bok {
					t.Fatalf("seed %d, step %d: Pop(%d): heap %+v %v, store %+v %v", seed, step, now, a, aok, b, bok)
				}
				if !aok {
					break
				}
				if heap.CurrentKey() != lb.CurrentKey() {
					t.Fatalf("seed %d, step %d: current key after a pop: heap %q, store %q", seed, step, heap.CurrentKey(), lb.CurrentKey())
				}
			}
		default:
			// Move the store's queue into a new backend.
			nb := newBackend(t, pebbleBackend(t))
			if r.IntN(2) == 0 {
				if err := nb.Restore(bytes.NewReader(serialize(t, lb, int64(step)))); err != nil {
					t.Fatal(err)
				}
			} else {
				snap, err := lb.NativeSnapshot(int64(step))
				if err != nil {
					t.Fatal(err)
				}
				blob, dir := nativeCopy(t, snap)
				if err := nb.RestoreNative(bytes.NewReader(blob), dir, nb.KeyGroups()); err != nil {
					t.Fatal(err)
				}
			}
			lb, lt = nb, must(NewTimers[string, window](nb, "event", nil))
			lt.l.rows = rows
		}
		if ht.Len() != lt.Len() {
			t.Fatalf("seed %d, step %d: Len: heap %d, store %d", seed, step, ht.Len(), lt.Len())
		}
		a, aok := ht.Peek()
		b, bok := lt.Peek()
		if a != b || aok != bok {
			t.Fatalf("seed %d, step %d: Peek: heap %+v %v, store %+v %v", seed, step, a, aok, b, bok)
		}
	}
}

// TestTimersPendingWriteOrder deletes a timer the store has (its
// deletion waits among the pending writes) and registers it again (a
// dirty cached row), in a key group whose other timers are beyond its
// cached rows, then moves the queue through a snapshot (weir's format
// and native): the timer must survive, so the pending deletion must
// reach the store before the row written again.
func TestTimersPendingWriteOrder(t *testing.T) {
	for _, native := range []bool{false, true} {
		t.Run(fmt.Sprintf("native-%v", native), func(t *testing.T) {
			b := newBackend(t, pebbleBackend(t))
			tm := must(NewTimers[string, window](b, "event", nil))
			tm.l.rows = 2
			b.SetCurrentKey("k")
			for ts := int64(1); ts <= 4; ts++ {
				tm.Register(window{}, ts)
			}
			move := func(step int64) {
				nb := newBackend(t, pebbleBackend(t))
				if native {
					snap, err := b.NativeSnapshot(step)
					if err != nil {
						t.Fatal(err)
					}
					blob, dir := nativeCopy(t, snap)
					if err := nb.RestoreNative(bytes.NewReader(blob), dir, nb.KeyGroups()); err != nil {
						t.Fatal(err)
					}
				} else if err := nb.Restore(bytes.NewReader(serialize(t, b, step))); err != nil {
					t.Fatal(err)
				}
				b, tm = nb, must(NewTimers[string, window](nb, "event", nil))
				tm.l.rows = 2
				b.SetCurrentKey("k")
			}
			move(1) // every row in the store, the first two cached, clean
			tm.Delete(window{}, 1)
			tm.Delete(window{}, 4) // beyond the cached rows
			tm.Register(window{}, 1)
			tm.Register(window{}, 4)
			tm.Delete(window{}, 3)
			move(2)
			for ts, want := range map[int64]bool{1: true, 2: true, 3: false, 4: true} {
				if got := tm.Contains(window{}, ts); got != want {
					t.Errorf("after a restore, Contains(%d) = %v, want %v", ts, got, want)
				}
			}
			var got []int64
			for tmr := range tm.PopUntil(10) {
				got = append(got, tmr.Timestamp)
			}
			if want := []int64{1, 2, 4}; !slices.Equal(got, want) {
				t.Errorf("after a restore, the timers fire at %v, want %v", got, want)
			}
		})
	}
}

// BenchmarkTimersChurn is a timeout per request, cancelled when the
// request completes: a standing population of 100,000 timers; each op
// registers a timer for a new key and deletes the oldest one, and checks
// a key that has none.
func BenchmarkTimersChurn(b *testing.B) {
	be := newBackend(b)
	tm := must(NewTimers[string, VoidNamespace](be, "proc", nil))
	const live = 100_000
	keys := benchKeys(4 * live)
	for i := range live {
		be.SetCurrentKey(keys[i])
		tm.Register(VoidNamespace{}, int64(i))
	}
	i := live
	b.ReportAllocs()
	for b.Loop() {
		be.SetCurrentKey(keys[i%len(keys)])
		tm.Register(VoidNamespace{}, int64(i))
		be.SetCurrentKey(keys[(i-live)%len(keys)])
		tm.Delete(VoidNamespace{}, int64(i-live))
		be.SetCurrentKey(keys[(i+live)%len(keys)])
		if tm.Contains(VoidNamespace{}, int64(i+live)) {
			b.Fatal("a timer that was never registered")
		}
		i++
	}
}
