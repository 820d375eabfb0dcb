package gatewaymeter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/file"
	gm "github.com/weirstream/weir/examples/gatewaymeter"
	"github.com/weirstream/weir/stream"
)

// faults fails, in attempt i, the i-th fault of its plan: the first
// subtask of the fault's vertex (the given subtask, or any if -1) to be
// asked for a batch once it has taken in at least the fault's records in
// that attempt and, for a fault after a checkpoint, once a checkpoint has
// completed in that attempt. With pace set, each batch of a source subtask
// waits that long first, so that checkpoints complete while the input is
// read.
type faults struct {
	pace time.Duration

	mu           sync.Mutex
	plan         []fault
	struck       int
	checkpointed bool     // a checkpoint completed in the current attempt
	log          []string // what struck, in order
	// restored lists the checkpoint each restart restored (0: none, the
	// job started over).
	restored []int64
	// channelState counts the channel state files restores read (records
	// in flight persisted by unaligned checkpoints).
	channelState int
}

type fault struct {
	vertex          string
	subtask         int // -1: any subtask of vertex
	records         int64
	afterCheckpoint bool
}

func (f *faults) fn(_ context.Context, site stream.FaultSite) error {
	if site.Point == stream.FaultRestoreChannels {
		f.mu.Lock()
		f.channelState++
		f.mu.Unlock()
		return nil
	}
	if site.Point != stream.FaultBatch {
		return nil
	}
	task, attempt, records := site.Task, site.Attempt, site.Records
	if f.pace > 0 && task.Vertex == gm.UIDSource {
		time.Sleep(f.pace)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if attempt != f.struck || attempt >= len(f.plan) {
		return nil
	}
	p := f.plan[attempt]
	if p.afterCheckpoint && !f.checkpointed {
		return nil
	}
	if task.Vertex == p.vertex && (p.subtask < 0 || task.Subtask == p.subtask) && records >= p.records {
		f.struck++
		f.checkpointed = false
		f.log = append(f.log, fmt.Sprintf("%s[%d] after %d records", task.Vertex, task.Subtask, records))
		return fmt.Errorf("injected failure %d", f.struck)
	}
	return nil
}

func (f *faults) event(e stream.JobEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch e.Kind {
	case stream.EventCheckpointCompleted:
		f.checkpointed = true
	case stream.EventRestored:
		f.checkpointed = false
		f.restored = append(f.restored, e.Checkpoint)
	}
}

func (f *faults) report() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("%d of %d failures struck: %v (plan %v); restored checkpoints %v, reading %d channel state files", f.struck, len(f.plan), f.log, f.plan, f.restored, f.channelState)
}

func runJob(t *testing.T, trace, out string, f *faults, kv ...string) {
	t.Helper()
	var opts []stream.Option
	if f != nil {
		opts = append(opts, stream.WithFaults(f.fn), stream.WithEvents(f.event))
	}
	runJobWith(t, trace, out, opts, kv...)
}

// runJobWith runs the job as runJob does, with opts added.
func runJobWith(t *testing.T, trace, out string, extra []stream.Option, kv ...string) {
	t.Helper()
	cfg, err := config.ParseDynamic(append([]string{"parallelism.default=4", "execution.checkpointing.interval=20 ms",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=10", "restart-strategy.fixed-delay.delay=0 ms"}, kv...))
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]stream.Option{stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler))}, extra...)
	env, err := stream.NewEnvironment(opts...)
	if err != nil {
		t.Fatal(err)
	}
	src, err := gm.FileSource(trace, file.BatchLines(64))
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

