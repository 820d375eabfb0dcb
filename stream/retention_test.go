package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestRetentionSurvivesFailedDiscards runs a job whose checkpoint storage
// fails deletes now and then, so that some subsumed checkpoints' discards
// fail half-way: the job retries them, and once it has finished its
// directory holds exactly the num-retained newest checkpoints and the
// files they name, and the output holds every record's sum exactly once.
// Each seed fails a different delete, once or a few times in a row; odd
// seeds fail the deletes of _metadata files, which leave a checkpoint
// complete, even ones any file's.
func TestRetentionSurvivesFailedDiscards(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 17))
			sink := streamtest.NewCollector[KeyedSum](true)
			j := newClaimJob(sink)
			j.perPartition = 3000
			fs := streamtest.NewFaults()
			on, times := 1+r.IntN(40), 1+r.IntN(3)
			opts := []streamtest.FaultOption{streamtest.OnCall(on), streamtest.Times(times)}
			if seed%2 == 1 {
				// A checkpoint whose _metadata stays is still complete:
				// only a retried discard removes it.
				opts = append(opts, streamtest.OnPath("_metadata"))
				on = 1 + r.IntN(8)
				opts[0] = streamtest.OnCall(on)
			}
			f := fs.Add(stream.FaultStorageDelete, streamtest.Fail(nil), opts...)
			res := streamtest.Run(t, j.build, claimCommon(), streamtest.JobID("job"), streamtest.WithFaults(fs),
				streamtest.Config("execution.checkpointing.num-retained=2"), streamtest.Timeout(time.Minute))
			if res.Err != nil {
				t.Fatalf("seed %d: %v", seed, res.Err)
			}
			if !f.Fired() {
				t.Fatalf("seed %d: no delete failed (the %dth never came): make the input longer", seed, on)
			}
			retained := checkOnlyRetained(t, res.Dir, "job")
			if len(retained["job"]) != 2 {
				t.Fatalf("seed %d: retained %v after %d failed deletes from the %dth, want the 2 newest", seed, retained, f.Count(), on)
			}
			j.check(t, sink.Results())
		})
	}
}

// TestResumeNeedsCheckpointing: a job given a checkpoint to resume from
// and no checkpoint interval fails before it runs, saying so, rather than
// ignoring the path and starting over from nothing.
func TestResumeNeedsCheckpointing(t *testing.T) {
	sink := streamtest.NewCollector[KeyedSum](true)
	j := newClaimJob(sink)
	first := streamtest.Run(t, j.build, claimCommon(), streamtest.JobID("first"), streamtest.UntilCheckpoints(2), streamtest.Timeout(time.Minute))
	ids := first.Checkpoints()
	if len(ids) == 0 {
		t.Fatal("the first run retained no checkpoint")
	}
	cfg := mustConfig(t, "execution.checkpointing.dir="+first.Dir, "execution.state-recovery.path="+first.CheckpointDir(ids[len(ids)-1]))
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	sink = streamtest.NewCollector[KeyedSum](true)
	newClaimJob(sink).build(env)
	err = env.Execute(context.Background(), "no-interval")
	if err == nil || !strings.Contains(err.Error(), "execution.state-recovery.path") || !strings.Contains(err.Error(), "execution.checkpointing.interval") {
		t.Fatalf("Execute = %v, want a refusal naming execution.state-recovery.path and execution.checkpointing.interval", err)
	}
	if n := len(sink.Results()); n != 0 {
		t.Fatalf("the refused job wrote %d records", n)
	}
}

// TestResumeFromOlderCheckpointKeepsNewerOnes resumes a job, under the
// same job id and in the same directory, from the oldest of the
// checkpoints it retained: the resumed run's checkpoints take ids above
// every checkpoint in the directory, so the newer retained ones stay as
// they were: no checkpoint is written into another's directory.
func TestResumeFromOlderCheckpointKeepsNewerOnes(t *testing.T) {
	sink := streamtest.NewCollector[KeyedSum](true)
	j := newClaimJob(sink)
	first := streamtest.Run(t, j.build, claimCommon(), streamtest.JobID("job"),
		streamtest.Config("execution.checkpointing.num-retained=3"), streamtest.UntilCheckpoints(5), streamtest.Timeout(time.Minute))
	ids := first.Checkpoints()
	if len(ids) != 3 {
		t.Fatalf("the first run retained %v, want 3 checkpoints", ids)
	}
	oldest, newest := ids[0], ids[len(ids)-1]
	before := map[int64]map[string][32]byte{}
	for _, id := range ids[1:] {
		before[id] = snapshotFiles(t, first, id)
	}
	second := streamtest.Run(t, j.build, claimCommon(), streamtest.JobID("job"), streamtest.Dir(first.Dir),
		streamtest.Config("execution.state-recovery.path="+first.CheckpointDir(oldest), "execution.checkpointing.num-retained=3",
			"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION"),
		streamtest.UntilCheckpoints(4), streamtest.Timeout(time.Minute))
	for _, ev := range second.Events.Of(stream.EventCheckpointCompleted) {
		if ev.Checkpoint <= newest {
			t.Fatalf("the resumed run completed checkpoint %d, not above the directory's newest %d", ev.Checkpoint, newest)
		}
	}
	if len(second.Events.Of(stream.EventCheckpointCompleted)) == 0 {
		t.Fatalf("the resumed run completed no checkpoint (%v)", second.Err)
	}
	for id, files := range before {
		checkUntouched(t, first, files, fmt.Sprintf("checkpoint %d after the resumed run", id))
	}
}
