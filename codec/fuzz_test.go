package codec

import (
	"math"
	"reflect"
	"testing"
)

// checkDecode decodes arbitrary input; whatever decodes must re-encode to
// something that decodes to the same value.
func checkDecode[T any](t *testing.T, c Codec[T], in []byte) {
	v, n, err := c.Decode(in)
	if err != nil {
		return
	}
	if n < 0 || n > len(in) {
		t.Fatalf("%T consumed %d of %d bytes", c, n, len(in))
	}
	enc := c.Append(nil, v)
	w, m, err := c.Decode(enc)
	if err != nil {
		t.Fatalf("%T: re-decoding %x: %v", c, enc, err)
	}
	if m != len(enc) {
		t.Fatalf("%T: re-decoding consumed %d of %d bytes", c, m, len(enc))
	}
	if !deepEqual(reflect.ValueOf(v), reflect.ValueOf(w)) {
		t.Fatalf("%T: %#v re-decoded as %#v", c, v, w)
	}
}

// deepEqual is reflect.DeepEqual, except that NaN equals NaN: floats
// decoded from arbitrary input may be NaN.
func deepEqual(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() || a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		return x == y || (math.IsNaN(x) && math.IsNaN(y))
	case reflect.Complex64, reflect.Complex128:
		x, y := a.Complex(), b.Complex()
		return deepEqual(reflect.ValueOf(real(x)), reflect.ValueOf(real(y))) &&
			deepEqual(reflect.ValueOf(imag(x)), reflect.ValueOf(imag(y)))
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return deepEqual(a.Elem(), b.Elem())
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			return false
		}
		fallthrough
	case reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := 0; i < a.Len(); i++ {
			if !deepEqual(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		it := a.MapRange()
		for it.Next() {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !deepEqual(it.Value(), bv) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if a.Type().Field(i).IsExported() && !deepEqual(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	if a.CanInterface() {
		return reflect.DeepEqual(a.Interface(), b.Interface())
	}
	return true
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{0x80})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add(String().Append(nil, "hello"))
	f.Add(Slice(String()).Append(nil, []string{"a", "bc"}))
	f.Add(Map(String(), Int64()).Append(nil, map[string]int64{"a": 1, "b": -2}))
	f.Add(MustFor[Small]().Append(nil, Small{Name: "x", Count: 1, Sum: -1, Shard: 3, Active: true}))
	f.Add(MustFor[Nested]().Append(nil, Nested{ID: "n", Tags: []string{"t"}, Parent: &Nested{}, Scores: map[string]float64{"s": 1}}))
	f.Add(MustFor[*List]().Append(nil, &List{1, &List{2, nil}}))
	small, nested, list := MustFor[Small](), MustFor[Nested](), MustFor[*List]()
	f.Fuzz(func(t *testing.T, in []byte) {
		checkDecode(t, String(), in)
		checkDecode(t, Bytes(), in)
		checkDecode(t, Int64(), in)
		checkDecode(t, Int(), in)
		checkDecode(t, Int32(), in)
		checkDecode(t, Uint64(), in)
		checkDecode(t, Uint32(), in)
		checkDecode(t, Float64(), in)
		checkDecode(t, Bool(), in)
		checkDecode(t, PairOf(String(), Bool()), in)
		checkDecode(t, Slice(Int32()), in)
		checkDecode(t, Map(String(), Int64()), in)
		checkDecode(t, small, in)
		checkDecode(t, nested, in)
		checkDecode(t, list, in)
	})
}
