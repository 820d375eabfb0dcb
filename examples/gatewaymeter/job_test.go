package gatewaymeter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/file"
	gm "github.com/weirstream/weir/examples/gatewaymeter"
	"github.com/weirstream/weir/stream"
)

// faults fails, in attempt i, subtask (vertex, subtask) once it processed
// records records.
type faults struct {
	mu     sync.Mutex
	plan   []fault
	struck int
}

type fault struct {
	vertex  string
	subtask int
	records int64
}

func (f *faults) fn(task stream.TaskInfo, attempt int, records int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if attempt != f.struck || attempt >= len(f.plan) {
		return nil
	}
	p := f.plan[attempt]
	if task.Vertex == p.vertex && task.Subtask == p.subtask && records >= p.records {
		f.struck++
		return fmt.Errorf("injected failure %d", f.struck)
	}
	return nil
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
		opts = append(opts, stream.WithFaults(f.fn))
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
			if f.struck < 2 {
				t.Fatalf("seed %d: %d of %d failures struck (plan %v)", seed, f.struck, len(f.plan), f.plan)
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

// check diffs the run's outputs in out against the package's oracle and
// against the independent one, over the trace in trace.
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
	spec, err := specOracle(readTrace(t, trace), specDefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if d := specDiff(spec.out, got); len(d) > 0 {
		t.Fatalf("outputs differ from the independent oracle:\n%s", specReport(d))
	}
	if len(want.TenantCost) == 0 || len(want.ModelLatency) == 0 {
		t.Fatal("the oracle is empty: the trace is too small to test anything")
	}
}

// TestGatewayMeterHandTrace runs the job over the hand-computed trace:
// unknown fields (one holding a "ts" far in the future), a malformed line
// with a ts far in the future on each partition, CRLF line ends, a window's
// exact end, the alert rule's bounds.
func TestGatewayMeterHandTrace(t *testing.T) {
	trace, out := t.TempDir(), t.TempDir()
	parts := handTrace()
	writeTrace(t, trace, parts)
	runJob(t, trace, out, nil)
	got, err := gm.ReadOutputs(out)
	if err != nil {
		t.Fatal(err)
	}
	if d := specDiff(handExpected(parts), got); len(d) > 0 {
		t.Fatalf("outputs differ from the hand-computed ones:\n%s", specReport(d))
	}
	check(t, trace, out)
}

// TestGatewayMeterEventTimeIsTheEventsTS: a line's event time is its
// event's ts. The ts of a malformed line, or a "ts" nested in an unknown
// field of a valid line, is not event time: were it taken for it, here on
// every partition, the watermark would jump ahead, later windows would get
// their records late and the held requests would be orphaned by their
// timers.
func TestGatewayMeterEventTimeIsTheEventsTS(t *testing.T) {
	const far = 1_999_999_999_999
	for _, tc := range []struct {
		name string
		line func(p int, ts int64) string
	}{
		{"malformed", func(p int, _ int64) string {
			return fmt.Sprintf(`{"type":"heartbeat","request_id":"hb%d","ts":%d}`, p, int64(far))
		}},
		{"nested", func(p int, ts int64) string {
			return fmt.Sprintf(`{"type":"request","trace":{"ts":%d},"request_id":"x%d","tenant_id":"acme","model":"small","ts":%d,"input_tokens":1}`, int64(far), p, ts)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gm.DefaultGenConfig()
			cfg.Requests, cfg.Partitions, cfg.Tenants = 2000, 2, 5
			parts := generateBytes(t, cfg)
			for p := range parts {
				// After the tenth line, with its ts: within the disorder
				// bound.
				ls := bytes.SplitAfter(parts[p], []byte("\n"))
				var prev struct{ TS int64 }
				if err := json.Unmarshal(ls[9], &prev); err != nil {
					t.Fatal(err)
				}
				ls = slices.Insert(ls, 10, []byte(tc.line(p, prev.TS)+"\n"))
				parts[p] = bytes.Join(ls, nil)
			}
			trace, out := t.TempDir(), t.TempDir()
			writeTrace(t, trace, parts)
			// One source subtask per partition: a subtask without a split
			// would hold event time back until the end of the input.
			runJob(t, trace, out, nil, "parallelism.default=2")
			check(t, trace, out)
		})
	}
}
