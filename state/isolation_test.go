package state

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized state tests (0: derived from the time)")

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return seed
}

// writeAsync writes s on a goroutine of its own, as a checkpoint's
// asynchronous part does, and sends its bytes (nil if the write failed)
// on done.
func writeAsync(s *KeyedSnapshot, done chan<- []byte) {
	go func() {
		var buf bytes.Buffer
		if _, err := s.WriteTo(&buf); err != nil {
			done <- nil
			return
		}
		done <- buf.Bytes()
	}()
}

type pendingSnap struct {
	snap *KeyedSnapshot
	want *model
	done chan []byte
}

// TestSnapshotIsolation checks the copy-on-write property under the race
// detector: while snapshots are serialized on other goroutines, the owner
// keeps modifying every kind of state, and each serialized snapshot must
// restore to exactly the state at the moment it was taken. Up to three
// snapshots are pending at once and are released in random order; small
// shards make copies and splits frequent. It runs on both backends, and
// restores every other snapshot into the other one: they write one
// format.
func TestSnapshotIsolation(t *testing.T) {
	t.Run("heap", func(t *testing.T) { testSnapshotIsolation(t, false) })
	t.Run("pebble", func(t *testing.T) { testSnapshotIsolation(t, true) })
}

// pebbleBackend returns the options of a small Pebble backend in a test
// directory.
func pebbleBackend(t testing.TB) BackendOption {
	return WithPebble(PebbleOptions{Dir: t.TempDir(), Memory: 8 << 20})
}

// closeAtEnd closes b when the test ends.
func closeAtEnd[K comparable](t testing.TB, b *KeyedBackend[K]) *KeyedBackend[K] {
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("closing the backend: %v", err)
		}
	})
	return b
}

func testSnapshotIsolation(t *testing.T, onPebble bool) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	all := KeyGroupRange{0, 127}
	backend := func(pebble bool) *KeyedBackend[string] {
		opt := WithShardSize(4)
		if pebble {
			opt = pebbleBackend(t)
		}
		b, err := NewKeyedBackend[string](nil, 128, all, opt)
		if err != nil {
			t.Fatal(err)
		}
		return closeAtEnd(t, b)
	}
	b := backend(onPebble)
	h := registerAll(t, b)
	m := newModel()

	// Skewed keys: a few hot keys take most operations.
	keys := func(r *rand.Rand) string {
		if r.IntN(2) == 0 {
			return modelKey(r.IntN(8))
		}
		return uniformKeys(r)
	}

	rounds := 300
	if testing.Short() || onPebble && raceEnabled {
		rounds = 60
	}
	var pending []*pendingSnap
	verified := 0
	finish := func(p *pendingSnap) {
		blob := <-p.done
		p.snap.Release()
		if blob == nil {
			t.Fatalf("seed %d: snapshot %d failed to serialize", seed, p.snap.CheckpointID())
		}
		rb := backend(onPebble != (verified%2 == 1))
		if err := rb.Restore(bytes.NewReader(blob)); err != nil {
			t.Fatalf("seed %d: restoring snapshot %d: %v", seed, p.snap.CheckpointID(), err)
		}
		if err := registerAll(t, rb).check(p.want); err != nil {
			t.Fatalf("seed %d: snapshot %d, restored into the %s backend, differs from the state when it was taken: %v", seed, p.snap.CheckpointID(), rb.Storage(), err)
		}
		if got, want := p.snap.Stats().Entries, p.want.entries(); got != want {
			t.Fatalf("seed %d: snapshot %d has %d entries, want %d", seed, p.snap.CheckpointID(), got, want)
		}
		verified++
	}
	for round := range rounds {
		for range r.IntN(200) {
			h.step(r, m, keys)
		}
		if len(pending) < 3 {
			p := &pendingSnap{snap: b.Snapshot(int64(round)), want: m.clone(), done: make(chan []byte, 1)}
			pending = append(pending, p)
			writeAsync(p.snap, p.done)
		}
		// Keep writing while the snapshots serialize, then finish one.
		for range r.IntN(300) {
			h.step(r, m, keys)
		}
		if len(pending) == 3 || r.IntN(3) == 0 {
			i := r.IntN(len(pending))
			finish(pending[i])
			pending = append(pending[:i], pending[i+1:]...)
		}
	}
	for _, p := range pending {
		finish(p)
	}
	if b.PendingSnapshots() != 0 {
		t.Fatalf("%d snapshots still pending", b.PendingSnapshots())
	}
	if err := h.check(m); err != nil {
		t.Fatalf("seed %d: live state: %v", seed, err)
	}
	t.Logf("verified %d snapshots; %d entries at the end", verified, m.entries())
}
