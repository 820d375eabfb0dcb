package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"reflect"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weirstream/weir/codec"
)

// lsmState is a state registered in a Pebble backend (see lsm.go): its id
// in the row keys, and how its rows are snapshotted and restored. Handles
// (lsmHandle and the kinds built on it) refer to it.
type lsmState[K comparable] struct {
	b     *KeyedBackend[K]
	inf   stateInfo
	id    uint16
	isMap bool
	// cache is the write-back cache of a state of one row per key and
	// namespace (value, reducing, aggregating; see lsmcache.go), a
	// *valueCache of the handles' namespace and value types, or the
	// append buffer of a list state (lsmlistcache.go), a *listCache;
	// nil for maps.
	cache rowCache
	// types names the handle's type parameters, so that registering the
	// name again with other types fails as it does on the heap.
	types reflect.Type
	// restoreEntry checks a restored entry (key, namespace and value as a
	// snapshot holds them), returns its key's hash, and calls put with
	// each of its rows: the row key's suffix after key and namespace (a
	// map key, or nothing) and the row's value.
	restoreEntry func(key, ns, val []byte, put func(suffix, value []byte)) (uint32, error)
	// prune and ttl (in milliseconds) are set for a state with a time to
	// live whose snapshots leave expired values out
	// (TTLConfig.CleanupFullSnapshot).
	prune rowPrune
	ttl   int64
}

func (s *lsmState[K]) info() stateInfo { return s.inf }
func (s *lsmState[K]) inStore() bool   { return true }

func (s *lsmState[K]) capture(now int64) stateView {
	snap := s.b.lsm.snapshot()
	v := &lsmView{l: s.b.lsm, snap: snap, r: snap, id: s.id, kgStart: s.b.kgs.Start, isMap: s.isMap, kg: -1}
	if s.prune != nil {
		v.prune, v.cutoff = s.prune, now-s.ttl
	}
	return v
}

func (s *lsmState[K]) restoreGroup(kgIdx, n int, data []byte) error {
	if err := s.b.lsm.failed(); err != nil {
		return err
	}
	if s.cache != nil {
		s.b.lsm.flushCaches(true) // nothing cached may shadow the rows
		s.cache.restored()
	}
	batch := s.b.lsm.writer("writing the restored rows")
	defer batch.Close()
	var base, row []byte
	var werr error
	err := eachEntry(n, data, func(key, ns, val []byte) error {
		base = appendRowPrefix(base[:0], kgIdx+s.b.kgs.Start, s.id)
		base = appendPrefixedBytes(appendPrefixedBytes(base, key), ns)
		h, err := s.restoreEntry(key, ns, val, func(suffix, value []byte) {
			row = append(append(row[:0], base...), suffix...)
			if werr == nil {
				werr = batch.Set(row, value)
			}
		})
		if err != nil {
			return err
		}
		return s.b.checkKeyGroup(kgIdx, h)
	})
	if err == nil {
		err = werr
	}
	if err == nil {
		err = batch.Commit()
	}
	return err
}