// TestGatewayMeterExactlyOnce generates a trace per seed, runs the job on
// it with two or three injected failures under exactly-once checkpoints,
// and diffs every output against both oracles, whatever struck. The seed
// draws the trace (size, partitions, tenants, rate, spikes, malformed
// lines), the parallelism, the checkpoint interval and the failures: their
// vertex, after how many records, and whether a later one waits for a
// checkpoint of its attempt. The sources are paced so that a run takes
// about a fifth of a second and checkpoints complete while it reads.
//
// The first failure always strikes: its vertex takes in more than its
// threshold on at least one subtask, since the threshold is below that
// vertex's records divided by the parallelism. A later one strikes if its
// vertex gets that many records again after the restore (and a checkpoint
// completes first, if it waits for one), which it almost always does; the
// counts are logged.
func TestGatewayMeterExactlyOnce(t *testing.T) {
	seeds := testSeeds(t, []uint64{1, 2, 3, 4}, 8)
	struck, planned, restarts, fromCheckpoint, channelState, onPebble := 0, 0, 0, 0, 0, 0
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 5))
			pick := func(vs ...int) int { return vs[r.IntN(len(vs))] }
			cfg := gm.DefaultGenConfig()
			cfg.Seed = seed
			cfg.Requests = int64(pick(2000, 3000, 4000))
			cfg.Partitions = pick(3, 8, 8, 13)
			cfg.Tenants = pick(5, 20, 100)
			cfg.RequestsPerSecond = float64(pick(5, 20, 96))
			cfg.SpikeRate = []float64{0.05, 0.3}[r.IntN(2)]
			cfg.BadRate = []float64{0, 0.002, 0.02}[r.IntN(3)]
			parallelism := pick(2, 3, 4, 4)
			interval := pick(10, 20, 50)

			trace, out := t.TempDir(), t.TempDir()
			m, err := gm.GenerateFiles(cfg, trace)
			if err != nil {
				t.Fatal(err)
			}
			var lines, events int64
			for _, p := range m.Partitions {
				lines += p.Lines
				events += p.Events
			}
			// What each vertex takes in over the whole run, at least:
			// every line, every valid event, and every pair of a request
			// with its response (each no-response request and each
			// replaced line leaves at most one event unpaired).
			pairs := (events - m.NoResponse - m.Replaced) / 2
			vertices := []struct {
				uid   string
				total int64
			}{{gm.UIDSource, lines}, {gm.UIDAssemble, events}, {gm.UIDTenantCost, pairs}, {gm.UIDModelLatency, pairs}}
			// A source subtask reads about lines/parallelism lines in
			// batches of 64: pace them to 200 ms.
			f := &faults{pace: 200 * time.Millisecond * time.Duration(64*parallelism) / time.Duration(lines)}
			for i := range 2 + r.IntN(2) {
				v := vertices[r.IntN(len(vertices))]
				bound := v.total / int64(parallelism)
				if i > 0 {
					bound /= 4 // after a restore less is left to read
				}
				f.plan = append(f.plan, fault{vertex: v.uid, subtask: -1, records: 1 + r.Int64N(bound), afterCheckpoint: i > 0 && r.IntN(4) > 0})
			}
			// How barriers align, by seed, so that four seeds run all
			// four: aligned, unaligned, aligned until a timeout of 0
			// (unaligned from the first barrier on, but triggered
			// aligned) and of a few milliseconds.
			mode := alignments[seed%uint64(len(alignments))]
			// The state backend, by seed (so that the fixed seeds run
			// each), or as -gm.backend says.
			be := stateBackends[(seed+seed/4)%uint64(len(stateBackends))]
			if *flagBackend != "" {
				i := slices.IndexFunc(stateBackends, func(b stateBackend) bool { return b.name == *flagBackend })
				if i < 0 {
					t.Fatalf("-gm.backend %q: want one of hashmap, pebble, pebble-incremental", *flagBackend)
				}
				be = stateBackends[i]
			}
			if be.name != "hashmap" {
				onPebble++
			}
			t.Logf("%s\ntrace %+v, parallelism %d, checkpoints every %d ms, %s, state backend %s", reproduce("TestGatewayMeterExactlyOnce", seed), cfg, parallelism, interval, mode.name, be.name)
			kv := append([]string{fmt.Sprint("parallelism.default=", parallelism), fmt.Sprintf("execution.checkpointing.interval=%d ms", interval)}, mode.cfg...)
			runJob(t, trace, out, f, append(kv, be.cfg...)...)
			t.Log(f.report())
			struck, planned, restarts, channelState = struck+f.struck, planned+len(f.plan), restarts+len(f.restored), channelState+f.channelState
			for _, id := range f.restored {
				if id != 0 {
					fromCheckpoint++
				}
			}
			check(t, trace, out)
			if f.struck == 0 {
				t.Fatalf("%s\nthe first failure never struck: %s", reproduce("TestGatewayMeterExactlyOnce", seed), f.report())
			}
		})
	}
	t.Logf("%d of %d planned failures struck over %d seeds; %d of %d restarts restored a checkpoint, reading %d channel state files", struck, planned, len(seeds), fromCheckpoint, restarts, channelState)
	if len(seeds) >= 4 && fromCheckpoint == 0 {
		t.Fatal("no restart restored a checkpoint: the runs test recovery from the beginning only")
	}
	if len(seeds) >= 4 && channelState == 0 {
		t.Fatal("no restore read channel state: the unaligned runs test no replay of records in flight")
	}
	if len(seeds) >= 4 && *flagBackend == "" && onPebble == 0 {
		t.Fatal("no seed ran on the pebble backend")
	}
}

// stateBackend is a state backend the exactly-once test runs on.
type stateBackend struct {
	name string
	cfg  []string
}

var stateBackends = []stateBackend{
	{"hashmap", []string{"state.backend.type=hashmap"}},
	{"pebble", []string{"state.backend.type=pebble"}},
	{"pebble-incremental", []string{"state.backend.type=pebble", "execution.checkpointing.incremental=true"}},
}

// alignments are the ways barriers align that the exactly-once tests
// run.
var alignments = []struct {
	name string
	cfg  []string
}{
	{"aligned checkpoints", nil},
	{"unaligned checkpoints", []string{"execution.checkpointing.unaligned.enabled=true"}},
	{"aligned-checkpoint-timeout 0", []string{"execution.checkpointing.unaligned.enabled=true", "execution.checkpointing.aligned-checkpoint-timeout=0 ms"}},
	{"aligned-checkpoint-timeout 3 ms", []string{"execution.checkpointing.unaligned.enabled=true", "execution.checkpointing.aligned-checkpoint-timeout=3 ms"}},
}

// TestGatewayMeterNoFailures is the same without failures.
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
	runJob(t, trace, out, &faults{plan: []fault{{vertex: gm.UIDSource, subtask: 1, records: 300}}})
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
