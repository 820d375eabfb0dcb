package state

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nativeCopy writes a native snapshot as checkpoint storage would: its
// blob, and its files copied into a new directory, as a restore
// downloads them. It releases the snapshot.
func nativeCopy(t *testing.T, s *NativeSnapshot) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range s.Files {
		src, err := os.Open(filepath.Join(s.Dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := io.Copy(dst, src); err != nil || n != f.Size {
			t.Fatalf("copying %s: %d of %d bytes: %v", f.Name, n, f.Size, err)
		}
		src.Close()
		if err := dst.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s.Release()
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("the snapshot's directory %s is still there after Release (%v)", s.Dir, err)
	}
	return buf.Bytes(), dir
}

// TestNativeSnapshot restores a native snapshot of a Pebble backend,
// taken while the backend goes on changing, into an empty Pebble backend
// (which adopts its files), a heap backend, and, after a rescale, into
// backends of other key group ranges: the state must be the state when
// the snapshot was taken, in every key group the restoring backend owns
// and no other.
func TestNativeSnapshot(t *testing.T) {
	all := KeyGroupRange{0, 127}
	h, m := filled(t, 7, 4000, all, pebbleBackend(t))
	snap, err := h.b.NativeSnapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	want := m.clone()
	// Changes after the snapshot must not reach it.
	r := newTestRand(9)
	for range 2000 {
		h.step(r, m, uniformKeys)
	}
	blob, dir := nativeCopy(t, snap)
	if _, err := ReadKeyedSnapshotInfo(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}

	// A restore as from a snapshot in weir's format is refused: the
	// blob alone does not hold the state.
	heap := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all)))
	if err := heap.Restore(bytes.NewReader(blob)); err == nil {
		t.Fatal("restored a native snapshot's blob without its files")
	}

	for _, tc := range []struct {
		name string
		opts []BackendOption
		kgs  KeyGroupRange
	}{
		{"pebble-adopts", []BackendOption{pebbleBackend(t)}, all},
		{"heap", nil, all},
		{"pebble-rescaled-0-of-3", []BackendOption{pebbleBackend(t)}, RangeForSubtask(128, 3, 0)},
		{"pebble-rescaled-2-of-3", []BackendOption{pebbleBackend(t)}, RangeForSubtask(128, 3, 2)},
		{"heap-rescaled-1-of-3", nil, RangeForSubtask(128, 3, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, tc.kgs, tc.opts...)))
			if err := b.RestoreNative(bytes.NewReader(blob), copyOf(t, dir), tc.kgs); err != nil {
				t.Fatal(err)
			}
			if err := registerAll(t, b).check(want.restrict(b.KeyHasher(), 128, tc.kgs)); err != nil {
				t.Fatal(err)
			}
			// The restored backend snapshots as any other, natively too.
			if b.Storage() == "pebble" {
				s2, err := b.NativeSnapshot(2)
				if err != nil {
					t.Fatal(err)
				}
				blob2, dir2 := nativeCopy(t, s2)
				rb := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, tc.kgs)))
				if err := rb.RestoreNative(bytes.NewReader(blob2), dir2, tc.kgs); err != nil {
					t.Fatal(err)
				}
				if err := registerAll(t, rb).check(want.restrict(b.KeyHasher(), 128, tc.kgs)); err != nil {
					t.Fatalf("snapshot of the restored backend: %v", err)
				}
			}
		})
	}

	// Two subtasks' native snapshots into one Pebble backend: it adopts
	// the first and loads the second.
	t.Run("pebble-rescaled-2-to-1", func(t *testing.T) {
		ha, ma := filled(t, 10, 3000, RangeForSubtask(128, 2, 0), pebbleBackend(t))
		hb, mb := filled(t, 11, 3000, RangeForSubtask(128, 2, 1), pebbleBackend(t))
		sa, err := ha.b.NativeSnapshot(3)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := hb.b.NativeSnapshot(3)
		if err != nil {
			t.Fatal(err)
		}
		blobA, dirA := nativeCopy(t, sa)
		blobB, dirB := nativeCopy(t, sb)
		b := closeAtEnd(t, must(NewKeyedBackend[string](nil, 128, all, pebbleBackend(t))))
		if err := b.RestoreNative(bytes.NewReader(blobA), dirA, all); err != nil {
			t.Fatal(err)
		}
		if err := b.RestoreNative(bytes.NewReader(blobB), dirB, all); err != nil {
			t.Fatal(err)
		}
		if err := registerAll(t, b).check(union(ma, mb)); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNativeSnapshotsShareFiles checks what makes checkpoints of the
// Pebble backend incremental: after a small change, most of a native
// snapshot's bytes are in immutable files the previous one had.
func TestNativeSnapshotsShareFiles(t *testing.T) {
	all := KeyGroupRange{0, 127}
	// Timers stay on the heap here: firing a timer deletes its row, and a
	// file dense with such deletions is soon compacted, rewriting the
	// store's files between the two snapshots.
	h, m := filled(t, 12, 20000, all, WithPebble(PebbleOptions{Dir: t.TempDir(), Memory: 8 << 20, HeapTimers: true}))
	s1, err := h.b.NativeSnapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]int64{}
	for _, f := range s1.Files {
		if f.Immutable {
			first[f.Name] = f.Size
		}
	}
	s1.Release()
	r := newTestRand(13)
	for range 20 {
		h.step(r, m, uniformKeys)
	}
	s2, err := h.b.NativeSnapshot(2)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Release()
	var total, fresh int64
	for _, f := range s2.Files {
		total += f.Size
		if size, ok := first[f.Name]; !ok || size != f.Size || !f.Immutable {
			fresh += f.Size
		}
	}
	t.Logf("second snapshot: %d files, %d bytes, %d of them not in the first", len(s2.Files), total, fresh)
	if fresh*2 > total {
		t.Fatalf("after 20 changes to %d entries, %d of the second snapshot's %d bytes are new: it is not incremental", m.entries(), fresh, total)
	}
}

func copyOf(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestNativeSnapshotManifestBounded takes a native snapshot after every
// change, as a job checkpointing every few milliseconds does: each one
// flushes the store, which adds an edit to its MANIFEST, and copies the
// MANIFEST whole. The store must start a new MANIFEST now and then, so
// that a snapshot's copy stays bounded instead of growing with every
// checkpoint taken.
func TestNativeSnapshotManifestBounded(t *testing.T) {
	const snapshots, bound = 500, 24 << 10
	b := closeAtEnd(t, must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, pebbleBackend(t))))
	v := must(Value(b, ValueDescriptor[int64]{Name: "sum"}))
	largest := int64(0)
	for i := range int64(snapshots) {
		b.SetCurrentKey(i % 6)
		v.Update(i)
		s, err := b.NativeSnapshot(i + 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range s.Files {
			if strings.HasPrefix(f.Name, "MANIFEST") {
				largest = max(largest, f.Size)
			}
		}
		s.Release()
	}
	if largest > bound {
		t.Fatalf("a snapshot's MANIFEST reached %d bytes over %d snapshots, want at most %d", largest, snapshots, bound)
	}
}

// TestNativeSnapshotIdle takes many native snapshots of a store that no
// write reaches between them, as the checkpoints of an idle subtask do:
// none may flush the store (Pebble would rotate its empty memtable and
// add an edit to its MANIFEST each time), and the state must still be
// whole in every one. A write after them is flushed by the next.
func TestNativeSnapshotIdle(t *testing.T) {
	const idle = 200
	b := closeAtEnd(t, must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, pebbleBackend(t))))
	v := must(Value(b, ValueDescriptor[int64]{Name: "sum"}))
	for k := range int64(100) {
		b.SetCurrentKey(k)
		v.Update(k)
	}
	snapshot := func(id int64) {
		t.Helper()
		s, err := b.NativeSnapshot(id)
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
	}
	snapshot(1)
	flushes, manifest := b.lsm.db.Metrics().Flush.Count, manifestSize(t, b.lsm.dir)
	for id := range int64(idle) {
		snapshot(id + 2)
	}
	if n := b.lsm.db.Metrics().Flush.Count - flushes; n != 0 {
		t.Errorf("%d idle snapshots flushed the store %d times, want 0", idle, n)
	}
	if m := manifestSize(t, b.lsm.dir); m != manifest {
		t.Errorf("%d idle snapshots grew the MANIFEST from %d to %d bytes", idle, manifest, m)
	}
	// The last idle snapshot holds the state: restored, every key reads back.
	s, err := b.NativeSnapshot(idle + 2)
	if err != nil {
		t.Fatal(err)
	}
	blob, dir := nativeCopy(t, s)
	r := closeAtEnd(t, must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, pebbleBackend(t))))
	if err := r.RestoreNative(bytes.NewReader(blob), dir, KeyGroupRange{0, 127}); err != nil {
		t.Fatal(err)
	}
	rv := must(Value(r, ValueDescriptor[int64]{Name: "sum"}))
	for k := range int64(100) {
		r.SetCurrentKey(k)
		if got, ok := rv.Value(); !ok || got != k {
			t.Fatalf("key %d restored as %d (%v), want %d", k, got, ok, k)
		}
	}
	// A write after the idle snapshots is flushed by the next one.
	flushes = b.lsm.db.Metrics().Flush.Count
	b.SetCurrentKey(1000)
	v.Update(7)
	snapshot(idle + 3)
	if n := b.lsm.db.Metrics().Flush.Count - flushes; n == 0 {
		t.Error("the snapshot after a write did not flush the store")
	}
}

// manifestSize returns the size of the store's current MANIFEST files.
func manifestSize(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "MANIFEST") {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}