// evolveRows rewrites the state's rows, as an adopted native snapshot left
// them, into its current layout.
func (s *lsmState[K]) evolveRows(ev *evolution) error {
	batch := s.b.lsm.writer("rewriting the rows")
	defer batch.Close()
	var val []byte
	for kg := s.b.kgs.Start; kg <= s.b.kgs.End; kg++ {
		lo := appendRowPrefix(nil, kg, s.id)
		it, err := s.b.lsm.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			v, err := it.ValueAndErr()
			if err == nil {
				if s.isMap {
					// One row per map entry: the value alone.
					var n int
					if val, n, err = ev.value(val[:0], v); err == nil && n != len(v) {
						err = corrupt("%d bytes after a map value", len(v)-n)
					}
				} else {
					val, err = ev.entryValue(val[:0], v)
				}
			}
			if err == nil {
				err = batch.Set(it.Key(), val)
			}
			if err != nil {
				_ = it.Close()
				return fmt.Errorf("%v, key group %d: %w", s.inf, kg, err)
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	return batch.Commit()
}

// registerLSM returns the Pebble state named inf.name, creating it if
// needed; H is the handle type, whose type parameters the state's
// registrations must agree on.
//
// newCache, if not nil, makes the write-back cache of a new state.
func registerLSM[K comparable, H any](b *KeyedBackend[K], inf stateInfo, lay layout, isMap bool,
	restoreEntry func(key, ns, val []byte, put func(suffix, value []byte)) (uint32, error), newCache func(*lsmState[K]) rowCache) (*lsmState[K], error) {
	types := reflect.TypeFor[H]()
	// A state's id is its index in the backend, as in a snapshot's
	// header, so that a native snapshot's rows restore under the same
	// ids.
	idx, ok := b.byName[inf.name]
	if !ok {
		idx = len(b.states)
	}
	if idx >= math.MaxUint16 {
		return nil, fmt.Errorf("state: more than %d states in one backend", math.MaxUint16)
	}
	st, err := register(b, inf, lay, func() *lsmState[K] {
		s := &lsmState[K]{b: b, inf: inf, id: uint16(idx), isMap: isMap, types: types, restoreEntry: restoreEntry}
		if newCache != nil {
			s.cache = newCache(s)
		}
		return s
	})
	if err != nil {
		return nil, err
	}
	if st.types != types {
		return nil, fmt.Errorf("%w: %v is already registered as a %v", errRegistered, inf, st.types)
	}
	return st, nil
}

// restoreKey decodes a restored entry's key and namespace (nc nil: the
// void namespace) and returns the key's hash.
func restoreKey[K, N comparable](b *KeyedBackend[K], nc codec.Codec[N], key, ns []byte) (uint32, error) {
	k, err := decodeExactly(b.keyCodec, key, "key")
	if err != nil {
		return 0, err
	}
	if nc == nil {
		if len(ns) != 0 {
			return 0, fmt.Errorf("%w: %d namespace bytes in state without namespace", ErrCorrupt, len(ns))
		}
	} else if _, err := decodeExactly(nc, ns, "namespace"); err != nil {
		return 0, err
	}
	return b.hasher(k), nil
}

// restoreOne is restoreEntry for states of one row per key and namespace
// whose value decodes with dec.
func restoreOne[K, N comparable, E any](b *KeyedBackend[K], nc codec.Codec[N], dec func([]byte) (E, error)) func(key, ns, val []byte, put func(suffix, value []byte)) (uint32, error) {
	return func(key, ns, val []byte, put func(suffix, value []byte)) (uint32, error) {
		h, err := restoreKey(b, nc, key, ns)
		if err != nil {
			return 0, err
		}
		if _, err := dec(val); err != nil {
			return 0, err
		}
		put(nil, val)
		return h, nil
	}
}

// restoreMap is restoreEntry for map states: a restored map becomes one
// row per entry.
func restoreMap[K, N, UK comparable, UV any](b *KeyedBackend[K], nc codec.Codec[N], kc codec.Codec[UK], vc codec.Codec[UV]) func(key, ns, val []byte, put func(suffix, value []byte)) (uint32, error) {
	return func(key, ns, val []byte, put func(suffix, value []byte)) (uint32, error) {
		h, err := restoreKey(b, nc, key, ns)
		if err != nil {
			return 0, err
		}
		n, off, err := readCount(val, 2)
		if err != nil {
			return 0, err
		}
		type row struct{ k, v []byte }
		rows := make([]row, 0, n)
		seen := make(map[UK]struct{}, n)
		for i := range n {
			uk, a, err := kc.Decode(val[off:])
			if err != nil {
				return 0, fmt.Errorf("%w: map key %d: %w", ErrCorrupt, i, err)
			}
			if _, c, err := vc.Decode(val[off+a:]); err != nil {
				return 0, fmt.Errorf("%w: map value %d: %w", ErrCorrupt, i, err)
			} else {
				rows = append(rows, row{val[off : off+a], val[off+a : off+a+c]})
				off += a + c
			}
			seen[uk] = struct{}{}
		}
		if off != len(val) || n == 0 || len(seen) != n {
			return 0, fmt.Errorf("%w: map of %d entries (%d distinct) in %d bytes", ErrCorrupt, n, len(seen), len(val))
		}
		for _, r := range rows {
			put(r.k, r.v)
		}
		return h, nil
	}
}

func appendRowPrefix(dst []byte, kg int, id uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(dst, uint16(kg)), id)
}

func appendPrefixedBytes(dst, p []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(p))), p...)
}

