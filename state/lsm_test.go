package state

import (
	"bytes"
	"encoding/hex"
	"flag"
	"testing"
)

// runningSumKeys is the number of keys BenchmarkRunningSum spreads its records
// over (-bench.keys).
var runningSumKeys = int64(50_000)

func init() {
	flag.Int64Var(&runningSumKeys, "bench.keys", runningSumKeys, "keys of BenchmarkRunningSum")
}

// BenchmarkRunningSum reads and updates a value state per record over
// -bench.keys keys, on each backend.
func BenchmarkRunningSum(b *testing.B) {
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
			be := closeAtEnd(b, must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, tc.opts(b)...)))
			v := must(Value(be, ValueDescriptor[int64]{Name: "sum"}))
			b.ReportAllocs()
			for i := range b.N {
				be.SetCurrentKey(int64(i*7919) % runningSumKeys)
				s, _ := v.Value()
				v.Update(s + int64(i))
			}
		})
	}
}

// TestPebbleStateBeyondMemory fills a Pebble backend of 4 MiB with about
// 20 MiB (10 MiB under the race detector) of value and reducing state, updating and clearing keys as it
// goes, so its write-back cache evicts to the store again and again: every
// read must see the latest write, the cache must stay within its budget,
// the store's memtables within theirs, and a snapshot must restore the
// same state into the heap.
func TestPebbleStateBeyondMemory(t *testing.T) {
	keys := int64(30_000)
	if raceEnabled {
		// 12,000 keys left about 6.2 MB of live values, too close to
		// the 6 MiB the check below asks of the store.
		keys = 17_000
	}
	all := KeyGroupRange{0, 127}
	b := closeAtEnd(t, must(NewKeyedBackend[int64](nil, 128, all, WithPebble(PebbleOptions{Dir: t.TempDir(), Memory: 4 << 20}))))
	v := must(Value(b, ValueDescriptor[string]{Name: "v"}))
	sum := must(Reducing(b, ReducingDescriptor[int64]{Name: "sum", Reduce: func(a, x int64) int64 { return a + x }}))
	want := map[int64]string{}
	sums := map[int64]int64{}
	r := newTestRand(testSeed(t))
	raw := make([]byte, 300)
	for i := range 2 * keys {
		k := r.Int64N(keys)
		b.SetCurrentKey(k)
		switch {
		case i%97 == 0:
			v.Clear()
			delete(want, k)
		default:
			for j := range raw {
				raw[j] = byte(r.Uint32())
			}
			s := hex.EncodeToString(raw)
			v.Update(s)
			want[k] = s
		}
		sum.Add(k)
		sums[k] += k
		if b.lsm.cacheUsed > b.lsm.cacheBudget+1024 {
			t.Fatalf("after %d writes the cache holds %d bytes, over its budget of %d", i, b.lsm.cacheUsed, b.lsm.cacheBudget)
		}
	}
	m := b.lsm.db.Metrics()
	if limit := uint64(4<<20) / 8 * 2; m.MemTable.Size > limit+(1<<20) {
		t.Fatalf("memtables hold %d bytes, over their budget of %d", m.MemTable.Size, limit)
	}
	if disk := m.DiskSpaceUsage(); disk < 3*(4<<20)/2 {
		t.Fatalf("the store uses %d bytes on disk: the state did not outgrow memory, the test proves nothing", disk)
	}
	check := func(what string, b *KeyedBackend[int64], v ValueState[string], sum ReducingState[int64]) {
		t.Helper()
		for k := range keys {
			b.SetCurrentKey(k)
			got, ok := v.Value()
			if w, wok := want[k]; got != w || ok != wok {
				t.Fatalf("%s: key %d: value %.10q…, %v; want %.10q…, %v", what, k, got, ok, w, wok)
			}
			if got, _ := sum.Get(); got != sums[k] {
				t.Fatalf("%s: key %d: sum %d, want %d", what, k, got, sums[k])
			}
		}
	}
	check("live", b, v, sum)
	var buf bytes.Buffer
	s := b.Snapshot(1)
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	s.Release()
	h := closeAtEnd(t, must(NewKeyedBackend[int64](nil, 128, all)))
	if err := h.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	check("restored", h, must(Value(h, ValueDescriptor[string]{Name: "v"})),
		must(Reducing(h, ReducingDescriptor[int64]{Name: "sum", Reduce: func(a, x int64) int64 { return a + x }})))
	t.Logf("%d keys, %d bytes on disk, cache %d of %d bytes", keys, m.DiskSpaceUsage(), b.lsm.cacheUsed, b.lsm.cacheBudget)
}
