package state

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirstream/weir/internal/workdir"
)

// The embedded LSM store (Pebble) of a KeyedBackend created WithPebble.
//
// Every keyed state registered in such a backend (value, list, map,
// reducing and aggregating, plain or namespaced, and so the contents of
// windows) lives in one Pebble database that belongs to the subtask, and
// so do its timers (lsmtimers.go) unless PebbleOptions.HeapTimers keeps
// them in memory, as Flink's HEAP timer service does. A state's rows are
// keyed
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
	// Memory bounds the backend's memory: five eighths for the write-back
	// caches of its states, an eighth for the store's block cache, a
	// quarter for its memtables. 0 is DefaultPebbleMemory.
	Memory int64
	// HeapTimers keeps timers on the heap, as the heap backend does
	// (Flink's timer-service factory HEAP), rather than in the store.
	HeapTimers bool
	// FS is the file system the store's files go through; nil is the
	// operating system's. Tests wrap it to make the disk fail.
	FS vfs.FS
	// Slot, if set, bounds the backend's memory with the other keyed
	// subtasks of its slot instead of by Memory (which must then be 0):
	// the block cache is the slot's, and the backend's write-back cache
	// and memtables take its share of the rest (see SlotMemory).
	Slot *SlotMemory
	// onStall, if set, is called when a write begins to wait for room in
	// the store's memtables (for tests).
	onStall func()
}

// DefaultPebbleMemory is the memory of a Pebble keyed backend unless
// PebbleOptions.Memory says otherwise.
const DefaultPebbleMemory = 64 << 20

// minPebbleMemory is the least memory of a Pebble keyed backend.
const minPebbleMemory = 4 << 20

// The shares of a Pebble backend's memory, in eighths. The write-back
// caches take most: a row they hold costs a map lookup, where one the
// block cache holds costs a read of the store (its memtables, and a
// filter, index and data block per level), and while the state fits in
// them the block cache is hardly read at all. The memtables take two
// eighths, one filling while the other flushes.
const (
	cacheEighths      = 5
	blockCacheEighths = 1
	memTableEighths   = 1 // each of two
)

// cacheBudgetOf and blockCacheOf are the write-back caches' and the block
// cache's shares of mem bytes.
func cacheBudgetOf(mem int64) int64 { return mem * cacheEighths / 8 }
func blockCacheOf(mem int64) int64  { return mem * blockCacheEighths / 8 }

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
	// wd holds dir (nil for a directory given to RestoreNative by its
	// caller).
	wd  *workdir.Dir
	mem int64
	// staged counts the native snapshots made, for their directories'
	// names.
	staged int

	mu    sync.Mutex
	snaps map[*pebble.Snapshot]bool // taken and not yet released

	// The write-back caches of the states that have one (lsmcache.go),
	// their budget in bytes and what they use.
	caches      []rowCache
	cacheBudget int64
	cacheUsed   int64
	// evictions counts the times the caches ran out of budget.
	evictions int
	// filterBytes is what the caches' filters hold (see rowFilter), part
	// of cacheUsed.
	filterBytes int64
	// heapTimers keeps timers on the heap instead of in the store.
	heapTimers bool
	// slot is the slot whose block cache the store uses, nil if its own.
	slot *SlotMemory
	// fs is what the store's files go through.
	fs vfs.FS
	// broken holds the first error of the store's background work
	// (flushes, compactions), which Pebble retries without end: a store
	// whose disk fails this way fails the state accesses and snapshots
	// that follow (see store), rather than leaving them to wait for room
	// that never comes.
	broken *bgFailure

	// commits and committed hand batches and tables to ingest to the
	// committer goroutine and its answers back (see commitBatch, ingest);
	// inflight counts the writes it has not finished. rowBatch is the
	// batch of single-row writes.
	commits   chan storeWrite
	committed chan error
	inflight  atomic.Int32
	rowBatch  *pebble.Batch
	// unflushed says a batch was committed since the memtables were last
	// flushed (see flush): a store without one has nothing to write out.
	unflushed bool

	// tables counts the tables of cached rows written for ingestion, for
	// their names; tableOpts are their options, and tableRows the least
	// number of dirty rows written as tables (see lsmtable.go).
	tables    int
	tableOpts *sstable.WriterOptions
	tableRows int
}

// bgFailure holds the first error of a store's background work.
type bgFailure struct {
	err  atomic.Pointer[error]
	done chan struct{} // closed when err is set
	// fatal says Pebble gave up on the database (see storeLogger).
	fatal atomic.Bool
	// onStall is PebbleOptions.onStall.
	onStall func()
	// parked says the database is left open for good (see closeDB): the
	// background work that fails next stops there, for ever, rather than
	// retry without end.
	parked atomic.Bool
}

// background is the store's handler of the errors of its background
// work.
func (f *bgFailure) background(err error) {
	f.set(err)
	if f.parked.Load() {
		// Pebble retries a failed flush at once and without end: on a
		// database left open that would spin for ever. What waits here
		// holds the database's lock, which nothing takes again.
		select {}
	}
}

