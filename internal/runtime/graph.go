package runtime

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
)

// JobGraph is a job as the runtime executes it: vertices (chains of
// operators run by one subtask each) and the edges between them.
type JobGraph struct {
	Name     string
	Vertices []*Vertex // in topological order
	Edges    []*Edge
}

// Vertex is a chain of operators and its parallelism.
type Vertex struct {
	ID   int
	Name string
	// UID identifies the vertex across runs: its head operator's uid.
	UID string
	// OperatorUIDs are the uids of the operators Build chains, head
	// first (nil: the head's alone), which a restore matches the
	// checkpoint's state against.
	OperatorUIDs   []string
	Parallelism    int
	MaxParallelism int
	// KeyedOperators is the number of operators in the chain that keep
	// keyed state: each subtask has as many keyed backends, which share
	// their slot's memory when it is bounded per slot.
	KeyedOperators int
	// Inputs and Outputs are the vertex's edges, in order: a subtask's
	// input channels are grouped by input edge, in this order.
	Inputs  []*Edge
	Outputs []*Edge
	// Build constructs the chain of one subtask. It is called on every
	// deployment, including redeployments after a failure.
	Build func(tc *TaskContext) (*Chain, error)
	// ListSplits, if set, lists a source vertex's splits. The job master
	// lists them when the job starts and assigns them to the vertex's
	// subtasks (see SplitEnumerator); a subtask's deployment carries its
	// splits. Without it, each source subtask lists the splits itself
	// when it opens and takes every Parallelism-th.
	ListSplits func(ctx context.Context) ([]string, error)
	// DiscoveryInterval is how often the job master lists the splits
	// again, to assign those added since to the running subtasks (0:
	// never).
	DiscoveryInterval time.Duration
	// Alignment, if set, aligns the watermarks of a source vertex's
	// subtasks with those of the other sources of its group.
	Alignment *WatermarkAlignment
}

// Source reports whether the vertex reads from a source (it has no input
// edges).
func (v *Vertex) Source() bool { return len(v.Inputs) == 0 }

// GraphChannel is one channel of a graph: from subtask From of Edge.From
// to subtask To of Edge.To.
type GraphChannel struct {
	Edge     *Edge
	From, To int
}

// Channels yields every channel of the graph: one per pair of producing
// and consuming subtask of each edge, except that a forward edge connects
// subtask i to subtask i only. The order is the one subtasks index them
// by: by edge, then consumer, then producer.
func (g *JobGraph) Channels() iter.Seq[GraphChannel] {
	return func(yield func(GraphChannel) bool) {
		for _, e := range g.Edges {
			for j := range e.To.Parallelism {
				for i := range e.From.Parallelism {
					if e.Partitioner == Forward && i != j {
						continue
					}
					if !yield(GraphChannel{Edge: e, From: i, To: j}) {
						return
					}
				}
			}
		}
	}
}

// Edge connects two vertices.
type Edge struct {
	ID          int
	From, To    *Vertex
	Partitioner PartitionerKind
	// Input is the logical input of To's head operator the edge feeds: 0,
	// or 1 for the second input of a two-input operator.
	Input int
	// Codec returns the codec of the edge's records, for channels that
	// cross processes. Nil if the records cannot leave the process.
	Codec func() (BatchCodec, error)
	// SelectKeyGroups, on a hash edge, returns the records of batch (a
	// batch of the edge's records, []Rec[T]) whose key group keep
	// accepts, as a new batch, and their number. It places records in
	// flight at a changed parallelism (unaligned checkpoints). Nil on
	// other edges.
	SelectKeyGroups func(batch any, keep func(keyGroup int) bool) (any, int)
}

// Chain is one subtask's operators, head first, as a vertex's Build made
// them, with the entry points the task drives.
type Chain struct {
	Operators []ChainedOperator
	// Deliver hands a batch of the input's record type ([]Rec[T]) to the
	// head operator's logical input. Nil for source vertices.
	Deliver DeliverFunc
	// Source drives a source vertex's head. Nil otherwise.
	Source SourceDriver
}

// ChainedOperator is an operator and its identity.
type ChainedOperator struct {
	UID  string
	Name string
	Op   Operator
}

