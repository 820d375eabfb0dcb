package state

import (
	"errors"
	"io"
	"reflect"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/typeinfo"
)

// The write-back cache of a map state on Pebble. A map's entries are rows
// of their own (key | namespace | map key), and a map state is read and
// written an entry at a time (a distinct count's "seen", a join's
// pending rows by id): without a cache every Get is a read of the store
// (its memtables, and a filter, index and data block per level) and
// every Put a commit. The cache keeps, per key and namespace, the map's
// recently used entries, decoded, in a Go map of their own, with the same
// flags as the value cache's rows (absent, dirty, unstored): a Get that
// hits costs two map lookups, a Put marks its entry dirty, and dirty
// entries reach the store at the next flush of the caches (before a
// snapshot or a scan) or when their map is evicted.
//
// A map is cached and evicted whole (its entries, not all of the map's
// rows): so a cached map whose rows are all among its entries stays
// complete until it leaves the cache, and a Get of a missing entry of a
// complete map reads nothing. A map is complete from a Clear on (its rows
// are deleted by range, and its cached entries dropped, in one step).
// Eviction runs a clock over the maps (one used since the hand last
// passed is kept one more round), as the value cache does over rows.
//
// An entry is charged its slot in its map at the map's lowest load, and,
// if the map key or value type holds pointers, the encodings of its map
// key and value; a map is charged its slot in the cache's map, its
// header, and its row prefix if the key or namespace type holds
// pointers.

// mapCache is the cache of one map state, its map keys of type UK and
// values of type UV.
type mapCache[K, N, UK comparable, UV any] struct {
	l  *lsm
	st *lsmState[K]
	nc codec.Codec[N] // nil: the void namespace
	kc codec.Codec[UK]
	vc codec.Codec[UV]

	maps map[cacheKey[K, N]]*cachedMap[UK, UV]
	// listed holds the maps that have had dirty entries since the last
	// flush (each once: see cachedMap.listed).
	listed  []cacheKey[K, N]
	charged int64
	rowsLen int // entries cached, over all maps
	// entryCost is what an entry costs beside its encodings: its slot at
	// its map's lowest load, and its place in the dirty list. mapCost is
	// what a map costs beside its row prefix.
	entryCost, mapCost int64
	// inline: map keys and values hold nothing outside their entry;
	// keyInline: the same of keys and namespaces.
	inline, keyInline bool

	row, buf []byte // scratch encodings

	// filter rules out entries the store cannot have (see rowFilter): most
	// reads of a distinct count are of entries it has not seen.
	filter rowFilter
	// reads counts the reads of the store.
	reads int
}

// cachedMap is the cached part of one key's map in one namespace.
type cachedMap[UK comparable, UV any] struct {
	rows map[UK]cacheEntry[UV]
	// dirty lists the entries that turned dirty since the last flush
	// (some may have been listed twice).
	dirty []UK
	// complete: every row of the map is among rows.
	complete bool
	// listed: the map is in mapCache.listed; ref: used since the clock's
	// hand last passed.
	listed, ref bool
	charged     int64
}

func newMapCache[K, N, UK comparable, UV any](st *lsmState[K], nc codec.Codec[N], kc codec.Codec[UK], vc codec.Codec[UV]) *mapCache[K, N, UK, UV] {
	var (
		ck cacheKey[K, N]
		uk UK
		e  cacheEntry[UV]
		m  cachedMap[UK, UV]
	)
	c := &mapCache[K, N, UK, UV]{
		l: st.b.lsm, st: st, nc: nc, kc: kc, vc: vc,
		maps:      map[cacheKey[K, N]]*cachedMap[UK, UV]{},
		entryCost: int64(mapSlotCost(unsafe.Sizeof(uk)+unsafe.Sizeof(e)) + int32(unsafe.Sizeof(uk))),
		// The map's slot in the cache, its struct, and an empty Go map's
		// header and first group.
		mapCost:   int64(mapSlotCost(unsafe.Sizeof(ck)+8)+int32(unsafe.Sizeof(m))) + 48 + 8*int64(unsafe.Sizeof(uk)+unsafe.Sizeof(e)+1),
		inline:    !typeinfo.HasPointers(reflect.TypeFor[UK]()) && !typeinfo.HasPointers(reflect.TypeFor[UV]()),
		keyInline: !typeinfo.HasPointers(reflect.TypeFor[K]()) && !typeinfo.HasPointers(reflect.TypeFor[N]()),
	}
	st.b.lsm.caches = append(st.b.lsm.caches, c)
	return c
}

// current returns the cache key of the current key in namespace ns.
func (c *mapCache[K, N, UK, UV]) current(ns N) cacheKey[K, N] { return currentCacheKey(c.st, ns) }

// charge counts n more bytes against m (nil: the cache alone) and the
// caches' budget.
func (c *mapCache[K, N, UK, UV]) charge(m *cachedMap[UK, UV], n int64) {
	if m != nil {
		m.charged += n
	}
	c.charged += n
	c.l.cacheUsed += n
}

