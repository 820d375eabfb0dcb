package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector"
)

// Guarantee sets the sink's delivery guarantee, as the package comment
// describes: connector.None, connector.AtLeastOnce (the default) or
// connector.ExactlyOnce, which needs TransactionalIDPrefix and a job that
// checkpoints. The zero value keeps the default.
func Guarantee(g connector.DeliveryGuarantee) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) {
		if g != "" {
			c.guarantee = g
		}
	})
}

// SinkOption configures a Sink: Guarantee, Topic,
// TransactionalIDPrefix, TransactionTimeout, FlushTimeout and every
// ClientOption.
type SinkOption interface{ applySink(*sinkConfig) }

type sinkOptionFunc func(*sinkConfig)

func (f sinkOptionFunc) applySink(c *sinkConfig) { f(c) }

type sinkConfig struct {
	client       clientConfig
	guarantee    connector.DeliveryGuarantee
	topic        string
	prefix       string
	txnTimeout   time.Duration
	flushTimeout time.Duration
}

// DefaultTransactionTimeout is the default TransactionTimeout: the
// default of the brokers' transaction.max.timeout.ms, the longest they
// accept.
const DefaultTransactionTimeout = 15 * time.Minute

// Topic sets the topic of records whose serializer leaves Record.Topic
// empty. When it is set, a writer checks at start that the topic exists.
func Topic(name string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.topic = name })
}

// TransactionalIDPrefix sets the prefix of an exactly-once sink's
// transactional ids (Flink's setTransactionalIdPrefix): a transaction is
// named <prefix>-<subtask>-<n>. It must be unique among the jobs and sinks
// that write to the cluster: two sinks with one prefix fence and abort
// each other's transactions. Required for connector.ExactlyOnce.
func TransactionalIDPrefix(prefix string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.prefix = prefix })
}

// TransactionTimeout sets Kafka's transaction.timeout.ms for an
// exactly-once sink: how long the brokers keep a transaction open before
// they abort it. A transaction opens with its first record and commits
// after the checkpoint that prepared it completes — or, after a failure,
// when the job has restarted and restored that checkpoint. The timeout
// must exceed the longest such span (checkpoint interval + checkpoint
// duration + restart and restore time), or a transaction is aborted
// before it commits and its records are lost (the commit then fails
// loudly). It must not exceed the brokers' transaction.max.timeout.ms
// (default 15 minutes). Default DefaultTransactionTimeout.
func TransactionTimeout(d time.Duration) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.txnTimeout = d })
}

// FlushTimeout bounds how long a flush at a checkpoint barrier waits for
// the brokers to acknowledge what was written (a role Kafka's
// delivery.timeout.ms plays for the Java producer; franz-go measures its
// record timeout from the record's timestamp, which here is event time,
// so it is not used). When it expires the checkpoint fails. Default 2
// minutes.
func FlushTimeout(d time.Duration) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.flushTimeout = d })
}

// Sink writes records of type T to Kafka. It implements
// connector.Sink[T]; the package comment describes the guarantees and the
// transaction protocol.
//
// Writes do not wait for the brokers, except when franz-go's buffer of
// unacknowledged records is full (kgo.MaxBufferedRecords, 10,000 by
// default, settable with ClientOptions): then Write blocks, and the job
// is backpressured.
type Sink[T any] struct {
	cfg       sinkConfig
	serialize func(T) (*kgo.Record, error)
}

