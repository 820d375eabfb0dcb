package state

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// wbHandles are the states of a write-back test backend: a value state
// whose keys come and go (a join's pending side), a namespaced list and a
// namespaced aggregate (a window's contents) and event-time timers.
type wbHandles struct {
	b   *KeyedBackend[string]
	val ValueState[string]
	lst ListStateNS[window, string]
	agg AggregatingStateNS[window, int64, float64]
	tim *Timers[string, window]
}

func wbRegister(t testing.TB, b *KeyedBackend[string], timerRows int) *wbHandles {
	t.Helper()
	h := &wbHandles{b: b,
		val: must(Value(b, ValueDescriptor[string]{Name: "pending"})),
		lst: must(ListNS[string, window, string](b, nil, ListDescriptor[string]{Name: "contents"})),
		agg: must(AggregatingNS[string, window, int64, *avgAcc, float64](b, nil, AggregatingDescriptor[int64, *avgAcc, float64]{Name: "avg", Function: avg{}})),
		tim: must(NewTimers[string, window](b, "event", nil)),
	}
	if h.tim.l != nil && timerRows > 0 {
		h.tim.l.rows = timerRows
	}
	return h
}

// TestPebbleWriteBackMatchesHeap runs seeded sequences of operations on
// a heap backend and a Pebble backend side by side: keys whose value is
// written and cleared again (most before a checkpoint passes), windows
// whose lists grow and are read, merged and cleared, timers registered,
// deleted and fired, aggregates added to (AddWasPresent's answers must
// agree; a list's may be false on Pebble where the heap's is true, never
// the other way). The Pebble backend's memory is small, and its key
// groups cache few timers, so that its write-back caches (value rows,
// list appends, timers) spill to the store, and it moves through
// checkpoints (in weir's format and native): some restored at once, some
// after more operations that a crash then loses, restoring both
// backends. Every read, timer and firing order must agree at every
// step, and the caches must have spilled and held dirty rows at a crash
// (or the test proves nothing).
func TestPebbleWriteBackMatchesHeap(t *testing.T) {
	base := testSeed(t)
	for i, rows := range []int{timerCacheRows, 3} {
		seed := base + uint64(i)
		t.Run(fmt.Sprintf("timer-rows-%d", rows), func(t *testing.T) { testWriteBack(t, seed, rows, minTableRows) })
	}
	// Every flush of more than a few dirty value rows written as a
	// sorted table that the store ingests (see lsmtable.go).
	t.Run("tables", func(t *testing.T) { testWriteBack(t, base+2, 3, 4) })
}

