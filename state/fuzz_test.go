package state

import (
	"bytes"
	"testing"
)

// FuzzRestore feeds arbitrary content to Restore inside valid framing (the
// checksums are computed over the fuzzed bytes), so that the decoders past
// the checksum see malformed input. Restore must return an error or load
// something, and never panic.
func FuzzRestore(f *testing.F) {
	// Seeds: a real header and key group block.
	b := newBackend(f)
	h := registerAll(f, b)
	for i := range 20 {
		b.SetCurrentKey(modelKey(i))
		h.value.Update(int64(i))
		h.list.Add("x")
		h.mp.Put("k", i)
		h.tim.Register(window{}, int64(i))
	}
	snap := b.Snapshot(3)
	hdr, blocks := snapshotParts(snap)
	snap.Release()
	for kg, blk := range blocks {
		if len(blk) > 0 {
			f.Add(hdr, kg, blk)
		}
	}
	f.Add([]byte{}, 0, []byte{})
	f.Fuzz(func(t *testing.T, hdr []byte, kg int, block []byte) {
		var buf bytes.Buffer
		bw := newBlobWriter(&buf)
		bw.header(blobKeyed, hdr)
		bw.block(kg, block)
		bw.end()
		for _, registerFirst := range []bool{false, true} {
			b, err := NewKeyedBackend[string](nil, 128, KeyGroupRange{0, 127})
			if err != nil {
				t.Fatal(err)
			}
			if registerFirst {
				registerAll(t, b)
			}
			if err := b.Restore(bytes.NewReader(buf.Bytes())); err != nil {
				continue
			}
			if !registerFirst {
				tryRegisterAll(b)
			}
		}
	})
}

// snapshotParts returns the header payload and per key group block
// payloads that WriteTo would write.
func snapshotParts(s *KeyedSnapshot) ([]byte, [][]byte) {
	var buf bytes.Buffer
	s.WriteTo(&buf)
	br := newBlobReader(&buf)
	hdr, _ := br.header(blobKeyed)
	var blocks [][]byte
	for {
		_, p, ok, _ := br.next()
		if !ok {
			return hdr, blocks
		}
		blocks = append(blocks, p)
	}
}

// tryRegisterAll registers the test states, ignoring errors.
func tryRegisterAll(b *KeyedBackend[string]) {
	Value(b, ValueDescriptor[int64]{Name: "value"})
	List(b, ListDescriptor[string]{Name: "list"})
	Map(b, MapDescriptor[string, int]{Name: "map"})
	Reducing(b, ReducingDescriptor[int]{Name: "sum", Reduce: func(a, v int) int { return a + v }})
	Aggregating(b, AggregatingDescriptor[int64, *avgAcc, float64]{Name: "avg", Function: avg{}})
	ValueNS[string, window, string](b, nil, ValueDescriptor[string]{Name: "vns"})
	ListNS[string, window, int](b, nil, ListDescriptor[int]{Name: "lns"})
	NewTimers[string, window](b, "timers", nil)
}

// FuzzOperatorRestore is FuzzRestore for operator snapshots.
func FuzzOperatorRestore(f *testing.F) {
	ob := NewOperatorBackend()
	must(OperatorList(ob, ListDescriptor[offset]{Name: "offsets"}, SplitDistribute)).AddAll([]offset{{1, 2}, {3, 4}})
	must(OperatorList(ob, ListDescriptor[string]{Name: "seen"}, Union)).Add("a")
	var buf bytes.Buffer
	ob.Snapshot(1).WriteTo(&buf)
	br := newBlobReader(&buf)
	hdr, _ := br.header(blobOperator)
	_, b0, _, _ := br.next()
	_, b1, _, _ := br.next()
	f.Add(hdr, b0, b1)
	f.Fuzz(func(t *testing.T, hdr, b0, b1 []byte) {
		var buf bytes.Buffer
		bw := newBlobWriter(&buf)
		bw.header(blobOperator, hdr)
		bw.block(0, b0)
		bw.block(1, b1)
		bw.end()
		ob := NewOperatorBackend()
		if err := ob.Restore(2, 1, bytes.NewReader(buf.Bytes())); err != nil {
			return
		}
		OperatorList(ob, ListDescriptor[offset]{Name: "offsets"}, SplitDistribute)
		OperatorList(ob, ListDescriptor[string]{Name: "seen"}, Union)
	})
}