// encodedKey returns the current key's length-prefixed encoding, made
// once per SetCurrentKey.
func (b *KeyedBackend[K]) encodedKey() []byte {
	if !b.keyEncOK {
		b.keyEnc = appendPrefixed(b.keyEnc[:0], b.keyCodec, b.key)
		b.keyEncOK = true
	}
	return b.keyEnc
}

// lsmView is the snapshot of one Pebble state: it reads the rows of the
// Pebble snapshot taken at the barrier and writes them as the entries of
// the checkpoint format, a map's rows folded back into one entry per key
// and namespace.
type lsmView struct {
	l    *lsm
	snap *pebble.Snapshot // nil for a view of another database (r)
	r    interface {
		NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
	}
	id      uint16
	kgStart int
	isMap   bool
	timers  bool // rows of a Timers (lsmtimers.go)
	// prune, if set, leaves out the values expired at cutoff.
	prune  rowPrune
	cutoff int64
	pruned []byte // a list's live part

	// The entries of key group kg, as groupLen made them for appendGroup.
	kg  int
	n   int
	buf []byte
	err error
}

func (v *lsmView) groupLen(kgIdx int) int {
	v.fill(kgIdx)
	return v.n
}

func (v *lsmView) appendGroup(dst []byte, kgIdx int) []byte {
	if v.kg != kgIdx {
		v.fill(kgIdx)
	}
	return append(dst, v.buf...)
}

func (v *lsmView) release() {
	if v.snap != nil {
		v.l.release(v.snap)
	}
}

func (v *lsmView) failure() error { return v.err }

func (v *lsmView) fill(kgIdx int) {
	v.kg, v.n, v.buf = kgIdx, 0, v.buf[:0]
	if v.err != nil {
		return
	}
	lo := appendRowPrefix(nil, kgIdx+v.kgStart, v.id)
	it, err := v.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		v.err = err
		return
	}
	// A map's current entry: its key and namespace, entry count and
	// (map key, value) encodings.
	var (
		group []byte
		count int
		pairs []byte
	)
	flush := func() {
		if group == nil || count == 0 {
			return
		}
		v.buf = append(v.buf, group...)
		v.buf = binary.AppendUvarint(v.buf, uint64(len(binary.AppendUvarint(nil, uint64(count)))+len(pairs)))
		v.buf = binary.AppendUvarint(v.buf, uint64(count))
		v.buf = append(v.buf, pairs...)
		v.n++
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[len(lo):]
		val, err := it.ValueAndErr()
		if err != nil {
			v.err = err
			break
		}
		if v.timers {
			if v.buf, err = appendTimerEntry(v.buf, k); err != nil {
				v.err = err
				break
			}
			v.n++
			continue
		}
		live := keepAll
		if v.prune != nil {
			if v.pruned, live, err = v.prune(v.pruned[:0], val, v.cutoff); err != nil {
				v.err = err
				break
			}
			if live == keepSome {
				val = v.pruned
			}
		}
		if !v.isMap {
			if live != keepNone {
				v.buf = appendPrefixedBytes(append(v.buf, k...), val)
				v.n++
			}
			continue
		}
		p, err := entryPrefixLen(k)
		if err != nil {
			v.err = err
			break
		}
		if group == nil || !bytes.Equal(group, k[:p]) {
			flush()
			group, count, pairs = append(group[:0:0], k[:p]...), 0, pairs[:0]
		}
		if live != keepNone {
			count++
			pairs = append(append(pairs, k[p:]...), val...)
		}
	}
	if v.err == nil {
		flush()
	}
	if err := it.Close(); err != nil && v.err == nil {
		v.err = err
	}
	if v.err != nil {
		v.n, v.buf = 0, v.buf[:0]
	}
}

