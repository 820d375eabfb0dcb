package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirstream/weir/connector"
)

// TransactionalID returns the transactional id of transaction n of an
// exactly-once sink's subtask: <prefix>-<subtask>-<n>.
func TransactionalID(prefix string, subtask int, n int64) string {
	return prefix + "-" + strconv.Itoa(subtask) + "-" + strconv.FormatInt(n, 10)
}

// parseTransactionalID parses an id made by TransactionalID with prefix.
// Ids of other prefixes do not parse, even when prefix is a prefix of
// theirs, since those have more dash-separated fields.
func parseTransactionalID(id, prefix string) (subtask int, n int64, ok bool) {
	rest, ok := strings.CutPrefix(id, prefix+"-")
	if !ok {
		return 0, 0, false
	}
	s, num, ok := strings.Cut(rest, "-")
	if !ok || !digits(s) || !digits(num) {
		return 0, 0, false
	}
	sub, err1 := strconv.Atoi(s)
	n, err2 := strconv.ParseInt(num, 10, 64)
	return sub, n, err1 == nil && err2 == nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// committable is what an exactly-once writer's PrepareCommit returns for
// a checkpoint, as JSON: the prepared transaction and the producer id and
// epoch that can end it. A writer that wrote nothing since the previous
// checkpoint returns a committable with only the checkpoint id, so that
// a restored writer learns which checkpoint it resumes from.
type committable struct {
	TransactionalID string `json:"txn,omitempty"`
	ProducerID      int64  `json:"producerId,omitempty"`
	Epoch           int16  `json:"epoch,omitempty"`
	Checkpoint      int64  `json:"checkpoint"`
	Records         int64  `json:"records,omitempty"`
}

func decodeCommittable(b []byte) (committable, error) {
	var c committable
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("kafka: decoding committable %q: %w", b, err)
	}
	return c, nil
}

// txnWriter is the exactly-once writer. Each transaction has its own
// franz-go producer, created with the first record after a checkpoint
// and closed, with its transaction still open, once PrepareCommit has
// flushed it. Transactions are committed and aborted through ctl, a
// client that never produces, by their transactional id, producer id
// and epoch.
type txnWriter[T any] struct {
	producer[T]
	info connector.WriterInfo
	ctl  *client

	cur     *client // producer of the open transaction, or nil
	curID   string  // its transactional id
	curRecs int64   // records written to it

	// last is the checkpoint prepared last, or before the first
	// checkpoint the one the writer was restored from: the next
	// transaction is named last+1.
	last     int64
	prepared bool // whether PrepareCommit was called
	started  bool // whether lingering transactions were aborted
}

func (w *txnWriter[T]) Write(v T, ts int64) error {
	if err := w.failed(); err != nil {
		return err
	}
	if err := w.start(w.ctx); err != nil {
		return err
	}
	rec, err := w.record(v, ts)
	if err != nil {
		return err
	}
	if w.cur == nil {
		if err := w.begin(); err != nil {
			return err
		}
	}
	w.curRecs++
	w.cur.Produce(w.ctx, rec, w.promise)
	return nil
}

// begin opens transaction last+1 with a new producer. Its producer id is
// initialized with the first produce, which also fences any earlier
// producer of the same transactional id and aborts its open transaction.
func (w *txnWriter[T]) begin() error {
	cfg := w.sink.cfg
	id := TransactionalID(cfg.prefix, w.info.Subtask, w.last+1)
	opts := []kgo.Opt{
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(cfg.txnTimeout),
		kgo.DisableClientMetrics(), // one short-lived producer per checkpoint
	}
	cl, err := cfg.client.newClient(opts...)
	if err != nil {
		return err
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return fmt.Errorf("kafka: beginning transaction %s: %w", id, err)
	}
	w.cur, w.curID, w.curRecs = cl, id, 0
	return nil
}

// PrepareCommit implements connector.SinkWriter: it flushes the open
// transaction, fails if any record was not acknowledged, and returns a
// committable naming it, its producer id and epoch; the transaction stays
// open. With nothing written since the last checkpoint the committable
// names no transaction. Checkpoint ids must increase.
func (w *txnWriter[T]) PrepareCommit(ctx context.Context, checkpointID int64) ([][]byte, error) {
	if w.prepared && checkpointID <= w.last {
		return nil, fmt.Errorf("kafka: checkpoint %d prepared after checkpoint %d", checkpointID, w.last)
	}
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	c := committable{Checkpoint: checkpointID}
	if w.cur != nil {
		if err := w.flush(ctx, w.cur); err != nil {
			return nil, fmt.Errorf("kafka: transaction %s: %w", w.curID, err)
		}
		pid, epoch, err := w.cur.ProducerID(ctx)
		if err != nil {
			return nil, fmt.Errorf("kafka: transaction %s: %w", w.curID, err)
		}
		c.TransactionalID, c.ProducerID, c.Epoch, c.Records = w.curID, pid, epoch, w.curRecs
		// Closing a franz-go client does not end its transaction: it
		// stays open on the brokers until Commit (or an abort).
		w.cur.Close()
		w.cur = nil
	}
	w.last, w.prepared = checkpointID, true
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return [][]byte{b}, nil
}

