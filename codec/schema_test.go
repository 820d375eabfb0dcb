package codec

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

type itemV1 struct {
	X int
	Y string
}

type orderV1 struct {
	A     int64
	B     string
	Items []itemV1
	Ptr   *itemV1
	Arr   [2]itemV1
	ByKey map[string]itemV1
	When  time.Time
}

type itemV2 struct {
	Y string
	Z bool
	W []int32
}

// orderV2 reorders orderV1's fields, drops B, adds D and E, and its items
// lose X and gain Z and W.
type orderV2 struct {
	ByKey map[string]itemV2
	Items []itemV2
	D     map[string]int
	A     int64
	E     *itemV2
	Arr   [2]itemV2
	Ptr   *itemV2
	When  time.Time
}

func evolve[Old, New any](t *testing.T, v Old) (New, error) {
	t.Helper()
	oc, nc := MustFor[Old](), MustFor[New]()
	tc, err := Evolve(nc, Schema(oc))
	if err != nil {
		var zero New
		return zero, err
	}
	src := oc.Append(nil, v)
	if tc == nil {
		got, err := decodeAll(nc, src)
		return got, err
	}
	b, n, err := tc(nil, src)
	if err != nil {
		t.Fatalf("transcoding: %v", err)
	}
	if n != len(src) {
		t.Fatalf("transcoding took %d of %d bytes", n, len(src))
	}
	return decodeAll(nc, b)
}

func decodeAll[T any](c Codec[T], b []byte) (T, error) {
	v, n, err := c.Decode(b)
	if err == nil && n != len(b) {
		err = errors.New("trailing bytes")
	}
	return v, err
}

// TestEvolveStruct: fields matched by name, at every depth: added ones
// zero, removed ones dropped, reordered ones in place.
func TestEvolveStruct(t *testing.T) {
	when := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v := orderV1{
		A: -42, B: "dropped",
		Items: []itemV1{{1, "a"}, {2, "b"}},
		Ptr:   &itemV1{3, "p"},
		Arr:   [2]itemV1{{4, "x"}, {5, "y"}},
		ByKey: map[string]itemV1{"k": {6, "m"}},
		When:  when,
	}
	got, err := evolve[orderV1, orderV2](t, v)
	if err != nil {
		t.Fatal(err)
	}
	want := orderV2{
		ByKey: map[string]itemV2{"k": {Y: "m"}},
		Items: []itemV2{{Y: "a"}, {Y: "b"}},
		A:     -42,
		Arr:   [2]itemV2{{Y: "x"}, {Y: "y"}},
		Ptr:   &itemV2{Y: "p"},
		When:  when,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// Nil slices, maps and pointers stay nil.
	got, err = evolve[orderV1, orderV2](t, orderV1{A: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, orderV2{A: 1}) {
		t.Errorf("zero: got %+v", got)
	}
}

// TestEvolveSame: the same layout needs no transcoder, whatever the
// types are called; unknown layouts are taken as they are.
func TestEvolveSame(t *testing.T) {
	type renamed struct {
		X int
		Y string
	}
	if tc, err := Evolve(MustFor[renamed](), Schema(MustFor[itemV1]())); tc != nil || err != nil {
		t.Errorf("renamed type: %v, %v", tc != nil, err)
	}
	if tc, err := Evolve(Int64(), Schema(MustFor[int64]())); tc != nil || err != nil {
		t.Errorf("int64: %v, %v", tc != nil, err)
	}
	if Schema[itemV1](PairCodecForTest{}) != nil {
		t.Error("a user codec has a schema")
	}
	type node struct{ Next *node }
	if Schema(MustFor[node]()) != nil {
		t.Error("a recursive type has a schema")
	}
	if tc, err := Evolve(MustFor[itemV1](), nil); tc != nil || err != nil {
		t.Errorf("no old schema: %v, %v", tc != nil, err)
	}
}

// PairCodecForTest is a codec this package does not know the layout of.
type PairCodecForTest struct{}

func (PairCodecForTest) Append(dst []byte, v itemV1) []byte { return dst }
func (PairCodecForTest) Decode([]byte) (itemV1, int, error) { return itemV1{}, 0, nil }

// TestEvolveIncompatible: a change of type fails, naming the field.
func TestEvolveIncompatible(t *testing.T) {
	type a1 struct {
		N    int64
		Tags []itemV1
		M    map[string]int
		Arr  [2]int
	}
	for _, tc := range []struct {
		name string
		err  error
		path string
	}{
		{"field type", func() error {
			type a2 struct{ N string }
			_, err := Evolve(MustFor[a2](), Schema(MustFor[a1]()))
			return err
		}(), ".N"},
		{"nested field type", func() error {
			type it struct{ Y int }
			type a2 struct{ Tags []it }
			_, err := Evolve(MustFor[a2](), Schema(MustFor[a1]()))
			return err
		}(), ".Tags[].Y"},
		{"widened int", func() error {
			type a2 struct{ N int32 }
			_, err := Evolve(MustFor[a2](), Schema(MustFor[a1]()))
			return err
		}(), ".N"},
		{"map key type", func() error {
			type a2 struct{ M map[int]int }
			_, err := Evolve(MustFor[a2](), Schema(MustFor[a1]()))
			return err
		}(), ".M"},
		{"array length", func() error {
			type a2 struct{ Arr [3]int }
			_, err := Evolve(MustFor[a2](), Schema(MustFor[a1]()))
			return err
		}(), ".Arr"},
		{"the value", func() error {
			_, err := Evolve(String(), Schema(MustFor[a1]()))
			return err
		}(), ""},
	} {
		var ie *IncompatibleError
		if !errors.As(tc.err, &ie) {
			t.Errorf("%s: %v, want an IncompatibleError", tc.name, tc.err)
			continue
		}
		if ie.Path != tc.path {
			t.Errorf("%s: path %q, want %q (%v)", tc.name, ie.Path, tc.path, ie)
		}
	}
}

// TestEvolveCorrupt: a corrupt schema or truncated value is an error,
// never a panic.
func TestEvolveCorrupt(t *testing.T) {
	old := Schema(MustFor[orderV1]())
	for i := range old {
		for _, b := range [][]byte{old[:i], append(append([]byte{}, old[:i]...), 0xff)} {
			if tc, err := Evolve(MustFor[orderV2](), b); err == nil && tc != nil && i > 0 {
				// A prefix that happens to parse must still transcode safely.
				_, _, _ = tc(nil, []byte{1, 2, 3})
			}
		}
	}
	tc, err := Evolve(MustFor[orderV2](), old)
	if err != nil || tc == nil {
		t.Fatal(tc != nil, err)
	}
	src := MustFor[orderV1]().Append(nil, orderV1{A: 7, B: "b", Items: []itemV1{{1, "a"}}, ByKey: map[string]itemV1{"k": {}}})
	for i := range src {
		if _, _, err := tc(nil, src[:i]); err == nil {
			t.Errorf("a value truncated to %d of %d bytes transcoded", i, len(src))
		}
	}
}
