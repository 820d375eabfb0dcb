package state

import (
	"fmt"

	"github.com/weirstream/weir/codec"
)

// nsKey is the table key of namespaced state.
type nsKey[K, N comparable] struct {
	key K
	ns  N
}

// stateTable is a registered keyed state: its table and the encoding of
// its entries. MK is K for state in the void namespace (so lookups hash
// only the key) and nsKey[K, N] for namespaced state.
type stateTable[MK comparable, E any] struct {
	*table[MK, E]
	inf stateInfo
	// appendEntry appends an entry as length-prefixed key, namespace and
	// value bytes. It runs on the serializing goroutine.
	appendEntry func(dst []byte, mk MK, e E) []byte
	// appendKey appends a removal: the key and namespace, and no value.
	appendKey func(dst []byte, mk MK) []byte
	// appendEntries, if set, appends every entry of a shard's table as
	// appendEntry would, in one loop (see appendInt64Entries).
	appendEntries func(dst []byte, m *omap[MK, E]) []byte
	// decodeEntry decodes an entry and returns the hash of its key.
	decodeEntry func(key, ns, val []byte) (MK, uint32, E, error)
	// decodeKey decodes the key and namespace of an entry.
	decodeKey func(key, ns []byte) (MK, uint32, error)
	checkKG   func(kgIdx int, h uint32) error
	// ttl is set for a state with a time to live whose snapshots leave
	// expired values out (TTLConfig.CleanupFullSnapshot).
	ttl *tableTTL[E]
	// deltaHint sizes the next delta's entries: the last one's, and some.
	deltaHint int
}

// valueEncoding is how a state kind encodes the E it stores per entry.
type valueEncoding[E any] struct {
	append func(dst []byte, e E) []byte
	decode func(src []byte) (E, error)
	// appendPrefixed, if set, appends the length of append's bytes and
	// then the bytes, faster (see prefixedAppender).
	appendPrefixed func(dst []byte, e E) []byte
	// int64 says E is an int64 encoded by codec.Int64.
	int64 bool
}

// prefixed returns a function appending e's length, then its bytes.
func (ve valueEncoding[E]) prefixed() func(dst []byte, e E) []byte {
	if ve.appendPrefixed != nil {
		return ve.appendPrefixed
	}
	return func(dst []byte, e E) []byte {
		m := len(dst)
		dst = ve.append(append(dst, 0), e)
		if l := len(dst) - m - 1; l < 0x80 {
			dst[m] = byte(l)
			return dst
		}
		return codec.FinishLength(dst, m)
	}
}

// newVoidTable returns a table for state in the void namespace.
func newVoidTable[K comparable, E any](b *KeyedBackend[K], inf stateInfo, ve valueEncoding[E]) *stateTable[K, E] {
	kc := b.keyCodec
	ka, va := prefixedAppender(kc), ve.prefixed()
	var entries func([]byte, *omap[K, E]) []byte
	if ve.int64 && any(kc) == any(codec.Int64()) {
		entries, _ = any(appendInt64Entries).(func([]byte, *omap[K, E]) []byte)
	}
	return &stateTable[K, E]{
		table:         newTable[K, E](b.ep, b.kgs.Len(), b.shardSize, b.hasher, nil),
		inf:           inf,
		appendEntries: entries,
		appendEntry: func(dst []byte, k K, e E) []byte {
			dst = append(ka(dst, k), 0) // no namespace
			return va(dst, e)
		},
		appendKey: func(dst []byte, k K) []byte {
			return append(ka(dst, k), 0, 0) // no namespace, no value
		},
		decodeEntry: func(key, ns, val []byte) (K, uint32, E, error) {
			var e E
			k, err := decodeExactly(kc, key, "key")
			if err != nil {
				return k, 0, e, err
			}
			if len(ns) != 0 {
				return k, 0, e, fmt.Errorf("%w: %d namespace bytes in state without namespace", ErrCorrupt, len(ns))
			}
			e, err = ve.decode(val)
			return k, b.hasher(k), e, err
		},
		decodeKey: func(key, ns []byte) (K, uint32, error) {
			k, err := decodeExactly(kc, key, "key")
			if err != nil {
				return k, 0, err
			}
			if len(ns) != 0 {
				return k, 0, fmt.Errorf("%w: %d namespace bytes in state without namespace", ErrCorrupt, len(ns))
			}
			return k, b.hasher(k), nil
		},
		checkKG: b.checkKeyGroup,
	}
}