// entryPrefixLen returns the length of the key and namespace at the start
// of a row key (after key group and state id).
func entryPrefixLen(k []byte) (int, error) {
	off := 0
	for range 2 {
		l, n := binary.Uvarint(k[off:])
		if n <= 0 || uint64(len(k)-off-n) < l {
			return 0, fmt.Errorf("%w: row key of %d bytes", ErrCorrupt, len(k))
		}
		off += n + int(l)
	}
	return off, nil
}

// lsmHandle is a handle to a Pebble state, in the current namespace.
type lsmHandle[K, N comparable] struct {
	st *lsmState[K]
	nc codec.Codec[N] // nil: the void namespace
	ns N
	// key and key2 are scratch buffers for row keys.
	key, key2 []byte
}

func (h *lsmHandle[K, N]) db() *pebble.DB { return h.st.b.lsm.store() }

func (h *lsmHandle[K, N]) SetNamespace(n N) { h.ns = n }
func (h *lsmHandle[K, N]) Namespace() N     { return h.ns }

// keyPrefix appends the prefix of every row of the current key.
func (h *lsmHandle[K, N]) keyPrefix(dst []byte) []byte {
	b := h.st.b
	kgIdx, _ := b.pos()
	return append(appendRowPrefix(dst, kgIdx+b.kgs.Start, h.st.id), b.encodedKey()...)
}

// appendRow appends the row key of the current key in namespace n.
func (h *lsmHandle[K, N]) appendRow(dst []byte, n N) []byte {
	dst = h.keyPrefix(dst)
	if h.nc == nil {
		return append(dst, 0)
	}
	return appendPrefixed(dst, h.nc, n)
}

// row returns the row key of the current key and namespace in h.key.
func (h *lsmHandle[K, N]) row() []byte {
	h.key = h.appendRow(h.key[:0], h.ns)
	return h.key
}

func (h *lsmHandle[K, N]) Namespaces() []N {
	p := h.keyPrefix(nil)
	var (
		out  []N
		last []byte
	)
	h.scan(p, func(k, _ []byte) {
		ns, err := entryNamespace(k[len(p):])
		if err != nil {
			fail(err)
		}
		if last != nil && bytes.Equal(last, ns) {
			return
		}
		last = append(last[:0], ns...)
		if h.nc == nil {
			var zero N
			out = append(out, zero)
			return
		}
		n, err := decodeExactly(h.nc, ns, "namespace")
		if err != nil {
			fail(err)
		}
		out = append(out, n)
	})
	return out
}

// entryNamespace returns the namespace encoding at the start of the rest
// of a row key after its key.
func entryNamespace(k []byte) ([]byte, error) {
	l, n := binary.Uvarint(k)
	if n <= 0 || uint64(len(k)-n) < l {
		return nil, fmt.Errorf("%w: row key without a namespace", ErrCorrupt)
	}
	return k[n : n+int(l)], nil
}

func (h *lsmHandle[K, N]) ClearAllNamespaces() {
	h.key = h.keyPrefix(h.key[:0])
	h.deletePrefix(h.key)
}

// scan calls fn with every row whose key starts with p.
func (h *lsmHandle[K, N]) scan(p []byte, fn func(k, v []byte)) {
	if h.st.cache != nil {
		h.st.b.lsm.flushCaches(false)
	}
	it, err := h.db().NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		fail(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			fail(err)
		}
		fn(it.Key(), v)
	}
	if err := it.Close(); err != nil {
		fail(err)
	}
}