func testWriteBack(t *testing.T, seed uint64, timerRows, tableRows int) {
	steps := 30_000
	if raceEnabled {
		steps = 10_000
	}
	r := rand.New(rand.NewPCG(seed, 11))
	// The caches' budget is cut to a few dozen rows so that they spill.
	small := func() *KeyedBackend[string] {
		b := newBackend(t, WithPebble(PebbleOptions{Dir: t.TempDir(), Memory: minPebbleMemory}))
		b.lsm.cacheBudget = 24 << 10
		b.lsm.tableRows = tableRows
		return b
	}
	hb := newBackend(t)
	lb := small()
	hh, lh := wbRegister(t, hb, 0), wbRegister(t, lb, timerRows)
	var (
		now         int64
		evictions   int
		tables      int
		crashDirty  int
		checkpoints int
		listKnown   int // lists Pebble knew had elements
	)
	// A checkpoint of both sides and the steps until the crash that
	// loses what follows it (-1: none pending).
	var hblob, lblob, ldir string
	var native bool
	crashIn := -1
	for step := range steps {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d, step %d: %s", seed, step, fmt.Sprintf(format, args...))
		}
		k := "req-" + strconv.Itoa(r.IntN(400))
		w := window{int64(r.IntN(4)) * 10, int64(r.IntN(4))*10 + 10}
		hb.SetCurrentKey(k)
		lb.SetCurrentKey(k)
		hh.lst.SetNamespace(w)
		lh.lst.SetNamespace(w)
		hh.agg.SetNamespace(w)
		lh.agg.SetNamespace(w)
		switch op := r.IntN(100); {
		case op < 20: // the first or the second event of a request
			a, aok := hh.val.Value()
			b, bok := lh.val.Value()
			if a != b || aok != bok {
				fail("Value(%s): heap %q %v, pebble %q %v", k, a, aok, b, bok)
			}
			if aok && r.IntN(3) > 0 {
				hh.val.Clear()
				lh.val.Clear()
			} else {
				v := strings.Repeat("v", r.IntN(300)) + strconv.Itoa(step)
				hh.val.Update(v)
				lh.val.Update(v)
			}
		case op < 38:
			v := strings.Repeat("e", r.IntN(200)) + strconv.Itoa(step)
			switch r.IntN(5) {
			case 0:
				hh.lst.AddAll([]string{v, "x"})
				lh.lst.AddAll([]string{v, "x"})
			case 1:
				hh.lst.Add(v)
				lh.lst.Add(v)
			default: // a burst of records for one window
				for range 1 + r.IntN(3) {
					had := len(hh.lst.Get()) > 0
					a, b := hh.lst.AddWasPresent(v), lh.lst.AddWasPresent(v)
					if a != had || b && !a {
						fail("list AddWasPresent(%s, %v): heap %v, pebble %v; the list had elements: %v", k, w, a, b, had)
					}
					if b {
						listKnown++
					}
				}
			}
		case op < 45:
			v := int64(r.IntN(10))
			_, had := hh.agg.Get()
			if a, b := hh.agg.AddWasPresent(v), lh.agg.AddWasPresent(v); a != had || b != a {
				fail("aggregate AddWasPresent(%s, %v): heap %v, pebble %v; it had an accumulator: %v", k, w, a, b, had)
			}
		case op < 52:
			if a, b := hh.lst.Get(), lh.lst.Get(); !slices.Equal(a, b) {
				fail("Get(%s, %v): heap %d elements, pebble %d: %q, %q", k, w, len(a), len(b), a, b)
			}
			a, aok := hh.agg.Get()
			b, bok := lh.agg.Get()
			if a != b || aok != bok {
				fail("aggregate Get(%s, %v): heap %v %v, pebble %v %v", k, w, a, aok, b, bok)
			}
		case op < 55:
			vs := []string{"u" + strconv.Itoa(step)}
			hh.lst.Update(vs)
			lh.lst.Update(vs)
		case op < 58:
			hh.lst.Clear()
			lh.lst.Clear()
			hh.agg.Clear()
			lh.agg.Clear()
		case op < 61:
			src := window{int64(r.IntN(4)) * 10, int64(r.IntN(4))*10 + 10}
			hh.lst.MergeNamespaces(w, src)
			lh.lst.MergeNamespaces(w, src)
			hh.agg.MergeNamespaces(w, src)
			lh.agg.MergeNamespaces(w, src)
		case op < 62:
			hh.lst.ClearAllNamespaces()
			lh.lst.ClearAllNamespaces()
			hh.agg.ClearAllNamespaces()
			lh.agg.ClearAllNamespaces()
		case op < 64:
			a, b := hh.lst.Namespaces(), lh.lst.Namespaces()
			cmp := func(x, y window) int { return int(x.Start-y.Start)*1000 + int(x.End-y.End) }
			slices.SortFunc(a, cmp)
			slices.SortFunc(b, cmp)
			if !slices.Equal(a, b) {
				fail("Namespaces(%s): heap %v, pebble %v", k, a, b)
			}
		case op < 78:
			ts := now + int64(r.IntN(300))
			hh.tim.Register(w, ts)
			lh.tim.Register(w, ts)
		case op < 88:
			ts := now + int64(r.IntN(300))
			if r.IntN(2) == 0 {
				if a, b := hh.tim.Contains(w, ts), lh.tim.Contains(w, ts); a != b {
					fail("Contains(%s, %v, %d): heap %v, pebble %v", k, w, ts, a, b)
				}
			}
			hh.tim.Delete(w, ts)
			lh.tim.Delete(w, ts)
		case op < 97:
			now += int64(r.IntN(15))
			for {
				a, aok := hh.tim.Pop(now)
				b, bok := lh.tim.Pop(now)
				if a != b || aok != bok {
					fail("Pop(%d): heap %+v %v, pebble %+v %v", now, a, aok, b, bok)
				}
				if !aok {
					break
				}
				// A fired window: its contents are read and cleared.
				hh.lst.SetNamespace(a.Namespace)
				lh.lst.SetNamespace(a.Namespace)
				if x, y := hh.lst.Get(), lh.lst.Get(); !slices.Equal(x, y) {
					fail("contents of fired %+v: heap %q, pebble %q", a, x, y)
				}
				hh.lst.Clear()
				lh.lst.Clear()
				hh.agg.SetNamespace(a.Namespace)
				lh.agg.SetNamespace(a.Namespace)
				hh.agg.Clear()
				lh.agg.Clear()
			}
		default:
			if crashIn >= 0 || r.IntN(8) > 0 {
				break
			}
			// A checkpoint of both sides.
			checkpoints++
			native = r.IntN(2) == 0
			hblob, lblob, ldir = checkpointPair(t, hb, lb, int64(step), native)
			crashIn = r.IntN(3) * r.IntN(400)
		}
		if crashIn == 0 {
			// The crash: both sides go back to the checkpoint, the
			// Pebble one without writing its caches.
			crashIn = -1
			crashDirty += countDirtyAll(lb)
			evictions += lb.lsm.evictions
			tables += lb.lsm.tables
			hb, lb = crashRestore(t, fmt.Sprintf("seed %d, step %d", seed, step), lb, small, hblob, lblob, ldir, native)
			hh, lh = wbRegister(t, hb, 0), wbRegister(t, lb, timerRows)
		} else if crashIn > 0 {
			crashIn--
		}
		if a, b := hh.tim.Len(), lh.tim.Len(); a != b {
			t.Fatalf("seed %d, step %d: timers: heap %d, pebble %d", seed, step, a, b)
		}
		a, aok := hh.tim.Peek()
		b, bok := lh.tim.Peek()
		if a != b || aok != bok {
			t.Fatalf("seed %d, step %d: Peek: heap %+v %v, pebble %+v %v", seed, step, a, aok, b, bok)
		}
	}
	evictions += lb.lsm.evictions
	tables += lb.lsm.tables
	if evictions == 0 || crashDirty == 0 || checkpoints == 0 || tableRows < minTableRows && tables == 0 || listKnown == 0 {
		t.Fatalf("seed %d: %d checkpoints, %d evictions, %d tables, %d dirty rows at crashes, %d lists Pebble knew had elements: the test proves nothing",
			seed, checkpoints, evictions, tables, crashDirty, listKnown)
	}
	t.Logf("%d checkpoints, %d evictions, %d tables, %d dirty rows lost in crashes, %d lists Pebble knew had elements", checkpoints, evictions, tables, crashDirty, listKnown)
}

