package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// A model is the expected content of a backend with the states of
// handles, kept in plain Go maps.
type model struct {
	value map[string]int64
	list  map[string][]string
	mp    map[string]map[string]int
	sum   map[string]int
	avg   map[string]avgAcc
	vns   map[nsk]string
	lns   map[nsk][]int
	tim   map[timerKey[string, window]]bool
}

type nsk struct {
	key string
	ns  window
}

func newModel() *model {
	return &model{
		value: map[string]int64{},
		list:  map[string][]string{},
		mp:    map[string]map[string]int{},
		sum:   map[string]int{},
		avg:   map[string]avgAcc{},
		vns:   map[nsk]string{},
		lns:   map[nsk][]int{},
		tim:   map[timerKey[string, window]]bool{},
	}
}

func (m *model) clone() *model {
	c := &model{
		value: maps.Clone(m.value),
		list:  maps.Clone(m.list), // the model never modifies a list in place
		mp:    map[string]map[string]int{},
		sum:   maps.Clone(m.sum),
		avg:   maps.Clone(m.avg),
		vns:   maps.Clone(m.vns),
		lns:   maps.Clone(m.lns),
		tim:   maps.Clone(m.tim),
	}
	for k, v := range m.mp {
		c.mp[k] = maps.Clone(v)
	}
	return c
}

// entries is the number of table entries the model corresponds to.
func (m *model) entries() int64 {
	return int64(len(m.value) + len(m.list) + len(m.mp) + len(m.sum) + len(m.avg) + len(m.vns) + len(m.lns) + len(m.tim))
}

// handles are the states of a test backend.
type handles struct {
	b     *KeyedBackend[string]
	value ValueState[int64]
	list  ListState[string]
	mp    MapState[string, int]
	sum   ReducingState[int]
	avg   AggregatingState[int64, float64]
	vns   ValueStateNS[window, string]
	lns   ListStateNS[window, int]
	tim   *Timers[string, window]
}

func registerAll(t testing.TB, b *KeyedBackend[string]) *handles {
	t.Helper()
	return &handles{
		b:     b,
		value: must(Value(b, ValueDescriptor[int64]{Name: "value"})),
		list:  must(List(b, ListDescriptor[string]{Name: "list"})),
		mp:    must(Map(b, MapDescriptor[string, int]{Name: "map"})),
		sum:   must(Reducing(b, ReducingDescriptor[int]{Name: "sum", Reduce: func(a, v int) int { return a + v }})),
		avg:   must(Aggregating(b, AggregatingDescriptor[int64, *avgAcc, float64]{Name: "avg", Function: avg{}})),
		vns:   must(ValueNS[string, window, string](b, nil, ValueDescriptor[string]{Name: "vns"})),
		lns:   must(ListNS[string, window, int](b, nil, ListDescriptor[int]{Name: "lns"})),
		tim:   must(NewTimers[string, window](b, "timers", nil)),
	}
}

const (
	modelKeys = 300
	modelNS   = 4
)

func modelKey(i int) string    { return "key-" + strconv.Itoa(i) }
func modelWindow(i int) window { return window{int64(i) * 10, int64(i)*10 + 10} }

// step applies one random operation to the handles and the model.
func (h *handles) step(r *rand.Rand, m *model, keys func(*rand.Rand) string) {
	k := keys(r)
	h.b.SetCurrentKey(k)
	w := modelWindow(r.IntN(modelNS))
	switch op := r.IntN(24); op {
	case 0, 1:
		v := r.Int64N(1000)
		h.value.Update(v)
		m.value[k] = v
	case 2:
		h.value.Clear()
		delete(m.value, k)
	case 3, 4:
		s := strconv.Itoa(r.IntN(100))
		h.list.Add(s)
		m.list[k] = append(slices.Clip(m.list[k]), s)
	case 5:
		vs := []string{"a", "b"}[:r.IntN(3)%2+1]
		if r.IntN(2) == 0 {
			h.list.Update(vs)
			m.list[k] = slices.Clone(vs)
		} else {
			h.list.AddAll(vs)
			m.list[k] = append(slices.Clip(m.list[k]), vs...)
		}
	case 6:
		h.list.Clear()
		delete(m.list, k)
	case 7, 8:
		uk, uv := strconv.Itoa(r.IntN(8)), r.IntN(100)
		h.mp.Put(uk, uv)
		if m.mp[k] == nil {
			m.mp[k] = map[string]int{}
		}
		m.mp[k][uk] = uv
	case 9:
		uk := strconv.Itoa(r.IntN(8))
		h.mp.Remove(uk)
		delete(m.mp[k], uk)
		if len(m.mp[k]) == 0 {
			delete(m.mp, k)
		}
	case 10:
		h.mp.Clear()
		delete(m.mp, k)
	case 11, 12:
		v := r.IntN(10)
		h.sum.Add(v)
		m.sum[k] += v
	case 13:
		h.sum.Clear()
		delete(m.sum, k)
	case 14, 15:
		v := r.Int64N(10)
		h.avg.Add(v)
		a := m.avg[k]
		m.avg[k] = avgAcc{a.Sum + v, a.N + 1}
	case 16:
		h.avg.Clear()
		delete(m.avg, k)
	case 17:
		h.vns.SetNamespace(w)
		v := strconv.Itoa(r.IntN(100))
		h.vns.Update(v)
		m.vns[nsk{k, w}] = v
	case 18:
		h.lns.SetNamespace(w)
		v := r.IntN(100)
		h.lns.Add(v)
		m.lns[nsk{k, w}] = append(slices.Clip(m.lns[nsk{k, w}]), v)
	case 19:
		target := modelWindow(r.IntN(modelNS))
		src := modelWindow(r.IntN(modelNS))
		h.lns.MergeNamespaces(target, src)
		if src != target {
			if l := m.lns[nsk{k, src}]; len(l) > 0 {
				m.lns[nsk{k, target}] = append(slices.Clip(m.lns[nsk{k, target}]), l...)
				delete(m.lns, nsk{k, src})
			}
		}
		if r.IntN(4) == 0 {
			h.vns.ClearAllNamespaces()
			for i := range modelNS {
				delete(m.vns, nsk{k, modelWindow(i)})
			}
		}
	case 20, 21:
		ts := r.Int64N(50)
		h.tim.Register(w, ts)
		m.tim[timerKey[string, window]{ts, k, w}] = true
	case 22:
		ts := r.Int64N(50)
		h.tim.Delete(w, ts)
		delete(m.tim, timerKey[string, window]{ts, k, w})
	case 23:
		upTo := r.Int64N(10)
		last := Timer[string, window]{Timestamp: -1}
		for tm := range h.tim.PopUntil(upTo) {
			if tm.Timestamp > upTo || tm.Timestamp < last.Timestamp || h.b.CurrentKey() != tm.Key {
				panic(fmt.Sprintf("popped %+v after %+v, up to %d, current key %s", tm, last, upTo, h.b.CurrentKey()))
			}
			tk := timerKey[string, window]{tm.Timestamp, tm.Key, tm.Namespace}
			if !m.tim[tk] {
				panic(fmt.Sprintf("popped unknown timer %+v", tm))
			}
			delete(m.tim, tk)
			last = tm
		}
		for tk := range m.tim {
			if tk.ts <= upTo {
				panic(fmt.Sprintf("timer %+v not popped up to %d", tk, upTo))
			}
		}
	}
}

