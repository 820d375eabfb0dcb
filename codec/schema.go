package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// A schema describes the layout of a codec's encoding: the kinds of its
// values and the names of its struct fields, in order. State snapshots
// record the schema of every state's values, so that a value type that
// gains, loses or reorders fields between a snapshot and the code that
// restores it can still be read (see Evolve).
//
// Serialized, a schema is a tree in prefix order:
//
//	schema = version:u8 node
//	node   = scalar-tag                       bool, integers, floats, complex, string, []byte
//	       | 'Y' len:uvarint                  byte array
//	       | 'S' node                         slice
//	       | 'A' len:uvarint node             array
//	       | 'M' node node                    map (key, value)
//	       | 'P' node                         pointer
//	       | 'T' fields:uvarint (name node)*  struct, fields in encoding order
//	       | 'B' name                         a type with binary methods
//	name   = len:uvarint bytes
const schemaVersion = 1

// Scalar tags: one per Go kind, since a change of kind is a change of
// type even where the encodings agree (int32 and int64 are both varints).
var scalarTags = map[reflect.Kind]byte{
	reflect.Bool: 'z', reflect.Int: 'i', reflect.Int8: '1', reflect.Int16: '2', reflect.Int32: '4', reflect.Int64: '8',
	reflect.Uint: 'u', reflect.Uint8: '!', reflect.Uint16: '@', reflect.Uint32: '$', reflect.Uint64: '*',
	reflect.Float32: 'f', reflect.Float64: 'F', reflect.Complex64: 'c', reflect.Complex128: 'C', reflect.String: 's',
}

const tagBytes = 'y'

// errRecursive marks a type that refers to itself: it has no finite
// schema.
var errRecursive = errors.New("recursive type")

// Schema returns the serialized schema of c's encoding, or nil if c's
// layout is unknown: c was not made by For or a built-in constructor of
// this package, or its type refers to itself. A nil schema evolves as
// nothing: the bytes restore as they are.
func Schema[T any](c Codec[T]) []byte {
	t, ok := layoutType(c)
	if !ok {
		return nil
	}
	dst := []byte{schemaVersion}
	dst, err := appendSchema(dst, t, map[reflect.Type]bool{})
	if err != nil {
		return nil
	}
	return dst
}

// layoutType returns the type whose structure c's encoding follows.
func layoutType[T any](c Codec[T]) (reflect.Type, bool) {
	switch c := any(c).(type) {
	case stringCodec, bytesCodec, int64Codec, intCodec, int32Codec, uint64Codec, uint32Codec, float64Codec, boolCodec, binaryCodec[T]:
		return reflect.TypeFor[T](), true
	case *compiledCodec[T]:
		return c.p.typ, true
	}
	return nil, false
}

func appendName(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// appendSchema appends the node of t, following the rules compile
// encodes by.
func appendSchema(dst []byte, t reflect.Type, open map[reflect.Type]bool) ([]byte, error) {
	if hasBinaryMethods(t) {
		return appendName(append(dst, 'B'), t.String()), nil
	}
	if tag, ok := scalarTags[t.Kind()]; ok {
		return append(dst, tag), nil
	}
	if open[t] {
		return nil, errRecursive
	}
	open[t] = true
	defer delete(open, t)
	var err error
	switch t.Kind() {
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !hasBinaryMethods(t.Elem()) {
			return append(dst, tagBytes), nil
		}
		return appendSchema(append(dst, 'S'), t.Elem(), open)
	case reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && !hasBinaryMethods(t.Elem()) {
			return binary.AppendUvarint(append(dst, 'Y'), uint64(t.Len())), nil
		}
		return appendSchema(binary.AppendUvarint(append(dst, 'A'), uint64(t.Len())), t.Elem(), open)
	case reflect.Map:
		if dst, err = appendSchema(append(dst, 'M'), t.Key(), open); err != nil {
			return nil, err
		}
		return appendSchema(dst, t.Elem(), open)
	case reflect.Pointer:
		return appendSchema(append(dst, 'P'), t.Elem(), open)
	case reflect.Struct:
		fields := encodedFields(t)
		dst = binary.AppendUvarint(append(dst, 'T'), uint64(len(fields)))
		for _, f := range fields {
			if dst, err = appendSchema(appendName(dst, f.Name), f.Type, open); err != nil {
				return nil, err
			}
		}
		return dst, nil
	}
	return nil, fmt.Errorf("unsupported kind %v", t.Kind())
}

// encodedFields returns the fields of struct type t that its encoding
// holds, in order.
func encodedFields(t reflect.Type) []reflect.StructField {
	var fs []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.Tag.Get("weir") != "-" && f.IsExported() {
			fs = append(fs, f)
		}
	}
	return fs
}

