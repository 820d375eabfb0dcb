package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector"
)

// ReadCommitted reads every partition of topic from its start to its
// current last stable offset with isolation level read_committed, and
// returns the records of committed transactions (and non-transactional
// records) turned into T by deserialize, partition after partition, each
// in offset order. It is for verifying the output of an exactly-once
// sink. Kafka answers a transaction's commit before it has written the
// commit markers to the partitions, and until they are written a
// read_committed consumer stops where the transaction begins; so
// ReadCommitted first waits, up to SettleTimeout, until every partition's
// last stable offset has reached its high watermark (no transaction holds
// it back), and a read right after a job finished sees everything the job
// committed. A transaction still open after that (a job still running)
// ends the read of its partitions where it begins, as it would for any
// read_committed consumer.
// Records the brokers deleted (retention, compaction, DeleteRecords) are
// not read: each partition is read from its log start offset.
func ReadCommitted[T any](ctx context.Context, brokers []string, topic string, deserialize func(*kgo.Record) (T, error), opts ...ClientOption) ([]T, error) {
	cfg := defaultClientConfig()
	BootstrapServers(brokers...).f(&cfg)
	for _, o := range opts {
		o.f(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if deserialize == nil {
		return nil, errors.New("kafka: the deserialize function is nil")
	}
	if err := settle(ctx, cfg, topic); err != nil {
		return nil, err
	}
	// A bounded read_committed source stops at the last stable offsets.
	src := &Source[T]{
		cfg:         sourceConfig{client: cfg, topics: []string{topic}, start: Earliest(), bounded: true, readCommitted: true, maxPoll: 10_000},
		deserialize: deserialize,
		stops:       make(map[topicPartition]int64),
	}
	splits, err := src.Splits(ctx)
	if err != nil {
		return nil, err
	}
	starts := make([]connector.SplitStart, len(splits))
	for i, s := range splits {
		starts[i] = connector.SplitStart{Split: s, Offset: connector.StartDefault}
	}
	r, err := src.NewReader(ctx, connector.ReaderInfo{Parallelism: 1}, starts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	byPart := make(map[string][]T, len(splits))
	for {
		f, err := r.Fetch(ctx)
		if err != nil {
			if errors.Is(err, connector.ErrEndOfInput) {
				break
			}
			return nil, fmt.Errorf("kafka: reading topic %q: %w", topic, err)
		}
		byPart[f.Split] = append(byPart[f.Split], f.Records...)
	}
	var out []T
	for _, s := range splits {
		out = append(out, byPart[s]...)
	}
	return out, nil
}

// SettleTimeout is how long ReadCommitted waits for the transactions in
// flight on a topic's partitions to be decided and marked.
const SettleTimeout = 10 * time.Second

// settle waits, up to SettleTimeout, until every partition of topic has
// its last stable offset at its high watermark.
func settle(ctx context.Context, cfg clientConfig, topic string) error {
	cl, err := cfg.newClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl.Client)
	for deadline := time.Now().Add(SettleTimeout); ; {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return fmt.Errorf("kafka: listing the last stable offsets of %q: %w", topic, err)
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return fmt.Errorf("kafka: listing the end offsets of %q: %w", topic, err)
		}
		settled := true
		stable.Each(func(o kadm.ListedOffset) {
			if e, ok := ends.Lookup(o.Topic, o.Partition); o.Err != nil || !ok || e.Err != nil || e.Offset != o.Offset {
				settled = false
			}
		})
		if settled || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
