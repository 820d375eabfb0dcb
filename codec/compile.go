package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"sync"
	"unsafe"
)

// A plan encodes and decodes the value of one type in place, given a
// pointer to it. Plans are built once per type by reflection; running one
// does no reflection except to allocate slices, maps and pointees.
type plan struct {
	typ reflect.Type
	enc func(dst []byte, p unsafe.Pointer) []byte
	// dec decodes into *p, which holds the zero value.
	dec func(src []byte, p unsafe.Pointer) (int, error)
	// opaque is set when the plan (or one it calls) passes p to methods of
	// the user's types.
	opaque bool
}

// plans caches the compiled plan of every type For has been asked about.
var plans sync.Map // reflect.Type -> *plan

func planFor(t reflect.Type) (*plan, error) {
	if p, ok := plans.Load(t); ok {
		return p.(*plan), nil
	}
	c := compiler{seen: make(map[reflect.Type]*plan)}
	p, err := c.compile(t, t.String())
	if err != nil {
		return nil, fmt.Errorf("codec: cannot encode %v: %w", t, err)
	}
	actual, _ := plans.LoadOrStore(t, p)
	return actual.(*plan), nil
}

type compiler struct {
	// seen holds the plans under construction, so recursive types refer to
	// themselves instead of recursing forever.
	seen map[reflect.Type]*plan
}

// sliceHeader is the memory layout of a Go slice.
type sliceHeader struct {
	data unsafe.Pointer
	len  int
	cap  int
}

func (c *compiler) compile(t reflect.Type, path string) (*plan, error) {
	if p, ok := c.seen[t]; ok {
		return p, nil
	}
	p := &plan{typ: t}
	c.seen[t] = p
	if hasBinaryMethods(t) {
		p.enc = func(dst []byte, ptr unsafe.Pointer) []byte {
			dst, err := appendBinary(dst, reflect.NewAt(t, ptr).Interface())
			if err != nil {
				panic(fmt.Sprintf("codec: %v: %v", t, err))
			}
			return dst
		}
		p.dec = func(src []byte, ptr unsafe.Pointer) (int, error) {
			return decodeBinary(src, reflect.NewAt(t, ptr).Interface())
		}
		p.opaque = true
		return p, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		p.enc = func(dst []byte, ptr unsafe.Pointer) []byte {
			if *(*bool)(ptr) {
				return append(dst, 1)
			}
			return append(dst, 0)
		}
		p.dec = func(src []byte, ptr unsafe.Pointer) (int, error) {
			v, n, err := boolCodec{}.Decode(src)
			*(*bool)(ptr) = v
			return n, err
		}
	case reflect.Int8:
		p.enc, p.dec = signed[int8]()
	case reflect.Int16:
		p.enc, p.dec = signed[int16]()
	case reflect.Int32:
		p.enc, p.dec = signed[int32]()
	case reflect.Int64:
		p.enc, p.dec = signed[int64]()
	case reflect.Int:
		p.enc, p.dec = signed[int]()
	case reflect.Uint8:
		p.enc, p.dec = unsigned[uint8]()
	case reflect.Uint16:
		p.enc, p.dec = unsigned[uint16]()
	case reflect.Uint32:
		p.enc, p.dec = unsigned[uint32]()
	case reflect.Uint64:
		p.enc, p.dec = unsigned[uint64]()
	case reflect.Uint:
		p.enc, p.dec = unsigned[uint]()
	case reflect.Float32:
		p.enc, p.dec = float32Plan()
	case reflect.Float64:
		p.enc, p.dec = float64Plan()
	case reflect.Complex64:
		p.enc, p.dec = fixedPlan(8, "complex64")
	case reflect.Complex128:
		p.enc, p.dec = fixedPlan(16, "complex128")
	case reflect.String:
		p.enc = func(dst []byte, ptr unsafe.Pointer) []byte {
			s := *(*string)(ptr)
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			return append(dst, s...)
		}
		p.dec = func(src []byte, ptr unsafe.Pointer) (int, error) {
			l, n, err := length(src, "string")
			if err != nil {
				return 0, err
			}
			*(*string)(ptr) = string(src[n : n+l])
			return n + l, nil
		}
	case reflect.Slice:
		if err := c.slice(p, t, path); err != nil {
			return nil, err
		}
	case reflect.Array:
		if err := c.array(p, t, path); err != nil {
			return nil, err
		}
	case reflect.Map:
		if err := c.mapPlan(p, t, path); err != nil {
			return nil, err
		}
	case reflect.Pointer:
		if err := c.pointer(p, t, path); err != nil {
			return nil, err
		}
	case reflect.Struct:
		if err := c.structPlan(p, t, path); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s has unsupported type %v (kind %v)", path, t, t.Kind())
	}
	return p, nil
}

