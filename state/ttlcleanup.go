package state

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Background cleanup of states with a time to live (see TTLConfig): the
// heap's incremental cursor, the Pebble sweep, and the judgment of a
// stored value at a time that both share with full-snapshot cleanup.

// cleaner is the background cleanup of one state: step runs on the
// owner's goroutine, on an access to the state (and on SetCurrentKey
// with CleanupEveryRecord).
type cleaner interface{ step() }

// ttlHook is how a state with a time to live reaches the state that
// stores its values: stamp gives a stored value's time (of a value, a
// list's element, a map's value, an accumulator).
type ttlHook[T any] struct {
	t     *ttl
	stamp func(T) int64
}

func stampOf[T any](s stamped[T]) int64 { return s.ts }

// attachCleaner makes c the background cleanup of t, unless it is
// disabled.
func attachCleaner[K comparable](b *KeyedBackend[K], t *ttl, c cleaner) {
	if t.cfg.DisableCleanupInBackground {
		return
	}
	t.clean = c
	if t.cfg.CleanupEveryRecord {
		b.onKey = append(b.onKey, c)
	}
}

// keep is the judgment of a stored entry at a time: all its values live,
// some, or none.
type keep uint8

const (
	keepAll keep = iota
	keepSome
	keepNone
)

// A judgeFunc judges entry e at cutoff (the latest time of an expired
// value) without building anything.
type judgeFunc[E any] func(e E, cutoff int64) keep

// A pruneFunc judges entry e at cutoff and, for keepSome, returns the
// entry of its live values: a new one, e is not modified (a pending
// snapshot may share it), stamped with epoch if it is a container the
// table copies on write.
type pruneFunc[E any] func(e E, cutoff int64, epoch uint64) (E, keep)

// ttlRules judge and prune the entries of one kind of state.
type ttlRules[E any] struct {
	judge judgeFunc[E]
	prune pruneFunc[E]
}

// judged is the judgment of live values out of of.
func judged(live, of int) keep {
	switch live {
	case of:
		return keepAll
	case 0:
		return keepNone
	}
	return keepSome
}

// oneRules are the rules of an entry of one value.
func oneRules[T any](stamp func(T) int64) ttlRules[T] {
	judge := func(e T, cutoff int64) keep {
		if stamp(e) <= cutoff {
			return keepNone
		}
		return keepAll
	}
	return ttlRules[T]{judge, func(e T, cutoff int64, _ uint64) (T, keep) { return e, judge(e, cutoff) }}
}

func versionedRules[T any](stamp func(T) int64) ttlRules[versioned[T]] {
	judge := func(e versioned[T], cutoff int64) keep {
		if stamp(e.v) <= cutoff {
			return keepNone
		}
		return keepAll
	}
	return ttlRules[versioned[T]]{judge, func(e versioned[T], cutoff int64, _ uint64) (versioned[T], keep) {
		return e, judge(e, cutoff)
	}}
}

func listRules[T any](stamp func(T) int64) ttlRules[[]T] {
	judge := func(l []T, cutoff int64) keep {
		live := 0
		for i := range l {
			if stamp(l[i]) > cutoff {
				live++
			}
		}
		return judged(live, len(l))
	}
	prune := func(l []T, cutoff int64, _ uint64) ([]T, keep) {
		k := judge(l, cutoff)
		if k != keepSome {
			return l, k
		}
		out := make([]T, 0, len(l))
		for i := range l {
			if stamp(l[i]) > cutoff {
				out = append(out, l[i])
			}
		}
		return out, keepSome
	}
	return ttlRules[[]T]{judge, prune}
}

func mapRules[UK comparable, UV any](stamp func(UV) int64) ttlRules[mapEntry[UK, UV]] {
	judge := func(e mapEntry[UK, UV], cutoff int64) keep {
		live := 0
		for _, v := range e.m {
			if stamp(v) > cutoff {
				live++
			}
		}
		return judged(live, len(e.m))
	}
	prune := func(e mapEntry[UK, UV], cutoff int64, epoch uint64) (mapEntry[UK, UV], keep) {
		k := judge(e, cutoff)
		if k != keepSome {
			return e, k
		}
		m := make(map[UK]UV, len(e.m))
		for uk, v := range e.m {
			if stamp(v) > cutoff {
				m[uk] = v
			}
		}
		return mapEntry[UK, UV]{m: m, epoch: epoch}, keepSome
	}
	return ttlRules[mapEntry[UK, UV]]{judge, prune}
}

// tableTTL is what the table of a state with a time to live knows of it,
// for full-snapshot cleanup.
type tableTTL[E any] struct {
	ttl   int64 // milliseconds
	prune pruneFunc[E]
}

