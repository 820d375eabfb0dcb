package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
)

// Timers in the embedded LSM store (Flink's RocksDB timer service): a
// Timers of a backend created WithPebble keeps one row per timer,
//
//	key group u16 | state id u16 | timestamp u64 | key hash u32 | key | namespace
//
// with the timestamp's sign bit flipped and both integers big-endian, and
// the key's and namespace's encodings escaped so that they order as the
// raw encodings do and end where they end (0x00 is written 0x00 0xff, and
// 0x00 0x01 ends each). A key group's rows are then in firing order, the
// order of the heap queue. In memory each key group keeps only its first
// rows (and whether they are all of them), and a heap orders the key
// groups by their first row.
//
// The rows a key group keeps are a write-back cache: a timer registered
// among them is only marked dirty, and written to the store when the
// store must hold it (before a snapshot, with the other states' caches)
// or when it leaves the cache for a later row. A dirty timer deleted or
// fired before then never reaches the store, so a timer that lives less
// than a checkpoint interval (a request's time-out, cancelled when its
// response comes) costs no write, no tombstone and no read. The other
// writes (a timer registered or deleted beyond the cached rows, a row
// that leaves the cache dirty, the deletion of a fired row the store
// has) wait among the pending writes, one per row, the latest, until
// the store is read for timer rows or must hold them: a window's timer
// registered again for every element costs a map lookup, not a commit
// to the store. The store is read only when a key group's cached rows
// run out and to look up a timer beyond them.

// timerCacheRows bounds the rows a key group keeps in memory. The rows
// also count against the budget of the backend's write-back caches,
// which halves the groups' caches when it runs out (see evict).
const timerCacheRows = 256

// timerRowOverhead is what a cached row costs beside its key's bytes:
// its slice header, flag and allocation.
const timerRowOverhead = 48

// timerFreeRows bounds the row buffers kept for reuse.
const timerFreeRows = 256

type lsmTimers struct {
	id        uint16
	lsm       *lsm
	bytes     int64        // charged for the cached rows
	rows      int          // timerCacheRows, but in tests
	groups    []timerGroup // by key group index
	groupHeap              // key groups with timers, by first row
	row       []byte       // scratch
	// listed holds the key groups that have had dirty rows since the
	// last flush (each once: see timerGroup.listed).
	listed []int32
	// free holds row buffers of deleted timers, for new ones.
	free [][]byte
	// pending holds the writes not made to the store yet of rows that
	// are not dirty cached rows: per row, whether it is deleted.
	pending pendingRows
}

// timerGroup is what a key group keeps in memory of its rows: the first
// of them, in order (every row at or below the last one is among them),
// whether they are all of them, and a row below which none can be (the
// last one fired or deleted first, or a lower one registered since),
// where reading the store's rows again starts, past the deletions of
// earlier timers.
//
// A cached row is dirty if the store does not have it yet; every row
// beyond the cached ones is in the store, and the store has no row the
// queue does not.
type timerGroup struct {
	cache    []timerRow
	complete bool
	floor    []byte
	// dirty counts the dirty rows in cache; listed says the group is in
	// lsmTimers.listed.
	dirty  int
	listed bool
}

// timerRow is a cached row: its key, and whether the store lacks it.
type timerRow struct {
	k     []byte
	dirty bool
}

func newLSMTimers(store *lsm, id uint16, groups int) *lsmTimers {
	l := &lsmTimers{id: id, lsm: store, rows: timerCacheRows, groups: make([]timerGroup, groups), groupHeap: newGroupHeap(groups)}
	for i := range l.groups {
		l.groups[i].complete = true
	}
	return l
}

// charge counts n more bytes of cached rows (n < 0: fewer).
func (l *lsmTimers) charge(n int64) {
	l.bytes += n
	if l.lsm != nil {
		l.lsm.cacheUsed += n
	}
}

// cacheRow returns r as a new cached row, charged.
func (l *lsmTimers) cacheRow(r []byte, dirty bool) timerRow {
	l.charge(int64(len(r) + timerRowOverhead))
	return timerRow{k: l.clone(r), dirty: dirty}
}

