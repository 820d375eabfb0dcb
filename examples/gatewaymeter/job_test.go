package gatewaymeter_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/file"
	gm "github.com/weirstream/weir/examples/gatewaymeter"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// faults fails, in attempt i, subtask (vertex, subtask) of plan[i] once
// it processed records records.
type faults struct {
	plan     []fault
	injected []*streamtest.Fault
}

type fault struct {
	vertex  string
	subtask int
	records int64
}

// option installs the plan's faults in a job.
func (f *faults) option() stream.Option {
	fs := streamtest.NewFaults()
	for i, p := range f.plan {
		f.injected = append(f.injected, fs.Add(stream.FaultBatch, streamtest.Fail(fmt.Errorf("injected failure %d", i+1)),
			streamtest.OnVertex(p.vertex), streamtest.OnSubtask(p.subtask), streamtest.AfterRecords(p.records), streamtest.InAttempt(i)))
	}
	return fs.Option()
}

// struck returns how many of the plan's failures struck.
func (f *faults) struck() int {
	n := 0
	for _, i := range f.injected {
		if i.Fired() {
			n++
		}
	}
	return n
}

func runJob(t *testing.T, trace, out string, f *faults, kv ...string) {
	t.Helper()
	cfg, err := config.ParseDynamic(append([]string{"parallelism.default=4", "execution.checkpointing.interval=20 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms"}, kv...))
	if err != nil {
		t.Fatal(err)
	}
	opts := []stream.Option{stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler))}
	if f != nil {
		opts = append(opts, f.option())
	}
	env, err := stream.NewEnvironment(opts...)
	if err != nil {
		t.Fatal(err)
	}
	src, err := file.Lines(filepath.Join(trace, "part-*.jsonl"), file.BatchLines(64))
	if err != nil {
		t.Fatal(err)
	}
	sinks, err := gm.FileSinks(out)
	if err != nil {
		t.Fatal(err)
	}
	gm.Build(env, src, sinks)
	if err := env.Execute(context.Background(), "gatewaymeter"); err != nil {
		t.Fatal(err)
	}
}

// TestGatewayMeterExactlyOnce generates traces for several seeds, runs the
// job with injected failures of random subtasks under exactly-once
// checkpoints, and diffs every output against the oracle.
func TestGatewayMeterExactlyOnce(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			trace, out := t.TempDir(), t.TempDir()
			cfg := gm.DefaultGenConfig()
			cfg.Seed, cfg.Requests, cfg.Tenants, cfg.BadRate = seed, 4000, 20, 0.002
			cfg.RequestsPerSecond = 20
			if _, err := gm.GenerateFiles(cfg, trace); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(seed, 5))
			// Bounds keep each failure within the records its subtask gets
			// (the keyed operators see fewer than the sources).
			vertices := []struct {
				uid   string
				bound int
			}{{gm.UIDSource, 1500}, {gm.UIDAssemble, 1500}, {gm.UIDTenantCost, 400}}
			f := &faults{}
			for range 2 + r.IntN(2) {
				v := vertices[r.IntN(len(vertices))]
				f.plan = append(f.plan, fault{v.uid, r.IntN(4), int64(r.IntN(v.bound))})
			}
			runJob(t, trace, out, f)
			if f.struck() < 2 {
				t.Fatalf("seed %d: %d of %d failures struck (plan %v)", seed, f.struck(), len(f.plan), f.plan)
			}
			check(t, trace, out)
		})
	}
}

// TestGatewayMeterNoFailures is the same without failures and without
// checkpoints.
func TestGatewayMeterNoFailures(t *testing.T) {
	trace, out := t.TempDir(), t.TempDir()
	cfg := gm.DefaultGenConfig()
	cfg.Requests, cfg.Tenants, cfg.BadRate = 4000, 20, 0.002
	if _, err := gm.GenerateFiles(cfg, trace); err != nil {
		t.Fatal(err)
	}
	runJob(t, trace, out, nil)
	check(t, trace, out)
}

// TestGatewayMeterDeadLetters: the dead letters are exactly the malformed
// lines the generator wrote.
func TestGatewayMeterDeadLetters(t *testing.T) {
	trace, out := t.TempDir(), t.TempDir()
	cfg := gm.DefaultGenConfig()
	cfg.Requests, cfg.BadRate = 3000, 0.05
	m, err := gm.GenerateFiles(cfg, trace)
	if err != nil {
		t.Fatal(err)
	}
	runJob(t, trace, out, &faults{plan: []fault{{gm.UIDSource, 1, 300}}})
	got, err := gm.ReadOutputs(out)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got.DeadLetters)) != m.BadLines || m.BadLines == 0 {
		t.Fatalf("%d dead letters, the generator wrote %d malformed lines", len(got.DeadLetters), m.BadLines)
	}
	check(t, trace, out)
}

func check(t *testing.T, trace, out string) {
	t.Helper()
	want, err := gm.OracleFiles(trace)
	if err != nil {
		t.Fatal(err)
	}
	got, err := gm.ReadOutputs(out)
	if err != nil {
		t.Fatal(err)
	}
	if rep := gm.Diff(want, got); !rep.OK() {
		t.Fatalf("outputs differ from the oracle:\n%s", rep)
	}
	if len(want.TenantCost) == 0 || len(want.ModelLatency) == 0 {
		t.Fatal("the oracle is empty: the trace is too small to test anything")
	}
}
