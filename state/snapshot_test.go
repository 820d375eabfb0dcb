package state

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// serialize takes a snapshot of b, writes it and releases it.
func serialize(t testing.TB, b *KeyedBackend[string], id int64) []byte {
	t.Helper()
	snap := b.Snapshot(id)
	defer snap.Release()
	var buf bytes.Buffer
	n, err := snap.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if st := snap.Stats(); st == nil || st.Bytes != n || n != int64(buf.Len()) {
		t.Fatalf("stats %+v for %d bytes written", st, buf.Len())
	}
	return buf.Bytes()
}

// filled returns a backend for kgs filled by n random operations, and its
// model.
func filled(t testing.TB, seed uint64, n int, kgs KeyGroupRange, opts ...BackendOption) (*handles, *model) {
	t.Helper()
	b, err := NewKeyedBackend[string](nil, 128, kgs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, b)
	h := registerAll(t, b)
	m := newModel()
	r := rand.New(rand.NewPCG(seed, 0))
	hash := b.KeyHasher()
	keys := func(r *rand.Rand) string {
		for {
			k := uniformKeys(r)
			if kgs.Contains(KeyGroupFor(hash(k), 128)) {
				return k
			}
		}
	}
	for range n {
		h.step(r, m, keys)
	}
	return h, m
}

func restored(t testing.TB, kgs KeyGroupRange, blobs ...[]byte) *handles {
	t.Helper()
	return restoredInto(t, kgs, nil, blobs...)
}

// restoredInto is restored into a backend made with opts.
func restoredInto(t testing.TB, kgs KeyGroupRange, opts []BackendOption, blobs ...[]byte) *handles {
	t.Helper()
	b, err := NewKeyedBackend[string](nil, 128, kgs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, b)
	for _, blob := range blobs {
		if err := b.Restore(bytes.NewReader(blob)); err != nil {
			t.Fatal(err)
		}
	}
	return registerAll(t, b)
}

func TestSnapshotRoundTrip(t *testing.T) {
	all := KeyGroupRange{0, 127}
	h, m := filled(t, 1, 5000, all, WithShardSize(16))
	blob := serialize(t, h.b, 7)
	info, err := ReadKeyedSnapshotInfo(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	if info.CheckpointID != 7 || info.MaxParallelism != 128 || info.KeyGroups != all || len(info.States) != 8 {
		t.Fatalf("info %+v", info)
	}
	t.Logf("%d entries in %d bytes", m.entries(), len(blob))

	// Restore before registering (the entries wait as bytes) ...
	r := restored(t, all, blob)
	if err := r.check(m); err != nil {
		t.Fatal(err)
	}
	// ... and after registering.
	b2, _ := NewKeyedBackend[string](nil, 128, all)
	r2 := registerAll(t, b2)
	if err := b2.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	if err := r2.check(m); err != nil {
		t.Fatal(err)
	}
	// The original is unchanged by snapshotting and still equal.
	if err := h.check(m); err != nil {
		t.Fatal(err)
	}
	// A restored backend snapshots to an equivalent blob, also for states
	// still waiting for registration.
	b3, _ := NewKeyedBackend[string](nil, 128, all)
	if err := b3.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	again := serialize(t, b3, 8)
	if err := restored(t, all, again).check(m); err != nil {
		t.Fatalf("snapshot of unregistered restored state: %v", err)
	}
}

func TestRestoreSubset(t *testing.T) {
	all := KeyGroupRange{0, 127}
	h, m := filled(t, 2, 3000, all)
	blob := serialize(t, h.b, 1)
	sub := KeyGroupRange{10, 40}
	b, _ := NewKeyedBackend[string](nil, 128, all)
	if err := b.RestoreKeyGroups(bytes.NewReader(blob), sub); err != nil {
		t.Fatal(err)
	}
	r := registerAll(t, b)
	if err := r.check(m.restrict(b.KeyHasher(), 128, sub)); err != nil {
		t.Fatal(err)
	}
	// The rest can be restored afterwards, but no key group twice.
	if err := b.RestoreKeyGroups(bytes.NewReader(blob), KeyGroupRange{41, 127}); err != nil {
		t.Fatal(err)
	}
	if err := b.RestoreKeyGroups(bytes.NewReader(blob), KeyGroupRange{0, 10}); err == nil {
		t.Fatal("restored key group 10 twice")
	}
}

// TestRescale scales 2 subtasks to 1 and to 3, and checks that every new
// subtask holds exactly its part of the old state.
// TestRescale restores the snapshots of two subtasks into one and into
// three, on each backend: from the heap into Pebble and from Pebble into
// the heap.
func TestRescale(t *testing.T) {
	t.Run("heap-to-pebble", func(t *testing.T) { testRescale(t, nil, []BackendOption{pebbleBackend(t)}) })
	t.Run("pebble-to-heap", func(t *testing.T) { testRescale(t, []BackendOption{pebbleBackend(t)}, nil) })
	t.Run("pebble-to-pebble", func(t *testing.T) {
		testRescale(t, []BackendOption{pebbleBackend(t)}, []BackendOption{pebbleBackend(t)})
	})
	t.Run("heap-to-heap", func(t *testing.T) { testRescale(t, nil, nil) })
}

func testRescale(t *testing.T, from, to []BackendOption) {
	a, ma := filled(t, 3, 3000, RangeForSubtask(128, 2, 0), from...)
	b, mb := filled(t, 4, 3000, RangeForSubtask(128, 2, 1), from...)
	blobA, blobB := serialize(t, a.b, 5), serialize(t, b.b, 5)

	union := union(ma, mb)

	one := restoredInto(t, KeyGroupRange{0, 127}, to, blobA, blobB)
	if err := one.check(union); err != nil {
		t.Fatalf("2 -> 1: %v", err)
	}
	for i := range 3 {
		kgs := RangeForSubtask(128, 3, i)
		r := restoredInto(t, kgs, to, blobA, blobB)
		if err := r.check(union.restrict(r.b.KeyHasher(), 128, kgs)); err != nil {
			t.Fatalf("2 -> 3, subtask %d: %v", i, err)
		}
		snap := r.b.Snapshot(9)
		var buf bytes.Buffer
		if _, err := snap.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		snap.Release()
		if got, want := snap.Stats().Entries, union.restrict(r.b.KeyHasher(), 128, kgs).entries(); got != want {
			t.Fatalf("2 -> 3, subtask %d: %d entries, want %d", i, got, want)
		}
	}
}

func TestRestoreMismatch(t *testing.T) {
	h, _ := filled(t, 5, 500, KeyGroupRange{0, 127})
	blob := serialize(t, h.b, 1)

	b256, _ := NewKeyedBackend[string](nil, 256, KeyGroupRange{0, 255})
	if err := b256.Restore(bytes.NewReader(blob)); err == nil {
		t.Fatal("restored into a different maxParallelism")
	}
	// A state registered as another kind before the restore.
	b, _ := NewKeyedBackend[string](nil, 128, KeyGroupRange{0, 127})
	must(List(b, ListDescriptor[int64]{Name: "value"}))
	if err := b.Restore(bytes.NewReader(blob)); err == nil {
		t.Fatal("restored a value state into a list state")
	}
	// Registered as another kind after the restore.
	b, _ = NewKeyedBackend[string](nil, 128, KeyGroupRange{0, 127})
	if err := b.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	if _, err := List(b, ListDescriptor[int64]{Name: "value"}); err == nil {
		t.Fatal("registered a restored value state as a list")
	}
	// Registered with a value codec that cannot read the entries.
	if _, err := Value(b, ValueDescriptor[bool]{Name: "value"}); err == nil {
		t.Fatal("decoded int64 values as bools")
	}
	// Keys that hash elsewhere: a different key hash function.
	b, _ = NewKeyedBackend[string](nil, 128, KeyGroupRange{0, 127}, WithKeyHasher(func(k string) uint32 { return uint32(len(k)) }))
	if err := b.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	if _, err := Value(b, ValueDescriptor[int64]{Name: "value"}); err == nil || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("restored keys into the wrong key groups: %v", err)
	}
}