// uncache drops a cached row's charge and keeps its buffer for reuse,
// unless keep (the caller keeps the buffer).
func (l *lsmTimers) uncache(row timerRow, keep bool) {
	l.charge(-int64(len(row.k) + timerRowOverhead))
	if !keep {
		l.recycle(row.k)
	}
}

// clone returns a copy of r, in a reused buffer if one is free.
func (l *lsmTimers) clone(r []byte) []byte {
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free = l.free[:n-1]
		return append(b[:0], r...)
	}
	return slices.Clone(r)
}

// recycle keeps b, a row no longer referenced, for reuse.
func (l *lsmTimers) recycle(b []byte) {
	if b != nil && len(l.free) < timerFreeRows {
		l.free = append(l.free, b)
	}
}

// setFloor makes r, a buffer the group now owns, its floor.
func (l *lsmTimers) setFloor(g *timerGroup, r []byte) {
	l.recycle(g.floor)
	g.floor = r
}

// pendingRows are writes of rows kept in memory until the store must
// have them: the latest write of each row, set or deleted. Its keys are
// copies of the rows in an arena that lives until the writes are made.
type pendingRows struct {
	rows  map[string]bool // row → deleted
	arena []byte
}

// pendingRowOverhead is what a pending write costs beside its row's
// bytes: its map slot and string header.
const pendingRowOverhead = 48

// pendingArenaChunk is the size of the arena's chunks of row bytes.
const pendingArenaChunk = 64 << 10

// write records the write of row r (a deletion if del), replacing an
// earlier one of the same row. It returns the bytes newly charged.
func (p *pendingRows) write(r []byte, del bool) int64 {
	if d, ok := p.rows[string(r)]; ok {
		if d != del {
			p.rows[string(r)] = del
		}
		return 0
	}
	if p.rows == nil {
		p.rows = make(map[string]bool)
	}
	if len(p.arena)+len(r) > cap(p.arena) {
		// The full chunk stays alive while the map's keys point into it.
		p.arena = make([]byte, 0, max(pendingArenaChunk, len(r)))
	}
	off := len(p.arena)
	p.arena = append(p.arena, r...)
	p.rows[unsafe.String(&p.arena[off], len(r))] = del
	return int64(len(r) + pendingRowOverhead)
}

// writeTo writes the pending writes to batch and forgets them, returning
// the bytes they were charged.
func (p *pendingRows) writeTo(batch *rowWriter) (int64, error) {
	var n int64
	for k, del := range p.rows {
		var err error
		if del {
			err = batch.Delete(unsafe.Slice(unsafe.StringData(k), len(k)))
		} else {
			err = batch.Set(unsafe.Slice(unsafe.StringData(k), len(k)), nil)
		}
		if err != nil {
			return 0, err
		}
		n += int64(len(k) + pendingRowOverhead)
	}
	clear(p.rows)
	// The batch has copied the rows: the arena's current chunk is free
	// again.
	p.arena = p.arena[:0]
	return n, nil
}

// addPending records the write of row r (a deletion if del) among the
// pending writes.
func (l *lsmTimers) addPending(r []byte, del bool) {
	l.charge(l.pending.write(r, del))
}

// writePending writes the pending writes to batch.
func (l *lsmTimers) writePending(batch *rowWriter) error {
	if len(l.pending.rows) == 0 {
		return nil
	}
	n, err := l.pending.writeTo(batch)
	if err != nil {
		return err
	}
	l.charge(-n)
	return nil
}

// commitPending makes the pending writes to the store, which is about to
// be read for timer rows.
func (l *lsmTimers) commitPending() error {
	if len(l.pending.rows) == 0 {
		return nil
	}
	batch := l.lsm.writer("writing the timers")
	defer batch.Close()
	if err := l.writePending(batch); err != nil {
		return err
	}
	return batch.Commit()
}

// markDirty counts a new dirty row of key group kgIdx.
func (l *lsmTimers) markDirty(kgIdx int) {
	g := &l.groups[kgIdx]
	g.dirty++
	if !g.listed {
		g.listed = true
		l.listed = append(l.listed, int32(kgIdx))
	}
}