func (h *lsmHandle[K, N]) deletePrefix(p []byte) { h.st.b.lsm.deleteRows(p, prefixEnd(p)) }
func (h *lsmHandle[K, N]) set(k, v []byte)       { h.st.b.lsm.setRow(k, v) }
func (h *lsmHandle[K, N]) delete(k []byte)       { h.st.b.lsm.deleteRow(k) }
func (h *lsmHandle[K, N]) merge(k, v []byte)     { h.st.b.lsm.mergeRow(k, v) }

// getRaw returns a copy of row k's value, and false if there is none.
// It reads the store: the state must have no value cache (a list's
// buffered appends are the caller's to add).
func (h *lsmHandle[K, N]) getRaw(k []byte) ([]byte, bool) {
	v, closer, err := h.db().Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		fail(err)
	}
	v = append([]byte(nil), v...)
	_ = closer.Close()
	return v, true
}

// lsmGet returns row k's value decoded with dec, and false if there is
// none. It reads the store: the state must have no value cache (a list's
// buffered appends are the caller's to add).
func lsmGet[K, N comparable, T any](h *lsmHandle[K, N], k []byte, dec func([]byte) (T, error)) (T, bool) {
	var zero T
	v, closer, err := h.db().Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return zero, false
	}
	if err != nil {
		fail(err)
	}
	t, err := dec(v)
	_ = closer.Close()
	if err != nil {
		fail(err)
	}
	return t, true
}

// The kinds of state on Pebble. One type serves the plain and the
// namespaced variant of a kind.

type lsmValue[K, N comparable, T any] struct {
	lsmHandle[K, N]
	c *valueCache[K, N, T]
}

func (s *lsmValue[K, N, T]) Value() (T, bool) { return s.c.get(&s.lsmHandle, s.ns) }

func (s *lsmValue[K, N, T]) Update(v T) { s.c.set(s.ns, v, false) }

func (s *lsmValue[K, N, T]) Clear() {
	var zero T
	s.c.set(s.ns, zero, true)
}

func (s *lsmValue[K, N, T]) ClearAllNamespaces() {
	s.c.dropKey()
	s.lsmHandle.ClearAllNamespaces()
}

type lsmList[K, N comparable, T any] struct {
	lsmHandle[K, N]
	c   codec.Codec[T]
	enc valueEncoding[[]T]
	lc  *listCache[K, N]
	buf []byte
}

func (s *lsmList[K, N, T]) Get() []T {
	l, _ := lsmGet(&s.lsmHandle, s.row(), s.enc.decode)
	if p := s.lc.lookup(s.ns); p != nil {
		var err error
		if l, err = appendElems(l, s.c, p.n, p.enc); err != nil {
			fail(err)
		}
	}
	return l
}

func (s *lsmList[K, N, T]) Add(v T) { s.AddWasPresent(v) }

// AddWasPresent knows the list had elements only if it has elements not
// yet written to the store: it does not read the store to tell.
func (s *lsmList[K, N, T]) AddWasPresent(v T) bool {
	p := s.lc.pending(s.ns)
	had := p.n > 0
	size := len(p.enc)
	p.enc = s.c.Append(p.enc, v)
	p.n++
	s.lc.grew(p, size)
	return had
}

func (s *lsmList[K, N, T]) AddAll(vs []T) {
	if len(vs) == 0 {
		return
	}
	p := s.lc.pending(s.ns)
	size := len(p.enc)
	for i := range vs {
		p.enc = s.c.Append(p.enc, vs[i])
	}
	p.n += uint64(len(vs))
	s.lc.grew(p, size)
}

func (s *lsmList[K, N, T]) Update(vs []T) {
	if len(vs) == 0 {
		s.Clear()
		return
	}
	s.lc.dropCurrent(s.ns)
	s.buf = s.enc.append(s.buf[:0], vs)
	s.set(s.row(), s.buf)
}

