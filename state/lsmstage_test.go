package state

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// stagedRows counts the rows of placeholders in b's store.
func stagedRows(t *testing.T, b *KeyedBackend[string]) int {
	t.Helper()
	return countRows(t, b.lsm.db, &pebble.IterOptions{LowerBound: []byte{stagePrefix}, UpperBound: []byte{stagePrefix + 1}})
}

// checkSnapshotsBeforeRegistration checks that snapshots of b, whose
// states are not registered, in weir's format and natively, restore to
// want (the native one into Pebble and into the heap).
func checkSnapshotsBeforeRegistration(t *testing.T, b *KeyedBackend[string], want *model) {
	t.Helper()
	all := b.KeyGroups()
	if err := restored(t, all, serialize(t, b, 100)).check(want); err != nil {
		t.Fatalf("snapshot in weir's format: %v", err)
	}
	s, err := b.NativeSnapshot(101)
	if err != nil {
		t.Fatal(err)
	}
	nblob, ndir := nativeCopy(t, s)
	for _, opts := range [][]BackendOption{{pebbleBackend(t)}, nil} {
		rb := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, opts...)))
		if err := rb.RestoreNative(bytes.NewReader(nblob), copyOf(t, ndir), all); err != nil {
			t.Fatal(err)
		}
		if err := registerAll(t, rb).check(want); err != nil {
			t.Fatalf("native snapshot into %s: %v", rb.Storage(), err)
		}
	}
}

// TestPebbleStagedRestore restores a snapshot into a Pebble backend
// before its states are registered: the entries wait in the store, not
// in memory; a snapshot taken then (in weir's format and natively) holds
// them; registration loads them and removes them from the stage.
func TestPebbleStagedRestore(t *testing.T) {
	all := KeyGroupRange{0, 127}
	h, m := filled(t, 21, 5000, all)
	blob := serialize(t, h.b, 3)

	b := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, pebbleBackend(t))))
	if err := b.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	for _, st := range b.states {
		raw, ok := st.(*rawState)
		if !ok || raw.stage == nil || raw.groups != nil {
			t.Fatalf("%v: not a placeholder staged in the store", st.info())
		}
	}
	if n := stagedRows(t, b); n == 0 {
		t.Fatal("nothing staged in the store")
	}

	checkSnapshotsBeforeRegistration(t, b, m)

	r := registerAll(t, b)
	if err := r.check(m); err != nil {
		t.Fatal(err)
	}
	if n := stagedRows(t, b); n != 0 {
		t.Fatalf("%d staged rows left after registration", n)
	}
}

// TestPebbleStagedSplit stages a key group whose entries of one state
// exceed stageChunk: they are staged in several rows, split at entries,
// and restore whole.
func TestPebbleStagedSplit(t *testing.T) {
	all := KeyGroupRange{0, 127}
	src := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all)))
	v := must(Value(src, ValueDescriptor[string]{Name: "big"}))
	// Keys of one key group, 300 KiB each: five rows of one segment.
	hash := src.KeyHasher()
	var keys []string
	for i := 0; len(keys) < 9; i++ {
		k := "k" + strconv.Itoa(i)
		if KeyGroupFor(hash(k), 128) == 17 {
			keys = append(keys, k)
		}
	}
	val := func(k string) string { return strings.Repeat(k, 300<<10/len(k)) }
	for _, k := range keys {
		src.SetCurrentKey(k)
		v.Update(val(k))
	}
	blob := serialize(t, src, 1)

	b := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, pebbleBackend(t))))
	if err := b.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	if n, want := stagedRows(t, b), 9*300<<10/stageChunk+1; n < want {
		t.Fatalf("%d staged rows for %d bytes, want at least %d", n, 9*300<<10, want)
	}
	got := must(Value(b, ValueDescriptor[string]{Name: "big"}))
	for _, k := range keys {
		b.SetCurrentKey(k)
		if s, ok := got.Value(); !ok || s != val(k) {
			t.Fatalf("key %s: %d bytes (%v), want %d", k, len(s), ok, len(val(k)))
		}
	}
}

