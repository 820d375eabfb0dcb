package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// chainModel is what a backend of chainStates holds, as plain maps.
type chainModel struct {
	vals   map[int64]int64
	sums   map[int64]int64
	ns     map[nsKey[int64, int64]]string
	lists  map[int64]string // the list's elements joined by ","
	maps   map[nsKey[int64, int64]]int64
	timers map[nsKey[int64, int64]]bool // key and timestamp
	ttl    map[int64][2]int64           // value and the time it was written
}

func newChainModel() chainModel {
	return chainModel{map[int64]int64{}, map[int64]int64{}, map[nsKey[int64, int64]]string{}, map[int64]string{},
		map[nsKey[int64, int64]]int64{}, map[nsKey[int64, int64]]bool{}, map[int64][2]int64{}}
}

func (m chainModel) clone() chainModel {
	return chainModel{maps.Clone(m.vals), maps.Clone(m.sums), maps.Clone(m.ns), maps.Clone(m.lists),
		maps.Clone(m.maps), maps.Clone(m.timers), maps.Clone(m.ttl)}
}

// live returns m with the values of the state with a time to live that
// have expired at now left out, and their write times dropped.
func (m chainModel) live(now int64) chainModel {
	c := m.clone()
	for k, v := range c.ttl {
		if now-v[1] >= chainTTL.Milliseconds() {
			delete(c.ttl, k)
		} else {
			c.ttl[k] = [2]int64{v[0], 0}
		}
	}
	return c
}

func (m chainModel) diff(got chainModel) error {
	return errors.Join(diffMap("value", got.vals, m.vals), diffMap("reducing", got.sums, m.sums),
		diffMap("namespaced value", got.ns, m.ns), diffMap("list", got.lists, m.lists),
		diffMap("map", got.maps, m.maps), diffMap("timers", got.timers, m.timers),
		diffMap("value with a time to live", got.ttl, m.ttl))
}

const chainTTL = 200 * time.Millisecond

// chainStates are the states of the delta tests, one of each kind that a
// delta writes differently: entries (value, reducing, namespaced,
// list, map, with a time to live whose snapshots leave expired values
// out) and whole key groups (timers).
type chainStates struct {
	b  *KeyedBackend[int64]
	v  ValueState[int64]
	s  ReducingState[int64]
	n  ValueStateNS[int64, string]
	l  ListState[string]
	m  MapState[int64, int64]
	tm *Timers[int64, VoidNamespace]
	tt ValueState[int64]
}

func newChainBackend(kgs KeyGroupRange, shard int, now *int64) (*KeyedBackend[int64], error) {
	return NewKeyedBackend[int64](nil, 128, kgs, WithShardSize(shard), WithIncrementalSnapshots(),
		WithProcessingTime(func() int64 { return *now }))
}

func registerChain(b *KeyedBackend[int64]) (*chainStates, error) {
	c := &chainStates{b: b}
	var err error
	c.v, err = Value(b, ValueDescriptor[int64]{Name: "v"})
	if err != nil {
		return nil, err
	}
	if c.s, err = Reducing(b, ReducingDescriptor[int64]{Name: "sum", Reduce: func(a, x int64) int64 { return a + x }}); err != nil {
		return nil, err
	}
	if c.n, err = ValueNS[int64, int64](b, codec.Int64(), ValueDescriptor[string]{Name: "ns"}); err != nil {
		return nil, err
	}
	if c.l, err = List(b, ListDescriptor[string]{Name: "list"}); err != nil {
		return nil, err
	}
	if c.m, err = Map(b, MapDescriptor[int64, int64]{Name: "map"}); err != nil {
		return nil, err
	}
	if c.tm, err = NewTimers[int64, VoidNamespace](b, "timers", nil); err != nil {
		return nil, err
	}
	c.tt, err = Value(b, ValueDescriptor[int64]{Name: "ttl", TTL: &TTLConfig{TTL: chainTTL, CleanupFullSnapshot: true}})
	return c, err
}

// dump reads the keys below keys that the backend's key groups hold.
func (c *chainStates) dump(keys int64) chainModel {
	m := newChainModel()
	h := c.b.KeyHasher()
	kgs := c.b.KeyGroups()
	for k := range keys {
		if !kgs.Contains(KeyGroupFor(h(k), 128)) {
			continue
		}
		c.b.SetCurrentKey(k)
		if x, ok := c.v.Value(); ok {
			m.vals[k] = x
		}
		if x, ok := c.s.Get(); ok {
			m.sums[k] = x
		}
		for n := range int64(3) {
			c.n.SetNamespace(n)
			if x, ok := c.n.Value(); ok {
				m.ns[nsKey[int64, int64]{k, n}] = x
			}
		}
		if l := c.l.Get(); len(l) > 0 {
			m.lists[k] = fmt.Sprint(l)
		}
		for uk, uv := range c.m.All() {
			m.maps[nsKey[int64, int64]{k, uk}] = uv
		}
		for ts := range int64(6) {
			if c.tm.Contains(VoidNamespace{}, ts) {
				m.timers[nsKey[int64, int64]{k, ts}] = true
			}
		}
		if x, ok := c.tt.Value(); ok {
			m.ttl[k] = [2]int64{x, 0}
		}
	}
	return m
}

// without returns m limited to the keys in key groups kgs.
func (m chainModel) within(kgs KeyGroupRange, h func(int64) uint32) chainModel {
	in := func(k int64) bool { return kgs.Contains(KeyGroupFor(h(k), 128)) }
	c := m.clone()
	maps.DeleteFunc(c.vals, func(k int64, _ int64) bool { return !in(k) })
	maps.DeleteFunc(c.sums, func(k int64, _ int64) bool { return !in(k) })
	maps.DeleteFunc(c.ns, func(k nsKey[int64, int64], _ string) bool { return !in(k.key) })
	maps.DeleteFunc(c.lists, func(k int64, _ string) bool { return !in(k) })
	maps.DeleteFunc(c.maps, func(k nsKey[int64, int64], _ int64) bool { return !in(k.key) })
	maps.DeleteFunc(c.timers, func(k nsKey[int64, int64], _ bool) bool { return !in(k.key) })
	maps.DeleteFunc(c.ttl, func(k int64, _ [2]int64) bool { return !in(k) })
	return c
}

func pieceReaders(pieces [][]byte) []io.Reader {
	rs := make([]io.Reader, len(pieces))
	for i, p := range pieces {
		rs[i] = bytes.NewReader(p)
	}
	return rs
}

// TestDeltaChainSeeds checks incremental snapshots of the heap backend
// over many seeds: every state kind, writes, removals, expiring values and
// timers between and during snapshots (tiny shards: copies on write and
// splits all the time), a fifth of the checkpoints failing (the next
// delta then builds on an older base), and a full snapshot again once the
// deltas outweigh the chain's full one, as internal/ops decides. Each
// checkpoint's chain (full snapshot and deltas) must restore to exactly
// the state when the snapshot was taken, in four ways in turn: into
// placeholders registered afterwards, into registered states, into two
// backends splitting the key groups (a rescale), and through a full
// snapshot of the placeholders. A failing seed is printed; -seed runs only
// that one.
func TestDeltaChainSeeds(t *testing.T) {
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
	var deltas, deltaOfDelta, removals, full int
	for _, seed := range seeds {
		st, err := deltaChainRun(seed)
		if err != nil {
			t.Fatalf("seed %d (rerun with -seed=%d): %v", seed, seed, err)
		}
		deltas += st.deltas
		deltaOfDelta += st.longChains
		removals += st.removals
		full += st.fullAgain
	}
	t.Logf("%d deltas, %d chains of more than one delta, %d removals written by deltas, %d full snapshots after a chain", deltas, deltaOfDelta, removals, full)
	if deltas == 0 || deltaOfDelta == 0 || removals == 0 || full == 0 {
		t.Fatalf("%d deltas, %d longer chains, %d removals in deltas, %d chains restarted: the test proves too little", deltas, deltaOfDelta, removals, full)
	}
}

type chainRunStats struct{ deltas, longChains, removals, fullAgain int }

func deltaChainRun(seed uint64) (chainRunStats, error) {
	var st chainRunStats
	r := rand.New(rand.NewPCG(seed, 71))
	all := KeyGroupRange{0, 127}
	shard := 1 + r.IntN(8)
	clock := int64(1_000_000)
	b, err := newChainBackend(all, shard, &clock)
	if err != nil {
		return st, err
	}
	c, err := registerChain(b)
	if err != nil {
		return st, err
	}
	live := newChainModel()
	keys := int64(30 + r.IntN(400))
	write := func() {
		clock += r.Int64N(4)
		k := r.Int64N(keys)
		b.SetCurrentKey(k)
		switch op := r.IntN(20); {
		case op < 4:
			x := r.Int64N(1 << 40)
			c.v.Update(x)
			live.vals[k] = x
		case op < 6:
			c.v.Clear()
			delete(live.vals, k)
		case op < 8:
			x := r.Int64N(1000)
			c.s.Add(x)
			live.sums[k] += x
		case op < 9:
			c.s.Clear()
			delete(live.sums, k)
		case op < 10:
			n := r.Int64N(3)
			c.n.SetNamespace(n)
			if r.IntN(3) == 0 {
				c.n.Clear()
				delete(live.ns, nsKey[int64, int64]{k, n})
			} else {
				x := fmt.Sprint(r.Int64N(1 << 30))
				c.n.Update(x)
				live.ns[nsKey[int64, int64]{k, n}] = x
			}
		case op < 12:
			if r.IntN(4) == 0 {
				c.l.Clear()
				delete(live.lists, k)
			} else {
				c.l.Add(fmt.Sprint(r.IntN(100)))
				live.lists[k] = fmt.Sprint(c.l.Get())
			}
		case op < 14:
			uk := r.Int64N(4)
			if r.IntN(3) == 0 {
				c.m.Remove(uk)
				delete(live.maps, nsKey[int64, int64]{k, uk})
			} else {
				x := r.Int64N(1 << 20)
				c.m.Put(uk, x)
				live.maps[nsKey[int64, int64]{k, uk}] = x
			}
		case op < 16:
			ts := r.Int64N(6)
			if r.IntN(3) == 0 {
				c.tm.Delete(VoidNamespace{}, ts)
				delete(live.timers, nsKey[int64, int64]{k, ts})
			} else {
				c.tm.Register(VoidNamespace{}, ts)
				live.timers[nsKey[int64, int64]{k, ts}] = true
			}
		case op < 17:
			if tm, ok := c.tm.Pop(r.Int64N(3)); ok {
				delete(live.timers, nsKey[int64, int64]{tm.Key, tm.Timestamp})
			}
		default:
			x := r.Int64N(1 << 30)
			c.tt.Update(x)
			live.ttl[k] = [2]int64{x, clock}
		}
	}
	for range r.IntN(2000) {
		write()
	}
	completed := int64(0)
	chains := map[int64][][]byte{}
	for round := range 12 {
		id := int64(round + 1)
		chain := chains[completed]
		var sum int
		for _, p := range chain[min(1, len(chain)):] {
			sum += len(p)
		}
		fullWanted := chain == nil || sum > len(chain[0])
		snap := b.IncrementalSnapshot(id, completed, fullWanted)
		want, now := live.live(clock), clock
		done := make(chan []byte, 1)
		writeAsync(snap, done)
		for range r.IntN(1500) {
			write()
		}
		blob := <-done
		for range r.IntN(300) {
			write()
		}
		snap.Release()
		if blob == nil {
			return st, fmt.Errorf("snapshot %d failed to serialize", id)
		}
		base, isDelta := snap.Delta()
		if isDelta == fullWanted || isDelta && base != completed {
			return st, fmt.Errorf("checkpoint %d: delta %v over %d, want a delta %v over %d", id, isDelta, base, !fullWanted, completed)
		}
		pieces := [][]byte{blob}
		if isDelta {
			pieces = append(slices.Clone(chain), blob)
			st.deltas++
			if len(pieces) > 2 {
				st.longChains++
			}
			pd, err := newScratch(&now).parseDelta(bytes.NewReader(blob), all)
			if err != nil {
				return st, fmt.Errorf("checkpoint %d: %w", id, err)
			}
			for _, blk := range pd.blocks {
				for _, seg := range blk.segs {
					st.removals += seg.dels.n
				}
			}
		} else if chain != nil {
			st.fullAgain++
		}
		if r.IntN(5) > 0 {
			completed, chains[id] = id, pieces
		}
		if err := verifyChain(pieces, want, now, keys, shard, int(seed)+round); err != nil {
			return st, fmt.Errorf("checkpoint %d (chain of %d): %w", id, len(pieces), err)
		}
	}
	return st, nil
}

