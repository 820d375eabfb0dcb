package state

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The write-back cache of a Pebble backend. Value, reducing and
// aggregating states (one row per key and namespace: what running sums,
// window accumulators and most process functions hold) keep their
// recently used rows in a Go map in front of the store, encoded: a read
// that hits takes no lock and makes no call into Pebble, a write only
// marks the row dirty. Dirty rows go to the store in one batch when the
// cache is full (and the cache is emptied), before a snapshot (so the
// store holds everything a checkpoint must), and before anything that
// scans the store. The cache's share of the backend's memory bounds it;
// a row absent from the store is cached too, so a miss is paid once.

// cacheEntryOverhead estimates what a cached row costs beyond its key's
// and value's bytes: the map's slot, the entry and the string header.
const cacheEntryOverhead = 96

// rowCache is one state's cache.
type rowCache struct {
	l    *lsm
	rows map[string]*cachedRow
}

type cachedRow struct {
	val     []byte
	absent  bool // the row does not exist (deleted, or never written)
	dirty   bool // differs from the store
	charged int64
}

func newRowCache(l *lsm) *rowCache {
	c := &rowCache{l: l, rows: map[string]*cachedRow{}}
	l.caches = append(l.caches, c)
	return c
}

// get returns row k's value as the cache knows it: ok is false if the
// cache does not hold the row, absent true if the row does not exist.
func (c *rowCache) get(k []byte) (val []byte, absent, ok bool) {
	r, ok := c.rows[string(k)]
	if !ok {
		return nil, false, false
	}
	return r.val, r.absent, true
}

// put caches row k, dirty if it changed rather than was read.
func (c *rowCache) put(k, v []byte, absent, dirty bool) {
	r, ok := c.rows[string(k)]
	if !ok {
		if c.l.cacheUsed >= c.l.cacheBudget {
			c.l.evict()
		}
		r = &cachedRow{}
		c.rows[string(k)] = r
		r.charged = int64(len(k)) + cacheEntryOverhead
		c.l.cacheUsed += r.charged
	}
	c.l.cacheUsed -= int64(cap(r.val))
	r.val = append(r.val[:0], v...)
	c.l.cacheUsed += int64(cap(r.val))
	r.absent, r.dirty = absent, r.dirty || dirty
}

// write adds row k to batch if it is dirty, and marks it clean.
func (r *cachedRow) write(batch *pebble.Batch, k string) error {
	if !r.dirty {
		return nil
	}
	var err error
	if r.absent {
		err = batch.Delete([]byte(k), nil)
	} else {
		err = batch.Set([]byte(k), r.val, nil)
	}
	r.dirty = err != nil
	return err
}

// flush writes the dirty rows to batch and, if evict, empties the cache.
func (c *rowCache) flush(batch *pebble.Batch, evict bool) error {
	for k, r := range c.rows {
		if err := r.write(batch, k); err != nil {
			return err
		}
		if evict {
			c.l.cacheUsed -= r.charged + int64(cap(r.val))
			delete(c.rows, k)
		}
	}
	return nil
}

// dropPrefix forgets the cached rows whose keys start with p (the store's
// rows are being deleted by range).
func (c *rowCache) dropPrefix(p []byte) {
	for k, r := range c.rows {
		if bytes.HasPrefix([]byte(k), p) {
			c.l.cacheUsed -= r.charged + int64(cap(r.val))
			delete(c.rows, k)
		}
	}
}

// evict makes room in the caches: it drops rows, in the maps' random
// order, until they use three quarters of their budget, writing the dirty
// ones among them to the store in one batch.
func (l *lsm) evict() {
	batch := l.store().NewBatch()
	defer batch.Close()
	goal := l.cacheBudget * 3 / 4
	for _, c := range l.caches {
		for k, r := range c.rows {
			if l.cacheUsed <= goal {
				break
			}
			if err := r.write(batch, k); err != nil {
				fail(err)
			}
			l.cacheUsed -= r.charged + int64(cap(r.val))
			delete(c.rows, k)
		}
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		fail(fmt.Errorf("writing the cache's rows: %w", err))
	}
}

// flushCaches writes every cache's dirty rows to the store in one batch,
// emptying the caches if evict. A failure is a store failure (see fail).
func (l *lsm) flushCaches(evict bool) {
	batch := l.store().NewBatch()
	defer batch.Close()
	for _, c := range l.caches {
		if err := c.flush(batch, evict); err != nil {
			fail(err)
		}
	}
	if batch.Empty() {
		return
	}
	if err := batch.Commit(pebble.NoSync); err != nil {
		fail(fmt.Errorf("writing the cache's rows: %w", err))
	}
}