type encFn = func(dst []byte, p unsafe.Pointer) []byte
type decFn = func(src []byte, p unsafe.Pointer) (int, error)

func signed[I int8 | int16 | int32 | int64 | int]() (encFn, decFn) {
	enc := func(dst []byte, p unsafe.Pointer) []byte {
		return binary.AppendVarint(dst, int64(*(*I)(p)))
	}
	dec := func(src []byte, p unsafe.Pointer) (int, error) {
		v, n, err := varint(src)
		if err != nil {
			return 0, err
		}
		if int64(I(v)) != v {
			return 0, fmt.Errorf("%w: %d overflows %T", ErrCorrupt, v, I(0))
		}
		*(*I)(p) = I(v)
		return n, nil
	}
	return enc, dec
}

func unsigned[U uint8 | uint16 | uint32 | uint64 | uint]() (encFn, decFn) {
	enc := func(dst []byte, p unsafe.Pointer) []byte {
		return binary.AppendUvarint(dst, uint64(*(*U)(p)))
	}
	dec := func(src []byte, p unsafe.Pointer) (int, error) {
		v, n, err := uvarint(src)
		if err != nil {
			return 0, err
		}
		if uint64(U(v)) != v {
			return 0, fmt.Errorf("%w: %d overflows %T", ErrCorrupt, v, U(0))
		}
		*(*U)(p) = U(v)
		return n, nil
	}
	return enc, dec
}

func float32Plan() (encFn, decFn) {
	enc := func(dst []byte, p unsafe.Pointer) []byte {
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(*(*float32)(p)))
	}
	dec := func(src []byte, p unsafe.Pointer) (int, error) {
		if len(src) < 4 {
			return 0, truncated("float32", 4, len(src))
		}
		*(*float32)(p) = math.Float32frombits(binary.LittleEndian.Uint32(src))
		return 4, nil
	}
	return enc, dec
}

func float64Plan() (encFn, decFn) {
	enc := func(dst []byte, p unsafe.Pointer) []byte {
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(*(*float64)(p)))
	}
	dec := func(src []byte, p unsafe.Pointer) (int, error) {
		if len(src) < 8 {
			return 0, truncated("float64", 8, len(src))
		}
		*(*float64)(p) = math.Float64frombits(binary.LittleEndian.Uint64(src))
		return 8, nil
	}
	return enc, dec
}

// fixedPlan encodes size bytes of pointer-free memory as consecutive
// little-endian float parts (complex numbers).
func fixedPlan(size int, what string) (encFn, decFn) {
	half := size / 2
	enc := func(dst []byte, p unsafe.Pointer) []byte {
		if half == 4 {
			c := *(*[2]float32)(p)
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(c[0]))
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(c[1]))
		}
		c := *(*[2]float64)(p)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c[0]))
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(c[1]))
	}
	dec := func(src []byte, p unsafe.Pointer) (int, error) {
		if len(src) < size {
			return 0, truncated(what, size, len(src))
		}
		if half == 4 {
			*(*[2]float32)(p) = [2]float32{
				math.Float32frombits(binary.LittleEndian.Uint32(src)),
				math.Float32frombits(binary.LittleEndian.Uint32(src[4:])),
			}
		} else {
			*(*[2]float64)(p) = [2]float64{
				math.Float64frombits(binary.LittleEndian.Uint64(src)),
				math.Float64frombits(binary.LittleEndian.Uint64(src[8:])),
			}
		}
		return size, nil
	}
	return enc, dec
}

