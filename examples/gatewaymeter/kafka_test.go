package gatewaymeter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	gm "github.com/weirstream/weir/examples/gatewaymeter"
	"github.com/weirstream/weir/internal/kafkatest"
	"github.com/weirstream/weir/stream"
)

// TestGatewayMeterOnKafka produces a seeded trace into gateway-events,
// runs the job from Kafka to Kafka with injected failures, and reads the
// outputs back read_committed: with the exactly-once sink they equal the
// oracle; with the at-least-once sink nothing is missing and the only
// differences are repeated records (windows fired again after a restore).
func TestGatewayMeterOnKafka(t *testing.T) {
	for _, tc := range []struct {
		guarantee connector.DeliveryGuarantee
		seed      uint64
	}{{connector.ExactlyOnce, 11}, {connector.ExactlyOnce, 12}, {connector.AtLeastOnce, 13}} {
		t.Run(fmt.Sprintf("%v/seed=%d", tc.guarantee, tc.seed), func(t *testing.T) {
			bs := kafkatest.BrokersOrFake(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			prefix := strings.NewReplacer("/", "-", "=", "-").Replace(t.Name()) + fmt.Sprintf("-%d-", time.Now().UnixNano())
			topics := gm.DefaultKafkaTopics(prefix)
			trace := t.TempDir()
			cfg := gm.DefaultGenConfig()
			cfg.Seed, cfg.Requests, cfg.Tenants, cfg.BadRate, cfg.RequestsPerSecond = tc.seed, 3000, 20, 0.002, 20
			if _, err := gm.GenerateFiles(cfg, trace); err != nil {
				t.Fatal(err)
			}
			if err := gm.CreateTopics(ctx, bs, topics, cfg.Partitions, 2); err != nil {
				t.Fatal(err)
			}
			if _, err := gm.ProduceTrace(ctx, bs, topics.Events, trace); err != nil {
				t.Fatal(err)
			}

			// The second failure strikes early in the restored run, so that
			// it strikes whichever checkpoint the first one restored.
			f := &faults{plan: []fault{{vertex: gm.UIDSource, subtask: 1, records: 700}, {vertex: gm.UIDAssemble, subtask: 2, records: 150}}}
			conf, err := config.ParseDynamic([]string{"parallelism.default=4", "execution.checkpointing.interval=50 ms",
				"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms"})
			if err != nil {
				t.Fatal(err)
			}
			env, err := stream.NewEnvironment(stream.WithConfig(conf), stream.WithLogger(slog.New(slog.DiscardHandler)), stream.WithFaults(f.fn), stream.WithEvents(f.event))
			if err != nil {
				t.Fatal(err)
			}
			src, err := gm.KafkaSource(bs, topics.Events, prefix+"group", true)
			if err != nil {
				t.Fatal(err)
			}
			sinks, err := gm.KafkaSinks(bs, topics, tc.guarantee, prefix+"txn")
			if err != nil {
				t.Fatal(err)
			}
			gm.Build(env, src, sinks)
			if err := env.Execute(ctx, "gatewaymeter"); err != nil {
				t.Fatal(err)
			}
			want, err := gm.OracleKafka(ctx, bs, topics.Events, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			got, err := gm.ReadKafkaOutputs(ctx, bs, topics)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.TenantCost) == 0 || len(want.DeadLetters) == 0 {
				t.Fatal("the oracle is empty: the trace is too small to test anything")
			}
			rep := gm.Diff(want, got)
			switch tc.guarantee {
			case connector.ExactlyOnce:
				if !rep.OK() {
					t.Fatalf("exactly-once outputs differ from the oracle:\n%s", rep)
				}
			default:
				if !rep.OKExceptDuplicates() {
					t.Fatalf("at-least-once outputs lost or changed records:\n%s", rep)
				}
			}
			// Checked after the diff, so that a run whose failures did not
			// all strike is still verified.
			if f.struck != 2 {
				t.Fatalf("the run verified, but did not test what it should: %s", f.report())
			}
		})
	}
}

// TestCreateTopicsRetention checks that the output topics keep their
// records whatever their timestamps: the outputs carry the trace's event
// times, and a retention measured from them would let the brokers delete
// outputs before they are verified. The events topic keeps the default.
func TestCreateTopicsRetention(t *testing.T) {
	bs := kafkatest.BrokersOrFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics := gm.DefaultKafkaTopics(fmt.Sprintf("retention-%d-", time.Now().UnixNano()))
	if err := gm.CreateTopics(ctx, bs, topics, 2, 1); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	all := []string{topics.Events, topics.TenantCost, topics.ModelLatency, topics.Alerts, topics.Orphans, topics.DeadLetters}
	defer adm.DeleteTopics(context.Background(), all...)
	for _, topic := range all {
		// The broker answers for a topic once its metadata has reached it.
		var rc kadm.ResourceConfig
		for {
			rcs, err := adm.DescribeTopicConfigs(ctx, topic)
			if err == nil {
				rc, err = rcs.On(topic, nil)
			}
			if err == nil {
				err = rc.Err
			}
			if err == nil {
				break
			}
			if !errors.Is(err, kerr.UnknownTopicOrPartition) || ctx.Err() != nil {
				t.Fatalf("describing the configs of %s: %v", topic, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		retention := "unset"
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				retention = c.MaybeValue()
			}
		}
		if forever := retention == "-1"; forever != (topic != topics.Events) {
			t.Errorf("topic %s has retention.ms %s", topic, retention)
		}
	}
}
