package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	gm "github.com/weirstream/weir/examples/gatewaymeter"
)

func brokerList(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// genToKafka generates the trace (into --out, or a temporary directory)
// and produces it into the events topic, creating the job's topics.
func genToKafka(ctx context.Context, w io.Writer, o genOptions) error {
	brokers := brokerList(o.toKafka)
	if len(brokers) == 0 {
		return fmt.Errorf("--to-kafka: no brokers in %q", o.toKafka)
	}
	if o.out == "" {
		tmp, err := os.MkdirTemp("", "weir-trace-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		o.out, o.force = tmp+"/trace", false
	}
	if err := runGen(ctx, w, o); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	topics := gm.DefaultKafkaTopics(o.topicPrefix)
	if err := gm.CreateTopics(ctx, brokers, topics, o.cfg.Partitions, 4); err != nil {
		return err
	}
	n, err := gm.ProduceTrace(ctx, brokers, topics.Events, o.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "gen gatewaymeter: produced %d lines into %s (%d partitions) on %s\n", n, topics.Events, o.cfg.Partitions, strings.Join(brokers, ","))
	return nil
}

// verifyKafkaInputs reads the oracle's input and the outputs from Kafka.
func verifyKafkaInputs(o verifyOptions) (expected, actual gm.Outputs, err error) {
	brokers := brokerList(o.kafka)
	if len(brokers) == 0 {
		return expected, actual, fmt.Errorf("--kafka: no brokers in %q", o.kafka)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	topics := gm.DefaultKafkaTopics(o.topicPrefix)
	tmp, err := os.MkdirTemp("", "weir-oracle-")
	if err != nil {
		return expected, actual, err
	}
	defer os.RemoveAll(tmp)
	if expected, err = gm.OracleKafka(ctx, brokers, topics.Events, tmp); err != nil {
		return expected, actual, fmt.Errorf("oracle of topic %s: %w", topics.Events, err)
	}
	if actual, err = gm.ReadKafkaOutputs(ctx, brokers, topics); err != nil {
		return expected, actual, fmt.Errorf("reading the output topics: %w", err)
	}
	return expected, actual, nil
}