// newNSTable returns a table for namespaced state.
func newNSTable[K, N comparable, E any](b *KeyedBackend[K], inf stateInfo, nc codec.Codec[N], ve valueEncoding[E]) *stateTable[nsKey[K, N], E] {
	kc, hasher := b.keyCodec, b.hasher
	var nsHash func(nsKey[K, N]) uint32
	if nsh := nsHasher[N](); nsh != nil {
		nsHash = func(mk nsKey[K, N]) uint32 { return nsh(mk.ns) }
	}
	ka, na, va := prefixedAppender(kc), prefixedAppender(nc), ve.prefixed()
	return &stateTable[nsKey[K, N], E]{
		table: newTable[nsKey[K, N], E](b.ep, b.kgs.Len(), b.shardSize,
			func(mk nsKey[K, N]) uint32 { return hasher(mk.key) }, nsHash),
		inf: inf,
		appendEntry: func(dst []byte, mk nsKey[K, N], e E) []byte {
			return va(na(ka(dst, mk.key), mk.ns), e)
		},
		appendKey: func(dst []byte, mk nsKey[K, N]) []byte {
			return append(na(ka(dst, mk.key), mk.ns), 0) // no value
		},
		decodeKey: func(key, ns []byte) (nsKey[K, N], uint32, error) {
			var (
				mk  nsKey[K, N]
				err error
			)
			if mk.key, err = decodeExactly(kc, key, "key"); err != nil {
				return mk, 0, err
			}
			if mk.ns, err = decodeExactly(nc, ns, "namespace"); err != nil {
				return mk, 0, err
			}
			return mk, hasher(mk.key), nil
		},
		decodeEntry: func(key, ns, val []byte) (nsKey[K, N], uint32, E, error) {
			var (
				mk  nsKey[K, N]
				e   E
				err error
			)
			if mk.key, err = decodeExactly(kc, key, "key"); err != nil {
				return mk, 0, e, err
			}
			if mk.ns, err = decodeExactly(nc, ns, "namespace"); err != nil {
				return mk, 0, e, err
			}
			e, err = ve.decode(val)
			return mk, hasher(mk.key), e, err
		},
		checkKG: b.checkKeyGroup,
	}
}

func appendPrefixed[T any](dst []byte, c codec.Codec[T], v T) []byte {
	dst, m := codec.ReserveLength(dst)
	return codec.FinishLength(c.Append(dst, v), m)
}

// decodeExactly decodes a value that must fill src.
func decodeExactly[T any](c codec.Codec[T], src []byte, what string) (T, error) {
	v, n, err := c.Decode(src)
	if err != nil {
		return v, fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
	}
	if n != len(src) {
		return v, fmt.Errorf("%w: %s used %d of %d bytes", ErrCorrupt, what, n, len(src))
	}
	return v, nil
}

func (s *stateTable[MK, E]) info() stateInfo { return s.inf }

func (s *stateTable[MK, E]) capture(now int64) stateView {
	shards, start := s.table.capture()
	v := &tableView[MK, E]{shards: shards, start: start, appendEntry: s.appendEntry, appendEntries: s.appendEntries, appendKey: s.appendKey, kg: -1}
	if s.ttl != nil {
		v.prune, v.cutoff = s.ttl.prune, now-s.ttl.ttl
		return v
	}
	// Claimed shards (claim.go): their counts are taken now, as the owner
	// may modify a shard in place once it is encoded.
	v.t = s.table
	v.claims = make([]shardClaim[MK, E], len(shards))
	v.lens = make([]int, len(start)-1)
	s.table.attachClaims(shards, start, v.claims, v.lens, &claimSet[MK, E]{encode: v.encode, ownerEncodes: v.appendEntries != nil})
	return v
}

func (s *stateTable[MK, E]) restoreGroup(kgIdx, n int, data []byte) error {
	s.reserve(kgIdx, n)
	return eachEntry(n, data, func(key, ns, val []byte) error {
		mk, h, e, err := s.decodeEntry(key, ns, val)
		if err != nil {
			return err
		}
		if err := s.checkKG(kgIdx, h); err != nil {
			return err
		}
		s.set(kgIdx, h, mk, e)
		return nil
	})
}

