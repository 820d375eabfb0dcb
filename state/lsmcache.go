package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/typeinfo"
)

// The write-back cache of a Pebble backend. Value, reducing and
// aggregating states (one row per key and namespace: what running sums,
// window accumulators and most process functions hold) keep their
// recently used rows in front of the store, decoded, in a Go map keyed by
// the key and namespace themselves (not their encodings): a read that hits
// costs one map lookup and decodes nothing, a write replaces the value and
// marks the row dirty, and a read followed by a write of the same key (a
// running sum, a reduce, an aggregate) looks the key up once. Nothing on
// that path makes a system call, takes a lock or allocates.
//
// Dirty rows are encoded and written to the store (see rowWriter) before a
// snapshot (so the store holds everything a checkpoint must), before
// anything that scans the store, and when the caches exceed their share of
// the backend's memory: then each cache writes and drops rows, in the
// order of a clock (a row used since the hand last passed it is kept one
// more round), until the caches use three quarters of their budget. A row
// absent from the store is cached too (as absent), so a miss is paid once;
// a deletion is such a row, dirty, written as a deletion unless the store
// is known to lack the row (a read found none, or its deletion was
// written): a key that comes and goes between two flushes (a request
// waiting for its response) leaves no tombstone.
//
// A row is charged its slot in the map at the map's lowest load and its
// entry in the dirty list; and if its key, namespace or value type holds
// pointers (a string, a slice), what they refer to, estimated by the
// row key's and the value's encodings, measured when the row enters the
// cache, when it turns dirty and when it is written: a value that grows
// in place between two of those is charged its older size until the
// next. A state of scalar rows (a running sum per key) is charged what
// its map takes, so as many of its rows stay cached as the budget holds.

// rowCache is what the store sees of a state's cache.
type rowCache interface {
	// flush writes the dirty rows to batch and marks them clean; if evict,
	// it drops every row.
	flush(batch *rowWriter, evict bool) error
	// evict writes dirty rows to batch and drops rows until the cache
	// uses at most goal bytes.
	evict(batch *rowWriter, goal int64) error
	// used returns the bytes the cache is charged.
	used() int64
	// len returns the number of cached rows.
	len() int
	// judge decides row k (a row key of the cache's state) for a sweep of
	// expired values if the cache holds it: it reports whether it does,
	// and if the cached value has expired at cutoff (by prune), makes the
	// row a dirty deletion.
	judge(k []byte, prune rowPrune, cutoff int64) (cached bool, err error)
	// restored says that rows were written to the state's store other
	// than through the cache (by a restore).
	restored()
}

// cacheKey is a cached row's key and namespace, the namespace first so
// that a zero-size namespace adds no padding.
type cacheKey[K, N comparable] struct {
	ns  N
	key K
}

// cacheEntry is a cached row, held in the cache's map itself so that a
// lookup touches no other memory, and small, so that more of the map
// stays in the processor's caches.
type cacheEntry[T any] struct {
	val T
	// meta is the bytes the entry counts against the budget (above
	// metaShift) and its flags.
	meta uint32
}

const (
	metaAbsent = 1 << iota // the row does not exist (deleted, or never written)
	metaDirty              // differs from the store
	metaRef                // written since the clock's hand last passed
	// metaUnstored: the store has no such row (a read found none, or a
	// deletion was written), so writing the row's deletion is no work
	// at all; a row that never was in the store leaves no tombstone.
	metaUnstored
	metaShift = iota
)

func (e *cacheEntry[T]) absent() bool   { return e.meta&metaAbsent != 0 }
func (e *cacheEntry[T]) dirty() bool    { return e.meta&metaDirty != 0 }
func (e *cacheEntry[T]) ref() bool      { return e.meta&metaRef != 0 }
func (e *cacheEntry[T]) charged() int   { return int(e.meta >> metaShift) }
func (e *cacheEntry[T]) set(f uint32)   { e.meta |= f }
func (e *cacheEntry[T]) unset(f uint32) { e.meta &^= f }

// setAbsent sets or clears the entry's absent flag.
func (e *cacheEntry[T]) setAbsent(absent bool) {
	if absent {
		e.set(metaAbsent)
	} else {
		e.unset(metaAbsent)
	}
}

