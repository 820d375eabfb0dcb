package state

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// The embedded LSM store (Pebble) of a KeyedBackend created WithPebble.
//
// Every keyed state registered in such a backend (value, list, map,
// reducing and aggregating, plain or namespaced, and so the contents of
// windows) lives in one Pebble database that belongs to the subtask;
// timers stay in memory, as with Flink's HEAP timer service. A state's
// rows are keyed
//
//	key group (2 bytes, big-endian) | state id (2 bytes) | key | namespace [| map key]
//
// where key and namespace are length-prefixed codec encodings (an empty
// namespace for state in the void namespace) and a map state has one row
// per map entry, its map key's encoding last. So one key group of one
// state is one contiguous key range, and one key's rows (in every
// namespace) are another. A row's value is the codec encoding of the
// state's value: a value, a reduced value or an accumulator; a list's
// element count and elements, which list appends write as merge operands
// that Pebble concatenates (no read on Add); a map entry's value.
//
// The database runs without a write-ahead log: nothing in it needs to
// survive a crash, since a restart restores from a checkpoint. Writes go
// to the memtable; flushes and compactions run in Pebble's background
// goroutines, so the record path makes no system call of its own unless a
// read misses the block cache.
//
// Snapshots are Pebble snapshots, taken on the owner's goroutine at the
// barrier; the asynchronous part iterates them and writes the same
// checkpoint format as the heap, so a checkpoint or savepoint of either
// backend restores into the other, at any parallelism.

// PebbleOptions configures the embedded LSM store of WithPebble.
type PebbleOptions struct {
	// Dir is where the backend makes its working directory, removed at
	// Close; "" is os.TempDir().
	Dir string
	// Memory bounds the backend's memory: half for the write-back cache of
	// its states, a quarter for the store's block cache, a quarter for its
	// memtables. 0 is DefaultPebbleMemory.
	Memory int64
	// HeapTimers keeps timers on the heap, as the heap backend does
	// (Flink's timer-service factory HEAP), rather than in the store.
	HeapTimers bool
	// Slot, if set, bounds the backend's memory with the other keyed
	// subtasks of its slot instead of by Memory (which must then be 0):
	// the block cache is the slot's, and the backend's write-back cache
	// and memtables take its share of the rest (see SlotMemory).
	Slot *SlotMemory
}

// DefaultPebbleMemory is the memory of a Pebble keyed backend unless
// PebbleOptions.Memory says otherwise.
const DefaultPebbleMemory = 64 << 20

// minPebbleMemory is the least memory of a Pebble keyed backend.
const minPebbleMemory = 4 << 20

// WithPebble keeps the backend's keyed state in an embedded LSM store
// (Pebble) on local disk instead of the heap, so state may be far larger
// than memory.
func WithPebble(o PebbleOptions) BackendOption {
	return func(c *backendConfig) { c.pebble = &o }
}

// lsm is a backend's Pebble database.
type lsm struct {
	db  *pebble.DB
	dir string
	mem int64
	// staged counts the native snapshots made, for their directories'
	// names.
	staged int

	mu    sync.Mutex
	snaps map[*pebble.Snapshot]bool // taken and not yet released

	// The write-back caches of the states that have one (lsmcache.go),
	// their budget in bytes and what they use.
	caches      []*rowCache
	cacheBudget int64
	cacheUsed   int64
	// heapTimers keeps timers on the heap instead of in the store.
	heapTimers bool
	// slot is the slot whose block cache the store uses, nil if its own.
	slot *SlotMemory
}

// listMerger concatenates list rows: each operand is an element count
// and the elements' encodings, the form of a stored list.
var listMerger = &pebble.Merger{
	Name: "weir.list.v1",
	Merge: func(_, value []byte) (pebble.ValueMerger, error) {
		m := &listMerge{}
		return m, m.MergeNewer(value)
	},
}

type listMerge struct {
	n     uint64
	elems [][]byte // oldest first
}

func (m *listMerge) add(value []byte, older bool) error {
	n, off := binary.Uvarint(value)
	if off <= 0 {
		return fmt.Errorf("%w: list row without an element count", ErrCorrupt)
	}
	m.n += n
	e := append([]byte(nil), value[off:]...)
	if older {
		m.elems = append([][]byte{e}, m.elems...)
	} else {
		m.elems = append(m.elems, e)
	}
	return nil
}

func (m *listMerge) MergeNewer(value []byte) error { return m.add(value, false) }
func (m *listMerge) MergeOlder(value []byte) error { return m.add(value, true) }

func (m *listMerge) Finish(bool) ([]byte, io.Closer, error) {
	size := binary.MaxVarintLen64
	for _, e := range m.elems {
		size += len(e)
	}
	out := binary.AppendUvarint(make([]byte, 0, size), m.n)
	for _, e := range m.elems {
		out = append(out, e...)
	}
	return out, nil, nil
}

