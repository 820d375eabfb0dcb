package mini

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weirstream/weir/config"
)

// TestHandlerInvariants drives a Handler with random arrivals and aborts
// and checks what every correct barrier handler must do: each input's
// elements reach the operator once, in their order, none lost; in
// exactly-once mode nothing from a blocked input is delivered before the
// checkpoint it is blocked for is snapshotted or aborted; every snapshot
// comes after the barrier arrived on every open input.
func TestHandlerInvariants(t *testing.T) {
	for _, mode := range []config.CheckpointingMode{config.ExactlyOnce, config.AtLeastOnce} {
		for _, seed := range seeds() {
			r := rand.New(rand.NewPCG(seed, 4))
			n := 1 + r.IntN(4)
			h := NewHandler(n, mode)
			// Each input carries a numbered sequence with barriers 1, 2, ...
			// (an input skips a barrier now and then, as when its source
			// declined the checkpoint) and ends.
			type item struct {
				seq  int
				elem Element
			}
			inputs := make([][]item, n)
			for i := range inputs {
				var id int64
				for s := range 5 + r.IntN(30) {
					if r.IntN(4) == 0 {
						id++
						if r.IntN(8) != 0 {
							inputs[i] = append(inputs[i], item{s, Barrier{ID: id}})
							continue
						}
					}
					inputs[i] = append(inputs[i], item{s, Event{Key: "k", Value: int64(s)}})
				}
				inputs[i] = append(inputs[i], item{-1, EndOfInput{}})
			}
			next := make([]int, n)
			delivered := make([][]int64, n) // event values per input, as delivered
			var snapshots []int64
			blockedFor := make([]int64, n)
			sent := make([]map[int64]bool, n) // barriers handed to Receive, per input
			ended := make([]bool, n)          // EndOfInput delivered
			for i := range sent {
				sent[i] = map[int64]bool{}
			}
			check := func(acts []Action) {
				for _, a := range acts {
					switch a := a.(type) {
					case Deliver:
						if mode == config.ExactlyOnce && blockedFor[a.Input] != 0 {
							t.Fatalf("seed=%d mode=%v: delivered %v on input %d blocked for checkpoint %d", seed, mode, a.Elem, a.Input, blockedFor[a.Input])
						}
						switch e := a.Elem.(type) {
						case Event:
							delivered[a.Input] = append(delivered[a.Input], e.Value)
						case EndOfInput:
							ended[a.Input] = true
						}
					case Block:
						blockedFor[a.Input] = a.Checkpoint
					case Unblock:
						blockedFor[a.Input] = 0
					case Snapshot:
						if len(snapshots) > 0 && a.Checkpoint <= snapshots[len(snapshots)-1] {
							t.Fatalf("seed=%d mode=%v: snapshot %d after %v", seed, mode, a.Checkpoint, snapshots)
						}
						snapshots = append(snapshots, a.Checkpoint)
						for i := range sent {
							if !ended[i] && !sent[i][a.Checkpoint] {
								t.Fatalf("seed=%d mode=%v: snapshot %d before its barrier arrived on open input %d", seed, mode, a.Checkpoint, i)
							}
						}
					}
				}
			}
			for {
				open := slices.DeleteFunc([]int{0, 1, 2, 3}[:n], func(i int) bool { return next[i] == len(inputs[i]) })
				if len(open) == 0 {
					break
				}
				if r.IntN(20) == 0 && h.Pending() != 0 {
					check(h.Abort(h.Pending(), "test"))
					continue
				}
				i := open[r.IntN(len(open))]
				it := inputs[i][next[i]]
				next[i]++
				if b, ok := it.elem.(Barrier); ok {
					sent[i][b.ID] = true
				}
				check(h.Receive(i, it.elem))
			}
			if h.Held() != 0 {
				t.Fatalf("seed=%d mode=%v: %d elements still held after every input ended", seed, mode, h.Held())
			}
			for i := range inputs {
				var want []int64
				for _, it := range inputs[i] {
					if e, ok := it.elem.(Event); ok {
						want = append(want, e.Value)
					}
				}
				if !slices.Equal(delivered[i], want) {
					t.Fatalf("seed=%d mode=%v: input %d delivered %v, sent %v", seed, mode, i, delivered[i], want)
				}
			}
		}
	}
}