// valueCache is the cache of one state of one row per key and namespace,
// its values of type T.
type valueCache[K, N comparable, T any] struct {
	l  *lsm
	st *lsmState[K]
	nc codec.Codec[N] // nil: the void namespace
	// enc encodes the values as the store's rows hold them.
	enc valueEncoding[T]

	rows map[cacheKey[K, N]]cacheEntry[T]
	// dirty lists the rows that turned dirty since the last flush (some
	// may have been written by an eviction since, or listed twice), so
	// that a flush costs what changed, not what is cached.
	dirty   []cacheKey[K, N]
	charged int64
	// overhead is what an entry costs beside what its key, namespace and
	// value hold outside it: its slot of the map at the map's lowest load,
	// and its entry in the dirty list.
	overhead int32
	// inline: key, namespace and value hold nothing outside the entry
	// (no pointers), so an entry costs its overhead alone; otherwise the
	// encodings of its row key and value stand for what they hold.
	inline bool

	buf, row []byte // scratch encodings

	// filter rules out rows the store cannot have (see rowFilter).
	filter rowFilter
	// ruledOut is the row the last get found absent by the filter alone,
	// if ruledOutSet: get does not cache such a row, so that probing for
	// rows that do not exist (a sliding window's empty panes) does not
	// push out the rows that do, and a set of that row right after (a
	// read, then a write) marks it unstored all the same.
	ruledOut    cacheKey[K, N]
	ruledOutSet bool
	// reads counts the reads of the store.
	reads int
}

func newValueCache[K, N comparable, T any](st *lsmState[K], nc codec.Codec[N], enc valueEncoding[T]) *valueCache[K, N, T] {
	var (
		k cacheKey[K, N]
		e cacheEntry[T]
	)
	c := &valueCache[K, N, T]{
		l: st.b.lsm, st: st, nc: nc, enc: enc,
		rows:     map[cacheKey[K, N]]cacheEntry[T]{},
		overhead: mapSlotCost(unsafe.Sizeof(k)+unsafe.Sizeof(e)) + int32(unsafe.Sizeof(k)),
		inline:   !typeinfo.HasPointers(reflect.TypeFor[K]()) && !typeinfo.HasPointers(reflect.TypeFor[N]()) && !typeinfo.HasPointers(reflect.TypeFor[T]()),
	}
	st.b.lsm.caches = append(st.b.lsm.caches, c)
	return c
}

// current returns the cache key of the current key in namespace ns.
func (c *valueCache[K, N, T]) current(ns N) cacheKey[K, N] { return currentCacheKey(c.st, ns) }

// currentCacheKey returns the cache key of st's current key in namespace
// ns.
func currentCacheKey[K, N comparable](st *lsmState[K], ns N) cacheKey[K, N] {
	b := st.b
	if b.kgIdx < 0 {
		panic("state: keyed state accessed before SetCurrentKey")
	}
	return cacheKey[K, N]{ns, b.key}
}

// get returns the current key's value in namespace ns, and false if it
// has none, reading the row from the store into the cache if the cache
// does not hold it and the filter does not rule it out (see ruledOut).
// h builds the row's key.
func (c *valueCache[K, N, T]) get(h *lsmHandle[K, N], ns N) (T, bool) {
	ck := c.current(ns)
	c.ruledOutSet = false
	if e, ok := c.rows[ck]; ok {
		return e.val, !e.absent()
	}
	var zero T
	k := h.appendRow(h.key[:0], ns)
	h.key = k
	if !c.filter.valid && !c.filter.off {
		c.buildFilter()
	}
	if c.filter.valid && !c.filter.mayHave(k) {
		c.ruledOut, c.ruledOutSet = ck, true
		return zero, false
	}
	c.reads++
	v, closer, err := h.db().Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		c.insert(ck, cacheEntry[T]{meta: metaAbsent | metaUnstored}, len(k))
		return zero, false
	}
	if err != nil {
		fail(err)
	}
	t, err := c.enc.decode(v)
	size := len(k) + len(v)
	_ = closer.Close()
	if err != nil {
		fail(err)
	}
	c.insert(ck, cacheEntry[T]{val: t}, size)
	return t, true
}

