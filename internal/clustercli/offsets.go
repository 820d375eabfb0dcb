package clustercli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// SplitOffset is one split's position in a source's operator state.
type SplitOffset struct {
	Split   string
	Subtask int
	Offset  int64
	Ended   bool
}

// maxSourceState bounds the operator state read to find out whether an
// operator is a source: a source's state is a few bytes per split.
const maxSourceState = 1 << 20

// SourceOffsets returns the split offsets in op's operator state, ordered
// by split, if op is a source: if every piece of its operator state
// decodes as a JSON object mapping split names to {"offset", "ended",
// "state"}, and there is at least one split. Otherwise it returns nothing;
// an error only if a piece of operator state could not be read.
func SourceOffsets(ctx context.Context, snap *storage.Snapshot, op checkpoint.OperatorState) ([]SplitOffset, error) {
	var out []SplitOffset
	for i, s := range op.Subtasks {
		for _, h := range s.Operator {
			if h.Size > maxSourceState {
				return nil, nil
			}
			b, err := snap.ReadState(ctx, h)
			if err != nil {
				return nil, fmt.Errorf("subtask %d: %w", i, err)
			}
			splits, ok := decodeSplits(b)
			if !ok {
				return nil, nil
			}
			for name, st := range splits {
				out = append(out, SplitOffset{Split: name, Subtask: i, Offset: *st.Offset, Ended: st.Ended})
			}
		}
	}
	slices.SortFunc(out, func(a, b SplitOffset) int {
		return cmp.Or(cmp.Compare(a.Split, b.Split), cmp.Compare(a.Subtask, b.Subtask))
	})
	return out, nil
}

// sourceSplit is ops.Source's state of one split. State is the reader's
// opaque split state (connector.SplitStateReader).
type sourceSplit struct {
	Offset *int64 `json:"offset"`
	Ended  bool   `json:"ended"`
	MaxTs  *int64 `json:"max_ts"`
	State  []byte `json:"state"`
}

// decodeSplits decodes a source's operator state: a JSON object of split
// name to {"offset": n, "ended": bool, "max_ts": n, "state": base64},
// strictly, so that
// other operator state is not taken for it.
func decodeSplits(b []byte) (map[string]sourceSplit, bool) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return nil, false
	}
	out := make(map[string]sourceSplit, len(raw))
	for name, v := range raw {
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		var s sourceSplit
		if err := dec.Decode(&s); err != nil || s.Offset == nil {
			return nil, false
		}
		out[name] = s
	}
	return out, true
}
