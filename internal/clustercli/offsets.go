package clustercli

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/ops"
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
// by split, if op is a source: if every piece of its operator state holds
// a source's split positions (ops.DecodeSourceState). Otherwise it returns
// nothing; an error only if a piece of operator state could not be read.
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
			splits, ok := ops.DecodeSourceState(b)
			if !ok {
				return nil, nil
			}
			for name, st := range splits {
				out = append(out, SplitOffset{Split: name, Subtask: i, Offset: st.Offset, Ended: st.Ended})
			}
		}
	}
	slices.SortFunc(out, func(a, b SplitOffset) int {
		return cmp.Or(cmp.Compare(a.Split, b.Split), cmp.Compare(a.Subtask, b.Subtask))
	})
	return out, nil
}
