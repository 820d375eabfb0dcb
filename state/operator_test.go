package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
)

type offset struct {
	Partition int32
	Offset    int64
}

func opSnapshot(t *testing.T, ob *OperatorBackend) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := ob.Snapshot(1).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readers(blobs ...[]byte) []io.Reader {
	rs := make([]io.Reader, len(blobs))
	for i, b := range blobs {
		rs[i] = bytes.NewReader(b)
	}
	return rs
}

// oldSubtask returns the operator snapshot of an old subtask holding the
// given offsets (split state) and a union state naming the subtask.
func oldSubtask(t *testing.T, name string, offsets ...offset) []byte {
	ob := NewOperatorBackend()
	split := must(OperatorList(ob, ListDescriptor[offset]{Name: "offsets"}, SplitDistribute))
	union := must(OperatorList(ob, ListDescriptor[string]{Name: "seen"}, Union))
	split.AddAll(offsets)
	union.Add(name)
	return opSnapshot(t, ob)
}

func TestOperatorStateRedistribution(t *testing.T) {
	var offs []offset
	for p := range int32(7) {
		offs = append(offs, offset{p, int64(p) * 100})
	}
	old := [][]byte{oldSubtask(t, "a", offs[:4]...), oldSubtask(t, "b", offs[4:]...)}
	for _, tc := range []struct {
		parallelism int
		sizes       []int
	}{{1, []int{7}}, {2, []int{4, 3}}, {3, []int{3, 2, 2}}, {7, []int{1, 1, 1, 1, 1, 1, 1}}, {9, []int{1, 1, 1, 1, 1, 1, 1, 0, 0}}} {
		var got []offset
		for i := range tc.parallelism {
			ob := NewOperatorBackend()
			if err := ob.Restore(tc.parallelism, i, readers(old...)...); err != nil {
				t.Fatal(err)
			}
			split := must(OperatorList(ob, ListDescriptor[offset]{Name: "offsets"}, SplitDistribute))
			union := must(OperatorList(ob, ListDescriptor[string]{Name: "seen"}, Union))
			if len(split.Get()) != tc.sizes[i] {
				t.Errorf("p=%d subtask %d: %d offsets, want %d", tc.parallelism, i, len(split.Get()), tc.sizes[i])
			}
			got = append(got, split.Get()...)
			if u := union.Get(); !slices.Equal(u, []string{"a", "b"}) {
				t.Errorf("p=%d subtask %d: union %v", tc.parallelism, i, u)
			}
		}
		if !slices.Equal(got, offs) {
			t.Errorf("p=%d: offsets %v, want %v", tc.parallelism, got, offs)
		}
	}
}

func TestOperatorStateErrors(t *testing.T) {
	blob := oldSubtask(t, "a", offset{1, 2})
	ob := NewOperatorBackend()
	if err := ob.Restore(1, 0, readers(blob)...); err != nil {
		t.Fatal(err)
	}
	if _, err := OperatorList(ob, ListDescriptor[offset]{Name: "offsets"}, Union); err == nil {
		t.Fatal("registered a split-distributed state as union")
	}
	if _, err := OperatorList(ob, ListDescriptor[bool]{Name: "offsets"}, SplitDistribute); err == nil {
		t.Fatal("decoded offsets as bools")
	}
	if err := ob.Restore(1, 0, readers(blob)...); err == nil {
		t.Fatal("restored into a backend with state")
	}
	if _, err := OperatorList(NewOperatorBackend(), ListDescriptor[int]{Name: "x"}, 0); err == nil {
		t.Fatal("registered with no redistribution mode")
	}
	for i := range blob {
		bad := bytes.Clone(blob)
		bad[i] ^= 0x20
		if err := NewOperatorBackend().Restore(1, 0, readers(bad)...); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
	for n := range len(blob) {
		if err := NewOperatorBackend().Restore(1, 0, readers(blob[:n])...); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	// A keyed snapshot is not an operator snapshot.
	h, _ := filled(t, 1, 10, KeyGroupRange{0, 127})
	if err := NewOperatorBackend().Restore(1, 0, readers(serialize(t, h.b, 1))...); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("restored a keyed snapshot as operator state: %v", err)
	}
}

// TestOperatorSnapshotIsolation serializes while the owner keeps
// modifying, under the race detector.
func TestOperatorSnapshotIsolation(t *testing.T) {
	ob := NewOperatorBackend()
	l := must(OperatorList(ob, ListDescriptor[string]{Name: "l"}, SplitDistribute))
	var want [][]string
	var snaps []*OperatorSnapshot
	for i := range 50 {
		for j := range 20 {
			l.Add(fmt.Sprint(i, j))
		}
		if i%7 == 0 {
			l.Update([]string{"reset"})
		}
		want = append(want, l.Get())
		snaps = append(snaps, ob.Snapshot(int64(i)))
	}
	done := make(chan [][]byte)
	go func() {
		var out [][]byte
		for _, s := range snaps {
			var buf bytes.Buffer
			if _, err := s.WriteTo(&buf); err != nil {
				panic(err)
			}
			out = append(out, buf.Bytes())
		}
		done <- out
	}()
	for i := range 5000 {
		l.Add(fmt.Sprint("late", i))
		if i%500 == 0 {
			l.Clear()
		}
	}
	for i, blob := range <-done {
		nb := NewOperatorBackend()
		if err := nb.Restore(1, 0, readers(blob)...); err != nil {
			t.Fatal(err)
		}
		if got := must(OperatorList(nb, ListDescriptor[string]{Name: "l"}, SplitDistribute)).Get(); !slices.Equal(got, want[i]) {
			t.Fatalf("snapshot %d: %d elements, want %d", i, len(got), len(want[i]))
		}
	}
}
