package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/weirstream/weir/codec"
)

// Redistribution says how an operator list state is divided among the
// subtasks of a job restored with a different parallelism.
type Redistribution uint8

const (
	// SplitDistribute concatenates the lists of all old subtasks, in
	// subtask order, and splits the result into one contiguous part per new
	// subtask, the first parts one element longer when the division is
	// uneven (Flink's even-split redistribution). Suits work that can be
	// handed to any subtask, such as source splits and their offsets.
	SplitDistribute Redistribution = iota + 1
	// Union gives every new subtask the concatenation of all old subtasks'
	// lists (Flink's union redistribution).
	Union
)

func (m Redistribution) String() string {
	switch m {
	case SplitDistribute:
		return "split-distribute"
	case Union:
		return "union"
	}
	return fmt.Sprintf("redistribution(%d)", uint8(m))
}

// OperatorBackend holds the operator state of one subtask: named lists
// that are not scoped to a key (sources keep their offsets here). Like
// KeyedBackend, it belongs to its subtask's goroutine; only
// OperatorSnapshot.WriteTo runs elsewhere.
type OperatorBackend struct {
	states []opState
	byName map[string]int
}

// NewOperatorBackend returns an empty operator backend.
func NewOperatorBackend() *OperatorBackend {
	return &OperatorBackend{byName: make(map[string]int)}
}

// Has reports whether the backend holds a state of that name, registered
// or restored.
func (ob *OperatorBackend) Has(name string) bool {
	_, ok := ob.byName[name]
	return ok
}

type opInfo struct {
	name string
	mode Redistribution
}

type opState interface {
	info() opInfo
	// capture returns the state's elements, encoded on demand by the
	// serializing goroutine.
	capture() opView
}

type opView interface {
	appendElems(dst []byte) []byte
}

// OperatorList registers an operator list state redistributed by mode.
// Registering a name again with the same mode and element type returns
// another handle to the same list. Restored elements are decoded here.
func OperatorList[T any](ob *OperatorBackend, d ListDescriptor[T], mode Redistribution) (ListState[T], error) {
	inf := opInfo{d.Name, mode}
	if d.Name == "" {
		return nil, errors.New("state: an operator state needs a name")
	}
	if mode != SplitDistribute && mode != Union {
		return nil, fmt.Errorf("state: operator state %q: invalid %v", d.Name, mode)
	}
	c, err := orFor(d.Codec)
	if err != nil {
		return nil, fmt.Errorf("state: operator state %q: %w", d.Name, err)
	}
	i, ok := ob.byName[d.Name]
	if ok {
		switch s := ob.states[i].(type) {
		case *opList[T]:
			if s.inf != inf {
				return nil, fmt.Errorf("%w: operator state %q is %v, not %v", errRegistered, d.Name, s.inf.mode, mode)
			}
			return s, nil
		case *rawOpState:
			if s.inf != inf {
				return nil, fmt.Errorf("state: operator state %q was restored as %v, registered as %v", d.Name, s.inf.mode, mode)
			}
			l := &opList[T]{inf: inf, c: c}
			for j, e := range s.elems {
				v, err := decodeExactly(c, e, "element")
				if err != nil {
					return nil, fmt.Errorf("state: restoring operator state %q, element %d: %w", d.Name, j, err)
				}
				l.l = append(l.l, v)
			}
			ob.states[i] = l
			return l, nil
		default:
			return nil, fmt.Errorf("%w: operator state %q has another element type", errRegistered, d.Name)
		}
	}
	l := &opList[T]{inf: inf, c: c}
	ob.byName[d.Name] = len(ob.states)
	ob.states = append(ob.states, l)
	return l, nil
}

// opList is an operator list state. Like a keyed ListState, it only ever
// appends to its slice or replaces it, so a snapshot captures the slice
// header.
type opList[T any] struct {
	inf opInfo
	c   codec.Codec[T]
	l   []T
}

func (s *opList[T]) Get() []T {
	if len(s.l) == 0 {
		return nil
	}
	return s.l[:len(s.l):len(s.l)]
}
func (s *opList[T]) Add(v T)         { s.l = append(s.l, v) }
func (s *opList[T]) AddAll(vs []T)   { s.l = append(s.l, vs...) }
func (s *opList[T]) Clear()          { s.l = nil }
func (s *opList[T]) info() opInfo    { return s.inf }
func (s *opList[T]) capture() opView { return &opListView[T]{s.c, s.l} }

func (s *opList[T]) Update(vs []T) {
	if len(vs) == 0 {
		s.l = nil
		return
	}
	s.l = slices.Clone(vs)
}

type opListView[T any] struct {
	c codec.Codec[T]
	l []T
}

func (v *opListView[T]) appendElems(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v.l)))
	for i := range v.l {
		dst = appendPrefixed(dst, v.c, v.l[i])
	}
	return dst
}

// rawOpState holds restored elements until their state is registered.
type rawOpState struct {
	inf   opInfo
	elems [][]byte
}

func (r *rawOpState) info() opInfo { return r.inf }
func (r *rawOpState) capture() opView {
	return rawOpView(r.elems[:len(r.elems):len(r.elems)])
}

type rawOpView [][]byte

func (v rawOpView) appendElems(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	for _, e := range v {
		dst = appendBytes(dst, e)
	}
	return dst
}