// check compares the handles' backend with the model for every key of the
// model's universe that the backend owns.
func (h *handles) check(m *model) error {
	n := 0
	for tk := range m.tim {
		if !h.b.KeyGroups().Contains(KeyGroupFor(h.b.KeyHasher()(tk.key), h.b.MaxParallelism())) {
			continue
		}
		n++
		h.b.SetCurrentKey(tk.key)
		if !h.tim.Contains(tk.ns, tk.ts) {
			return fmt.Errorf("timer %+v missing", tk)
		}
	}
	if h.tim.Len() != n {
		return fmt.Errorf("%d timers, want %d", h.tim.Len(), n)
	}
	for i := range modelKeys {
		k := modelKey(i)
		kg := KeyGroupFor(h.b.KeyHasher()(k), h.b.MaxParallelism())
		if !h.b.KeyGroups().Contains(kg) {
			continue
		}
		h.b.SetCurrentKey(k)
		if v, ok := h.value.Value(); ok != hasKey(m.value, k) || v != m.value[k] {
			return fmt.Errorf("key %s: value %d, %v; want %d", k, v, ok, m.value[k])
		}
		if l := h.list.Get(); !slices.Equal(l, m.list[k]) {
			return fmt.Errorf("key %s: list %v; want %v", k, l, m.list[k])
		}
		if got := maps.Collect(h.mp.All()); !maps.Equal(got, m.mp[k]) || h.mp.Len() != len(m.mp[k]) {
			return fmt.Errorf("key %s: map %v; want %v", k, got, m.mp[k])
		}
		if v, ok := h.sum.Get(); ok != hasKey(m.sum, k) || v != m.sum[k] {
			return fmt.Errorf("key %s: sum %d, %v; want %d", k, v, ok, m.sum[k])
		}
		a, ok := h.avg.Get()
		want := m.avg[k]
		if ok != hasKey(m.avg, k) || (ok && a != avg{}.GetResult(&want)) {
			return fmt.Errorf("key %s: avg %v, %v; want %+v", k, a, ok, want)
		}
		for j := range modelNS {
			w := modelWindow(j)
			h.vns.SetNamespace(w)
			if v, ok := h.vns.Value(); ok != hasKey(m.vns, nsk{k, w}) || v != m.vns[nsk{k, w}] {
				return fmt.Errorf("key %s ns %v: value %q, %v; want %q", k, w, v, ok, m.vns[nsk{k, w}])
			}
			h.lns.SetNamespace(w)
			if l := h.lns.Get(); !slices.Equal(l, m.lns[nsk{k, w}]) {
				return fmt.Errorf("key %s ns %v: list %v; want %v", k, w, l, m.lns[nsk{k, w}])
			}
		}
	}
	return nil
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// restrict returns the part of m in the key groups kgs.
func (m *model) restrict(hash func(string) uint32, maxP int, kgs KeyGroupRange) *model {
	in := func(k string) bool { return kgs.Contains(KeyGroupFor(hash(k), maxP)) }
	c := m.clone()
	for k := range c.value {
		if !in(k) {
			delete(c.value, k)
		}
	}
	maps.DeleteFunc(c.list, func(k string, _ []string) bool { return !in(k) })
	maps.DeleteFunc(c.mp, func(k string, _ map[string]int) bool { return !in(k) })
	maps.DeleteFunc(c.sum, func(k string, _ int) bool { return !in(k) })
	maps.DeleteFunc(c.avg, func(k string, _ avgAcc) bool { return !in(k) })
	maps.DeleteFunc(c.vns, func(k nsk, _ string) bool { return !in(k.key) })
	maps.DeleteFunc(c.lns, func(k nsk, _ []int) bool { return !in(k.key) })
	maps.DeleteFunc(c.tim, func(k timerKey[string, window], _ bool) bool { return !in(k.key) })
	return c
}

func uniformKeys(r *rand.Rand) string { return modelKey(r.IntN(modelKeys)) }