// entrySize returns what entry e of map key uk costs.
func (c *mapCache[K, N, UK, UV]) entrySize(uk UK, e *cacheEntry[UV]) int64 {
	n := c.entryCost
	if !c.inline {
		c.buf = c.kc.Append(c.buf[:0], uk)
		if !e.absent() {
			c.buf = c.vc.Append(c.buf, e.val)
		}
		n += int64(len(c.buf))
	}
	return min(n, 1<<(32-metaShift)-1)
}

// recharge charges entry e of map m its current size.
func (c *mapCache[K, N, UK, UV]) recharge(m *cachedMap[UK, UV], uk UK, e *cacheEntry[UV]) {
	size := c.entrySize(uk, e)
	c.charge(m, size-int64(e.charged()))
	e.meta = uint32(size)<<metaShift | e.meta&(1<<metaShift-1)
}

// mapFor returns the cached map of ck, adding an empty one (not complete)
// if there is none, after making room in the caches if they are full.
func (c *mapCache[K, N, UK, UV]) mapFor(ck cacheKey[K, N]) *cachedMap[UK, UV] {
	if c.l.cacheUsed >= c.l.cacheBudget {
		c.l.evict()
	}
	m := c.maps[ck]
	if m == nil {
		m = &cachedMap[UK, UV]{rows: map[UK]cacheEntry[UV]{}}
		size := c.mapCost
		if !c.keyInline {
			size += int64(len(c.st.b.encodedKey()) + 2)
		}
		c.charge(m, size)
		c.maps[ck] = m
	}
	m.ref = true
	return m
}

// markDirty lists entry uk of map m (of ck) as dirty.
func (c *mapCache[K, N, UK, UV]) markDirty(ck cacheKey[K, N], m *cachedMap[UK, UV], uk UK) {
	m.dirty = append(m.dirty, uk)
	if len(m.dirty) > 2*len(m.rows)+64 {
		m.dirty = m.dirty[:0]
		for k, e := range m.rows {
			if e.dirty() {
				m.dirty = append(m.dirty, k)
			}
		}
	}
	if !m.listed {
		m.listed = true
		c.listed = append(c.listed, ck)
	}
}

// get returns the value of map key uk of the current key in namespace
// ns, and false if it has none, reading the row from the store into the
// cache if the cache does not decide it. h builds the row's key.
func (c *mapCache[K, N, UK, UV]) get(h *lsmHandle[K, N], ns N, uk UK) (UV, bool) {
	var zero UV
	ck := c.current(ns)
	if m := c.maps[ck]; m != nil {
		m.ref = true
		if e, ok := m.rows[uk]; ok {
			return e.val, !e.absent()
		}
		if m.complete {
			return zero, false
		}
	}
	k := c.kc.Append(h.appendRow(h.key[:0], ns), uk)
	h.key = k
	if !c.filter.valid && !c.filter.off {
		c.l.buildFilter(&c.filter, c.st.b.kgs, c.st.id)
	}
	var (
		v      []byte
		closer io.Closer
		err    = pebble.ErrNotFound
	)
	if !c.filter.valid || c.filter.mayHave(k) {
		c.reads++
		v, closer, err = h.db().Get(k)
	}
	e := cacheEntry[UV]{meta: metaAbsent | metaUnstored}
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		fail(err)
	default:
		e.val, err = decodeExactly(c.vc, v, "map value")
		_ = closer.Close()
		if err != nil {
			fail(err)
		}
		e.meta = 0
	}
	m := c.mapFor(ck)
	c.recharge(m, uk, &e)
	m.rows[uk] = e
	c.rowsLen++
	return e.val, !e.absent()
}

// set makes v the value of map key uk of the current key in namespace
// ns, or removes the entry if absent, without reading the store.
func (c *mapCache[K, N, UK, UV]) set(ns N, uk UK, v UV, absent bool) {
	ck := c.current(ns)
	m := c.mapFor(ck)
	e, ok := m.rows[uk]
	if !ok {
		c.rowsLen++
		if m.complete {
			// The store has no row of the map that the cache lacks.
			e.set(metaUnstored)
		}
	}
	e.val = v
	e.setAbsent(absent)
	if !ok || !e.dirty() {
		// Measured when it enters the cache or turns dirty (see the
		// value cache).
		c.recharge(m, uk, &e)
	}
	if !e.dirty() {
		e.set(metaDirty)
		c.markDirty(ck, m, uk)
	}
	m.rows[uk] = e
}

// entries returns the entries of the current key's map in namespace ns
// if the cache holds all of them.
func (c *mapCache[K, N, UK, UV]) entries(ns N) (map[UK]cacheEntry[UV], bool) {
	m := c.maps[c.current(ns)]
	if m == nil || !m.complete {
		return nil, false
	}
	m.ref = true
	return m.rows, true
}

// commitMap writes the dirty entries of map ck to the store, which is
// about to be read for its rows.
func (c *mapCache[K, N, UK, UV]) commitMap(ck cacheKey[K, N]) {
	m := c.maps[ck]
	if m == nil || len(m.dirty) == 0 {
		return
	}
	w := c.l.writer("writing a map's entries")
	if err := c.writeMap(w, ck, m); err != nil {
		w.Close()
		fail(err)
	}
	w.finish()
}

