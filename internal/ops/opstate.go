package ops

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/weirstream/weir/state"
)

// Sources and sinks keep their checkpointed state as operator list state
// (state.OperatorBackend), in the checksummed format of every other
// snapshot, so that a corrupt or truncated piece is detected, and a
// restore at another parallelism divides it by the list's redistribution
// mode.

const (
	// sourceSplits holds one element per split a source subtask owned.
	// Union: the job master assigns splits again on restore, so every new
	// subtask sees every split's position and keeps those it is assigned.
	sourceSplits = "source-splits"
	// sinkLocation holds where a sink subtask writes, one element per old
	// subtask. Union: each new subtask checks every old subtask's.
	sinkLocation = "sink-location"
	// sinkCommittables holds the committables not yet committed.
	// Split-distributed: each is committed by exactly one new subtask.
	sinkCommittables = "sink-committables"
)

// splitElem is one split's element of a source's operator state.
type splitElem struct {
	Split  string
	Offset int64
	Ended  bool
	State  []byte
	// HasMaxTs says MaxTs holds the highest timestamp the split emitted.
	HasMaxTs bool
	MaxTs    int64
}

// committable is one element of a sink's operator state: a committable
// prepared for a checkpoint and not yet committed.
type committable struct {
	Checkpoint int64
	Data       []byte
}

var (
	splitsDesc      = state.ListDescriptor[splitElem]{Name: sourceSplits}
	locationDesc    = state.ListDescriptor[string]{Name: sinkLocation}
	committableDesc = state.ListDescriptor[committable]{Name: sinkCommittables}
)

// restoreOperatorState reads the operator state pieces of every old
// subtask into a backend holding this subtask's share.
func restoreOperatorState(parallelism, index int, pieces [][]byte) (*state.OperatorBackend, error) {
	ob := state.NewOperatorBackend()
	rs := make([]io.Reader, len(pieces))
	for i, b := range pieces {
		rs[i] = bytes.NewReader(b)
	}
	if err := ob.Restore(parallelism, index, rs...); err != nil {
		return nil, err
	}
	return ob, nil
}

// snapshotBytes serializes an operator backend for checkpoint id.
func snapshotBytes(ob *state.OperatorBackend, id int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := ob.Snapshot(id).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// encodeSplits serializes a source subtask's split states.
func encodeSplits(id int64, splits []splitElem) ([]byte, error) {
	ob := state.NewOperatorBackend()
	l, err := state.OperatorList(ob, splitsDesc, state.Union)
	if err != nil {
		return nil, err
	}
	l.Update(splits)
	return snapshotBytes(ob, id)
}

// decodeSplits returns the split states in a restored backend, and false
// if the backend holds no source's state.
func decodeSplits(ob *state.OperatorBackend) ([]splitElem, bool, error) {
	if !ob.Has(sourceSplits) {
		return nil, false, nil
	}
	l, err := state.OperatorList(ob, splitsDesc, state.Union)
	if err != nil {
		return nil, false, err
	}
	return l.Get(), true, nil
}

// DecodeSourceState decodes one source subtask's checkpointed state into
// each split's position. It reports false for state that is not a
// source's (another operator's, or unreadable), so that tools reading a
// checkpoint can tell the sources apart.
func DecodeSourceState(b []byte) (map[string]SplitPosition, bool) {
	ob, err := restoreOperatorState(1, 0, [][]byte{b})
	if err != nil {
		return nil, false
	}
	elems, ok, err := decodeSplits(ob)
	if err != nil || !ok {
		return nil, false
	}
	out := make(map[string]SplitPosition, len(elems))
	for _, e := range elems {
		out[e.Split] = SplitPosition{Offset: e.Offset, Ended: e.Ended}
	}
	return out, true
}

// EncodeSourceState encodes split positions the way a source subtask
// checkpoints them, for tools and tests that write checkpoints.
func EncodeSourceState(checkpointID int64, splits map[string]SplitPosition) ([]byte, error) {
	elems := make([]splitElem, 0, len(splits))
	for _, name := range slices.Sorted(maps.Keys(splits)) {
		p := splits[name]
		elems = append(elems, splitElem{Split: name, Offset: p.Offset, Ended: p.Ended})
	}
	return encodeSplits(checkpointID, elems)
}

// encodeSink serializes a sink subtask's location and pending
// committables.
func encodeSink(id int64, location string, pending map[int64][][]byte) ([]byte, error) {
	ob := state.NewOperatorBackend()
	loc, err := state.OperatorList(ob, locationDesc, state.Union)
	if err != nil {
		return nil, err
	}
	if location != "" {
		loc.Add(location)
	}
	cs, err := state.OperatorList(ob, committableDesc, state.SplitDistribute)
	if err != nil {
		return nil, err
	}
	for _, ckpt := range slices.Sorted(maps.Keys(pending)) {
		for _, c := range pending[ckpt] {
			cs.Add(committable{Checkpoint: ckpt, Data: c})
		}
	}
	return snapshotBytes(ob, id)
}

// decodeSink returns the locations and committables in a restored
// backend: every old subtask's location, and this subtask's share of the
// committables by checkpoint id.
func decodeSink(ob *state.OperatorBackend) ([]string, map[int64][][]byte, error) {
	loc, err := state.OperatorList(ob, locationDesc, state.Union)
	if err != nil {
		return nil, nil, err
	}
	cs, err := state.OperatorList(ob, committableDesc, state.SplitDistribute)
	if err != nil {
		return nil, nil, err
	}
	pending := make(map[int64][][]byte)
	for _, c := range cs.Get() {
		pending[c.Checkpoint] = append(pending[c.Checkpoint], c.Data)
	}
	return loc.Get(), pending, nil
}

// DecodeSinkState decodes one sink subtask's checkpointed state: its
// output's location (empty if the sink has none) and its pending
// committables.
func DecodeSinkState(b []byte) (location string, pending map[int64][][]byte, err error) {
	ob, err := restoreOperatorState(1, 0, [][]byte{b})
	if err != nil {
		return "", nil, fmt.Errorf("decoding sink state: %w", err)
	}
	locs, pending, err := decodeSink(ob)
	if err != nil {
		return "", nil, fmt.Errorf("decoding sink state: %w", err)
	}
	if len(locs) > 1 {
		return "", nil, fmt.Errorf("decoding sink state: %d locations in one subtask's state", len(locs))
	}
	if len(locs) == 1 {
		location = locs[0]
	}
	return location, pending, nil
}
