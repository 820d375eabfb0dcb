package state

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Writes to a Pebble backend's store. Every write goes through apply,
// which fails rather than waits once the store's background work has
// failed, and the writes of many rows (a flush or eviction of the
// write-back caches, a restore, a sweep of expired values) go through a
// rowWriter, which commits them in batches of at most a quarter of a
// memtable: Pebble keeps a larger batch in memory whole, as a memtable of
// its own, until it is flushed, which would put a flush of caches far
// larger than a memtable outside the backend's memory.

// rowWriter writes rows to the store in batches of at most limit bytes.
type rowWriter struct {
	l     *lsm
	b     *pebble.Batch
	limit int
	// what names the rows in a failure.
	what string
}

// writer returns a rowWriter of the store; what names its rows in a
// failure.
func (l *lsm) writer(what string) *rowWriter {
	return &rowWriter{l: l, b: l.db.NewBatch(), limit: int(l.mem * memTableEighths / 8 / 4), what: what}
}

// Set writes row k with value v.
func (w *rowWriter) Set(k, v []byte) error {
	if err := w.b.Set(k, v, nil); err != nil {
		return err
	}
	return w.spill()
}

// Delete deletes row k.
func (w *rowWriter) Delete(k []byte) error {
	if err := w.b.Delete(k, nil); err != nil {
		return err
	}
	return w.spill()
}

// Merge adds merge operand v to row k.
func (w *rowWriter) Merge(k, v []byte) error {
	if err := w.b.Merge(k, v, nil); err != nil {
		return err
	}
	return w.spill()
}

// spill commits the batch once it holds limit bytes, counting what each
// row takes in a memtable: Pebble reserves a skiplist node of its tallest
// size for each row of a batch, and holds a batch whose rows would take
// more than half a memtable in memory whole, as a memtable of its own.
func (w *rowWriter) spill() error {
	if len(w.b.Repr())+int(w.b.Count())*memTableRowSize < w.limit {
		return nil
	}
	return w.Commit()
}

// memTableRowSize is what Pebble reserves in a memtable for a row besides
// its key and value: a skiplist node of the tallest size, and the key's
// trailer.
const memTableRowSize = 200

// Commit writes the rows written so far to the store.
func (w *rowWriter) Commit() error {
	if w.b.Empty() {
		return nil
	}
	b := w.b
	w.b = w.l.db.NewBatch()
	if err := w.l.apply(b); err != nil {
		return fmt.Errorf("%s: %w", w.what, err)
	}
	return nil
}

// Close drops the rows not committed.
func (w *rowWriter) Close() { _ = w.b.Close() }

// finish commits the rows written so far and closes the writer, failing
// (as fail does) if the store fails.
func (w *rowWriter) finish() {
	err := w.Commit()
	w.Close()
	if err != nil {
		fail(err)
	}
}

// apply commits batch to the store and closes it (see commitBatch).
func (l *lsm) apply(batch *pebble.Batch) error {
	err := l.commitBatch(batch)
	if err != nil && l.inflight.Load() > 0 {
		// The commit waits in Pebble, and its batch with it.
		return err
	}
	_ = batch.Close()
	return err
}

// commitBatch commits batch to the store. It fails if the store's
// background work has failed, or fails while the commit waits: Pebble
// retries a failed flush without end, so a commit that waits for room in
// full memtables would wait for ever, and the subtask with it. The
// commits run on the store's committer goroutine; one that waits for
// ever keeps its batch (the caller must not use it again) and leaves
// inflight counting it, and closeDB then leaves the database open, as
// closing it would wait for the commit too.
func (l *lsm) commitBatch(batch *pebble.Batch) error {
	if batch.Empty() {
		return nil
	}
	return l.onCommitter(storeWrite{batch: batch})
}

// ingest adds the sorted table at path (see rowTable) to the store,
// through the committer goroutine as commitBatch commits: an ingest that
// overlaps a memtable may wait for its flush.
func (l *lsm) ingest(path string) error {
	return l.onCommitter(storeWrite{ingest: path})
}

// storeWrite is a write the committer goroutine makes: a batch to commit
// or the path of a table to ingest.
type storeWrite struct {
	batch  *pebble.Batch
	ingest string
}

// onCommitter has the committer goroutine make w and waits for its
// answer or for the store's background work to fail (see commitBatch).
func (l *lsm) onCommitter(w storeWrite) error {
	if err := l.failed(); err != nil {
		return err
	}
	if l.commits == nil {
		l.commits, l.committed = make(chan storeWrite), make(chan error)
		go committer(l.db, l.commits, l.committed, &l.inflight)
	}
	l.unflushed = true
	l.inflight.Add(1)
	l.commits <- w
	select {
	case err := <-l.committed:
		return err
	case <-l.broken.done:
		return l.failed()
	}
}

// committer makes the writes it receives to db, answering each with its
// error, until in is closed.
func committer(db *pebble.DB, in <-chan storeWrite, out chan<- error, inflight *atomic.Int32) {
	for w := range in {
		var err error
		if w.batch != nil {
			err = w.batch.Commit(pebble.NoSync)
		} else {
			err = db.Ingest(context.Background(), []string{w.ingest})
		}
		inflight.Add(-1)
		out <- err
	}
}

// The writes of single rows by state accesses (a list replaced or
// cleared, a key's or a map's rows deleted by range) commit one small
// batch each, through commitBatch like every other write. A map's
// entries and timers are written by their caches (see lsmmapcache.go and
// lsmtimers.go).

// row returns the batch of a single-row write.
func (l *lsm) row() *pebble.Batch {
	if l.rowBatch == nil {
		l.rowBatch = l.db.NewBatch()
	}
	return l.rowBatch
}

// commitRow commits the single-row batch, unless err (of writing to it)
// is set already.
func (l *lsm) commitRow(err error) error {
	if err == nil {
		err = l.commitBatch(l.rowBatch)
	}
	if err != nil && l.inflight.Load() > 0 {
		l.rowBatch = nil // the waiting commit keeps it
	} else {
		l.rowBatch.Reset()
	}
	if err != nil {
		return fmt.Errorf("writing a row: %w", err)
	}
	return nil
}

// trySet writes row k with value v.
func (l *lsm) trySet(k, v []byte) error { return l.commitRow(l.row().Set(k, v, nil)) }

// tryDelete deletes row k.
func (l *lsm) tryDelete(k []byte) error { return l.commitRow(l.row().Delete(k, nil)) }

// tryDeleteRows deletes the rows from start up to end.
func (l *lsm) tryDeleteRows(start, end []byte) error {
	return l.commitRow(l.row().DeleteRange(start, end, nil))
}

// setRow, deleteRow, mergeRow and deleteRows write as trySet, tryDelete,
// a merge and tryDeleteRows do, failing (as fail does) if the store fails.
func (l *lsm) setRow(k, v []byte)           { must0(l.trySet(k, v)) }
func (l *lsm) deleteRow(k []byte)           { must0(l.tryDelete(k)) }
func (l *lsm) mergeRow(k, v []byte)         { must0(l.commitRow(l.row().Merge(k, v, nil))) }
func (l *lsm) deleteRows(start, end []byte) { must0(l.tryDeleteRows(start, end)) }

// must0 fails (as fail does) with err if it is set.
func must0(err error) {
	if err != nil {
		fail(err)
	}
}