// checkpointPair takes checkpoint id of heap backend hb (weir's format)
// and of Pebble backend lb (native, its files copied to ldir, if native).
func checkpointPair(t *testing.T, hb, lb *KeyedBackend[string], id int64, native bool) (hblob, lblob, ldir string) {
	t.Helper()
	hblob = string(serialize(t, hb, id))
	if !native {
		return hblob, string(serialize(t, lb, id)), ""
	}
	ns, err := lb.NativeSnapshot(id)
	if err != nil {
		t.Fatal(err)
	}
	blob, dir := nativeCopy(t, ns) // releases ns
	return hblob, string(blob), dir
}

// crashRestore closes lb without writing its caches, as a crash would,
// and restores a heap backend from hblob and a new Pebble backend (made by
// small) from lblob, a native snapshot with its files in ldir if native;
// where names the moment in a failure.
func crashRestore(t *testing.T, where string, lb *KeyedBackend[string], small func() *KeyedBackend[string], hblob, lblob, ldir string, native bool) (heap, pebble *KeyedBackend[string]) {
	t.Helper()
	heap = newBackend(t)
	if err := heap.Restore(strings.NewReader(hblob)); err != nil {
		t.Fatal(err)
	}
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	pebble = small()
	var err error
	if native {
		err = pebble.RestoreNative(strings.NewReader(lblob), ldir, pebble.KeyGroups())
	} else {
		err = pebble.Restore(strings.NewReader(lblob))
	}
	if err != nil {
		t.Fatalf("%s: restoring: %v", where, err)
	}
	return heap, pebble
}

