package state

import (
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// SlotMemory is the memory budget of one task slot, shared by the Pebble
// backends of the keyed subtasks that run in it, as Flink bounds RocksDB
// per slot (state.backend.rocksdb.memory.fixed-per-slot, or the slot's
// share of managed memory): an eighth of it is one block cache that all
// of them share, and the rest is split evenly among the members, each
// taking for its own write-back caches and memtables what a backend of
// that much memory would (five sevenths and two sevenths). The members are
// counted when the slot is made (the keyed operators of the subtasks
// that run in it), so each member's share is fixed when it opens.
//
// A SlotMemory may be used from several goroutines.
type SlotMemory struct {
	budget  int64
	members int

	mu    sync.Mutex
	open  int // backends open on the cache
	cache *pebble.Cache
}

// NewSlotMemory returns the budget of a slot of budget bytes shared by
// members keyed subtasks. Each member's share must be at least 4 MiB,
// the smallest budget of a Pebble backend.
func NewSlotMemory(budget int64, members int) (*SlotMemory, error) {
	if members < 1 {
		return nil, fmt.Errorf("state: a slot's memory for %d keyed subtasks", members)
	}
	if budget/int64(members) < minPebbleMemory {
		return nil, fmt.Errorf("state: a slot's memory of %d bytes leaves %d bytes to each of its %d keyed subtasks, below the 4 MiB minimum",
			budget, budget/int64(members), members)
	}
	return &SlotMemory{budget: budget, members: members}, nil
}

// Budget returns the slot's memory in bytes.
func (s *SlotMemory) Budget() int64 { return s.budget }

// Members returns the number of keyed subtasks that share it.
func (s *SlotMemory) Members() int { return s.members }

// blockCache returns the slot's block cache, made by the first backend
// that opens; each call must be paired with a releaseCache once the
// backend's database is closed.
func (s *SlotMemory) blockCache() *pebble.Cache {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		s.cache = pebble.NewCache(blockCacheOf(s.budget))
	}
	s.open++
	return s.cache
}

// releaseCache lets the cache go once no backend uses it.
func (s *SlotMemory) releaseCache() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open--; s.open == 0 {
		s.cache.Unref()
		s.cache = nil
	}
}

// memberShare is what each member has beside the shared block cache: the
// memory of a lone backend whose own shares (write-back caches and
// memtables) are that share.
func (s *SlotMemory) memberShare() int64 {
	return (s.budget - blockCacheOf(s.budget)) / int64(s.members)
}