// TestPebbleRestoreBeyondMemory restores a snapshot of 64 MiB of entries
// into a Pebble backend of 8 MiB: the live heap after the restore, before
// and after registration, stays far below the state's size.
func TestPebbleRestoreBeyondMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 64 MiB snapshot")
	}
	all := KeyGroupRange{0, 127}
	path := filepath.Join(t.TempDir(), "snapshot")
	const keys, size = 64 << 10, 1 << 10
	func() {
		src := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all)))
		v := must(Value(src, ValueDescriptor[string]{Name: "v"}))
		for i := range keys {
			k := "key-" + strconv.Itoa(i)
			src.SetCurrentKey(k)
			v.Update(strings.Repeat("x", size-len(k)) + k)
		}
		f := must(os.Create(path))
		snap := src.Snapshot(1)
		if _, err := snap.WriteTo(f); err != nil {
			t.Fatal(err)
		}
		snap.Release()
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
	}()

	live := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := live()
	b := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, pebbleBackend(t))))
	f := must(os.Open(path))
	defer f.Close()
	if err := b.Restore(f); err != nil {
		t.Fatal(err)
	}
	const bound = keys * size / 4
	if grew := live() - before; grew > bound {
		t.Fatalf("the live heap grew by %d bytes restoring %d bytes of entries (bound %d)", grew, keys*size, bound)
	}
	v := must(Value(b, ValueDescriptor[string]{Name: "v"}))
	if grew := live() - before; grew > bound {
		t.Fatalf("the live heap grew by %d bytes registering %d bytes of entries (bound %d)", grew, keys*size, bound)
	}
	for i := 0; i < keys; i += 997 {
		k := "key-" + strconv.Itoa(i)
		b.SetCurrentKey(k)
		if s, ok := v.Value(); !ok || s != strings.Repeat("x", size-len(k))+k {
			t.Fatalf("key %s: %d bytes, %v", k, len(s), ok)
		}
	}
	runtime.KeepAlive(b)
}

// TestAdoptedSnapshotBeforeRegistration snapshots a Pebble backend that
// adopted a native snapshot (and, in a rescale, loaded a second one)
// before its states are registered: the adopted rows are in the store
// under the placeholders' ids, and both kinds of snapshot must hold them.
func TestAdoptedSnapshotBeforeRegistration(t *testing.T) {
	all := KeyGroupRange{0, 127}
	native := func(h *handles, id int64) ([]byte, string) {
		s, err := h.b.NativeSnapshot(id)
		if err != nil {
			t.Fatal(err)
		}
		return nativeCopy(t, s)
	}
	ha, ma := filled(t, 31, 3000, RangeForSubtask(128, 2, 0), pebbleBackend(t))
	hb, mb := filled(t, 32, 3000, RangeForSubtask(128, 2, 1), pebbleBackend(t))
	blobA, dirA := native(ha, 1)
	blobB, dirB := native(hb, 1)
	for _, tc := range []struct {
		name string
		want *model
		load func(b *KeyedBackend[string]) error
	}{
		{"adopted", ma, func(b *KeyedBackend[string]) error {
			return b.RestoreNative(bytes.NewReader(blobA), copyOf(t, dirA), all)
		}},
		{"adopted-and-loaded", union(ma, mb), func(b *KeyedBackend[string]) error {
			if err := b.RestoreNative(bytes.NewReader(blobA), copyOf(t, dirA), all); err != nil {
				return err
			}
			return b.RestoreNative(bytes.NewReader(blobB), copyOf(t, dirB), all)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, pebbleBackend(t))))
			if err := tc.load(b); err != nil {
				t.Fatal(err)
			}
			checkSnapshotsBeforeRegistration(t, b, tc.want)
			if err := registerAll(t, b).check(tc.want); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPebbleRestoreCorruption damages a snapshot at random places (a
// flipped byte, a truncation, a byte added at its end) and restores each
// into a fresh Pebble backend, which loads blocks as they verify: the
// restore must still fail with ErrCorrupt, whatever it loaded first.
func TestPebbleRestoreCorruption(t *testing.T) {
	seed := testSeed(t)
	r := newTestRand(seed)
	all := KeyGroupRange{0, 127}
	h, _ := filled(t, 41, 2000, all)
	blob := serialize(t, h.b, 1)
	restore := func(what string, bad []byte) {
		t.Helper()
		b := must(NewKeyedBackend[string](nil, 128, all, pebbleBackend(t)))
		defer b.Close()
		if err := b.Restore(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("seed %d: %s: %v, want ErrCorrupt", seed, what, err)
		}
	}
	for range 200 {
		i := r.IntN(len(blob))
		bad := bytes.Clone(blob)
		bad[i] ^= byte(1 + r.IntN(255))
		restore(fmt.Sprintf("byte %d of %d flipped", i, len(blob)), bad)
	}
	for range 100 {
		n := r.IntN(len(blob))
		restore(fmt.Sprintf("truncated to %d of %d bytes", n, len(blob)), blob[:n])
	}
	restore("a byte after the end", append(bytes.Clone(blob), 0))
}
