package state

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// ttlStates are the states with a time to live of the cleanup tests, one
// of each kind, all with the same configuration but for the options
// given per state.
type ttlStates struct {
	b     *KeyedBackend[string]
	value ValueState[int]
	list  ListState[int]
	mp    MapState[string, int]
	sum   ReducingState[int]
}

func registerTTL(t testing.TB, b *KeyedBackend[string], cfg func(name string) *TTLConfig) *ttlStates {
	t.Helper()
	return &ttlStates{
		b:     b,
		value: must(Value(b, ValueDescriptor[int]{Name: "value", TTL: cfg("value")})),
		list:  must(List(b, ListDescriptor[int]{Name: "list", TTL: cfg("list")})),
		mp:    must(Map(b, MapDescriptor[string, int]{Name: "map", TTL: cfg("map")})),
		sum:   must(Reducing(b, ReducingDescriptor[int]{Name: "sum", Reduce: func(a, x int) int { return a + x }, TTL: cfg("sum")})),
	}
}

// stored restores blob into a heap backend whose clock stands before
// every value's time, with no cleanup, and returns, per state, every
// value the snapshot holds for keys, expired or not.
func stored(t testing.TB, blob []byte, keys []string) map[string][]string {
	t.Helper()
	rb := newBackend(t, WithProcessingTime(func() int64 { return -1 << 50 }))
	if err := rb.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	s := registerTTL(t, rb, func(string) *TTLConfig {
		return &TTLConfig{TTL: time.Hour, DisableCleanupInBackground: true}
	})
	out := map[string][]string{}
	for _, k := range keys {
		rb.SetCurrentKey(k)
		if v, ok := s.value.Value(); ok {
			out["value"] = append(out["value"], fmt.Sprintf("%s=%d", k, v))
		}
		for _, v := range s.list.Get() {
			out["list"] = append(out["list"], fmt.Sprintf("%s=%d", k, v))
		}
		for uk, v := range s.mp.All() {
			out["map"] = append(out["map"], fmt.Sprintf("%s.%s=%d", k, uk, v))
		}
		if v, ok := s.sum.Get(); ok {
			out["sum"] = append(out["sum"], fmt.Sprintf("%s=%d", k, v))
		}
	}
	for _, l := range out {
		slices.Sort(l)
	}
	return out
}

// snapshotBlob serializes a snapshot of b.
func snapshotBlob(t testing.TB, b *KeyedBackend[string], id int64) []byte {
	t.Helper()
	s := b.Snapshot(id)
	defer s.Release()
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ttlKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	return keys
}

// fillTTL writes, for each key, a value, a sum and a list element and map
// entry at time 0, and another list element and map entry at time 5.
func fillTTL(s *ttlStates, now *int64, keys []string) {
	*now = 0
	for i, k := range keys {
		s.b.SetCurrentKey(k)
		s.value.Update(i)
		s.sum.Add(i)
		s.list.Add(i)
		s.mp.Put("old", i)
	}
	*now = 5
	for i, k := range keys {
		s.b.SetCurrentKey(k)
		s.list.Add(-i)
		s.mp.Put("new", -i)
	}
}

// TestTTLCleanupInBackground writes values that expire and are never
// read again, then accesses one other key until the background cleanup
// has been round the state: on the heap (incremental cleanup) and on
// Pebble (the sweep), the expired values are gone from the backend, and
// so from its snapshot, while the live ones (list elements and map
// entries written later than their neighbours) stay. With the cleanup
// disabled they all stay.
func TestTTLCleanupInBackground(t *testing.T) { eachBackend(t, testTTLCleanupInBackground) }