// writeGroup writes key group kgIdx's dirty rows to batch and marks them
// clean.
func (l *lsmTimers) writeGroup(batch *rowWriter, kgIdx int) error {
	g := &l.groups[kgIdx]
	for i := range g.cache {
		if g.dirty == 0 {
			break
		}
		if !g.cache[i].dirty {
			continue
		}
		if err := batch.Set(g.cache[i].k, nil); err != nil {
			return err
		}
		g.cache[i].dirty = false
		g.dirty--
	}
	return nil
}

// The write-back cache as the store sees it (rowCache). It is never
// emptied: once flushed its rows are the store's, and they order the key
// groups.

func (l *lsmTimers) flush(batch *rowWriter, _ bool) error {
	// The pending writes go first: a dirty cached row may be a timer
	// registered again after a pending deletion of its row.
	if err := l.writePending(batch); err != nil {
		return err
	}
	for _, kg := range l.listed {
		if err := l.writeGroup(batch, int(kg)); err != nil {
			return err
		}
		l.groups[kg].listed = false
	}
	l.listed = l.listed[:0]
	return nil
}

// evict halves the caches of the key groups, writing the dirty rows that
// leave, until they use at most goal bytes or every group keeps only its
// first row (which orders it among the groups).
func (l *lsmTimers) evict(batch *rowWriter, goal int64) error {
	if err := l.writePending(batch); err != nil {
		return err
	}
	for l.bytes > goal {
		cut := false
		for i := range l.groups {
			g := &l.groups[i]
			if len(g.cache) <= 1 {
				continue
			}
			keep := len(g.cache) / 2
			for j := keep; j < len(g.cache); j++ {
				row := g.cache[j]
				if row.dirty {
					if err := batch.Set(row.k, nil); err != nil {
						return err
					}
					g.dirty--
				}
				l.uncache(row, false)
				g.cache[j] = timerRow{}
			}
			g.cache, g.complete, cut = g.cache[:keep], false, true
			if l.bytes <= goal {
				return nil
			}
		}
		if !cut {
			return nil
		}
	}
	return nil
}

func (l *lsmTimers) used() int64 { return l.bytes }

func (l *lsmTimers) len() int {
	n := 0
	for i := range l.groups {
		n += len(l.groups[i].cache)
	}
	return n
}

func (l *lsmTimers) judge([]byte, rowPrune, int64) (bool, error) { return false, nil }
func (l *lsmTimers) restored()                                   {}

// appendEscaped appends p so that the results order as the inputs do and
// a reader finds where p ends.
func appendEscaped(dst, p []byte) []byte {
	for _, c := range p {
		if c == 0 {
			dst = append(dst, 0, 0xff)
		} else {
			dst = append(dst, c)
		}
	}
	return append(dst, 0, 1)
}

// readEscaped reads an escaped string from the start of p, returning it
// and what follows.
func readEscaped(p []byte) (s, rest []byte, err error) {
	for i := 0; i < len(p); i++ {
		if p[i] != 0 {
			s = append(s, p[i])
			continue
		}
		if i+1 == len(p) {
			break
		}
		switch p[i+1] {
		case 0xff:
			s = append(s, 0)
			i++
		case 1:
			return s, p[i+2:], nil
		default:
			return nil, nil, corrupt("timer row: escape %#x", p[i+1])
		}
	}
	return nil, nil, corrupt("timer row: unterminated string")
}

// timerRow appends the row of a timer, given its key's and namespace's
// encodings.
func (l *lsmTimers) timerRow(dst []byte, kg int, ts int64, hash uint32, key, ns []byte) []byte {
	dst = appendRowPrefix(dst, kg, l.id)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts)^1<<63)
	dst = binary.BigEndian.AppendUint32(dst, hash)
	return appendEscaped(appendEscaped(dst, key), ns)
}

// parseTimerRow splits a row (without its prefix) into timestamp, hash,
// and the key's and namespace's encodings.
func parseTimerRow(r []byte) (ts int64, hash uint32, key, ns []byte, err error) {
	if len(r) < 12 {
		return 0, 0, nil, nil, corrupt("timer row of %d bytes", len(r))
	}
	ts = int64(binary.BigEndian.Uint64(r) ^ 1<<63)
	hash = binary.BigEndian.Uint32(r[8:])
	key, rest, err := readEscaped(r[12:])
	if err == nil {
		ns, rest, err = readEscaped(rest)
	}
	if err == nil && len(rest) != 0 {
		err = corrupt("timer row: %d bytes after the namespace", len(rest))
	}
	return ts, hash, key, ns, err
}