// TestCorruption flips every byte of a snapshot in turn, truncates it at
// every length and adds a byte after it: each must fail to restore with
// ErrCorrupt and leave the backend empty.
func TestCorruption(t *testing.T) {
	h, m := filled(t, 6, 300, KeyGroupRange{0, 127})
	blob := serialize(t, h.b, 1)
	b, _ := NewKeyedBackend[string](nil, 128, KeyGroupRange{0, 127})
	for i := range blob {
		bad := bytes.Clone(blob)
		bad[i] ^= byte(1 + i%255)
		err := b.Restore(bytes.NewReader(bad))
		if err == nil {
			t.Fatalf("flipping byte %d of %d restored without error", i, len(blob))
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipping byte %d: error %v does not wrap ErrCorrupt", i, err)
		}
	}
	for n := range len(blob) {
		if err := b.Restore(bytes.NewReader(blob[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncation to %d bytes: %v", n, err)
		}
	}
	// A blob ends with its end section: what follows is corruption too
	// (reading to the end lets checkpoint storage's reader verify the
	// file's checksum before anything loads).
	if err := b.Restore(bytes.NewReader(append(bytes.Clone(blob), 0))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: %v, want ErrCorrupt", err)
	}
	// Nothing was loaded by the failures: the good blob restores fully.
	if err := b.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	r := registerAll(t, b)
	if err := r.check(m); err != nil {
		t.Fatal(err)
	}
}

// union is the model of two backends of disjoint key groups in one.
func union(ma, mb *model) *model {
	u := ma.clone()
	mbc := mb.clone()
	for k, v := range mbc.value {
		u.value[k] = v
	}
	for k, v := range mbc.list {
		u.list[k] = v
	}
	for k, v := range mbc.mp {
		u.mp[k] = v
	}
	for k, v := range mbc.sum {
		u.sum[k] = v
	}
	for k, v := range mbc.avg {
		u.avg[k] = v
	}
	for k, v := range mbc.vns {
		u.vns[k] = v
	}
	for k, v := range mbc.lns {
		u.lns[k] = v
	}
	for k, v := range mbc.tim {
		u.tim[k] = v
	}
	return u
}

func newTestRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }
