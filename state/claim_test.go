package state

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"testing"
)

// claimBackend returns a heap backend with tiny shards holding keys
// 0..n-1 in an int64 value state, each key's value 10 times the key, the
// table of that state, and the values.
func claimBackend(t *testing.T, n int) (*KeyedBackend[int64], ValueState[int64], *stateTable[int64, int64], map[int64]int64) {
	t.Helper()
	b := must(NewKeyedBackend[int64](nil, 4, KeyGroupRange{0, 3}, WithShardSize(8)))
	v := must(Value(b, ValueDescriptor[int64]{Name: "v"}))
	want := map[int64]int64{}
	for k := range int64(n) {
		b.SetCurrentKey(k)
		v.Update(10 * k)
		want[k] = 10 * k
	}
	return b, v, b.states[0].(*stateTable[int64, int64]), want
}

// restoredValues restores blob into a fresh backend and returns its
// values.
func restoredValues(t *testing.T, blob []byte) map[int64]int64 {
	t.Helper()
	b := must(NewKeyedBackend[int64](nil, 4, KeyGroupRange{0, 3}))
	if err := b.Restore(bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	must(Value(b, ValueDescriptor[int64]{Name: "v"}))
	got := map[int64]int64{}
	shards, _ := b.states[0].(*stateTable[int64, int64]).table.capture()
	for _, sh := range shards {
		for k, v := range sh.m.all() {
			got[k] = v.v
		}
	}
	return got
}

// shardSet returns the distinct shards of st's table.
func shardSet(st *stateTable[int64, int64]) map[*shard[int64, int64]]bool {
	shards, _ := st.table.capture()
	set := map[*shard[int64, int64]]bool{}
	for _, s := range shards {
		set[s] = true
	}
	return set
}

// update sets every key in keys to -1 - key (a value no key had before).
func update(b *KeyedBackend[int64], v ValueState[int64], keys []int64) {
	for _, k := range keys {
		b.SetCurrentKey(k)
		v.Update(-1 - k)
	}
}

func writeSnap(t *testing.T, s *KeyedSnapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestClaimOwnerEncodes: writes after a snapshot and before its write
// encode the shards they touch for the snapshot and then modify them in
// place (no shard is copied); the snapshot still holds the values of its
// time.
func TestClaimOwnerEncodes(t *testing.T) {
	b, v, st, want := claimBackend(t, 400)
	before := shardSet(st)
	s := b.Snapshot(1)
	keys := []int64{0, 7, 99, 150, 151, 399}
	update(b, v, keys)
	if after := shardSet(st); !maps.Equal(before, after) {
		t.Fatalf("the writes copied shards: %d shards before, %d after, not the same", len(before), len(after))
	}
	view := s.views[0].(*tableView[int64, int64])
	encoded := 0
	for i := range view.claims {
		if view.claims[i].state.Load() == claimEncoded {
			encoded++
		}
	}
	if encoded == 0 || encoded > len(keys) {
		t.Fatalf("%d shards encoded by the owner for %d keys written", encoded, len(keys))
	}
	got := restoredValues(t, writeSnap(t, s))
	if !maps.Equal(got, want) {
		t.Fatalf("the snapshot does not hold the values of its time")
	}
	s.Release()
	for sh := range shardSet(st) {
		if sh.claim != nil {
			t.Fatal("a shard keeps a claim after its snapshot's release")
		}
	}
}

// TestClaimWriterFirst: once the snapshot is written, the first writes
// modify its shards in place; a second write of the snapshot then fails
// rather than writing values of a later time, and one with no write in
// between writes the same bytes.
func TestClaimWriterFirst(t *testing.T) {
	b, v, st, want := claimBackend(t, 400)
	s := b.Snapshot(1)
	first := writeSnap(t, s)
	if again := writeSnap(t, s); !bytes.Equal(first, again) {
		t.Fatal("a snapshot written twice with no write between differs")
	}
	before := shardSet(st)
	update(b, v, []int64{3, 200})
	if after := shardSet(st); !maps.Equal(before, after) {
		t.Fatal("writes after the snapshot was written copied shards")
	}
	if _, err := s.WriteTo(io.Discard); !errors.Is(err, errWrittenTwice) {
		t.Fatalf("a second write after in-place writes: %v, want errWrittenTwice", err)
	}
	s.Release()
	if got := restoredValues(t, first); !maps.Equal(got, want) {
		t.Fatal("the snapshot does not hold the values of its time")
	}
}

// TestClaimWriterBusy: a first write to a shard the writer is encoding
// copies it.
func TestClaimWriterBusy(t *testing.T) {
	b, v, st, want := claimBackend(t, 400)
	s := b.Snapshot(1)
	view := s.views[0].(*tableView[int64, int64])
	for i := range view.claims {
		view.claims[i].state.Store(claimWriter)
	}
	before := shardSet(st)
	update(b, v, []int64{5})
	if after := shardSet(st); maps.Equal(before, after) {
		t.Fatal("a write to a shard the writer holds modified it in place")
	}
	for i := range view.claims {
		view.claims[i].state.Store(claimFree)
	}
	if got := restoredValues(t, writeSnap(t, s)); !maps.Equal(got, want) {
		t.Fatal("the snapshot does not hold the values of its time")
	}
	s.Release()
}

// TestClaimContested: shards two pending snapshots hold are copied on
// write; each snapshot holds the values of its time, and once both are
// released the shards are claimed again by the next.
func TestClaimContested(t *testing.T) {
	b, v, st, want1 := claimBackend(t, 400)
	s1 := b.Snapshot(1)
	update(b, v, []int64{1}) // encodes key 1's shard for s1, in place
	want2 := maps.Clone(want1)
	want2[1] = -2
	s2 := b.Snapshot(2)
	before := shardSet(st)
	update(b, v, []int64{2, 300})
	if after := shardSet(st); maps.Equal(before, after) {
		t.Fatal("writes to shards two snapshots hold modified them in place")
	}
	if got := restoredValues(t, writeSnap(t, s2)); !maps.Equal(got, want2) {
		t.Fatal("the second snapshot does not hold the values of its time")
	}
	if got := restoredValues(t, writeSnap(t, s1)); !maps.Equal(got, want1) {
		t.Fatal("the first snapshot does not hold the values of its time")
	}
	s1.Release()
	s2.Release()
	for sh := range shardSet(st) {
		if sh.claim != nil {
			t.Fatal("a shard keeps a claim once no snapshot is pending")
		}
	}
	s3 := b.Snapshot(3)
	defer s3.Release()
	before = shardSet(st)
	update(b, v, []int64{4})
	if after := shardSet(st); !maps.Equal(before, after) {
		t.Fatal("after the contested snapshots' release, a write copied a shard")
	}
}
