package nexmark

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector/kafka"
	"github.com/weirstream/weir/stream"
)

// DefaultKafkaTopic is the name of the events topic after its prefix.
const DefaultKafkaTopic = "nexmark-events"

// ProduceKafka writes the configuration's events into topic, split i into
// partition i, in order, each record's value a row of nexmark-flink's
// datagen table in JSON (as WriteFiles writes them) and its timestamp the
// event's time. It creates the topic with one partition per split if it
// does not exist; an existing topic must have exactly that many, so that
// the partitions are the splits, and be empty, so that it holds these
// events only, once. It returns the number of records
// written.
func (g *Generator) ProduceKafka(ctx context.Context, brokers []string, topic string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return 0, fmt.Errorf("nexmark: connecting to %v: %w", brokers, err)
	}
	defer cl.Close()
	if err := createTopic(ctx, kadm.NewClient(cl), topic, g.cfg.Splits); err != nil {
		return 0, err
	}
	var (
		mu       sync.Mutex
		firstErr error
	)
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	}
	var n int64
	for split := range g.cfg.Splits {
		_, count := g.cfg.SplitRange(split)
		for i := range count {
			ev := g.Event(split, i)
			b, err := ev.MarshalJSON()
			if err != nil {
				return n, err
			}
			cl.Produce(ctx, &kgo.Record{Partition: int32(split), Value: b, Timestamp: time.UnixMilli(ev.Time())}, done)
			n++
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return n, fmt.Errorf("nexmark: producing to %s: %w", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return n, fmt.Errorf("nexmark: producing to %s: %w", topic, firstErr)
	}
	return n, nil
}

// createTopic creates topic with partitions partitions, or checks that
// the existing one has that many.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	res, err := adm.CreateTopic(ctx, int32(partitions), -1, nil, topic)
	if err == nil {
		err = res.Err
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("nexmark: creating topic %s: %w", topic, err)
	}
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("nexmark: describing topic %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		return fmt.Errorf("nexmark: describing topic %s: %v", topic, d.Err)
	}
	if len(d.Partitions) != partitions {
		return fmt.Errorf("nexmark: topic %s exists with %d partitions, the events have %d splits: delete it or give another topic", topic, len(d.Partitions), partitions)
	}
	// Events produced into a topic that holds some already would be
	// there twice, or beside others.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("nexmark: reading the end offsets of topic %s: %w", topic, err)
	}
	var held int64
	ends.Each(func(o kadm.ListedOffset) { held += o.Offset })
	if held > 0 {
		return fmt.Errorf("nexmark: topic %s exists and holds %d records: delete it or give another topic", topic, held)
	}
	return nil
}

// DeleteKafkaTopic deletes topic.
func DeleteKafkaTopic(ctx context.Context, brokers []string, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return fmt.Errorf("nexmark: connecting to %v: %w", brokers, err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).DeleteTopic(ctx, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("nexmark: deleting topic %s: %w", topic, err)
	}
	return nil
}

// KafkaRecord is a record of the events topic as the Kafka source reads
// it: its event, or, if the record is not a row of the datagen table,
// why not, with its position.
type KafkaRecord struct {
	Event     Event
	Err       string // "" for an event
	Partition int32
	Offset    int64
	Value     []byte // a malformed record's value
}

// DeadLetter is a record of the events topic that is not an event, where
// it is and why.
type DeadLetter struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Error     string `json:"error"`
	Value     string `json:"value"`
}

// KafkaSource reads the events topic, partition by partition, with
// Kafka offsets as positions (see package connector/kafka), from the
// earliest offset, and with bounded, to the offsets that were the
// partitions' ends when the job started. opts add to or override those.
func KafkaSource(brokers []string, topic string, bounded bool, opts ...kafka.SourceOption) (*kafka.Source[KafkaRecord], error) {
	all := []kafka.SourceOption{kafka.BootstrapServers(brokers...), kafka.Topics(topic), kafka.StartingOffsets(kafka.Earliest())}
	if bounded {
		all = append(all, kafka.Bounded())
	}
	return kafka.NewSource(decodeRecord, append(all, opts...)...)
}

func decodeRecord(r *kgo.Record) (KafkaRecord, error) {
	k := KafkaRecord{Partition: r.Partition, Offset: r.Offset}
	if err := k.Event.UnmarshalJSON(r.Value); err != nil {
		k.Err, k.Value = err.Error(), r.Value
	}
	return k, nil
}

// FromKafka adds a source of the events topic (KafkaSource) to a job,
// with the reference's watermark on the events' times, and returns the
// events and, apart, the records that are not events (to be sent to a
// dead-letter sink: they are never dropped silently).
func FromKafka(env *stream.Environment, src *kafka.Source[KafkaRecord]) (stream.Stream[Event], stream.Stream[DeadLetter]) {
	wm := stream.BoundedOutOfOrderness[KafkaRecord](WatermarkDelay).WithTimestamps(func(r KafkaRecord, ts int64) int64 {
		if r.Err != "" {
			return ts
		}
		return r.Event.Time()
	})
	recs := stream.FromSource[KafkaRecord](env, src, "nexmark-kafka", wm, stream.Uid("nexmark-kafka"))
	topics := src.Topics()
	dead := stream.NewOutputTag[DeadLetter]("dead-letters")
	events := stream.ProcessRecords(recs, stream.ProcessFunction[KafkaRecord, Event](splitDead{tag: dead, topic: topics[0]}), stream.Uid("nexmark-parse"))
	return events, stream.SideOutputOf(events, dead)
}

// splitDead passes events on and malformed records to its side output.
type splitDead struct {
	tag   stream.OutputTag[DeadLetter]
	topic string
}

func (s splitDead) ProcessElement(ctx *stream.RecordContext[Event], r KafkaRecord) error {
	if r.Err == "" {
		return ctx.Emit(r.Event)
	}
	return stream.SideOutput(ctx, s.tag, DeadLetter{Topic: s.topic, Partition: r.Partition, Offset: r.Offset, Error: r.Err, Value: string(r.Value)})
}
