package state

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"
)

// TestOmapModel drives a shard table with seeded sets, overwrites and
// deletes, inner hashes drawn from few values so that probe runs collide
// and wrap, and checks it against a Go map after each step: every key's
// value, absent keys not found, its count and fill, iteration, and that
// a clone taken along the way keeps its contents while the original
// changes.
func TestOmapModel(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0))
			var m omap[int, int]
			model := map[int]int{}
			keys := 1 + r.IntN(400)
			hashes := 1 + r.IntN(64)
			hv := func(k int) uint32 { return innerHash(uint32(k%hashes) * 0x01000193) }
			var frozen omap[int, int]
			var frozenModel map[int]int
			for step := range 3000 {
				k := r.IntN(keys)
				switch op := r.IntN(100); {
				case op < 40:
					_, had := model[k]
					if m.del(hv(k), k) != had {
						t.Fatalf("seed %d step %d: del(%d) = %v, model has it: %v", seed, step, k, !had, had)
					}
					delete(model, k)
				default:
					_, had := model[k]
					if m.set(hv(k), k, slot[int]{v: step}) == had {
						t.Fatalf("seed %d step %d: set(%d) reported new %v, model had it: %v", seed, step, k, had, had)
					}
					model[k] = step
				}
				if step == 1500 {
					frozen, frozenModel = m.clone(), make(map[int]int, len(model))
					for k, v := range model {
						frozenModel[k] = v
					}
				}
				if m.len() != len(model) {
					t.Fatalf("seed %d step %d: %d entries, want %d", seed, step, m.len(), len(model))
				}
				if len(m.es) > 0 && m.len()*4 > len(m.es)*3 {
					t.Fatalf("seed %d step %d: %d entries in %d slots", seed, step, m.len(), len(m.es))
				}
				if step%50 == 0 || step > 2900 {
					checkOmap(t, fmt.Sprintf("seed %d step %d", seed, step), &m, model, keys, hv)
				}
			}
			checkOmap(t, fmt.Sprintf("seed %d clone", seed), &frozen, frozenModel, keys, hv)
		})
	}
}

func checkOmap(t *testing.T, at string, m *omap[int, int], model map[int]int, keys int, hv func(int) uint32) {
	t.Helper()
	for k := range keys {
		e, ok := m.get(hv(k), k)
		want, has := model[k]
		if ok != has || ok && e.v != want {
			t.Fatalf("%s: get(%d) = %d, %v; want %d, %v", at, k, e.v, ok, want, has)
		}
	}
	seen := 0
	for k, e := range m.all() {
		if want, ok := model[k]; !ok || want != e.v {
			t.Fatalf("%s: iteration yields %d = %d, model %d, %v", at, k, e.v, want, ok)
		}
		seen++
	}
	if seen != len(model) {
		t.Fatalf("%s: iteration yields %d entries, want %d", at, seen, len(model))
	}
}

// BenchmarkShardChurn inserts, reads and deletes keys in one shard's
// table at a standing population, as a request-join's state does: the
// open-addressing table keeps no tombstones, so the cost of a lookup does
// not grow with the churn.
func BenchmarkShardChurn(b *testing.B) {
	for _, live := range []int{512, 100_000} {
		b.Run(fmt.Sprint(live), func(b *testing.B) {
			b.Run("omap", func(b *testing.B) {
				var m omap[int64, int64]
				hv := func(k int64) uint32 { return innerHash(uint32(fmix64(uint64(k)))) }
				for k := range int64(live) {
					m.set(hv(k), k, slot[int64]{v: k})
				}
				b.ResetTimer()
				for i := range int64(b.N) {
					k := int64(live) + i
					m.set(hv(k), k, slot[int64]{v: k})
					if _, ok := m.get(hv(k-1), k-1); !ok {
						b.Fatal("missing")
					}
					m.get(hv(-k), -k)
					m.del(hv(i), i)
				}
			})
			b.Run("gomap", func(b *testing.B) {
				m := map[int64]slot[int64]{}
				for k := range int64(live) {
					m[k] = slot[int64]{v: k}
				}
				b.ResetTimer()
				for i := range int64(b.N) {
					k := int64(live) + i
					m[k] = slot[int64]{v: k}
					if _, ok := m[k-1]; !ok {
						b.Fatal("missing")
					}
					_ = m[-k]
					delete(m, i)
				}
			})
		})
	}
}