func (s *lsmList[K, N, T]) Clear() {
	s.lc.dropCurrent(s.ns)
	s.delete(s.row())
}

func (s *lsmList[K, N, T]) ClearAllNamespaces() {
	s.lc.dropKey()
	s.lsmHandle.ClearAllNamespaces()
}

func (s *lsmList[K, N, T]) MergeNamespaces(target N, sources ...N) {
	s.key2 = s.appendRow(s.key2[:0], target)
	s.lc.writeCurrent(target, s.key2)
	for _, src := range sources {
		if src == target {
			continue
		}
		s.key = s.appendRow(s.key[:0], src)
		s.lc.writeCurrent(src, s.key)
		if v, ok := s.getRaw(s.key); ok {
			s.merge(s.key2, v)
			s.delete(s.key)
		}
	}
}

type lsmMap[K, N, UK comparable, UV any] struct {
	lsmHandle[K, N]
	kc codec.Codec[UK]
	vc codec.Codec[UV]
	c  *mapCache[K, N, UK, UV]
}

func (s *lsmMap[K, N, UK, UV]) Get(uk UK) (UV, bool) { return s.c.get(&s.lsmHandle, s.ns, uk) }

func (s *lsmMap[K, N, UK, UV]) Put(uk UK, uv UV) { s.c.set(s.ns, uk, uv, false) }

func (s *lsmMap[K, N, UK, UV]) Remove(uk UK) {
	var zero UV
	s.c.set(s.ns, uk, zero, true)
}

func (s *lsmMap[K, N, UK, UV]) Contains(uk UK) bool {
	_, ok := s.Get(uk)
	return ok
}

// All iterates over the map as it was when All was called: entries put or
// removed during the iteration do not change what it yields.
func (s *lsmMap[K, N, UK, UV]) All() iter.Seq2[UK, UV] {
	if rows, ok := s.c.entries(s.ns); ok {
		type entry struct {
			k UK
			v UV
		}
		es := make([]entry, 0, len(rows))
		for k, e := range rows {
			if !e.absent() {
				es = append(es, entry{k, e.val})
			}
		}
		return func(yield func(UK, UV) bool) {
			for _, e := range es {
				if !yield(e.k, e.v) {
					return
				}
			}
		}
	}
	ck := s.c.current(s.ns)
	p := s.row()
	p = append([]byte(nil), p...)
	return func(yield func(UK, UV) bool) {
		s.c.commitMap(ck)
		it, err := s.db().NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			fail(err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			uk, err := decodeExactly(s.kc, it.Key()[len(p):], "map key")
			if err != nil {
				fail(err)
			}
			raw, err := it.ValueAndErr()
			if err != nil {
				fail(err)
			}
			uv, err := decodeExactly(s.vc, raw, "map value")
			if err != nil {
				fail(err)
			}
			if !yield(uk, uv) {
				return
			}
		}
		if err := it.Error(); err != nil {
			fail(err)
		}
	}
}

// rows calls fn with each row of the current key's map in the current
// namespace, reading the store (its dirty entries written first).
func (s *lsmMap[K, N, UK, UV]) rows(fn func() bool) {
	s.c.commitMap(s.c.current(s.ns))
	p := s.row()
	it, err := s.db().NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		fail(err)
	}
	for ok := it.First(); ok && fn(); ok = it.Next() {
	}
	if err := it.Close(); err != nil {
		fail(err)
	}
}

func (s *lsmMap[K, N, UK, UV]) Len() int {
	n := 0
	if rows, ok := s.c.entries(s.ns); ok {
		for _, e := range rows {
			if !e.absent() {
				n++
			}
		}
		return n
	}
	s.rows(func() bool { n++; return true })
	return n
}

func (s *lsmMap[K, N, UK, UV]) IsEmpty() bool {
	if rows, ok := s.c.entries(s.ns); ok {
		for _, e := range rows {
			if !e.absent() {
				return false
			}
		}
		return true
	}
	empty := true
	s.rows(func() bool { empty = false; return false })
	return empty
}

