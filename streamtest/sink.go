// Package streamtest helps test jobs: sinks that collect what a job
// writes (transactionally, as an exactly-once sink would, or directly, as
// an at-least-once one), a processing-time clock that moves when told to,
// a recorder of a job's events that a test can wait on (Events),
// declarative faults to inject into a running job (Faults): errors,
// hangs and delays between batches, in Open, in restores, in a source's
// NewReader, around a sink's commit, in a checkpoint's synchronous and
// asynchronous phases, and in checkpoint storage; and Run, which runs a
// job in-process in one call, with a checkpoint directory it retains for
// a later run to resume from.
//
//	faults := streamtest.NewFaults()
//	crash := faults.Add(stream.FaultCommitted, streamtest.Fail(nil), streamtest.OnOperator("sink"), streamtest.OnCall(3))
//	res := streamtest.Run(t, build, streamtest.Config("execution.checkpointing.interval=10 ms"), streamtest.WithFaults(faults))
//	if res.Err != nil { t.Fatal(res.Err) }
//	if !crash.Fired() { t.Fatal("the commit never failed") }
//	if res.Events.Count(stream.EventRestored) == 0 { t.Fatal("the job never restored") }
//
// # Concurrency
//
// A job runs its subtasks, the writers of its snapshots and its job
// master on goroutines of their own, and calls what a test gives it from
// there, concurrently: the predicates given to When and the functions
// given to Call run on the goroutine of the subtask, snapshot writer or
// storage operation that reached the fault, possibly several at once, and
// must be safe for that (guard what they share with a mutex, or use
// atomics) and must not block, except as a Call means to. Faults,
// Fault handles, Events and Collector are safe for concurrent use; the
// condition given to Until runs on the goroutine that reports events, one
// event at a time, and the condition given to Events.WaitFor on the
// waiter's.
package streamtest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/weirstream/weir/connector"
)

// Collector is a sink that keeps what a job writes, in memory, shared by
// all its subtasks and surviving their restarts, like an external system.
//
// In transactional mode each subtask stages its records in a transaction
// per checkpoint; PrepareCommit names it in the committable, and Commit
// makes it visible. Transactions that were never committed (the subtask
// failed first) stay invisible. Otherwise every record is visible as soon
// as it is written, and a restart writes records again.
type Collector[T any] struct {
	transactional bool
	reconciles    bool

	mu        sync.Mutex
	committed []T
	// txns are the committed transactions, in commit order, and where
	// their records start in committed (transactional mode).
	txns    []committedTxn
	staged  map[string]stagedTxn[T]
	done    map[string]bool
	writes  int
	writers int
}

type stagedTxn[T any] struct {
	uid        string
	subtask    int
	checkpoint int64
	records    []T
}

type committedTxn struct {
	uid        string
	subtask    int
	checkpoint int64
	start, n   int
}

// NewCollector returns a Collector; transactional selects exactly-once
// commits.
func NewCollector[T any](transactional bool) *Collector[T] {
	return &Collector[T]{transactional: transactional, staged: map[string]stagedTxn[T]{}, done: map[string]bool{}}
}

// NewReconcilingCollector returns a transactional Collector that undoes,
// as the file sink does, what transactions of checkpoints after the one a
// writer is restored from committed (connector.Reconciler): a job that
// falls back to an older checkpoint than its newest replays their records
// without duplicating them.
func NewReconcilingCollector[T any]() *Collector[T] {
	c := NewCollector[T](true)
	c.reconciles = true
	return c
}

// ReconcilesOnRestore implements connector.Reconciler.
func (c *Collector[T]) ReconcilesOnRestore() bool { return c.reconciles }

// Results returns the visible records, in the order they became visible.
func (c *Collector[T]) Results() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.committed)
}

// reconcile removes the records that transactions of uid's checkpoints
// after restored committed, for the subtasks the restored writer info
// inherits (the file sink's rule).
func (c *Collector[T]) reconcile(info connector.WriterInfo, restored int64) {
	inherits := func(s int) bool {
		p := info.Parallelism
		return s == info.Subtask || p > 0 && s >= p && s%p == info.Subtask
	}
	var kept []T
	var txns []committedTxn
	for _, t := range c.txns {
		if t.uid == info.UID && t.checkpoint > restored && inherits(t.subtask) {
			continue
		}
		txns = append(txns, committedTxn{uid: t.uid, subtask: t.subtask, checkpoint: t.checkpoint, start: len(kept), n: t.n})
		kept = append(kept, c.committed[t.start:t.start+t.n]...)
	}
	c.committed, c.txns = kept, txns
}

// Writes returns how many records were written, visible or not.
func (c *Collector[T]) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// NewWriter implements connector.Sink.
func (c *Collector[T]) NewWriter(_ context.Context, info connector.WriterInfo) (connector.SinkWriter[T], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writers++
	if c.reconciles && info.RestoredCheckpointID > 0 {
		c.reconcile(info, info.RestoredCheckpointID)
	}
	return &collectorWriter[T]{c: c, info: info, nonce: c.writers}, nil
}

type collectorWriter[T any] struct {
	c     *Collector[T]
	info  connector.WriterInfo
	nonce int
	open  []T
}

func (w *collectorWriter[T]) Write(v T, _ int64) error {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.writes++
	if w.c.transactional {
		w.open = append(w.open, v)
		return nil
	}
	w.c.committed = append(w.c.committed, v)
	return nil
}

// PrepareCommit stages the open transaction under a name unique to the
// writer and checkpoint: a job resumed from an older checkpoint reuses
// checkpoint ids, and its transactions must not be mistaken for the
// earlier run's.
func (w *collectorWriter[T]) PrepareCommit(_ context.Context, id int64) ([][]byte, error) {
	if !w.c.transactional {
		return nil, nil
	}
	txn := fmt.Sprintf("%s/%d/%d/w%d", w.info.UID, w.info.Subtask, id, w.nonce)
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if _, dup := w.c.staged[txn]; dup || w.c.done[txn] {
		return nil, fmt.Errorf("streamtest: transaction %s prepared twice", txn)
	}
	w.c.staged[txn] = stagedTxn[T]{uid: w.info.UID, subtask: w.info.Subtask, checkpoint: id, records: w.open}
	w.open = nil
	return [][]byte{[]byte(txn)}, nil
}

// Commit makes staged transactions visible; committing one twice is a
// no-op.
func (w *collectorWriter[T]) Commit(_ context.Context, committables [][]byte) error {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	for _, b := range committables {
		txn := string(b)
		if w.c.done[txn] {
			continue
		}
		st, ok := w.c.staged[txn]
		if !ok {
			return fmt.Errorf("streamtest: commit of unknown transaction %s", txn)
		}
		recs := st.records
		w.c.txns = append(w.c.txns, committedTxn{uid: st.uid, subtask: st.subtask, checkpoint: st.checkpoint, start: len(w.c.committed), n: len(recs)})
		w.c.committed = append(w.c.committed, recs...)
		delete(w.c.staged, txn)
		w.c.done[txn] = true
	}
	return nil
}

func (w *collectorWriter[T]) Close() error {
	w.open = nil // an open transaction is abandoned
	return nil
}