// removeGroup removes the n entries of key group kgIdx named in data (as
// in a delta snapshot: keys and namespaces, without values).
func (s *stateTable[MK, E]) removeGroup(kgIdx, n int, data []byte) error {
	return eachEntry(n, data, func(key, ns, val []byte) error {
		if len(val) != 0 {
			return corrupt("a removal with %d value bytes", len(val))
		}
		mk, h, err := s.decodeKey(key, ns)
		if err != nil {
			return err
		}
		if err := s.checkKG(kgIdx, h); err != nil {
			return err
		}
		s.remove(kgIdx, h, mk)
		return nil
	})
}

// clearGroup is never part of a table's delta: a table's changes are
// entries.
func (s *stateTable[MK, E]) clearGroup(int) error {
	return corrupt("%v: a delta clears a key group of a table", s.inf)
}

// eachEntry calls fn for each of the n entries in data.
func eachEntry(n int, data []byte, fn func(key, ns, val []byte) error) error {
	d := &decoder{b: data}
	for range n {
		key, ns, val := d.bytes(), d.bytes(), d.bytes()
		if d.err != nil {
			return d.err
		}
		if err := fn(key, ns, val); err != nil {
			return err
		}
	}
	if len(d.b) != 0 {
		return corrupt("%d bytes after %d entries", len(d.b), n)
	}
	return nil
}

// tableView is the snapshot of a stateTable: the shards it had when the
// snapshot was taken, which the owner no longer modifies.
type tableView[MK comparable, E any] struct {
	shards        []*shard[MK, E]
	start         []int
	appendEntry   func(dst []byte, mk MK, e E) []byte
	appendEntries func(dst []byte, m *omap[MK, E]) []byte // nil: entry by entry
	appendKey     func(dst []byte, mk MK) []byte

	// prune, if set, leaves out the values expired at cutoff: then
	// groupLen encodes key group kg's live entries, n of them, into buf
	// for appendGroup.
	prune  pruneFunc[E]
	cutoff int64
	kg, n  int
	buf    []byte

	// Without prune (always then), the shards' claims (claim.go), and
	// the number of entries per key group when the snapshot was taken;
	// err is the first error writing them.
	t      *table[MK, E]
	claims []shardClaim[MK, E]
	lens   []int
	err    error
}

// encode appends every entry of m.
func (v *tableView[MK, E]) encode(dst []byte, m *omap[MK, E]) []byte {
	if v.appendEntries != nil {
		return v.appendEntries(dst, m)
	}
	for mk, e := range m.all() {
		dst = v.appendEntry(dst, mk, e.v)
	}
	return dst
}

func (v *tableView[MK, E]) groupLen(kgIdx int) int {
	if v.prune != nil {
		v.fill(kgIdx)
		return v.n
	}
	return v.lens[kgIdx]
}

func (v *tableView[MK, E]) appendGroup(dst []byte, kgIdx int) []byte {
	if v.prune != nil {
		if v.kg != kgIdx {
			v.fill(kgIdx)
		}
		return append(dst, v.buf...)
	}
	var err error
	for i := v.start[kgIdx]; i < v.start[kgIdx+1]; i++ {
		if dst, err = writeClaimed(dst, v.shards[i], &v.claims[i]); err != nil {
			v.err = err
			return dst
		}
	}
	return dst
}

// failure returns the first error writing the snapshot's claimed shards.
func (v *tableView[MK, E]) failure() error { return v.err }

// release ends the snapshot's claims, on the owner's goroutine.
func (v *tableView[MK, E]) release() {
	if v.claims != nil {
		v.t.detachClaims(v.shards, v.claims)
	}
}

// fill encodes the live entries of key group kgIdx. It runs on the
// serializing goroutine: pruning makes new containers and modifies none.
func (v *tableView[MK, E]) fill(kgIdx int) {
	v.kg, v.n, v.buf = kgIdx, 0, v.buf[:0]
	for _, s := range v.shards[v.start[kgIdx]:v.start[kgIdx+1]] {
		for mk, e := range s.m.all() {
			e, k := v.prune(e.v, v.cutoff, 0)
			if k == keepNone {
				continue
			}
			v.buf = v.appendEntry(v.buf, mk, e)
			v.n++
		}
	}
}

// rawSegment holds n entries of one state in one key group, as they
// appear in a snapshot block.
type rawSegment struct {
	n    int
	data []byte
	// op says what the entries do in a placeholder's key group: a full
	// snapshot's, or a delta's puts or removals (delta.go).
	op uint8
}

