package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector"
)

// ReadCommitted reads every partition of topic from its start to its
// current last stable offset with isolation level read_committed, and
// returns the records of committed transactions (and non-transactional
// records) turned into T by deserialize, partition after partition, each
// in offset order. It is for verifying the output of an exactly-once
// sink: a transaction still open when ReadCommitted starts ends the read
// of its partitions where it begins, as it would for any read_committed
// consumer. That includes a transaction whose commit the coordinator has
// accepted but whose commit markers it is still writing (it answers the
// commit before it writes them): to read everything a finished job
// committed, wait until each partition's last stable offset has reached
// its high watermark (kadm's ListCommittedOffsets and ListEndOffsets).
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
