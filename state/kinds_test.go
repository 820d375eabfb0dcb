package state

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/codec"
)

func newBackend(t testing.TB, opts ...BackendOption) *KeyedBackend[string] {
	t.Helper()
	b, err := NewKeyedBackend[string](nil, 128, KeyGroupRange{0, 127}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return closeAtEnd(t, b)
}

// eachBackend runs test on the heap backend and on the Pebble one.
func eachBackend(t *testing.T, test func(t *testing.T, opts ...BackendOption)) {
	t.Run("heap", func(t *testing.T) { test(t) })
	t.Run("pebble", func(t *testing.T) { test(t, pebbleBackend(t)) })
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestValueState(t *testing.T) { eachBackend(t, testValueState) }

func testValueState(t *testing.T, opts ...BackendOption) {
	b := newBackend(t, opts...)
	s := must(Value(b, ValueDescriptor[int64]{Name: "v"}))
	type step struct {
		key    string
		op     string // get, set, clear
		v      int64
		want   int64
		wantOK bool
	}
	steps := []step{
		{key: "a", op: "get"},
		{key: "a", op: "set", v: 5},
		{key: "a", op: "get", want: 5, wantOK: true},
		{key: "b", op: "get"},
		{key: "b", op: "set", v: 0},
		{key: "b", op: "get", want: 0, wantOK: true},
		{key: "a", op: "set", v: 7},
		{key: "a", op: "get", want: 7, wantOK: true},
		{key: "a", op: "clear"},
		{key: "a", op: "get"},
		{key: "a", op: "clear"},
		{key: "b", op: "get", want: 0, wantOK: true},
	}
	for i, st := range steps {
		b.SetCurrentKey(st.key)
		switch st.op {
		case "set":
			s.Update(st.v)
		case "clear":
			s.Clear()
		case "get":
			v, ok := s.Value()
			if v != st.want || ok != st.wantOK {
				t.Errorf("step %d: key %s: Value() = %d, %v; want %d, %v", i, st.key, v, ok, st.want, st.wantOK)
			}
		}
	}
}

func TestListState(t *testing.T) { eachBackend(t, testListState) }

func testListState(t *testing.T, opts ...BackendOption) {
	b := newBackend(t, opts...)
	s := must(List(b, ListDescriptor[string]{Name: "l"}))
	b.SetCurrentKey("k")
	if got := s.Get(); got != nil {
		t.Fatalf("empty list = %v", got)
	}
	s.Add("a")
	s.AddAll([]string{"b", "c"})
	s.AddAll(nil)
	got := s.Get()
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Get = %v", got)
	}
	// Appending to the returned slice must not reach the state.
	_ = append(got, "x")
	s.Add("d")
	if got := s.Get(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("after append to result: %v", got)
	}
	in := []string{"u", "v"}
	s.Update(in)
	in[0] = "mutated"
	if got := s.Get(); !slices.Equal(got, []string{"u", "v"}) {
		t.Fatalf("Update did not copy its argument: %v", got)
	}
	s.Update(nil)
	if got := s.Get(); got != nil {
		t.Fatalf("Update(nil) left %v", got)
	}
	s.Add("z")
	b.SetCurrentKey("other")
	if got := s.Get(); got != nil {
		t.Fatalf("other key sees %v", got)
	}
	b.SetCurrentKey("k")
	s.Clear()
	if got := s.Get(); got != nil {
		t.Fatalf("Clear left %v", got)
	}
}

func TestMapState(t *testing.T) { eachBackend(t, testMapState) }

func testMapState(t *testing.T, opts ...BackendOption) {
	b := newBackend(t, opts...)
	s := must(Map(b, MapDescriptor[string, int]{Name: "m"}))
	b.SetCurrentKey("k")
	if !s.IsEmpty() || s.Len() != 0 || s.Contains("x") {
		t.Fatal("new map not empty")
	}
	if _, ok := s.Get("x"); ok {
		t.Fatal("Get on empty map found a value")
	}
	s.Put("x", 1)
	s.Put("y", 2)
	s.Put("x", 3)
	if v, ok := s.Get("x"); !ok || v != 3 {
		t.Fatalf("Get(x) = %d, %v", v, ok)
	}
	if got := maps.Collect(s.All()); !maps.Equal(got, map[string]int{"x": 3, "y": 2}) {
		t.Fatalf("All = %v", got)
	}
	s.Remove("nope")
	s.Remove("x")
	if s.Contains("x") || s.Len() != 1 {
		t.Fatalf("after Remove: len %d", s.Len())
	}
	s.Remove("y")
	if !s.IsEmpty() {
		t.Fatal("map not empty after removing everything")
	}
	s.Put("z", 1)
	b.SetCurrentKey("other")
	if !s.IsEmpty() {
		t.Fatal("other key sees entries")
	}
	b.SetCurrentKey("k")
	s.Clear()
	if !s.IsEmpty() {
		t.Fatal("Clear left entries")
	}
	// Stop early.
	s.Put("a", 1)
	s.Put("b", 2)
	for range s.All() {
		break
	}
}

func TestReducingState(t *testing.T) { eachBackend(t, testReducingState) }

func testReducingState(t *testing.T, opts ...BackendOption) {
	b := newBackend(t, opts...)
	s := must(Reducing(b, ReducingDescriptor[int]{Name: "r", Reduce: func(a, v int) int { return a + v }}))
	b.SetCurrentKey("k")
	if _, ok := s.Get(); ok {
		t.Fatal("empty reducing state has a value")
	}
	for i := 1; i <= 4; i++ {
		s.Add(i)
	}
	if v, ok := s.Get(); !ok || v != 10 {
		t.Fatalf("Get = %d, %v", v, ok)
	}
	s.Clear()
	if _, ok := s.Get(); ok {
		t.Fatal("Clear left a value")
	}
	if _, err := Reducing(b, ReducingDescriptor[int]{Name: "nofn"}); err == nil {
		t.Fatal("reducing state without a function registered")
	}
}

// avg is an AggregateFunction with a pointer accumulator that it modifies
// in place, the case the backend must copy for.
type avg struct{}

type avgAcc struct{ Sum, N int64 }

func (avg) CreateAccumulator() *avgAcc { return &avgAcc{} }
func (avg) Add(v int64, a *avgAcc) *avgAcc {
	a.Sum += v
	a.N++
	return a
}
func (avg) GetResult(a *avgAcc) float64 { return float64(a.Sum) / float64(a.N) }
func (avg) Merge(a, b *avgAcc) *avgAcc {
	a.Sum += b.Sum
	a.N += b.N
	return a
}

func TestAggregatingState(t *testing.T) { eachBackend(t, testAggregatingState) }

func testAggregatingState(t *testing.T, opts ...BackendOption) {
	b := newBackend(t, opts...)
	s := must(Aggregating(b, AggregatingDescriptor[int64, *avgAcc, float64]{Name: "a", Function: avg{}}))
	b.SetCurrentKey("k")
	if _, ok := s.Get(); ok {
		t.Fatal("empty aggregating state has a result")
	}
	s.Add(1)
	s.Add(2)
	s.Add(6)
	if v, ok := s.Get(); !ok || v != 3 {
		t.Fatalf("Get = %v, %v", v, ok)
	}
	b.SetCurrentKey("j")
	if _, ok := s.Get(); ok {
		t.Fatal("other key has a result")
	}
	b.SetCurrentKey("k")
	s.Clear()
	if _, ok := s.Get(); ok {
		t.Fatal("Clear left a result")
	}
}

type window struct{ Start, End int64 }

func TestNamespaces(t *testing.T) { eachBackend(t, testNamespaces) }

func testNamespaces(t *testing.T, opts ...BackendOption) {
	b := newBackend(t, opts...)
	v := must(ValueNS[string, window, string](b, nil, ValueDescriptor[string]{Name: "v"}))
	l := must(ListNS[string, window, int](b, nil, ListDescriptor[int]{Name: "l"}))
	m := must(MapNS[string, window, string, int](b, nil, MapDescriptor[string, int]{Name: "m"}))
	r := must(ReducingNS[string, window, int](b, nil, ReducingDescriptor[int]{Name: "r", Reduce: func(a, v int) int { return a + v }}))
	a := must(AggregatingNS[string, window, int64, *avgAcc, float64](b, nil, AggregatingDescriptor[int64, *avgAcc, float64]{Name: "a", Function: avg{}}))
	w1, w2, w3 := window{0, 10}, window{10, 20}, window{20, 30}

	b.SetCurrentKey("k")
	for i, w := range []window{w1, w2, w3} {
		v.SetNamespace(w)
		v.Update(strings.Repeat("x", i+1))
		l.SetNamespace(w)
		l.Add(i)
		l.Add(10 * i)
		m.SetNamespace(w)
		m.Put("i", i)
		r.SetNamespace(w)
		r.Add(i + 1)
		a.SetNamespace(w)
		a.Add(int64(i + 1))
	}
	b.SetCurrentKey("other")
	v.SetNamespace(w1)
	v.Update("other")

	b.SetCurrentKey("k")
	v.SetNamespace(w2)
	if got, ok := v.Value(); !ok || got != "xx" || v.Namespace() != w2 {
		t.Fatalf("value in w2 = %q, %v", got, ok)
	}
	m.SetNamespace(w3)
	if got, _ := m.Get("i"); got != 2 {
		t.Fatalf("map in w3 = %d", got)
	}
	ns := v.Namespaces()
	slices.SortFunc(ns, func(x, y window) int { return int(x.Start - y.Start) })
	if !slices.Equal(ns, []window{w1, w2, w3}) {
		t.Fatalf("Namespaces = %v", ns)
	}

	// Merge w1 and w2 into w3.
	l.MergeNamespaces(w3, w1, w2, w3)
	l.SetNamespace(w3)
	if got := l.Get(); !slices.Equal(got, []int{2, 20, 0, 0, 1, 10}) {
		t.Fatalf("merged list = %v", got)
	}
	l.SetNamespace(w1)
	if got := l.Get(); got != nil {
		t.Fatalf("merged source still has %v", got)
	}
	r.MergeNamespaces(w3, w1, w2)
	r.SetNamespace(w3)
	if got, _ := r.Get(); got != 6 {
		t.Fatalf("merged reduce = %d", got)
	}
	r.SetNamespace(w1)
	if _, ok := r.Get(); ok {
		t.Fatal("merged reduce source remains")
	}
	a.MergeNamespaces(w1, w2, w3) // into a target that exists
	a.SetNamespace(w1)
	if got, _ := a.Get(); got != 2 {
		t.Fatalf("merged avg = %v", got)
	}
	a.MergeNamespaces(window{99, 100}, w1) // into an absent target
	a.SetNamespace(window{99, 100})
	if got, ok := a.Get(); !ok || got != 2 {
		t.Fatalf("moved avg = %v, %v", got, ok)
	}

	v.ClearAllNamespaces()
	if got := v.Namespaces(); len(got) != 0 {
		t.Fatalf("after ClearAllNamespaces: %v", got)
	}
	b.SetCurrentKey("other")
	v.SetNamespace(w1)
	if got, ok := v.Value(); !ok || got != "other" {
		t.Fatal("ClearAllNamespaces cleared another key")
	}
}

func TestRegistration(t *testing.T) { eachBackend(t, testRegistration) }

func testRegistration(t *testing.T, opts ...BackendOption) {
	b := newBackend(t, opts...)
	v1 := must(Value(b, ValueDescriptor[int]{Name: "x"}))
	v2 := must(Value(b, ValueDescriptor[int]{Name: "x"}))
	b.SetCurrentKey("k")
	v1.Update(3)
	if got, _ := v2.Value(); got != 3 {
		t.Fatal("two handles to one state disagree")
	}
	if _, err := Value(b, ValueDescriptor[string]{Name: "x"}); !errors.Is(err, errRegistered) {
		t.Fatalf("re-registering with another type: %v", err)
	}
	if _, err := List(b, ListDescriptor[int]{Name: "x"}); !errors.Is(err, errRegistered) {
		t.Fatalf("re-registering as another kind: %v", err)
	}
	if _, err := ValueNS[string, int, int](b, nil, ValueDescriptor[int]{Name: "x"}); !errors.Is(err, errRegistered) {
		t.Fatalf("re-registering with a namespace: %v", err)
	}
	if _, err := Value(b, ValueDescriptor[int]{}); err == nil {
		t.Fatal("registered a state without a name")
	}
	if _, err := Value(b, ValueDescriptor[chan int]{Name: "c"}); err == nil {
		t.Fatal("registered a state without a codec")
	}
	if _, err := Value(b, ValueDescriptor[chan int]{Name: "c2", Codec: chanCodec{}}); err != nil {
		t.Fatalf("explicit codec: %v", err)
	}
}

type chanCodec struct{}

func (chanCodec) Append(dst []byte, _ chan int) []byte { return append(dst, 0) }
func (chanCodec) Decode(src []byte) (chan int, int, error) {
	if len(src) == 0 {
		return nil, 0, codec.ErrTruncated
	}
	return nil, 1, nil
}

func TestCurrentKey(t *testing.T) {
	b, err := NewKeyedBackend[int](nil, 128, KeyGroupRange{10, 20})
	if err != nil {
		t.Fatal(err)
	}
	if b.CurrentKeyGroup() != -1 {
		t.Fatal("key group before SetCurrentKey")
	}
	s := must(Value(b, ValueDescriptor[int]{Name: "v"}))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("state access before SetCurrentKey did not panic")
			}
		}()
		s.Value()
	}()
	h := b.KeyHasher()
	var in, out int
	for k := 0; in == 0 || out == 0; k++ {
		kg := KeyGroupFor(h(k), 128)
		if kg >= 10 && kg <= 20 {
			b.SetCurrentKey(k)
			if b.CurrentKey() != k || b.CurrentKeyGroup() != kg {
				t.Fatalf("key %d: current %d in %d, want %d", k, b.CurrentKey(), b.CurrentKeyGroup(), kg)
			}
			in = k
			continue
		}
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), "outside") {
					t.Fatalf("key %d in group %d: panic %v", k, kg, r)
				}
			}()
			b.SetCurrentKey(k)
		}()
		out = k
	}
}

func TestNewHeapKeyedErrors(t *testing.T) {
	for _, tc := range []struct {
		maxP int
		kgs  KeyGroupRange
		opts []BackendOption
	}{
		{0, KeyGroupRange{0, 0}, nil},
		{128, KeyGroupRange{5, 4}, nil},
		{128, KeyGroupRange{0, 128}, nil},
		{128, KeyGroupRange{-1, 3}, nil},
		{128, KeyGroupRange{0, 3}, []BackendOption{WithShardSize(0)}},
		{128, KeyGroupRange{0, 3}, []BackendOption{WithKeyHasher(func(int) uint32 { return 0 })}},
	} {
		if _, err := NewKeyedBackend[string](nil, tc.maxP, tc.kgs, tc.opts...); err == nil {
			t.Errorf("NewKeyedBackend(%d, %v) succeeded", tc.maxP, tc.kgs)
		}
	}
}