// SourceDriver is the head of a source vertex, seen by its task. Fetching
// runs on its own goroutine; emitting runs on the task's, between mails, so
// a barrier goes out exactly between two fetched batches.
type SourceDriver interface {
	// Fetched delivers what the fetcher read.
	Fetched() <-chan any
	// Emit pushes one fetched item through the chain and returns the
	// number of records it held. done reports that every split has ended.
	Emit(item any) (n int, done bool, err error)
}

// DeliverFunc hands the records of batch ([]Rec[T]) from index from on to
// the head operator's logical input, one at a time, and returns the index
// after the last it handed over: len(batch), or less if *stop became true
// while a record was processed (an unaligned barrier wants the snapshot
// taken between two records).
type DeliverFunc func(input int, batch any, from int, stop *bool) (next int, err error)

// DeliverTo returns a Chain.Deliver function for a head operator with one
// typed input.
func DeliverTo[T any](in Input[T]) DeliverFunc {
	return func(_ int, batch any, from int, stop *bool) (int, error) {
		recs := batch.([]Rec[T])
		for i := from; i < len(recs); i++ {
			if err := in.Process(recs[i].V, recs[i].Ts); err != nil {
				return i, err
			}
			if *stop {
				return i + 1, nil
			}
		}
		return len(recs), nil
	}
}

// DeliverTo2 is DeliverTo for a head operator with two typed inputs.
func DeliverTo2[A, B any](a Input[A], b Input[B]) DeliverFunc {
	da, db := DeliverTo(a), DeliverTo(b)
	return func(input int, batch any, from int, stop *bool) (int, error) {
		if input == 0 {
			return da(0, batch, from, stop)
		}
		return db(1, batch, from, stop)
	}
}

// TaskContext is what a vertex's Build gets to construct one subtask's
// chain.
type TaskContext struct {
	ID             checkpoint.TaskID
	Subtask        int
	Parallelism    int
	MaxParallelism int
	task           *Task
}

// Writer returns the record writer of the subtask's output edge e. It
// must be called once per output edge.
func Writer[T any](tc *TaskContext, e *Edge, part Partitioner[T]) (*RecordWriter[T], error) {
	chans, ok := tc.task.outChans[e]
	if !ok {
		return nil, fmt.Errorf("runtime: edge %d is not an output of %s", e.ID, tc.ID)
	}
	if e.Partitioner == Hash && part == nil {
		return nil, fmt.Errorf("runtime: hash edge %d needs a partitioner", e.ID)
	}
	w := newRecordWriter(tc.task.ctx, chans, e.Partitioner, part, tc.task.opts.batchSize, tc.task)
	tc.task.writers = append(tc.task.writers, w)
	return w, nil
}

// OperatorContext returns the context for the chain's operator uid.
func (tc *TaskContext) OperatorContext(uid, name string) *OperatorContext {
	t := tc.task
	oc := &OperatorContext{
		Context:        t.ctx,
		JobID:          t.opts.jobID,
		UID:            uid,
		Name:           name,
		Subtask:        tc.Subtask,
		Parallelism:    tc.Parallelism,
		MaxParallelism: tc.MaxParallelism,
		KeyGroups:      KeyGroupsFor(tc.MaxParallelism, tc.Parallelism, tc.Subtask),
		Watermark:      t.startWatermark,
		Logger:         t.logger.With("operator", uid),
		KeyedState:     t.opts.keyedState,
		task:           t,
	}
	if uid == t.vertex.UID && t.vertex.Source() {
		oc.Splits = t.splits
	}
	if t.restore != nil {
		if st, ok := t.restore.Metadata.Operator(uid); ok {
			oc.Restored = &Restored{CheckpointID: t.restore.Metadata.CheckpointID, State: st, Store: t.restore.Store,
				Own: t.restore.Metadata.JobID == t.opts.jobID && t.restore.Metadata.Kind == checkpoint.KindCheckpoint}
			if t.opts.faults != nil {
				oc.Restored.Store = &faultReader{under: t.restore.Store, t: t, uid: uid, id: oc.Restored.CheckpointID}
			}
		}
	}
	return oc
}

// Checkpointing reports whether the job takes checkpoints, and in which
// mode.
func (tc *TaskContext) Checkpointing() (enabled bool, exactlyOnce bool) {
	return tc.task.opts.checkpointing, tc.task.opts.mode != config.AtLeastOnce
}

// JobID returns the job's id.
func (tc *TaskContext) JobID() string { return tc.task.opts.jobID }
