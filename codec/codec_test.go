package codec

import (
	"bytes"
	"errors"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// roundTrip encodes v after a prefix, decodes it back and checks the value,
// the consumed length, and that every truncation of the encoding fails
// cleanly.
func roundTrip[T any](t *testing.T, c Codec[T], v T) {
	t.Helper()
	prefix := []byte{0xAA, 0xBB}
	enc := c.Append(append([]byte(nil), prefix...), v)
	if !bytes.Equal(enc[:2], prefix) {
		t.Fatalf("Append clobbered the prefix: %x", enc[:2])
	}
	body := enc[2:]
	if len(body) == 0 {
		t.Fatalf("%#v encoded to no bytes", v)
	}
	got, n, err := c.Decode(append(append([]byte(nil), body...), 0xCC, 0xDD))
	if err != nil {
		t.Fatalf("Decode(%x) of %#v: %v", body, v, err)
	}
	if n != len(body) {
		t.Fatalf("Decode consumed %d bytes, want %d", n, len(body))
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("round trip of %#v gave %#v", v, got)
	}
	for i := 0; i < len(body); i++ {
		if _, _, err := c.Decode(body[:i]); err == nil {
			t.Fatalf("Decode of %d-byte truncation of %x succeeded", i, body)
		} else if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncation error %v wraps neither ErrTruncated nor ErrCorrupt", err)
		}
	}
}

func TestBuiltins(t *testing.T) {
	for _, s := range []string{"", "a", strings.Repeat("x", 200), "héllo\x00"} {
		roundTrip(t, String(), s)
	}
	for _, b := range [][]byte{nil, {}, {0}, bytes.Repeat([]byte{7}, 300)} {
		roundTrip(t, Bytes(), b)
	}
	for _, v := range []int64{0, 1, -1, 63, -64, 64, math.MaxInt64, math.MinInt64} {
		roundTrip(t, Int64(), v)
		roundTrip(t, Int(), int(v))
	}
	for _, v := range []int32{0, -1, math.MaxInt32, math.MinInt32} {
		roundTrip(t, Int32(), v)
	}
	for _, v := range []uint64{0, 127, 128, math.MaxUint64} {
		roundTrip(t, Uint64(), v)
	}
	for _, v := range []uint32{0, 1, math.MaxUint32} {
		roundTrip(t, Uint32(), v)
	}
	for _, v := range []float64{0, -1.5, math.Inf(1), math.SmallestNonzeroFloat64} {
		roundTrip(t, Float64(), v)
	}
	roundTrip(t, Bool(), true)
	roundTrip(t, Bool(), false)
	roundTrip(t, PairOf(String(), Int64()), Pair[string, int64]{"k", -9})
	roundTrip(t, Slice(String()), nil)
	roundTrip(t, Slice(String()), []string{})
	roundTrip(t, Slice(String()), []string{"a", "", "c"})
	roundTrip(t, Map(String(), Slice(Int())), nil)
	roundTrip(t, Map(String(), Slice(Int())), map[string][]int{})
	roundTrip(t, Map(String(), Slice(Int())), map[string][]int{"a": {1, 2}, "b": nil})
}

func TestCorruptBuiltins(t *testing.T) {
	cases := []struct {
		name string
		dec  func([]byte) error
		in   []byte
	}{
		{"bool 2", func(b []byte) error { _, _, err := Bool().Decode(b); return err }, []byte{2}},
		{"int32 overflow", func(b []byte) error { _, _, err := Int32().Decode(b); return err }, Int64().Append(nil, math.MaxInt32+1)},
		{"uint32 overflow", func(b []byte) error { _, _, err := Uint32().Decode(b); return err }, Uint64().Append(nil, math.MaxUint32+1)},
		{"varint overflow", func(b []byte) error { _, _, err := Uint64().Decode(b); return err }, bytes.Repeat([]byte{0xff}, 11)},
		{"huge slice", func(b []byte) error { _, _, err := Slice(Int()).Decode(b); return err }, Uint64().Append(nil, 1<<40)},
		{"huge map", func(b []byte) error { _, _, err := Map(Int(), Int()).Decode(b); return err }, []byte{3, 2, 2}},
		{"dup key", func(b []byte) error { _, _, err := Map(Int(), Int()).Decode(b); return err }, []byte{3, 2, 0, 2, 1}},
		{"long string", func(b []byte) error { _, _, err := String().Decode(b); return err }, []byte{5, 'a'}},
	}
	for _, tc := range cases {
		err := tc.dec(tc.in)
		if err == nil {
			t.Errorf("%s: decoded %x without error", tc.name, tc.in)
			continue
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: error %v wraps neither sentinel", tc.name, err)
		}
	}
}

type Small struct {
	Name   string
	Count  int64
	Sum    int64
	Shard  int32
	Active bool
}

type UserID string

type Nested struct {
	ID      UserID
	Tags    []string
	Scores  map[string]float64
	Parent  *Nested
	Window  [2]int64
	Hash    [4]byte
	Raw     []byte
	When    time.Time
	Addr    netip.Addr
	Small   Small
	Empty   struct{}
	Ratio   float32
	Z       complex128
	U8      uint8
	I16     int16
	Items   []Small
	Ptrs    []*Small
	Skipped chan int `weir:"-"`
	//lint:ignore U1000 the codec must skip an unexported field tagged weir:"-"
	internal int `weir:"-"`
}