// node is a parsed schema node.
type node struct {
	tag    byte
	n      int    // array length
	name   string // binary type name
	elem   *node  // slice, array, pointer, map value
	key    *node  // map key
	fields []field
	// raw is the node's serialized form, to compare subtrees.
	raw []byte
}

type field struct {
	name string
	n    *node
}

// maxSchemaDepth bounds the nesting a parsed schema may have.
const maxSchemaDepth = 64

func parseSchema(b []byte) (*node, error) {
	if len(b) == 0 || b[0] != schemaVersion {
		return nil, fmt.Errorf("%w: schema version", ErrCorrupt)
	}
	p := &schemaParser{b: b[1:]}
	n := p.node(0)
	if p.err == nil && len(p.b) != 0 {
		p.err = fmt.Errorf("%w: %d bytes after the schema", ErrCorrupt, len(p.b))
	}
	return n, p.err
}

type schemaParser struct {
	b   []byte
	err error
}

func (p *schemaParser) fail(what string) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: schema: %s", ErrCorrupt, what)
	}
}

func (p *schemaParser) uvarint() int {
	v, n := binary.Uvarint(p.b)
	if n <= 0 || v > 1<<31 {
		p.fail("bad length")
		return 0
	}
	p.b = p.b[n:]
	return int(v)
}

func (p *schemaParser) name() string {
	l := p.uvarint()
	if p.err != nil || l > len(p.b) {
		p.fail("bad name")
		return ""
	}
	s := string(p.b[:l])
	p.b = p.b[l:]
	return s
}

func (p *schemaParser) node(depth int) *node {
	if p.err != nil {
		return nil
	}
	if depth > maxSchemaDepth || len(p.b) == 0 {
		p.fail("too deep or truncated")
		return nil
	}
	start := p.b
	n := &node{tag: p.b[0]}
	p.b = p.b[1:]
	switch n.tag {
	case tagBytes:
	case 'Y':
		n.n = p.uvarint()
	case 'S', 'P':
		n.elem = p.node(depth + 1)
	case 'A':
		n.n = p.uvarint()
		n.elem = p.node(depth + 1)
	case 'M':
		n.key = p.node(depth + 1)
		n.elem = p.node(depth + 1)
	case 'T':
		c := p.uvarint()
		if c > len(p.b) {
			p.fail("bad field count")
		}
		for range c {
			if p.err != nil {
				break
			}
			name := p.name()
			n.fields = append(n.fields, field{name, p.node(depth + 1)})
		}
	case 'B':
		n.name = p.name()
	default:
		if !isScalarTag(n.tag) {
			p.fail(fmt.Sprintf("tag %q", n.tag))
		}
	}
	if p.err != nil {
		return nil
	}
	n.raw = start[:len(start)-len(p.b)]
	return n
}

func isScalarTag(tag byte) bool {
	for _, t := range scalarTags {
		if t == tag {
			return true
		}
	}
	return false
}

// describe names the type a node stands for, for errors.
func (n *node) describe() string {
	switch n.tag {
	case tagBytes:
		return "[]byte"
	case 'Y':
		return fmt.Sprintf("[%d]byte", n.n)
	case 'S':
		return "[]" + n.elem.describe()
	case 'A':
		return fmt.Sprintf("[%d]%s", n.n, n.elem.describe())
	case 'M':
		return "map[" + n.key.describe() + "]" + n.elem.describe()
	case 'P':
		return "*" + n.elem.describe()
	case 'T':
		names := make([]string, len(n.fields))
		for i, f := range n.fields {
			names[i] = f.name + " " + f.n.describe()
		}
		return "struct{" + strings.Join(names, "; ") + "}"
	case 'B':
		return n.name
	}
	for k, t := range scalarTags {
		if t == n.tag {
			return k.String()
		}
	}
	return "?"
}

// A Transcoder rewrites one value encoded under an old schema into the
// encoding of the current type: it appends the new encoding to dst and
// reports how many bytes of src the old value took.
type Transcoder func(dst, src []byte) ([]byte, int, error)

// IncompatibleError reports a schema change that Evolve cannot bridge.
type IncompatibleError struct {
	// Path is the field path of the change from the value's root, such as
	// ".Order.Amount"; empty for the value itself.
	Path     string
	Was, Now string
}

func (e *IncompatibleError) Error() string {
	where := "the value"
	if e.Path != "" {
		where = "field " + strings.TrimPrefix(e.Path, ".")
	}
	return fmt.Sprintf("%s was %s and is now %s", where, e.Was, e.Now)
}