// set makes v the current key's value in namespace ns, or deletes the row
// if absent, without reading the store.
func (c *valueCache[K, N, T]) set(ns N, v T, absent bool) {
	ck := c.current(ns)
	ruledOut := c.ruledOutSet && c.ruledOut == ck
	c.ruledOutSet = false
	e, ok := c.rows[ck]
	if !ok {
		e = cacheEntry[T]{val: v, meta: metaDirty | metaRef}
		if ruledOut {
			e.set(metaUnstored) // the get just before found no row
		}
		e.setAbsent(absent)
		c.insert(ck, e, len(c.st.b.encodedKey())+2)
		return
	}
	e.val = v
	e.setAbsent(absent)
	e.set(metaRef)
	if !e.dirty() {
		e.set(metaDirty)
		c.dirty = append(c.dirty, ck)
		c.measure(&e, len(c.st.b.encodedKey())+2)
	}
	c.rows[ck] = e
}

// measure charges e its current size, with keyLen bytes of its row key.
func (c *valueCache[K, N, T]) measure(e *cacheEntry[T], keyLen int) {
	n := 0
	if !e.absent() && !c.inline {
		c.buf = c.enc.append(c.buf[:0], e.val)
		n = len(c.buf)
	}
	c.recharge(e, keyLen+n)
}

// recharge charges e its overhead and, unless the cache is inline, enc
// bytes of encodings.
func (c *valueCache[K, N, T]) recharge(e *cacheEntry[T], enc int) {
	size := int(c.overhead)
	if !c.inline {
		size += enc
	}
	size = min(size, 1<<(32-metaShift)-1)
	c.charged += int64(size - e.charged())
	c.l.cacheUsed += int64(size - e.charged())
	e.meta = uint32(size)<<metaShift | e.meta&(1<<metaShift-1)
}

// insert adds the current key's row ck, of keyLen bytes of row key (and
// of the value's encoding, if not dirty), making room first if the
// caches are full.
func (c *valueCache[K, N, T]) insert(ck cacheKey[K, N], e cacheEntry[T], size int) {
	if c.l.cacheUsed >= c.l.cacheBudget {
		c.l.evict()
	}
	if e.dirty() {
		c.dirty = append(c.dirty, ck)
		c.measure(&e, size)
		if len(c.dirty) > 2*len(c.rows)+1024 {
			c.compactDirty()
		}
	} else {
		c.recharge(&e, size)
	}
	c.rows[ck] = e
}

// compactDirty lists each dirty row once: rows evicted or listed twice
// since the last flush make the list longer than what is dirty.
func (c *valueCache[K, N, T]) compactDirty() {
	c.dirty = c.dirty[:0]
	for ck, e := range c.rows {
		if e.dirty() {
			c.dirty = append(c.dirty, ck)
		}
	}
}

// remove drops row ck.
func (c *valueCache[K, N, T]) remove(ck cacheKey[K, N], e *cacheEntry[T]) {
	delete(c.rows, ck)
	c.charged -= int64(e.charged())
	c.l.cacheUsed -= int64(e.charged())
}

// write adds row ck to batch if it is dirty, and marks it clean.
func (c *valueCache[K, N, T]) write(batch rowSink, ck cacheKey[K, N], e *cacheEntry[T]) error {
	if !e.dirty() {
		return nil
	}
	if e.absent() && e.meta&metaUnstored != 0 {
		// A deletion of a row the store does not have.
		e.unset(metaDirty)
		return nil
	}
	c.row = appendCachedRow(c.row[:0], c.st, c.nc, ck)
	return c.writeRow(batch, e, c.row)
}

// writeRow adds dirty row e, of row key row, to batch and marks it clean.
func (c *valueCache[K, N, T]) writeRow(batch rowSink, e *cacheEntry[T], row []byte) error {
	var err error
	switch {
	case e.absent() && e.meta&metaUnstored != 0:
		// A deletion of a row the store does not have.
	case e.absent() && c.filter.valid && !c.filter.mayHave(row):
		// A deletion of a row the store cannot have either.
		e.set(metaUnstored)
	case e.absent():
		err = batch.Delete(row)
		c.recharge(e, len(row))
		e.set(metaUnstored)
	default:
		c.buf = c.enc.append(c.buf[:0], e.val)
		err = batch.Set(row, c.buf)
		c.recharge(e, len(row)+len(c.buf))
		e.unset(metaUnstored)
		c.filter.add(row)
	}
	if err != nil {
		return err
	}
	e.unset(metaDirty)
	return nil
}

func (c *valueCache[K, N, T]) dirtyLen() int { return len(c.dirty) }

