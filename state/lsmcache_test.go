package state

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/codec"
)

// TestPebbleCacheEvicts runs value, namespaced value, reducing and
// aggregating state over many more rows than a 4 MiB backend's write-back
// cache holds, with updates, clears and namespace merges, against a model:
// the caches must stay within their budget, must have dropped rows (or
// the test proves nothing), and every read must see the latest write,
// both while rows come and go and after the caches are emptied so that
// every read goes to the store.
func TestPebbleCacheEvicts(t *testing.T) {
	// Fewer keys would fit in the caches, which charge a scalar row its
	// map slot alone.
	keys := int64(12_000)
	seed := testSeed(t)
	b := closeAtEnd(t, must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, WithPebble(PebbleOptions{Dir: t.TempDir(), Memory: 4 << 20}))))
	v := must(Value(b, ValueDescriptor[int64]{Name: "v"}))
	vns := must(ValueNS[int64, int64, string](b, nil, ValueDescriptor[string]{Name: "vns"}))
	sum := must(ReducingNS[int64, int64, int64](b, nil, ReducingDescriptor[int64]{Name: "sum", Reduce: func(a, x int64) int64 { return a + x }}))
	avgs := must(Aggregating(b, AggregatingDescriptor[int64, *avgAcc, float64]{Name: "avg", Function: avg{}}))
	type nk struct{ k, ns int64 }
	wantV, wantNS, wantSum := map[int64]int64{}, map[nk]string{}, map[nk]int64{}
	wantAvg := map[int64]avgAcc{}
	r := newTestRand(seed)
	most := 0
	for i := range 3 * keys {
		k := r.Int64N(keys)
		ns := r.Int64N(3)
		b.SetCurrentKey(k)
		vns.SetNamespace(ns)
		sum.SetNamespace(ns)
		switch r.IntN(10) {
		case 0:
			v.Clear()
			delete(wantV, k)
			vns.Clear()
			delete(wantNS, nk{k, ns})
		case 1:
			avgs.Clear()
			delete(wantAvg, k)
		case 2:
			to := (ns + 1) % 3
			sum.MergeNamespaces(to, ns)
			if s, ok := wantSum[nk{k, ns}]; ok {
				wantSum[nk{k, to}] += s
				delete(wantSum, nk{k, ns})
			}
		default:
			x := r.Int64N(1000)
			old, _ := v.Value()
			v.Update(old + x)
			wantV[k] += x
			s := fmt.Sprint(i)
			vns.Update(s)
			wantNS[nk{k, ns}] = s
			sum.Add(x)
			wantSum[nk{k, ns}] += x
			avgs.Add(x)
			a := wantAvg[k]
			wantAvg[k] = avgAcc{a.Sum + x, a.N + 1}
		}
		if b.lsm.cacheUsed > b.lsm.cacheBudget+1024 {
			t.Fatalf("seed %d: after %d operations the caches hold %d bytes, over their budget of %d", seed, i, b.lsm.cacheUsed, b.lsm.cacheBudget)
		}
		n := 0
		for _, c := range b.lsm.caches {
			n += c.len()
		}
		most = max(most, n)
	}
	rows := len(wantV) + len(wantNS) + len(wantSum) + len(wantAvg)
	if most >= rows {
		t.Fatalf("seed %d: the caches held up to %d rows of %d: nothing had to be evicted, the test proves nothing", seed, most, rows)
	}
	check := func(when string) {
		t.Helper()
		for k := range keys {
			b.SetCurrentKey(k)
			if got, ok := v.Value(); got != wantV[k] || ok != hasKey(wantV, k) {
				t.Fatalf("seed %d, %s: key %d: value %d, %v; want %d", seed, when, k, got, ok, wantV[k])
			}
			if got, ok := avgs.Get(); ok != hasKey(wantAvg, k) || ok && got != float64(wantAvg[k].Sum)/float64(wantAvg[k].N) {
				t.Fatalf("seed %d, %s: key %d: average %v, %v; want %+v", seed, when, k, got, ok, wantAvg[k])
			}
			for ns := range int64(3) {
				vns.SetNamespace(ns)
				sum.SetNamespace(ns)
				if got, ok := vns.Value(); got != wantNS[nk{k, ns}] || ok != hasKey(wantNS, nk{k, ns}) {
					t.Fatalf("seed %d, %s: key %d, namespace %d: value %q, %v; want %q", seed, when, k, ns, got, ok, wantNS[nk{k, ns}])
				}
				if got, ok := sum.Get(); got != wantSum[nk{k, ns}] || ok != hasKey(wantSum, nk{k, ns}) {
					t.Fatalf("seed %d, %s: key %d, namespace %d: sum %d, %v; want %d", seed, when, k, ns, got, ok, wantSum[nk{k, ns}])
				}
			}
		}
	}
	check("live")
	b.lsm.flushCaches(true)
	check("from the store")
}

