package state

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// dirNames returns the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestStoreDirLeftByKilledProcess: what a killed process leaves of a
// store (its directory, a native snapshot beside it, its lock file, no
// longer locked) is removed when the next store is created in the same
// directory; a live store and directories without a lock are not, and
// closing the backends leaves only the latter.
func TestStoreDirLeftByKilledProcess(t *testing.T) {
	parent := t.TempDir()
	stale := filepath.Join(parent, "weir-keyed-1234")
	for _, d := range []string{stale, stale + ".snapshot-7-1", filepath.Join(parent, "weir-keyed-old")} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "000001.sst"), []byte("rows"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(stale+".weir-lock", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := WithPebble(PebbleOptions{Dir: parent, Memory: 4 << 20})
	a := must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, opts))
	names := dirNames(t, parent)
	if slices.Contains(names, "weir-keyed-1234") || slices.Contains(names, "weir-keyed-1234.snapshot-7-1") || slices.Contains(names, "weir-keyed-1234.weir-lock") {
		t.Fatalf("a killed process's store is left: %v", names)
	}
	if !slices.Contains(names, "weir-keyed-old") {
		t.Fatalf("a directory without a lock was removed: %v", names)
	}
	v := must(Value(a, ValueDescriptor[int64]{Name: "v"}))
	a.SetCurrentKey(1)
	v.Update(5)

	// A second store in the same directory leaves the first alone, and
	// so does the directory of a native snapshot to restore.
	b := must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, opts))
	native, err := b.NativeDir()
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := v.Value(); !ok || got != 5 {
		t.Fatalf("the live store's value: %d, %v", got, ok)
	}
	if _, err := os.Stat(native); err != nil {
		t.Fatal(err)
	}
	if n := len(dirNames(t, parent)); n != 1+2*3 {
		t.Fatalf("%d names in the directory, want 7 (an old directory, two stores and a native snapshot's, each with a lock): %v", n, dirNames(t, parent))
	}
	for _, be := range []*KeyedBackend[int64]{a, b} {
		if err := be.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if names := dirNames(t, parent); !slices.Equal(names, []string{"weir-keyed-old"}) {
		t.Fatalf("after closing: %v", names)
	}
}
