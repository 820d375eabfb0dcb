package stream_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/connector/file"
	"github.com/weirstream/weir/mini"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestResumeSkipsCorruptCheckpoint stops a job after a few checkpoints
// (retained on cancellation), corrupts the two newest checkpoints' _metadata,
// and resumes from the job's checkpoint directory. The corrupt checkpoint
// is detected and skipped for the previous one. Its transactions had
// committed, so the replay writes their records again: a file sink undoes
// those commits when it is restored and the output holds every record's
// sum exactly once; a sink that cannot undo them makes the resume fail
// unless execution.state-recovery.allow-duplicate-output is set.
func TestResumeSkipsCorruptCheckpoint(t *testing.T) {
	const partitions, perPartition = 2, 4000
	gen := func(p int, seq int64) rec {
		return rec{Key: fmt.Sprintf("k%d", datagen.Mix(3, p, seq)%7), Value: int64(p) + 2*seq + 1, P: p, Seq: seq}
	}
	// oracle: each record's running sum of its key, in per-partition order
	// (the job's keyed state is per key; partitions interleave, so only
	// the final sum per key and, per record, membership are fixed).
	var all []mini.Element
	for p := range partitions {
		for seq := range int64(perPartition) {
			x := gen(p, seq)
			all = append(all, mini.Event{Key: x.Key, Value: x.Value})
		}
	}
	finals := mini.Fold(all, mini.ByKey, len(all))

	// run stops a first job after four checkpoints, corrupts its newest
	// checkpoint, and resumes it with extra options; sink is shared by
	// both runs, as an external system outlives the job.
	run := func(t *testing.T, sink connector.Sink[KeyedSum], extra ...string) (int64, error) {
		// The first run reads slowly (two seconds for the input), so that
		// it is canceled after its checkpoints whatever the machine's
		// load; the resumed run reads as fast as it can.
		rate := float64(2000)
		build := func(env *stream.Environment) {
			src, _ := datagen.New(gen, datagen.Partitions(partitions), datagen.Count(perPartition), datagen.BatchSize(20), datagen.RatePerSecond(rate))
			in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
			sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
			stream.SinkTo(sums, sink, stream.Uid("sink"))
		}
		common := streamtest.Config("parallelism.default=2", "execution.checkpointing.interval=10 ms", "execution.checkpointing.num-retained=3")
		first := streamtest.Run(t, build, common, streamtest.JobID("first"), streamtest.UntilCheckpoints(5))
		if !first.Canceled {
			t.Fatalf("the first run ended before it was canceled (%v): make the input longer", first.Err)
		}
		rate = 0
		ids := first.Checkpoints()
		if len(ids) < 3 {
			t.Fatalf("retained completed checkpoints %v, want at least 3", ids)
		}
		// The two newest: the sink had surely committed the older one's
		// transactions when the job was canceled.
		newest, previous := ids[len(ids)-1], ids[len(ids)-3]
		for _, id := range ids[len(ids)-2:] {
			md := filepath.Join(first.CheckpointDir(id), "_metadata")
			b, err := os.ReadFile(md)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)-10] ^= 0x40
			if err := os.WriteFile(md, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		second := streamtest.Run(t, build, common, streamtest.Config(extra...), streamtest.ResumeFrom(first), streamtest.JobID("second"))
		if second.Err != nil {
			return newest, second.Err
		}
		restored := second.Events.Of(stream.EventRestored)
		if len(restored) != 1 || restored[0].Checkpoint != previous {
			t.Fatalf("restored %+v, want checkpoint %d (the two newest, up to %d, are corrupt)", restored, previous, newest)
		}
		return newest, nil
	}
	// check compares the output with the oracle: the final sum of every
	// key, and every input record's sum present once (or at least once).
	check := func(t *testing.T, out []KeyedSum, exactlyOnce bool) (dups int) {
		t.Helper()
		got := map[string]int64{}
		seen := map[[2]int64]int{}
		for _, s := range out {
			got[s.Key] = max(got[s.Key], s.Sum)
			seen[[2]int64{int64(s.P), s.Seq}]++
		}
		if !maps.Equal(got, finals) {
			t.Fatalf("final sums after resuming %v, oracle %v", got, finals)
		}
		for p := range partitions {
			for seq := range int64(perPartition) {
				n := seen[[2]int64{int64(p), seq}]
				switch {
				case n == 0:
					t.Fatalf("record %d/%d has no output", p, seq)
				case n > 1 && exactlyOnce:
					t.Fatalf("record %d/%d has %d outputs, want exactly one", p, seq, n)
				}
				dups += n - 1
			}
		}
		return dups
	}

	t.Run("file sink reconciles", func(t *testing.T) {
		out := t.TempDir()
		sink, err := file.JSONLines[KeyedSum](out)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run(t, sink); err != nil {
			t.Fatal(err)
		}
		got, err := file.ReadJSONLines[KeyedSum](out)
		if err != nil {
			t.Fatal(err)
		}
		check(t, got, true)
	})
	t.Run("sink that cannot undo refuses", func(t *testing.T) {
		sink := streamtest.NewCollector[KeyedSum](true)
		newest, err := run(t, sink)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("checkpoints %d, %d completed but do not verify", newest, newest-1)) ||
			!strings.Contains(err.Error(), "sink sink cannot undo") {
			t.Fatalf("resuming past a corrupt checkpoint with a sink that cannot undo commits: %v, want a refusal", err)
		}
	})
	t.Run("sink that cannot undo, duplicates accepted", func(t *testing.T) {
		sink := streamtest.NewCollector[KeyedSum](true)
		if _, err := run(t, sink, "execution.state-recovery.allow-duplicate-output=true"); err != nil {
			t.Fatal(err)
		}
		if dups := check(t, sink.Results(), false); dups == 0 {
			t.Fatal("no record was written twice: the corrupt checkpoint committed nothing, so this test shows nothing")
		}
	})
}