// heapAttachTTL gives the heap state st of a time to live its snapshot
// cleanup and its incremental cleanup.
func heapAttachTTL[K, MK comparable, E any](b *KeyedBackend[K], st *stateTable[MK, E], t *ttl, rules ttlRules[E]) {
	if t.cfg.CleanupFullSnapshot {
		st.ttl = &tableTTL[E]{ttl: t.cfg.TTL.Milliseconds(), prune: rules.prune}
		b.snapshotTime = true
	}
	n := t.cfg.CleanupSize
	if n == 0 {
		n = DefaultTTLCleanupSize
	}
	attachCleaner(b, t, &heapCleaner[MK, E]{t: st.table, judge: rules.judge, prune: rules.prune, ttl: t, n: n})
}

// heapCleaner is the incremental cleanup of a heap state: a cursor that
// goes round the state's key groups, one shard at a time. Each step adds
// n entries to its credit; while the credit is positive, the cursor
// judges the next shard whole, ranging over its map (sequential memory,
// where looking keys up one by one would miss the CPU's caches on every
// entry), and pays for as many entries as the shard holds. So the state
// is checked n entries per access, as Flink's cleanupIncrementally does,
// in bursts of one shard (about a thousand entries) that cost the owner
// some microseconds every few hundred accesses. The expired values found
// are then removed, or rewritten without their expired elements,
// through the table's copy-on-write operations, so that a pending
// snapshot keeps its shards and containers as they were. The cursor is
// a hash position, not a slot, so a shard that splits or a directory
// that doubles under it does not derail it.
type heapCleaner[MK comparable, E any] struct {
	t     *table[MK, E]
	judge judgeFunc[E]
	prune pruneFunc[E]
	ttl   *ttl
	n     int // entries per step

	credit int
	kg     int    // the key group of the cursor
	next   uint64 // the hash at which kg's next shard starts; 1<<32 past its last
	keys   []MK   // the expired entries of the shard judged last
}

func (c *heapCleaner[MK, E]) step() {
	if c.credit += c.n; c.credit <= 0 {
		return
	}
	cutoff := c.ttl.cutoff()
	for c.credit > 0 {
		c.credit -= c.sweepShard(cutoff)
	}
}

// sweepShard judges the cursor's shard, cleans it, moves the cursor to
// the next and returns the number of entries it judged (at least 1).
func (c *heapCleaner[MK, E]) sweepShard(cutoff int64) int {
	if c.next >= 1<<32 {
		c.kg, c.next = (c.kg+1)%len(c.t.groups), 0
	}
	kg := c.kg
	g := &c.t.groups[kg]
	h := uint32(c.next)
	s := g.dir[h>>g.shift]
	lo, n := g.slots(h, s.depth)
	c.next = uint64(lo+n) << g.shift
	for mk, e := range s.m.all() {
		if c.judge(e.v, cutoff) != keepAll {
			c.keys = append(c.keys, mk)
		}
	}
	for _, mk := range c.keys {
		h := c.t.hash(mk)
		e, ok := c.t.get(kg, h, mk)
		if !ok {
			continue
		}
		switch e, k := c.prune(e, cutoff, c.t.ep.cur); k {
		case keepNone:
			c.t.remove(kg, h, mk)
		case keepSome:
			c.t.set(kg, h, mk, e)
		}
	}
	clear(c.keys) // let go of the keys for the collector
	c.keys = c.keys[:0]
	return max(1, s.m.len())
}

// A rowPrune judges a Pebble row's value at cutoff and, for keepSome,
// appends the value of its live part to dst.
type rowPrune func(dst, val []byte, cutoff int64) ([]byte, keep, error)

// pruneStampedRow judges a row of one stamped value (a value, a reduced
// value, an accumulator, a map's entry): stampedCodec writes the time
// first, so the value need not be decoded.
func pruneStampedRow(dst, val []byte, cutoff int64) ([]byte, keep, error) {
	ts, n := binary.Varint(val)
	if n <= 0 {
		return dst, keepAll, corrupt("a row without its time to live's timestamp")
	}
	if ts <= cutoff {
		return dst, keepNone, nil
	}
	return dst, keepAll, nil
}

// pruneListRow judges a list's row by decoding its elements.
func pruneListRow[T any](enc valueEncoding[[]T], stamp func(T) int64) rowPrune {
	prune := listRules(stamp).prune
	return func(dst, val []byte, cutoff int64) ([]byte, keep, error) {
		l, err := enc.decode(val)
		if err != nil {
			return dst, keepAll, err
		}
		l, k := prune(l, cutoff, 0)
		if k == keepSome {
			dst = enc.append(dst, l)
		}
		return dst, k, nil
	}
}