func newBGFailure() *bgFailure { return &bgFailure{done: make(chan struct{})} }

func (f *bgFailure) set(err error) {
	if f.err.CompareAndSwap(nil, &err) {
		close(f.done)
	}
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
	n uint64
	// older holds the operands older than the first, newest first (as
	// Pebble hands them over), newer the first and those newer than it,
	// oldest first: appending to both keeps a merge of n operands linear
	// in their size.
	older, newer [][]byte
}

func (m *listMerge) add(value []byte, older bool) error {
	n, off := binary.Uvarint(value)
	if off <= 0 {
		return fmt.Errorf("%w: list row without an element count", ErrCorrupt)
	}
	m.n += n
	e := append([]byte(nil), value[off:]...)
	if older {
		m.older = append(m.older, e)
	} else {
		m.newer = append(m.newer, e)
	}
	return nil
}

func (m *listMerge) MergeNewer(value []byte) error { return m.add(value, false) }
func (m *listMerge) MergeOlder(value []byte) error { return m.add(value, true) }

func (m *listMerge) Finish(bool) ([]byte, io.Closer, error) {
	size := binary.MaxVarintLen64
	for _, e := range m.older {
		size += len(e)
	}
	for _, e := range m.newer {
		size += len(e)
	}
	out := binary.AppendUvarint(make([]byte, 0, size), m.n)
	for i := len(m.older) - 1; i >= 0; i-- {
		out = append(out, m.older[i]...)
	}
	for _, e := range m.newer {
		out = append(out, e...)
	}
	return out, nil, nil
}

// storeLogger drops Pebble's informational messages; errors reach the
// backend's callers as errors. Pebble calls Fatalf when it cannot go on,
// such as when its MANIFEST cannot be written (a full or failing disk),
// expecting the process to end; a subtask's store is not worth the
// process, so the store is marked broken instead (every later access
// fails, which fails the subtask, and closing the database cannot panic
// the process: see closeDB).
type storeLogger struct{ broken *bgFailure }

func (storeLogger) Infof(string, ...any)  {}
func (storeLogger) Errorf(string, ...any) {}
func (l storeLogger) Fatalf(format string, args ...any) {
	l.broken.fatal.Store(true)
	l.broken.set(fmt.Errorf(format, args...))
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
		// A lone backend's own share, caches and memtables (all but
		// the block cache), is the member's: its memory is that much
		// more.
		mem = o.Slot.memberShare() * 8 / (8 - blockCacheEighths)
	}
	parent := o.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("state: pebble directory: %w", err)
	}
	// A store's directory is held by this process while it lives: the
	// next store created in parent removes one a killed process left.
	wd, _, err := workdir.Create(parent, "weir-keyed-")
	if err != nil {
		return nil, fmt.Errorf("state: pebble directory: %w", err)
	}
	dir := wd.Path()
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	var cache *pebble.Cache
	if o.Slot != nil {
		cache = o.Slot.blockCache()
	} else {
		cache = pebble.NewCache(blockCacheOf(mem))
		defer cache.Unref() // the database holds its own reference
	}
	broken := newBGFailure()
	broken.onStall = o.onStall
	db, err := openPebble(dir, mem, cache, fs, broken)
	if err != nil {
		_ = wd.Remove()
		if o.Slot != nil {
			o.Slot.releaseCache()
		}
		return nil, err
	}
	return &lsm{db: db, dir: dir, wd: wd, mem: mem, snaps: map[*pebble.Snapshot]bool{}, cacheBudget: cacheBudgetOf(mem), heapTimers: o.HeapTimers,
		slot: o.Slot, fs: fs, broken: broken, tableRows: minTableRows}, nil
}

// maxManifestSize is the size past which the store starts a new MANIFEST
// (a snapshot of the live files, then the edits after it), as soon as the
// edits since the last one name more files than the store holds (Pebble's
// rule, which bounds the rewriting to half of what it writes). A native
// snapshot copies the MANIFEST whole, record by record, and writes the
// copy to checkpoint storage at every checkpoint, and every flush (one per
// checkpoint) adds an edit to it: with Pebble's default of 128 MiB the
// MANIFEST of a store checkpointed every few milliseconds grows without
// end, and each checkpoint costs more than the last.
const maxManifestSize = 16 << 10

