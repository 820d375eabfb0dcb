package stream_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestRegionFailoverRestartsOnlyTheFailedPipeline runs two disconnected
// pipelines in one job and fails a subtask of one: with the region
// strategy only that pipeline's subtasks are redeployed; with full, all.
func TestRegionFailoverRestartsOnlyTheFailedPipeline(t *testing.T) {
	for _, tc := range []struct {
		strategy  string
		restarted int
	}{{"region", 4}, {"full", 8}} {
		t.Run(tc.strategy, func(t *testing.T) {
			var ev streamtest.Events
			faults := streamtest.NewFaults()
			failure := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("a-source"), streamtest.OnSubtask(1),
				streamtest.AfterRecords(100), streamtest.InAttempt(0))
			env, err := stream.NewEnvironment(
				stream.WithConfig(mustConfig(t, "parallelism.default=2", "restart-strategy.type=fixed-delay",
					"restart-strategy.fixed-delay.attempts=1", "restart-strategy.fixed-delay.delay=0 ms",
					"jobmanager.execution.failover-strategy="+tc.strategy)),
				stream.WithEvents(ev.Record),
				stream.WithLogger(quiet),
				faults.Option(),
			)
			if err != nil {
				t.Fatal(err)
			}
			sinks := map[string]*streamtest.Collector[int64]{}
			for _, name := range []string{"a", "b"} {
				src, _ := datagen.New(func(p int, seq int64) int64 { return seq }, datagen.Partitions(2), datagen.Count(500), datagen.BatchSize(50))
				s := stream.FromSource(env, src, name+"-source", stream.NoWatermarks[int64]())
				s = stream.Rebalance(s, stream.Uid(name+"-rebalance"))
				sinks[name] = streamtest.NewCollector[int64](false)
				stream.SinkTo(s, sinks[name], stream.Uid(name+"-sink"))
			}
			if err := env.Execute(context.Background(), "two-pipelines"); err != nil {
				t.Fatal(err)
			}
			rs := ev.Of(stream.EventRestarting)
			if !failure.Fired() || len(rs) != 1 {
				t.Fatalf("%d restarts, want 1", len(rs))
			}
			var vertices []string
			for _, id := range rs[0].Tasks {
				if !slices.Contains(vertices, id.Vertex) {
					vertices = append(vertices, id.Vertex)
				}
			}
			if len(rs[0].Tasks) != tc.restarted {
				t.Fatalf("restarted %v, want %d subtasks", rs[0].Tasks, tc.restarted)
			}
			if tc.strategy == "region" && slices.ContainsFunc(vertices, func(v string) bool { return v[0] == 'b' }) {
				t.Fatalf("region failover restarted pipeline b: %v", rs[0].Tasks)
			}
			// Without checkpoints, a restarted pipeline reads from the start:
			// an at-least-once sink sees every record, some twice.
			for name, c := range sinks {
				got := c.Results()
				if len(got) < 1000 {
					t.Fatalf("pipeline %s lost records: %d of 1000", name, len(got))
				}
			}
		})
	}
}

var quiet = slog.New(slog.DiscardHandler)

func mustConfig(t *testing.T, kv ...string) *config.Configuration {
	t.Helper()
	cfg, err := config.ParseDynamic(kv)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
