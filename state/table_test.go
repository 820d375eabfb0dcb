package state

import (
	"strconv"
	"testing"
)

// checkDirs verifies the extendible-hashing invariants of every key group:
// a shard of local depth d fills exactly the 2^(global-d) consecutive
// slots of its d-bit prefix, and holds only keys with that prefix.
func checkDirs[MK comparable, E any](t *testing.T, tb *table[MK, E]) {
	t.Helper()
	for kg := range tb.groups {
		g := &tb.groups[kg]
		global := 32 - g.shift
		if len(g.dir) != 1<<global {
			t.Fatalf("group %d: %d slots for depth %d", kg, len(g.dir), global)
		}
		for j := 0; j < len(g.dir); {
			s := g.dir[j]
			span := 1 << (global - s.depth)
			if j%span != 0 {
				t.Fatalf("group %d: shard of depth %d starts at slot %d", kg, s.depth, j)
			}
			for k := j; k < j+span; k++ {
				if g.dir[k] != s {
					t.Fatalf("group %d: slot %d does not hold the shard of slot %d", kg, k, j)
				}
			}
			for mk := range s.m.all() {
				if int(uint64(tb.hash(mk))>>g.shift) < j || int(uint64(tb.hash(mk))>>g.shift) >= j+span {
					t.Fatalf("group %d: key in the wrong shard", kg)
				}
			}
			j += span
		}
	}
}

func TestTableSplits(t *testing.T) {
	b := newBackend(t, WithShardSize(8))
	v := must(Value(b, ValueDescriptor[int]{Name: "v"}))
	const n = 20000
	for i := range n {
		b.SetCurrentKey(strconv.Itoa(i))
		v.Update(i)
	}
	tb := v.(*valueState[string, int]).t
	checkDirs(t, tb)
	shards, _ := tb.capture()
	total := 0
	for _, s := range shards {
		total += s.m.len()
		if s.m.len() > s.limit {
			t.Fatalf("shard of %d entries over its limit %d", s.m.len(), s.limit)
		}
	}
	if total != n || len(shards) < n/8/2 {
		t.Fatalf("%d entries in %d shards", total, len(shards))
	}
	for i := range n {
		b.SetCurrentKey(strconv.Itoa(i))
		if got, ok := v.Value(); !ok || got != i {
			t.Fatalf("key %d: %d, %v", i, got, ok)
		}
	}
}

// TestTableUnsplittable puts many namespaces under one key: its shard
// cannot split, and must stop trying rather than split on every insert.
func TestTableUnsplittable(t *testing.T) {
	b := newBackend(t, WithShardSize(8))
	v := must(ValueNS[string, int, int](b, nil, ValueDescriptor[int]{Name: "v"}))
	b.SetCurrentKey("one-key")
	for i := range 5000 {
		v.SetNamespace(i)
		v.Update(i)
	}
	tb := v.(*valueNS[string, int, int]).t
	checkDirs(t, tb)
	g := &tb.groups[b.CurrentKeyGroup()]
	if depth := 32 - g.shift; depth > 12 {
		t.Fatalf("directory of depth %d for one key", depth)
	}
	if got := len(v.Namespaces()); got != 5000 {
		t.Fatalf("%d namespaces", got)
	}
}

func TestEpochs(t *testing.T) {
	e := newEpochs()
	a := e.begin()
	b := e.begin()
	if !e.shared(a) || !e.shared(b) || e.shared(e.cur) {
		t.Fatal("pending epochs not shared")
	}
	e.end(b)
	if e.maxPending != a || e.shared(b) || !e.shared(a) {
		t.Fatalf("after releasing the newer snapshot: maxPending %d", e.maxPending)
	}
	if e.end(b) {
		t.Fatal("released twice")
	}
	e.end(a)
	if e.maxPending != 0 || e.shared(a) {
		t.Fatal("epochs still shared with no snapshot pending")
	}
}