// BenchmarkValueStateLarge reads and writes a running sum over 5 M keys in
// a random order, where nearly every lookup misses the CPU caches: the
// table's layout decides how many lines a lookup touches.
func BenchmarkValueStateLarge(b *testing.B) {
	const n = 5_000_000
	be := must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}))
	v := must(Value(be, ValueDescriptor[int64]{Name: "sum"}))
	for k := range int64(n) {
		be.SetCurrentKey(k)
		v.Update(k)
	}
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]int64, 1<<20)
	for i := range keys {
		keys[i] = r.Int64N(n)
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		be.SetCurrentKey(keys[i&(len(keys)-1)])
		x, _ := v.Value()
		v.Update(x + 1)
		i++
	}
}

// TestOmapSlotSize: a counter's slot (int64 key and value) is 24 bytes,
// the inner hash and the epoch sharing a word.
func TestOmapSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(oent[int64, int64]{}); n != 24 {
		t.Fatalf("oent[int64, int64] is %d bytes, want 24", n)
	}
	if n := unsafe.Sizeof(oent[string, int64]{}); n != 32 {
		t.Fatalf("oent[string, int64] is %d bytes, want 32", n)
	}
}

// TestEpochsExhausted: the epoch that a slot's 32 bits cannot hold is
// never reached silently.
func TestEpochsExhausted(t *testing.T) {
	e := newEpochs()
	e.cur = maxEpoch - 1
	if ep := e.begin(); ep != maxEpoch-1 {
		t.Fatalf("epoch %d", ep)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic at the last epoch")
		}
	}()
	e.beginDelta()
}

func TestPlainMemory(t *testing.T) {
	type window struct{ Start, End int64 }
	type padded struct {
		A int8
		B int64
	}
	type blank struct {
		A int32
		_ int32
	}
	type nested struct {
		W [2]window
		F bool
	}
	for _, c := range []struct {
		t    reflect.Type
		want bool
	}{
		{reflect.TypeFor[window](), true},
		{reflect.TypeFor[[3]uint16](), true},
		{reflect.TypeFor[padded](), false},
		{reflect.TypeFor[blank](), false},
		{reflect.TypeFor[nested](), false}, // padding after F
		{reflect.TypeFor[struct{ A, B float64 }](), false},
		{reflect.TypeFor[struct{ S string }](), false},
		{reflect.TypeFor[[2]*int](), false},
	} {
		if got := plainMemory(c.t); got != c.want {
			t.Errorf("plainMemory(%v) = %v, want %v", c.t, got, c.want)
		}
	}
}

// TestNSHasherOfPlainMemory: a namespace hashed from its bytes hashes
// equal values alike and spreads distinct ones, without allocating; a
// namespace type of size zero has no hash.
func TestNSHasherOfPlainMemory(t *testing.T) {
	type window struct{ Start, End int64 }
	h := nsHasher[window]()
	seen := map[uint32]bool{}
	for i := range int64(1000) {
		w := window{i * 60_000, (i + 1) * 60_000}
		if h(w) != h(window{w.Start, w.End}) {
			t.Fatalf("%v hashes two ways", w)
		}
		seen[h(w)] = true
	}
	if len(seen) < 999 {
		t.Fatalf("1000 windows, %d hashes", len(seen))
	}
	if n := testing.AllocsPerRun(100, func() { _ = h(window{1, 2}) }); n != 0 {
		t.Fatalf("%v allocations per hash", n)
	}
	if nsHasher[struct{}]() != nil {
		t.Fatal("struct{}: a hasher")
	}
}