func newScratch(now *int64) *KeyedBackend[int64] {
	b, _ := newChainBackend(KeyGroupRange{0, 127}, 4, now)
	return b
}

// verifyChain restores pieces one of four ways (by mode) and compares the
// result with want.
func verifyChain(pieces [][]byte, want chainModel, now, keys int64, shard, mode int) error {
	all := KeyGroupRange{0, 127}
	switch mode % 4 {
	case 0: // into placeholders, registered afterwards
		b, err := newChainBackend(all, shard, &now)
		if err != nil {
			return err
		}
		if err := b.RestoreChain(pieceReaders(pieces), all); err != nil {
			return err
		}
		c, err := registerChain(b)
		if err != nil {
			return err
		}
		return want.diff(c.dump(keys))
	case 1: // into registered states
		b, err := newChainBackend(all, shard, &now)
		if err != nil {
			return err
		}
		c, err := registerChain(b)
		if err != nil {
			return err
		}
		if err := b.RestoreChain(pieceReaders(pieces), all); err != nil {
			return err
		}
		return want.diff(c.dump(keys))
	case 2: // rescaled: two backends share the key groups
		split := 1 + int(now%126)
		for _, kgs := range []KeyGroupRange{{0, split}, {split + 1, 127}} {
			b, err := newChainBackend(kgs, shard, &now)
			if err != nil {
				return err
			}
			if err := b.RestoreChain(pieceReaders(pieces), all); err != nil {
				return fmt.Errorf("key groups %v: %w", kgs, err)
			}
			c, err := registerChain(b)
			if err != nil {
				return err
			}
			if err := want.within(kgs, b.KeyHasher()).diff(c.dump(keys)); err != nil {
				return fmt.Errorf("key groups %v: %w", kgs, err)
			}
		}
		return nil
	default: // a full snapshot of the placeholders, restored
		b, err := newChainBackend(all, shard, &now)
		if err != nil {
			return err
		}
		if err := b.RestoreChain(pieceReaders(pieces), all); err != nil {
			return err
		}
		var buf bytes.Buffer
		s := b.Snapshot(1000)
		if _, err := s.WriteTo(&buf); err != nil {
			return err
		}
		s.Release()
		b2, err := newChainBackend(all, shard, &now)
		if err != nil {
			return err
		}
		if err := b2.Restore(&buf); err != nil {
			return fmt.Errorf("the placeholders' full snapshot: %w", err)
		}
		c, err := registerChain(b2)
		if err != nil {
			return err
		}
		return want.diff(c.dump(keys))
	}
}