// cached reports whether the group's cache decides whether it has row r,
// and if so whether it has and where r is or would go.
func (g *timerGroup) cached(r []byte) (decided, has bool, i int) {
	n := len(g.cache)
	if !g.complete && (n == 0 || bytes.Compare(r, g.cache[n-1].k) > 0) {
		return false, false, n
	}
	i, has = slices.BinarySearchFunc(g.cache, r, func(e timerRow, r []byte) int { return bytes.Compare(e.k, r) })
	return true, has, i
}

// has reports whether key group kgIdx has row r.
func (l *lsmTimers) has(db *pebble.DB, kgIdx int, r []byte) (bool, error) {
	if decided, has, _ := l.groups[kgIdx].cached(r); decided {
		return has, nil
	}
	if del, ok := l.pending.rows[string(r)]; ok {
		return !del, nil
	}
	_, closer, err := db.Get(r)
	if err == pebble.ErrNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}

// add registers row r: among the cached rows, as a dirty row (the last
// cached row is written if it has to leave); beyond them, in the store.
// Writing a row the store has already is harmless, so a row beyond the
// cache is written without looking it up first.
func (l *lsmTimers) add(db *pebble.DB, kgIdx int, r []byte) error {
	if l.lsm != nil && l.lsm.cacheUsed >= l.lsm.cacheBudget {
		l.lsm.evict()
	}
	g := &l.groups[kgIdx]
	decided, has, i := g.cached(r)
	if decided && has {
		return nil
	}
	if g.floor != nil && bytes.Compare(r, g.floor) < 0 {
		l.setFloor(g, l.clone(r))
	}
	if !decided {
		l.addPending(r, false)
		return nil
	}
	g.cache = slices.Insert(g.cache, i, l.cacheRow(r, true))
	l.markDirty(kgIdx)
	if n := len(g.cache); n > l.rows {
		last := g.cache[n-1]
		if last.dirty {
			l.addPending(last.k, false)
			g.dirty--
		}
		l.uncache(last, false)
		g.cache[n-1] = timerRow{}
		g.cache, g.complete = g.cache[:n-1], false
	}
	if i == 0 {
		l.fixHead(kgIdx)
	}
	return nil
}

// remove deletes row r: a dirty cached row only from memory, any other
// from the store too.
func (l *lsmTimers) remove(db *pebble.DB, kgStart, kgIdx int, r []byte) error {
	g := &l.groups[kgIdx]
	decided, has, i := g.cached(r)
	if decided && !has {
		return nil
	}
	if !decided {
		l.addPending(r, true)
		return nil
	}
	return l.drop(db, kgStart, kgIdx, i)
}

// drop deletes key group kgIdx's cached row i, reading the group's next
// rows if its cache runs out.
func (l *lsmTimers) drop(db *pebble.DB, kgStart, kgIdx, i int) error {
	g := &l.groups[kgIdx]
	row := g.cache[i]
	if row.dirty {
		g.dirty--
	} else {
		l.addPending(row.k, true)
	}
	g.cache = slices.Delete(g.cache, i, i+1)
	l.uncache(row, i == 0)
	if i == 0 {
		// No row is below the first one: reading the store's rows again
		// starts here, past what was deleted before it.
		l.setFloor(g, row.k)
	}
	if len(g.cache) == 0 && !g.complete {
		if err := l.load(db, kgStart, kgIdx); err != nil {
			return err
		}
	}
	if i == 0 {
		l.fixHead(kgIdx)
	}
	return nil
}

// pop deletes key group kgIdx's first row, which fired.
func (l *lsmTimers) pop(db *pebble.DB, kgStart, kgIdx int) error {
	return l.drop(db, kgStart, kgIdx, 0)
}

