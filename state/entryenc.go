package state

import (
	"encoding/binary"
	"slices"

	"github.com/weirstream/weir/codec"
)

// Entry encoders for the snapshot's hot loop. A snapshot writes every
// entry of every state, each as a length-prefixed key, namespace and
// value; with millions of keys per checkpoint this loop is most of a
// checkpoint's cost. prefixedAppender returns one function per codec that
// appends the length-prefixed encoding of a T, written without the
// generic ReserveLength/FinishLength calls and, for the scalar codecs keys
// and sums most often are (codec.Int64, codec.String), without a call
// through the codec interface either. The bytes are the same whatever the
// path.

// prefixedAppender returns a function appending the uvarint length of c's
// encoding of a T, then the encoding.
func prefixedAppender[T any](c codec.Codec[T]) func(dst []byte, v T) []byte {
	switch any(c) {
	case any(codec.Int64()):
		if f, ok := any(appendPrefixedInt64).(func([]byte, T) []byte); ok {
			return f
		}
	case any(codec.String()):
		if f, ok := any(appendPrefixedString).(func([]byte, T) []byte); ok {
			return f
		}
	}
	return func(dst []byte, v T) []byte {
		m := len(dst)
		dst = c.Append(append(dst, 0), v)
		if l := len(dst) - m - 1; l < 0x80 {
			dst[m] = byte(l)
			return dst
		}
		return codec.FinishLength(dst, m)
	}
}

// appendPrefixedInt64 is codec.Int64's zigzag varint (at most 10 bytes),
// after its length.
func appendPrefixedInt64(dst []byte, v int64) []byte {
	m := len(dst)
	dst = binary.AppendVarint(append(dst, 0), v)
	dst[m] = byte(len(dst) - m - 1)
	return dst
}

// appendInt64Entries appends the entries of m, a table of int64 keys and
// int64 values in the void namespace, both encoded by codec.Int64: the
// bytes of appendEntry for each, in one loop without a call per entry,
// which is most of the time a full snapshot of such a state (a keyed
// counter or sum) takes.
func appendInt64Entries(dst []byte, m *omap[int64, int64]) []byte {
	dst = slices.Grow(dst, m.len()*(2*(1+binary.MaxVarintLen64)+1))
	for i := range m.es {
		e := &m.es[i]
		if e.hv == 0 {
			continue
		}
		k := len(dst)
		dst = binary.AppendVarint(append(dst, 0), e.mk)
		dst[k] = byte(len(dst) - k - 1)
		v := len(dst) + 1
		dst = binary.AppendVarint(append(dst, 0, 0), e.v) // no namespace
		dst[v] = byte(len(dst) - v - 1)
	}
	return dst
}

// appendPrefixedString is codec.String's uvarint length and bytes, after
// the length of both.
func appendPrefixedString(dst []byte, v string) []byte {
	n := uint64(len(v))
	w := uint64(1)
	for x := n; x >= 0x80; x >>= 7 {
		w++
	}
	dst = binary.AppendUvarint(dst, w+n)
	dst = binary.AppendUvarint(dst, n)
	return append(dst, v...)
}
