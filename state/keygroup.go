package state

import (
	"fmt"

	"github.com/weirstream/weir/config"
)

// KeyGroupRange is a contiguous, inclusive range of key groups [Start, End].
// A range with End < Start is empty.
type KeyGroupRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Len returns the number of key groups in r.
func (r KeyGroupRange) Len() int {
	if r.End < r.Start {
		return 0
	}
	return r.End - r.Start + 1
}

// Contains reports whether key group kg lies in r.
func (r KeyGroupRange) Contains(kg int) bool { return kg >= r.Start && kg <= r.End }

// Intersect returns the key groups in both r and o (possibly empty).
func (r KeyGroupRange) Intersect(o KeyGroupRange) KeyGroupRange {
	return KeyGroupRange{Start: max(r.Start, o.Start), End: min(r.End, o.End)}
}

func (r KeyGroupRange) String() string { return fmt.Sprintf("[%d..%d]", r.Start, r.End) }

// KeyGroupFor maps a key's hash to one of maxParallelism key groups. The
// hash must already be well mixed, as those of HasherFor are: the key group
// is the hash modulo maxParallelism.
func KeyGroupFor(hash uint32, maxParallelism int) int {
	return int(hash % uint32(maxParallelism))
}

// RangeForSubtask returns the key groups owned by subtask index of
// parallelism subtasks: [ceil(index·maxP/p), ((index+1)·maxP−1)/p], the
// contiguous ranges of Flink's KeyGroupRangeAssignment. It panics unless
// 0 < parallelism <= maxParallelism <= config.UpperBoundMaxParallelism and
// 0 <= index < parallelism.
func RangeForSubtask(maxParallelism, parallelism, index int) KeyGroupRange {
	checkParallelism(maxParallelism, parallelism)
	if index < 0 || index >= parallelism {
		panic(fmt.Sprintf("state: subtask index %d out of [0, %d)", index, parallelism))
	}
	return KeyGroupRange{
		Start: (index*maxParallelism + parallelism - 1) / parallelism,
		End:   ((index+1)*maxParallelism - 1) / parallelism,
	}
}

// SubtaskForKeyGroup returns the index of the subtask that owns key group
// kg: kg·parallelism/maxParallelism. It is the inverse of RangeForSubtask.
func SubtaskForKeyGroup(maxParallelism, parallelism, kg int) int {
	return kg * parallelism / maxParallelism
}

func checkParallelism(maxParallelism, parallelism int) {
	if parallelism <= 0 || maxParallelism < parallelism || maxParallelism > config.UpperBoundMaxParallelism {
		panic(fmt.Sprintf("state: need 0 < parallelism (%d) <= maxParallelism (%d) <= %d",
			parallelism, maxParallelism, config.UpperBoundMaxParallelism))
	}
}
