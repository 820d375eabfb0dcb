package runtime

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/weirstream/weir/codec"
)

// TestChannelStateRoundTrip encodes an input's channel state (the rest of
// a batch interrupted at its second record, a watermark, then what the
// barrier brought), decodes it in order, summarizes it, and refuses it
// truncated or with bytes left over.
func TestChannelStateRoundTrip(t *testing.T) {
	c, err := codec.For[int64]()
	if err != nil {
		t.Fatal(err)
	}
	up := &Vertex{UID: "up"}
	task := &Task{codecs: []BatchCodec{nil, NewBatchCodec(c)}, gate: &inputGate{
		edges: []*Edge{{From: up}, {From: up, Input: 1}}, froms: []int{0, 3}}}
	batch := []Rec[int64]{{V: 1, Ts: 10}, {V: 2, Ts: 20}, {V: 3, Ts: 30}}
	att := newInflight([]message{{kind: msgData, data: []Rec[int64]{{V: 4, Ts: 40}, {V: 5, Ts: 50}}, n: 2}, {kind: msgIdle}})
	close(att.sealed)
	uc := &unalignedCheckpoint{chans: []*inputCapture{nil, {
		msgs: []message{{kind: msgData, data: batch, n: 3, from: 1}, {kind: msgWatermark, wm: 25}},
		att:  att,
	}}}
	b, err := task.encodeChannelState(uc)
	if err != nil {
		t.Fatal(err)
	}
	replay := make([][]message, 2)
	if err := task.decodeChannelState(b, 2, replay); err != nil {
		t.Fatal(err)
	}
	if len(replay[0]) != 0 || len(replay[1]) != 4 {
		t.Fatalf("replay %v", replay)
	}
	var got []int64
	for _, m := range replay[1] {
		switch m.kind {
		case msgData:
			for _, r := range m.data.([]Rec[int64]) {
				got = append(got, r.V, r.Ts)
			}
		case msgWatermark:
			got = append(got, -m.wm)
		case msgIdle:
			got = append(got, 0)
		}
	}
	if want := []int64{2, 20, 3, 30, -25, 4, 40, 5, 50, 0}; !slices.Equal(got, want) {
		t.Fatalf("replayed %v, want %v", got, want)
	}
	var origins []channelOrigin
	if err := walkChannelState(b, func(o channelOrigin, _ message, _ []byte) error {
		origins = append(origins, o)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, o := range origins {
		if o != (channelOrigin{index: 1, from: "up", input: 1, subtask: 3}) {
			t.Fatalf("channel origin %+v, want channel 1 from up[3] into input 1", o)
		}
	}
	sums, err := SummarizeChannelState(b)
	if err != nil || len(sums) != 1 || sums[0].Channel != 1 || sums[0].Records != 4 || sums[0].Watermarks != 1 {
		t.Fatalf("summary %+v, %v", sums, err)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(slices.Clone(b), 0)} {
		if err := task.decodeChannelState(bad, 2, make([][]message, 2)); !errors.Is(err, errChannelState) {
			t.Errorf("decoding %d of %d bytes: %v, want a corrupt channel state", len(bad), len(b), err)
		}
		if _, err := SummarizeChannelState(bad); !errors.Is(err, errChannelState) {
			t.Errorf("summarizing %d of %d bytes: %v, want a corrupt channel state", len(bad), len(b), err)
		}
	}
	if err := task.decodeChannelState(b, 1, make([][]message, 1)); !errors.Is(err, errChannelState) {
		t.Errorf("decoding for a gate of one channel: %v", err)
	}
	if empty, err := task.encodeChannelState(&unalignedCheckpoint{chans: []*inputCapture{nil, {}}}); empty != nil || err != nil {
		t.Errorf("nothing in flight encodes as %v, %v", empty, err)
	}
}

// TestChannelStateVersion1 reads a channel state file of version 1, which
// does not say where its channels come from: at the parallelism it was
// written with it decodes as before.
func TestChannelStateVersion1(t *testing.T) {
	b := []byte{1, 1, 0, 1, byte(msgWatermark)}
	b = binary.AppendVarint(b, 42)
	task := &Task{}
	replay := make([][]message, 1)
	if err := task.decodeChannelState(b, 1, replay); err != nil {
		t.Fatal(err)
	}
	if len(replay[0]) != 1 || replay[0][0].kind != msgWatermark || replay[0][0].wm != 42 {
		t.Fatalf("replay %+v", replay)
	}
	var origins []channelOrigin
	_ = walkChannelState(b, func(o channelOrigin, _ message, _ []byte) error { origins = append(origins, o); return nil })
	if len(origins) != 1 || origins[0] != (channelOrigin{}) {
		t.Fatalf("origins %+v, want channel 0 of unknown origin", origins)
	}
	if err := walkChannelState([]byte{3, 0}, func(channelOrigin, message, []byte) error { return nil }); !errors.Is(err, errChannelState) {
		t.Fatalf("version 3: %v, want a corrupt channel state", err)
	}
}