// Commit implements connector.Committer: it commits each committable's
// transaction with an EndTxn request carrying its transactional id,
// producer id and epoch, which the transaction coordinator accepts from
// any client. Committing a transaction that is already committed is a
// no-op; one that was aborted (it timed out, or another producer took its
// transactional id) is an error, since its records are lost.
//
// Commits made before the writer's first record or checkpoint are those
// of the checkpoint the job restored; the writer names its transactions
// after the newest of them, and only then aborts lingering transactions
// (see start), so that it never aborts one that a restored checkpoint
// holds.
func (w *txnWriter[T]) Commit(ctx context.Context, committables [][]byte) error {
	for _, b := range committables {
		c, err := decodeCommittable(b)
		if err != nil {
			return err
		}
		if !w.started && c.Checkpoint > w.last {
			w.last = c.Checkpoint
		}
		if err := commitTxn(ctx, w.ctl, w.sink.cfg, c); err != nil {
			return err
		}
	}
	return nil
}

// start aborts, once, before the writer's first transaction, the open
// transactions that earlier runs of the sink left behind and that this
// subtask owns: those of its prefix whose subtask s has s mod parallelism
// equal to this subtask (an earlier run may have had more subtasks).
// Their records belong to checkpoints that never completed, so no commit
// will ever come; aborting them now keeps read_committed consumers from
// waiting for them until they time out.
//
// Open transactions are found with ListTransactions (Kafka 3.0+), which
// lists those the client may describe; the abort is an InitProducerId
// for the transactional id, which fences its producer and aborts its
// transaction. Transactions of the restored checkpoint were committed
// before (see Commit), so they are no longer open.
func (w *txnWriter[T]) start(ctx context.Context) error {
	if w.started {
		return nil
	}
	rctx, cancel := w.ctl.withTimeout(ctx)
	defer cancel()
	listed, err := kadm.NewClient(w.ctl.Client).ListTransactions(rctx, nil, []string{"Ongoing"})
	if err != nil {
		return w.ctl.describe(err, "listing open transactions to abort those of earlier runs (ListTransactions needs Kafka 3.0+ and DESCRIBE on the transactional ids)")
	}
	p := max(w.info.Parallelism, 1)
	for _, t := range listed.Sorted() {
		s, _, ok := parseTransactionalID(t.TxnID, w.sink.cfg.prefix)
		if !ok || t.State != "Ongoing" || s%p != w.info.Subtask {
			continue
		}
		if err := abortTxn(rctx, w.ctl, w.sink.cfg, t.TxnID); err != nil {
			return err
		}
	}
	w.started = true
	return nil
}

// Close implements connector.SinkWriter. It aborts the open transaction,
// which no checkpoint holds, waiting at most the request timeout (a
// failed abort is left to the next writer's start, or to the transaction
// timeout). Prepared transactions stay open for a commit after a restore.
func (w *txnWriter[T]) Close() error {
	var err error
	if w.cur != nil {
		ctx, cancel := w.ctl.withTimeout(context.Background())
		err = w.cur.AbortBufferedRecords(ctx)
		if err == nil {
			err = w.cur.EndTransaction(ctx, kgo.TryAbort)
		}
		cancel()
		if err != nil {
			err = fmt.Errorf("kafka: aborting transaction %s: %w", w.curID, err)
		}
		w.cur.Close()
		w.cur = nil
	}
	w.ctl.Close()
	return err
}

// retry runs req until it succeeds, fails with an error that is not
// retriable, or the request timeout expires; it returns the last error.
// Concurrent transactions (the coordinator is still completing an earlier
// commit or abort of the transactional id) are retriable.
func retry(ctx context.Context, cl *client, req func(context.Context) error) error {
	rctx, cancel := cl.withTimeout(ctx)
	defer cancel()
	backoff := 10 * time.Millisecond
	for {
		err := req(rctx)
		if err == nil || !kerr.IsRetriable(err) && !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		select {
		case <-rctx.Done():
			return fmt.Errorf("%w (last error: %w)", rctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// commitTxn commits c's transaction; see txnWriter.Commit.
func commitTxn(ctx context.Context, cl *client, cfg sinkConfig, c committable) error {
	if c.TransactionalID == "" {
		return nil // nothing was written in this checkpoint
	}
	what := fmt.Sprintf("committing transaction %s of checkpoint %d", c.TransactionalID, c.Checkpoint)
	err := retry(ctx, cl, func(ctx context.Context) error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = c.TransactionalID
		req.ProducerID = c.ProducerID
		req.ProducerEpoch = c.Epoch
		req.Commit = true
		resp, err := req.RequestWith(ctx, cl.Client)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch),
		errors.Is(err, kerr.InvalidTxnState), errors.Is(err, kerr.InvalidProducerIDMapping),
		errors.Is(err, kerr.TransactionalIDNotFound):
		// Restoring the same checkpoint again would meet the same aborted
		// transaction: the job fails instead of restarting.
		return connector.Permanent(fmt.Errorf("kafka: %s (producer id %d, epoch %d): the transaction was aborted, and its %d records are lost: "+
			"it outlived the transaction timeout (%v; it must exceed the checkpoint interval plus the time to restart), "+
			"or another writer used its transactional id (the prefix must be unique to this sink): %w",
			what, c.ProducerID, c.Epoch, c.Records, cfg.txnTimeout, err))
	}
	return cl.describe(err, what)
}

// abortTxn aborts the open transaction of a transactional id by
// initializing a producer id for it, as a new producer of that id would:
// the coordinator bumps the epoch, fencing the old producer, and aborts
// its transaction.
func abortTxn(ctx context.Context, cl *client, cfg sinkConfig, id string) error {
	what := "aborting lingering transaction " + id
	err := retry(ctx, cl, func(ctx context.Context) error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(cfg.txnTimeout.Milliseconds())
		req.ProducerID = -1
		req.ProducerEpoch = -1
		resp, err := req.RequestWith(ctx, cl.Client)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	if err != nil {
		return cl.describe(err, what)
	}
	return nil
}