// rawState holds the restored entries of a state until it is registered;
// it is snapshotted as it is, so that checkpoints taken before the state is
// registered keep it.
type rawState struct {
	inf    stateInfo
	groups [][]rawSegment // by key group index, unless staged
	// stage, in a backend created WithPebble, keeps the segments as rows
	// of its store instead of groups (lsmstage.go).
	stage *rawStage
	// inStore marks a state of an adopted native snapshot: its entries
	// are rows of the embedded store, besides any segments.
	inStore bool
	// rows makes a view of those rows in a snapshot of the store (see
	// newRaw).
	rows func(r pebbleReader) *lsmView
}

func (r *rawState) info() stateInfo { return r.inf }

// inStoreOnly says the state's entries are all rows of the store (an
// adopted native snapshot's), so that a native snapshot need not write
// them: its files hold them under the same id.
func (r *rawState) inStoreOnly() bool { return r.inStore && (r.stage == nil || r.stage.rows == 0) }

func (r *rawState) capture(int64) stateView {
	timers := r.inf.kind == kindTimers
	if r.stage == nil {
		// Segments are only ever appended, so capturing the slice
		// headers freezes the view.
		return &rawView{groups: append([][]rawSegment(nil), r.groups...), kg: -1, timers: timers}
	}
	l := r.stage.store()
	src := &storedSegments{l: l, snap: l.snapshot()}
	if r.stage.rows > 0 {
		src.stage = r.stage
	}
	if r.inStore {
		src.rows = r.rows(src.snap)
	}
	return &rawView{src: src, kg: -1, timers: timers}
}

func (r *rawState) restoreGroup(kgIdx, n int, data []byte) error {
	return r.addSegment(kgIdx, rawSegment{n: n, data: data})
}

// addSegment adds a delta's puts or removals.
func (r *rawState) addSegment(kgIdx int, seg rawSegment) error {
	if r.stage != nil {
		return r.stage.add(kgIdx, seg)
	}
	r.groups[kgIdx] = append(r.groups[kgIdx], seg)
	return nil
}

func (r *rawState) removeGroup(kgIdx, n int, data []byte) error {
	return r.addSegment(kgIdx, rawSegment{n: n, data: data, op: opDel})
}

func (r *rawState) clearGroup(kgIdx int) error {
	if r.stage != nil {
		if err := r.stage.clear(kgIdx); err != nil {
			return err
		}
		return r.stage.add(kgIdx, rawSegment{op: opDel})
	}
	// Captured views hold their own slice headers.
	r.groups[kgIdx] = []rawSegment{{op: opDel}}
	return nil
}

// rawView is a placeholder's view. A key group with a delta's segments
// is merged (into n entries) before it is written, except timers: a delta
// replaces a key group's timers whole (clearGroup drops the segments
// before), and the timers of one key and namespace differ in their
// values.
type rawView struct {
	groups [][]rawSegment
	// src, if set, holds the segments instead of groups: in the store.
	src *storedSegments
	// The segments of key group kg, n entries, as segments made them.
	kg, n  int
	segs   []rawSegment
	timers bool
	err    error
}

func (v *rawView) segments(kgIdx int) (int, []rawSegment) {
	if v.src == nil && !merged(v.groups[kgIdx]) {
		segs := v.groups[kgIdx]
		n := 0
		for _, seg := range segs {
			n += seg.n
		}
		return n, segs
	}
	if v.kg == kgIdx {
		return v.n, v.segs
	}
	var segs []rawSegment
	if v.src == nil {
		segs = v.groups[kgIdx]
	} else if v.err == nil {
		var err error
		if segs, err = v.src.read(kgIdx); err != nil {
			v.err = fmt.Errorf("reading the restored entries of key group %d: %w", kgIdx, err)
			segs = nil
		}
	}
	n := 0
	if !v.timers && merged(segs) {
		var data []byte
		n, data = mergeRaw(segs)
		segs = []rawSegment{{n: n, data: data}}
	} else {
		for _, seg := range segs {
			n += seg.n
		}
	}
	v.kg, v.n, v.segs = kgIdx, n, segs
	return n, segs
}

func (v *rawView) release() {
	if v.src != nil {
		v.src.l.release(v.src.snap)
	}
}

func (v *rawView) failure() error { return v.err }

func (v *rawView) groupLen(kgIdx int) int {
	n, _ := v.segments(kgIdx)
	return n
}

func (v *rawView) appendGroup(dst []byte, kgIdx int) []byte {
	_, segs := v.segments(kgIdx)
	for _, seg := range segs {
		dst = append(dst, seg.data...)
	}
	return dst
}