// TestDeltaChainBroken checks that a chain whose delta is corrupt,
// truncated, missing, out of order or alone fails to restore, saying so,
// and leaves the backend as it was: the same backend then restores the
// intact chain.
func TestDeltaChainBroken(t *testing.T) {
	clock := int64(1_000_000)
	b := must(newChainBackend(KeyGroupRange{0, 127}, 16, &clock))
	c := must(registerChain(b))
	want := map[int64]int64{}
	var pieces [][]byte
	for id := range int64(3) {
		for k := range int64(300) {
			if (k+id)%3 == 0 {
				b.SetCurrentKey(k)
				if k%7 == 0 {
					c.v.Clear()
					delete(want, k)
				} else {
					c.v.Update(k*10 + id)
					want[k] = k*10 + id
				}
			}
		}
		s := b.IncrementalSnapshot(id+1, id, id == 0)
		var buf bytes.Buffer
		if _, err := s.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		s.Release()
		if _, ok := s.Delta(); ok != (id > 0) {
			t.Fatalf("snapshot %d: delta %v", id+1, ok)
		}
		pieces = append(pieces, buf.Bytes())
	}
	flipped := slices.Clone(pieces[1])
	flipped[len(flipped)/2] ^= 0x10
	cases := []struct {
		name   string
		pieces [][]byte
	}{
		{"a flipped bit in a delta", [][]byte{pieces[0], flipped, pieces[2]}},
		{"a truncated delta", [][]byte{pieces[0], pieces[1][:len(pieces[1])-3], pieces[2]}},
		{"a missing delta", [][]byte{pieces[0], pieces[2]}},
		{"deltas out of order", [][]byte{pieces[0], pieces[2], pieces[1]}},
		{"a delta without its full snapshot", [][]byte{pieces[1], pieces[2]}},
		{"a full snapshot as a delta", [][]byte{pieces[0], pieces[0]}},
	}
	now := clock
	r := must(newChainBackend(KeyGroupRange{0, 127}, 16, &now))
	for _, tc := range cases {
		if err := r.RestoreChain(pieceReaders(tc.pieces), KeyGroupRange{0, 127}); err == nil {
			t.Fatalf("%s: restored", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	if err := r.RestoreChain(pieceReaders(pieces), KeyGroupRange{0, 127}); err != nil {
		t.Fatalf("the intact chain, after the broken ones: %v", err)
	}
	rc := must(registerChain(r))
	got := map[int64]int64{}
	for k := range int64(300) {
		r.SetCurrentKey(k)
		if x, ok := rc.v.Value(); ok {
			got[k] = x
		}
	}
	if err := diffMap("value", got, want); err != nil {
		t.Fatal(err)
	}
}

// TestDeltaWritesOnlyChanges checks that a delta holds the entries
// written since its base and the removals, not the rest.
func TestDeltaWritesOnlyChanges(t *testing.T) {
	b := must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, WithIncrementalSnapshots()))
	v := must(Value(b, ValueDescriptor[int64]{Name: "v"}))
	for k := range int64(10_000) {
		b.SetCurrentKey(k)
		v.Update(k)
	}
	s := b.IncrementalSnapshot(1, 0, false)
	if _, err := s.WriteTo(io.Discard); err != nil {
		t.Fatal(err)
	}
	s.Release()
	for k := range int64(100) {
		b.SetCurrentKey(k)
		if k%2 == 0 {
			v.Update(-k)
		} else {
			v.Clear()
		}
	}
	d := b.IncrementalSnapshot(2, 1, false)
	if _, err := d.WriteTo(io.Discard); err != nil {
		t.Fatal(err)
	}
	d.Release()
	if _, ok := d.Delta(); !ok {
		t.Fatal("not a delta")
	}
	if got := d.Stats().Entries; got != 100 {
		t.Fatalf("the delta wrote %d entries, want the 50 updates and 50 removals", got)
	}
	// Without tracking, there is no delta.
	p := must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}))
	p.Snapshot(1).Release()
	if _, ok := p.IncrementalSnapshot(2, 1, false).Delta(); ok {
		t.Fatal("a delta from a backend that does not track changes")
	}
}
