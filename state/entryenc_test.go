package state

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/weirstream/weir/codec"
)

// slowPrefixed is the reference: codec.ReserveLength, the codec's
// Append, codec.FinishLength.
func slowPrefixed[T any](c codec.Codec[T], dst []byte, v T) []byte {
	dst, m := codec.ReserveLength(dst)
	return codec.FinishLength(c.Append(dst, v), m)
}

// TestPrefixedAppender checks that the fast entry encoders write the same
// bytes as the generic path, for lengths on both sides of the one-byte
// length prefix.
func TestPrefixedAppender(t *testing.T) {
	ints := []int64{0, 1, -1, 63, 64, -64, -65, 1 << 20, math.MaxInt64, math.MinInt64}
	fi := prefixedAppender(codec.Int64())
	for _, v := range ints {
		if got, want := fi([]byte("x"), v), slowPrefixed(codec.Int64(), []byte("x"), v); !bytes.Equal(got, want) {
			t.Errorf("int64 %d: got %x, want %x", v, got, want)
		}
	}
	fs := prefixedAppender(codec.String())
	for _, n := range []int{0, 1, 125, 126, 127, 128, 129, 16381, 16382, 16383, 16384, 70000} {
		v := strings.Repeat("k", n)
		if got, want := fs([]byte("x"), v), slowPrefixed(codec.String(), []byte("x"), v); !bytes.Equal(got, want) {
			t.Errorf("string of %d bytes: prefixes %x, want %x", n, got[:min(len(got), 6)], want[:min(len(want), 6)])
		}
	}
	// Any other codec goes through the generic path, with the same bytes.
	fl := prefixedAppender(codec.Slice(codec.Int64()))
	for _, n := range []int{0, 3, 200} {
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(i) * 1000
		}
		if got, want := fl(nil, v), slowPrefixed(codec.Slice(codec.Int64()), nil, v); !bytes.Equal(got, want) {
			t.Errorf("slice of %d: got %x, want %x", n, got, want)
		}
	}
	// A named type with codec.Int64's encoding takes the generic path.
	if got, want := prefixedAppender[testID](idCodec{})(nil, 300), slowPrefixed[testID](idCodec{}, nil, 300); !bytes.Equal(got, want) {
		t.Errorf("named int64: got %x, want %x", got, want)
	}
}

type testID int64

type idCodec struct{}

func (idCodec) Append(dst []byte, v testID) []byte { return codec.Int64().Append(dst, int64(v)) }
func (idCodec) Decode(src []byte) (testID, int, error) {
	v, n, err := codec.Int64().Decode(src)
	return testID(v), n, err
}

// TestAppendInt64Entries: the one-loop encoding of an int64 → int64
// table's entries is appendEntry's, byte for byte, over keys and values
// of every varint length, and a state of that type takes it (a custom
// codec of int64 does not).
func TestAppendInt64Entries(t *testing.T) {
	b := must(NewKeyedBackend[int64](nil, 1, KeyGroupRange{0, 0}))
	v := must(Value(b, ValueDescriptor[int64]{Name: "sum"}))
	st := b.states[0].(*stateTable[int64, int64])
	if st.appendEntries == nil {
		t.Fatal("an int64 value state of int64 keys encodes entry by entry")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []int64{0, 1, -1, 63, 64, -64, -65, math.MaxInt64, math.MinInt64}
	for range 5000 {
		vals = append(vals, int64(rng.Uint64())>>rng.IntN(64))
	}
	for i, k := range vals {
		b.SetCurrentKey(k)
		v.Update(vals[len(vals)-1-i])
	}
	var fast, slow []byte
	n := 0
	shards, _ := st.table.capture()
	for _, s := range shards {
		fast = st.appendEntries(fast, &s.m)
		for mk, e := range s.m.all() {
			slow = st.appendEntry(slow, mk, e.v)
			n++
		}
	}
	distinct := map[int64]bool{}
	for _, k := range vals {
		distinct[k] = true
	}
	if n != len(distinct) {
		t.Fatalf("%d entries for %d keys", n, len(distinct))
	}
	if !bytes.Equal(fast, slow) {
		t.Fatalf("one-loop encoding differs from appendEntry's: %d against %d bytes", len(fast), len(slow))
	}
	// A table larger than appendInt64Entries lists the slots of first
	// (a shard that cannot split) takes its byte-by-byte path.
	big := newOmap[int64, int64](len(vals))
	for i, k := range vals {
		big.set(uint32(i)<<1|1, k, slot[int64]{v: vals[len(vals)-1-i]})
	}
	if len(big.es) <= maxIndexedSlots {
		t.Fatalf("a table of %d slots is not larger than %d", len(big.es), maxIndexedSlots)
	}
	fast, slow = st.appendEntries(nil, &big), nil
	for mk, e := range big.all() {
		slow = st.appendEntry(slow, mk, e.v)
	}
	if !bytes.Equal(fast, slow) {
		t.Fatalf("one-loop encoding of a large table differs from appendEntry's: %d against %d bytes", len(fast), len(slow))
	}
	must(Value(b, ValueDescriptor[int64]{Name: "custom", Codec: fixed64{}}))
	if b.states[1].(*stateTable[int64, int64]).appendEntries != nil {
		t.Fatal("a value state with its own codec takes the int64 encoding")
	}
}

// fixed64 encodes an int64 in eight bytes.
type fixed64 struct{}

func (fixed64) Append(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}
func (fixed64) Decode(src []byte) (int64, int, error) {
	if len(src) < 8 {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return int64(binary.BigEndian.Uint64(src)), 8, nil
}

// BenchmarkAppendInt64Entries measures the one-loop encoding of a million
// int64 → int64 entries spread over shards as a snapshot writes them.
func BenchmarkAppendInt64Entries(b *testing.B) {
	be := must(NewKeyedBackend[int64](nil, 128, KeyGroupRange{0, 127}))
	v := must(Value(be, ValueDescriptor[int64]{Name: "sum"}))
	for k := range int64(1_000_000) {
		be.SetCurrentKey(k)
		v.Update(k * 37)
	}
	st := be.states[0].(*stateTable[int64, int64])
	shards, _ := st.table.capture()
	var buf []byte
	n := 0
	for b.Loop() {
		n = 0
		for _, s := range shards {
			buf = st.appendEntries(buf[:0], &s.m)
			n += len(buf)
		}
	}
	b.SetBytes(int64(n))
}
