package kafkatest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/internal/kafkatest"
)

// TestBrokerSmoke proves that the broker in WEIR_KAFKA_BROKERS does what the
// Kafka connector relies on: it creates a topic with 8 partitions, writes
// three transactions to every partition (commit, abort, commit) and reads the
// topic back. With isolation level read_committed exactly the two committed
// transactions come back, in order; read_uncommitted also returns the
// aborted one, which shows that the abort was not a no-op.
func TestBrokerSmoke(t *testing.T) {
	kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const partitions = 8
	const perTxn = 4 // records per partition per transaction
	topic := kafkatest.CreateTopic(t, partitions)

	adm := kadm.NewClient(kafkatest.Client(t))
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	if got := len(details[topic].Partitions); got != partitions {
		t.Fatalf("topic %s has %d partitions, want %d", topic, got, partitions)
	}

	producer := kafkatest.Client(t,
		kgo.TransactionalID(kafkatest.UniqueName(t, "txn")),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	transact := func(batch string, end kgo.TransactionEndTry) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatalf("%s: begin transaction: %v", batch, err)
		}
		var records []*kgo.Record
		for p := range int32(partitions) {
			for i := range perTxn {
				records = append(records, &kgo.Record{
					Partition: p,
					Key:       fmt.Appendf(nil, "p%d", p),
					Value:     fmt.Appendf(nil, "%s/%d", batch, i),
				})
			}
		}
		if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", batch, err)
		}
		if err := producer.EndTransaction(ctx, end); err != nil {
			t.Fatalf("%s: end transaction (commit=%v): %v", batch, end, err)
		}
	}
	transact("first", kgo.TryCommit)
	transact("aborted", kgo.TryAbort)
	transact("second", kgo.TryCommit)

	batch := func(name string) []string {
		var vs []string
		for i := range perTxn {
			vs = append(vs, fmt.Sprintf("%s/%d", name, i))
		}
		return vs
	}
	wantCommitted := slices.Concat(batch("first"), batch("second"))
	wantAll := slices.Concat(batch("first"), batch("aborted"), batch("second"))

	got := consume(ctx, t, topic, kgo.ReadCommitted(), partitions*len(wantCommitted))
	for p := range int32(partitions) {
		if !slices.Equal(got[p], wantCommitted) {
			t.Errorf("read_committed, partition %d: got %q, want %q", p, got[p], wantCommitted)
		}
	}
	// Each transaction ends with one control record (its commit or abort
	// marker) in each partition it wrote to. The coordinator writes markers
	// after EndTxn returns; read_committed having returned the last
	// transaction's records means its marker is written, so the end offsets
	// are final here.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if want := int64(3*perTxn + 3); o.Err != nil || o.Offset != want {
			t.Errorf("partition %d: end offset %d (err %v), want %d: 12 records and 3 markers", o.Partition, o.Offset, o.Err, want)
		}
	})

	got = consume(ctx, t, topic, kgo.ReadUncommitted(), partitions*len(wantAll))
	for p := range int32(partitions) {
		if !slices.Equal(got[p], wantAll) {
			t.Errorf("read_uncommitted, partition %d: got %q, want %q", p, got[p], wantAll)
		}
	}
}

// consume reads topic from the start with the given isolation level until
// it has n records, and returns their values by partition. Its client is
// closed when the test ends.
func consume(ctx context.Context, t *testing.T, topic string, level kgo.IsolationLevel, n int) map[int32][]string {
	t.Helper()
	cl := kafkatest.Client(t,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	got := make(map[int32][]string)
	count := 0
	for count < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline: %v", count, n, ctx.Err())
		}
		for _, e := range fetches.Errors() {
			t.Fatalf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			count++
		})
	}
	return got
}

// TestCreateTopicRetention checks that CreateTopic's topics have no
// time-based retention: the broker's retention check, every 5 minutes by
// default, would otherwise delete the records that tests stamp with event
// times decades old, whenever it happened to run during a test.
func TestCreateTopicRetention(t *testing.T) {
	kafkatest.Brokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := kafkatest.CreateTopic(t, 1)
	rcs, err := kadm.NewClient(kafkatest.Client(t)).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describe configs of %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs of %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			if c.Value == nil || *c.Value != "-1" {
				t.Fatalf("topic %s has retention.ms %v (source %v), want -1", topic, c.MaybeValue(), c.Source)
			}
			return
		}
	}
	t.Fatalf("topic %s: no retention.ms among its configs %v", topic, rc.Configs)
}