type List struct {
	Val  int
	Next *List
}

type Tree []Tree

func TestFor(t *testing.T) {
	small, err := For[Small]()
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, small, Small{})
	roundTrip(t, small, Small{Name: "tenant-7", Count: -3, Sum: 1 << 40, Shard: -2, Active: true})

	nested, err := For[Nested]()
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, nested, Nested{})
	roundTrip(t, nested, Nested{
		ID:     "u1",
		Tags:   []string{"a", "b"},
		Scores: map[string]float64{"x": 1.5},
		Parent: &Nested{ID: "root", Raw: []byte{}},
		Window: [2]int64{-5, 5},
		Hash:   [4]byte{1, 2, 3, 4},
		Raw:    []byte("raw"),
		When:   time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC),
		Addr:   netip.MustParseAddr("10.0.0.1"),
		Small:  Small{Name: "s"},
		Ratio:  0.25,
		Z:      complex(1, -2),
		U8:     255,
		I16:    -300,
		Items:  []Small{{Name: "i"}, {}},
		Ptrs:   []*Small{nil, {Count: 1}},
	})

	list, err := For[*List]()
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, list, nil)
	roundTrip(t, list, &List{1, &List{2, &List{3, nil}}})

	tree, err := For[Tree]()
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, tree, Tree{{}, {{}, nil}})

	uid, err := For[UserID]()
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, uid, "abc")

	tm, err := For[time.Time]()
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, tm, time.Unix(1700000000, 5).UTC())

	m, err := For[map[int32][]string]()
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, m, map[int32][]string{1: {"a"}, -1: nil})
}

func TestForBuiltinsAreShared(t *testing.T) {
	c, err := For[string]()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(stringCodec); !ok {
		t.Fatalf("For[string] = %T, want the built-in", c)
	}
}

func TestForUnsupported(t *testing.T) {
	type withChan struct {
		A int
		C chan int
	}
	type inner struct{ F func() }
	type outer struct {
		Items []inner
	}
	type hidden struct {
		Public int
		//lint:ignore U1000 the codec must refuse an untagged unexported field
		private int
	}
	tests := []struct {
		err  error
		want []string
	}{
		{errOf[withChan](), []string{"withChan", ".C", "chan int"}},
		{errOf[outer](), []string{"outer", ".Items[].F", "func()"}},
		{errOf[hidden](), []string{"hidden", ".private", "unexported"}},
		{errOf[any](), []string{"interface"}},
		{errOf[map[string]any](), []string{"[value]", "interface"}},
	}
	for _, tc := range tests {
		if tc.err == nil {
			t.Errorf("no error, want one mentioning %q", tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(tc.err.Error(), w) {
				t.Errorf("error %q does not mention %q", tc.err, w)
			}
		}
	}
}

func errOf[T any]() error {
	_, err := For[T]()
	return err
}

func TestCorruptCompiled(t *testing.T) {
	nested := MustFor[Nested]()
	enc := nested.Append(nil, Nested{Tags: []string{"a"}, Parent: &Nested{}})
	for i := range enc {
		for _, b := range []byte{0x00, 0x7f, 0x80, 0xff} {
			in := append([]byte(nil), enc...)
			in[i] = b
			// Must not panic; an error, or a value that re-encodes, are fine.
			v, n, err := nested.Decode(in)
			if err == nil && n > len(in) {
				t.Fatalf("consumed %d of %d bytes", n, len(in))
			}
			if err == nil {
				_ = nested.Append(nil, v)
			}
		}
	}
}

func TestReserveLength(t *testing.T) {
	for _, l := range []int{0, 1, 127, 128, 300, 20000} {
		dst, mark := ReserveLength([]byte{9})
		dst = append(dst, bytes.Repeat([]byte{5}, l)...)
		dst = FinishLength(dst, mark)
		u, m, err := uvarint(dst[1:])
		if err != nil || int(u) != l || len(dst) != 1+m+l {
			t.Fatalf("length %d: prefix %d (%d bytes), total %d, err %v", l, u, m, len(dst), err)
		}
		if dst[0] != 9 {
			t.Fatal("clobbered prefix")
		}
	}
}

type Deep struct {
	Name string
	Kids map[string]*Deep
	List []Deep
}

// TestDeepNesting encodes values nested deeply enough to grow the
// goroutine stack in the middle of encoding and decoding, which moves the
// stack-allocated values the compiled plans are reading and writing.
func TestDeepNesting(t *testing.T) {
	c := MustFor[Deep]()
	var d Deep
	for i := range 300 {
		prev := d
		d = Deep{Name: strings.Repeat("n", i%7), Kids: map[string]*Deep{"k": &prev, "e": nil}, List: []Deep{{Name: "x"}}}
	}
	done := make(chan struct{})
	var (
		got Deep
		err error
		enc []byte
	)
	go func() { // a fresh goroutine starts with a small stack
		defer close(done)
		enc = c.Append(nil, d)
		got, _, err = c.Decode(enc)
	}()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatal("deep value changed in a round trip")
	}
}