func testTTLCleanupInBackground(t *testing.T, opts ...BackendOption) {
	keys := ttlKeys(300)
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("disabled=%v", disabled), func(t *testing.T) {
			var now int64
			b := newBackend(t, append(slices.Clone(opts), WithProcessingTime(func() int64 { return now }), WithShardSize(8))...)
			s := registerTTL(t, b, func(string) *TTLConfig {
				if disabled {
					return &TTLConfig{TTL: 10 * time.Millisecond, DisableCleanupInBackground: true}
				}
				return &TTLConfig{TTL: 10 * time.Millisecond, SweepRows: 20}
			})
			fillTTL(s, &now, keys)
			now = 12 // what was written at 0 has expired, what at 5 has not
			b.SetCurrentKey("live")
			// Enough accesses for the cursor to go round each state: a
			// step checks 5 entries (or enters a shard), a sweep reads
			// 20 rows every 20 accesses.
			for range 2000 {
				s.value.Update(1)
				s.list.Update([]int{1})
				s.mp.Put("x", 1)
				s.sum.Clear()
			}
			got := stored(t, snapshotBlob(t, b, 1), keys)
			want := map[string]int{"value": 0, "list": len(keys), "map": len(keys), "sum": 0}
			if disabled {
				want = map[string]int{"value": len(keys), "list": 2 * len(keys), "map": 2 * len(keys), "sum": len(keys)}
			}
			for name, n := range want {
				if len(got[name]) != n {
					t.Errorf("%s: %d values stored, want %d (%v...)", name, len(got[name]), n, head(got[name]))
				}
			}
			for _, e := range got["list"] {
				if !strings.HasPrefix(e, "k0=") && !strings.Contains(e, "=-") && !disabled {
					t.Errorf("list keeps the expired element %s", e)
				}
			}
			if l := b.lsm; l != nil && !disabled {
				// In the store itself: after the cache's deletions are
				// written, the states hold the live key's rows and the
				// lists' and maps' live ones.
				l.flushCaches(false)
				if n, want := countRows(t, l.db, nil), 1+1+2*len(keys)+1; n != want {
					t.Errorf("%d rows in the store, want %d", n, want)
				}
			}
		})
	}
}

func head(l []string) []string { return l[:min(len(l), 5)] }

