package state

import (
	"encoding/binary"
	"fmt"
	"iter"
	"maps"
	"reflect"
	"slices"

	"github.com/weirstream/weir/codec"
)

// Registration. Each function returns a handle to the state named in the
// descriptor, creating the state on first use; registering a name again
// with the same kind and types returns another handle to the same state.
// Restored entries are decoded when their state is registered.

// Value registers a ValueState.
func Value[K comparable, T any](b *KeyedBackend[K], d ValueDescriptor[T]) (ValueState[T], error) {
	if d.TTL != nil {
		return ttlValueOf(b, d)
	}
	return valueOf(b, d, nil)
}

func valueOf[K comparable, T any](b *KeyedBackend[K], d ValueDescriptor[T], tt *ttlHook[T]) (ValueState[T], error) {
	inf := stateInfo{d.Name, kindValue, false, tt != nil}
	c, err := orFor(d.Codec)
	if err != nil {
		return nil, fmt.Errorf("state: %v: %w", inf, err)
	}
	if b.lsm != nil {
		s, err := lsmValueOf(b, inf, codec.Codec[VoidNamespace](nil), c)
		if err != nil {
			return nil, err
		}
		if tt != nil {
			lsmAttachTTL(b, s.st, tt.t, pruneStampedRow)
		}
		return s, nil
	}
	st, err := register(b, inf, valueLayout(c), func() *stateTable[K, T] {
		return newVoidTable(b, inf, valueEnc(c))
	})
	if err != nil {
		return nil, err
	}
	if tt != nil {
		heapAttachTTL(b, st, tt.t, oneRules(tt.stamp))
	}
	return &valueState[K, T]{b: b, t: st.table}, nil
}

