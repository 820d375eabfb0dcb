package ops

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// TestSinkCommittablesRescale: the committables of every old sink subtask
// are committed by exactly one new subtask at any new parallelism, and
// every new subtask sees every old subtask's location.
func TestSinkCommittablesRescale(t *testing.T) {
	var pieces [][]byte
	want := map[string]bool{}
	for old := range 3 {
		pending := map[int64][][]byte{}
		for ckpt := int64(4); ckpt < 4+int64(old)+1; ckpt++ {
			for j := range 2 {
				c := fmt.Sprintf("txn-%d-%d-%d", old, ckpt, j)
				pending[ckpt] = append(pending[ckpt], []byte(c))
				want[fmt.Sprint(ckpt, c)] = true
			}
		}
		b, err := encodeSink(6, "file:///out", pending)
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, b)
	}
	for p := 1; p <= 5; p++ {
		got := map[string]bool{}
		for i := range p {
			ob, err := restoreOperatorState(p, i, pieces)
			if err != nil {
				t.Fatal(err)
			}
			locs, pending, err := decodeSink(ob)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(locs, []string{"file:///out", "file:///out", "file:///out"}) {
				t.Errorf("parallelism %d, subtask %d: locations %q", p, i, locs)
			}
			for ckpt, cs := range pending {
				for _, c := range cs {
					k := fmt.Sprint(ckpt, string(c))
					if got[k] {
						t.Errorf("parallelism %d: %s committed twice", p, k)
					}
					got[k] = true
				}
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("parallelism %d: committed %v, want %v", p, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
	}
}

// TestSourceSplitsUnion: every new source subtask sees every split of
// every old subtask, with its offset, reader state and watermark state.
func TestSourceSplitsUnion(t *testing.T) {
	a, err := encodeSplits(2, []splitElem{{Split: "p-0", Offset: 5, State: []byte("r0"), HasMaxTs: true, MaxTs: 99}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeSplits(2, []splitElem{{Split: "p-1", Offset: 7, Ended: true}, {Split: "p-2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []splitElem{{Split: "p-0", Offset: 5, State: []byte("r0"), HasMaxTs: true, MaxTs: 99}, {Split: "p-1", Offset: 7, Ended: true}, {Split: "p-2"}}
	for i := range 4 {
		ob, err := restoreOperatorState(4, i, [][]byte{a, b})
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := decodeSplits(ob)
		if err != nil || !ok {
			t.Fatalf("subtask %d: %v, %v", i, ok, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("subtask %d: %v, want %v", i, got, want)
		}
	}
}