func (s *lsmMap[K, N, UK, UV]) Clear() {
	s.c.clear(s.ns)
	s.deletePrefix(s.row())
}

func (s *lsmMap[K, N, UK, UV]) ClearAllNamespaces() {
	s.c.dropKey()
	s.lsmHandle.ClearAllNamespaces()
}

type lsmReducing[K, N comparable, T any] struct {
	lsmHandle[K, N]
	c      *valueCache[K, N, T]
	reduce func(acc, v T) T
}

func (s *lsmReducing[K, N, T]) Get() (T, bool) { return s.c.get(&s.lsmHandle, s.ns) }

func (s *lsmReducing[K, N, T]) Add(v T) { s.AddWasPresent(v) }

func (s *lsmReducing[K, N, T]) AddWasPresent(v T) bool {
	cur, ok := s.c.get(&s.lsmHandle, s.ns)
	if ok {
		v = s.reduce(cur, v)
	}
	s.c.set(s.ns, v, false)
	return ok
}

func (s *lsmReducing[K, N, T]) Clear() {
	var zero T
	s.c.set(s.ns, zero, true)
}

func (s *lsmReducing[K, N, T]) ClearAllNamespaces() {
	s.c.dropKey()
	s.lsmHandle.ClearAllNamespaces()
}

func (s *lsmReducing[K, N, T]) MergeNamespaces(target N, sources ...N) {
	var zero T
	for _, src := range sources {
		if src == target {
			continue
		}
		v, ok := s.c.get(&s.lsmHandle, src)
		if !ok {
			continue
		}
		s.c.set(src, zero, true)
		if cur, ok := s.c.get(&s.lsmHandle, target); ok {
			v = s.reduce(cur, v)
		}
		s.c.set(target, v, false)
	}
}

type lsmAggregating[K, N comparable, IN, ACC, OUT any] struct {
	lsmHandle[K, N]
	c  *valueCache[K, N, ACC]
	fn AggregateFunction[IN, ACC, OUT]
}

func (s *lsmAggregating[K, N, IN, ACC, OUT]) Get() (OUT, bool) {
	acc, ok := s.c.get(&s.lsmHandle, s.ns)
	if !ok {
		var zero OUT
		return zero, false
	}
	return s.fn.GetResult(acc), true
}

func (s *lsmAggregating[K, N, IN, ACC, OUT]) Add(v IN) { s.AddWasPresent(v) }

func (s *lsmAggregating[K, N, IN, ACC, OUT]) AddWasPresent(v IN) bool {
	acc, ok := s.c.get(&s.lsmHandle, s.ns)
	if !ok {
		acc = s.fn.CreateAccumulator()
	}
	s.c.set(s.ns, s.fn.Add(v, acc), false)
	return ok
}

func (s *lsmAggregating[K, N, IN, ACC, OUT]) Clear() {
	var zero ACC
	s.c.set(s.ns, zero, true)
}

func (s *lsmAggregating[K, N, IN, ACC, OUT]) ClearAllNamespaces() {
	s.c.dropKey()
	s.lsmHandle.ClearAllNamespaces()
}

func (s *lsmAggregating[K, N, IN, ACC, OUT]) MergeNamespaces(target N, sources ...N) {
	var zero ACC
	for _, src := range sources {
		if src == target {
			continue
		}
		acc, ok := s.c.get(&s.lsmHandle, src)
		if !ok {
			continue
		}
		s.c.set(src, zero, true)
		if cur, ok := s.c.get(&s.lsmHandle, target); ok {
			acc = s.fn.Merge(cur, acc)
		}
		s.c.set(target, acc, false)
	}
}

// Registration of each kind on Pebble, called by the registration
// functions in kinds.go when the backend was created WithPebble. A nil nc
// is the void namespace.

