package state

import (
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSlotMemory checks the budgets of the Pebble backends of one slot:
// they share one block cache of an eighth of the slot's memory, each has
// its share of the rest for its write-back caches (five sevenths of it)
// and memtables (two sevenths), and, filled far beyond that, each stays within
// its share; the cache goes when the last backend closes.
func TestSlotMemory(t *testing.T) {
	const budget, members = 24 << 20, 3
	slot := must(NewSlotMemory(budget, members))
	var bs []*KeyedBackend[int64]
	for range members {
		b := must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, WithPebble(PebbleOptions{Dir: t.TempDir(), Slot: slot})))
		bs = append(bs, b)
	}
	share := int64(budget) * 7 / 8 / members // 7 MiB each
	for i, b := range bs {
		if got, want := b.lsm.cacheBudget, share*5/7; got != want {
			t.Errorf("backend %d: write-back cache budget %d, want %d", i, got, want)
		}
	}
	if slot.open != members || slot.cache == nil {
		t.Fatalf("%d backends open on the slot's cache (%v), want %d", slot.open, slot.cache != nil, members)
	}
	// Fill each beyond its share, reading back so that the block cache
	// fills too.
	// Incompressible values, as a function of the key.
	valueOf := func(k int64) string {
		r := rand.New(rand.NewPCG(uint64(k), 7))
		raw := make([]byte, 150)
		for j := range raw {
			raw[j] = byte(r.Uint32())
		}
		return hex.EncodeToString(raw)
	}
	for i, b := range bs {
		v := must(Value(b, ValueDescriptor[string]{Name: "v"}))
		for k := range int64(40_000) {
			b.SetCurrentKey(k)
			v.Update(valueOf(k))
			if b.lsm.cacheUsed > b.lsm.cacheBudget+1024 {
				t.Fatalf("backend %d: the write-back cache holds %d bytes, over its budget of %d", i, b.lsm.cacheUsed, b.lsm.cacheBudget)
			}
		}
		for k := range int64(40_000) {
			b.SetCurrentKey(k)
			if got, _ := v.Value(); got != valueOf(k) {
				t.Fatalf("backend %d: key %d reads %.10q", i, k, got)
			}
		}
		m := b.lsm.db.Metrics()
		if limit := uint64(share * 2 / 7); m.MemTable.Size > limit+(1<<20) {
			t.Errorf("backend %d: memtables hold %d bytes, over their budget of %d", i, m.MemTable.Size, limit)
		}
		if disk := m.DiskSpaceUsage(); disk < uint64(share) {
			t.Errorf("backend %d: the store uses %d bytes on disk, less than its memory: the test proves nothing", i, disk)
		}
	}
	// One cache: every backend reports the hits and misses of all of
	// them, and its size is within the slot's eighth.
	seen := map[[2]int64]bool{}
	for _, b := range bs {
		m := b.lsm.db.Metrics().BlockCache
		seen[[2]int64{m.Hits, m.Misses}] = true
		if m.Size > budget/8 {
			t.Errorf("the block cache holds %d bytes, over the slot's eighth %d", m.Size, budget/8)
		}
		if m.Hits+m.Misses == 0 {
			t.Error("no block was read: the test proves nothing")
		}
	}
	if len(seen) != 1 {
		t.Errorf("the backends report the block cache lookups %v: not one cache", seen)
	}
	for _, b := range bs {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if slot.open != 0 || slot.cache != nil {
		t.Errorf("after closing every backend, %d are open on the cache (%v)", slot.open, slot.cache != nil)
	}
}

// TestSlotMemoryErrors checks the refusals: a share below 4 MiB, and a
// backend given its own memory and a slot's.
func TestSlotMemoryErrors(t *testing.T) {
	if _, err := NewSlotMemory(8<<20, 3); err == nil || !strings.Contains(err.Error(), "4 MiB") {
		t.Errorf("8 MiB for 3 keyed subtasks: %v", err)
	}
	slot := must(NewSlotMemory(8<<20, 1))
	if _, err := NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}, WithPebble(PebbleOptions{Dir: t.TempDir(), Slot: slot, Memory: 8 << 20})); err == nil {
		t.Error("a backend with its own memory and a slot's was accepted")
	}
}
