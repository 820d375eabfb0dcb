package state

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Staged placeholders: the restored entries of a state not registered
// yet, in a backend created WithPebble, wait as rows of the store rather
// than in memory, so that restoring state far larger than the backend's
// memory (a savepoint, a rescale, a checkpoint of the heap backend) holds
// about one key group's entries at a time, not all of them.
//
// A placeholder's segments (rawSegment) are rows keyed
//
//	stagePrefix | placeholder id (2 bytes) | key group index (2 bytes) | sequence (4 bytes)
//
// all big-endian, so the segments of one key group are one contiguous key
// range, in the order they were added. A row's value is the segment's
// operation (one byte), its entry count (uvarint) and its entries, in at
// most stageChunk bytes: a longer segment is split at entry boundaries.
// The prefix sorts after every key group (whose rows start below 0x80)
// and before 0xff, so an adopted native snapshot's range delete of the
// key groups after its range clears the placeholders of the checkpoint
// it was taken at. Registration reads the segments back in order, applies
// them to the state, and deletes them by range; a snapshot taken before
// it reads them from a Pebble snapshot.

// stagePrefix starts the key of a staged segment.
const stagePrefix = 0xfe

// stageChunk is the most entry bytes of one staged row, unless one entry
// is longer.
const stageChunk = 1 << 20

// rawStage is where a placeholder's segments are staged.
type rawStage struct {
	// store returns the backend's store (an adopted native snapshot
	// replaces it, before any placeholder exists).
	store func() *lsm
	id    uint16
	// seq numbers the rows staged, in order.
	seq uint32
	// rows counts the segments staged (rows of a split one count once
	// each), merging says one of them was not a full snapshot's puts.
	rows    int
	merging bool
}

// stageKey returns the key of the staged row seq of key group kgIdx.
func stageKey(dst []byte, id uint16, kgIdx int, seq uint32) []byte {
	dst = append(dst, stagePrefix)
	dst = binary.BigEndian.AppendUint16(dst, id)
	dst = binary.BigEndian.AppendUint16(dst, uint16(kgIdx))
	return binary.BigEndian.AppendUint32(dst, seq)
}

// add stages seg in key group kgIdx.
func (s *rawStage) add(kgIdx int, seg rawSegment) error {
	l := s.store()
	if err := l.failed(); err != nil {
		return err
	}
	if seg.op != opPut {
		s.merging = true
	}
	w := l.writer("staging restored entries")
	defer w.Close()
	var key, val []byte
	put := func(n int, data []byte) error {
		if s.seq == ^uint32(0) {
			return fmt.Errorf("more than %d restored segments staged for one state", s.seq)
		}
		key = stageKey(key[:0], s.id, kgIdx, s.seq)
		s.seq++
		val = append(append(val[:0], seg.op), binary.AppendUvarint(nil, uint64(n))...)
		val = append(val, data...)
		s.rows++
		return w.Set(key, val)
	}
	if len(seg.data) <= stageChunk {
		if err := put(seg.n, seg.data); err != nil {
			return err
		}
		return w.Commit()
	}
	// Split at entry boundaries.
	d := &decoder{b: seg.data}
	start, n := 0, 0
	for i := range seg.n {
		before := len(seg.data) - len(d.b)
		d.bytes()
		d.bytes()
		d.bytes()
		if d.err != nil {
			return fmt.Errorf("entry %d of %d: %w", i, seg.n, d.err)
		}
		if end := len(seg.data) - len(d.b); end-start > stageChunk && n > 0 {
			if err := put(n, seg.data[start:before]); err != nil {
				return err
			}
			start, n = before, 0
		}
		n++
	}
	if len(d.b) != 0 {
		return corrupt("%d bytes after %d entries", len(d.b), seg.n)
	}
	if err := put(n, seg.data[start:]); err != nil {
		return err
	}
	return w.Commit()
}

// clear drops the segments of key group kgIdx staged so far.
func (s *rawStage) clear(kgIdx int) error {
	s.merging = true
	return s.store().tryDeleteRows(stageKey(nil, s.id, kgIdx, 0), stageKey(nil, s.id, kgIdx+1, 0))
}

// drop deletes every staged segment.
func (s *rawStage) drop() error {
	lo := append([]byte{stagePrefix}, binary.BigEndian.AppendUint16(nil, s.id)...)
	return s.store().tryDeleteRows(lo, prefixEnd(lo))
}

// each calls fn with the segments of key group kgIdx staged in r (the
// store or a snapshot of it), in order. The segments' bytes are valid
// until fn returns.
func (s *rawStage) each(r pebbleReader, kgIdx int, fn func(rawSegment) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: stageKey(nil, s.id, kgIdx, 0), UpperBound: stageKey(nil, s.id, kgIdx+1, 0)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		n, k := binary.Uvarint(v[min(1, len(v)):])
		if len(v) < 2 || k <= 0 || n > uint64(len(v)) {
			_ = it.Close()
			return corrupt("staged segment of %d bytes", len(v))
		}
		if err := fn(rawSegment{op: v[0], n: int(n), data: v[1+k:]}); err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

// segments returns copies of the segments of key group kgIdx staged in r.
func (s *rawStage) segments(r pebbleReader, kgIdx int) ([]rawSegment, error) {
	var segs []rawSegment
	err := s.each(r, kgIdx, func(seg rawSegment) error {
		seg.data = append([]byte(nil), seg.data...)
		segs = append(segs, seg)
		return nil
	})
	return segs, err
}

// pebbleReader is a Pebble database or snapshot.
type pebbleReader interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}

// storedSegments reads the segments of a placeholder whose entries are
// in the store, from a snapshot of it: an adopted native snapshot's rows
// (as a full snapshot's segment first), then the staged segments.
type storedSegments struct {
	l     *lsm
	snap  *pebble.Snapshot
	stage *rawStage // nil: none staged
	rows  *lsmView  // nil: no adopted rows
}

func (s *storedSegments) read(kgIdx int) ([]rawSegment, error) {
	var segs []rawSegment
	if s.rows != nil {
		if n := s.rows.groupLen(kgIdx); n > 0 {
			segs = append(segs, rawSegment{n: n, data: append([]byte(nil), s.rows.buf...)})
		}
		if s.rows.err != nil {
			return nil, s.rows.err
		}
	}
	if s.stage != nil {
		staged, err := s.stage.segments(s.snap, kgIdx)
		if err != nil {
			return nil, err
		}
		segs = append(segs, staged...)
	}
	return segs, nil
}
