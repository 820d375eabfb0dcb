package state

import (
	"hash/maphash"
	"iter"
	"reflect"
	"slices"
	"unsafe"
)

// omap is the hash table of a shard: open addressing with linear probing
// and backward-shift deletion. Inserting and deleting entries at a high
// rate (a request's state written when it starts and cleared when it
// ends) leaves no tombstones, where a Go map's deleted slots lengthen the
// probes of later lookups until it grows; and copying a shard for
// copy-on-write copies one flat array instead of rehashing every entry.
//
// Each slot holds an entry and its inner hash (see innerHash). An entry's
// home slot is its inner hash's top bits; comparing hashes before keys
// rejects almost every other entry of a probe run without comparing its
// key. The table is at most 3/4 full.
type omap[MK comparable, E any] struct {
	es    []oent[MK, E] // len(es) is 0 or a power of two
	n     int
	shift uint8 // 32 - log2(len(es))
}

// oent is a slot: an entry, the epoch it was last written in, and its
// inner hash with bit 0 set (0: the slot is empty). The hash sits beside
// the key, so that a lookup in a table too large for the CPU caches
// misses them once; the hash and the epoch share a word, so that a
// counter's slot (int64 key and value) is 24 bytes, which copying a
// shard on write and encoding it in a snapshot move.
type oent[MK comparable, E any] struct {
	hv uint32
	ep uint32 // see slot.ep; epochs end below maxEpoch
	mk MK
	v  E
}

// slot returns e's value and epoch.
func (e *oent[MK, E]) slot() slot[E] { return slot[E]{e.v, uint64(e.ep)} }

// setSlot stores s's value and epoch in e.
func (e *oent[MK, E]) setSlot(s slot[E]) { e.v, e.ep = s.v, uint32(s.ep) }

const minOmapLen = 8

// omapLen returns the number of slots for n entries.
func omapLen(n int) int {
	c := minOmapLen
	for c*3 < n*4 {
		c *= 2
	}
	return c
}

// newOmap returns a table with room for n entries before it grows.
func newOmap[MK comparable, E any](n int) omap[MK, E] {
	var m omap[MK, E]
	if n > 0 {
		m.alloc(omapLen(n))
	}
	return m
}

func (m *omap[MK, E]) alloc(c int) {
	m.es = make([]oent[MK, E], c)
	s := uint8(32)
	for 1<<(32-s) < c {
		s--
	}
	m.shift = s
}

func (m *omap[MK, E]) len() int { return m.n }

// innerHash is an entry's hash inside a shard, from its key's hash h
// (and, for namespaced state, its namespace's, mixed in by the caller).
// A key group's keys share the low bits of h (KeyGroupFor takes it modulo
// the key groups) and a shard's share its top bits, so h is mixed again
// (the lowbias32 finalizer, a bijection) before its top bits pick a slot.
func innerHash(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x7feb352d
	h ^= h >> 15
	h *= 0x846ca68b
	h ^= h >> 16
	return h | 1
}

// find returns the slot of mk, whose inner hash is hv, or -1.
func (m *omap[MK, E]) find(hv uint32, mk MK) int {
	if m.n == 0 {
		return -1
	}
	mask := len(m.es) - 1
	for p := int(hv >> m.shift); ; p = (p + 1) & mask {
		e := &m.es[p]
		if e.hv == 0 {
			return -1
		}
		if e.hv == hv && e.mk == mk {
			return p
		}
	}
}

func (m *omap[MK, E]) get(hv uint32, mk MK) (slot[E], bool) {
	if p := m.find(hv, mk); p >= 0 {
		return m.es[p].slot(), true
	}
	return slot[E]{}, false
}

// set stores s under mk and reports whether mk is new.
func (m *omap[MK, E]) set(hv uint32, mk MK, s slot[E]) bool {
	e, found := m.upsert(hv, mk)
	e.setSlot(s)
	return !found
}

// upsert returns the entry of mk, adding it (with a zero slot) if it is
// absent, and whether it was there. The pointer is valid until the next
// change to the table.
func (m *omap[MK, E]) upsert(hv uint32, mk MK) (*oent[MK, E], bool) {
	if (m.n+1)*4 > len(m.es)*3 {
		if p := m.find(hv, mk); p >= 0 {
			return &m.es[p], true
		}
		m.resize(max(minOmapLen, 2*len(m.es)))
	}
	mask := len(m.es) - 1
	p := int(hv >> m.shift)
	for ; ; p = (p + 1) & mask {
		e := &m.es[p]
		if e.hv == 0 {
			break
		}
		if e.hv == hv && e.mk == mk {
			return e, true
		}
	}
	m.es[p] = oent[MK, E]{hv: hv, mk: mk}
	m.n++
	return &m.es[p], false
}

