package state

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestTimerIndexModel drives the index with seeded inserts and removes,
// hashes drawn from few values so that probe runs collide and wrap, and
// checks every slot's lookup against a Go map after each step, the
// table's fill, and that it shrinks back as timers go.
func TestTimerIndexModel(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0))
			var ix timerIndex
			var nodes []timerNode[int, VoidNamespace]
			model := map[int32]uint32{} // slot → hash
			var live []int32
			hashes := 1 + r.IntN(64)
			for step := range 4000 {
				if len(live) > 0 && r.IntN(100) < 45 {
					k := r.IntN(len(live))
					s := live[k]
					live[k] = live[len(live)-1]
					live = live[:len(live)-1]
					ix.remove(model[s], s)
					delete(model, s)
				} else {
					s := int32(len(nodes))
					hv := uint32(r.IntN(hashes)) * 0x01000193
					nodes = append(nodes, timerNode[int, VoidNamespace]{timerKey: timerKey[int, VoidNamespace]{ts: int64(s), key: int(s)}})
					ix.insert(hv, s)
					model[s] = hv
					live = append(live, s)
				}
				if ix.n != len(model) {
					t.Fatalf("seed %d step %d: %d entries, want %d", seed, step, ix.n, len(model))
				}
				if len(ix.e) > 0 && ix.n*4 > len(ix.e)*3 {
					t.Fatalf("seed %d step %d: %d entries in %d places", seed, step, ix.n, len(ix.e))
				}
				for s, hv := range model {
					got, ok := lookup(&ix, nodes, hv, nodes[s].timerKey)
					if !ok || got != s {
						t.Fatalf("seed %d step %d: lookup of slot %d = %d, %v", seed, step, s, got, ok)
					}
				}
			}
			// Removed slots are not found.
			for s := range nodes {
				if _, ok := model[int32(s)]; ok {
					continue
				}
				if _, ok := lookup(&ix, nodes, uint32(r.IntN(hashes))*0x01000193, nodes[s].timerKey); ok {
					t.Fatalf("seed %d: removed slot %d found", seed, s)
				}
			}
			for _, s := range live {
				ix.remove(model[s], s)
			}
			if ix.n != 0 || len(ix.e) > minIndexLen {
				t.Fatalf("seed %d: emptied index holds %d entries in %d places", seed, ix.n, len(ix.e))
			}
		})
	}
}

// TestTimerIndexCloneIsolated: a clone (a snapshot's copy on write)
// does not see later changes of the original, nor the original the
// clone's.
func TestTimerIndexCloneIsolated(t *testing.T) {
	var ix timerIndex
	nodes := make([]timerNode[int, VoidNamespace], 40)
	for i := range nodes {
		nodes[i].timerKey = timerKey[int, VoidNamespace]{ts: int64(i), key: i}
		ix.insert(timerHash(uint32(i), int64(i)), int32(i))
	}
	c := ix.clone()
	for i := range 20 {
		ix.remove(timerHash(uint32(i), int64(i)), int32(i))
	}
	for i := range nodes {
		if _, ok := lookup(&c, nodes, timerHash(uint32(i), int64(i)), nodes[i].timerKey); !ok {
			t.Fatalf("the clone lost slot %d", i)
		}
		_, ok := lookup(&ix, nodes, timerHash(uint32(i), int64(i)), nodes[i].timerKey)
		if ok != (i >= 20) {
			t.Fatalf("slot %d found %v in the original", i, ok)
		}
	}
}