// openPebble opens (or creates) the database in dir with mem bytes of
// memory and cache as its block cache, its files going through fs; the
// first error of its background work lands in broken.
// Of the budget, the write-back caches take five eighths, Pebble's block
// cache an eighth (a slot's block cache is an eighth of the slot's
// budget), and its two memtables (one filling while the other flushes) an
// eighth each.
func openPebble(dir string, mem int64, cache *pebble.Cache, fs vfs.FS, broken *bgFailure) (*pebble.DB, error) {
	db, err := pebble.Open(dir, &pebble.Options{
		Levels:                      filteredLevels(),
		Cache:                       cache,
		DisableWAL:                  true,
		MemTableSize:                uint64(mem * memTableEighths / 8),
		MemTableStopWritesThreshold: 2,
		// A flush of the write-back caches before a snapshot adds a
		// table or two to L0 spanning every key group (see lsmtable.go),
		// and each compaction of L0 rewrites the whole state below it:
		// compacting at eight sublevels rather than four halves that.
		L0CompactionThreshold: 8,
		L0StopWritesThreshold: 24,
		MaxManifestFileSize:   maxManifestSize,
		Merger:                listMerger,
		Logger:                storeLogger{broken},
		FS:                    fs,
		EventListener: &pebble.EventListener{BackgroundError: broken.background, WriteStallBegin: func(pebble.WriteStallBeginInfo) {
			if broken.onStall != nil {
				broken.onStall()
			}
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("state: opening pebble in %s: %w", dir, err)
	}
	return db, nil
}

// filteredLevels returns the store's options of its levels: Bloom
// filters on every level, as state reads are point reads, and most of a
// cache miss's probes are of files without the key.
func filteredLevels() [len(pebble.Options{}.Levels)]pebble.LevelOptions {
	var levels [len(pebble.Options{}.Levels)]pebble.LevelOptions
	for i := range levels {
		levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return levels
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
	err := l.closeDB()
	if l.slot != nil {
		l.slot.releaseCache()
	}
	if rerr := l.removeDir(); err == nil {
		err = rerr
	}
	return err
}

// removeDir removes the store's directory and the native snapshots not
// released beside it.
func (l *lsm) removeDir() error {
	if l.wd != nil {
		return l.wd.Remove() // the directory, its siblings, its lock
	}
	err := os.RemoveAll(l.dir)
	staged, _ := filepath.Glob(l.dir + stagedSuffix + "*")
	for _, d := range staged {
		if rerr := os.RemoveAll(d); err == nil {
			err = rerr
		}
	}
	return err
}

// closeDB closes the database, unless a commit waits in it for ever (see
// commitBatch). One that Pebble gave up on (see storeLogger) may fail its
// own checks while closing, which Pebble reports by panicking: that is
// the store's failure, known already, and not the process's.
func (l *lsm) closeDB() (err error) {
	if l.inflight.Load() > 0 {
		// A commit waits for room that the failed flushes never make,
		// holding Pebble's commit pipeline, which Close would wait for:
		// the database is left open, its directory removed, and its
		// retries of the failed flush parked.
		l.broken.parked.Store(true)
		return fmt.Errorf("state: the pebble store in %s is left open: a write waits in it since its background work failed: %w", l.dir, l.failed())
	}
	if l.commits != nil {
		close(l.commits)
	}
	if l.rowBatch != nil {
		_ = l.rowBatch.Close()
	}
	if l.broken.fatal.Load() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("state: closing the pebble store that failed: %v", r)
			}
		}()
	}
	return l.db.Close()
}

// lsmFailure is the panic of a state access that the store failed: the
// state API has no error results, and a subtask that panics fails and is
// restarted from its checkpoint.
type lsmFailure struct{ err error }

func (f lsmFailure) Error() string { return "state: pebble: " + f.err.Error() }
func (f lsmFailure) Unwrap() error { return f.err }

func fail(err error) { panic(lsmFailure{err}) }

// store returns the database for an access of the owner's, failing (as
// fail does) if the store's background work has failed: a write after a
// flush failed would wait for the memtables to drain, which they never
// do, as Pebble retries the flush without end.
func (l *lsm) store() *pebble.DB {
	if err := l.failed(); err != nil {
		fail(err)
	}
	return l.db
}

// flush writes the memtables out and waits until they are, or until the
// store's background work fails: Pebble retries a failed flush without
// end, so waiting for it alone could last for ever. A store with no
// commit since its last flush has empty memtables (its writes skip the
// WAL, so none is replayed into them when it opens) and flush leaves it
// alone: Pebble would still rotate the empty memtable and record a
// flush in its MANIFEST, so that every checkpoint of an idle subtask
// would grow it.
func (l *lsm) flush() error {
	if err := l.failed(); err != nil {
		return err
	}
	if !l.unflushed {
		return nil
	}
	flushed, err := l.db.AsyncFlush()
	if err != nil {
		return err
	}
	select {
	case <-flushed:
	case <-l.broken.done:
	}
	if err := l.failed(); err != nil {
		return err
	}
	l.unflushed = false
	return nil
}

// failed returns the error of the store's background work, if it failed.
func (l *lsm) failed() error {
	if err := l.broken.err.Load(); err != nil {
		return fmt.Errorf("the store's background work failed (is the disk of %s full or failing?): %w", l.dir, *err)
	}
	return nil
}

// Close releases what the backend holds outside the Go heap: a Pebble
// backend's database and its working directory. The backend must not be
// used afterwards; snapshots not yet released are released.
func (b *KeyedBackend[K]) Close() error {
	for dir := range b.nativeDirs {
		b.removeNativeDir(dir)
	}
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