// TestPebbleCacheFlushAtSnapshot checks that a snapshot writes the rows
// the cache holds dirty to the store first (they stay cached, clean), and
// that writes after the snapshot, cached, do not reach it.
func TestPebbleCacheFlushAtSnapshot(t *testing.T) {
	all := KeyGroupRange{0, 127}
	b := closeAtEnd(t, must(NewKeyedBackend[int64](nil, 128, all, pebbleBackend(t))))
	v := must(Value(b, ValueDescriptor[int64]{Name: "v"}))
	const keys = 1000
	inStore := func(k int64) (int64, bool) {
		t.Helper()
		b.SetCurrentKey(k)
		row := append(appendRowPrefix(nil, b.CurrentKeyGroup(), 0), b.encodedKey()...)
		row = append(row, 0)
		val, closer, err := b.lsm.db.Get(row)
		if errors.Is(err, pebble.ErrNotFound) {
			return 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		x, err := valueEnc(must(codec.For[int64]())).decode(val)
		if err != nil {
			t.Fatal(err)
		}
		return x, true
	}
	for k := range int64(keys) {
		b.SetCurrentKey(k)
		v.Update(k * 3)
	}
	for k := range int64(keys) {
		if x, ok := inStore(k); ok {
			t.Fatalf("key %d is in the store (%d) before any snapshot: the cache wrote through", k, x)
		}
	}
	s := b.Snapshot(1)
	defer s.Release()
	c := b.lsm.caches[0].(*valueCache[int64, VoidNamespace, int64])
	if c.len() != keys {
		t.Fatalf("the cache holds %d rows after the snapshot, want all %d", c.len(), keys)
	}
	for ck, e := range c.rows {
		if e.dirty() {
			t.Fatalf("row of key %d still dirty after the snapshot", ck.key)
		}
	}
	for k := range int64(keys) {
		if x, ok := inStore(k); !ok || x != k*3 {
			t.Fatalf("after the snapshot, the store has %d, %v for key %d; want %d", x, ok, k, k*3)
		}
	}
	// Later writes stay in the cache, out of the snapshot.
	for k := range int64(keys) {
		b.SetCurrentKey(k)
		if k%2 == 0 {
			v.Clear()
		} else {
			v.Update(-k)
		}
	}
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	h := closeAtEnd(t, must(NewKeyedBackend[int64](nil, 128, all)))
	if err := h.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	hv := must(Value(h, ValueDescriptor[int64]{Name: "v"}))
	for k := range int64(keys) {
		h.SetCurrentKey(k)
		if x, ok := hv.Value(); !ok || x != k*3 {
			t.Fatalf("restored key %d: %d, %v; want %d", k, x, ok, k*3)
		}
	}
}

// TestPebbleCacheCrashRestore takes a checkpoint of a Pebble backend
// (canonical and native) and goes on changing every kind of state, with a
// cache small enough that some later rows reach the store and others are
// only cached, dirty; then the backend is closed without writing them, as
// a crash would lose it. Restores of the checkpoint, into a new Pebble
// backend and into the heap, must hold exactly the state at the
// checkpoint.
func TestPebbleCacheCrashRestore(t *testing.T) {
	all := KeyGroupRange{0, 127}
	for _, seed := range []uint64{testSeed(t), testSeed(t) + 1} {
		small := WithPebble(PebbleOptions{Dir: t.TempDir(), Memory: 4 << 20})
		h, m := filled(t, seed, 3000, all, small)
		s := h.b.Snapshot(1)
		var canonical bytes.Buffer
		if _, err := s.WriteTo(&canonical); err != nil {
			t.Fatal(err)
		}
		s.Release()
		ns, err := h.b.NativeSnapshot(2)
		if err != nil {
			t.Fatal(err)
		}
		blob, dir := nativeCopy(t, ns)
		want := m.clone()
		r := newTestRand(seed + 100)
		for range 3000 {
			h.step(r, m, uniformKeys)
		}
		dirty := 0
		for _, c := range h.b.lsm.caches {
			switch c := c.(type) {
			case *valueCache[string, VoidNamespace, int64]:
				dirty += countDirty(c.rows)
			case *valueCache[string, VoidNamespace, int]:
				dirty += countDirty(c.rows)
			case *valueCache[string, VoidNamespace, *avgAcc]:
				dirty += countDirty(c.rows)
			case *valueCache[string, window, string]:
				dirty += countDirty(c.rows)
			case *mapCache[string, VoidNamespace, string, int]:
				for _, m := range c.maps {
					for _, e := range m.rows {
						if e.dirty() {
							dirty++
						}
					}
				}
			}
		}
		if dirty == 0 {
			t.Fatalf("seed %d: no dirty rows at the crash: the test proves nothing", seed)
		}
		// The crash: the backend goes without writing its caches (Close
		// discards them and the store).
		if err := h.b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := restoredInto(t, all, []BackendOption{pebbleBackend(t)}, canonical.Bytes()).check(want); err != nil {
			t.Fatalf("seed %d: canonical checkpoint into pebble: %v", seed, err)
		}
		if err := restored(t, all, canonical.Bytes()).check(want); err != nil {
			t.Fatalf("seed %d: canonical checkpoint into the heap: %v", seed, err)
		}
		nb := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, pebbleBackend(t))))
		if err := nb.RestoreNative(bytes.NewReader(blob), dir, all); err != nil {
			t.Fatal(err)
		}
		if err := registerAll(t, nb).check(want); err != nil {
			t.Fatalf("seed %d: native checkpoint into pebble: %v", seed, err)
		}
	}
}

func countDirty[K, N comparable, T any](rows map[cacheKey[K, N]]cacheEntry[T]) int {
	n := 0
	for _, e := range rows {
		if e.dirty() {
			n++
		}
	}
	return n
}
