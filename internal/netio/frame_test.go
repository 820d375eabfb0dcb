package netio

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func seedFrames() []Frame {
	return []Frame{
		{Channel: 7, Kind: KindData, Count: 2, Data: []byte{1, 2, 3}},
		{Channel: 0, Kind: KindData, Count: 0, Data: []byte{}},
		{Channel: 1, Kind: KindWatermark, Watermark: -42},
		{Channel: 2, Kind: KindBarrier, Barrier: Barrier{ID: 9, Timestamp: 1e18, Savepoint: true, Target: "s3://bucket/savepoints/savepoint-a1b2c3-00ff"}},
		{Channel: 2, Kind: KindBarrier, Barrier: Barrier{ID: 10, Timestamp: 1e18, Savepoint: true, Stop: true, Drain: true, Target: "/savepoints/savepoint-a1b2c3-00fe"}},
		{Channel: 2, Kind: KindBarrier, Barrier: Barrier{ID: 11, Timestamp: 1e18, Savepoint: true, Native: true, Target: "/savepoints/savepoint-a1b2c3-00fd"}},
		{Channel: 3, Kind: KindIdle},
		{Channel: 3, Kind: KindActive},
		{Channel: 4, Kind: KindEndOfData},
		{Channel: 5, Kind: KindEnd},
		{Channel: 1<<32 - 1, Kind: KindCredit, Credit: 16},
		{Channel: 6, Kind: KindLimit, Limit: 1500},
		{Channel: 6, Kind: KindLimit},
	}
}

func TestFrameRoundTrip(t *testing.T) {
	var all []byte
	for _, f := range seedFrames() {
		all = AppendFrame(all, &f)
	}
	for _, want := range seedFrames() {
		got, n, err := DecodeFrame(all)
		if err != nil {
			t.Fatalf("decode %v: %v", want.Kind, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		all = all[n:]
	}
	if len(all) != 0 {
		t.Fatalf("%d bytes left", len(all))
	}
}

func TestFrameCorruption(t *testing.T) {
	good := AppendFrame(nil, &Frame{Channel: 3, Kind: KindBarrier, Barrier: Barrier{ID: 1}})
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x10
		if _, _, err := DecodeFrame(bad); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
			t.Errorf("flipped byte %d: err = %v, want corrupt or truncated", i, err)
		}
	}
	for n := range len(good) {
		if _, _, err := DecodeFrame(good[:n]); !errors.Is(err, ErrTruncated) {
			t.Errorf("first %d bytes: err = %v, want ErrTruncated", n, err)
		}
	}
	// A checkpoint's barrier asking for a savepoint's format.
	native := AppendFrame(nil, &Frame{Kind: KindBarrier, Barrier: Barrier{ID: 3, Native: true}})
	if _, _, err := DecodeFrame(native); !errors.Is(err, ErrCorrupt) {
		t.Errorf("native format without a savepoint: err = %v", err)
	}
	// A data frame claiming more records than bytes.
	lying := AppendFrame(nil, &Frame{Kind: KindData, Count: 5, Data: []byte{1}})
	if _, _, err := DecodeFrame(lying); !errors.Is(err, ErrCorrupt) {
		t.Errorf("count beyond data: err = %v", err)
	}
}

// FuzzDecodeFrame checks that decoding never panics, that what decodes
// re-encodes to the same frame, and that the stream reader agrees with
// DecodeFrame.
func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range seedFrames() {
		enc := AppendFrame(nil, &fr)
		f.Add(enc)
		bad := bytes.Clone(enc)
		bad[len(bad)-1] ^= 1
		f.Add(bad)
		f.Add(enc[:len(enc)-1])
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, src []byte) {
		fr, n, err := DecodeFrame(src)
		var hdr [headerSize]byte
		rf, rerr := readFrame(bytes.NewReader(src), &hdr, DefaultMaxFrameSize)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("DecodeFrame err %v, readFrame err %v", err, rerr)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if n > len(src) {
			t.Fatalf("consumed %d of %d bytes", n, len(src))
		}
		if !reflect.DeepEqual(fr, rf) {
			t.Fatalf("DecodeFrame %+v, readFrame %+v", fr, rf)
		}
		again, _, err := DecodeFrame(AppendFrame(nil, &fr))
		if err != nil || !reflect.DeepEqual(again, fr) {
			t.Fatalf("re-encoded %+v decodes to %+v, %v", fr, again, err)
		}
	})
}