// ValueNS registers a namespaced ValueState. A nil nsCodec means
// codec.For[N]().
func ValueNS[K, N comparable, T any](b *KeyedBackend[K], nsCodec codec.Codec[N], d ValueDescriptor[T]) (ValueStateNS[N, T], error) {
	inf := stateInfo{d.Name, kindValue, true, false}
	if d.TTL != nil {
		return nil, fmt.Errorf("state: %v: a time to live on namespaced state is not implemented", inf)
	}
	nc, c, err := codecs2(inf, nsCodec, d.Codec)
	if err != nil {
		return nil, err
	}
	if b.lsm != nil {
		s, err := lsmValueOf(b, inf, nc, c)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	st, err := register(b, inf, valueLayout(c), func() *stateTable[nsKey[K, N], T] {
		return newNSTable(b, inf, nc, valueEnc(c))
	})
	if err != nil {
		return nil, err
	}
	return &valueNS[K, N, T]{nsBase[K, N, T]{b: b, t: st.table}}, nil
}

// List registers a ListState.
func List[K comparable, T any](b *KeyedBackend[K], d ListDescriptor[T]) (ListState[T], error) {
	if d.TTL != nil {
		return ttlListOf(b, d)
	}
	return listOf(b, d, nil)
}

func listOf[K comparable, T any](b *KeyedBackend[K], d ListDescriptor[T], tt *ttlHook[T]) (ListState[T], error) {
	inf := stateInfo{d.Name, kindList, false, tt != nil}
	c, err := orFor(d.Codec)
	if err != nil {
		return nil, fmt.Errorf("state: %v: %w", inf, err)
	}
	if b.lsm != nil {
		s, err := lsmListOf(b, inf, codec.Codec[VoidNamespace](nil), c)
		if err != nil {
			return nil, err
		}
		if tt != nil {
			lsmAttachTTL(b, s.st, tt.t, pruneListRow(s.enc, tt.stamp))
		}
		return s, nil
	}
	st, err := register(b, inf, valueLayout(c), func() *stateTable[K, []T] {
		return newVoidTable(b, inf, listEnc(c))
	})
	if err != nil {
		return nil, err
	}
	if tt != nil {
		heapAttachTTL(b, st, tt.t, listRules(tt.stamp))
	}
	return &listState[K, T]{b: b, t: st.table}, nil
}

// ListNS registers a namespaced ListState.
func ListNS[K, N comparable, T any](b *KeyedBackend[K], nsCodec codec.Codec[N], d ListDescriptor[T]) (ListStateNS[N, T], error) {
	inf := stateInfo{d.Name, kindList, true, false}
	if d.TTL != nil {
		return nil, fmt.Errorf("state: %v: a time to live on namespaced state is not implemented", inf)
	}
	nc, c, err := codecs2(inf, nsCodec, d.Codec)
	if err != nil {
		return nil, err
	}
	if b.lsm != nil {
		s, err := lsmListOf(b, inf, nc, c)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	st, err := register(b, inf, valueLayout(c), func() *stateTable[nsKey[K, N], []T] {
		return newNSTable(b, inf, nc, listEnc(c))
	})
	if err != nil {
		return nil, err
	}
	return &listNS[K, N, T]{nsBase[K, N, []T]{b: b, t: st.table}}, nil
}

// Map registers a MapState.
func Map[K, UK comparable, UV any](b *KeyedBackend[K], d MapDescriptor[UK, UV]) (MapState[UK, UV], error) {
	if d.TTL != nil {
		return ttlMapOf(b, d)
	}
	return mapOf(b, d, nil)
}

func mapOf[K, UK comparable, UV any](b *KeyedBackend[K], d MapDescriptor[UK, UV], tt *ttlHook[UV]) (MapState[UK, UV], error) {
	inf := stateInfo{d.Name, kindMap, false, tt != nil}
	kc, vc, err := codecs2(inf, d.KeyCodec, d.ValueCodec)
	if err != nil {
		return nil, err
	}
	if b.lsm != nil {
		s, err := lsmMapOf(b, inf, codec.Codec[VoidNamespace](nil), kc, vc)
		if err != nil {
			return nil, err
		}
		if tt != nil {
			lsmAttachTTL(b, s.st, tt.t, pruneStampedRow)
		}
		return s, nil
	}
	st, err := register(b, inf, mapLayout(kc, vc), func() *stateTable[K, mapEntry[UK, UV]] {
		return newVoidTable(b, inf, mapEnc(b.ep, kc, vc))
	})
	if err != nil {
		return nil, err
	}
	if tt != nil {
		heapAttachTTL(b, st, tt.t, mapRules[UK](tt.stamp))
	}
	return &mapState[K, UK, UV]{b: b, t: st.table}, nil
}

// MapNS registers a namespaced MapState.
func MapNS[K, N, UK comparable, UV any](b *KeyedBackend[K], nsCodec codec.Codec[N], d MapDescriptor[UK, UV]) (MapStateNS[N, UK, UV], error) {
	inf := stateInfo{d.Name, kindMap, true, false}
	if d.TTL != nil {
		return nil, fmt.Errorf("state: %v: a time to live on namespaced state is not implemented", inf)
	}
	kc, vc, err := codecs2(inf, d.KeyCodec, d.ValueCodec)
	if err != nil {
		return nil, err
	}
	nc, err := orFor(nsCodec)
	if err != nil {
		return nil, fmt.Errorf("state: %v: namespace: %w", inf, err)
	}
	if b.lsm != nil {
		s, err := lsmMapOf(b, inf, nc, kc, vc)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	st, err := register(b, inf, mapLayout(kc, vc), func() *stateTable[nsKey[K, N], mapEntry[UK, UV]] {
		return newNSTable(b, inf, nc, mapEnc(b.ep, kc, vc))
	})
	if err != nil {
		return nil, err
	}
	return &mapNS[K, N, UK, UV]{nsBase[K, N, mapEntry[UK, UV]]{b: b, t: st.table}}, nil
}

// Reducing registers a ReducingState.
func Reducing[K comparable, T any](b *KeyedBackend[K], d ReducingDescriptor[T]) (ReducingState[T], error) {
	if d.TTL != nil {
		return ttlReducingOf(b, d)
	}
	return reducingOf(b, d, nil)
}

func reducingOf[K comparable, T any](b *KeyedBackend[K], d ReducingDescriptor[T], tt *ttlHook[T]) (ReducingState[T], error) {
	inf := stateInfo{d.Name, kindReducing, false, tt != nil}
	if d.Reduce == nil {
		return nil, fmt.Errorf("state: %v needs a Reduce function", inf)
	}
	c, err := orFor(d.Codec)
	if err != nil {
		return nil, fmt.Errorf("state: %v: %w", inf, err)
	}
	if b.lsm != nil {
		s, err := lsmReducingOf(b, inf, codec.Codec[VoidNamespace](nil), c, d.Reduce)
		if err != nil {
			return nil, err
		}
		if tt != nil {
			lsmAttachTTL(b, s.st, tt.t, pruneStampedRow)
		}
		return s, nil
	}
	st, err := register(b, inf, valueLayout(c), func() *stateTable[K, versioned[T]] {
		return newVoidTable(b, inf, versionedEnc(b.ep, c))
	})
	if err != nil {
		return nil, err
	}
	if tt != nil {
		heapAttachTTL(b, st, tt.t, versionedRules(tt.stamp))
	}
	return &reducingState[K, T]{b: b, t: st.table, ops: &reduceOps[T]{d.Reduce, copier(c)}}, nil
}

// ReducingNS registers a namespaced ReducingState.
func ReducingNS[K, N comparable, T any](b *KeyedBackend[K], nsCodec codec.Codec[N], d ReducingDescriptor[T]) (ReducingStateNS[N, T], error) {
	inf := stateInfo{d.Name, kindReducing, true, false}
	if d.TTL != nil {
		return nil, fmt.Errorf("state: %v: a time to live on namespaced state is not implemented", inf)
	}
	if d.Reduce == nil {
		return nil, fmt.Errorf("state: %v needs a Reduce function", inf)
	}
	nc, c, err := codecs2(inf, nsCodec, d.Codec)
	if err != nil {
		return nil, err
	}
	if b.lsm != nil {
		s, err := lsmReducingOf(b, inf, nc, c, d.Reduce)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	st, err := register(b, inf, valueLayout(c), func() *stateTable[nsKey[K, N], versioned[T]] {
		return newNSTable(b, inf, nc, versionedEnc(b.ep, c))
	})
	if err != nil {
		return nil, err
	}
	return &reducingNS[K, N, T]{nsBase[K, N, versioned[T]]{b: b, t: st.table}, &reduceOps[T]{d.Reduce, copier(c)}}, nil
}

// Aggregating registers an AggregatingState.
func Aggregating[K comparable, IN, ACC, OUT any](b *KeyedBackend[K], d AggregatingDescriptor[IN, ACC, OUT]) (AggregatingState[IN, OUT], error) {
	if d.TTL != nil {
		return ttlAggregatingOf(b, d)
	}
	return aggregatingOf(b, d, nil)
}

func aggregatingOf[K comparable, IN, ACC, OUT any](b *KeyedBackend[K], d AggregatingDescriptor[IN, ACC, OUT], tt *ttlHook[ACC]) (AggregatingState[IN, OUT], error) {
	inf := stateInfo{d.Name, kindAggregating, false, tt != nil}
	if d.Function == nil {
		return nil, fmt.Errorf("state: %v needs a Function", inf)
	}
	c, err := orFor(d.AccCodec)
	if err != nil {
		return nil, fmt.Errorf("state: %v: %w", inf, err)
	}
	if b.lsm != nil {
		s, err := lsmAggregatingOf(b, inf, codec.Codec[VoidNamespace](nil), c, d.Function)
		if err != nil {
			return nil, err
		}
		if tt != nil {
			lsmAttachTTL(b, s.st, tt.t, pruneStampedRow)
		}
		return s, nil
	}
	st, err := register(b, inf, valueLayout(c), func() *stateTable[K, versioned[ACC]] {
		return newVoidTable(b, inf, versionedEnc(b.ep, c))
	})
	if err != nil {
		return nil, err
	}
	if tt != nil {
		heapAttachTTL(b, st, tt.t, versionedRules(tt.stamp))
	}
	return &aggregatingState[K, IN, ACC, OUT]{b: b, t: st.table, ops: &aggOps[IN, ACC, OUT]{d.Function, copier(c)}}, nil
}

// AggregatingNS registers a namespaced AggregatingState.
func AggregatingNS[K, N comparable, IN, ACC, OUT any](b *KeyedBackend[K], nsCodec codec.Codec[N], d AggregatingDescriptor[IN, ACC, OUT]) (AggregatingStateNS[N, IN, OUT], error) {
	inf := stateInfo{d.Name, kindAggregating, true, false}
	if d.TTL != nil {
		return nil, fmt.Errorf("state: %v: a time to live on namespaced state is not implemented", inf)
	}
	if d.Function == nil {
		return nil, fmt.Errorf("state: %v needs a Function", inf)
	}
	nc, c, err := codecs2(inf, nsCodec, d.AccCodec)
	if err != nil {
		return nil, err
	}
	if b.lsm != nil {
		s, err := lsmAggregatingOf(b, inf, nc, c, d.Function)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	st, err := register(b, inf, valueLayout(c), func() *stateTable[nsKey[K, N], versioned[ACC]] {
		return newNSTable(b, inf, nc, versionedEnc(b.ep, c))
	})
	if err != nil {
		return nil, err
	}
	return &aggregatingNS[K, N, IN, ACC, OUT]{nsBase[K, N, versioned[ACC]]{b: b, t: st.table}, &aggOps[IN, ACC, OUT]{d.Function, copier(c)}}, nil
}

// codecs2 resolves two possibly nil codecs with codec.For.
func codecs2[A, B any](inf stateInfo, a codec.Codec[A], b codec.Codec[B]) (codec.Codec[A], codec.Codec[B], error) {
	a, err := orFor(a)
	if err != nil {
		return nil, nil, fmt.Errorf("state: %v: %w", inf, err)
	}
	b, err = orFor(b)
	if err != nil {
		return nil, nil, fmt.Errorf("state: %v: %w", inf, err)
	}
	return a, b, nil
}

// Entry encodings.

func valueEnc[T any](c codec.Codec[T]) valueEncoding[T] {
	return valueEncoding[T]{
		append:         c.Append,
		appendPrefixed: prefixedAppender(c),
		decode:         func(src []byte) (T, error) { return decodeExactly(c, src, "value") },
		int64:          any(c) == any(codec.Int64()),
	}
}

func listEnc[T any](c codec.Codec[T]) valueEncoding[[]T] {
	return valueEncoding[[]T]{
		append: func(dst []byte, l []T) []byte {
			dst = binary.AppendUvarint(dst, uint64(len(l)))
			for i := range l {
				dst = c.Append(dst, l[i])
			}
			return dst
		},
		decode: func(src []byte) ([]T, error) {
			n, off, err := readCount(src, 1)
			if err != nil {
				return nil, err
			}
			l := make([]T, n)
			for i := range l {
				v, m, err := c.Decode(src[off:])
				if err != nil {
					return nil, fmt.Errorf("%w: list element %d: %w", ErrCorrupt, i, err)
				}
				l[i] = v
				off += m
			}
			if off != len(src) || n == 0 {
				return nil, fmt.Errorf("%w: list of %d elements in %d bytes", ErrCorrupt, n, len(src))
			}
			return l, nil
		},
	}
}

// mapEntry is the value of a MapState for one key (and namespace). The map
// is copied before it is modified if a pending snapshot may share it.
type mapEntry[UK comparable, UV any] struct {
	m     map[UK]UV
	epoch uint64
}

func mapEnc[UK comparable, UV any](ep *epochs, kc codec.Codec[UK], vc codec.Codec[UV]) valueEncoding[mapEntry[UK, UV]] {
	return valueEncoding[mapEntry[UK, UV]]{
		append: func(dst []byte, e mapEntry[UK, UV]) []byte {
			dst = binary.AppendUvarint(dst, uint64(len(e.m)))
			for k, v := range e.m {
				dst = vc.Append(kc.Append(dst, k), v)
			}
			return dst
		},
		decode: func(src []byte) (mapEntry[UK, UV], error) {
			n, off, err := readCount(src, 2)
			if err != nil {
				return mapEntry[UK, UV]{}, err
			}
			m := make(map[UK]UV, n)
			for i := 0; i < n; i++ {
				k, a, err := kc.Decode(src[off:])
				if err != nil {
					return mapEntry[UK, UV]{}, fmt.Errorf("%w: map key %d: %w", ErrCorrupt, i, err)
				}
				off += a
				v, b, err := vc.Decode(src[off:])
				if err != nil {
					return mapEntry[UK, UV]{}, fmt.Errorf("%w: map value %d: %w", ErrCorrupt, i, err)
				}
				off += b
				m[k] = v
			}
			if off != len(src) || n == 0 || len(m) != n {
				return mapEntry[UK, UV]{}, fmt.Errorf("%w: map of %d entries (%d distinct) in %d bytes", ErrCorrupt, n, len(m), len(src))
			}
			return mapEntry[UK, UV]{m: m, epoch: ep.cur}, nil
		},
	}
}

// versioned is a value that user functions may modify in place (a
// reduced value or an accumulator), stamped with the epoch it was created
// in so that it is copied before being handed to them while a pending
// snapshot may share it.
type versioned[T any] struct {
	v     T
	epoch uint64
}

func versionedEnc[T any](ep *epochs, c codec.Codec[T]) valueEncoding[versioned[T]] {
	pa := prefixedAppender(c)
	return valueEncoding[versioned[T]]{
		append:         func(dst []byte, e versioned[T]) []byte { return c.Append(dst, e.v) },
		appendPrefixed: func(dst []byte, e versioned[T]) []byte { return pa(dst, e.v) },
		decode: func(src []byte) (versioned[T], error) {
			v, err := decodeExactly(c, src, "value")
			return versioned[T]{v, ep.cur}, err
		},
	}
}

// copier returns a deep copy function for T made from its codec, or nil if
// T holds no references through which a copy could be modified.
func copier[T any](c codec.Codec[T]) func(T) T {
	if !hasRefs(reflect.TypeFor[T]()) {
		return nil
	}
	var buf []byte
	return func(v T) T {
		buf = c.Append(buf[:0], v)
		w, _, err := c.Decode(buf)
		if err != nil {
			panic(fmt.Sprintf("state: copying a %v through its codec: %v", reflect.TypeFor[T](), err))
		}
		return w
	}
}

// hasRefs reports whether values of t refer to memory that a copy of the
// value shares (strings are immutable and do not count).
func hasRefs(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return t.Len() > 0 && hasRefs(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasRefs(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// readCount reads a uvarint element count from the start of src, checking
// it against the bytes left (each element takes at least perElem bytes).
func readCount(src []byte, perElem int) (n, off int, err error) {
	u, off := binary.Uvarint(src)
	if off <= 0 {
		return 0, 0, fmt.Errorf("%w: bad element count", ErrCorrupt)
	}
	if u > uint64(len(src)-off)/uint64(perElem) {
		return 0, 0, fmt.Errorf("%w: %d elements in %d bytes", ErrCorrupt, u, len(src)-off)
	}
	return int(u), off, nil
}

// Operations on tables, shared by the plain and the namespaced handles.

func listGet[MK comparable, T any](t *table[MK, []T], kg int, h uint32, mk MK) []T {
	l, _ := t.get(kg, h, mk)
	return l[:len(l):len(l)]
}

// listAdd appends to a list in place, even when a pending snapshot shares
// the list: the snapshot holds its own slice header, whose length stops
// before the appended elements, and a list's backing array is never written
// below the length of any header. Update and Clear replace the slice
// instead of truncating it.
// listAdd appends vs to mk's list and reports whether the list had
// elements before.
func listAdd[MK comparable, T any](t *table[MK, []T], kg int, h uint32, mk MK, vs ...T) bool {
	if len(vs) == 0 {
		return false
	}
	s := t.writable(kg, h)
	en, found := t.entry(s, t.hv(h, mk), mk)
	had := found && len(en.v) > 0
	t.store(kg, h, s, en, found, append(en.v, vs...)) // a zero en.v if new
	return had
}

func listUpdate[MK comparable, T any](t *table[MK, []T], kg int, h uint32, mk MK, vs []T) {
	if len(vs) == 0 {
		t.remove(kg, h, mk)
		return
	}
	t.set(kg, h, mk, slices.Clone(vs))
}

func mapGet[MK, UK comparable, UV any](t *table[MK, mapEntry[UK, UV]], kg int, h uint32, mk MK, uk UK) (UV, bool) {
	e, _ := t.get(kg, h, mk)
	v, ok := e.m[uk]
	return v, ok
}

func mapPut[MK, UK comparable, UV any](t *table[MK, mapEntry[UK, UV]], kg int, h uint32, mk MK, uk UK, uv UV) {
	s, hv := t.writable(kg, h), t.hv(h, mk)
	e, ok := s.at(hv, mk)
	if !ok {
		t.put(kg, h, s, hv, mk, mapEntry[UK, UV]{m: map[UK]UV{uk: uv}, epoch: t.ep.cur})
		return
	}
	if t.ep.shared(e.epoch) {
		e = mapEntry[UK, UV]{m: maps.Clone(e.m), epoch: t.ep.cur}
	}
	e.m[uk] = uv
	t.put(kg, h, s, hv, mk, e) // stamps the entry as changed
}

func mapRemove[MK, UK comparable, UV any](t *table[MK, mapEntry[UK, UV]], kg int, h uint32, mk MK, uk UK) {
	e, ok := t.get(kg, h, mk)
	if !ok {
		return
	}
	if _, ok := e.m[uk]; !ok {
		return
	}
	if len(e.m) == 1 {
		t.remove(kg, h, mk)
		return
	}
	s := t.writable(kg, h)
	if t.ep.shared(e.epoch) {
		e = mapEntry[UK, UV]{m: maps.Clone(e.m), epoch: t.ep.cur}
	}
	delete(e.m, uk)
	t.put(kg, h, s, t.hv(h, mk), mk, e) // stamps the entry as changed
}

func mapAll[UK comparable, UV any](m map[UK]UV) iter.Seq2[UK, UV] {
	return func(yield func(UK, UV) bool) {
		for k, v := range m {
			if !yield(k, v) {
				return
			}
		}
	}
}

type reduceOps[T any] struct {
	reduce func(acc, v T) T
	copy   func(T) T // nil if T needs no copy
}

// private returns e's value for modification by a user function.
func private[T any](ep *epochs, e versioned[T], cp func(T) T) T {
	if cp != nil && ep.shared(e.epoch) {
		return cp(e.v)
	}
	return e.v
}

// reducingAdd folds v into mk's value and reports whether there was one.
func reducingAdd[MK comparable, T any](t *table[MK, versioned[T]], kg int, h uint32, mk MK, v T, ops *reduceOps[T]) bool {
	e, ok := t.get(kg, h, mk)
	if ok {
		v = ops.reduce(private(t.ep, e, ops.copy), v)
	}
	t.set(kg, h, mk, versioned[T]{v, t.ep.cur})
	return ok
}

type aggOps[IN, ACC, OUT any] struct {
	fn   AggregateFunction[IN, ACC, OUT]
	copy func(ACC) ACC
}

// aggregatingAdd folds v into mk's accumulator, creating it if there is
// none, and reports whether there was one.
func aggregatingAdd[MK comparable, IN, ACC, OUT any](t *table[MK, versioned[ACC]], kg int, h uint32, mk MK, v IN, ops *aggOps[IN, ACC, OUT]) bool {
	// One probe for the read and the write. Add and CreateAccumulator
	// touch no state; if one panics, the task fails and its state with it.
	s := t.writable(kg, h)
	en, found := t.entry(s, t.hv(h, mk), mk)
	var acc ACC
	if found {
		acc = private(t.ep, en.v, ops.copy)
	} else {
		acc = ops.fn.CreateAccumulator()
	}
	t.store(kg, h, s, en, found, versioned[ACC]{ops.fn.Add(v, acc), t.ep.cur})
	return found
}

func aggregatingGet[MK comparable, IN, ACC, OUT any](t *table[MK, versioned[ACC]], kg int, h uint32, mk MK, ops *aggOps[IN, ACC, OUT]) (OUT, bool) {
	e, ok := t.get(kg, h, mk)
	if !ok {
		var zero OUT
		return zero, false
	}
	return ops.fn.GetResult(e.v), true
}

// Handles in the void namespace.

type valueState[K comparable, T any] struct {
	b *KeyedBackend[K]
	t *table[K, T]
}

func (s *valueState[K, T]) Value() (T, bool) {
	kg, h := s.b.pos()
	return s.t.get(kg, h, s.b.key)
}

func (s *valueState[K, T]) Update(v T) {
	kg, h := s.b.pos()
	s.t.set(kg, h, s.b.key, v)
}

func (s *valueState[K, T]) Clear() {
	kg, h := s.b.pos()
	s.t.remove(kg, h, s.b.key)
}

type listState[K comparable, T any] struct {
	b *KeyedBackend[K]
	t *table[K, []T]
}

func (s *listState[K, T]) Get() []T {
	kg, h := s.b.pos()
	return listGet(s.t, kg, h, s.b.key)
}

func (s *listState[K, T]) Add(v T) {
	kg, h := s.b.pos()
	listAdd(s.t, kg, h, s.b.key, v)
}

func (s *listState[K, T]) AddAll(vs []T) {
	kg, h := s.b.pos()
	listAdd(s.t, kg, h, s.b.key, vs...)
}

func (s *listState[K, T]) Update(vs []T) {
	kg, h := s.b.pos()
	listUpdate(s.t, kg, h, s.b.key, vs)
}

func (s *listState[K, T]) Clear() {
	kg, h := s.b.pos()
	s.t.remove(kg, h, s.b.key)
}

type mapState[K, UK comparable, UV any] struct {
	b *KeyedBackend[K]
	t *table[K, mapEntry[UK, UV]]
}

func (s *mapState[K, UK, UV]) Get(uk UK) (UV, bool) {
	kg, h := s.b.pos()
	return mapGet(s.t, kg, h, s.b.key, uk)
}

func (s *mapState[K, UK, UV]) Put(uk UK, uv UV) {
	kg, h := s.b.pos()
	mapPut(s.t, kg, h, s.b.key, uk, uv)
}

func (s *mapState[K, UK, UV]) Remove(uk UK) {
	kg, h := s.b.pos()
	mapRemove(s.t, kg, h, s.b.key, uk)
}

func (s *mapState[K, UK, UV]) Contains(uk UK) bool {
	_, ok := s.Get(uk)
	return ok
}

func (s *mapState[K, UK, UV]) All() iter.Seq2[UK, UV] {
	kg, h := s.b.pos()
	e, _ := s.t.get(kg, h, s.b.key)
	return mapAll(e.m)
}

func (s *mapState[K, UK, UV]) Len() int {
	kg, h := s.b.pos()
	e, _ := s.t.get(kg, h, s.b.key)
	return len(e.m)
}

func (s *mapState[K, UK, UV]) IsEmpty() bool { return s.Len() == 0 }

func (s *mapState[K, UK, UV]) Clear() {
	kg, h := s.b.pos()
	s.t.remove(kg, h, s.b.key)
}

type reducingState[K comparable, T any] struct {
	b   *KeyedBackend[K]
	t   *table[K, versioned[T]]
	ops *reduceOps[T]
}

func (s *reducingState[K, T]) Get() (T, bool) {
	kg, h := s.b.pos()
	e, ok := s.t.get(kg, h, s.b.key)
	return e.v, ok
}

func (s *reducingState[K, T]) Add(v T) {
	kg, h := s.b.pos()
	reducingAdd(s.t, kg, h, s.b.key, v, s.ops)
}

func (s *reducingState[K, T]) Clear() {
	kg, h := s.b.pos()
	s.t.remove(kg, h, s.b.key)
}

type aggregatingState[K comparable, IN, ACC, OUT any] struct {
	b   *KeyedBackend[K]
	t   *table[K, versioned[ACC]]
	ops *aggOps[IN, ACC, OUT]
}

func (s *aggregatingState[K, IN, ACC, OUT]) Get() (OUT, bool) {
	kg, h := s.b.pos()
	return aggregatingGet(s.t, kg, h, s.b.key, s.ops)
}

func (s *aggregatingState[K, IN, ACC, OUT]) Add(v IN) {
	kg, h := s.b.pos()
	aggregatingAdd(s.t, kg, h, s.b.key, v, s.ops)
}

func (s *aggregatingState[K, IN, ACC, OUT]) Clear() {
	kg, h := s.b.pos()
	s.t.remove(kg, h, s.b.key)
}

// Namespaced handles.

// nsBase is the part common to namespaced handles: the current namespace
// and the per-key operations over namespaces.
type nsBase[K, N comparable, E any] struct {
	b  *KeyedBackend[K]
	t  *table[nsKey[K, N], E]
	ns N
}

func (s *nsBase[K, N, E]) SetNamespace(n N) { s.ns = n }
func (s *nsBase[K, N, E]) Namespace() N     { return s.ns }

// at returns the current position and the table key for namespace n.
func (s *nsBase[K, N, E]) at(n N) (int, uint32, nsKey[K, N]) {
	kg, h := s.b.pos()
	return kg, h, nsKey[K, N]{s.b.key, n}
}

func (s *nsBase[K, N, E]) cur() (int, uint32, nsKey[K, N]) { return s.at(s.ns) }

func (s *nsBase[K, N, E]) Namespaces() []N {
	kg, h := s.b.pos()
	var out []N
	for mk := range s.t.shardFor(kg, h).m.all() {
		if mk.key == s.b.key {
			out = append(out, mk.ns)
		}
	}
	return out
}

func (s *nsBase[K, N, E]) ClearAllNamespaces() {
	for _, n := range s.Namespaces() {
		s.t.remove(s.at(n))
	}
}

func (s *nsBase[K, N, E]) Clear() { s.t.remove(s.cur()) }

type valueNS[K, N comparable, T any] struct{ nsBase[K, N, T] }

func (s *valueNS[K, N, T]) Value() (T, bool) { return s.t.get(s.cur()) }

func (s *valueNS[K, N, T]) Update(v T) {
	kg, h, mk := s.cur()
	s.t.set(kg, h, mk, v)
}

type listNS[K, N comparable, T any] struct{ nsBase[K, N, []T] }

func (s *listNS[K, N, T]) Get() []T {
	kg, h, mk := s.cur()
	return listGet(s.t, kg, h, mk)
}

func (s *listNS[K, N, T]) Add(v T) { s.AddWasPresent(v) }

func (s *listNS[K, N, T]) AddWasPresent(v T) bool {
	kg, h, mk := s.cur()
	return listAdd(s.t, kg, h, mk, v)
}

func (s *listNS[K, N, T]) AddAll(vs []T) {
	kg, h, mk := s.cur()
	listAdd(s.t, kg, h, mk, vs...)
}

func (s *listNS[K, N, T]) Update(vs []T) {
	kg, h, mk := s.cur()
	listUpdate(s.t, kg, h, mk, vs)
}

func (s *listNS[K, N, T]) MergeNamespaces(target N, sources ...N) {
	kg, h, tk := s.at(target)
	for _, src := range sources {
		if src == target {
			continue
		}
		_, _, sk := s.at(src)
		if l := listGet(s.t, kg, h, sk); len(l) > 0 {
			listAdd(s.t, kg, h, tk, l...)
			s.t.remove(kg, h, sk)
		}
	}
}

type mapNS[K, N, UK comparable, UV any] struct {
	nsBase[K, N, mapEntry[UK, UV]]
}

func (s *mapNS[K, N, UK, UV]) Get(uk UK) (UV, bool) {
	kg, h, mk := s.cur()
	return mapGet(s.t, kg, h, mk, uk)
}

func (s *mapNS[K, N, UK, UV]) Put(uk UK, uv UV) {
	kg, h, mk := s.cur()
	mapPut(s.t, kg, h, mk, uk, uv)
}

func (s *mapNS[K, N, UK, UV]) Remove(uk UK) {
	kg, h, mk := s.cur()
	mapRemove(s.t, kg, h, mk, uk)
}

func (s *mapNS[K, N, UK, UV]) Contains(uk UK) bool {
	_, ok := s.Get(uk)
	return ok
}

func (s *mapNS[K, N, UK, UV]) All() iter.Seq2[UK, UV] {
	e, _ := s.t.get(s.cur())
	return mapAll(e.m)
}

func (s *mapNS[K, N, UK, UV]) Len() int {
	e, _ := s.t.get(s.cur())
	return len(e.m)
}

func (s *mapNS[K, N, UK, UV]) IsEmpty() bool { return s.Len() == 0 }

type reducingNS[K, N comparable, T any] struct {
	nsBase[K, N, versioned[T]]
	ops *reduceOps[T]
}

func (s *reducingNS[K, N, T]) Get() (T, bool) {
	e, ok := s.t.get(s.cur())
	return e.v, ok
}

func (s *reducingNS[K, N, T]) Add(v T) { s.AddWasPresent(v) }

func (s *reducingNS[K, N, T]) AddWasPresent(v T) bool {
	kg, h, mk := s.cur()
	return reducingAdd(s.t, kg, h, mk, v, s.ops)
}

func (s *reducingNS[K, N, T]) MergeNamespaces(target N, sources ...N) {
	kg, h, tk := s.at(target)
	for _, src := range sources {
		if src == target {
			continue
		}
		_, _, sk := s.at(src)
		e, ok := s.t.get(kg, h, sk)
		if !ok {
			continue
		}
		s.t.remove(kg, h, sk)
		if te, ok := s.t.get(kg, h, tk); ok {
			e = versioned[T]{s.ops.reduce(private(s.t.ep, te, s.ops.copy), e.v), s.t.ep.cur}
		}
		// A moved value keeps its epoch, so that it is still copied
		// before modification while a snapshot shares it.
		s.t.set(kg, h, tk, e)
	}
}

type aggregatingNS[K, N comparable, IN, ACC, OUT any] struct {
	nsBase[K, N, versioned[ACC]]
	ops *aggOps[IN, ACC, OUT]
}

func (s *aggregatingNS[K, N, IN, ACC, OUT]) Get() (OUT, bool) {
	kg, h, mk := s.cur()
	return aggregatingGet(s.t, kg, h, mk, s.ops)
}

func (s *aggregatingNS[K, N, IN, ACC, OUT]) Add(v IN) { s.AddWasPresent(v) }

func (s *aggregatingNS[K, N, IN, ACC, OUT]) AddWasPresent(v IN) bool {
	kg, h, mk := s.cur()
	return aggregatingAdd(s.t, kg, h, mk, v, s.ops)
}

func (s *aggregatingNS[K, N, IN, ACC, OUT]) MergeNamespaces(target N, sources ...N) {
	kg, h, tk := s.at(target)
	for _, src := range sources {
		if src == target {
			continue
		}
		_, _, sk := s.at(src)
		e, ok := s.t.get(kg, h, sk)
		if !ok {
			continue
		}
		s.t.remove(kg, h, sk)
		if te, ok := s.t.get(kg, h, tk); ok {
			acc := s.ops.fn.Merge(private(s.t.ep, te, s.ops.copy), private(s.t.ep, e, s.ops.copy))
			e = versioned[ACC]{acc, s.t.ep.cur}
		}
		s.t.set(kg, h, tk, e)
	}
}