// countDirtyAll counts what b's write-back caches hold that the store
// does not: dirty values and timers, and buffered lists.
func countDirtyAll(b *KeyedBackend[string]) int {
	n := 0
	for _, c := range b.lsm.caches {
		switch c := c.(type) {
		case *valueCache[string, VoidNamespace, string]:
			n += countDirty(c.rows)
		case *listCache[string, window]:
			n += c.len()
		case *lsmTimers:
			for i := range c.groups {
				n += c.groups[i].dirty
			}
		}
	}
	return n
}

// TestPebbleFilterSkipsReads writes keys to the store and then reads as
// many keys it never had: the cache's filter must answer almost all of
// them without reading the store, and never rule out a key the store
// has, whether it learnt the keys from its own writes or built itself
// from the rows a restore wrote; a filter over its share of the budget
// is off, and every miss reads the store.
func TestPebbleFilterSkipsReads(t *testing.T) {
	const keys = 5000
	newV := func(b *KeyedBackend[string]) (ValueState[string], *valueCache[string, VoidNamespace, string]) {
		v := must(Value(b, ValueDescriptor[string]{Name: "v"}))
		return v, v.(*lsmValue[string, VoidNamespace, string]).c
	}
	check := func(name string, b *KeyedBackend[string], v ValueState[string], c *valueCache[string, VoidNamespace, string], maxFresh int) {
		t.Helper()
		before := c.reads
		for i := range keys {
			b.SetCurrentKey("fresh-" + strconv.Itoa(i))
			if got, ok := v.Value(); ok {
				t.Fatalf("%s: a key never written has %q", name, got)
			}
		}
		if n := c.reads - before; n > maxFresh {
			t.Fatalf("%s: %d reads of the store for %d keys it never had, want at most %d", name, n, keys, maxFresh)
		}
		b.lsm.flushCaches(true)
		for i := range keys {
			k := "key-" + strconv.Itoa(i)
			b.SetCurrentKey(k)
			if got, ok := v.Value(); !ok || got != k {
				t.Fatalf("%s: key %s reads %q, %v", name, k, got, ok)
			}
		}
	}
	b := newBackend(t, pebbleBackend(t))
	v, c := newV(b)
	for i := range keys {
		k := "key-" + strconv.Itoa(i)
		b.SetCurrentKey(k)
		v.Update(k)
	}
	b.lsm.flushCaches(true)
	check("written", b, v, c, keys/20)

	blob := serialize(t, b, 1)
	rb := newBackend(t, pebbleBackend(t))
	if err := rb.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	rv, rc := newV(rb)
	check("restored", rb, rv, rc, keys/20)

	ob := newBackend(t, pebbleBackend(t))
	if err := ob.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	ob.lsm.cacheBudget = 16 << 10 // the filter's share cannot hold it
	ov, oc := newV(ob)
	check("off", ob, ov, oc, keys)
	if !oc.filter.off || oc.reads < 2*keys {
		t.Fatalf("off: filter off %v, %d reads of the store for %d misses", oc.filter.off, oc.reads, 2*keys)
	}
}

