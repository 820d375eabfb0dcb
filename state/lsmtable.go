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
// The rows are taken from the cache in its map's order (a range over the
// map reads its memory in order, where looking up each dirty row would
// miss the processor's caches on every row), encoded into a list that
// takes at most a memtable's share of the backend's memory (the
// memtables stay empty while it is built), sorted, and written: a flush
// of more rows than fit writes more than one table. A flush of few rows (a scan's, or an idle
// subtask's) goes through a batch, as evictions do: a table costs a file,
// its sync and an edit of the store's manifest.

// sortedCache is a rowCache that can write its dirty rows to a rowTable.
type sortedCache interface {
	rowCache
	// dirtyLen returns the length of the cache's list of dirty rows.
	dirtyLen() int
	// writeSorted writes its dirty rows to t, marking them clean, and
	// calls full whenever t is full; it clears its dirty list, and drops
	// every row if evict.
	writeSorted(t *rowTable, full func() error, evict bool) error
}

// rowSink takes rows: a rowWriter, or a rowTable.
type rowSink interface {
	Set(k, v []byte) error
	Delete(k []byte) error
}

// minTableRows is the least number of dirty rows that the caches write
// as tables rather than through batches.
const minTableRows = 1 << 14

// tableRowSize is what a listed row costs beside its key's and value's
// bytes.
const tableRowSize = 32

// rowTable lists rows to write in key order.
type rowTable struct {
	data  []byte // the rows' keys and values
	rows  []tableRow
	limit int // bytes of data and rows
}

// tableRow is a listed row: its key's first 16 bytes (big-endian,
// zero-padded), to compare most keys without reading data, and where its
// key and value are in data.
type tableRow struct {
	pre        [2]uint64
	off        uint32
	klen, vlen uint32
	del        bool
}

// Set lists row k with value v.
func (t *rowTable) Set(k, v []byte) error {
	t.add(k, v, false)
	return nil
}

// Delete lists the deletion of row k.
func (t *rowTable) Delete(k []byte) error {
	t.add(k, nil, true)
	return nil
}

func (t *rowTable) add(k, v []byte, del bool) {
	var p [16]byte
	copy(p[:], k)
	t.rows = append(t.rows, tableRow{
		pre: [2]uint64{binary.BigEndian.Uint64(p[:8]), binary.BigEndian.Uint64(p[8:])},
		off: uint32(len(t.data)), klen: uint32(len(k)), vlen: uint32(len(v)), del: del,
	})
	t.data = append(append(t.data, k...), v...)
}

// full says whether t holds its limit.
func (t *rowTable) full() bool { return len(t.data)+len(t.rows)*tableRowSize >= t.limit }

func (t *rowTable) key(r *tableRow) []byte { return t.data[r.off : r.off+r.klen] }
func (t *rowTable) value(r *tableRow) []byte {
	return t.data[r.off+r.klen : r.off+r.klen+r.vlen]
}

func (t *rowTable) reset() { t.data, t.rows = t.data[:0], t.rows[:0] }

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

// writeTables writes the dirty rows of caches as tables that the store
// ingests, and clears the caches' dirty lists (dropping every row if
// evict).
func (l *lsm) writeTables(caches []sortedCache, evict bool) error {
	t := &rowTable{limit: int(l.mem * memTableEighths / 8)}
	full := func() error {
		err := l.writeTable(t)
		t.reset()
		return err
	}
	for _, c := range caches {
		if err := c.writeSorted(t, full, evict); err != nil {
			return err
		}
	}
	return full()
}

// writeTable sorts the rows t lists, writes them to a table and has the
// store ingest it.
func (l *lsm) writeTable(t *rowTable) error {
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
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), l.tableOptions())
	for i := range t.rows {
		r := &t.rows[i]
		if r.del {
			err = w.Delete(t.key(r))
		} else {
			err = w.Set(t.key(r), t.value(r))
		}
		if err != nil {
			break
		}
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.ingest(path)
	}
	if err != nil {
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