// load reads key group kgIdx's first rows from r, from its floor on. The
// group must have no dirty rows.
func (l *lsmTimers) load(r interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}, kgStart, kgIdx int) error {
	lo := appendRowPrefix(nil, kgIdx+kgStart, l.id)
	g := &l.groups[kgIdx]
	if g.dirty != 0 {
		return fmt.Errorf("state: reading the timers of key group %d over %d rows not written", kgIdx+kgStart, g.dirty)
	}
	if err := l.commitPending(); err != nil {
		return err
	}
	opts := &pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)}
	if g.floor != nil {
		opts.LowerBound = g.floor
	}
	it, err := r.NewIter(opts)
	if err != nil {
		return err
	}
	for i := range g.cache {
		l.uncache(g.cache[i], false)
		g.cache[i] = timerRow{}
	}
	g.cache = g.cache[:0]
	ok := it.First()
	for ; ok && len(g.cache) < l.rows; ok = it.Next() {
		g.cache = append(g.cache, l.cacheRow(it.Key(), false))
	}
	g.complete = !ok
	return it.Close()
}

// count returns the number of key group kgIdx's rows.
func (l *lsmTimers) count(db *pebble.DB, kgStart, kgIdx int) (int, error) {
	g := &l.groups[kgIdx]
	if g.complete {
		return len(g.cache), nil
	}
	if err := l.commitPending(); err != nil {
		return 0, err
	}
	lo := appendRowPrefix(nil, kgIdx+kgStart, l.id)
	if g.floor != nil {
		lo = g.floor
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(appendRowPrefix(nil, kgIdx+kgStart, l.id))})
	if err != nil {
		return 0, err
	}
	n := g.dirty // cached rows the store lacks
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Close()
}

// reload reads every key group's rows again (after a restore wrote them),
// writing the cached dirty rows first.
func (l *lsmTimers) reload(store *lsm, kgStart int) error {
	if err := l.commitDirty(store); err != nil {
		return err
	}
	db := store.db
	for i := range l.groups {
		l.setFloor(&l.groups[i], nil)
		if err := l.load(db, kgStart, i); err != nil {
			return err
		}
		l.fixHead(i)
	}
	return nil
}

// commitDirty writes every cached dirty row to the store.
func (l *lsmTimers) commitDirty(store *lsm) error {
	batch := store.writer("writing the timers")
	defer batch.Close()
	if err := l.flush(batch, false); err != nil {
		return err
	}
	return batch.Commit()
}

// Ordering key groups by their first row.

func (l *lsmTimers) headLess(a, b int32) bool {
	// Rows of different key groups differ in their first two bytes:
	// compare from the timestamp on.
	return bytes.Compare(l.groups[a].cache[0].k[4:], l.groups[b].cache[0].k[4:]) < 0
}

func (l *lsmTimers) fixHead(kg int) { l.fix(kg, len(l.groups[kg].cache) == 0, l.headLess) }

// The Timers methods when the queue is in the store.

func (t *Timers[K, N]) lsmRow(ns N, ts int64) (int, []byte) {
	kg, h := t.b.pos()
	t.bufA = t.b.keyCodec.Append(t.bufA[:0], t.b.key)
	t.bufB = t.nc.Append(t.bufB[:0], ns)
	t.l.row = t.l.timerRow(t.l.row[:0], kg+t.b.kgs.Start, ts, h, t.bufA, t.bufB)
	return kg, t.l.row
}

func (t *Timers[K, N]) lsmFail(op string, err error) {
	// The store failed under a timer operation, which has no error
	// result: the subtask cannot go on without losing a timer.
	fail(fmt.Errorf("%v: %s: %w", t.inf, op, err))
}

func (t *Timers[K, N]) lsmRegister(ns N, ts int64) {
	kg, r := t.lsmRow(ns, ts)
	if err := t.l.add(t.b.lsm.store(), kg, r); err != nil {
		t.lsmFail("registering a timer", err)
	}
}

func (t *Timers[K, N]) lsmDelete(ns N, ts int64) {
	kg, r := t.lsmRow(ns, ts)
	if err := t.l.remove(t.b.lsm.store(), t.b.kgs.Start, kg, r); err != nil {
		t.lsmFail("deleting a timer", err)
	}
}

