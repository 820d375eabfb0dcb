package codec

import (
	"encoding"
	"fmt"
	"reflect"
	"unsafe"
)

// For returns a codec for T, chosen in this order:
//
//  1. the built-in codec for string, []byte, int, int32, int64, uint32,
//     uint64, float64 or bool;
//  2. if T or *T has an AppendBinary (encoding.BinaryAppender) or
//     MarshalBinary (encoding.BinaryMarshaler) method and *T has
//     UnmarshalBinary (encoding.BinaryUnmarshaler): those methods, framed
//     by a uvarint length (one allocation per Append, to hand the methods
//     an addressable copy). Append panics if AppendBinary or MarshalBinary
//     fails, since a Codec cannot report an encoding error and a partial
//     value would corrupt the stream;
//  3. a codec compiled from T's structure: booleans, integers, floats,
//     complex numbers, strings, slices, arrays, maps, pointers and structs
//     of those, with nested types that have binary methods handled as in 2.
//     The plan is compiled once per type and cached; encoding then walks
//     memory by precomputed offsets, with no reflection per field.
//
// Values must be trees: a pointer cycle recurses without end, as it does
// in encoding/gob and encoding/json. Struct fields are encoded in
// declaration order. A field tagged `weir:"-"`
// is skipped (and decodes as its zero value). An unexported field that is
// not tagged `weir:"-"` is an error rather than silently lost state, as is a
// channel, function, interface, unsafe.Pointer or uintptr anywhere in T;
// the error names the type and the field path.
//
// Integers use zigzag varints, unsigned integers uvarints, floats fixed
// little-endian bytes, strings and byte slices a uvarint length, slices
// and maps a uvarint of length+1 with 0 for nil, pointers a 0 (nil) or 1
// byte before the pointee. Map entries are written in iteration order.
func For[T any]() (Codec[T], error) {
	var zero T
	switch any(zero).(type) {
	case string:
		return any(String()).(Codec[T]), nil
	case []byte:
		return any(Bytes()).(Codec[T]), nil
	case int:
		return any(Int()).(Codec[T]), nil
	case int32:
		return any(Int32()).(Codec[T]), nil
	case int64:
		return any(Int64()).(Codec[T]), nil
	case uint32:
		return any(Uint32()).(Codec[T]), nil
	case uint64:
		return any(Uint64()).(Codec[T]), nil
	case float64:
		return any(Float64()).(Codec[T]), nil
	case bool:
		return any(Bool()).(Codec[T]), nil
	}
	t := reflect.TypeFor[T]()
	if hasBinaryMethods(t) {
		return binaryCodec[T]{}, nil
	}
	p, err := planFor(t)
	if err != nil {
		return nil, err
	}
	return &compiledCodec[T]{p: p, opaque: p.opaque}, nil
}

// MustFor is like For but panics if T has no codec. It suits package-level
// initialisation with types known to be supported.
func MustFor[T any]() Codec[T] {
	c, err := For[T]()
	if err != nil {
		panic(err)
	}
	return c
}

var (
	appenderType    = reflect.TypeFor[encoding.BinaryAppender]()
	marshalerType   = reflect.TypeFor[encoding.BinaryMarshaler]()
	unmarshalerType = reflect.TypeFor[encoding.BinaryUnmarshaler]()
)

// hasBinaryMethods reports whether values of t can be encoded with their
// own binary methods.
func hasBinaryMethods(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	if !pt.Implements(unmarshalerType) {
		return false
	}
	return pt.Implements(appenderType) || pt.Implements(marshalerType)
}

// appendBinary encodes the value at p (of a type with binary methods) with
// a uvarint length prefix. p must point to memory the methods may retain.
func appendBinary(dst []byte, x any) ([]byte, error) {
	dst, mark := ReserveLength(dst)
	var err error
	switch m := x.(type) {
	case encoding.BinaryAppender:
		dst, err = m.AppendBinary(dst)
	case encoding.BinaryMarshaler:
		var b []byte
		b, err = m.MarshalBinary()
		dst = append(dst, b...)
	}
	if err != nil {
		return dst[:mark], err
	}
	return FinishLength(dst, mark), nil
}

func decodeBinary(src []byte, x any) (int, error) {
	l, n, err := length(src, "binary value")
	if err != nil {
		return 0, err
	}
	if err := x.(encoding.BinaryUnmarshaler).UnmarshalBinary(src[n : n+l]); err != nil {
		return 0, fmt.Errorf("%w: UnmarshalBinary: %w", ErrCorrupt, err)
	}
	return n + l, nil
}

// binaryCodec encodes a T whose pointer has binary methods.
type binaryCodec[T any] struct{}

func (binaryCodec[T]) Append(dst []byte, v T) []byte {
	dst, err := appendBinary(dst, any(&v))
	if err != nil {
		// Codec.Append has no error result; a type whose AppendBinary can
		// fail cannot be encoded, and writing a partial value would corrupt
		// the stream silently.
		panic(fmt.Sprintf("codec: %v: %v", reflect.TypeFor[T](), err))
	}
	return dst
}

func (binaryCodec[T]) Decode(src []byte) (T, int, error) {
	v := new(T)
	n, err := decodeBinary(src, any(v))
	if err != nil {
		var zero T
		return zero, 0, fmt.Errorf("codec: decoding %v: %w", reflect.TypeFor[T](), err)
	}
	return *v, n, nil
}

// compiledCodec runs a compiled plan on the memory of a T.
type compiledCodec[T any] struct {
	p *plan
	// opaque is set when the plan calls methods of user types, which must
	// not receive a pointer into this goroutine's stack.
	opaque bool
}

func (c *compiledCodec[T]) Append(dst []byte, v T) []byte {
	if c.opaque {
		pv := new(T)
		*pv = v
		return c.p.enc(dst, unsafe.Pointer(pv))
	}
	return c.p.enc(dst, noescape(unsafe.Pointer(&v)))
}

func (c *compiledCodec[T]) Decode(src []byte) (T, int, error) {
	var (
		v   T
		n   int
		err error
	)
	if c.opaque {
		pv := new(T)
		n, err = c.p.dec(src, unsafe.Pointer(pv))
		v = *pv
	} else {
		n, err = c.p.dec(src, noescape(unsafe.Pointer(&v)))
	}
	if err != nil {
		var zero T
		return zero, 0, fmt.Errorf("codec: decoding %v: %w", c.p.typ, err)
	}
	return v, n, nil
}
