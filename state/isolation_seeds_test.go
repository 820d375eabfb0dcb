package state

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/weirstream/weir/codec"
)

// TestSnapshotIsolationSeeds checks snapshot isolation over many seeds on
// the heap backend with int64 keys and int64 and string values, the
// states whose entries the snapshot encodes on its fast path: a value
// state, a reducing state and a namespaced value state. Each round takes
// a snapshot, starts writing it on another goroutine, and keeps writing
// (every write after the snapshot stores a value no write before it
// could: negative for the value state, a marked string for the
// namespaced one), deleting keys and adding new ones; the restored
// snapshot must equal the state when it was taken, entry for entry. Tiny
// shards make copies on write and splits frequent. A failing seed is
// printed; -seed runs only that one.
func TestSnapshotIsolationSeeds(t *testing.T) {
	seeds := []uint64{}
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		n := 40
		if testing.Short() || raceEnabled {
			n = 12
		}
		for i := range n {
			seeds = append(seeds, uint64(i)+1)
		}
	}
	for _, seed := range seeds {
		if err := snapshotIsolationRun(seed); err != nil {
			t.Fatalf("seed %d (rerun with -seed=%d): %v", seed, seed, err)
		}
	}
}

type isoState struct {
	vals map[int64]int64
	sums map[int64]int64
	ns   map[nsKey[int64, int64]]string
}

func (s isoState) clone() isoState {
	return isoState{maps.Clone(s.vals), maps.Clone(s.sums), maps.Clone(s.ns)}
}

func snapshotIsolationRun(seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 7))
	all := KeyGroupRange{0, 127}
	newBackend := func() (*KeyedBackend[int64], ValueState[int64], ReducingState[int64], ValueStateNS[int64, string], error) {
		b, err := NewKeyedBackend[int64](nil, 128, all, WithShardSize(1+r.IntN(8)))
		if err != nil {
			return nil, nil, nil, nil, err
		}
		v, err := Value(b, ValueDescriptor[int64]{Name: "v"})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		s, err := Reducing(b, ReducingDescriptor[int64]{Name: "sum", Reduce: func(a, x int64) int64 { return a + x }})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		n, err := ValueNS[int64, int64](b, codec.Int64(), ValueDescriptor[string]{Name: "ns"})
		return b, v, s, n, err
	}
	b, v, sum, ns, err := newBackend()
	if err != nil {
		return err
	}
	live := isoState{map[int64]int64{}, map[int64]int64{}, map[nsKey[int64, int64]]string{}}
	keys := int64(50 + r.IntN(2000))
	// write applies one random operation; after says whether a snapshot
	// is pending, whose writes must never show in it.
	write := func(after bool) {
		k := r.Int64N(keys)
		b.SetCurrentKey(k)
		switch op := r.IntN(10); {
		case op < 4:
			x := r.Int64N(1 << 40)
			if after {
				x = -1 - x
			}
			v.Update(x)
			live.vals[k] = x
		case op < 5:
			v.Clear()
			delete(live.vals, k)
		case op < 8:
			x := r.Int64N(1000)
			sum.Add(x)
			live.sums[k] += x
		case op < 9:
			n := r.Int64N(4)
			ns.SetNamespace(n)
			x := fmt.Sprint(r.Int64N(1 << 30))
			if after {
				x = "after-" + x
			}
			ns.Update(x)
			live.ns[nsKey[int64, int64]{k, n}] = x
		default:
			n := r.Int64N(4)
			ns.SetNamespace(n)
			ns.Clear()
			delete(live.ns, nsKey[int64, int64]{k, n})
		}
	}
	for range r.IntN(3000) {
		write(false)
	}
	for round := range 6 {
		snap := b.Snapshot(int64(round + 1))
		want := live.clone()
		done := make(chan []byte, 1)
		writeAsync(snap, done)
		for range r.IntN(3000) {
			write(true)
		}
		blob := <-done
		for range r.IntN(500) {
			write(true)
		}
		snap.Release()
		if blob == nil {
			return fmt.Errorf("snapshot %d failed to serialize", round+1)
		}
		rb, rv, rs, rn, err := newBackend()
		if err != nil {
			return err
		}
		if err := rb.Restore(bytes.NewReader(blob)); err != nil {
			return fmt.Errorf("restoring snapshot %d: %w", round+1, err)
		}
		got := isoState{map[int64]int64{}, map[int64]int64{}, map[nsKey[int64, int64]]string{}}
		for k := range keys {
			rb.SetCurrentKey(k)
			if x, ok := rv.Value(); ok {
				got.vals[k] = x
			}
			if x, ok := rs.Get(); ok {
				got.sums[k] = x
			}
			for n := range int64(4) {
				rn.SetNamespace(n)
				if x, ok := rn.Value(); ok {
					got.ns[nsKey[int64, int64]{k, n}] = x
				}
			}
		}
		if err := diffIso(got, want); err != nil {
			return fmt.Errorf("snapshot %d: %w", round+1, err)
		}
		if e := snap.Stats().Entries; e != int64(len(want.vals)+len(want.sums)+len(want.ns)) {
			return fmt.Errorf("snapshot %d wrote %d entries, want %d", round+1, e, len(want.vals)+len(want.sums)+len(want.ns))
		}
	}
	return nil
}

func diffIso(got, want isoState) error {
	if err := diffMap("value", got.vals, want.vals); err != nil {
		return err
	}
	if err := diffMap("reducing", got.sums, want.sums); err != nil {
		return err
	}
	return diffMap("namespaced value", got.ns, want.ns)
}

func diffMap[K comparable, V comparable](what string, got, want map[K]V) error {
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			return fmt.Errorf("%s state of %v: restored %v (present %v), want %v", what, k, g, ok, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			return fmt.Errorf("%s state of %v: restored %v, which the snapshot did not hold", what, k, g)
		}
	}
	return nil
}