// Evolve returns a Transcoder from values encoded under the serialized
// schema old to c's current encoding, or nil if the two layouts are the
// same (or either is unknown: the bytes are then taken as they are).
// Struct fields are matched by name: a field the old schema lacks decodes
// as its zero value, one the current type lacks is dropped, and fields may
// be reordered. Anything else that changed (a field's type, an array's
// length, a map's key type) is an *IncompatibleError naming the field.
func Evolve[T any](c Codec[T], old []byte) (Transcoder, error) {
	cur := Schema(c)
	if cur == nil || old == nil || bytes.Equal(cur, old) {
		return nil, nil
	}
	on, err := parseSchema(old)
	if err != nil {
		return nil, err
	}
	t, _ := layoutType(c)
	return transcoder(on, t, "")
}

// transcoder builds the conversion of values of old to values of t.
func transcoder(old *node, t reflect.Type, path string) (Transcoder, error) {
	cur, err := appendSchema(nil, t, map[reflect.Type]bool{})
	if err != nil {
		return nil, err
	}
	if bytes.Equal(old.raw, cur) {
		skip := skipper(old)
		return func(dst, src []byte) ([]byte, int, error) {
			n, err := skip(src)
			if err != nil {
				return dst, 0, err
			}
			return append(dst, src[:n]...), n, nil
		}, nil
	}
	incompatible := func() error {
		cn, _ := parseSchema(append([]byte{schemaVersion}, cur...))
		return &IncompatibleError{Path: path, Was: old.describe(), Now: cn.describe()}
	}
	if hasBinaryMethods(t) {
		return nil, incompatible()
	}
	switch {
	case old.tag == 'S' && t.Kind() == reflect.Slice:
		elem, err := transcoder(old.elem, t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		return func(dst, src []byte) ([]byte, int, error) {
			l, isNil, n, err := count(src, "slice", 1)
			if err != nil || isNil {
				return append(dst, src[:n]...), n, err
			}
			dst = append(dst, src[:n]...)
			for i := 0; i < l; i++ {
				var m int
				if dst, m, err = elem(dst, src[n:]); err != nil {
					return dst, 0, fmt.Errorf("element %d: %w", i, err)
				}
				n += m
			}
			return dst, n, nil
		}, nil
	case old.tag == 'A' && t.Kind() == reflect.Array && old.n == t.Len():
		elem, err := transcoder(old.elem, t.Elem(), path+"[]")
		if err != nil {
			return nil, err
		}
		l := old.n
		return func(dst, src []byte) ([]byte, int, error) {
			n := 0
			for i := 0; i < l; i++ {
				var m int
				var err error
				if dst, m, err = elem(dst, src[n:]); err != nil {
					return dst, 0, fmt.Errorf("element %d: %w", i, err)
				}
				n += m
			}
			return dst, n, nil
		}, nil
	case old.tag == 'M' && t.Kind() == reflect.Map:
		kcur, err := appendSchema(nil, t.Key(), map[reflect.Type]bool{})
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(old.key.raw, kcur) {
			// Converting keys could merge two of them into one.
			return nil, incompatible()
		}
		skipKey := skipper(old.key)
		val, err := transcoder(old.elem, t.Elem(), path+"[value]")
		if err != nil {
			return nil, err
		}
		return func(dst, src []byte) ([]byte, int, error) {
			l, isNil, n, err := count(src, "map", 2)
			if err != nil || isNil {
				return append(dst, src[:n]...), n, err
			}
			dst = append(dst, src[:n]...)
			for i := 0; i < l; i++ {
				k, err := skipKey(src[n:])
				if err != nil {
					return dst, 0, fmt.Errorf("map key %d: %w", i, err)
				}
				dst = append(dst, src[n:n+k]...)
				n += k
				var m int
				if dst, m, err = val(dst, src[n:]); err != nil {
					return dst, 0, fmt.Errorf("map value %d: %w", i, err)
				}
				n += m
			}
			return dst, n, nil
		}, nil
	case old.tag == 'P' && t.Kind() == reflect.Pointer:
		elem, err := transcoder(old.elem, t.Elem(), "(*"+path+")")
		if err != nil {
			return nil, err
		}
		return func(dst, src []byte) ([]byte, int, error) {
			if len(src) < 1 {
				return dst, 0, truncated("pointer", 1, 0)
			}
			switch src[0] {
			case 0:
				return append(dst, 0), 1, nil
			case 1:
				dst, m, err := elem(append(dst, 1), src[1:])
				return dst, m + 1, err
			}
			return dst, 0, fmt.Errorf("%w: pointer flag %#x", ErrCorrupt, src[0])
		}, nil
	case old.tag == 'T' && t.Kind() == reflect.Struct:
		return structTranscoder(old, t, path)
	}
	return nil, incompatible()
}

// structTranscoder matches old's fields to t's by name.
func structTranscoder(old *node, t reflect.Type, path string) (Transcoder, error) {
	skips := make([]func([]byte) (int, error), len(old.fields))
	byName := make(map[string]int, len(old.fields))
	for i, f := range old.fields {
		skips[i] = skipper(f.n)
		byName[f.name] = i
	}
	type out struct {
		from int // old field index, or -1: zero
		conv Transcoder
		zero []byte
	}
	var outs []out
	for _, f := range encodedFields(t) {
		i, ok := byName[f.Name]
		if !ok {
			p, err := planFor(f.Type)
			if err != nil {
				return nil, err
			}
			// The field's zero value, encoded as the current code does.
			outs = append(outs, out{from: -1, zero: p.enc(nil, reflect.New(f.Type).UnsafePointer())})
			continue
		}
		conv, err := transcoder(old.fields[i].n, f.Type, path+"."+f.Name)
		if err != nil {
			return nil, err
		}
		outs = append(outs, out{from: i, conv: conv})
	}
	return func(dst, src []byte) ([]byte, int, error) {
		// Where each old field starts, then the new fields in their order.
		var starts [16]int
		at := starts[:0]
		n := 0
		for i, skip := range skips {
			at = append(at, n)
			m, err := skip(src[n:])
			if err != nil {
				return dst, 0, fmt.Errorf("field %s: %w", old.fields[i].name, err)
			}
			n += m
		}
		for _, o := range outs {
			if o.from < 0 {
				dst = append(dst, o.zero...)
				continue
			}
			var err error
			if dst, _, err = o.conv(dst, src[at[o.from]:]); err != nil {
				return dst, 0, fmt.Errorf("field %s: %w", old.fields[o.from].name, err)
			}
		}
		return dst, n, nil
	}, nil
}

// skipper returns a function that reports the length of one value of
// schema n at the start of src.
func skipper(n *node) func([]byte) (int, error) {
	switch n.tag {
	case 'z':
		return fixedSkip(1, "bool")
	case 'i', '1', '2', '4', '8':
		return func(src []byte) (int, error) {
			_, m, err := varint(src)
			return m, err
		}
	case 'u', '!', '@', '$', '*':
		return skipUvarint
	case 'f', 'F', 'c', 'C':
		size := map[byte]int{'f': 4, 'F': 8, 'c': 8, 'C': 16}[n.tag]
		return fixedSkip(size, n.describe())
	case 's', tagBytes, 'B':
		return func(src []byte) (int, error) {
			l, m, err := length(src, n.describe())
			return l + m, err
		}
	case 'Y':
		return fixedSkip(n.n, "byte array")
	case 'S':
		elem := skipper(n.elem)
		return func(src []byte) (int, error) {
			l, isNil, m, err := count(src, "slice", 1)
			if err != nil || isNil {
				return m, err
			}
			return skipN(src, m, l, elem)
		}
	case 'A':
		elem := skipper(n.elem)
		return func(src []byte) (int, error) { return skipN(src, 0, n.n, elem) }
	case 'M':
		key, val := skipper(n.key), skipper(n.elem)
		pair := func(src []byte) (int, error) {
			a, err := key(src)
			if err != nil {
				return 0, err
			}
			b, err := val(src[a:])
			return a + b, err
		}
		return func(src []byte) (int, error) {
			l, isNil, m, err := count(src, "map", 2)
			if err != nil || isNil {
				return m, err
			}
			return skipN(src, m, l, pair)
		}
	case 'P':
		elem := skipper(n.elem)
		return func(src []byte) (int, error) {
			if len(src) < 1 {
				return 0, truncated("pointer", 1, 0)
			}
			if src[0] == 0 {
				return 1, nil
			}
			m, err := elem(src[1:])
			return m + 1, err
		}
	case 'T':
		fields := make([]func([]byte) (int, error), len(n.fields))
		for i, f := range n.fields {
			fields[i] = skipper(f.n)
		}
		return func(src []byte) (int, error) {
			at := 0
			for _, f := range fields {
				m, err := f(src[at:])
				if err != nil {
					return 0, err
				}
				at += m
			}
			return at, nil
		}
	}
	return func([]byte) (int, error) { return 0, fmt.Errorf("%w: schema tag %q", ErrCorrupt, n.tag) }
}

func skipUvarint(src []byte) (int, error) {
	_, m, err := uvarint(src)
	return m, err
}

func fixedSkip(size int, what string) func([]byte) (int, error) {
	return func(src []byte) (int, error) {
		if len(src) < size {
			return 0, truncated(what, size, len(src))
		}
		return size, nil
	}
}

func skipN(src []byte, at, count int, one func([]byte) (int, error)) (int, error) {
	for i := 0; i < count; i++ {
		m, err := one(src[at:])
		if err != nil {
			return 0, fmt.Errorf("element %d: %w", i, err)
		}
		at += m
	}
	return at, nil
}
