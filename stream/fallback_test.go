package stream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// flipStateFiles flips one byte in the middle of every state file of
// checkpoint id of job under dir, their sizes unchanged (only their
// checksums tell), and returns how many it flipped.
func flipStateFiles(dir, job string, id int64) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, job, fmt.Sprintf("chk-%d", id), "*"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "_metadata" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue // discarded meanwhile, or empty
		}
		b[len(b)/2] ^= 0x01
		// Replaced whole, so that a reader meanwhile sees the old bytes
		// or the flipped ones, never a file being rewritten.
		tmp := f + ".flip"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return n, err
		}
		if err := os.Rename(tmp, f); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// TestRunningJobFallsBackPastAFlippedStateFile fails a running job once
// two checkpoints have completed, and flips a byte in every state file of
// the checkpoint it restores, at the moment the restore reads it: the
// restore finds the damage, and the job drops that checkpoint and
// restores the one before it, every subtask of it, instead of failing
// (which restoring the damaged one again would do for ever). The
// transactions of the dropped checkpoint had committed: a sink that
// undoes them on the restore (the file sink, a reconciling collector)
// gives every record's sum exactly once; with a sink that cannot, the job
// fails and says why; with one retained checkpoint there is nothing to
// fall back to, and the job fails and says so.
func TestRunningJobFallsBackPastAFlippedStateFile(t *testing.T) {
	const partitions, perPartition, keys = 2, 3000, 50
	gen := func(p int, seq int64) rec {
		return rec{Key: fmt.Sprintf("k%02d", datagen.Mix(5, p, seq)%keys), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
	}
	var input []rec
	for p := range partitions {
		for seq := range int64(perPartition) {
			input = append(input, gen(p, seq))
		}
	}
	run := func(t *testing.T, sink connector.Sink[KeyedSum], retained int) (flipped int64, ev *streamtest.Events, err error) {
		dir := t.TempDir()
		ev = streamtest.NewEvents()
		faults := streamtest.NewFaults()
		env, err := stream.NewEnvironment(stream.WithConfig(mustConfig(t, "parallelism.default=2", "execution.checkpointing.interval=10 ms",
			"execution.checkpointing.dir="+dir, fmt.Sprintf("execution.checkpointing.num-retained=%d", retained),
			// Every state a file of its own, so that the flip is seen.
			"execution.checkpointing.data-inline-threshold=0",
			"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms")),
			stream.WithLogger(quiet), stream.WithJobID("fallback"), stream.WithEvents(ev.Record), faults.Option())
		if err != nil {
			t.Fatal(err)
		}
		// A second of input per partition: two checkpoints complete, and
		// the crash strikes, before it ends even on a loaded machine.
		src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(20), datagen.RatePerSecond(3_000))
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
		stream.SinkTo(sums, sink, stream.Uid("sink"))

		crash := faults.Add(stream.FaultBatch, streamtest.Fail(nil), streamtest.OnSubtask(0), streamtest.When(func(stream.FaultSite) bool {
			return ev.Count(stream.EventCheckpointCompleted) >= 2
		}))
		flip := faults.Add(stream.FaultRestore, streamtest.Call(func(_ context.Context, site stream.FaultSite) error {
			n, err := flipStateFiles(dir, "fallback", site.Checkpoint)
			if err == nil && n == 0 {
				err = fmt.Errorf("checkpoint %d has no state file to flip", site.Checkpoint)
			}
			flipped = site.Checkpoint
			return err
		}))
		err = env.Execute(context.Background(), "fallback")
		if !crash.Fired() || !flip.Fired() {
			t.Fatalf("the failure struck: %v, the flip: %v; the test shows nothing", crash.Fired(), flip.Fired())
		}
		return flipped, ev, err
	}
	checkFellBack := func(t *testing.T, flipped int64, ev *streamtest.Events) {
		t.Helper()
		restored := ev.Of(stream.EventRestored)
		if len(restored) < 2 {
			t.Fatalf("restores %+v: want the damaged checkpoint %d's, then an older one's", restored, flipped)
		}
		if got := restored[len(restored)-1].Checkpoint; got >= flipped || got <= 0 {
			t.Fatalf("the job last restored checkpoint %d, want one older than the damaged %d", got, flipped)
		}
	}

	t.Run("file sink", func(t *testing.T) {
		out := t.TempDir()
		sink, err := file.JSONLines[KeyedSum](out)
		if err != nil {
			t.Fatal(err)
		}
		flipped, ev, err := run(t, sink, 3)
		if err != nil {
			t.Fatalf("the job failed instead of falling back past damaged checkpoint %d: %v", flipped, err)
		}
		checkFellBack(t, flipped, ev)
		got, err := file.ReadJSONLines[KeyedSum](out)
		if err != nil {
			t.Fatal(err)
		}
		if err := verifySums(got, input, func(int) bool { return true }); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("reconciling collector", func(t *testing.T) {
		sink := streamtest.NewReconcilingCollector[KeyedSum]()
		flipped, ev, err := run(t, sink, 2)
		if err != nil {
			t.Fatalf("the job failed instead of falling back past damaged checkpoint %d: %v", flipped, err)
		}
		checkFellBack(t, flipped, ev)
		if err := verifySums(sink.Results(), input, func(int) bool { return true }); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("sink that cannot undo", func(t *testing.T) {
		flipped, _, err := run(t, streamtest.NewCollector[KeyedSum](true), 3)
		if err == nil || !strings.Contains(err.Error(), "sink sink cannot undo") || !strings.Contains(err.Error(), fmt.Sprint("checkpoints ", flipped, " completed")) {
			t.Fatalf("falling back past damaged checkpoint %d with a sink that cannot undo its commits: %v, want a refusal that names both", flipped, err)
		}
	})
	t.Run("nothing older retained", func(t *testing.T) {
		flipped, _, err := run(t, streamtest.NewReconcilingCollector[KeyedSum](), 1)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("checkpoint %d does not verify and no older completed checkpoint is retained", flipped)) {
			t.Fatalf("damaged checkpoint %d, the only one retained: %v, want a failure that says so", flipped, err)
		}
	})
}
