package codec

import (
	"encoding/binary"
	"fmt"
)

// Pair holds two values; PairOf encodes it.
type Pair[A, B any] struct {
	First  A
	Second B
}

// PairOf returns a codec for Pair[A, B]: First's encoding, then Second's.
func PairOf[A, B any](first Codec[A], second Codec[B]) Codec[Pair[A, B]] {
	return pairCodec[A, B]{first, second}
}

type pairCodec[A, B any] struct {
	a Codec[A]
	b Codec[B]
}

func (c pairCodec[A, B]) Append(dst []byte, v Pair[A, B]) []byte {
	return c.b.Append(c.a.Append(dst, v.First), v.Second)
}

func (c pairCodec[A, B]) Decode(src []byte) (Pair[A, B], int, error) {
	a, n, err := c.a.Decode(src)
	if err != nil {
		return Pair[A, B]{}, 0, err
	}
	b, m, err := c.b.Decode(src[n:])
	if err != nil {
		return Pair[A, B]{}, 0, err
	}
	return Pair[A, B]{a, b}, n + m, nil
}

// Slice returns a codec for []T: a uvarint of length+1 (0 for a nil slice),
// then each element. A decoded empty slice is non-nil; a decoded nil slice
// is nil.
func Slice[T any](elem Codec[T]) Codec[[]T] { return sliceCodec[T]{elem} }

type sliceCodec[T any] struct{ elem Codec[T] }

func (c sliceCodec[T]) Append(dst []byte, v []T) []byte {
	if v == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(v))+1)
	for i := range v {
		dst = c.elem.Append(dst, v[i])
	}
	return dst
}

func (c sliceCodec[T]) Decode(src []byte) ([]T, int, error) {
	l, isNil, n, err := count(src, "slice", 1)
	if err != nil || isNil {
		return nil, n, err
	}
	out := make([]T, l)
	for i := range out {
		v, m, err := c.elem.Decode(src[n:])
		if err != nil {
			return nil, 0, fmt.Errorf("slice element %d: %w", i, err)
		}
		out[i] = v
		n += m
	}
	return out, n, nil
}

// Map returns a codec for map[K]V: a uvarint of length+1 (0 for a nil map),
// then each key followed by its value, in Go's map iteration order. The
// encoding of a map is therefore not deterministic; decoding is. A duplicate
// key in the input is an error.
func Map[K comparable, V any](key Codec[K], val Codec[V]) Codec[map[K]V] {
	return mapCodec[K, V]{key, val}
}

type mapCodec[K comparable, V any] struct {
	k Codec[K]
	v Codec[V]
}

func (c mapCodec[K, V]) Append(dst []byte, m map[K]V) []byte {
	if m == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(m))+1)
	for k, v := range m {
		dst = c.v.Append(c.k.Append(dst, k), v)
	}
	return dst
}

func (c mapCodec[K, V]) Decode(src []byte) (map[K]V, int, error) {
	l, isNil, n, err := count(src, "map", 2)
	if err != nil || isNil {
		return nil, n, err
	}
	out := make(map[K]V, l)
	for i := 0; i < l; i++ {
		k, m, err := c.k.Decode(src[n:])
		if err != nil {
			return nil, 0, fmt.Errorf("map key %d: %w", i, err)
		}
		n += m
		v, m, err := c.v.Decode(src[n:])
		if err != nil {
			return nil, 0, fmt.Errorf("map value %d: %w", i, err)
		}
		n += m
		out[k] = v
		if len(out) != i+1 {
			return nil, 0, fmt.Errorf("%w: duplicate map key at entry %d", ErrCorrupt, i)
		}
	}
	return out, n, nil
}
