package file_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/internal/runtime"
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
			var completed, restored atomic.Int32
			// Fail each of the first two attempts once it has read
			// something, after a checkpoint if there are any.
			faults := streamtest.NewFaults()
			var injected []*streamtest.Fault
			for attempt := range 2 {
				injected = append(injected, faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnVertex("traces"),
					streamtest.AfterRecords(1001), streamtest.InAttempt(attempt),
					streamtest.When(func(stream.FaultSite) bool { return !checkpointing || completed.Load() > int32(attempt) })))
			}
			env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)),
				stream.WithEvents(func(e stream.JobEvent) {
					switch {
					case e.Kind == runtime.EventCheckpointCompleted:
						completed.Add(1)
					case e.Kind == runtime.EventRestored && e.Checkpoint > 0:
						restored.Add(1)
					}
				}),
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
			t.Logf("%d checkpoints completed, %d restores from a checkpoint", completed.Load(), restored.Load())
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
