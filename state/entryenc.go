package state

import (
	"encoding/binary"
	"math/bits"
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
//
// It avoids branches that depend on the data, which mispredict about once
// per entry and cost more than the encoding: about half the slots of a
// table are empty, in no order a predictor can learn, and varints'
// lengths vary. A first pass lists the slots in use without a branch on
// the slot; the second encodes those, each varint spread into an 8-byte
// word at once rather than byte by byte. Keys or values of 2^55 or more
// in magnitude take the byte-by-byte path, and so does a table larger
// than a shard's usual size.
func appendInt64Entries(dst []byte, m *omap[int64, int64]) []byte {
	if len(m.es) > maxIndexedSlots {
		for i := range m.es {
			if e := &m.es[i]; e.hv != 0 {
				dst = appendInt64Entry(dst, e.mk, e.v)
			}
		}
		return dst
	}
	var idx [maxIndexedSlots]uint16
	live := 0
	for i := range m.es {
		idx[live] = uint16(i)       // live <= i
		live += int(m.es[i].hv & 1) // odd in a slot in use, 0 in an empty one
	}
	const most = 3 + 2*8 // the lengths, the void namespace, two spread varints
	n := len(dst)
	buf := slices.Grow(dst, live*(2*(1+binary.MaxVarintLen64)+1)+most)
	buf = buf[:cap(buf)]
	for _, i := range idx[:live] {
		e := &m.es[i]
		x, y := zigzag(e.mk), zigzag(e.v)
		if (x|y)>>56 != 0 {
			n = len(appendInt64Entry(buf[:n], e.mk, e.v))
			continue
		}
		b := buf[n : n+most]
		lk, lv := varintLen(x), varintLen(y)
		b[0] = byte(lk)
		binary.LittleEndian.PutUint64(b[1:9], spread(x, lk))
		b = b[lk:]
		b[1] = 0 // no namespace
		b[2] = byte(lv)
		binary.LittleEndian.PutUint64(b[3:11], spread(y, lv))
		n += 3 + lk + lv
	}
	return buf[:n]
}

// maxIndexedSlots bounds the tables appendInt64Entries lists the slots in
// use of first (a shard of defaultShardSize entries has at most 2048).
const maxIndexedSlots = 4096

// appendInt64Entry is one entry of appendInt64Entries, byte by byte.
func appendInt64Entry(dst []byte, k, v int64) []byte {
	m := len(dst)
	dst = binary.AppendVarint(append(dst, 0), k)
	dst[m] = byte(len(dst) - m - 1)
	m = len(dst) + 1
	dst = binary.AppendVarint(append(dst, 0, 0), v) // no namespace
	dst[m] = byte(len(dst) - m - 1)
	return dst
}

// zigzag maps v to the unsigned integer binary.PutVarint encodes.
func zigzag(v int64) uint64 { return uint64(v)<<1 ^ uint64(v>>63) }

// varintLen is the length of x's uvarint, for x < 2^56.
func varintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// spread returns the uvarint of x, whose length is l (x < 2^56, so l <=
// 8), as the little-endian bytes of a word: x's 7-bit groups one per
// byte, the continuation bit set on each but the last.
func spread(x uint64, l int) uint64 {
	w := x&0x7f | x<<1&(0x7f<<8) | x<<2&(0x7f<<16) | x<<3&(0x7f<<24) |
		x<<4&(0x7f<<32) | x<<5&(0x7f<<40) | x<<6&(0x7f<<48) | x<<7&(0x7f<<56)
	return w | 0x8080808080808080&(1<<(8*(l-1))-1)
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
