package runtime

import (
	"testing"

	"github.com/weirstream/weir/config"
)

// TestWorkerSlotMemory checks that the subtasks of index i share one
// budget for slot i, counting the keyed operators of the vertices that
// have a subtask i, and that without a per-slot budget none is made.
func TestWorkerSlotMemory(t *testing.T) {
	g := &JobGraph{Vertices: []*Vertex{
		{Name: "source", Parallelism: 3},
		{Name: "sum", Parallelism: 3, KeyedOperators: 1},
		{Name: "window+count", Parallelism: 2, KeyedOperators: 2},
	}}
	w := NewWorker(g, WorkerOptions{KeyedState: KeyedStateOptions{Backend: config.BackendPebble, SlotMemory: 64 << 20}}, nil)
	a, b := w.keyedState(0), w.keyedState(0)
	if a.Slot == nil || a.Slot != b.Slot {
		t.Fatalf("slot 0: budgets %p and %p, want one", a.Slot, b.Slot)
	}
	for i, want := range []int{3, 3, 1} {
		ks := w.keyedState(i)
		if ks.SlotErr != nil || ks.Slot == nil || ks.Slot.Members() != want || ks.Slot.Budget() != 64<<20 {
			t.Fatalf("slot %d: %+v, want 64 MiB for %d keyed subtasks", i, ks, want)
		}
	}
	if w.keyedState(1).Slot == a.Slot {
		t.Fatal("slots 0 and 1 share a budget")
	}
	if ks := NewWorker(g, WorkerOptions{KeyedState: KeyedStateOptions{Backend: config.BackendPebble, Memory: 64 << 20}}, nil).keyedState(0); ks.Slot != nil {
		t.Fatal("a budget per slot without state.backend.rocksdb.memory.fixed-per-slot or managed memory")
	}
	if ks := NewWorker(g, WorkerOptions{KeyedState: KeyedStateOptions{Backend: config.BackendPebble, SlotMemory: 8 << 20}}, nil).keyedState(0); ks.SlotErr == nil {
		t.Fatal("8 MiB for 3 keyed subtasks was accepted")
	}
}
