package gatewaymeter

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/connector/kafka"
)

// KafkaTopics names the topics of GatewayMeter on Kafka.
type KafkaTopics struct {
	Events                                                 string
	TenantCost, ModelLatency, Alerts, Orphans, DeadLetters string
}

// DefaultKafkaTopics returns gateway-events, tenant-cost, model-latency,
// alerts, orphans and dead-letters, each after prefix.
func DefaultKafkaTopics(prefix string) KafkaTopics {
	return KafkaTopics{
		Events:       prefix + "gateway-events",
		TenantCost:   prefix + OutTenantCost,
		ModelLatency: prefix + OutModelLatency,
		Alerts:       prefix + OutAlerts,
		Orphans:      prefix + OutOrphans,
		DeadLetters:  prefix + OutDeadLetters,
	}
}

func (t KafkaTopics) outputs() []string {
	return []string{t.TenantCost, t.ModelLatency, t.Alerts, t.Orphans, t.DeadLetters}
}

func newAdmin(brokers []string) (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, nil, fmt.Errorf("gatewaymeter: connecting to %v: %w", brokers, err)
	}
	return kadm.NewClient(cl), cl, nil
}

// CreateTopics creates the events topic with partitions partitions and the
// output topics with outPartitions each; topics that exist are kept.
//
// The output topics keep their records forever (retention.ms -1). The
// sinks stamp the outputs with their event times, which come from the trace
// (DefaultStartMS is in December 2025), and the brokers measure a record's
// age from its timestamp: with a retention shorter than the trace's age
// they would delete outputs at their next retention check (every 5
// minutes by default), all of an at-least-once run's and those of an
// exactly-once transaction whose commit marker is not yet written, before
// verify reads them. The events topic keeps the brokers' default: its
// records carry the time they were produced.
func CreateTopics(ctx context.Context, brokers []string, t KafkaTopics, partitions, outPartitions int) error {
	adm, cl, err := newAdmin(brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	forever := "-1"
	create := func(n int, configs map[string]*string, topics ...string) error {
		res, err := adm.CreateTopics(ctx, int32(n), 1, configs, topics...)
		if err != nil {
			return fmt.Errorf("gatewaymeter: creating topics %v on %v: %w", topics, brokers, err)
		}
		for _, r := range res.Sorted() {
			if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("gatewaymeter: creating topic %s: %w", r.Topic, r.Err)
			}
		}
		return nil
	}
	if err := create(partitions, nil, t.Events); err != nil {
		return err
	}
	return create(outPartitions, map[string]*string{"retention.ms": &forever}, t.outputs()...)
}

// ProduceTrace writes a generated trace (the part-NNNNN.jsonl files in
// dir) into topic, file p into partition p, line by line and in order.
func ProduceTrace(ctx context.Context, brokers []string, topic, dir string) (int64, error) {
	names, err := TraceFiles(dir)
	if err != nil {
		return 0, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return 0, fmt.Errorf("gatewaymeter: connecting to %v: %w", brokers, err)
	}
	defer cl.Close()
	var n int64
	var (
		mu       sync.Mutex // promises may run on the client's goroutines
		firstErr error
	)
	for p, name := range names {
		if name == "" {
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			return n, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<26)
		for sc.Scan() {
			rec := &kgo.Record{Partition: int32(p), Value: slices.Clone(sc.Bytes())}
			cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			})
			n++
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return n, err
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return n, err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return n, fmt.Errorf("gatewaymeter: producing to %s: %w", topic, firstErr)
	}
	return n, nil
}

// KafkaSource reads gateway-events from Kafka, partition p as the split a
// trace file part-NNNNN.jsonl would be, with Kafka offsets as positions,
// each record parsed (ParseLine) as it is read. Bounded stops at the
// offsets that were latest at start.
func KafkaSource(brokers []string, topic, group string, bounded bool) (connector.Source[Parsed], error) {
	opts := []kafka.SourceOption{kafka.BootstrapServers(brokers...), kafka.Topics(topic), kafka.StartingOffsets(kafka.Earliest())}
	if group != "" {
		opts = append(opts, kafka.GroupID(group))
	}
	if bounded {
		opts = append(opts, kafka.Bounded())
	}
	return kafka.NewSource(func(r *kgo.Record) (Parsed, error) {
		return ParseLine(file.Line{File: TraceFileName(int(r.Partition)), Offset: r.Offset, Text: r.Value})
	}, opts...)
}

