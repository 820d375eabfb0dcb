package state

import (
	"bytes"
	"math"
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
