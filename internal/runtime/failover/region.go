package failover

import (
	"errors"
	"slices"
)

// region restarts the regions involved in a failure.
type region struct {
	r         *Regions
	available ResultAvailable
}

// NewRegion returns the region strategy, modelled on Flink's
// RestartPipelinedRegionFailoverStrategy. The regions to restart are found
// from the failed task's region by three rules:
//
//  1. The region of the failed task restarts.
//  2. If a restarting region reads a blocking result that is not available
//     (available reports it lost, or the failure's cause is a
//     *PartitionError naming its producer), the producer's region restarts
//     to write it again.
//  3. Every region that reads a result of a restarting region restarts, as
//     that result is written again.
//
// available may be nil: every result is then available unless the cause
// says otherwise.
func NewRegion(r *Regions, available ResultAvailable) Strategy {
	return region{r: r, available: available}
}

func (s region) Name() string { return Region }

func (s region) TasksToRestart(failed TaskID, cause error) ([]TaskID, error) {
	r := s.r
	f, ok := r.index[failed]
	if !ok {
		return nil, unknownTask(failed)
	}

	unreadable := -1 // the producer a consumption error names, if any
	var pe *PartitionError
	if errors.As(cause, &pe) {
		if p, ok := r.index[pe.Producer]; ok {
			unreadable = p
		}
	}
	lost := func(producer int) bool {
		return producer == unreadable || (s.available != nil && !s.available(r.tasks[producer]))
	}

	involved := make([]bool, r.Len())
	queue := []int{r.regionOf[f]}
	involved[r.regionOf[f]] = true
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, p := range r.inputs[cur] { // rule 2
			if pr := r.regionOf[p]; !involved[pr] && lost(p) {
				involved[pr] = true
				queue = append(queue, pr)
			}
		}
		for _, c := range r.consumers[cur] { // rule 3
			if !involved[c] {
				involved[c] = true
				queue = append(queue, c)
			}
		}
	}

	var tasks []int
	for i, in := range involved {
		if in {
			tasks = append(tasks, r.members[i]...)
		}
	}
	slices.Sort(tasks)
	return r.ids(tasks), nil
}