// KafkaSinks returns the job's five outputs as Kafka topics, with the
// given delivery guarantee; exactly-once uses transactional ids
// <txnPrefix>-<output>-<subtask>-<n>.
func KafkaSinks(brokers []string, t KafkaTopics, g connector.DeliveryGuarantee, txnPrefix string) (Sinks, error) {
	var s Sinks
	var err error
	if s.TenantCost, err = kafkaSink[TenantCostMinute](brokers, t.TenantCost, g, txnPrefix); err != nil {
		return s, err
	}
	if s.ModelLatency, err = kafkaSink[ModelLatencyMinute](brokers, t.ModelLatency, g, txnPrefix); err != nil {
		return s, err
	}
	if s.Alerts, err = kafkaSink[Alert](brokers, t.Alerts, g, txnPrefix); err != nil {
		return s, err
	}
	if s.Orphans, err = kafkaSink[Orphan](brokers, t.Orphans, g, txnPrefix); err != nil {
		return s, err
	}
	s.DeadLetters, err = kafkaSink[DeadLetter](brokers, t.DeadLetters, g, txnPrefix)
	return s, err
}

func kafkaSink[T any](brokers []string, topic string, g connector.DeliveryGuarantee, txnPrefix string) (connector.Sink[T], error) {
	opts := []kafka.SinkOption{kafka.BootstrapServers(brokers...), kafka.Topic(topic), kafka.Guarantee(g)}
	if g == connector.ExactlyOnce {
		opts = append(opts, kafka.TransactionalIDPrefix(txnPrefix+"-"+topic))
	}
	return kafka.NewSink(func(v T) (*kgo.Record, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return &kgo.Record{Value: b}, nil
	}, opts...)
}

// ReadKafkaOutputs reads the five output topics with read_committed.
func ReadKafkaOutputs(ctx context.Context, brokers []string, t KafkaTopics) (Outputs, error) {
	var o Outputs
	var err error
	if o.TenantCost, err = readTopic[TenantCostMinute](ctx, brokers, t.TenantCost); err != nil {
		return o, err
	}
	if o.ModelLatency, err = readTopic[ModelLatencyMinute](ctx, brokers, t.ModelLatency); err != nil {
		return o, err
	}
	if o.Alerts, err = readTopic[Alert](ctx, brokers, t.Alerts); err != nil {
		return o, err
	}
	if o.Orphans, err = readTopic[Orphan](ctx, brokers, t.Orphans); err != nil {
		return o, err
	}
	o.DeadLetters, err = readTopic[DeadLetter](ctx, brokers, t.DeadLetters)
	return o, err
}

func readTopic[T any](ctx context.Context, brokers []string, topic string) ([]T, error) {
	return kafka.ReadCommitted(ctx, brokers, topic, func(r *kgo.Record) (T, error) {
		var v T
		err := json.Unmarshal(r.Value, &v)
		return v, err
	})
}

type kafkaLine struct {
	p    int32
	off  int64
	text []byte
}

// OracleKafka computes the oracle over the events topic: the trace as the
// job reads it, with Kafka offsets as the dead letters' positions.
func OracleKafka(ctx context.Context, brokers []string, topic string, tmp string) (Outputs, error) {
	lines, err := kafka.ReadCommitted(ctx, brokers, topic, func(r *kgo.Record) (kafkaLine, error) {
		return kafkaLine{r.Partition, r.Offset, r.Value}, nil
	})
	if err != nil {
		return Outputs{}, err
	}
	// The file oracle numbers dead letters by byte offset: write the
	// partitions out, remembering each line's byte offset's Kafka offset.
	byPart := map[int32][]kafkaLine{}
	for _, l := range lines {
		byPart[l.p] = append(byPart[l.p], l)
	}
	offsets := map[[2]int64]int64{}
	for p, ls := range byPart {
		f, err := os.Create(filepath.Join(tmp, TraceFileName(int(p))))
		if err != nil {
			return Outputs{}, err
		}
		w := bufio.NewWriter(f)
		var pos int64
		for _, l := range ls {
			offsets[[2]int64{int64(p), pos}] = l.off
			w.Write(l.text)
			w.WriteByte('\n')
			pos += int64(len(l.text)) + 1
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return Outputs{}, err
		}
		if err := f.Close(); err != nil {
			return Outputs{}, err
		}
	}
	o, err := oracleFiles(tmp, false)
	if err != nil {
		return o, err
	}
	for i := range o.DeadLetters {
		d := &o.DeadLetters[i]
		d.Offset = offsets[[2]int64{int64(d.Partition), d.Offset}]
	}
	return o, nil
}