// countRows counts the rows of db within opts' bounds (nil: all).
func countRows(t testing.TB, db *pebble.DB, opts *pebble.IterOptions) int {
	t.Helper()
	it, err := db.NewIter(opts)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTTLCleanupEveryRecord runs the cleanup on SetCurrentKey alone, with
// no access to the state.
func TestTTLCleanupEveryRecord(t *testing.T) { eachBackend(t, testTTLCleanupEveryRecord) }

func testTTLCleanupEveryRecord(t *testing.T, opts ...BackendOption) {
	keys := ttlKeys(200)
	for _, every := range []bool{false, true} {
		t.Run(fmt.Sprintf("every=%v", every), func(t *testing.T) {
			var now int64
			b := newBackend(t, append(slices.Clone(opts), WithProcessingTime(func() int64 { return now }))...)
			s := registerTTL(t, b, func(string) *TTLConfig {
				return &TTLConfig{TTL: 10 * time.Millisecond, CleanupEveryRecord: every, CleanupSize: 10, SweepRows: 10}
			})
			fillTTL(s, &now, keys)
			now = 12
			for i := range 3000 {
				b.SetCurrentKey(keys[i%len(keys)])
			}
			got := stored(t, snapshotBlob(t, b, 1), keys)
			want := len(keys)
			if every {
				want = 0
			}
			if n := len(got["value"]); n != want {
				t.Errorf("%d values stored, want %d", n, want)
			}
		})
	}
}

// TestTTLCleanupFullSnapshot leaves values expired at the barrier out of
// canonical snapshots of a state with CleanupFullSnapshot, on both
// backends; the time is read at the barrier, not when the snapshot is
// written (the clock moves on in between), and the backend keeps the
// values: a state without the option snapshots them all.
func TestTTLCleanupFullSnapshot(t *testing.T) { eachBackend(t, testTTLCleanupFullSnapshot) }

func testTTLCleanupFullSnapshot(t *testing.T, opts ...BackendOption) {
	keys := ttlKeys(100)
	for _, full := range []bool{false, true} {
		t.Run(fmt.Sprintf("full=%v", full), func(t *testing.T) {
			var now int64
			b := newBackend(t, append(slices.Clone(opts), WithProcessingTime(func() int64 { return now }))...)
			s := registerTTL(t, b, func(string) *TTLConfig {
				return &TTLConfig{TTL: 10 * time.Millisecond, CleanupFullSnapshot: full, DisableCleanupInBackground: true}
			})
			fillTTL(s, &now, keys)
			now = 12
			snap := b.Snapshot(1)
			now = 100 // everything has expired by the time it is written
			var buf bytes.Buffer
			if _, err := snap.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			snap.Release()
			got := stored(t, buf.Bytes(), keys)
			want := map[string]int{"value": 0, "list": len(keys), "map": len(keys), "sum": 0}
			if !full {
				want = map[string]int{"value": len(keys), "list": 2 * len(keys), "map": 2 * len(keys), "sum": len(keys)}
			}
			for name, n := range want {
				if len(got[name]) != n {
					t.Errorf("%s: %d values in the snapshot, want %d (%v...)", name, len(got[name]), n, head(got[name]))
				}
			}
			// The backend still holds them.
			if n := len(stored(t, snapshotBlob(t, b, 2), keys)["list"]); full && n != 0 {
				t.Errorf("a snapshot at 100 holds %d list elements, want none", n)
			}
			now = 0
			if n := len(stored(t, snapshotBlob(t, b, 3), keys)["value"]); n != len(keys) {
				t.Errorf("the backend holds %d values after snapshots, want %d", n, len(keys))
			}
		})
	}
}

// TestTTLConfigErrors checks the validation of the cleanup options.
func TestTTLConfigErrors(t *testing.T) {
	b := newBackend(t)
	for _, c := range []struct {
		cfg  TTLConfig
		want string
	}{
		{TTLConfig{TTL: time.Second, CleanupSize: -1}, "CleanupSize -1"},
		{TTLConfig{TTL: time.Second, SweepRows: -2}, "SweepRows -2"},
		{TTLConfig{TTL: time.Second, DisableCleanupInBackground: true, CleanupSize: 3}, "DisableCleanupInBackground"},
		{TTLConfig{TTL: time.Second, DisableCleanupInBackground: true, CleanupEveryRecord: true}, "DisableCleanupInBackground"},
	} {
		_, err := Value(b, ValueDescriptor[int]{Name: "v", TTL: &c.cfg})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"v"`) {
			t.Errorf("%+v: error %v, want one naming the state and %q", c.cfg, err, c.want)
		}
	}
}

// TestTTLCleanupIsolation checks that background cleanup keeps snapshot
// isolation, under the race detector: random writes, reads and clock
// moves run on states with a time to live (with small shards, so that
// cleanup copies and splits them), each access a cleanup step, while up
// to two snapshots are written on other goroutines. Each snapshot must
// restore to exactly what a snapshot written at once, at the same
// moment, holds; and the live state must read as a model of the writes
// says. The clock is a plain variable: a snapshot's writer that read it
// would be a data race.
func TestTTLCleanupIsolation(t *testing.T) {
	t.Run("heap", func(t *testing.T) { testTTLCleanupIsolation(t) })
	t.Run("pebble", func(t *testing.T) { testTTLCleanupIsolation(t, pebbleBackend(t)) })
}

type stampedInt struct {
	v  int
	ts int64
}

func testTTLCleanupIsolation(t *testing.T, opts ...BackendOption) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 2))
	const ttlMs = 20
	var now int64
	b := newBackend(t, append(slices.Clone(opts), WithProcessingTime(func() int64 { return now }), WithShardSize(4))...)
	s := registerTTL(t, b, func(name string) *TTLConfig {
		c := &TTLConfig{TTL: ttlMs * time.Millisecond, SweepRows: 1 + r.IntN(8), CleanupSize: 1 + r.IntN(4)}
		c.CleanupFullSnapshot = name != "value"
		c.CleanupEveryRecord = name == "list"
		return c
	})
	keys := ttlKeys(60)

	// The model: what was written, with its time.
	value := map[string]stampedInt{}
	list := map[string][]stampedInt{}
	mp := map[string]map[string]stampedInt{}
	sum := map[string]stampedInt{}
	live := func(e stampedInt) bool { return now-e.ts < ttlMs }

	step := func() {
		k := keys[r.IntN(len(keys))]
		b.SetCurrentKey(k)
		switch r.IntN(10) {
		case 0:
			now += int64(r.IntN(4))
		case 1:
			v := r.IntN(100)
			s.value.Update(v)
			value[k] = stampedInt{v, now}
		case 2:
			s.value.Clear()
			delete(value, k)
		case 3:
			v := r.IntN(100)
			s.list.Add(v)
			list[k] = append(slices.Clone(list[k]), stampedInt{v, now})
		case 4:
			s.list.Get()
		case 5:
			uk, v := fmt.Sprint(r.IntN(4)), r.IntN(100)
			s.mp.Put(uk, v)
			if mp[k] == nil {
				mp[k] = map[string]stampedInt{}
			}
			mp[k][uk] = stampedInt{v, now}
		case 6:
			uk := fmt.Sprint(r.IntN(4))
			s.mp.Remove(uk)
			delete(mp[k], uk)
		case 7:
			v := r.IntN(100)
			s.sum.Add(v)
			if e, ok := sum[k]; ok && live(e) {
				v += e.v
			}
			sum[k] = stampedInt{v, now}
		case 8:
			s.sum.Get()
		case 9:
			s.value.Value()
		}
	}

	type pending struct {
		snap *KeyedSnapshot
		want map[string][]string
		done chan []byte
	}
	var ps []*pending
	finish := func(p *pending) {
		blob := <-p.done
		p.snap.Release()
		if blob == nil {
			t.Fatalf("seed %d: snapshot %d failed", seed, p.snap.CheckpointID())
		}
		if got := stored(t, blob, keys); !equalStored(got, p.want) {
			t.Fatalf("seed %d: snapshot %d, written while cleanup ran, holds\n%v\nwant, as written at once,\n%v", seed, p.snap.CheckpointID(), got, p.want)
		}
	}
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	for round := range rounds {
		for range r.IntN(300) {
			step()
		}
		want := stored(t, snapshotBlob(t, b, int64(2*round)), keys)
		p := &pending{snap: b.Snapshot(int64(2*round + 1)), want: want, done: make(chan []byte, 1)}
		ps = append(ps, p)
		writeAsync(p.snap, p.done)
		for range r.IntN(300) {
			step()
		}
		if len(ps) == 2 || r.IntN(2) == 0 {
			i := r.IntN(len(ps))
			finish(ps[i])
			ps = slices.Delete(ps, i, i+1)
		}
	}
	for _, p := range ps {
		finish(p)
	}

	// The live state reads as the model's live values.
	for _, k := range keys {
		b.SetCurrentKey(k)
		v, ok := s.value.Value()
		if e, want := value[k]; ok != (want && live(e)) || ok && v != e.v {
			t.Fatalf("seed %d: value of %s = %d, %v; model %v", seed, k, v, ok, e)
		}
		var wl []int
		for _, e := range list[k] {
			if live(e) {
				wl = append(wl, e.v)
			}
		}
		if got := s.list.Get(); !slices.Equal(got, wl) {
			t.Fatalf("seed %d: list of %s = %v, want %v", seed, k, got, wl)
		}
		for uk, e := range mp[k] {
			if v, ok := s.mp.Get(uk); ok != live(e) || ok && v != e.v {
				t.Fatalf("seed %d: map of %s at %s = %d, %v; model %v", seed, k, uk, v, ok, e)
			}
		}
		e, had := sum[k]
		if v, ok := s.sum.Get(); ok != (had && live(e)) || ok && v != e.v {
			t.Fatalf("seed %d: sum of %s = %d, %v; model %v", seed, k, v, ok, e)
		}
	}
}

func equalStored(a, b map[string][]string) bool {
	for _, name := range []string{"value", "list", "map", "sum"} {
		if !slices.Equal(a[name], b[name]) {
			return false
		}
	}
	return true
}
