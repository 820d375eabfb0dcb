package clustercli

import (
	"bytes"
	"maps"
	"testing"

	"github.com/weirstream/weir/internal/ops"
	"github.com/weirstream/weir/state"
)

// TestDecodeSplits: a source's state decodes to its split positions;
// other operator state, and bytes that are not a snapshot, do not.
func TestDecodeSplits(t *testing.T) {
	want := map[string]ops.SplitPosition{"t-0": {Offset: 7}, "t-1": {Offset: 700, Ended: true}}
	b, err := ops.EncodeSourceState(3, want)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := ops.DecodeSourceState(b); !ok || !maps.Equal(got, want) {
		t.Errorf("DecodeSourceState: %v, %v; want %v", got, ok, want)
	}

	ob := state.NewOperatorBackend()
	l, err := state.OperatorList(ob, state.ListDescriptor[string]{Name: "other"}, state.Union)
	if err != nil {
		t.Fatal(err)
	}
	l.Add("x")
	var other bytes.Buffer
	if _, err := ob.Snapshot(3).WriteTo(&other); err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(b)
	flipped[len(flipped)/2] ^= 1
	for name, b := range map[string][]byte{
		"another operator's state": other.Bytes(),
		"JSON":                     []byte(`{"t-0":{"offset":7}}`),
		"a flipped bit":            flipped,
		"truncated":                b[:len(b)-1],
	} {
		if got, ok := ops.DecodeSourceState(b); ok {
			t.Errorf("DecodeSourceState(%s) = %v, want not a source's", name, got)
		}
	}
}
