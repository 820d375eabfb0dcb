package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Sorted write-out of the write-back caches. A flush of many dirty rows
// (the caches' flush before every snapshot) does not go through the
// memtables: the rows' keys are listed, sorted, and the rows written in
// that order into a table file (an SST) that the store ingests whole. A
// memtable would take each row in a skiplist of its own (about 200 bytes
// a row, so a memtable holds a fraction of a large state's changes),
// and every memtable that fills is written out as a table of its own,
// each spanning every key group; ingesting one sorted table per flush
// skips the skiplist and the memtable flushes, and leaves the store one
// table per flush to compact, not one per memtable's worth of rows.
//
// The list takes at most a memtable's share of the backend's memory (the
// memtables stay empty while it is built): a flush of more rows than fit
// writes more than one table. A flush of few rows (a scan's, or an idle
// subtask's) goes through a batch, as evictions do: a table costs a file,
// its sync and an edit of the store's manifest.

// sortedCache is a rowCache that can list its dirty rows for a sorted
// write-out.
type sortedCache interface {
	rowCache
	// dirtyLen returns the length of the cache's list of dirty rows.
	dirtyLen() int
	// listDirty lists the row keys of the rows of its dirty list from
	// index from on in t, as cache number ci, until t is full, and returns
	// where it stopped: dirtyLen() when it listed them all.
	listDirty(t *rowTable, ci uint32, from int) int
	// writeListed writes row idx of its dirty list, of row key k, to w if
	// it is still dirty, and marks it clean.
	writeListed(w rowSink, idx uint32, k []byte) error
	// listWritten says that every row of the dirty list is written: the
	// list is cleared, and the rows dropped too if evict.
	listWritten(evict bool)
}

// rowSink takes rows: a rowWriter, or a table being written.
type rowSink interface {
	Set(k, v []byte) error
	Delete(k []byte) error
}

// minTableRows is the least number of dirty rows that the caches write
// as tables rather than through batches.
const minTableRows = 1 << 14

// tableRowSize is what a listed row costs beside its key's bytes.
const tableRowSize = 32

// rowTable lists rows to write in key order.
type rowTable struct {
	keys  []byte
	rows  []tableRow
	limit int // bytes of keys and rows
}

// tableRow is a listed row: its key's first 16 bytes (big-endian,
// zero-padded) to compare most keys without touching keys, the key in
// keys, and the cache and dirty list index it is of.
type tableRow struct {
	pre      [2]uint64
	off, n   uint32
	cache    uint32
	dirtyIdx uint32
}

// add lists row key k (appended to t.keys from off on by the caller) of
// cache ci's dirty list index idx.
func (t *rowTable) add(off int, ci uint32, idx int) {
	k := t.keys[off:]
	var p [16]byte
	copy(p[:], k)
	t.rows = append(t.rows, tableRow{
		pre: [2]uint64{binary.BigEndian.Uint64(p[:8]), binary.BigEndian.Uint64(p[8:])},
		off: uint32(off), n: uint32(len(k)), cache: ci, dirtyIdx: uint32(idx),
	})
}

// full says whether t holds its limit.
func (t *rowTable) full() bool { return len(t.keys)+len(t.rows)*tableRowSize >= t.limit }

func (t *rowTable) key(r *tableRow) []byte { return t.keys[r.off : r.off+r.n] }

func (t *rowTable) sort() {
	slices.SortFunc(t.rows, func(a, b tableRow) int {
		if a.pre[0] != b.pre[0] {
			if a.pre[0] < b.pre[0] {
				return -1
			}
			return 1
		}
		if a.pre[1] != b.pre[1] {
			if a.pre[1] < b.pre[1] {
				return -1
			}
			return 1
		}
		return bytes.Compare(t.key(&a), t.key(&b))
	})
}

// tableSink writes rows to a table, counting them.
type tableSink struct {
	w *sstable.Writer
	n int
}

func (s *tableSink) Set(k, v []byte) error { s.n++; return s.w.Set(k, v) }
func (s *tableSink) Delete(k []byte) error { s.n++; return s.w.Delete(k) }

// writeTables writes the dirty rows of caches as tables that the store
// ingests, and clears the caches' dirty lists (dropping every row if
// evict).
func (l *lsm) writeTables(caches []sortedCache, evict bool) error {
	t := &rowTable{limit: int(l.mem * memTableEighths / 8)}
	for ci, from := 0, 0; ci < len(caches); {
		t.keys, t.rows = t.keys[:0], t.rows[:0]
		for ci < len(caches) && !t.full() {
			c := caches[ci]
			if from = c.listDirty(t, uint32(ci), from); from >= c.dirtyLen() {
				ci, from = ci+1, 0
			}
		}
		if err := l.writeTable(t, caches); err != nil {
			return err
		}
	}
	for _, c := range caches {
		c.listWritten(evict)
	}
	return nil
}

// writeTable sorts the rows t lists, writes them to a table and has the
// store ingest it.
func (l *lsm) writeTable(t *rowTable, caches []sortedCache) error {
	if len(t.rows) == 0 {
		return nil
	}
	t.sort()
	l.tables++
	path := l.fs.PathJoin(l.dir, fmt.Sprintf("weir-rows-%d.sst", l.tables))
	f, err := l.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("writing the cache's rows: %w", err)
	}
	s := &tableSink{w: sstable.NewWriter(objstorageprovider.NewFileWritable(f), l.tableOptions())}
	for i := range t.rows {
		r := &t.rows[i]
		if err = caches[r.cache].writeListed(s, r.dirtyIdx, t.key(r)); err != nil {
			break
		}
	}
	if cerr := s.w.Close(); err == nil {
		err = cerr
	}
	if err != nil || s.n == 0 {
		_ = l.fs.Remove(path)
		if err != nil {
			return fmt.Errorf("writing the cache's rows: %w", err)
		}
		return nil
	}
	if err := l.ingest(path); err != nil {
		_ = l.fs.Remove(path)
		return fmt.Errorf("writing the cache's rows: %w", err)
	}
	return nil
}

// tableOptions returns the options of the tables the store ingests: those
// of the tables it writes itself at L0.
func (l *lsm) tableOptions() sstable.WriterOptions {
	if l.tableOpts == nil {
		o := &pebble.Options{Levels: filteredLevels(), Merger: listMerger}
		o.EnsureDefaults()
		w := o.MakeWriterOptions(0, l.db.TableFormat())
		l.tableOpts = &w
	}
	return *l.tableOpts
}
