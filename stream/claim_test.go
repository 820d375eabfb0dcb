package stream_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestResumeDoesNotClaim resumes a job from its own checkpoint directory,
// under the same job id, and cancels it with DELETE_ON_CANCELLATION: the
// resumed run deletes its own checkpoints but not the one it restored,
// which it does not own (NO_CLAIM).
func TestResumeDoesNotClaim(t *testing.T) {
	sink := streamtest.NewCollector[KeyedSum](true)
	build := func(env *stream.Environment) {
		gen := func(p int, seq int64) rec {
			return rec{Key: fmt.Sprintf("k%d", seq%50), Value: seq, P: p, Seq: seq}
		}
		src, _ := datagen.New(gen, datagen.Partitions(2), datagen.Count(100_000), datagen.BatchSize(10), datagen.RatePerSecond(2000))
		in := stream.FromSource(env, src, "numbers", stream.NoWatermarks[rec]())
		sums := stream.Process(stream.KeyBy(in, func(r rec) string { return r.Key }), stream.KeyedProcessFunction[string, rec, KeyedSum](&runningSum{}), stream.Uid("sum"))
		stream.SinkTo(sums, sink, stream.Uid("sink"))
	}
	common := streamtest.Config("parallelism.default=2", "execution.checkpointing.interval=10 ms")
	first := streamtest.Run(t, build, common, streamtest.JobID("same"), streamtest.UntilCheckpoints(3), streamtest.Timeout(time.Minute))
	if !first.Canceled {
		t.Fatalf("the first run ended before it was canceled: %v", first.Err)
	}
	ids := first.Checkpoints()
	if len(ids) == 0 {
		t.Fatal("the first run retained no checkpoint")
	}
	restored := ids[len(ids)-1]
	second := streamtest.Run(t, build, common, streamtest.ResumeFrom(first), streamtest.JobID("same"), streamtest.Dir(first.Dir),
		streamtest.Config("execution.checkpointing.externalized-checkpoint-retention=DELETE_ON_CANCELLATION"),
		streamtest.UntilCheckpoints(3), streamtest.Timeout(time.Minute))
	if !second.Canceled {
		t.Fatalf("the second run ended before it was canceled: %v", second.Err)
	}
	if r, _ := second.Events.Last(stream.EventRestored); r.Checkpoint != restored {
		t.Fatalf("the second run restored checkpoint %d, want %d", r.Checkpoint, restored)
	}
	if got := second.Checkpoints(); len(got) != 1 || got[0] != restored {
		t.Errorf("after the second run's cancel the job directory holds checkpoints %v, want only the restored %d", got, restored)
	}
	if _, err := os.Stat(second.CheckpointDir(restored)); err != nil {
		t.Errorf("the restored checkpoint: %v", err)
	}
}
