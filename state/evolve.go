package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weirstream/weir/codec"
)

// State schema evolution. A snapshot records, per state, the codec schema
// of its values (codec.Schema): the values of a ValueState, the elements
// of a ListState, the values of a MapState and the accumulators of a
// ReducingState or AggregatingState, and the keys of a MapState. When the
// state is registered again by code whose value type has gained, lost or
// reordered struct fields, its restored entries are rewritten into the
// current layout (codec.Evolve) before they are loaded; a change that
// cannot be bridged fails the registration with an error that names the
// state and the field. Keys, namespaces and map keys must not change.

// ErrIncompatibleSchema is wrapped by the error of a registration whose
// value type cannot read the values its snapshot holds: a field changed
// type (a *codec.IncompatibleError says which), or map keys did. Restarting
// cannot cure it, so it is permanent (it has the method Permanent that
// connector.IsPermanent looks for): the job fails instead of restarting.
var ErrIncompatibleSchema error = incompatibleSchema{}

type incompatibleSchema struct{}

func (incompatibleSchema) Error() string   { return "its schema changed incompatibly" }
func (incompatibleSchema) Permanent() bool { return true }

// stateSchema is the layout of a state's values as a snapshot records it;
// nil where it is unknown (a codec of the user's own, or a snapshot taken
// before schemas were recorded), which restores the bytes as they are.
type stateSchema struct {
	value []byte
	key   []byte // map keys
}

func (s stateSchema) empty() bool { return s.value == nil && s.key == nil }

// layout is how a registered state encodes its values: their schema, and
// how to read values written under another.
type layout struct {
	stateSchema
	evolve  func(old []byte) (codec.Transcoder, error)
	skipKey func([]byte) (int, error) // map states: an encoded map key's length
}

// innerLayout is implemented by codecs that wrap a value's codec (the
// time-to-live stamp): the layout is the wrapped codec's.
type innerLayout interface{ layout() layout }

// valueLayout returns the layout of values encoded by c.
func valueLayout[T any](c codec.Codec[T]) layout {
	if w, ok := c.(innerLayout); ok {
		return w.layout()
	}
	return layout{
		stateSchema: stateSchema{value: codec.Schema(c)},
		evolve:      func(old []byte) (codec.Transcoder, error) { return codec.Evolve(c, old) },
	}
}

// mapLayout returns the layout of a map state's keys and values.
func mapLayout[UK, UV any](kc codec.Codec[UK], vc codec.Codec[UV]) layout {
	l := valueLayout(vc)
	l.key = codec.Schema(kc)
	l.skipKey = func(b []byte) (int, error) {
		_, n, err := kc.Decode(b)
		return n, err
	}
	return l
}

// evolution rewrites a state's restored entries from an old layout into
// the current one.
type evolution struct {
	inf     stateInfo
	tc      codec.Transcoder
	skipKey func([]byte) (int, error)
}

// planEvolution returns how to rewrite entries of inf written under old
// into lay, or nil if they restore as they are.
func planEvolution(inf stateInfo, old stateSchema, lay layout) (*evolution, error) {
	if old.key != nil && lay.key != nil && !bytes.Equal(old.key, lay.key) {
		return nil, fmt.Errorf("%v: %w: the type of its map keys changed, and map keys cannot change (register a new state and copy the entries)", inf, ErrIncompatibleSchema)
	}
	if old.value == nil || lay.evolve == nil {
		return nil, nil
	}
	tc, err := lay.evolve(old.value)
	if ie := (*codec.IncompatibleError)(nil); errors.As(err, &ie) {
		return nil, fmt.Errorf("%v: %w: %w", inf, ErrIncompatibleSchema, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%v: %w", inf, err)
	}
	if tc == nil {
		return nil, nil
	}
	return &evolution{inf: inf, tc: tc, skipKey: lay.skipKey}, nil
}

// value rewrites one stored value, all of src: with a time to live, its
// stamp and then the value.
func (e *evolution) value(dst, src []byte) ([]byte, int, error) {
	n := 0
	if e.inf.ttl {
		_, m := binary.Varint(src)
		if m <= 0 {
			return dst, 0, corrupt("a value without its time to live's timestamp")
		}
		dst, n = append(dst, src[:m]...), m
	}
	dst, m, err := e.tc(dst, src[n:])
	return dst, n + m, err
}

// entryValue rewrites the value part of an entry as snapshots and the
// embedded store hold it: a value; a list's count and elements; a map's
// count and entries.
func (e *evolution) entryValue(dst, src []byte) ([]byte, error) {
	var n int
	var err error
	switch e.inf.kind {
	case kindList, kindMap:
		c, off := binary.Uvarint(src)
		if off <= 0 || c > uint64(len(src)) {
			return dst, corrupt("%v: bad element count", e.inf)
		}
		dst, n = append(dst, src[:off]...), off
		for i := uint64(0); i < c && err == nil; i++ {
			if e.inf.kind == kindMap {
				var k int
				if k, err = e.skipKey(src[n:]); err != nil {
					break
				}
				dst, n = append(dst, src[n:n+k]...), n+k
			}
			var m int
			dst, m, err = e.value(dst, src[n:])
			n += m
		}
	default:
		dst, n, err = e.value(dst, src)
	}
	if err == nil && n != len(src) {
		err = corrupt("%d bytes after the value", len(src)-n)
	}
	if err != nil {
		return dst, fmt.Errorf("%v: rewriting a value of the snapshot's schema: %w", e.inf, err)
	}
	return dst, nil
}

// segment rewrites the values of a segment's entries.
func (e *evolution) segment(seg rawSegment) (rawSegment, error) {
	out := make([]byte, 0, len(seg.data)+len(seg.data)/4)
	var val []byte
	err := eachEntry(seg.n, seg.data, func(key, ns, v []byte) error {
		var err error
		if val, err = e.entryValue(val[:0], v); err != nil {
			return err
		}
		out = appendBytes(appendBytes(appendBytes(out, key), ns), val)
		return nil
	})
	return rawSegment{n: seg.n, data: out, op: seg.op}, err
}