// lsmAttachTTL gives the Pebble state st of a time to live its snapshot
// cleanup and its sweep.
func lsmAttachTTL[K comparable](b *KeyedBackend[K], st *lsmState[K], t *ttl, prune rowPrune) {
	if t.cfg.CleanupFullSnapshot {
		st.ttl, st.prune = t.cfg.TTL.Milliseconds(), prune
		b.snapshotTime = true
	}
	rows := t.cfg.SweepRows
	if rows == 0 {
		rows = DefaultTTLSweepRows
	}
	attachCleaner(b, t, &lsmSweeper[K]{st: st, ttl: t, prune: prune, rows: rows})
}

// lsmSweeper is the background cleanup of a Pebble state: every rows
// accesses, one sweep reads the next rows rows of the state in the store
// (in key order, key group by key group, round the backend's range) and
// deletes the expired ones, or rewrites a list whose elements have
// partly expired, in one batch. A row that the write-back cache holds is
// judged by the cache's version and deleted in the cache, which writes
// the deletion when it flushes. A row only in the cache (written since
// the cache last wrote to the store) is not in the store to be read: at
// the end of each round of the key groups, the sweep writes the state's
// dirty cached rows to the store (they stay cached), so that the next
// round judges them; it does so only once as many accesses as the
// state has cached rows have passed since it last did, so that the cost
// stays within one row per access. (A snapshot, which writes the caches
// first, and the cache's evictions write them too.)
type lsmSweeper[K comparable] struct {
	st    *lsmState[K]
	ttl   *ttl
	prune rowPrune
	rows  int
	count int // accesses since the last sweep
	// sinceFlush counts the accesses since the sweep last wrote the
	// state's cached rows.
	sinceFlush int

	kgIdx  int    // the key group the sweep is in
	from   []byte // the first row to read in it, if resume
	resume bool
	buf    []byte // the rewritten value of a list
}

func (w *lsmSweeper[K]) step() {
	if w.count++; w.count < w.rows {
		return
	}
	w.count = 0
	w.sinceFlush += w.rows
	if err := w.sweep(); err != nil {
		fail(fmt.Errorf("sweeping expired rows of %v: %w", w.st.inf, err))
	}
}

func (w *lsmSweeper[K]) sweep() error {
	st := w.st
	l := st.b.lsm
	cutoff := w.ttl.cutoff()
	batch := l.writer("writing the swept rows")
	defer batch.Close()
	// Every key group entered counts as a row, so that a sweep over an
	// empty state ends.
	for budget := w.rows; budget > 0; {
		budget--
		lo := appendRowPrefix(nil, st.b.kgs.Start+w.kgIdx, st.id)
		opts := &pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)}
		if w.resume {
			opts.LowerBound = w.from
		}
		it, err := l.db.NewIter(opts)
		if err != nil {
			return err
		}
		done := true
		for ok := it.First(); ok; ok = it.Next() {
			if budget == 0 {
				w.from, done = append([]byte(nil), it.Key()...), false
				break
			}
			budget--
			if err := w.judge(batch, it, cutoff); err != nil {
				_ = it.Close()
				return err
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
		w.resume = !done
		if done {
			w.kgIdx = (w.kgIdx + 1) % st.b.kgs.Len()
			if c := st.cache; c != nil && w.kgIdx == 0 && w.sinceFlush >= c.len() {
				if err := c.flush(batch, false); err != nil {
					return err
				}
				// Commit them before reading on: a list's buffered
				// appends leave the cache when written, and a row read
				// without them and rewritten in the same batch would
				// drop them.
				if err := batch.Commit(); err != nil {
					return err
				}
				w.sinceFlush = 0
			}
		}
	}
	return batch.Commit()
}

// judge deletes or rewrites the iterator's row if it has expired.
func (w *lsmSweeper[K]) judge(batch *rowWriter, it *pebble.Iterator, cutoff int64) error {
	k := it.Key()
	if c := w.st.cache; c != nil {
		if cached, err := c.judge(k, w.prune, cutoff); cached || err != nil {
			return err
		}
	}
	val, err := it.ValueAndErr()
	if err != nil {
		return err
	}
	out, kp, err := w.prune(w.buf[:0], val, cutoff)
	if err != nil {
		return err
	}
	switch kp {
	case keepNone:
		return batch.Delete(k)
	case keepSome:
		w.buf = out
		return batch.Set(k, out)
	}
	return nil
}