func (c *valueCache[K, N, T]) writeSorted(t *rowTable, full func() error, evict bool) error {
	if len(c.dirty) == 0 {
		if evict {
			c.drop()
		}
		return nil
	}
	// one writes the dirty row e of ck to t, and t out when it is full.
	one := func(ck cacheKey[K, N], e cacheEntry[T]) error {
		err := c.write(t, ck, &e)
		c.rows[ck] = e
		if err == nil && t.full() {
			err = full()
		}
		return err
	}
	if len(c.dirty) < len(c.rows)/4 {
		// Few of the rows are dirty: look them up.
		for _, ck := range c.dirty {
			if e, ok := c.rows[ck]; ok && e.dirty() {
				if err := one(ck, e); err != nil {
					return err
				}
			}
		}
	} else {
		for ck, e := range c.rows {
			if e.dirty() {
				if err := one(ck, e); err != nil {
					return err
				}
			}
		}
	}
	c.dirty = c.dirty[:0]
	if evict {
		c.drop()
	}
	return nil
}

// drop drops every row.
func (c *valueCache[K, N, T]) drop() {
	c.l.cacheUsed -= c.charged
	c.charged = 0
	clear(c.rows)
}

func (c *valueCache[K, N, T]) flush(batch *rowWriter, evict bool) error {
	for _, ck := range c.dirty {
		e, ok := c.rows[ck]
		if !ok || !e.dirty() {
			continue
		}
		if err := c.write(batch, ck, &e); err != nil {
			return err
		}
		c.rows[ck] = e
	}
	c.dirty = c.dirty[:0]
	if evict {
		c.drop()
	}
	return nil
}

func (c *valueCache[K, N, T]) evict(batch *rowWriter, goal int64) error {
	// The map's order is the clock's (each range starts at a random
	// place); two rounds clear every mark, so they drop whatever must go.
	for round := 0; round < 2 && c.charged > goal; round++ {
		for ck, e := range c.rows {
			if c.charged <= goal {
				break
			}
			if e.ref() {
				e.unset(metaRef)
				c.rows[ck] = e
				continue
			}
			if err := c.write(batch, ck, &e); err != nil {
				return err
			}
			c.remove(ck, &e)
		}
	}
	return nil
}

// buildFilter builds the cache's filter from the store's rows, within
// what the backend's filters may take of the caches' budget: an eighth.
func (c *valueCache[K, N, T]) buildFilter() { c.l.buildFilter(&c.filter, c.st.b.kgs, c.st.id) }

// buildFilter builds f from the rows of state id in the key groups kgs,
// within what the backend's filters may take of the caches' budget: an
// eighth.
func (l *lsm) buildFilter(f *rowFilter, kgs KeyGroupRange, id uint16) {
	limit := l.cacheBudget/8 - (l.filterBytes - f.charged)
	d, err := f.build(l.store(), kgs, id, limit)
	l.cacheUsed += d
	l.filterBytes += d
	if err != nil {
		fail(err)
	}
}

func (c *valueCache[K, N, T]) restored() { c.filter.valid, c.ruledOutSet = false, false }

func (c *valueCache[K, N, T]) used() int64 { return c.charged }
func (c *valueCache[K, N, T]) len() int    { return len(c.rows) }

func (c *valueCache[K, N, T]) judge(k []byte, prune rowPrune, cutoff int64) (bool, error) {
	key, ns, _, err := splitCachedRow(k, c.st, c.nc)
	if err != nil {
		return false, err
	}
	ck := cacheKey[K, N]{ns, key}
	e, ok := c.rows[ck]
	if !ok {
		return false, nil
	}
	if e.absent() {
		return true, nil
	}
	c.buf = c.enc.append(c.buf[:0], e.val)
	_, kp, err := prune(nil, c.buf, cutoff)
	if err == nil && kp == keepNone {
		var zero T
		e.val = zero
		e.set(metaAbsent)
		if !e.dirty() {
			e.set(metaDirty)
			c.dirty = append(c.dirty, ck)
		}
		c.recharge(&e, len(k))
		c.rows[ck] = e
	}
	return true, err
}