// add puts an entry known to be absent.
func (m *omap[MK, E]) add(e oent[MK, E]) {
	if (m.n+1)*4 > len(m.es)*3 {
		m.resize(max(minOmapLen, 2*len(m.es)))
	}
	m.place(e)
}

// place puts an entry known to be absent, with room for it.
func (m *omap[MK, E]) place(e oent[MK, E]) {
	mask := len(m.es) - 1
	p := int(e.hv >> m.shift)
	for m.es[p].hv != 0 {
		p = (p + 1) & mask
	}
	m.es[p] = e
	m.n++
}

func (m *omap[MK, E]) resize(c int) {
	es := m.es
	m.alloc(c)
	m.n = 0
	for i := range es {
		if es[i].hv != 0 {
			m.place(es[i])
		}
	}
}

// del removes mk and reports whether it was there.
func (m *omap[MK, E]) del(hv uint32, mk MK) bool {
	p := m.find(hv, mk)
	if p < 0 {
		return false
	}
	m.delAt(p)
	return true
}

// delAt removes the entry in slot p.
func (m *omap[MK, E]) delAt(p int) {
	m.n--
	mask := len(m.es) - 1
	// Backward shift: move later entries of the probe run into the hole
	// while that keeps each at or after its home slot.
	for {
		m.es[p] = oent[MK, E]{}
		j := p
		for {
			j = (j + 1) & mask
			x := m.es[j].hv
			if x == 0 {
				return
			}
			if (j-int(x>>m.shift))&mask >= (j-p)&mask {
				m.es[p] = m.es[j]
				p = j
				break
			}
		}
	}
}

// clone returns a copy of m that shares nothing with it but the values'
// contents (the caller's copy-on-write rules cover those).
func (m *omap[MK, E]) clone() omap[MK, E] {
	return omap[MK, E]{es: slices.Clone(m.es), n: m.n, shift: m.shift}
}

// all yields every entry, in slot order. The table must not be modified
// while it yields.
func (m *omap[MK, E]) all() iter.Seq2[MK, slot[E]] {
	return func(yield func(MK, slot[E]) bool) {
		for i := range m.es {
			if e := &m.es[i]; e.hv != 0 && !yield(e.mk, e.slot()) {
				return
			}
		}
	}
}

// entries yields every entry, in slot order.
func (m *omap[MK, E]) entries() iter.Seq[*oent[MK, E]] {
	return func(yield func(*oent[MK, E]) bool) {
		for i := range m.es {
			if e := &m.es[i]; e.hv != 0 && !yield(e) {
				return
			}
		}
	}
}

// nsHasher returns the hash of a namespace that a table mixes into its
// keys' hashes: a scalar namespace's deterministic hash, a hash of the
// bytes of one whose equality is its bytes' (plainMemory), nil for a
// namespace type of size zero (one namespace), or for others the
// runtime's hash of the value (a table's inner hashes are never stored or
// sent, so a process's seed is enough).
func nsHasher[N comparable]() func(N) uint32 {
	t := reflect.TypeFor[N]()
	switch t.Kind() {
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		// -0 and +0 are one key: hash them as Go does.
	default:
		if h := scalarHasher[N](); h != nil {
			return h
		}
	}
	if t.Size() == 0 {
		return nil // one namespace: nothing to mix in
	}
	if plainMemory(t) {
		// Equal values have equal bytes (a window's two int64s): hash
		// them where they lie.
		size := int(t.Size())
		return func(n N) uint32 {
			return fold(hashString(unsafe.String((*byte)(unsafe.Pointer(&n)), size)))
		}
	}
	seed := maphash.MakeSeed()
	return func(n N) uint32 {
		x := maphash.Comparable(seed, n)
		return uint32(x ^ x>>32)
	}
}

// plainMemory reports whether two values of t are equal exactly when
// their bytes are: integers, booleans, and arrays and structs of them
// with no padding (whose bytes are not part of the value).
func plainMemory(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	case reflect.Array:
		return plainMemory(t.Elem())
	case reflect.Struct:
		var sum uintptr
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Name == "_" || !plainMemory(f.Type) {
				return false
			}
			sum += f.Type.Size()
		}
		return sum == t.Size()
	}
	return false
}