// BenchmarkRequestJoin is the record path of a join that holds one side
// until the other comes (GatewayMeter's assemble): each op is the first
// event of a new key (a read that misses, a write, a time-out timer) and
// the second event of the key 1,000 ops older (a read, a clear, the
// timer's deletion), with a snapshot every 100,000 ops, on each backend.
func BenchmarkRequestJoin(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts func(testing.TB) []BackendOption
	}{
		{"heap", func(testing.TB) []BackendOption { return nil }},
		{"pebble", func(t testing.TB) []BackendOption {
			return []BackendOption{WithPebble(PebbleOptions{Dir: t.TempDir(), Memory: 64 << 20})}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			be := closeAtEnd(b, must(NewKeyedBackend[string](nil, 128, KeyGroupRange{0, 127}, tc.opts(b)...)))
			v := must(Value(be, ValueDescriptor[string]{Name: "first"}))
			tm := must(NewTimers[string, VoidNamespace](be, "event", nil))
			const lag = 1000
			key := func(i int) string { return "r-" + strconv.Itoa(i) }
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := key(i)
				be.SetCurrentKey(k)
				if _, ok := v.Value(); !ok {
					v.Update(k)
					tm.Register(VoidNamespace{}, int64(i)+300_000)
				}
				if i >= lag {
					be.SetCurrentKey(key(i - lag))
					if _, ok := v.Value(); ok {
						v.Clear()
						tm.Delete(VoidNamespace{}, int64(i-lag)+300_000)
					}
				}
				if i%100_000 == 99_999 {
					be.Snapshot(int64(i)).Release()
				}
				i++
			}
		})
	}
}

// TestPebbleRestoreAfterReads restores a snapshot into a Pebble backend
// whose value and map states were registered, and read, before: the reads
// of keys the store did not have taught the caches' row filters that it
// has none, and the restore must make them forget it, or the restored
// rows would read as absent.
func TestPebbleRestoreAfterReads(t *testing.T) {
	const keys = 2000
	src := newBackend(t, pebbleBackend(t))
	sv := must(Value(src, ValueDescriptor[string]{Name: "v"}))
	sm := must(Map(src, MapDescriptor[string, int]{Name: "m"}))
	for i := range keys {
		k := "key-" + strconv.Itoa(i)
		src.SetCurrentKey(k)
		sv.Update(k)
		sm.Put("a", i)
	}
	blob := serialize(t, src, 1)

	b := newBackend(t, pebbleBackend(t))
	v := must(Value(b, ValueDescriptor[string]{Name: "v"}))
	m := must(Map(b, MapDescriptor[string, int]{Name: "m"}))
	vc := v.(*lsmValue[string, VoidNamespace, string]).c
	mc := m.(*lsmMap[string, VoidNamespace, string, int]).c
	for i := range keys {
		b.SetCurrentKey("key-" + strconv.Itoa(i))
		if _, ok := v.Value(); ok {
			t.Fatal("an empty backend has a value")
		}
		if _, ok := m.Get("a"); ok {
			t.Fatal("an empty backend has a map entry")
		}
	}
	if !vc.filter.valid || !mc.filter.valid {
		t.Fatalf("the reads built no filter (value %v, map %v): the test proves nothing", vc.filter.valid, mc.filter.valid)
	}
	if err := b.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		k := "key-" + strconv.Itoa(i)
		b.SetCurrentKey(k)
		if got, ok := v.Value(); !ok || got != k {
			t.Fatalf("restored value of %s: %q, %v", k, got, ok)
		}
		if got, ok := m.Get("a"); !ok || got != i {
			t.Fatalf("restored map entry of %s: %d, %v", k, got, ok)
		}
	}
}

// TestPebbleRuledOutRowCleared: a row the filter rules out is read
// (absent, and not cached), written, written to the store and evicted,
// then cleared with no read in between. The clear must delete the row in
// the store: the first read's "the store has no such row" holds only for
// a write right after it.
func TestPebbleRuledOutRowCleared(t *testing.T) {
	b := newBackend(t, pebbleBackend(t))
	v := must(Value(b, ValueDescriptor[string]{Name: "v"}))
	c := v.(*lsmValue[string, VoidNamespace, string]).c
	b.SetCurrentKey("k")
	if _, ok := v.Value(); ok || !c.filter.valid {
		t.Fatalf("a fresh backend: a value %v, a filter %v", ok, c.filter.valid)
	}
	v.Update("v1")
	b.lsm.flushCaches(true)
	if len(c.rows) != 0 {
		t.Fatalf("%d rows still cached after a flush that evicts", len(c.rows))
	}
	v.Clear()
	b.lsm.flushCaches(true)
	if got, ok := v.Value(); ok {
		t.Fatalf("a cleared value reads %q from the store", got)
	}
}