// quietLogger drops Pebble's informational messages; errors reach the
// backend's callers as errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("state: pebble: "+format, args...))
}

func openLSM(o PebbleOptions) (*lsm, error) {
	mem := o.Memory
	if o.Slot != nil && mem != 0 {
		return nil, fmt.Errorf("state: pebble memory %d bytes for a backend that shares its slot's", mem)
	}
	if mem == 0 {
		mem = DefaultPebbleMemory
	}
	if mem < minPebbleMemory {
		return nil, fmt.Errorf("state: pebble memory %d bytes is below the 4 MiB minimum", mem)
	}
	if o.Slot != nil {
		// A lone backend's own three quarters, cache and memtables,
		// are the member's share: its memory is 4/3 of it.
		mem = o.Slot.memberShare() * 4 / 3
	}
	parent := o.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("state: pebble directory: %w", err)
	}
	dir, err := os.MkdirTemp(parent, "weir-keyed-")
	if err != nil {
		return nil, fmt.Errorf("state: pebble directory: %w", err)
	}
	var cache *pebble.Cache
	if o.Slot != nil {
		cache = o.Slot.blockCache()
	} else {
		cache = pebble.NewCache(mem / 4)
		defer cache.Unref() // the database holds its own reference
	}
	db, err := openPebble(dir, mem, cache)
	if err != nil {
		_ = os.RemoveAll(dir)
		if o.Slot != nil {
			o.Slot.releaseCache()
		}
		return nil, err
	}
	return &lsm{db: db, dir: dir, mem: mem, snaps: map[*pebble.Snapshot]bool{}, cacheBudget: mem / 2, heapTimers: o.HeapTimers, slot: o.Slot}, nil
}

// openPebble opens (or creates) the database in dir with mem bytes of
// memory and cache as its block cache.
// Of the budget, the write-back caches take half, Pebble's block cache a
// quarter (a slot's block cache is the quarter of the slot's budget), and
// its two memtables (one filling while the other flushes) an eighth each.
func openPebble(dir string, mem int64, cache *pebble.Cache) (*pebble.DB, error) {
	// Bloom filters on every level: state reads are point reads, and
	// most of a cache miss's probes are of files without the key.
	var levels [len(pebble.Options{}.Levels)]pebble.LevelOptions
	for i := range levels {
		levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, &pebble.Options{
		Levels:                      levels,
		Cache:                       cache,
		DisableWAL:                  true,
		MemTableSize:                uint64(mem / 8),
		MemTableStopWritesThreshold: 2,
		Merger:                      listMerger,
		Logger:                      quietLogger{},
	})
	if err != nil {
		return nil, fmt.Errorf("state: opening pebble in %s: %w", dir, err)
	}
	return db, nil
}

func (l *lsm) snapshot() *pebble.Snapshot {
	s := l.db.NewSnapshot()
	l.mu.Lock()
	l.snaps[s] = true
	l.mu.Unlock()
	return s
}

func (l *lsm) release(s *pebble.Snapshot) {
	l.mu.Lock()
	open := l.snaps[s]
	delete(l.snaps, s)
	l.mu.Unlock()
	if open {
		_ = s.Close()
	}
}

// close closes the database, with any snapshot still open, and removes
// its directory.
func (l *lsm) close() error {
	l.mu.Lock()
	snaps := l.snaps
	l.snaps = map[*pebble.Snapshot]bool{}
	l.mu.Unlock()
	for s := range snaps {
		_ = s.Close()
	}
	err := l.db.Close()
	if l.slot != nil {
		l.slot.releaseCache()
	}
	if rerr := os.RemoveAll(l.dir); err == nil {
		err = rerr
	}
	// Native snapshots not released.
	staged, _ := filepath.Glob(l.dir + stagedSuffix + "*")
	for _, d := range staged {
		if rerr := os.RemoveAll(d); err == nil {
			err = rerr
		}
	}
	return err
}

// lsmFailure is the panic of a state access that the store failed: the
// state API has no error results, and a subtask that panics fails and is
// restarted from its checkpoint.
type lsmFailure struct{ err error }

func (f lsmFailure) Error() string { return "state: pebble: " + f.err.Error() }
func (f lsmFailure) Unwrap() error { return f.err }

func fail(err error) { panic(lsmFailure{err}) }

// Close releases what the backend holds outside the Go heap: a Pebble
// backend's database and its working directory. The backend must not be
// used afterwards; snapshots not yet released are released.
func (b *KeyedBackend[K]) Close() error {
	if b.lsm == nil {
		return nil
	}
	l := b.lsm
	b.lsm = nil
	return l.close()
}

// Storage returns "pebble" for a backend created WithPebble and "heap"
// otherwise.
func (b *KeyedBackend[K]) Storage() string {
	if b.lsm != nil {
		return "pebble"
	}
	return "heap"
}

// prefixEnd returns the smallest key after every key that starts with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}
