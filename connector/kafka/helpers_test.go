package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// newCluster starts an in-process Kafka cluster of one broker with the
// given topics of the given number of partitions.
func newCluster(t *testing.T, partitions int32, topics []string, opts ...kfake.Opt) []string {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// testCtx returns a context that ends with the test or after a minute.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// produce writes n records to each of the topic's partitions, with
// values "<partition>:<i>" and timestamps base+i ms, and waits for them.
func produce(t *testing.T, brokers []string, topic string, partitions, n int, base int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for p := range partitions {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p),
				Value: fmt.Appendf(nil, "%d:%d", p, i), Timestamp: time.UnixMilli(base + int64(i))})
		}
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func value(r *kgo.Record) (string, error) { return string(r.Value), nil }

func stringRecord(topic string) func(string) (*kgo.Record, error) {
	return func(s string) (*kgo.Record, error) {
		return &kgo.Record{Topic: topic, Value: []byte(s)}, nil
	}
}