func (t *Timers[K, N]) lsmContains(ns N, ts int64) bool {
	kg, r := t.lsmRow(ns, ts)
	ok, err := t.l.has(t.b.lsm.store(), kg, r)
	if err != nil {
		t.lsmFail("looking up a timer", err)
	}
	return ok
}

// lsmLen counts the timers, reading the rows of the key groups whose
// cache does not hold them all.
func (t *Timers[K, N]) lsmLen() int {
	total := 0
	for i := range t.l.groups {
		n, err := t.l.count(t.b.lsm.store(), t.b.kgs.Start, i)
		if err != nil {
			t.lsmFail("counting timers", err)
		}
		total += n
	}
	return total
}

// lsmFirst decodes key group kg's first timer.
func (t *Timers[K, N]) lsmFirst(kg int32) (Timer[K, N], uint32) {
	ts, h, key, ns, err := parseTimerRow(t.l.groups[kg].cache[0].k[4:])
	var tm Timer[K, N]
	if err == nil {
		tm.Timestamp = ts
		tm.Key, err = decodeExactly(t.b.keyCodec, key, "key")
	}
	if err == nil {
		tm.Namespace, err = decodeExactly(t.nc, ns, "namespace")
	}
	if err != nil {
		t.lsmFail("reading a timer", err)
	}
	return tm, h
}

func (t *Timers[K, N]) lsmPeek() (Timer[K, N], bool) {
	if len(t.l.heads) == 0 {
		return Timer[K, N]{}, false
	}
	tm, _ := t.lsmFirst(t.l.heads[0])
	return tm, true
}

func (t *Timers[K, N]) lsmPop(upTo int64) (Timer[K, N], bool) {
	if len(t.l.heads) == 0 {
		return Timer[K, N]{}, false
	}
	kg := t.l.heads[0]
	if int64(binary.BigEndian.Uint64(t.l.groups[kg].cache[0].k[4:])^1<<63) > upTo {
		return Timer[K, N]{}, false
	}
	tm, h := t.lsmFirst(kg)
	if err := t.l.pop(t.b.lsm.store(), t.b.kgs.Start, int(kg)); err != nil {
		t.lsmFail("firing a timer", err)
	}
	t.b.SetCurrentKeyWithHash(tm.Key, h)
	return tm, true
}

// lsmRestoreGroup writes the restored timers of a key group as rows.
func (t *Timers[K, N]) lsmRestoreGroup(kgIdx, n int, data []byte) error {
	if err := t.b.lsm.failed(); err != nil {
		return err
	}
	db := t.b.lsm.db
	batch := t.b.lsm.writer("writing the restored timers")
	defer batch.Close()
	// The pending writes go first: they are older than the restored rows.
	if err := t.l.writePending(batch); err != nil {
		return err
	}
	var row []byte
	err := eachEntry(n, data, func(key, ns, val []byte) error {
		tk, h, err := t.decodeEntry(kgIdx, key, ns, val)
		if err != nil {
			return err
		}
		row = t.l.timerRow(row[:0], kgIdx+t.b.kgs.Start, tk.ts, h, key, ns)
		return batch.Set(row, nil)
	})
	if err == nil {
		// The group is read again from the store: it must hold the rows
		// only cached so far.
		err = t.l.writeGroup(batch, kgIdx)
	}
	if err == nil {
		err = batch.Commit()
	}
	if err != nil {
		return err
	}
	t.l.setFloor(&t.l.groups[kgIdx], nil)
	if err := t.l.load(db, t.b.kgs.Start, kgIdx); err != nil {
		return err
	}
	t.l.fixHead(kgIdx)
	return nil
}

// appendTimerEntry appends a timer row (without its prefix) as a snapshot
// entry: key, namespace and timestamp, as the heap queue writes them.
func appendTimerEntry(dst, r []byte) ([]byte, error) {
	ts, _, key, ns, err := parseTimerRow(r)
	if err != nil {
		return dst, err
	}
	var v [binary.MaxVarintLen64]byte
	return appendBytes(appendBytes(appendBytes(dst, key), ns), binary.AppendVarint(v[:0], ts)), nil
}
