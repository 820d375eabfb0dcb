// Package failover decides which tasks restart after a task fails: Flink's
// failover strategies (jobmanager.execution.failover-strategy).
//
//	full    restarts every task of the job.
//	region  restarts the pipelined region of the failed task, the regions
//	        that produce blocking results it needs and that are lost, and,
//	        transitively, every region that consumes from a restarted one.
//
// A pipelined region is a set of tasks connected by pipelined exchanges: data
// streams between them while both run, so none can restart alone. Tasks
// connected only by blocking exchanges, whose producer writes its whole result
// before the consumer starts, are in different regions. Regions whose
// blocking exchanges form a cycle are merged into one, as Flink does, since
// none of them could finish first. In a streaming job every exchange is
// pipelined, so a region is a connected component of the task graph: one
// all-to-all keyBy makes the whole job one region and region failover
// restarts as much as full; disconnected pipelines and chains of forward
// exchanges (source i → map i) are regions of their own.
//
// The package works on an abstract execution graph (Graph) with no
// dependency on the rest of weir. NewRegions computes the regions once; a
// Strategy then answers for any failed task, in graph order. Like the restart
// strategies it is I/O-free: what it needs to know about lost results it is
// told through ResultAvailable and PartitionError.
package failover

import (
	"errors"
	"fmt"
	"strings"
)

// TaskID identifies one parallel instance of a job vertex.
type TaskID struct {
	Vertex  string // the job vertex (an operator chain), e.g. "assemble"
	Subtask int    // 0-based subtask index
}

// String renders the task as vertex[subtask], e.g. "assemble[2]".
func (t TaskID) String() string { return fmt.Sprintf("%s[%d]", t.Vertex, t.Subtask) }

// Edge is one channel of the execution graph: From produces data that To
// consumes. Blocking marks a blocking exchange, whose producer writes its
// whole result (kept by the task manager that ran it) before the consumer
// starts. All exchanges of a streaming job are pipelined (Blocking false).
type Edge struct {
	From, To TaskID
	Blocking bool
}

// Graph is an execution graph: the tasks and the channels between them.
// The order of Tasks is the order in which strategies list tasks; put
// producers before consumers and it is the order to deploy them in.
type Graph struct {
	Tasks []TaskID
	Edges []Edge
}

// Strategy selects the tasks to restart after a task failure.
type Strategy interface {
	// TasksToRestart returns the tasks to restart because failed failed
	// with cause, in the order of Graph.Tasks. It returns an error only
	// if failed is not a task of the graph.
	TasksToRestart(failed TaskID, cause error) ([]TaskID, error)

	// Name returns the strategy's jobmanager.execution.failover-strategy
	// value.
	Name() string
}

// Values of jobmanager.execution.failover-strategy.
const (
	Full   = "full"
	Region = "region"

	// Default is Flink's default failover strategy.
	Default = Region
)

// Key is Flink's configuration key that selects the failover strategy.
const Key = "jobmanager.execution.failover-strategy"

// ResultAvailable reports whether the blocking result that producer wrote is
// still stored and can be read again. It is false when, for example, the task
// manager that held it has been lost. Nil means every result is available
// unless a failure's cause says otherwise (see PartitionError).
type ResultAvailable func(producer TaskID) bool

// New returns the strategy that name selects ("full" or "region", in any
// case) for the regions r. available is used by region only; it may be nil.
func New(name string, r *Regions, available ResultAvailable) (Strategy, error) {
	if r == nil {
		return nil, errors.New("failover: no regions")
	}
	switch strings.ToLower(strings.TrimSpace(name)) {
	case Full:
		return NewFull(r), nil
	case Region:
		return NewRegion(r, available), nil
	}
	return nil, fmt.Errorf("%s: unknown failover strategy %q (want %s or %s)", Key, name, Full, Region)
}

// PartitionError is the cause of a failure to read a blocking result: the
// consumer could not fetch what Producer wrote (it is gone or corrupt). The
// region strategy then treats that result as lost, so the producer's region
// restarts to write it again. Wrap it in a failure's cause; it is found with
// errors.As.
type PartitionError struct {
	Producer TaskID
	Err      error
}

func (e *PartitionError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("reading the result of %v failed", e.Producer)
	}
	return fmt.Sprintf("reading the result of %v: %v", e.Producer, e.Err)
}

func (e *PartitionError) Unwrap() error { return e.Err }

// full restarts every task.
type full struct{ r *Regions }

// NewFull returns the full strategy: every failure restarts every task.
func NewFull(r *Regions) Strategy { return full{r} }

func (f full) Name() string { return Full }

func (f full) TasksToRestart(failed TaskID, _ error) ([]TaskID, error) {
	if _, ok := f.r.index[failed]; !ok {
		return nil, unknownTask(failed)
	}
	return f.r.Tasks(), nil
}

func unknownTask(t TaskID) error {
	return fmt.Errorf("failover: task %v is not in the execution graph", t)
}