// NewSink returns a sink that writes serialize(v) for each record v. The
// serializer sets the record's key, value and headers, and its topic
// unless Topic gives a default; if it leaves the timestamp zero, the
// record gets the stream record's timestamp, if it has one, or the time
// it is produced.
//
// Kafka's time-based retention measures a record's age from that
// timestamp (on topics with message.timestamp.type CreateTime, the
// default): at every retention check (log.retention.check.interval.ms, 5
// minutes by default) the brokers delete the log segments whose newest
// record is older than the topic's retention.ms, rolling the active
// segment first. Records stamped with an event time older than the
// retention — a job replaying last month's data into a topic that keeps
// a week — can therefore be deleted as soon as they are written,
// committed or not, unless a newer record (a transaction marker, say)
// shares their segment. Such topics need a retention longer than the age
// of the data, message.timestamp.type LogAppendTime, or a serializer that
// sets the timestamp itself.
func NewSink[T any](serialize func(T) (*kgo.Record, error), opts ...SinkOption) (*Sink[T], error) {
	c := sinkConfig{client: defaultClientConfig(), guarantee: connector.AtLeastOnce,
		txnTimeout: DefaultTransactionTimeout, flushTimeout: 2 * time.Minute}
	for _, o := range opts {
		o.applySink(&c)
	}
	if err := c.client.validate(); err != nil {
		return nil, err
	}
	switch {
	case serialize == nil:
		return nil, errors.New("kafka: the serialize function is nil")
	case c.guarantee != connector.None && c.guarantee != connector.AtLeastOnce && c.guarantee != connector.ExactlyOnce:
		return nil, fmt.Errorf("kafka: unknown delivery guarantee %q", c.guarantee)
	case c.guarantee == connector.ExactlyOnce && c.prefix == "":
		return nil, errors.New("kafka: an exactly-once sink needs a transactional id prefix (TransactionalIDPrefix)")
	case c.txnTimeout.Milliseconds() < 1 || c.txnTimeout.Milliseconds() > math.MaxInt32:
		return nil, fmt.Errorf("kafka: transaction timeout %v out of range", c.txnTimeout)
	case c.flushTimeout <= 0:
		return nil, fmt.Errorf("kafka: flush timeout must be positive, got %v", c.flushTimeout)
	}
	return &Sink[T]{cfg: c, serialize: serialize}, nil
}

// Guarantee returns the sink's delivery guarantee.
func (s *Sink[T]) Guarantee() connector.DeliveryGuarantee { return s.cfg.guarantee }

// NewWriter implements connector.Sink. It checks that the brokers answer
// and that the default topic, if set, exists, so that a misconfigured
// sink fails when the job starts. An exactly-once writer is transactional
// whatever info.ExactlyOnce says; without checkpoints its records become
// visible only when a bounded input ends.
func (s *Sink[T]) NewWriter(ctx context.Context, info connector.WriterInfo) (connector.SinkWriter[T], error) {
	if info.Subtask < 0 {
		return nil, fmt.Errorf("kafka: invalid subtask %d", info.Subtask)
	}
	cl, err := s.cfg.client.newClient()
	if err != nil {
		return nil, err
	}
	if err := s.check(ctx, cl); err != nil {
		cl.Close()
		return nil, err
	}
	if s.cfg.guarantee != connector.ExactlyOnce {
		return &plainWriter[T]{producer: producer[T]{sink: s, ctx: ctx}, cl: cl}, nil
	}
	return &txnWriter[T]{producer: producer[T]{sink: s, ctx: ctx}, info: info, ctl: cl}, nil
}

// check asks the brokers for the default topic's metadata, or for theirs.
func (s *Sink[T]) check(ctx context.Context, cl *client) error {
	rctx, cancel := cl.withTimeout(ctx)
	defer cancel()
	adm := kadm.NewClient(cl.Client)
	if s.cfg.topic == "" {
		if _, err := adm.BrokerMetadata(rctx); err != nil {
			return cl.describe(err, "connecting")
		}
		return nil
	}
	tds, err := adm.ListTopics(rctx, s.cfg.topic)
	if err != nil {
		return cl.describe(err, fmt.Sprintf("looking up topic %q", s.cfg.topic))
	}
	td, ok := tds[s.cfg.topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("kafka: topic %q does not exist (brokers %s)", s.cfg.topic, cl.cfg.brokerList())
	}
	if td.Err != nil {
		return cl.describe(td.Err, fmt.Sprintf("looking up topic %q", s.cfg.topic))
	}
	return nil
}

