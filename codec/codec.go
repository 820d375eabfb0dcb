// Package codec turns values into bytes and back. Records cross a process
// boundary, and state enters a checkpoint, only through a Codec.
//
// A Codec appends to a caller-owned buffer and decodes from a byte slice,
// reporting how many bytes it consumed, so values can be laid end to end
// without framing. Decode never panics: corrupt or truncated input yields an
// error wrapping ErrCorrupt or ErrTruncated.
//
// The built-in codecs (String, Int64, Slice, ...) are stateless and safe for
// concurrent use. For[T] picks a built-in by type, uses a type's own
// encoding.BinaryAppender (or BinaryMarshaler) and encoding.BinaryUnmarshaler
// methods, or compiles a codec for structs, slices, arrays, maps and pointers
// once per type.
//
// Every codec in this package writes at least one byte per value. Slice and
// Map rely on that to reject element counts larger than the remaining input
// before allocating, so an element codec passed to them must do the same.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Codec encodes and decodes values of type T.
//
// Implementations must be safe for concurrent use: the same codec encodes
// records on a subtask's goroutine while a checkpoint is serialized on
// another.
type Codec[T any] interface {
	// Append appends the encoding of v to dst and returns the extended slice.
	Append(dst []byte, v T) []byte
	// Decode decodes one value from the start of src and reports the number
	// of bytes it consumed. The value never aliases src. On corrupt or
	// truncated input it returns an error and never panics.
	Decode(src []byte) (v T, n int, err error)
}

var (
	// ErrTruncated is wrapped by errors for input that ends inside a value.
	ErrTruncated = errors.New("codec: truncated input")
	// ErrCorrupt is wrapped by errors for input that cannot be the encoding
	// of a value: an out-of-range integer, an invalid bool, a count larger
	// than the input, a duplicate map key.
	ErrCorrupt = errors.New("codec: corrupt input")
)

func truncated(what string, need, have int) error {
	return fmt.Errorf("%w: %s needs %d bytes, %d left", ErrTruncated, what, need, have)
}

// uvarint decodes an unsigned varint from the start of src.
func uvarint(src []byte) (uint64, int, error) {
	if len(src) > 0 && src[0] < 0x80 {
		return uint64(src[0]), 1, nil
	}
	v, n := binary.Uvarint(src)
	if n > 0 {
		return v, n, nil
	}
	if n == 0 {
		return 0, 0, fmt.Errorf("%w: varint", ErrTruncated)
	}
	return 0, 0, fmt.Errorf("%w: varint overflows 64 bits", ErrCorrupt)
}

// varint decodes a zigzag-encoded signed varint from the start of src.
func varint(src []byte) (int64, int, error) {
	u, n, err := uvarint(src)
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x, n, err
}

// length decodes a length prefix and checks that at least that many bytes
// follow it, so a corrupt length never triggers a large allocation.
func length(src []byte, what string) (l, n int, err error) {
	u, n, err := uvarint(src)
	if err != nil {
		return 0, 0, err
	}
	if rest := len(src) - n; u > uint64(rest) {
		return 0, 0, fmt.Errorf("%w: %s length %d, %d bytes left", ErrTruncated, what, u, rest)
	}
	return int(u), n, nil
}

// count decodes the element count of a nil-able container, encoded as
// count+1 with 0 for nil. Each element takes at least perElem bytes, which
// bounds a plausible count by the remaining input.
func count(src []byte, what string, perElem int) (c int, isNil bool, n int, err error) {
	u, n, err := uvarint(src)
	if err != nil {
		return 0, false, 0, err
	}
	if u == 0 {
		return 0, true, n, nil
	}
	u--
	if rest := uint64(len(src) - n); u > rest/uint64(perElem) {
		return 0, false, 0, fmt.Errorf("%w: %s of %d elements in %d bytes", ErrCorrupt, what, u, rest)
	}
	return int(u), false, n, nil
}

// ReserveLength appends a one-byte placeholder for a uvarint length prefix
// and returns the extended slice and the placeholder's offset. Append the
// payload, then call FinishLength with that offset. The payload is encoded
// once and moved only when its length needs more than one byte.
func ReserveLength(dst []byte) ([]byte, int) {
	return append(dst, 0), len(dst)
}

// FinishLength writes the length of everything appended after the
// placeholder at mark (see ReserveLength) into the placeholder.
func FinishLength(dst []byte, mark int) []byte {
	return fixLength(dst, mark)
}

// fixLength rewrites the one-byte placeholder at dst[start] as the uvarint
// length of dst[start+1:], shifting the payload right if the length needs
// more than one byte.
func fixLength(dst []byte, start int) []byte {
	l := len(dst) - start - 1
	if l < 0x80 {
		dst[start] = byte(l)
		return dst
	}
	var tmp [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(tmp[:], uint64(l))
	dst = append(dst, tmp[:k-1]...)
	copy(dst[start+k:], dst[start+1:start+1+l])
	copy(dst[start:], tmp[:k])
	return dst
}