func (c *compiler) slice(p *plan, t reflect.Type, path string) error {
	et := t.Elem()
	if et.Kind() == reflect.Uint8 && !hasBinaryMethods(et) {
		p.enc = func(dst []byte, ptr unsafe.Pointer) []byte {
			return bytesCodec{}.Append(dst, *(*[]byte)(ptr))
		}
		p.dec = func(src []byte, ptr unsafe.Pointer) (int, error) {
			b, n, err := bytesCodec{}.Decode(src)
			*(*[]byte)(ptr) = b
			return n, err
		}
		return nil
	}
	ep, err := c.compile(et, path+"[]")
	if err != nil {
		return err
	}
	p.opaque = ep.opaque
	size := et.Size()
	p.enc = func(dst []byte, ptr unsafe.Pointer) []byte {
		h := (*sliceHeader)(ptr)
		if h.data == nil {
			return append(dst, 0)
		}
		dst = binary.AppendUvarint(dst, uint64(h.len)+1)
		for i := 0; i < h.len; i++ {
			dst = ep.enc(dst, unsafe.Add(h.data, uintptr(i)*size))
		}
		return dst
	}
	p.dec = func(src []byte, ptr unsafe.Pointer) (int, error) {
		l, isNil, n, err := count(src, "slice", 1)
		if err != nil || isNil {
			return n, err
		}
		data := reflect.MakeSlice(t, l, l).UnsafePointer()
		for i := 0; i < l; i++ {
			m, err := ep.dec(src[n:], unsafe.Add(data, uintptr(i)*size))
			if err != nil {
				return 0, fmt.Errorf("element %d: %w", i, err)
			}
			n += m
		}
		*(*sliceHeader)(ptr) = sliceHeader{data, l, l}
		return n, nil
	}
	return nil
}

func (c *compiler) array(p *plan, t reflect.Type, path string) error {
	l := t.Len()
	if l == 0 {
		p.enc, p.dec = emptyPlan()
		return nil
	}
	et := t.Elem()
	if et.Kind() == reflect.Uint8 && !hasBinaryMethods(et) {
		p.enc = func(dst []byte, ptr unsafe.Pointer) []byte {
			return append(dst, unsafe.Slice((*byte)(ptr), l)...)
		}
		p.dec = func(src []byte, ptr unsafe.Pointer) (int, error) {
			if len(src) < l {
				return 0, truncated("byte array", l, len(src))
			}
			copy(unsafe.Slice((*byte)(ptr), l), src)
			return l, nil
		}
		return nil
	}
	ep, err := c.compile(et, path+"[]")
	if err != nil {
		return err
	}
	p.opaque = ep.opaque
	size := et.Size()
	p.enc = func(dst []byte, ptr unsafe.Pointer) []byte {
		for i := 0; i < l; i++ {
			dst = ep.enc(dst, unsafe.Add(ptr, uintptr(i)*size))
		}
		return dst
	}
	p.dec = func(src []byte, ptr unsafe.Pointer) (int, error) {
		n := 0
		for i := 0; i < l; i++ {
			m, err := ep.dec(src[n:], unsafe.Add(ptr, uintptr(i)*size))
			if err != nil {
				return 0, fmt.Errorf("element %d: %w", i, err)
			}
			n += m
		}
		return n, nil
	}
	return nil
}

// emptyPlan encodes a value with no content (an empty struct or array) as
// a single zero byte, so that every encoding takes at least one byte.
func emptyPlan() (encFn, decFn) {
	enc := func(dst []byte, _ unsafe.Pointer) []byte { return append(dst, 0) }
	dec := func(src []byte, _ unsafe.Pointer) (int, error) {
		if len(src) < 1 {
			return 0, truncated("empty value", 1, 0)
		}
		if src[0] != 0 {
			return 0, fmt.Errorf("%w: empty value byte %#x", ErrCorrupt, src[0])
		}
		return 1, nil
	}
	return enc, dec
}

