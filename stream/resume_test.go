package stream_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/mini"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestResumeSkipsCorruptCheckpoint stops a job after a few checkpoints
// (retained on cancellation), corrupts the newest checkpoint's _metadata,
// and resumes from the job's checkpoint directory: the corrupt checkpoint
// is detected and skipped for the previous one, and the resumed job ends
// with the state of a run without failures.
func TestResumeSkipsCorruptCheckpoint(t *testing.T) {
	dir := t.TempDir()
	const partitions, perPartition = 2, 4000
	gen := func(p int, seq int64) rec {
		return rec{Key: fmt.Sprintf("k%d", datagen.Mix(3, p, seq)%7), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
	}
	// One sink for both runs: the external system outlives the job.
	sink := streamtest.NewCollector[KeyedSum](true)
	build := func(env *stream.Environment) {
		src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(20), datagen.RatePerSecond(20_000))
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
		stream.SinkTo(sums, sink, stream.Uid("sink"))
	}
	common := []string{"parallelism.default=2", "execution.checkpointing.interval=10 ms", "execution.checkpointing.dir=" + dir,
		"execution.checkpointing.num-retained=3", "execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION"}

	// First run: canceled once checkpoint 4 completed.
	ctx, cancel := context.WithCancel(context.Background())
	var completed atomic.Int64
	env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, common...)), stream.WithLogger(quiet), stream.WithJobID("first"),
		stream.WithEvents(func(e stream.JobEvent) {
			if e.Kind == runtime.EventCheckpointCompleted && completed.Add(1) == 4 {
				cancel()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	build(env)
	if err := env.Execute(ctx, "first"); err == nil {
		t.Fatal("the first run finished before it was canceled: make the input longer")
	}
	var ids []int
	entries, _ := os.ReadDir(filepath.Join(dir, "first"))
	for _, e := range entries {
		if n, ok := strings.CutPrefix(e.Name(), "chk-"); ok {
			id, _ := strconv.Atoi(n)
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if len(ids) < 2 {
		t.Fatalf("retained checkpoints %v, want at least 2", ids)
	}
	newest, previous := ids[len(ids)-1], ids[len(ids)-2]
	md := filepath.Join(dir, "first", fmt.Sprintf("chk-%d", newest), "_metadata")
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-10] ^= 0x40
	if err := os.WriteFile(md, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// Second run: resumes from the job directory.
	var ev events
	env, err = stream.NewEnvironment(stream.WithConfig(mustConfig(t, append(common, "execution.state-recovery.path="+filepath.Join(dir, "first"))...)),
		stream.WithLogger(quiet), stream.WithJobID("second"), stream.WithEvents(ev.add))
	if err != nil {
		t.Fatal(err)
	}
	build(env)
	if err := env.Execute(context.Background(), "second"); err != nil {
		t.Fatal(err)
	}
	restored := ev.of(runtime.EventRestored)
	if len(restored) != 1 || restored[0].Checkpoint != int64(previous) {
		t.Fatalf("restored %+v, want checkpoint %d (the newest, %d, is corrupt)", restored, previous, newest)
	}
	var all []mini.Element
	for p := range partitions {
		for seq := range int64(perPartition) {
			x := gen(p, seq)
			all = append(all, mini.Event{Key: x.Key, Value: x.Value})
		}
	}
	want := mini.Fold(all, mini.ByKey, len(all))
	got := map[string]int64{}
	for _, s := range sink.Results() {
		got[s.Key] = max(got[s.Key], s.Sum)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("final sums after resuming %v, oracle %v", got, want)
	}
}
