package file_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

type cost struct {
	Tenant string `json:"tenant"`
	Cost   int    `json:"cost"`
}

// traceFiles writes files of JSON lines with some malformed lines among
// them and returns the valid records.
func traceFiles(t *testing.T, dir string, files, lines int) []cost {
	var want []cost
	contents := map[string]string{}
	for f := range files {
		var b strings.Builder
		for i := range lines {
			if i%97 == 13 {
				b.WriteString("{not json\n")
				continue
			}
			c := cost{Tenant: fmt.Sprintf("t%d", i%7), Cost: f*1_000_000 + i}
			want = append(want, c)
			j, _ := json.Marshal(c)
			b.Write(j)
			b.WriteByte('\n')
		}
		contents[fmt.Sprintf("part-%05d.jsonl", f)] = b.String()
	}
	writeFiles(t, dir, contents)
	return want
}

func sortCosts(cs []cost) {
	slices.SortFunc(cs, func(a, b cost) int { return a.Cost - b.Cost })
}

// TestJobExactlyOnceThroughFailures runs files → parse → rebalance →
// exactly-once file sink on the engine, fails the source twice, and
// checks that the committed output holds every valid record once.
func TestJobExactlyOnceThroughFailures(t *testing.T) {
	for _, checkpointing := range []bool{true, false} {
		t.Run(fmt.Sprint("checkpointing=", checkpointing), func(t *testing.T) {
			in, out := t.TempDir(), t.TempDir()
			want := traceFiles(t, in, 4, 5000)
			kv := []string{"parallelism.default=2", "restart-strategy.type=fixed-delay",
				"restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms"}
			if checkpointing {
				kv = append(kv, "execution.checkpointing.interval=10 ms")
			}
			cfg, err := config.ParseDynamic(kv)
			if err != nil {
				t.Fatal(err)
			}
			var ev streamtest.Events
			// Fail each of the first two attempts once it has read
			// something, after a checkpoint if there are any.
			faults := streamtest.NewFaults()
			var injected []*streamtest.Fault
			for attempt := range 2 {
				injected = append(injected, faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("traces"),
					streamtest.AfterRecords(1001), streamtest.InAttempt(attempt),
					streamtest.When(func(stream.FaultSite) bool {
						return !checkpointing || ev.Count(stream.EventCheckpointCompleted) > attempt
					})))
			}
			env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)),
				ev.Option(),
				faults.Option())
			if err != nil {
				t.Fatal(err)
			}
			src, err := file.Lines(in, file.BatchLines(100))
			if err != nil {
				t.Fatal(err)
			}
			sink, err := file.JSONLines[cost](out)
			if err != nil {
				t.Fatal(err)
			}
			lines := stream.FromSource(env, src, "traces", stream.NoWatermarks[file.Line]())
			costs := stream.FlatMap(lines, func(l file.Line, emit func(cost)) error {
				var c cost
				if json.Unmarshal(l.Text, &c) == nil { // a job would send the rest to a dead-letter output
					emit(c)
				}
				return nil
			})
			stream.SinkTo(stream.Rebalance(costs), sink, stream.Uid("costs"))
			if err := env.Execute(ctx, "bill"); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d checkpoints completed, %d restores from a checkpoint", ev.Count(stream.EventCheckpointCompleted), len(ev.Restores()))
			if !injected[0].Fired() || !injected[1].Fired() {
				t.Fatalf("not both failures struck: %s", faults)
			}
			got, err := file.ReadJSONLines[cost](out)
			if err != nil {
				t.Fatal(err)
			}
			sortCosts(got)
			sortCosts(want)
			if !slices.Equal(got, want) {
				t.Fatalf("%d records committed, want %d", len(got), len(want))
			}
		})
	}
}

// TestJobExactlyOnceUnderCommitFaults runs the job of
// TestJobExactlyOnceThroughFailures with faults around the file sink's
// commit and its checkpoints: a commit that fails before it takes effect,
// one that takes effect and then fails (the commit after the restore
// finds it done), the same for the commit of the restored checkpoint in
// Open, and failures of the sink right after it acknowledged a checkpoint
// or inside its synchronous snapshot (the sink is chained to the
// rebalance, the head of its vertex). The committed output must hold
// every valid record once.
func TestJobExactlyOnceUnderCommitFaults(t *testing.T) {
	fail := streamtest.Fail(nil)
	for _, tc := range []struct {
		name string
		add  func(fs *streamtest.Faults) []*streamtest.Fault
	}{
		{"commit-before", func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultCommit, fail, streamtest.OnOperator("costs"), streamtest.OnCall(2))}
		}},
		{"commit-after", func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultCommitted, fail, streamtest.OnOperator("costs"), streamtest.OnCall(2))}
		}},
		{"commit-after-twice", func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{
				fs.Add(stream.FaultCommitted, fail, streamtest.OnOperator("costs"), streamtest.OnSubtask(1), streamtest.OnCall(2)),
				fs.Add(stream.FaultCommitted, fail, streamtest.OnOperator("costs"), streamtest.OnSubtask(1), streamtest.AfterRestore()),
			}
		}},
		{"after-ack", func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultAsync, fail, streamtest.OnVertex("rebalance"), streamtest.OnCall(3),
				streamtest.When(func(s stream.FaultSite) bool { return s.Step == s.Steps-1 }))}
		}},
		{"sync", func(fs *streamtest.Faults) []*streamtest.Fault {
			return []*streamtest.Fault{fs.Add(stream.FaultSync, fail, streamtest.OnVertex("rebalance"), streamtest.AtStep(1), streamtest.OnCall(3))}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out := t.TempDir(), t.TempDir()
			want := traceFiles(t, in, 4, 3000)
			cfg, err := config.ParseDynamic([]string{"parallelism.default=2", "execution.checkpointing.interval=10 ms",
				"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms"})
			if err != nil {
				t.Fatal(err)
			}
			faults := streamtest.NewFaults()
			injected := tc.add(faults)
			// Paces the source, so that the sink commits many times.
			faults.Add(stream.FaultBatch, streamtest.Delay(time.Millisecond), streamtest.OnVertex("traces"), streamtest.Always())
			env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)), faults.Option())
			if err != nil {
				t.Fatal(err)
			}
			src, err := file.Lines(in, file.BatchLines(50))
			if err != nil {
				t.Fatal(err)
			}
			sink, err := file.JSONLines[cost](out)
			if err != nil {
				t.Fatal(err)
			}
			lines := stream.FromSource(env, src, "traces", stream.NoWatermarks[file.Line]())
			costs := stream.FlatMap(lines, func(l file.Line, emit func(cost)) error {
				var c cost
				if json.Unmarshal(l.Text, &c) == nil {
					emit(c)
				}
				return nil
			})
			stream.SinkTo(stream.Rebalance(costs, stream.Uid("rebalance")), sink, stream.Uid("costs"))
			if err := env.Execute(t.Context(), "bill"); err != nil {
				t.Fatalf("faults %s: %v", faults, err)
			}
			for _, f := range injected {
				if !f.Fired() {
					t.Fatalf("fault %s did not strike; faults: %s", f, faults)
				}
			}
			got, err := file.ReadJSONLines[cost](out)
			if err != nil {
				t.Fatal(err)
			}
			sortCosts(got)
			sortCosts(want)
			if !slices.Equal(got, want) {
				t.Fatalf("faults %s: %d records committed, want %d", faults, len(got), len(want))
			}
		})
	}
}