// noTimestamp is the engine's timestamp of a record without event time
// (stream.NoTimestamp).
const noTimestamp = math.MinInt64

// producer is what every writer shares: turning values into records and
// keeping the first produce error, which franz-go reports on its own
// goroutines.
type producer[T any] struct {
	sink *Sink[T]
	ctx  context.Context // the writer's: bounds produces that wait for buffer space

	mu  sync.Mutex
	err error
}

func (p *producer[T]) record(v T, ts int64) (*kgo.Record, error) {
	rec, err := p.sink.serialize(v)
	if err != nil {
		return nil, fmt.Errorf("kafka: serializing a record: %w", err)
	}
	if rec == nil {
		return nil, errors.New("kafka: the serializer returned a nil record")
	}
	if rec.Topic == "" {
		if p.sink.cfg.topic == "" {
			return nil, errors.New("kafka: a serialized record has no topic, and the sink has no default (Topic)")
		}
		rec.Topic = p.sink.cfg.topic
	}
	if rec.Timestamp.IsZero() && ts != noTimestamp {
		rec.Timestamp = time.UnixMilli(ts)
	}
	return rec, nil
}

// promise is franz-go's callback for each produced record.
func (p *producer[T]) promise(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = fmt.Errorf("kafka: producing to %s: %w", SplitID(r.Topic, r.Partition), err)
	}
}

// failed returns the first produce error.
func (p *producer[T]) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// flush waits, at most the flush timeout, until everything cl buffered
// is acknowledged or failed, and returns the first produce error.
func (p *producer[T]) flush(ctx context.Context, cl *client) error {
	ctx, cancel := context.WithTimeout(ctx, p.sink.cfg.flushTimeout)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: the brokers %s did not acknowledge every record within the flush timeout %v", err, cl.cfg.brokerList(), p.sink.cfg.flushTimeout)
		}
		return fmt.Errorf("kafka: flushing: %w", err)
	}
	return p.failed()
}

// plainWriter is the writer of None and AtLeastOnce: one idempotent
// producer.
type plainWriter[T any] struct {
	producer[T]
	cl *client
}

func (w *plainWriter[T]) Write(v T, ts int64) error {
	if err := w.failed(); err != nil {
		return err
	}
	rec, err := w.record(v, ts)
	if err != nil {
		return err
	}
	w.cl.Produce(w.ctx, rec, w.promise)
	return nil
}

// PrepareCommit implements connector.SinkWriter. With AtLeastOnce it
// waits until every record written so far is acknowledged, and fails if
// any was not; with None it only reports a failure seen so far. It
// returns no committables.
func (w *plainWriter[T]) PrepareCommit(ctx context.Context, _ int64) ([][]byte, error) {
	if w.sink.cfg.guarantee == connector.AtLeastOnce {
		if err := w.flush(ctx, w.cl); err != nil {
			return nil, err
		}
	}
	return nil, w.failed()
}

// Commit implements connector.Committer for committables restored from a
// checkpoint taken while the sink was exactly-once, so that switching
// guarantees loses no prepared transaction.
func (w *plainWriter[T]) Commit(ctx context.Context, committables [][]byte) error {
	for _, b := range committables {
		c, err := decodeCommittable(b)
		if err != nil {
			return err
		}
		if err := commitTxn(ctx, w.cl, w.sink.cfg, c); err != nil {
			return err
		}
	}
	return nil
}

// Close implements connector.SinkWriter. With None it first flushes what
// is buffered, waiting at most the request timeout, so that a bounded job
// delivers its last records.
func (w *plainWriter[T]) Close() error {
	var err error
	if w.sink.cfg.guarantee == connector.None {
		ctx, cancel := w.cl.withTimeout(context.Background())
		err = w.cl.Flush(ctx)
		cancel()
		if err == nil {
			err = w.failed()
		}
	}
	w.cl.Close()
	return err
}