func lsmValueOf[K, N comparable, T any](b *KeyedBackend[K], inf stateInfo, nc codec.Codec[N], c codec.Codec[T]) (*lsmValue[K, N, T], error) {
	enc := valueEnc(c)
	st, err := registerLSM[K, *lsmValue[K, N, T]](b, inf, valueLayout(c), false, restoreOne(b, nc, enc.decode), cacheOf[K](nc, enc))
	if err != nil {
		return nil, err
	}
	return &lsmValue[K, N, T]{lsmHandle: lsmHandle[K, N]{st: st, nc: nc}, c: st.cache.(*valueCache[K, N, T])}, nil
}

func lsmListOf[K, N comparable, T any](b *KeyedBackend[K], inf stateInfo, nc codec.Codec[N], c codec.Codec[T]) (*lsmList[K, N, T], error) {
	enc := listEnc(c)
	st, err := registerLSM[K, *lsmList[K, N, T]](b, inf, valueLayout(c), false, restoreOne(b, nc, enc.decode),
		func(st *lsmState[K]) rowCache { return newListCache(st, nc) })
	if err != nil {
		return nil, err
	}
	return &lsmList[K, N, T]{lsmHandle: lsmHandle[K, N]{st: st, nc: nc}, c: c, enc: enc, lc: st.cache.(*listCache[K, N])}, nil
}

func lsmMapOf[K, N, UK comparable, UV any](b *KeyedBackend[K], inf stateInfo, nc codec.Codec[N], kc codec.Codec[UK], vc codec.Codec[UV]) (*lsmMap[K, N, UK, UV], error) {
	st, err := registerLSM[K, *lsmMap[K, N, UK, UV]](b, inf, mapLayout(kc, vc), true, restoreMap(b, nc, kc, vc),
		func(st *lsmState[K]) rowCache { return newMapCache(st, nc, kc, vc) })
	if err != nil {
		return nil, err
	}
	return &lsmMap[K, N, UK, UV]{lsmHandle: lsmHandle[K, N]{st: st, nc: nc}, kc: kc, vc: vc, c: st.cache.(*mapCache[K, N, UK, UV])}, nil
}

func lsmReducingOf[K, N comparable, T any](b *KeyedBackend[K], inf stateInfo, nc codec.Codec[N], c codec.Codec[T], reduce func(acc, v T) T) (*lsmReducing[K, N, T], error) {
	enc := valueEnc(c)
	st, err := registerLSM[K, *lsmReducing[K, N, T]](b, inf, valueLayout(c), false, restoreOne(b, nc, enc.decode), cacheOf[K](nc, enc))
	if err != nil {
		return nil, err
	}
	return &lsmReducing[K, N, T]{lsmHandle: lsmHandle[K, N]{st: st, nc: nc}, c: st.cache.(*valueCache[K, N, T]), reduce: reduce}, nil
}

func lsmAggregatingOf[K, N comparable, IN, ACC, OUT any](b *KeyedBackend[K], inf stateInfo, nc codec.Codec[N], c codec.Codec[ACC], fn AggregateFunction[IN, ACC, OUT]) (*lsmAggregating[K, N, IN, ACC, OUT], error) {
	enc := valueEnc(c)
	st, err := registerLSM[K, *lsmAggregating[K, N, IN, ACC, OUT]](b, inf, valueLayout(c), false, restoreOne(b, nc, enc.decode), cacheOf[K](nc, enc))
	if err != nil {
		return nil, err
	}
	return &lsmAggregating[K, N, IN, ACC, OUT]{lsmHandle: lsmHandle[K, N]{st: st, nc: nc}, c: st.cache.(*valueCache[K, N, ACC]), fn: fn}, nil
}

// cacheOf returns the constructor of the write-back cache of a state of
// one row per key and namespace, its values encoded by enc.
func cacheOf[K, N comparable, T any](nc codec.Codec[N], enc valueEncoding[T]) func(*lsmState[K]) rowCache {
	return func(st *lsmState[K]) rowCache { return newValueCache(st, nc, enc) }
}