func (c *compiler) mapPlan(p *plan, t reflect.Type, path string) error {
	kp, err := c.compile(t.Key(), path+"[key]")
	if err != nil {
		return err
	}
	vp, err := c.compile(t.Elem(), path+"[value]")
	if err != nil {
		return err
	}
	p.opaque = kp.opaque || vp.opaque
	kt, vt := t.Key(), t.Elem()
	p.enc = func(dst []byte, ptr unsafe.Pointer) []byte {
		// The map iterator keeps the Value it iterates, and may live on the
		// heap; it must not point at ptr, which may be a stack address (see
		// noescape). A map value is a pointer, so iterate over a copy.
		mp := *(*unsafe.Pointer)(ptr)
		m := reflect.NewAt(t, unsafe.Pointer(&mp)).Elem()
		if m.IsNil() {
			return append(dst, 0)
		}
		dst = binary.AppendUvarint(dst, uint64(m.Len())+1)
		k, v := reflect.New(kt), reflect.New(vt)
		ke, ve := k.Elem(), v.Elem()
		it := m.MapRange()
		for it.Next() {
			ke.SetIterKey(it)
			ve.SetIterValue(it)
			dst = kp.enc(dst, k.UnsafePointer())
			dst = vp.enc(dst, v.UnsafePointer())
		}
		return dst
	}
	p.dec = func(src []byte, ptr unsafe.Pointer) (int, error) {
		l, isNil, n, err := count(src, "map", 2)
		if err != nil || isNil {
			return n, err
		}
		m := reflect.MakeMapWithSize(t, l)
		k, v := reflect.New(kt), reflect.New(vt)
		ke, ve := k.Elem(), v.Elem()
		for i := 0; i < l; i++ {
			ke.SetZero()
			ve.SetZero()
			mk, err := kp.dec(src[n:], k.UnsafePointer())
			if err != nil {
				return 0, fmt.Errorf("map key %d: %w", i, err)
			}
			n += mk
			mv, err := vp.dec(src[n:], v.UnsafePointer())
			if err != nil {
				return 0, fmt.Errorf("map value %d: %w", i, err)
			}
			n += mv
			m.SetMapIndex(ke, ve)
			if m.Len() != i+1 {
				return 0, fmt.Errorf("%w: duplicate map key at entry %d", ErrCorrupt, i)
			}
		}
		reflect.NewAt(t, ptr).Elem().Set(m)
		return n, nil
	}
	return nil
}

func (c *compiler) pointer(p *plan, t reflect.Type, path string) error {
	et := t.Elem()
	ep, err := c.compile(et, "(*"+path+")")
	if err != nil {
		return err
	}
	p.opaque = ep.opaque
	p.enc = func(dst []byte, ptr unsafe.Pointer) []byte {
		q := *(*unsafe.Pointer)(ptr)
		if q == nil {
			return append(dst, 0)
		}
		return ep.enc(append(dst, 1), q)
	}
	p.dec = func(src []byte, ptr unsafe.Pointer) (int, error) {
		if len(src) < 1 {
			return 0, truncated("pointer", 1, 0)
		}
		switch src[0] {
		case 0:
			return 1, nil
		case 1:
		default:
			return 0, fmt.Errorf("%w: pointer flag %#x", ErrCorrupt, src[0])
		}
		q := reflect.New(et).UnsafePointer()
		n, err := ep.dec(src[1:], q)
		if err != nil {
			return 0, err
		}
		*(*unsafe.Pointer)(ptr) = q
		return n + 1, nil
	}
	return nil
}

type fieldPlan struct {
	off  uintptr
	name string
	p    *plan
}

func (c *compiler) structPlan(p *plan, t reflect.Type, path string) error {
	var fields []fieldPlan
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Tag.Get("weir") == "-" {
			continue
		}
		fpath := path + "." + f.Name
		if !f.IsExported() {
			return fmt.Errorf("%s is unexported: export it, tag it `weir:\"-\"` to skip it, or give %v binary methods", fpath, t)
		}
		fp, err := c.compile(f.Type, fpath)
		if err != nil {
			return err
		}
		p.opaque = p.opaque || fp.opaque
		fields = append(fields, fieldPlan{off: f.Offset, name: f.Name, p: fp})
	}
	if len(fields) == 0 {
		p.enc, p.dec = emptyPlan()
		return nil
	}
	p.enc = func(dst []byte, ptr unsafe.Pointer) []byte {
		for i := range fields {
			f := &fields[i]
			dst = f.p.enc(dst, unsafe.Add(ptr, f.off))
		}
		return dst
	}
	p.dec = func(src []byte, ptr unsafe.Pointer) (int, error) {
		n := 0
		for i := range fields {
			f := &fields[i]
			m, err := f.p.dec(src[n:], unsafe.Add(ptr, f.off))
			if err != nil {
				return 0, fmt.Errorf("field %s: %w", f.name, err)
			}
			n += m
		}
		return n, nil
	}
	return nil
}