// clear drops the current key's cached map in namespace ns (its rows are
// being deleted by range), leaving an empty, complete one in its place.
func (c *mapCache[K, N, UK, UV]) clear(ns N) {
	ck := c.current(ns)
	if m := c.maps[ck]; m != nil {
		c.remove(ck, m)
	}
	c.mapFor(ck).complete = true
}

// dropKey drops the current key's cached maps in every namespace (their
// rows are being deleted by range).
func (c *mapCache[K, N, UK, UV]) dropKey() {
	var ns N
	ck := c.current(ns)
	if c.nc == nil {
		if m := c.maps[ck]; m != nil {
			c.remove(ck, m)
		}
		return
	}
	for k, m := range c.maps {
		if k.key == ck.key {
			c.remove(k, m)
		}
	}
}

// remove drops cached map m of ck, dirty entries and all.
func (c *mapCache[K, N, UK, UV]) remove(ck cacheKey[K, N], m *cachedMap[UK, UV]) {
	delete(c.maps, ck)
	c.rowsLen -= len(m.rows)
	c.charge(nil, -m.charged)
}

// writeMap adds the dirty entries of map m of ck to batch and marks them
// clean.
func (c *mapCache[K, N, UK, UV]) writeMap(batch rowSink, ck cacheKey[K, N], m *cachedMap[UK, UV]) error {
	if len(m.dirty) == 0 {
		return nil
	}
	c.row = appendCachedRow(c.row[:0], c.st, c.nc, ck)
	base := len(c.row)
	for _, uk := range m.dirty {
		e, ok := m.rows[uk]
		if !ok || !e.dirty() {
			continue
		}
		var err error
		switch {
		case e.absent() && e.meta&metaUnstored != 0:
			// A deletion of a row the store does not have.
		case e.absent():
			c.row = c.kc.Append(c.row[:base], uk)
			if !c.filter.valid || c.filter.mayHave(c.row) {
				err = batch.Delete(c.row)
			}
			e.set(metaUnstored)
		default:
			c.row = c.kc.Append(c.row[:base], uk)
			c.buf = c.vc.Append(c.buf[:0], e.val)
			err = batch.Set(c.row, c.buf)
			e.unset(metaUnstored)
			c.filter.add(c.row)
		}
		if err != nil {
			return err
		}
		e.unset(metaDirty)
		m.rows[uk] = e
	}
	m.dirty = m.dirty[:0]
	return nil
}

func (c *mapCache[K, N, UK, UV]) flush(batch *rowWriter, evict bool) error {
	for _, ck := range c.listed {
		m := c.maps[ck]
		if m == nil || !m.listed {
			continue
		}
		if err := c.writeMap(batch, ck, m); err != nil {
			return err
		}
		m.listed = false
	}
	c.listed = c.listed[:0]
	if evict {
		c.charge(nil, -c.charged)
		c.rowsLen = 0
		clear(c.maps)
	}
	return nil
}

func (c *mapCache[K, N, UK, UV]) evict(batch *rowWriter, goal int64) error {
	// The map's order is the clock's (each range starts at a random
	// place); two rounds clear every mark, so they drop whatever must go.
	for round := 0; round < 2 && c.charged > goal; round++ {
		for ck, m := range c.maps {
			if c.charged <= goal {
				break
			}
			if m.ref {
				m.ref = false
				continue
			}
			if err := c.writeMap(batch, ck, m); err != nil {
				return err
			}
			// A listed map that leaves is skipped by the next flush.
			m.listed = false
			c.remove(ck, m)
		}
	}
	return nil
}

func (c *mapCache[K, N, UK, UV]) used() int64 { return c.charged }
func (c *mapCache[K, N, UK, UV]) len() int    { return c.rowsLen }
func (c *mapCache[K, N, UK, UV]) restored()   { c.filter.valid = false }

// judge decides row k for a sweep of expired values if the cache holds
// its entry (see rowCache).
func (c *mapCache[K, N, UK, UV]) judge(k []byte, prune rowPrune, cutoff int64) (bool, error) {
	key, ns, rest, err := splitCachedRow(k, c.st, c.nc)
	if err != nil {
		return false, err
	}
	uk, err := decodeExactly(c.kc, rest, "map key")
	if err != nil {
		return false, err
	}
	ck := cacheKey[K, N]{ns, key}
	m := c.maps[ck]
	if m == nil {
		return false, nil
	}
	e, ok := m.rows[uk]
	if !ok {
		return false, nil
	}
	if e.absent() {
		return true, nil
	}
	c.buf = c.vc.Append(c.buf[:0], e.val)
	_, kp, err := prune(nil, c.buf, cutoff)
	if err == nil && kp == keepNone {
		var zero UV
		e.val = zero
		e.set(metaAbsent)
		if !e.dirty() {
			e.set(metaDirty)
			c.markDirty(ck, m, uk)
		}
		c.recharge(m, uk, &e)
		m.rows[uk] = e
	}
	return true, err
}
