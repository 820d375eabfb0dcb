package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

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
// groups by their first row: registering and firing a timer write or
// delete one row, and read the store only when a key group's cached rows
// run out; looking up or deleting a timer beyond them reads its row.

// timerCacheRows bounds the rows a key group keeps in memory.
const timerCacheRows = 16

type lsmTimers struct {
	id        uint16
	groups    []timerGroup // by key group index
	groupHeap              // key groups with timers, by first row
	row       []byte       // scratch
}

// timerGroup is what a key group keeps in memory of its rows: the first
// of them, in order (every row at or below the last one is among them),
// whether they are all of them, and a row below which none can be (the
// last one fired, or a lower one registered since), where reading the
// store's rows again starts, past the deletions of fired timers.
type timerGroup struct {
	cache    [][]byte
	complete bool
	floor    []byte
}

func newLSMTimers(id uint16, groups int) *lsmTimers {
	l := &lsmTimers{id: id, groups: make([]timerGroup, groups), groupHeap: newGroupHeap(groups)}
	for i := range l.groups {
		l.groups[i].complete = true
	}
	return l
}

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
// and if so whether it has.
func (g *timerGroup) cached(r []byte) (decided, has bool) {
	n := len(g.cache)
	if !g.complete && (n == 0 || bytes.Compare(r, g.cache[n-1]) > 0) {
		return false, false
	}
	_, has = slices.BinarySearchFunc(g.cache, r, bytes.Compare)
	return true, has
}

// has reports whether key group kg has row r.
func (l *lsmTimers) has(db *pebble.DB, kgIdx int, r []byte) (bool, error) {
	if decided, has := l.groups[kgIdx].cached(r); decided {
		return has, nil
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

// add writes row r. Writing a row the store has already is harmless, so
// a row beyond the cache is written without looking it up first.
func (l *lsmTimers) add(db *pebble.DB, kgIdx int, r []byte) error {
	g := &l.groups[kgIdx]
	decided, has := g.cached(r)
	if decided && has {
		return nil
	}
	if err := db.Set(r, nil, pebble.NoSync); err != nil {
		return err
	}
	if g.floor != nil && bytes.Compare(r, g.floor) < 0 {
		g.floor = slices.Clone(r)
	}
	if !decided {
		return nil
	}
	i, _ := slices.BinarySearchFunc(g.cache, r, bytes.Compare)
	g.cache = slices.Insert(g.cache, i, slices.Clone(r))
	if len(g.cache) > timerCacheRows {
		g.cache, g.complete = g.cache[:timerCacheRows], false
	}
	if i == 0 {
		l.fixHead(kgIdx)
	}
	return nil
}

// remove deletes row r.
func (l *lsmTimers) remove(db *pebble.DB, kgStart, kgIdx int, r []byte) error {
	g := &l.groups[kgIdx]
	decided, has := g.cached(r)
	if decided && !has {
		return nil
	}
	if err := db.Delete(r, pebble.NoSync); err != nil {
		return err
	}
	if !decided {
		return nil
	}
	i, _ := slices.BinarySearchFunc(g.cache, r, bytes.Compare)
	g.cache = slices.Delete(g.cache, i, i+1)
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
	g := &l.groups[kgIdx]
	first := g.cache[0]
	if err := db.Delete(first, pebble.NoSync); err != nil {
		return err
	}
	g.floor = first
	g.cache = g.cache[1:]
	if len(g.cache) == 0 && !g.complete {
		if err := l.load(db, kgStart, kgIdx); err != nil {
			return err
		}
	}
	l.fixHead(kgIdx)
	return nil
}

// load reads key group kgIdx's first rows from r, from its floor on.
func (l *lsmTimers) load(r interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}, kgStart, kgIdx int) error {
	lo := appendRowPrefix(nil, kgIdx+kgStart, l.id)
	g := &l.groups[kgIdx]
	opts := &pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)}
	if g.floor != nil {
		opts.LowerBound = g.floor
	}
	it, err := r.NewIter(opts)
	if err != nil {
		return err
	}
	g.cache = g.cache[:0:0]
	ok := it.First()
	for ; ok && len(g.cache) < timerCacheRows; ok = it.Next() {
		g.cache = append(g.cache, slices.Clone(it.Key()))
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
	lo := appendRowPrefix(nil, kgIdx+kgStart, l.id)
	if g.floor != nil {
		lo = g.floor
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(appendRowPrefix(nil, kgIdx+kgStart, l.id))})
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Close()
}

// reload reads every key group's rows again (after a restore wrote them).
func (l *lsmTimers) reload(db *pebble.DB, kgStart int) error {
	for i := range l.groups {
		l.groups[i].floor = nil
		if err := l.load(db, kgStart, i); err != nil {
			return err
		}
		l.fixHead(i)
	}
	return nil
}

// Ordering key groups by their first row.

func (l *lsmTimers) headLess(a, b int32) bool {
	// Rows of different key groups differ in their first two bytes:
	// compare from the timestamp on.
	return bytes.Compare(l.groups[a].cache[0][4:], l.groups[b].cache[0][4:]) < 0
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
	panic(fmt.Sprintf("state: %v: %s: %v", t.inf, op, err))
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
	ts, h, key, ns, err := parseTimerRow(t.l.groups[kg].cache[0][4:])
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
	if int64(binary.BigEndian.Uint64(t.l.groups[kg].cache[0][4:])^1<<63) > upTo {
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
	batch := db.NewBatch()
	defer batch.Close()
	var row []byte
	err := eachEntry(n, data, func(key, ns, val []byte) error {
		tk, h, err := t.decodeEntry(kgIdx, key, ns, val)
		if err != nil {
			return err
		}
		row = t.l.timerRow(row[:0], kgIdx+t.b.kgs.Start, tk.ts, h, key, ns)
		return batch.Set(row, nil, nil)
	})
	if err == nil {
		err = batch.Commit(pebble.NoSync)
	}
	if err != nil {
		return err
	}
	g := &t.l.groups[kgIdx]
	g.floor = nil
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
