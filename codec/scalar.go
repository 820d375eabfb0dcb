package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// String returns the codec for strings: a uvarint length, then the bytes.
func String() Codec[string] { return stringCodec{} }

// Bytes returns the codec for byte slices: a uvarint of length+1 (0 for a
// nil slice), then the bytes. Decode copies, so the result never aliases its
// input.
func Bytes() Codec[[]byte] { return bytesCodec{} }

// Int64 returns the codec for int64: a zigzag varint.
func Int64() Codec[int64] { return int64Codec{} }

// Int returns the codec for int: a zigzag varint, the same encoding as
// Int64. Decoding a value that does not fit in int is an error.
func Int() Codec[int] { return intCodec{} }

// Int32 returns the codec for int32: a zigzag varint. Decoding a value
// outside the int32 range is an error.
func Int32() Codec[int32] { return int32Codec{} }

// Uint64 returns the codec for uint64: a uvarint.
func Uint64() Codec[uint64] { return uint64Codec{} }

// Uint32 returns the codec for uint32: a uvarint. Decoding a value outside
// the uint32 range is an error.
func Uint32() Codec[uint32] { return uint32Codec{} }

// Float64 returns the codec for float64: 8 bytes, little-endian IEEE 754.
func Float64() Codec[float64] { return float64Codec{} }

// Bool returns the codec for bool: one byte, 0 or 1. Any other byte is an
// error.
func Bool() Codec[bool] { return boolCodec{} }

type stringCodec struct{}

func (stringCodec) Append(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func (stringCodec) Decode(src []byte) (string, int, error) {
	l, n, err := length(src, "string")
	if err != nil {
		return "", 0, err
	}
	return string(src[n : n+l]), n + l, nil
}

type bytesCodec struct{}

func (bytesCodec) Append(dst []byte, v []byte) []byte {
	if v == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(v))+1)
	return append(dst, v...)
}

func (bytesCodec) Decode(src []byte) ([]byte, int, error) {
	l, isNil, n, err := count(src, "bytes", 1)
	if err != nil || isNil {
		return nil, n, err
	}
	return append(make([]byte, 0, l), src[n:n+l]...), n + l, nil
}

type int64Codec struct{}

func (int64Codec) Append(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }
func (int64Codec) Decode(src []byte) (int64, int, error) {
	return varint(src)
}

type intCodec struct{}

func (intCodec) Append(dst []byte, v int) []byte { return binary.AppendVarint(dst, int64(v)) }
func (intCodec) Decode(src []byte) (int, int, error) {
	v, n, err := varint(src)
	if err != nil {
		return 0, 0, err
	}
	if strconv.IntSize == 32 && (v < math.MinInt32 || v > math.MaxInt32) {
		return 0, 0, fmt.Errorf("%w: %d overflows int", ErrCorrupt, v)
	}
	return int(v), n, nil
}

type int32Codec struct{}

func (int32Codec) Append(dst []byte, v int32) []byte { return binary.AppendVarint(dst, int64(v)) }
func (int32Codec) Decode(src []byte) (int32, int, error) {
	v, n, err := varint(src)
	if err != nil {
		return 0, 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, 0, fmt.Errorf("%w: %d overflows int32", ErrCorrupt, v)
	}
	return int32(v), n, nil
}

type uint64Codec struct{}

func (uint64Codec) Append(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }
func (uint64Codec) Decode(src []byte) (uint64, int, error) {
	return uvarint(src)
}

type uint32Codec struct{}

func (uint32Codec) Append(dst []byte, v uint32) []byte { return binary.AppendUvarint(dst, uint64(v)) }
func (uint32Codec) Decode(src []byte) (uint32, int, error) {
	v, n, err := uvarint(src)
	if err != nil {
		return 0, 0, err
	}
	if v > math.MaxUint32 {
		return 0, 0, fmt.Errorf("%w: %d overflows uint32", ErrCorrupt, v)
	}
	return uint32(v), n, nil
}

type float64Codec struct{}

func (float64Codec) Append(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

func (float64Codec) Decode(src []byte) (float64, int, error) {
	if len(src) < 8 {
		return 0, 0, truncated("float64", 8, len(src))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(src)), 8, nil
}

type boolCodec struct{}

func (boolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func (boolCodec) Decode(src []byte) (bool, int, error) {
	if len(src) < 1 {
		return false, 0, truncated("bool", 1, 0)
	}
	switch src[0] {
	case 0:
		return false, 1, nil
	case 1:
		return true, 1, nil
	}
	return false, 0, fmt.Errorf("%w: bool byte %#x", ErrCorrupt, src[0])
}