// dropKey forgets the cached rows of the current key in every namespace
// (their rows in the store are being deleted by range).
func (c *valueCache[K, N, T]) dropKey() {
	var ns N
	ck := c.current(ns)
	if unsafe.Sizeof(ns) == 0 {
		if e, ok := c.rows[ck]; ok {
			c.remove(ck, &e)
		}
		return
	}
	for k, e := range c.rows {
		if k.key == ck.key {
			c.remove(k, &e)
		}
	}
}

// evict makes room in the caches: each writes and drops rows until the
// caches use three quarters of their budget (each its share of that, in
// proportion to what it uses).
func (l *lsm) evict() {
	l.evictions++
	w := l.writer("writing the cache's rows")
	if err := l.failed(); err != nil {
		w.Close()
		fail(err)
	}
	goal := float64(l.cacheBudget) * 3 / 4
	total := float64(l.cacheUsed)
	for _, c := range l.caches {
		if err := c.evict(w, int64(float64(c.used())*goal/total)); err != nil {
			w.Close()
			fail(err)
		}
	}
	w.finish()
}

// flushCaches writes every cache's dirty rows to the store, emptying the
// caches if evict. A failure is a store failure (see fail).
func (l *lsm) flushCaches(evict bool) { must0(l.tryFlushCaches(evict)) }

// tryFlushCaches writes every cache's dirty rows to the store, emptying
// the caches if evict: many rows as sorted tables (see lsmtable.go), the
// rest through batches.
func (l *lsm) tryFlushCaches(evict bool) error {
	if err := l.failed(); err != nil {
		return err
	}
	var sorted []sortedCache
	listed := 0
	for _, c := range l.caches {
		if sc, ok := c.(sortedCache); ok {
			sorted = append(sorted, sc)
			listed += sc.dirtyLen()
		}
	}
	if listed < l.tableRows {
		sorted = nil
	}
	w := l.writer("writing the cache's rows")
	for _, c := range l.caches {
		if sorted != nil {
			if _, ok := c.(sortedCache); ok {
				continue
			}
		}
		if err := c.flush(w, evict); err != nil {
			w.Close()
			return err
		}
	}
	err := w.Commit()
	w.Close()
	if err != nil || sorted == nil {
		return err
	}
	return l.writeTables(sorted, evict)
}

// appendCachedRow appends the store row of st's cached key ck: key group,
// state id, key and namespace (a zero byte for the void namespace, whose
// codec nc is nil).
func appendCachedRow[K, N comparable](dst []byte, st *lsmState[K], nc codec.Codec[N], ck cacheKey[K, N]) []byte {
	b := st.b
	kg := KeyGroupFor(b.hasher(ck.key), b.maxP)
	dst = appendPrefixed(appendRowPrefix(dst, kg, st.id), b.keyCodec, ck.key)
	if nc == nil {
		return append(dst, 0)
	}
	return appendPrefixed(dst, nc, ck.ns)
}

// mapSlotCost is what an entry of size bytes (key and value) costs in a
// Go map at its lowest load: a slot and its control byte, in a table
// filled to 7/16 (half its 7/8 maximum, right after it grew).
func mapSlotCost(size uintptr) int32 { return int32((size + 1) * 16 / 7) }

// splitCachedRow decodes the key and namespace of row key k of state st
// (nc nil: the void namespace), returning them and what follows them (a
// map key).
func splitCachedRow[K, N comparable](k []byte, st *lsmState[K], nc codec.Codec[N]) (key K, ns N, rest []byte, err error) {
	if len(k) < 4 {
		return key, ns, nil, corrupt("row key of %d bytes", len(k))
	}
	rest = k[4:]
	kl, n := binary.Uvarint(rest)
	if n <= 0 || uint64(len(rest)-n) < kl {
		return key, ns, nil, corrupt("row key of %d bytes", len(k))
	}
	if key, err = decodeExactly(st.b.keyCodec, rest[n:n+int(kl)], "key"); err != nil {
		return key, ns, nil, err
	}
	rest = rest[n+int(kl):]
	nl, n := binary.Uvarint(rest)
	if n <= 0 || uint64(len(rest)-n) < nl {
		return key, ns, nil, fmt.Errorf("%w: row key without a namespace", ErrCorrupt)
	}
	if nc != nil {
		if ns, err = decodeExactly(nc, rest[n:n+int(nl)], "namespace"); err != nil {
			return key, ns, nil, err
		}
	}
	return key, ns, rest[n+int(nl):], nil
}