// OperatorSnapshot is a consistent view of an OperatorBackend; WriteTo
// may run on another goroutine while the owner keeps modifying the
// backend. It needs no release.
type OperatorSnapshot struct {
	checkpointID int64
	infos        []opInfo
	views        []opView
}

// Snapshot captures the operator state for checkpoint checkpointID without
// copying it.
func (ob *OperatorBackend) Snapshot(checkpointID int64) *OperatorSnapshot {
	s := &OperatorSnapshot{checkpointID: checkpointID}
	for _, st := range ob.states {
		s.infos = append(s.infos, st.info())
		s.views = append(s.views, st.capture())
	}
	return s
}

// WriteTo serializes the snapshot in the checksummed format of keyed
// snapshots, one block per state.
func (s *OperatorSnapshot) WriteTo(w io.Writer) (int64, error) {
	bw := newBlobWriter(w)
	hdr := binary.AppendVarint(nil, s.checkpointID)
	hdr = binary.AppendUvarint(hdr, uint64(len(s.infos)))
	for _, inf := range s.infos {
		hdr = appendString(hdr, inf.name)
		hdr = append(hdr, byte(inf.mode))
	}
	bw.header(blobOperator, hdr)
	var buf []byte
	for i, v := range s.views {
		buf = v.appendElems(buf[:0])
		bw.block(i, buf)
	}
	n, err := bw.end()
	if err != nil {
		return n, fmt.Errorf("state: writing operator snapshot of checkpoint %d: %w", s.checkpointID, err)
	}
	return n, nil
}

// readOperatorSnapshot reads and verifies a whole operator snapshot.
func readOperatorSnapshot(r io.Reader) ([]opInfo, [][][]byte, error) {
	br := newBlobReader(r)
	p, err := br.header(blobOperator)
	if err != nil {
		return nil, nil, err
	}
	d := &decoder{b: p}
	d.varint() // checkpoint ID
	n := d.int(len(d.b), "state count")
	infos := make([]opInfo, 0, n)
	seen := make(map[string]bool, n)
	for range n {
		inf := opInfo{name: string(d.bytes()), mode: Redistribution(d.byte())}
		if d.err != nil {
			break
		}
		if inf.mode != SplitDistribute && inf.mode != Union || seen[inf.name] {
			return nil, nil, corrupt("operator state %q with %v", inf.name, inf.mode)
		}
		seen[inf.name] = true
		infos = append(infos, inf)
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, nil, corrupt("operator snapshot header: %v", d.err)
	}
	elems := make([][][]byte, len(infos))
	for i := 0; ; i++ {
		id, payload, ok, err := br.next()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			if i != len(infos) {
				return nil, nil, corrupt("%d blocks for %d operator states", i, len(infos))
			}
			return infos, elems, nil
		}
		if id != i || i >= len(infos) {
			return nil, nil, corrupt("operator state block %d where %d was expected", id, i)
		}
		d := &decoder{b: payload}
		m := d.int(len(d.b), "element count")
		for range m {
			e := d.bytes()
			if d.err != nil {
				break
			}
			elems[i] = append(elems[i], e)
		}
		if d.err != nil || len(d.b) != 0 {
			return nil, nil, corrupt("operator state %q: bad elements", infos[i].name)
		}
	}
}

// Restore loads this subtask's share of operator state, for subtask index
// of parallelism, from the serialized snapshots of every old subtask, in
// old subtask order. Each state is divided according to the
// redistribution mode it was registered with (see Redistribution). All
// snapshots are read and verified before anything is loaded. The backend
// must be empty.
func (ob *OperatorBackend) Restore(parallelism, index int, snapshots ...io.Reader) error {
	if parallelism <= 0 || index < 0 || index >= parallelism {
		return fmt.Errorf("state: restoring operator state: subtask %d of %d", index, parallelism)
	}
	if len(ob.states) > 0 {
		return errors.New("state: restoring operator state into a backend that has state")
	}
	type merged struct {
		inf   opInfo
		elems [][]byte
	}
	var order []*merged
	byName := map[string]*merged{}
	for i, r := range snapshots {
		infos, elems, err := readOperatorSnapshot(r)
		if err != nil {
			return fmt.Errorf("state: restoring operator state from old subtask %d: %w", i, err)
		}
		for j, inf := range infos {
			m := byName[inf.name]
			if m == nil {
				m = &merged{inf: inf}
				byName[inf.name] = m
				order = append(order, m)
			} else if m.inf.mode != inf.mode {
				return fmt.Errorf("state: restoring operator state %q: old subtasks disagree on redistribution (%v, %v)",
					inf.name, m.inf.mode, inf.mode)
			}
			m.elems = append(m.elems, elems[j]...)
		}
	}
	for _, m := range order {
		elems := m.elems
		if m.inf.mode == SplitDistribute {
			n := len(elems)
			base, rem := n/parallelism, n%parallelism
			start := index*base + min(index, rem)
			size := base
			if index < rem {
				size++
			}
			elems = elems[start : start+size]
		}
		ob.byName[m.inf.name] = len(ob.states)
		ob.states = append(ob.states, &rawOpState{inf: m.inf, elems: slices.Clip(elems)})
	}
	return nil
}
